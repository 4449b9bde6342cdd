"""The mixture search: its config (targets the runs measure, baselines, names that do not collide,
a proxy config the trainer takes), proxy names as the hash of what a run is made from, the
validation's comparisons and families, and a tiny search end to end under the Prefect test
harness (the proxies trained once and reused by a larger search, a one-group target moving weight
to that group, the validation compared seed by seed, the report showing results.json's numbers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from experiment.config import parse_experiment
from experiment.mixsearch import (
    PRIMARY,
    SECONDARY,
    baseline_proxies,
    proxy_name,
    target_languages,
    target_value,
    validation_comparisons,
    weighting,
)
from experiment.statistics import spread
from pipeline.formats.configfile import ConfigError
from tests.helpers import resolve_json_path


def _data(tmp_path: Path, **search) -> dict:
    return {
        "out_dir": str(tmp_path / "search"),
        "demo": True,
        "demo_docs": 1500,
        "corpus_dir": str(tmp_path / "corpus"),
        "seeds": [0, 1],
        "budget_tokens": 6000,
        "max_epochs": 8,
        "tokenizer": {"vocab_size": 2000, "sample_docs": 500},
        "task": {"train_docs": 30, "test_docs": 20, "variants": []},
        "memorization": {"enabled": False},
        "choice_tasks": {"items": 20, "curve_items": 10},
        "variants": [{"name": "raw"}],
        "mixsearch": {
            "proxies": 8,
            "proxy_tokens": 12_000,
            "candidates": 2000,
            "top_k": 20,
            "resamples": 20,
            "targets": [
                {"name": "heldout", "metrics": {"heldout_bpb": 1.0}},
                {"name": "dialogues", "metrics": {"heldout_bpb/dialogues": 1.0}},
            ],
            "proxy_train": {
                "model": {"n_layer": 1, "n_head": 2, "n_embd": 16},
                "optim": {"lr": 1e-2},
                "batch": {"micro_batch": 8},
            },
            **search,
        },
        "train": {
            "device": "cpu",
            "eval_interval": 1000,
            "eval_tokens": 256,
            "log_interval": 2,
            "model": {"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32},
            "batch": {"micro_batch": 4},
            "optim": {"lr": 2e-3},
        },
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"targets": [{"name": "x", "metrics": {"accuracy": 1.0}}]}, "'accuracy' is not a bits-per-byte measure"),
        ({"primary": "t2"}, "primary: 't2' is not a baseline"),
        ({"baselines": ["natural", "t-1"]}, "baselines"),
        ({"pool": "full"}, "mixsearch.pool: 'full' is not a variant"),
        ({"proxy_train": {"model": {"n_head": 3}}}, "mixsearch.proxy_train"),
        ({"proxy_train": {"seed": 3}}, "mixsearch.proxy_train.seed: set by the search"),
        ({"top_k": 5000}, "top_k"),
        ({"concentration": [5.0, 0.1]}, "concentration"),
    ],
)
def test_search_config_errors(tmp_path, change, message):
    with pytest.raises(ConfigError, match=re.escape(message) if "'" in message else message):
        parse_experiment(_data(tmp_path, **change))


def test_a_language_target_needs_the_languages_scored_and_the_search_needs_a_budget(tmp_path):
    data = _data(tmp_path, targets=[{"name": "uk", "metrics": {"lang_bpb/uk": 1.0}}])
    data["languages"] = {"enabled": False}
    with pytest.raises(ConfigError, match="lang_bpb needs languages.enabled"):
        parse_experiment(data)
    data = _data(tmp_path)
    del data["budget_tokens"]
    data["mixsearch"]["validation"] = True
    data["task"]["path"] = None
    with pytest.raises(ConfigError, match="budget_tokens"):
        parse_experiment(data)
    data = _data(tmp_path)
    data["variants"] = [{"name": "natural"}]
    with pytest.raises(ConfigError, match="the run name 'natural' is taken by a variant"):
        parse_experiment(data)


def test_the_shipped_search_configs_are_valid_and_the_command_refuses_others():
    from typer.testing import CliRunner

    from experiment.config import load_experiment
    from flows.cli import app
    from trainer.config import parse_train_config

    root = Path(__file__).resolve().parents[2] / "configs"
    configs = sorted(root.glob("mixsearch*.toml"))
    assert [p.name for p in configs] == ["mixsearch-demo.toml", "mixsearch-gpu.toml"]
    for path in configs:
        config = load_experiment(path)
        config.require("mixsearch")
        parse_train_config(config.proxy_train(mixture=".", out_dir="out", seed=0))
        parse_train_config({**config.train, "mixture": ".", "out_dir": "out", "seed": 0, "max_tokens": 1000})
    result = CliRunner().invoke(app, ["mixsearch", str(root / "experiment.toml"), "--quiet"])
    assert result.exit_code == 2 and "has no [mixsearch] section" in result.output


def test_proxy_names_hash_what_the_run_is_made_from(tmp_path):
    config = parse_experiment(_data(tmp_path))
    names = [p.name for p in baseline_proxies(config)]
    assert len(set(names)) == 3 and all(re.fullmatch(r"p-[0-9a-f]{12}", n) for n in names)
    assert names == [p.name for p in baseline_proxies(parse_experiment(_data(tmp_path)))]  # stable
    assert proxy_name(config, {"news": 0.5, "web": 0.5}) != proxy_name(config, {"news": 0.5, "web": 0.4})
    other = parse_experiment(_data(tmp_path, proxy_tokens=4000))
    assert proxy_name(other, {"baseline": "natural"}) != names[0]
    # [train] under proxy_train: a setting the proxies override is not what they are made of
    data = _data(tmp_path)
    data["train"]["optim"]["lr"] = 1e-3
    assert proxy_name(parse_experiment(data), {"baseline": "natural"}) == names[0]
    data["train"]["eval_tokens"] = 512
    assert proxy_name(parse_experiment(data), {"baseline": "natural"}) != names[0]
    assert [weighting(n) for n in ("natural", "t3.33", "unimax")] == [
        {"temperature": 1.0},
        {"temperature": 3.33},
        {"uniform": True},
    ]


def test_a_target_is_the_weighted_sum_of_its_measures(tmp_path):
    config = parse_experiment(
        _data(tmp_path, targets=[{"name": "mix", "metrics": {"heldout_bpb/news": 2.0, "heldout_bpb/web": 1.0}}])
    )
    target = config.mixsearch.targets[0]
    assert target_value(target, {"heldout_bpb/news": 1.5, "heldout_bpb/web": 2.0}) == pytest.approx(5.0)
    assert target_value(target, {"heldout_bpb/news": 1.5}) is None


def test_proxies_score_the_languages_their_targets_weigh(tmp_path):
    targets = [
        {"name": "uk", "metrics": {"lang_bpb/uk": 1.0}},
        {"name": "mix", "metrics": {"lang_bpb/fa": 1.0, "heldout_bpb": 1.0}},
    ]
    assert target_languages(parse_experiment(_data(tmp_path, targets=targets))) == ["fa", "uk"]
    assert target_languages(parse_experiment(_data(tmp_path))) == []  # no language target: no scoring
    targets.append({"name": "low", "metrics": {"lang_bpb/low-resource": 1.0}})
    assert target_languages(parse_experiment(_data(tmp_path, targets=targets))) is None  # every language


def test_each_proposal_is_compared_with_the_primary_baseline_first_holm_over_the_targets(tmp_path):
    config = parse_experiment(_data(tmp_path))

    def runs(values):
        return {"targets": {t: spread(dict(enumerate(v))) for t, v in values.items()}}

    table = {
        "natural": runs({"heldout": [2.00, 2.10], "dialogues": [3.00, 3.20]}),
        "t3.33": runs({"heldout": [2.02, 2.11], "dialogues": [2.90, 3.05]}),
        "unimax": runs({"heldout": [2.05, 2.16], "dialogues": [2.80, 2.95]}),
        "proposal-heldout": runs({"heldout": [1.98, 2.075], "dialogues": [3.1, 3.3]}),
        "proposal-dialogues": runs({"heldout": [2.2, 2.3], "dialogues": [2.50, 2.71]}),
    }
    made = validation_comparisons(config, table)
    assert [(c["target"], c["b"], c["family"]) for c in made] == [
        ("heldout", "natural", PRIMARY),
        ("heldout", "t3.33", SECONDARY),
        ("heldout", "unimax", SECONDARY),
        ("dialogues", "natural", PRIMARY),
        ("dialogues", "t3.33", SECONDARY),
        ("dialogues", "unimax", SECONDARY),
    ]
    first = made[0]
    assert first["difference"] == pytest.approx(-0.0225) and first["paired"]
    assert all(c["family_size"] == (2 if c["family"] == PRIMARY else 4) for c in made)
    assert "Holm-adjusted over the 2 primary comparisons named in the config before the run" in made[3]["sentence"]


@pytest.mark.usefixtures("prefect_server")
def test_tiny_search_end_to_end(tmp_path, monkeypatch):
    import flows.experiment
    from flows.mixsearch import mixsearch_flow

    # A search killed as its sixth proxy run starts...
    data = _data(tmp_path, validation=False)
    out = Path(data["out_dir"])
    pretrain, started = flows.experiment.pretrain, []

    def killed_after_five(training, log=None):
        if len(started) == 5:
            raise KeyboardInterrupt
        started.append(training.out_dir)
        return pretrain(training, log=log)

    monkeypatch.setattr(flows.experiment, "pretrain", killed_after_five)
    with pytest.raises(KeyboardInterrupt):
        mixsearch_flow(parse_experiment(data))
    monkeypatch.undo()
    done = {p: p.stat().st_mtime_ns for p in (out / "proxies").rglob("summary.json")}
    assert len(done) == 5 and not (out / "results.json").exists()
    # ... resumes: the five are read back, the rest trained; the baselines and 8 sampled proxies.
    first = mixsearch_flow(parse_experiment(data))
    assert all(p.stat().st_mtime_ns == stamp for p, stamp in done.items())
    assert first["kind"] == "mixsearch" and "validation" not in first
    assert len(first["proxies"]) == 11 and [p["label"] for p in first["proxies"][:3]] == ["natural", "t3.33", "unimax"]
    groups = first["groups"]
    assert set(groups) == {"news", "dialogues", "web", "notes"}
    for proxy in first["proxies"]:  # each trained on its own mixture, inside the simplex and the caps
        assert sum(proxy["shares"].values()) == pytest.approx(1.0)
        assert all(proxy["targets"][t] > 0 for t in ("heldout", "dialogues"))
    stamps = {p: p.stat().st_mtime_ns for p in (out / "proxies").rglob("summary.json")}
    assert len(stamps) == 11

    # The whole search with 10 draws: the 11 runs it has are read back, 2 new ones trained.
    data = _data(tmp_path, proxies=10)
    results = mixsearch_flow(parse_experiment(data))
    after = {p: p.stat().st_mtime_ns for p in (out / "proxies").rglob("summary.json")}
    assert len(after) == 13 and all(after[p] == stamp for p, stamp in stamps.items())
    assert [p["name"] for p in results["proxies"][:11]] == [p["name"] for p in first["proxies"]]

    # Each target's fit: both families cross-validated, the proposal inside the simplex with intervals.
    for fit in results["fits"].values():
        assert set(fit["fit"]["families"]) == {"trees", "law", "loglinear"} and fit["proxies"] == 13
        proposal = fit["proposal"]
        assert sum(proposal["weights"].values()) == pytest.approx(1.0, abs=1e-6)
        for group in groups:
            low, high = proposal["interval"][group]
            assert low <= high and results["constraints"]["upper"][group] >= proposal["weights"][group] - 1e-9
    # The one-group target moves weight to that group.
    proposed = results["fits"]["dialogues"]["proposal"]["weights"]["dialogues"]
    assert proposed > results["fits"]["dialogues"]["natural"]["dialogues"]

    # The validation: the baselines and both proposals over both seeds, compared seed by seed.
    validation = results["validation"]
    assert set(validation["runs"]) == {"natural", "t3.33", "unimax", "proposal-heldout", "proposal-dialogues"}
    assert all(run["targets"]["heldout"]["n"] == 2 for run in validation["runs"].values())
    assert [c["family"] for c in validation["comparisons"]].count("primary") == 2
    assert all(c["paired"] for c in validation["comparisons"])
    assert set(validation["validity"]) == {"heldout", "dialogues"}
    assert all(len(v["mixtures"]) == 5 for v in validation["validity"].values())
    assert all(check["contaminated_documents"] == 0 for check in results["contamination"].values())

    # The report shows results.json's numbers.
    page = (out / "report" / "index.html").read_text()
    shown = re.findall(r'data-json="results\.json#([^"]+)">([^<]*)<', page)
    assert len(shown) > 50
    for path, text in shown:
        value = resolve_json_path(results, path)
        if value is None:
            assert text in ("–",), path
        else:
            digits = len(text.split(".")[1]) if "." in text else 0
            assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10**-digits + 1e-12, (path, text, value)

    # Run again: nothing is trained again.
    every = {p: p.stat().st_mtime_ns for p in out.rglob("summary.json")}
    again = mixsearch_flow(parse_experiment(data))
    assert {p: p.stat().st_mtime_ns for p in out.rglob("summary.json")} == every
    assert again["fits"] == results["fits"]
