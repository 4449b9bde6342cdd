"""What an experiment's runs left, gathered into ``results.json``: what each variant's curation
kept and trained on (:func:`curation_summary`), the training and held-out curves
(:func:`training_curves`), the canaries' header (:func:`canary_info`), the results
(:func:`experiment_results`, through :func:`experiment.results.summarize`) and what the steps and
the runs took (:func:`save_results`).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from experiment.config import ExperimentConfig
from experiment.heldout import EVAL_MIXTURE, canary_views, heldout_provenance, trained_on
from experiment.prepare import Prepared
from experiment.results import heldout_scores, results_json, summarize
from experiment.runs import train_folder
from pipeline.config import RunConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import MANIFEST_FILE, PLAN_FILE
from pipeline.formats.stats import recorded_stats
from pipeline.formats.tokens import file_sha256
from pipeline.io.writer import read_json, write_text
from pipeline.stages.registry import last_document_stage


def refuse_sweep_folder(config: ExperimentConfig) -> None:
    """A :class:`ConfigError` when ``out_dir`` holds a sweep's results (an experiment and a sweep
    never share a folder's files)."""
    if (config.out_dir / "results.json").exists() and read_json(config.out_dir / "results.json").get("kind"):
        raise ConfigError(
            f"out_dir: {config.out_dir} holds a sweep's results; give the experiment an out_dir of its own"
        )


def experiment_results(config: ExperimentConfig, prepared: Prepared, models: dict[str, dict]) -> dict:
    """results.json's content (timing aside) from what was prepared and every run's result
    (``models``: ``{kind: {model: {seed: result}}}``, kind pretrain, transfer, and memorization,
    scores and tasks when they ran)."""
    summaries, transfer = models["pretrain"], models["transfer"]
    memorization, scores = models.get("memorization", {}), models.get("scores", {})
    tasks = models.get("tasks", {})
    curation = curation_info(config, prepared.runs, prepared.corpus)
    curves = training_curves(config, summaries, prepared.eval_manifest)
    return summarize(
        config,
        curation,
        summaries,
        transfer,
        prepared.eval_manifest,
        heldout_provenance(prepared.texts, prepared.origins, prepared.eval_manifest),
        prepared.contamination,
        curves,
        memorization=memorization or None,
        canaries=canary_info(prepared.canaries_path, prepared.runs, memorization) if memorization else None,
        scores={
            name: {seed: pl.read_parquet(result["path"]) for seed, result in seeds.items()}
            for name, seeds in scores.items()
        },
        tasks=tasks or None,
        task_items={
            name: {seed: pl.read_parquet(config.out_dir / "tasks" / name / f"seed-{seed}.parquet") for seed in seeds}
            for name, seeds in tasks.items()
        },
    )


def demo_labels(corpus: Path | None) -> pl.DataFrame | None:
    """The demo corpus's ground truth, ``id, kind`` (a document's id is ``<source>/<key>``); None
    off the demo."""
    if corpus is None:
        return None
    return pl.read_parquet(corpus / "labels.parquet", columns=["source", "key", "kind"]).select(
        id=pl.col("source") + "/" + pl.col("key"), kind="kind"
    )


def curation_info(config: ExperimentConfig, runs: dict[str, RunConfig], corpus: Path | None) -> dict:
    """Per variant: its stages and what its curation kept and its mixture trained on."""
    labels = demo_labels(corpus)
    return {
        v.name: {
            "stages": list(v.stages) + (["quality"] if v.quality else []),
            **curation_summary(runs[v.name], v.name, labels),
        }
        for v in config.variants
    }


def curation_summary(run: RunConfig, variant: str, labels: pl.DataFrame | None) -> dict:
    """A variant's curation run and mixture: the funnel, the documents in, curated and mixed, the
    tokenizer, what it trained on, its tokens, licences and groups."""
    layout = RunLayout(run.run_dir)
    manifest = read_json(layout.root / "mix" / variant / MANIFEST_FILE)
    pool = pl.read_parquet(layout.root / "mix" / "documents.parquet")
    plan = pl.read_parquet(layout.root / "mix" / variant / PLAN_FILE)
    stages = recorded_stats(read_json(layout.manifest))
    return {
        "run_dir": str(run.run_dir),
        "funnel": {name: s.funnel() for name, s in stages.items()},
        "documents_in": stages["source"].docs_out,
        "documents_curated": stages[last_document_stage(stages)].docs_out,
        "documents_mixed": stages["mix"].train_documents,
        "mixture": str(layout.root / "mix" / variant),
        "tokenizer_sha256": manifest["tokenizer"]["sha256"],
        "trained_on": trained_on(pool, plan, labels),
        "tokens_available": sum(g["tokens_available"] for g in manifest["groups"].values()),
        "tokens_taken": manifest["tokens_taken"],
        # Training tokens per licence (every copy of a repeated document) and their share.
        "licences": {
            licence: {"tokens": v["tokens_taken"], "share": v["tokens_taken"] / max(1, manifest["tokens_taken"])}
            for licence, v in manifest.get("licences", {}).items()
            if v["tokens_taken"]
        },
        "groups": {
            name: {
                key: g[key]
                for key in ("tokens_available", "tokens_taken", "epochs", "effective_weight", "documents_available")
            }
            for name, g in manifest["groups"].items()
        },
    }


def training_curves(config: ExperimentConfig, summaries: dict, eval_manifest: dict) -> dict:
    """Per model and seed, every metrics.csv row as a :func:`curve_row`."""
    from trainer.metrics import read_metrics

    return {
        name: {
            str(seed): [
                curve_row(row, summaries[name][seed], eval_manifest["groups"])
                for row in read_metrics(train_folder(config.out_dir, name, seed))
            ]
            for seed in config.seeds
        }
        for name in summaries
    }


def curve_row(row: dict, summary: dict, eval_groups: dict) -> dict:
    """A metrics.csv row for the curves: step, tokens, training loss, own validation and held-out
    bits per byte (the headline: every evaluation reads the same tokens of each group as the last,
    whose token counts weigh the groups), and the curve items' scores where the run had them
    (``tasks_core``, ``tasks_gold_bpb``, ``task_acc_norm/<task>``, ``task_gold_bpb/<task>``)."""
    final = summary.get("final_eval", {}).get(EVAL_MIXTURE, {}).get("groups", {})
    groups = {
        g: {"bpb": row.get(f"{EVAL_MIXTURE}_bpb/{g}"), "tokens": v.get("tokens")}
        for g, v in final.items()
        if row.get(f"{EVAL_MIXTURE}_bpb/{g}") is not None
    }
    scores = heldout_scores(groups, eval_groups) if groups else {}
    return {
        **{key: row.get(key) for key in ("step", "tokens_seen", "train_loss", "val_bpb")},
        "heldout_bpb": scores.get("heldout_bpb"),
        **{key: value for key, value in row.items() if key.startswith("task") and value is not None},
    }


def canary_info(path: Path, runs: dict[str, RunConfig], memorization: dict) -> dict:
    """results.json's ``memorization`` header: the canaries (file, how many per occurrence count),
    the cut, and how often each variant's mixture trains on them (with ``pool_ids``)."""
    canaries = pl.read_parquet(path)
    counts = canaries.group_by("occurrences").len().sort("occurrences")
    some = next(result for seeds in memorization.values() for result in seeds.values())  # the cut is the same for all
    info = {
        "file": str(path),
        "sha256": file_sha256(path),
        "canaries": {("control" if n == 0 else str(n)): int(k) for n, k in counts.iter_rows()},
        "prefix_tokens": some["prefix_tokens"],
        "suffix_tokens": some["suffix_tokens"],
        "too_short": some["too_short"],
        "reference": "control canaries (each control against the others)",
    }
    if "pool_ids" in canaries.columns:
        info["trained"] = {
            name: canary_views(canaries, pl.read_parquet(RunLayout(run.run_dir).root / "mix" / name / PLAN_FILE))
            for name, run in runs.items()
        }
    return info


def save_results(config: ExperimentConfig, results: dict, timing: dict, models: dict[str, dict]) -> None:
    """``out_dir/results.json``: ``results`` with ``timing``, the steps' times (``total_s`` last)
    and what the runs took when they ran (an invocation that resumes reuses finished runs untimed)."""
    summaries, transfer = models["pretrain"], models["transfer"]
    memorization, scores = models.get("memorization", {}), models.get("scores", {})
    timing["pretraining_runs_s"] = sum(s["wall_time_s"] for runs in summaries.values() for s in runs.values())
    timing["transfer_runs_s"] = sum(t.get("seconds", 0.0) for runs in transfer.values() for t in runs.values())
    timing["memorization_runs_s"] = sum(m.get("seconds", 0.0) for runs in memorization.values() for m in runs.values())
    timing["scoring_runs_s"] = sum(m.get("seconds", 0.0) for runs in scores.values() for m in runs.values())
    tasks = models.get("tasks", {})
    timing["task_runs_s"] = sum(m.get("seconds", 0.0) for runs in tasks.values() for m in runs.values())
    timing["parallel_runs"] = config.parallel_runs
    results["timing"] = timing
    write_text(results_json(results), config.out_dir / "results.json")
