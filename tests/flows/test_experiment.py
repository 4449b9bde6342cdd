"""A tiny experiment end to end under the Prefect test harness: two variants, two seeds, a tiny
model; the report's numbers equal results.json, the variants' runs differ as their curation says,
every variant uses one tokenizer and is evaluated on the same held-out shards, the contamination
check runs on every mixture (and stops the run when it finds a leak), and no pretraining mixture
holds a downstream-task text or a near copy of one."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

import experiment.prepare as prepare_module
from experiment.config import EvalSetConfig, ExperimentConfig, curation_config, parse_experiment
from experiment.heldout import heldout_texts, read_eval_set, trained_on
from experiment.prepare import ContaminationError
from experiment.results import data_efficiency, heldout_scores
from experiment.statistics import compare, fit_power_law, holm, spread, tokens_to_reach
from flows.experiment import experiment_flow
from pipeline.dedup.contamination import ReferenceIndex
from pipeline.formats.configfile import ConfigError
from pipeline.formats.tokens import decode_documents, file_sha256, load_tokenizer
from tests.helpers import resolve_json_path

pytestmark = pytest.mark.usefixtures("prefect_server")

DOCS = 1500


def _config(tmp_path, **overrides):
    data = {
        "out_dir": str(tmp_path / "experiment"),
        "demo": True,
        "demo_docs": DOCS,
        "corpus_dir": str(tmp_path / "corpus"),
        "seeds": [0, 1],
        "budget_tokens": 6000,
        "tokenizer": {"vocab_size": 2000, "sample_docs": 500},
        "task": {
            "train_docs": 30,
            "test_docs": 20,
            "sizes": [10, 0],
            "draws": 2,
            "dev_docs": 10,
            "max_tokens": 16,
            "finetune": {"min_steps": 2, "max_steps": 4, "eval_every": 2, "warmup_steps": 1},
        },
        "memorization": {"prefix_tokens": 6, "suffix_tokens": 8},
        "choice_tasks": {"items": 12, "shots": [0, 1]},
        "efficiency": {"budgets": [3000, 12000], "variants": ["raw", "full"]},
        "variants": [
            {"name": "raw"},
            {"name": "full", "stages": ["lang", "filter", "dedup", "lines"], "quality": True},
            {
                "name": "full-t2",
                "stages": ["lang", "filter", "dedup", "lines"],
                "quality": True,
                "temperature": 2.0,
                "ablation_of": "full",
            },
        ],
        "train": {
            "device": "cpu",
            "eval_interval": 12,
            "eval_tokens": 256,
            "log_interval": 2,
            "model": {"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16},
            "batch": {"micro_batch": 4},
            "optim": {"warmup_steps": 1},
        },
    }
    data.update(overrides)
    return parse_experiment(data)


@dataclass(frozen=True)
class TinyExperiment:
    """One run of the tiny experiment: its config, what ``experiment_flow`` returned, and the
    demo corpus's held-out texts."""

    config: ExperimentConfig
    results: dict
    texts: pl.DataFrame

    @property
    def out(self) -> Path:
        return self.config.out_dir

    @property
    def clean_sets(self) -> list[str]:
        return sorted(set(self.texts.filter(pl.col("clean"))["set"]))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, prefect_server) -> TinyExperiment:
    """The tiny experiment, run once for every test below that reads it (the last of them runs it
    a second time, side by side, in the same folder)."""
    config = _config(
        tmp_path_factory.mktemp("tiny"),
        languages={"variants": ["full", "full-t2"]},
        primary={"variant": "full", "metrics": ["heldout_bpb", "tasks/gold_bpb"]},
    )
    results = experiment_flow(config)
    texts = pl.read_parquet(config.corpus_dir / "heldout" / "texts.parquet")
    return TinyExperiment(config, results, texts)


def test_results_json_holds_every_run_and_its_heldout_scores(tiny):
    results, clean_sets = tiny.results, tiny.clean_sets
    assert clean_sets == ["dialogues", "news", "web"]
    assert json.loads((tiny.out / "results.json").read_text()) == json.loads(json.dumps(results))
    for name in ("raw", "full"):
        for seed in ("0", "1"):
            run = results["runs"][name][seed]
            assert run["tokens"] >= 6000
            # The headline is the mean of the clean sets' bits per byte; junk stands apart.
            assert run["heldout_bpb"] == pytest.approx(np.mean([run[f"heldout_bpb/{s}"] for s in clean_sets]))
            assert run["heldout_bpb/junk"] > 0
    assert results["metrics"]["heldout_bpb"]["raw"]["n"] == 2
    assert set(results["transfer"]) == {"random", "bag-of-words", "raw", "full", "full-t2"}


def test_every_heldout_document_is_scored_and_the_temperatures_compared_per_language(tiny):
    """Every held-out document scored whole by every model; bits per byte per language from them,
    and the temperature family (full at T = 1 against full-t2) compared on both averages."""
    results = tiny.results
    scores = pl.read_parquet(tiny.out / "scores" / "raw" / "seed-0.parquet")
    assert scores["id"].sort().to_list() == tiny.texts["id"].sort().to_list()
    assert (scores["tokens"] > 0).all() and (scores["nats"] > 0).all()
    languages = results["languages"]
    assert languages["high_resource"] == ["en"] and languages["low_resource"]
    assert languages["family"] == {
        "full": {"temperature": 1.0, "uniform": False},
        "full-t2": {"temperature": 2.0, "uniform": False},
    }
    assert results["metrics"]["lang_bpb/low-resource"]["raw"]["n"] == 2
    assert {(c["metric"], c["a"], c["b"]) for c in results["comparisons"] if c["family"] == "languages"} == {
        ("lang_bpb/low-resource", "full-t2", "full"),
        ("lang_bpb/high-resource", "full-t2", "full"),
    }


def test_label_efficiency_draws_the_same_examples_for_every_model_of_a_seed(tiny):
    """Label efficiency: dev split apart from the pool, draws per size (one at "all"), the learning
    rate chosen among the configured ones, the same draws for every model of a seed."""
    results, out = tiny.results, tiny.out
    assert results["task"]["sizes"] == {"probe": ["10", "all"], "finetune": ["10", "all"], "bow": ["10", "all"]}
    assert (results["task"]["pool_examples"], results["task"]["dev_examples"]) == (20, 10)
    runs = {name: json.loads((out / "transfer" / name / "seed-1.json").read_text()) for name in ("raw", "random")}
    assert [d["draw"] for d in runs["raw"]["probe"]["10"]["draws"]] == [0, 1]
    assert len(runs["raw"]["probe"]["0"]["draws"]) == 1 and len(runs["raw"]["finetune"]["10"]["draws"]) == 1
    assert all(d["lr"] in (3e-4, 1e-3) and 1 <= d["steps"] <= 4 for d in runs["raw"]["finetune"]["10"]["draws"])
    assert len(runs["raw"]["probe"]["10"]["correct"]) == runs["raw"]["test_examples"] == 20
    bow = json.loads((out / "transfer" / "bag-of-words" / "seed-1.json").read_text())
    assert set(bow["bow"]) == {"10", "0"} and "probe" not in bow
    gains = results["metrics"]["probe_gain@10"]["raw"]["by_seed"]
    accuracy = results["metrics"]["probe_accuracy@10"]
    assert gains["1"] == pytest.approx(accuracy["raw"]["by_seed"]["1"] - accuracy["random"]["by_seed"]["1"])
    efficiency = [c for c in results["comparisons"] if c["family"] == "label efficiency"]
    assert {(c["metric"], c["a"]) for c in efficiency} >= {("probe_gain@10_vs_all", "raw @ 10")}


def test_every_comparison_is_tested_once_with_holm_within_its_family(tiny):
    """Every comparison tested once, Holm within its family: no set's single group again, no loss
    beside its accuracy; each with its interval."""
    results = tiny.results
    # Each held-out and accuracy comparison also has a paired bootstrap over seeds and test items.
    tested_items = [c for c in results["comparisons"] if c["metric"] == "heldout_bpb" or "_accuracy@" in c["metric"]]
    assert all(c["bootstrap"]["items"] > 0 for c in tested_items if c["a"] in ("full", "full-t2", "raw"))
    tested = [c for c in results["comparisons"] if c["p"] is not None]
    assert tested and all(
        c["family_size"] == results["families"][c["family"]] and c["p_holm"] >= c["p"] for c in tested
    )
    assert sum(results["families"].values()) == len(tested)
    # full against raw is the primary comparison; full-t2 against raw stays in the headline family
    assert {c["family"] for c in results["comparisons"] if c["metric"] == "heldout_bpb"} == {
        "primary",
        "headline",
        "leave-one-out",
    }
    # A variant with ablation_of is also compared with that variant, in a family of its own.
    ablation = [c for c in results["comparisons"] if c["family"] == "leave-one-out"]
    assert ablation and {(c["a"], c["b"]) for c in ablation} == {("full-t2", "full")}
    # an interval for every t-test; none where the seeds agree exactly (the exact test's p instead)
    assert all(c["ci95"][0] <= c["difference"] <= c["ci95"][1] for c in tested if c["test"] == "t")
    assert all(c["ci95"] is None and c["p"] >= 0.25 for c in tested if c["test"] == "exact")
    # transfer: every curated variant against the baseline, and every probe against the bag of words
    assert {(c["a"], c["b"]) for c in results["comparisons"] if c["family"] == "transfer vs baseline"} == {
        ("full", "raw"),
        ("full-t2", "raw"),
    }
    against_bow = [c for c in results["comparisons"] if c["family"] == "transfer vs bag of words"]
    assert {c["a"] for c in against_bow} == {"random probed", "raw probed", "full probed", "full-t2 probed"}
    assert all(c["b"] == "bag of words" and c["metric"].startswith("probe_vs_bow_accuracy@") for c in against_bow)
    assert not [c for c in results["comparisons"] if "_loss@" in c["metric"] or c["metric"] == "heldout_bpb/news/news"]


def test_every_variant_and_seed_is_scored_on_every_task_and_compared_with_the_baseline(tiny):
    """The built-in tasks: every variant and seed scored on every item, each task's file named
    with its sha256, every item made of held-out or task text (which no pool holds), and each
    curated variant compared with raw on every task, with the bootstrap over seeds and items."""
    results, texts = tiny.results, tiny.texts
    info = results["tasks"]
    names = set(info["tasks"])
    assert {"continuation-news", "continuation-dialogues", "cloze-news", "topic-0shot", "topic-1shot"} <= names
    for entry in info["files"]:
        assert file_sha256(Path(entry["path"])) == entry["sha256"]
    items = pl.concat([pl.read_ndjson(entry["path"]) for entry in info["files"]])
    clean = texts.filter(pl.col("clean"))["text"].to_list()
    for row in items.filter(~pl.col("task").str.starts_with("topic-")).iter_rows(named=True):
        assert any(row["context"] + row["choices"][row["gold"]] in text for text in clean), row["id"]
    for variant in ("raw", "full", "full-t2"):
        for seed in ("0", "1"):
            run = info["runs"][variant][seed]
            assert all(0 <= run[f"task/{t}/acc_norm"] <= 1 and run[f"task/{t}/gold_bpb"] > 0 for t in names)
            per_item = pl.read_parquet(tiny.out / "tasks" / variant / f"seed-{seed}.parquet")
            assert per_item.height == items.height == sum(t["items"] for t in info["tasks"].values())
    per_task = [c for c in results["comparisons"] if c["family"] == "tasks"]
    assert {(c["a"], c["b"]) for c in per_task} == {("full", "raw"), ("full-t2", "raw")}
    assert {c["metric"] for c in per_task} == {f"task/{t}/{m}" for t in names for m in ("acc_norm", "gold_bpb")}
    assert all(c["bootstrap"]["items"] == info["tasks"][c["metric"].split("/")[1]]["items"] for c in per_task)
    aggregates = [c for c in results["comparisons"] if c["family"] == "task aggregates"]
    assert {c["metric"] for c in aggregates} == {"tasks/core", "tasks/gold_bpb"}
    # the same tasks as lm-eval task YAMLs: lm-eval on a checkpoint gives the built-in accuracy
    lm_eval = pytest.importorskip("lm_eval")
    from trainer.harness import evaluate_yaml_tasks

    yaml = tiny.out / "tasks" / "items" / "continuation-news.yaml"
    assert yaml.is_file() and lm_eval
    found = evaluate_yaml_tasks(tiny.out / "train" / "raw" / "seed-0", [yaml])["results"]
    scored = json.loads((tiny.out / "tasks" / "raw" / "seed-0.json").read_text())["tasks"]["continuation-news"]
    assert found["curate_continuation_news"]["acc,none"] == pytest.approx(scored["acc"])
    assert found["curate_continuation_news"]["acc_norm,none"] == pytest.approx(scored["acc_norm"])
    # curves: every variant's run scores the curve items at each evaluation (the data-efficiency
    # runs do not); the signal table reads them
    for variant in ("raw", "full", "full-t2"):
        rows = [r for r in results["curves"][variant]["0"] if r.get("tasks_core") is not None]
        assert len(rows) >= 2 and all(f"task_gold_bpb/{t}" in rows[-1] for t in names)
    assert not any(r.get("tasks_core") is not None for r in results["curves"]["raw-3k"]["0"])
    signal = info["signal"]
    assert set(signal) == {"tasks/core", "tasks/gold_bpb"} | {
        f"task/{t}/{m}" for t in names for m in ("acc_norm", "gold_bpb")
    }
    for entry in signal.values():
        assert entry["curves"] == 6 and -1 <= entry["monotonicity"] <= 1
        assert set(entry["variants"]) == {"full", "full-t2"}
    core = signal["tasks/core"]["variants"]["full"]
    metric = results["metrics"]["tasks/core"]
    assert core["gap"] == pytest.approx(metric["full"]["mean"] - metric["raw"]["mean"])
    page = (tiny.out / "report" / "index.html").read_text()
    assert "<section id=tasks>" in page and "CORE (mean centred acc_norm)" in page
    assert "Which measures carry signal at this scale" in page and "chart-task-curves" in page


def test_heldout_provenance_names_every_set_its_source_and_its_documents(tiny):
    """Held-out provenance: every set, where it came from, and its documents."""
    heldout, clean_sets = tiny.results["heldout"], tiny.clean_sets
    assert set(heldout["sets"]) == {*clean_sets, "junk"} and heldout["clean_sets"] == clean_sets
    for name, count in tiny.texts.group_by("set").len().iter_rows():
        assert heldout["sets"][name]["documents"] == count
    assert heldout["sets"]["junk"]["clean"] is False
    assert heldout["sets"]["news"]["sha256"] == file_sha256(tiny.config.corpus_dir / "heldout" / "texts.parquet")


def test_every_run_is_evaluated_on_the_same_heldout_shards(tiny):
    """One evaluation folder, the same bytes for every variant: each run evaluated exactly it."""
    out, heldout = tiny.out, tiny.results["heldout"]
    manifest = json.loads((out / "heldout" / "manifest.json").read_text())
    assert {e["group"] for e in manifest["validation"]} == set(
        tiny.texts.select(pl.col("set") + "/" + pl.col("group")).to_series()
    )
    for entry in manifest["validation"]:
        assert file_sha256(out / "heldout" / entry["file"]) == entry["sha256"] == heldout["shards"][entry["group"]]
    for name in ("raw", "full"):
        for seed in (0, 1):
            summary = json.loads((out / "train" / name / f"seed-{seed}" / "summary.json").read_text())
            assert summary["config"]["eval_mixtures"] == {"heldout": str(out / "heldout")}
            assert set(summary["final_eval"]["heldout"]["groups"]) == {e["group"] for e in manifest["validation"]}


def test_every_mixture_and_the_heldout_folder_name_one_tokenizer(tiny):
    """One tokenizer: every variant's mixture, and the held-out folder, name the same sha256."""
    results, out = tiny.results, tiny.out
    manifest = json.loads((out / "heldout" / "manifest.json").read_text())
    tokenizer_sha = file_sha256(out / "tokenizer.json")
    assert manifest["tokenizer"]["sha256"] == tokenizer_sha == results["heldout"]["tokenizer_sha256"]
    for name in ("raw", "full"):
        mixture = json.loads(
            (
                out
                / "curation"
                / results["curation"][name]["run_dir"].rsplit("/", 1)[1]
                / "mix"
                / name
                / "manifest.json"
            ).read_text()
        )
        assert mixture["tokenizer"]["sha256"] == tokenizer_sha == results["curation"][name]["tokenizer_sha256"]


def test_the_contamination_check_ran_on_every_mixture_trained_on_and_found_nothing(tiny):
    results = tiny.results
    efficiency_runs = {"raw-3k", "raw-12k", "full-3k", "full-12k"}
    assert set(results["contamination"]) == {"raw", "full", "full-t2", *efficiency_runs}
    for name, check in results["contamination"].items():
        assert check["contaminated_documents"] == 0 and check["contaminated_windows"] == 0
        if name in efficiency_runs:
            continue
        # Every training document once (an upsampled one repeats), its end-of-document token aside.
        plan = pl.read_parquet(Path(results["curation"][name]["mixture"]) / "plan.parquet").filter(
            pl.col("repeats") > 0
        )
        assert check["documents_checked"] == plan.height
        assert check["tokens_checked"] == (plan["tokens"] - 1).sum()


def test_curation_cuts_the_junk_and_the_unknown_licences_each_variant_trained_on(tiny):
    """What each variant trained on: its tokens, bytes, epochs and kinds (from the labels)."""
    results = tiny.results
    for name in ("raw", "full"):
        info = results["curation"][name]
        used = info["trained_on"]
        assert used["tokens"] == info["tokens_taken"] and used["bytes"] > used["tokens"]
        assert used["bytes_per_token"] == pytest.approx(used["bytes"] / used["tokens"])
        assert set(used["epochs"]) == set(info["groups"])
        assert sum(k["tokens"] for k in used["kinds"].values()) == used["tokens"]
        assert sum(k["share"] for k in used["kinds"].values()) == pytest.approx(1.0)
        assert "unlabelled" not in used["kinds"]
    junk = ("spam", "lorem", "gibberish", "boilerplate")
    junk_share = {
        name: sum(v["share"] for k, v in results["curation"][name]["trained_on"]["kinds"].items() if k in junk)
        for name in ("raw", "full")
    }
    assert junk_share["full"] < junk_share["raw"]
    # ...and by licence (its mixture's manifest): the generated junk names none, so curation cuts
    # the share of tokens whose licence is unknown.
    for name in ("raw", "full"):
        licences = results["curation"][name]["licences"]
        assert sum(v["tokens"] for v in licences.values()) == results["curation"][name]["tokens_taken"]
    unknown = {
        name: results["curation"][name]["licences"].get("unknown", {}).get("share", 0) for name in ("raw", "full")
    }
    assert unknown["full"] < unknown["raw"]


def test_the_report_shows_the_numbers_of_results_json(tiny):
    results = tiny.results
    page = (tiny.out / "report" / "index.html").read_text()
    assert "Licences of the tokens trained on" in page and 'data-json="results.json#curation.raw.licences.' in page
    exact = [c for c in results["comparisons"] if c["test"] == "exact"]
    shown_twice = [c for c in exact if c.get("role") == "primary"]  # in its section and the primary's
    assert page.count("(the same on every seed: exact test)") == len(exact) + len(shown_twice)
    assert "Transfer: each variant against the baseline" in page
    assert "Transfer: each probe against the bag of words on the same labels" in page
    # the pre-registered comparison: first in results.json and on the page, a family of its own
    assert (tiny.out / "results.json").read_text().startswith('{\n  "primary": {\n    "against": "raw",')
    primary = results["primary"]["comparisons"]
    assert [(c["metric"], c["a"], c["b"]) for c in primary] == [
        ("heldout_bpb", "full", "raw"),
        ("tasks/gold_bpb", "full", "raw"),
    ]
    assert [results["comparisons"][c["index"]]["family"] for c in primary] == ["primary"] * 2
    assert results["families"]["primary"] == 2 and all(c["family_size"] == 2 for c in primary)
    assert page.index("<section id=primary><h2>Primary comparison (pre-registered)</h2>") < page.index(
        "<section id=findings><h2>Secondary findings</h2>"
    )
    shown = re.findall(r'data-json="results\.json#([^"]+)">([^<]*)<', page)
    assert len(shown) > 20
    for path, text in shown:
        value = resolve_json_path(results, path)
        if value is None:
            assert text == "–"
            continue
        digits = len(text.split(".")[1]) if "." in text else 0
        assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10**-digits + 1e-12, (path, text, value)


def test_the_runs_differ_as_their_curation_says(tiny):
    results, out = tiny.results, tiny.out
    raw_run = json.loads((out / "curation" / "raw" / "manifest.json").read_text())
    full_run = json.loads((out / "curation" / "lang+filter+dedup+lines+quality" / "manifest.json").read_text())
    assert not {"lang", "filter", "dedup", "lines"} & set(raw_run["stages"])
    assert {"lang", "filter", "dedup", "lines", "tokenize", "mix"} <= set(full_run["stages"])
    assert "quality" in full_run["config"]["filter"]["filters"]
    raw, full = results["curation"]["raw"], results["curation"]["full"]
    assert raw["documents_in"] == full["documents_in"] and raw["documents_curated"] > full["documents_curated"]
    # Mixtures take whole documents (each group within half a document of its share of the
    # budget); the trainer reads the same number of tokens from every variant.
    assert raw["tokens_taken"] == pytest.approx(6000, rel=0.25) and full["tokens_taken"] == pytest.approx(
        6000, rel=0.25
    )
    assert len({run["tokens"] for name in results["variants"] for run in results["runs"][name].values()}) == 1


def test_no_mixture_holds_a_task_text_or_a_clean_heldout_document(tiny):
    """Decontamination: no training document of any mixture is a task text or a near copy of one,
    nor a clean held-out document; what the exclusion removed is recorded with its rule and text.
    (The junk set is kept out by lineage only: a cookie banner of one template is on many sites.)"""
    out = tiny.out
    task = pl.read_parquet(tiny.config.corpus_dir / "heldout" / "task.parquet")
    reference = pl.read_parquet(out / "heldout" / "texts.parquet").filter(pl.col("clean"))
    index = ReferenceIndex(pl.concat([task["id"], reference["id"]]), pl.concat([task["text"], reference["text"]]))
    tokenizer = load_tokenizer(out / "tokenizer.json")
    for name, run in (("raw", "raw"), ("full", "lang+filter+dedup+lines+quality")):
        mixture = out / "curation" / run / "mix" / name
        manifest = json.loads((mixture / "manifest.json").read_text())
        texts = [text for entry in manifest["train"] for text in decode_documents(mixture / entry["file"], tokenizer)]
        assert index.matches([str(i) for i in range(len(texts))], texts).height == 0
        documents = pl.read_parquet(out / "curation" / run / "mix" / "documents.parquet")
        excluded = documents.filter(pl.col("split") == "excluded")
        assert excluded["rule"].null_count() == 0 and excluded["near_id"].null_count() == 0


def test_every_canary_is_scored_and_each_curated_variant_compared_with_raw_per_count(tiny):
    """Memorization of the corpus's canaries, per variant and seed: every canary long enough is
    scored, the views of each mixture match its plan, and each curated variant is compared with
    raw at each planted count (no direction expected for canaries planted once)."""
    results, out = tiny.results, tiny.out
    canaries = pl.read_parquet(tiny.config.corpus_dir / "heldout" / "canaries.parquet")
    # The source stage reads a canary as written, so the tokenizer's sample can leave it out by text.
    source = pl.scan_parquet(sorted((out / "curation" / "source").glob("source/docs/*.parquet"))).collect()
    planted = canaries.filter(pl.col("occurrences") > 0)["text"]
    assert planted.is_in(source["text"].implode()).all()
    memo = results["memorization"]
    expected_counts = {
        ("control" if n == 0 else str(n)): k for n, k in canaries.group_by("occurrences").len().iter_rows()
    }
    assert memo["canaries"] == expected_counts and {"control", "1", "10"} <= set(expected_counts)
    assert set(memo["runs"]) == {"raw", "full", "full-t2"} and set(memo["runs"]["raw"]) == {"0", "1"}
    for name in ("raw", "full"):
        plan = pl.read_parquet(Path(results["curation"][name]["mixture"]) / "plan.parquet")
        repeats = dict(zip(plan["id"].to_list(), plan["repeats"].to_list()))
        for n, seen in memo["trained"][name].items():
            views = [
                sum(repeats.get(i, 0) for i in ids)
                for ids in canaries.filter(pl.col("occurrences") == int(n))["pool_ids"].to_list()
            ]
            assert seen["mean_views"] == pytest.approx(np.mean(views)) and seen["canaries"] == len(views)
        scored = json.loads((out / "memorization" / name / "seed-0.json").read_text())
        assert len(scored["canaries"]["id"]) + scored["too_short"] == canaries.height
        assert scored["controls"] == expected_counts["control"]
        for n in expected_counts:
            assert f"memorization/exposure/{n}" in memo["runs"][name]["0"]
            entry = results["metrics"][f"memorization/exposure/{n}"][name]
            assert entry["n"] == 2 and 0 <= entry["mean"] <= np.log2(expected_counts["control"] + 1)
    memorization = [c for c in results["comparisons"] if c["family"] == "memorization"]
    planted = [n for n in expected_counts if n != "control"]
    assert {(c["a"], c["b"], c["metric"]) for c in memorization} == {
        (a, b, f"memorization/exposure/{n}")
        for a, b in (("full", "raw"), ("full-t2", "raw"), ("full-t2", "full"))
        for n in planted
    }
    # The expectation follows the views: fewer views of a canary, less memorization expected.
    for c in memorization:
        n = c["metric"].rsplit("/", 1)[1]
        seen = [memo["trained"][side][n]["mean_views"] for side in (c["a"], c["b"])]
        if n != "1" and abs(seen[0] - seen[1]) > 0.1 * max(seen):
            assert f"{seen[0]:.2f} times on average" in c["expected"]


def test_data_efficiency_trains_three_budgets_per_variant_and_fits_each(tiny):
    """Data efficiency: raw and full again at 3k and 12k tokens (pretraining only, their mixtures
    checked for contamination too), three points per variant and seed, each fitted."""
    results = tiny.results
    memo = results["memorization"]
    efficiency = results["data_efficiency"]
    assert efficiency["budgets"] == [3000, 6000, 12000] and efficiency["reference"] == "raw"
    assert efficiency["runs"]["full"] == {"3000": "full-3k", "6000": "full", "12000": "full-12k"}
    for name in ("raw-3k", "raw-12k", "full-3k", "full-12k"):
        assert name in results["contamination"] and results["contamination"][name]["contaminated_documents"] == 0
        assert name not in results["transfer"] and name not in memo["runs"] and name not in results["variants"]
        budget = 3000 if name.endswith("3k") else 12000
        assert all(budget <= run["tokens"] < budget + 64 * 2 for run in results["runs"][name].values())
    for name in ("raw", "full"):
        for seed in ("0", "1"):
            entry = efficiency["fits"][name][seed]
            assert [t for t, _ in entry["points"]] == sorted(
                results["runs"][n][seed]["tokens"] for n in efficiency["runs"][name].values()
            )
    assert set(efficiency["multiplier"]) == {"full"}


def test_runs_side_by_side_give_what_they_gave_one_after_the_other(tiny):
    """Run side by side (parallel_runs = 2: a process per run, a core each), pretraining and
    transfer give what they gave one after the other; the curation runs are reused. It removes and
    writes again the run's train, transfer and memorization folders, so it comes after every other
    test of the tiny experiment."""
    config, results, out = tiny.config, tiny.results, tiny.out
    for folder in ("train", "transfer", "memorization"):
        shutil.rmtree(out / folder)
    again = experiment_flow(config.model_copy(update={"parallel_runs": 2}))
    assert again["timing"]["parallel_runs"] == 2
    for name in ("raw", "full"):
        for seed in ("0", "1"):
            first, second = results["runs"][name][seed], again["runs"][name][seed]
            scores = [key for key in first if "bpb" in key or "loss" in key]
            assert "heldout_bpb" in scores and second["tokens"] == first["tokens"]
            assert {key: second[key] for key in scores} == pytest.approx({key: first[key] for key in scores}, rel=1e-4)
    assert again["transfer"].keys() == results["transfer"].keys()
    for metric in [m for m in results["metrics"] if m.startswith("memorization/")]:
        for name, entry in results["metrics"][metric].items():
            assert again["metrics"][metric][name]["mean"] == pytest.approx(entry["mean"], rel=1e-4, abs=1e-9)
    for name, seeds in results["transfer"].items():
        method = "bow" if name == "bag-of-words" else "probe"
        for seed, scores in seeds.items():
            key = f"{method}_loss@all"
            assert again["transfer"][name][seed][key] == pytest.approx(scores[key], rel=1e-3)


def test_a_leak_stops_the_experiment(tmp_path, monkeypatch):
    """A mixture whose check finds shared windows stops the run with one error naming the variant,
    after writing the counts."""
    config = _config(
        tmp_path,
        variants=[{"name": "raw"}, {"name": "dedup", "stages": ["dedup"]}],
        efficiency={"budgets": [3000, 12000], "variants": ["raw", "dedup"]},
    )
    config.out_dir.mkdir(parents=True)
    found = {
        "raw": {"contaminated_documents": 0, "contaminated_windows": 0},
        "dedup": {"contaminated_documents": 3, "contaminated_windows": 17},
        **{
            name: {"contaminated_documents": 0, "contaminated_windows": 0}
            for name in ("raw-3k", "raw-12k", "dedup-3k", "dedup-12k")
        },
    }
    monkeypatch.setattr(
        prepare_module, "check_contamination", lambda mixture, texts, tokenizer, **settings: found[mixture.name]
    )
    monkeypatch.setattr(prepare_module, "load_tokenizer", lambda path: None)
    runs = {name: type("Run", (), {"run_dir": tmp_path / name})() for name in found}  # efficiency runs too
    with pytest.raises(ContaminationError, match=r"13-token window .*\(dedup 3\)"):
        prepare_module.check_mixtures(
            config,
            config.all_variants(),
            runs,
            pl.DataFrame({"id": ["t"], "text": ["a text"]}),
            tmp_path / "tokenizer.json",
        )
    assert json.loads((config.out_dir / "contamination.json").read_text()) == found


def test_heldout_scores_weigh_groups_by_bytes_and_sets_equally():
    eval_groups = {
        "news/news": {"set": "news", "clean": True, "validation_tokens": 100, "validation_bytes": 400},
        "news/web": {"set": "news", "clean": True, "validation_tokens": 100, "validation_bytes": 200},
        "chat/chat": {"set": "chat", "clean": True, "validation_tokens": 50, "validation_bytes": 100},
        "junk/web": {"set": "junk", "clean": False, "validation_tokens": 10, "validation_bytes": 10},
    }
    groups = {
        "news/news": {"bpb": 1.0, "tokens": 100},
        "news/web": {"bpb": 2.0, "tokens": 100},
        "chat/chat": {"bpb": 3.0, "tokens": 40},
        "junk/web": {"bpb": 9.0, "tokens": 10},
    }
    scores = heldout_scores(groups, eval_groups)
    # news: 400 bytes at 1.0 and 200 at 2.0 -> 800 bits / 600 bytes.
    assert scores["heldout_bpb/news"] == pytest.approx(4 / 3)
    assert scores["heldout_bpb/chat"] == 3.0 and scores["heldout_bpb/junk"] == 9.0
    assert scores["heldout_bpb"] == pytest.approx((4 / 3 + 3.0) / 2)  # junk is not in the headline
    assert scores["heldout_bpb/news/web"] == 2.0


def test_trained_on_counts_repeats_and_kinds():
    documents = pl.DataFrame(
        {
            "id": ["news/a", "web/b", "web/c", "news/d"],
            "group": ["news", "web", "web", "news"],
            "tokens": [10, 20, 5, 7],
            "bytes": [40, 60, 10, 30],
            "split": ["train", "train", "train", "validation"],
        }
    )
    plan = pl.DataFrame({"id": ["news/a", "web/b", "web/c"], "group": ["news", "web", "web"], "repeats": [3, 1, 0]})
    labels = pl.DataFrame({"id": ["news/a", "web/b", "web/c"], "kind": ["clean", "spam", "lorem"]})
    used = trained_on(documents, plan, labels)
    assert used["tokens"] == 50 and used["bytes"] == 180 and used["bytes_per_token"] == pytest.approx(3.6)
    assert used["epochs"] == {"news": 3.0, "web": 0.8}
    assert used["kinds"] == {
        "clean": {"tokens": 30, "bytes": 120, "share": 0.6},
        "spam": {"tokens": 20, "bytes": 60, "share": 0.4},
        "lorem": {"tokens": 0, "bytes": 0, "share": 0.0},
    }


def test_user_eval_sets(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"body": "first text", "site": "a", "url": "u1"}\n{"body": "second", "site": null, "url": "u2"}\n'
        '{"body": "", "site": "b", "url": "u3"}\n'
    )
    texts = read_eval_set(EvalSetConfig(name="mine", path=path, text_field="body", group_field="site", id_field="url"))
    assert texts.to_dicts() == [
        {"id": "u1", "text": "first text", "set": "mine", "group": "a", "lang": None, "kind": "user", "clean": True},
        {"id": "u2", "text": "second", "set": "mine", "group": "mine", "lang": None, "kind": "user", "clean": True},
    ]
    with pytest.raises(ConfigError, match="has no 'title' column"):
        read_eval_set(EvalSetConfig(name="mine", path=path, text_field="title"))
    with pytest.raises(ConfigError, match="names more than one text"):
        heldout_texts([texts, texts.with_columns(set=pl.lit("other"))])


def test_seed_statistics_t_tests_and_intervals():
    a, b = spread({0: 2.0, 1: 2.1, 2: 2.2}), spread({0: 3.0, 1: 3.1})
    assert a["mean"] == pytest.approx(2.1) and a["std"] == pytest.approx(0.1) and a["n"] == 3
    result = compare(a, b, lower_is_better=True)  # different seeds: Welch's t
    assert not result["paired"] and result["better"]
    assert result["difference"] == pytest.approx(-0.95)
    welch = stats.ttest_ind([2.0, 2.1, 2.2], [3.0, 3.1], equal_var=False)
    assert result["p"] == pytest.approx(welch.pvalue) and result["t"] == pytest.approx(welch.statistic)
    assert result["ci95"][0] < -0.95 < result["ci95"][1] < 0
    # Same seeds: paired. The seeds move both variants alike, so a small difference that every seed
    # shows is clear, though the ranges overlap: Student's t on the differences, n - 1 df.
    x, y = [2.0, 3.0, 2.5], [2.1, 3.1, 2.58]
    paired = compare(spread(dict(enumerate(x))), spread(dict(enumerate(y))), lower_is_better=True)
    reference = stats.ttest_rel(x, y)
    assert paired["paired"] and paired["better"] and paired["df"] == 2
    assert paired["difference"] == pytest.approx(-0.28 / 3)
    assert paired["p"] == pytest.approx(reference.pvalue) and paired["t"] == pytest.approx(reference.statistic)
    interval = stats.t.interval(0.95, 2, loc=np.mean(np.subtract(x, y)), scale=stats.sem(np.subtract(x, y)))
    assert paired["ci95"] == pytest.approx(list(interval))
    assert compare(spread({0: 1.0}), spread({0: 2.0}), lower_is_better=True)["p"] is None  # one seed: no test


def test_variants_keep_every_copy_of_their_own_validation_documents(tmp_path):
    """The experiment's curation runs hold a validation split but do not drop the training copies of
    its documents: that would dedup raw of its own (whole duplicate clusters gone)."""
    config = _config(tmp_path)
    run = curation_config({}, [config.variants[0]], config, tmp_path / "run", tmp_path / "tok.json", [], None)
    assert run["mix"]["decontaminate"] is False and run["mix"]["validation_fraction"] > 0


def test_uniform_sampling_is_every_group_weighted_alike(tmp_path):
    """A uniform variant mixes with weight 1 for every group (with its epoch cap: UniMax), and the
    mix stage turns that into equal weights."""
    from pipeline.mix.plan import explicit_weights

    config = _config(
        tmp_path, variants=[{"name": "raw"}, {"name": "unimax", "uniform": True, "max_epochs": 2}], efficiency={}
    )
    run = curation_config({}, [config.variants[1]], config, tmp_path / "run", tmp_path / "tok.json", [], None)
    (mixture,) = run["mix"]["mixtures"]
    assert (mixture["weights"], mixture["default_weight"], mixture["max_epochs"]) == ({}, 1.0, 2)
    assert explicit_weights({}, ["a", "b", "c", "d"], 1.0) == pytest.approx(dict.fromkeys("abcd", 0.25))
    assert config.variants[1].sampling_temperature == math.inf and config.variants[0].sampling_temperature == 1.0


def test_user_canaries_need_their_columns(tmp_path):
    path = tmp_path / "canaries.parquet"
    pl.DataFrame({"id": ["a"], "text": ["some words"]}).write_parquet(path)
    config = _config(tmp_path, memorization={"canaries": str(path), "prefix_tokens": 4, "suffix_tokens": 4})
    with pytest.raises(ConfigError, match="lacks the column\\(s\\) occurrences"):
        prepare_module.canaries_file(config, None)
    pl.DataFrame({"id": ["a"], "text": ["some words"], "occurrences": [0]}).write_parquet(path)
    assert prepare_module.canaries_file(config, None) == path


def test_power_law_fit_recovers_known_parameters():
    """Losses generated from E + B / D^beta (D in millions) at four budgets: the fit recovers the
    parameters exactly without noise, within stated tolerance with 0.005 of noise, and says how many
    tokens reach a loss."""
    budgets = np.array([150e3, 300e3, 600e3, 1.2e6])
    rng = np.random.default_rng(0)
    for E, B, beta in ((3.1, 0.35, 0.6), (2.5, 1.0, 0.3), (4.0, 0.2, 1.2)):
        losses = E + B * (budgets / 1e6) ** -beta
        exact = fit_power_law(budgets, losses)
        assert exact == pytest.approx({"E": E, "B": B, "beta": beta, "rms": 0.0}, abs=1e-6)
        assert tokens_to_reach(exact, E + B * 0.45**-beta) == pytest.approx(450e3, rel=1e-6)
        assert tokens_to_reach(exact, E - 0.01) is None  # below the floor: never
        noisy = fit_power_law(budgets, losses + rng.normal(0, 0.005, budgets.size))
        # within the noise: the curve, not each parameter, is what four points pin down
        assert np.abs(noisy["E"] + noisy["B"] * (budgets / 1e6) ** -noisy["beta"] - losses).max() < 0.02
    assert fit_power_law(budgets[:2], [3.5, 3.4]) is None


def test_data_multiplier_of_a_variant_that_needs_k_times_fewer_tokens():
    """A variant whose loss at D tokens is the reference's at k D needs k times fewer tokens: the
    multiplier is k on every seed, with an interval around it."""
    config = parse_experiment(
        {
            "out_dir": "unused",
            "demo": True,
            "budget_tokens": 600_000,
            "seeds": [0, 1, 2],
            "efficiency": {"budgets": [150_000, 300_000, 1_200_000], "variants": ["raw", "full"]},
            "variants": [{"name": "raw"}, {"name": "full", "stages": ["dedup"]}],
        }
    )
    assert [v.name for v in config.efficiency_variants()] == [
        "raw-150k",
        "raw-300k",
        "raw-1.2M",
        "full-150k",
        "full-300k",
        "full-1.2M",
    ]
    assert {v.budget_tokens for v in config.efficiency_variants()} == {150_000, 300_000, 1_200_000}

    def loss(tokens: float, seed: int) -> float:
        return 3.0 + (0.5 + 0.01 * seed) * (tokens / 1e6) ** -0.5

    per_run, k = {}, {0: 2.0, 1: 2.5, 2: 3.0}
    for budget, suffix in ((150_000, "-150k"), (300_000, "-300k"), (600_000, ""), (1_200_000, "-1.2M")):
        per_run[f"raw{suffix}"] = {str(s): {"tokens": budget, "heldout_bpb": loss(budget, s)} for s in k}
        per_run[f"full{suffix}"] = {str(s): {"tokens": budget, "heldout_bpb": loss(k[s] * budget, s)} for s in k}
    found = data_efficiency(config, per_run)
    assert found["reference"] == "raw" and found["budgets"] == [150_000, 300_000, 600_000, 1_200_000]
    multiplier = found["multiplier"]["full"]
    assert multiplier["by_seed"] == pytest.approx({str(s): k[s] for s in k}, rel=1e-4)
    assert multiplier["geomean"] == pytest.approx((2.0 * 2.5 * 3.0) ** (1 / 3), rel=1e-4)
    low, high = multiplier["ci95"]
    assert low < 2.0 < 3.0 < high and not multiplier["extrapolated"]  # 1.2M / k lies within the budgets


def test_holm_adjusts_step_down():
    comparisons = [{"p": p} for p in (0.01, 0.04, 0.03, 0.005)] + [{"p": None}]
    holm(comparisons)
    assert [c["p_holm"] for c in comparisons] == pytest.approx([0.03, 0.06, 0.06, 0.02, None])
    assert [c["significant"] for c in comparisons] == [True, False, False, True, False]
    assert {c["family_size"] for c in comparisons} == {4}


def _null_experiment(rng, seeds: int, variants: int, metrics: int) -> tuple[list[dict], bool]:
    """One simulated experiment's comparisons where no variant differs from the baseline (each seed
    shifts every variant alike, a seed effect larger than the noise; each run adds its own noise),
    and whether the former rule (every seed agrees in sign and the mean difference exceeds two
    standard errors) fired on any of them."""
    comparisons, old_rule = [], False
    for _ in range(metrics):
        runs = rng.normal(0, 1.0, seeds) + rng.normal(0, 0.1, (variants + 1, seeds))
        base = spread(dict(enumerate(runs[0])))
        for row in runs[1:]:
            comparisons.append(compare(spread(dict(enumerate(row))), base, lower_is_better=True))
            d = row - runs[0]
            old_rule |= bool((np.all(d > 0) or np.all(d < 0)) and abs(d.mean()) > 2 * stats.sem(d))
    holm(comparisons)
    return comparisons, old_rule


def test_the_rule_calls_no_difference_on_noise():
    """Variants with no true difference: with Holm's correction over an experiment's comparisons,
    the rule calls "no difference" everywhere in at least 95% of experiments; the former rule fired
    in most of them."""
    rng = np.random.default_rng(0)
    experiments = [_null_experiment(rng, seeds=3, variants=4, metrics=8) for _ in range(400)]
    any_called = np.mean([any(c["significant"] for c in comparisons) for comparisons, _ in experiments])
    per_comparison = np.mean([c["p"] < 0.05 for comparisons, _ in experiments for c in comparisons])
    old_rule = np.mean([fired for _, fired in experiments])
    assert any_called <= 0.05 + 0.02  # 400 experiments: about 0.011 Monte Carlo error at 5%
    assert per_comparison == pytest.approx(0.05, abs=0.015)  # the uncorrected test is calibrated
    assert old_rule > 0.5
    # A true difference of about five noise standard deviations on every seed is still found.
    found = [compare(spread({0: 0.5, 1: 1.45, 2: 0.05}), spread({0: 1.0, 1: 2.0, 2: 0.5}), lower_is_better=True)]
    holm(found)
    assert found[0]["significant"] and found[0]["better"]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"demo": False}, "demo = true, or curation"),
        ({"variants": [{"name": "a"}, {"name": "a"}]}, "unique"),
        ({"variants": [{"name": "q", "quality": True}]}, "needs 'filter'"),
        ({"train": {"seed": 3}}, "train.seed"),
        ({"group_by": ["lang"]}, "lang stage in every variant"),
        ({"reference": {"fraction": 0.1}}, "remove \\[reference\\]"),
        ({"eval_sets": [{"name": "news", "path": __file__.replace(".py", ".jsonl")}]}, "no file"),
        ({"memorization": {"prefix_tokens": 8, "suffix_tokens": 9}}, "must fit the model's block_size \\(16\\)"),
        ({"memorization": {"canaries": "missing.parquet"}}, "memorization.canaries"),
        ({"efficiency": {"budgets": [3000], "variants": ["raw", "full"]}}, "at least three budgets"),
        ({"efficiency": {"budgets": [3000, 9000], "variants": ["raw", "nope"]}}, "nope is not one"),
        ({"variants": [{"name": "u", "uniform": True, "temperature": 2.0}]}, "one of temperature, weights and uniform"),
        ({"languages": {"variants": ["raw", "nope"]}}, "languages.variants: nope is not a variant"),
        ({"languages": {"variants": ["raw"]}}, "at least two variants"),
        ({"task": {"sizes": [10, 0], "finetune": {"sizes": [25]}}}, "\\[25\\] are not among task.sizes"),
        ({"task": {"finetune_steps": 100}}, "fine-tuning is set in \\[task.finetune\\]"),
        ({"task": {"variants": ["nope"]}}, "task.variants: nope"),
    ],
)
def test_experiment_config_errors(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **change)


def test_eval_set_names_and_non_demo_need_held_out_text(tmp_path):
    path = tmp_path / "mine.parquet"
    pl.DataFrame({"text": ["x"]}).write_parquet(path)
    with pytest.raises(ConfigError, match="taken by the demo"):
        _config(tmp_path, eval_sets=[{"name": "news", "path": str(path)}])
    curation = tmp_path / "curation.toml"
    curation.write_text("")
    task = tmp_path / "task.parquet"  # a valid task: the file is checked with the config
    pl.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "text": ["w x", "y z", "w y", "x z"],
            "label": ["p", "q"] * 2,
            "split": ["train"] * 2 + ["test"] * 2,
        }
    ).write_parquet(task)
    with pytest.raises(ConfigError, match="eval_sets: name at least one held-out file"):
        _config(tmp_path, demo=False, curation=str(curation), task={"path": str(task)})


def test_bootstrap_over_seeds_and_items():
    """The paired bootstrap: a constant difference is found exactly; over several strata the
    statistic is the mean of each stratum's ratio; with identical seeds its interval is the test
    items' own sampling error."""
    from experiment.statistics import bootstrap_ratio_difference

    rng = np.random.default_rng(1)
    b = rng.uniform(1, 3, size=(3, 40))
    result = bootstrap_ratio_difference(b + 0.5, b, np.ones(40), np.zeros(40), replicates=500)
    assert result["difference"] == pytest.approx(0.5) and result["ci95"] == pytest.approx([0.5, 0.5])
    assert result["p"] == 0.0 and result["items"] == 40 and result["seeds"] == 3

    a = rng.uniform(1, 3, size=(3, 40))
    sizes = rng.uniform(1, 5, size=40)
    strata = np.repeat(["news", "web"], 20)
    expected = np.mean(
        [(a[:, s].sum(1).mean() - b[:, s].sum(1).mean()) / sizes[s].sum() for s in (slice(0, 20), slice(20, 40))]
    )
    result = bootstrap_ratio_difference(a, b, sizes, strata, replicates=200)
    assert result["difference"] == pytest.approx(expected)
    assert result["ci95"][0] <= result["difference"] <= result["ci95"][1]

    # 300 test items, two classifiers right half the time independently, the same on every seed:
    # the interval is the items' error, about 1.96 * sqrt(2 * 0.25 / 300) = 0.080 either side.
    right_a, right_b = rng.integers(0, 2, size=300), rng.integers(0, 2, size=300)
    result = bootstrap_ratio_difference(
        np.tile(right_a, (3, 1)).astype(float), np.tile(right_b, (3, 1)).astype(float), np.ones(300), np.zeros(300)
    )
    assert (result["ci95"][1] - result["ci95"][0]) / 2 == pytest.approx(0.080, rel=0.2)


def test_a_mixture_checked_before_is_read_back_until_its_manifest_changes(tmp_path, monkeypatch):
    """Each check is recorded with what it read: the same mixture against the same texts is not
    checked again (a search adds dozens of mixtures to a run), a changed manifest is."""
    config = _config(tmp_path)
    config.out_dir.mkdir(parents=True)
    runs = {}
    for name in ("raw", "full"):
        folder = tmp_path / name / "mix" / name
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({"mixture": name}))
        runs[name] = type("Run", (), {"run_dir": tmp_path / name})()
    checked = []

    def check(mixture, texts, tokenizer, **settings):
        checked.append(mixture.name)
        return {"contaminated_documents": 0, "contaminated_windows": 0, "texts": len(texts)}

    monkeypatch.setattr(prepare_module, "check_contamination", check)
    monkeypatch.setattr(prepare_module, "load_tokenizer", lambda path: None)
    protected = pl.DataFrame({"id": ["t"], "text": ["a text"]})

    def run(texts=protected):
        return prepare_module.check_mixtures(config, config.variants[:2], runs, texts, tmp_path / "tokenizer.json")

    first = run()
    assert checked == ["raw", "full"]
    assert run() == first and checked == ["raw", "full"]  # read back
    (tmp_path / "full" / "mix" / "full" / "manifest.json").write_text(json.dumps({"mixture": "other"}))
    run()
    assert checked == ["raw", "full", "full"]  # its mixture changed
    run(pl.DataFrame({"id": ["t"], "text": ["another text"]}))
    assert checked == ["raw", "full", "full", "raw", "full"]  # other protected texts
