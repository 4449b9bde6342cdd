"""The scaling-law sweep: its config (a grid the fit can use, shapes the trainer takes, names that
do not collide), each run's training config under the learning-rate and warmup rule, the parameter
counts, and a tiny sweep end to end under the Prefect test harness (every run trained once and
reused when run again, one tokenizer, every mixture checked for contamination, fits for both
counts, the report showing results.json's numbers)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from experiment.config import parse_experiment
from experiment.sweep import grid, learning_rate, parameter_counts, train_data
from flows.experiment import experiment_flow
from flows.sweep import sweep_flow
from pipeline.formats.configfile import ConfigError
from tests.helpers import resolve_json_path

MODELS = [
    {"name": "xs", "n_layer": 1, "n_head": 2, "n_embd": 16},
    {"name": "s", "n_layer": 2, "n_head": 2, "n_embd": 32},
]


def _data(tmp_path: Path, **sweep) -> dict:
    return {
        "out_dir": str(tmp_path / "sweep"),
        "demo": True,
        "demo_docs": 1500,
        "corpus_dir": str(tmp_path / "corpus"),
        "seeds": [0],
        "tokenizer": {"vocab_size": 2000, "sample_docs": 500},
        "task": {"train_docs": 30, "test_docs": 20},
        "memorization": {"prefix_tokens": 6, "suffix_tokens": 8},
        "variants": [{"name": "raw"}, {"name": "full", "stages": ["lang", "filter", "dedup", "lines"]}],
        "sweep": {"models": MODELS, "tokens": [2000, 4000, 8000], "resamples": 20, **sweep},
        "train": {
            "device": "cpu",
            "eval_interval": 1000,
            "eval_tokens": 256,
            "log_interval": 2,
            "model": {"block_size": 16},
            "batch": {"micro_batch": 4},
            "optim": {"lr": 2e-3},
        },
    }


def test_the_grid_and_each_runs_schedule(tmp_path):
    config = parse_experiment(_data(tmp_path, reference_width=32, warmup_fraction=0.2, min_lr_ratio=0.05))
    cells = grid(config)
    assert len(cells) == 2 * 2 * 3 and cells[0].variant == "raw" and cells[-1].variant == "full"
    assert [v.name for v in config.sweep_variants()] == ["raw-2k", "raw-4k", "raw-8k", "full-2k", "full-4k", "full-8k"]
    assert config.budget_tokens is None  # a sweep config needs none
    # inverse width: twice the reference's rate at half its width
    assert learning_rate(config, config.sweep.models[0]) == pytest.approx(4e-3)
    assert learning_rate(config, config.sweep.models[1]) == pytest.approx(2e-3)
    cell = next(c for c in cells if c.model.name == "xs" and c.tokens == 8000)
    data = train_data(config, cell, tmp_path / "mix", tmp_path / "heldout")
    assert data["max_tokens"] == 8000 and data["max_steps"] is None
    assert data["model"] == {"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16}
    steps = math.ceil(8000 / (4 * 16))  # 125 steps of 64 tokens
    assert data["optim"]["warmup_steps"] == round(0.2 * steps) == 25
    assert data["optim"]["lr"] == pytest.approx(4e-3) and data["optim"]["min_lr"] == pytest.approx(2e-4)
    assert data["out_dir"] == str(tmp_path / "sweep" / "train" / "raw-8k" / "xs" / "seed-0")

    constant = parse_experiment(_data(tmp_path, lr_rule="constant"))
    assert learning_rate(constant, constant.sweep.models[0]) == pytest.approx(2e-3)
    own = parse_experiment(_data(tmp_path, models=[{**MODELS[0], "lr": 5e-4}, MODELS[1]]))
    assert learning_rate(own, own.sweep.models[0]) == 5e-4
    # By default the reference width is train.model.n_embd (the trainer's 128 when not given).
    default = parse_experiment(_data(tmp_path))
    assert learning_rate(default, default.sweep.models[1]) == pytest.approx(2e-3 * 128 / 32)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tokens": [2000, 4000]}, "fewer than 6 runs"),
        ({"models": [MODELS[0], {**MODELS[0], "name": "again"}], "tokens": [1, 2, 3]}, "two model sizes"),
        ({"models": [MODELS[0], {**MODELS[1], "name": "xs"}]}, "names must be unique"),
        ({"models": [MODELS[0], {**MODELS[1], "n_head": 3}]}, "sweep.models s: .*multiple of n_head"),
        ({"variants": ["raw", "nope"]}, "nope is not one"),
        ({"tokens": [2000, 2000, 4000]}, "distinct"),
        ({"flops": [0.0]}, "positive compute"),
    ],
)
def test_sweep_config_errors(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        parse_experiment(_data(tmp_path, **change))


def test_a_sweep_mixture_name_may_not_be_a_variant_and_an_experiment_needs_its_budget(tmp_path):
    data = _data(tmp_path)
    data["variants"].append({"name": "raw-2k"})
    with pytest.raises(ConfigError, match="raw-2k' is taken by a variant"):
        parse_experiment(data)
    without = _data(tmp_path)
    del without["sweep"]
    with pytest.raises(ConfigError, match="budget_tokens: required"):
        parse_experiment(without)


def test_parameter_counts_leave_out_the_embedding_both_ways():
    import torch  # noqa: F401  (the model's import needs it)

    from trainer.model import GPT, GPTConfig

    for positions in ("rope", "learned"):
        shape = dict(vocab_size=300, block_size=16, n_layer=2, n_head=2, n_embd=32, positions=positions)
        model = GPT(GPTConfig(**shape))
        counts = parameter_counts({"model": shape, "parameters": model.num_parameters(non_embedding=False)})
        blocks = sum(p.numel() for p in model.blocks.parameters()) + sum(p.numel() for p in model.ln_f.parameters())
        assert counts == {"total": model.num_parameters(non_embedding=False), "non_embedding": blocks}, positions


@pytest.mark.usefixtures("prefect_server")
def test_tiny_sweep_end_to_end(tmp_path):
    config = parse_experiment(_data(tmp_path))
    results = sweep_flow(config)
    out = config.out_dir
    assert results["kind"] == "sweep" and results["variants"] == ["raw", "full"] and results["reference"] == "raw"
    assert len(results["runs"]) == 12 and len(results["cells"]) == 12
    # One tokenizer: every mixture names the same one; the held-out loss was measured on every run.
    hashes = set()
    for variant in results["variants"]:
        for budget in results["curation"][variant]["budgets"].values():
            manifest = json.loads((Path(budget["mixture"]) / "manifest.json").read_text())
            hashes.add(manifest["tokenizer"]["sha256"])
            assert budget["tokens_taken"] <= 8000 * 1.25
    assert len(hashes) == 1
    assert all(run["metrics"]["heldout_bpb"] > 0 for run in results["runs"])
    # Every budget's mixture was checked for contamination, and none leaks.
    assert sorted(results["contamination"]) == sorted(v.name for v in config.sweep_variants())
    assert all(check["contaminated_documents"] == 0 for check in results["contamination"].values())
    # The runs of one budget read their budget's tokens; the cells' N and D are the same grid per variant.
    for run in results["runs"]:
        assert run["budget"] <= run["tokens"] < run["budget"] + 64
        assert run["parameters"]["non_embedding"] < run["parameters"]["total"]
    grids = {
        v: sorted((c["parameters"]["total"], c["tokens"]) for c in results["cells"] if c["variant"] == v)
        for v in results["variants"]
    }
    assert grids["raw"] == grids["full"]
    for count in ("non_embedding", "total"):
        fits = results["fits"][count]
        assert set(fits["variants"]) == {"raw", "full"} and set(fits["comparisons"]) == {"full"}
        assert len(fits["variants"]["raw"]["optimal"]) == 3 and len(fits["comparisons"]["full"]["frontier"]) == 3
        assert fits["comparison_level"] == pytest.approx(1 - 0.05 / (3 + 2 + 1))  # budgets, sizes, cells
        assert len(fits["comparisons"]["full"]["data_multiplier"]) == 2

    # Proxy validity: every cell against the largest, per metric; the runs scored the curve items
    proxy = results["proxy"]
    largest = max(config.sweep.models, key=lambda m: m.n_layer * m.n_embd**2).name
    assert proxy["target"] == {"model": largest, "budget": max(config.sweep.tokens)} and proxy["pairs"] == 1
    assert {"heldout_bpb", "tasks/core", "tasks/gold_bpb"} <= set(proxy["metrics"])
    for rows in proxy["metrics"].values():
        assert len(rows) == 6 and [r["flops"] for r in rows] == sorted(r["flops"] for r in rows)
        assert all(r["accuracy"] == 1.0 for r in rows if r["target"] and r["pairs"])
    assert all("tasks/core" in run["metrics"] for run in results["runs"])

    # The report shows results.json's numbers.
    page = (out / "report" / "index.html").read_text()
    assert page.count("<figure") == 3  # loss against tokens, the frontier, proxy validity
    shown = re.findall(r'data-json="results\.json#([^"]+)">([^<]*)<', page)
    assert len(shown) > 100
    for path, text in shown:
        value = resolve_json_path(results, path)
        if value is None:
            assert text in ("–", "∞"), path
        elif "e" in text:
            assert float(text) == pytest.approx(value, rel=5e-3), (path, text, value)
        else:
            digits = len(text.split(".")[1]) if "." in text else 0
            assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10**-digits + 1e-12, (path, text, value)

    # Run again: every run is read back, none trained again.
    stamps = {p: p.stat().st_mtime_ns for p in (out / "train").rglob("summary.json")}
    assert len(stamps) == 12
    again = sweep_flow(config)
    assert {p: p.stat().st_mtime_ns for p in (out / "train").rglob("summary.json")} == stamps
    assert again["runs"] == results["runs"]
    # A changed rule is refused, not mixed with runs trained under the old one.
    with pytest.raises(ConfigError, match="optim.lr: .* was trained with"):
        sweep_flow(parse_experiment(_data(tmp_path, lr_rule="constant")))
    # An experiment does not write into a sweep's folder.
    data = _data(tmp_path)
    data["budget_tokens"] = 4000
    with pytest.raises(ConfigError, match="holds a sweep's results"):
        experiment_flow(parse_experiment(data))


def test_a_sweep_of_the_users_corpus_needs_no_task(tmp_path):
    """Without the demo a sweep needs held-out sets but no task: the protected texts are the clean
    held-out sets alone."""
    import polars as pl

    import experiment.prepare as prepare_module
    from experiment.heldout import heldout_texts, read_eval_set

    curation = tmp_path / "curation.toml"
    curation.write_text('run_dir = "unused"\n[[sources]]\nname = "mine"\nformat = "jsonl"\npaths = ["x.jsonl"]\n')
    held = tmp_path / "held.jsonl"
    held.write_text('{"text": "a held-out text"}\n{"text": "another one"}\n')
    data = {key: value for key, value in _data(tmp_path).items() if key not in ("demo", "demo_docs", "corpus_dir")}
    config = parse_experiment({**data, "curation": str(curation), "eval_sets": [{"name": "mine", "path": str(held)}]})
    assert prepare_module.task_file(config, None) is None
    config.require("sweep")
    with pytest.raises(ConfigError, match="task.path"):  # an experiment of the same config needs one
        config.model_copy(update={"budget_tokens": 100}).require("experiment")
    texts = heldout_texts([read_eval_set(config.eval_sets[0])])
    path, protected = prepare_module.write_protected(config, texts, None)
    assert protected["set"].to_list() == ["mine", "mine"] and pl.read_parquet(path).height == 2
    without_sweep = {key: value for key, value in data.items() if key != "sweep"}
    with pytest.raises(ConfigError, match="task.path"):
        parse_experiment(
            {
                **without_sweep,
                "budget_tokens": 100,
                "curation": str(curation),
                "eval_sets": [{"name": "mine", "path": str(held)}],
            }
        )


def test_the_commands_refuse_each_others_configs_before_any_work(tmp_path):
    """``curate sweep`` needs a [sweep] section and ``curate experiment`` a budget: each says so in
    one line and exits 2, before a Prefect server starts or a folder is made."""
    from typer.testing import CliRunner

    from flows.cli import app

    root = Path(__file__).resolve().parents[2] / "configs"
    for command, config, message in (
        ("sweep", root / "experiment.toml", "has no [sweep] section"),
        ("experiment", root / "sweep-demo.toml", "budget_tokens"),
    ):
        result = CliRunner().invoke(app, [command, str(config), "--quiet"])
        assert result.exit_code == 2 and message in result.output, (command, result.output)


def test_decision_accuracy_counts_the_pairs_each_cell_orders_as_the_largest():
    from experiment.task_results import decision_accuracy

    # three variants; at the target (n=2, 200 tokens) a < b < c in loss; the small cell orders a
    # and b the other way (1 of 3 pairs wrong) and ties b and c (half a pair)
    losses = {(1, 100): {"a": 3.0, "b": 2.5, "c": 2.5}, (2, 200): {"a": 1.0, "b": 2.0, "c": 3.0}}
    cells = [
        {"variant": v, "model": f"m{n}", "budget": d, "parameters": n, "flops": 6 * n * d, "metrics": {"x_bpb": loss}}
        for (n, d), by_variant in losses.items()
        for v, loss in by_variant.items()
    ]
    found = decision_accuracy(cells, ["x_bpb"], ["a", "b", "c"])
    assert found["target"] == {"model": "m2", "budget": 200} and found["pairs"] == 3
    small, target = found["metrics"]["x_bpb"]
    assert small["accuracy"] == pytest.approx((0 + 0 + 0.5) / 3)  # a-b wrong, a-c wrong (3.0 > 2.5), b-c tie
    assert target["target"] and target["accuracy"] == 1.0
    # higher is better for an accuracy: the same numbers read the other way round
    flipped = [{**c, "metrics": {"x_acc": c["metrics"]["x_bpb"]}} for c in cells]
    assert decision_accuracy(flipped, ["x_acc"], ["a", "b", "c"])["metrics"]["x_acc"][0]["accuracy"] == pytest.approx(
        0.5 / 3
    )
