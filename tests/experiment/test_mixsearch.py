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
    target_value,
    validation_comparisons,
    weighting,
)
from experiment.statistics import spread
from pipeline.formats.configfile import ConfigError


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

