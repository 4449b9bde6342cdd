"""A scaling-law sweep (``curate sweep``): the grid of runs (every model size of ``[sweep]`` on every
token budget, per variant and seed), each run's training config under the sweep's learning-rate
and warmup rule, and ``results.json``: each run's held-out loss, the fit of
L(N, D) = E + A / N^alpha + B / D^beta per variant with paired bootstrap comparisons against the
reference variant (:func:`experiment.scaling.compare_scaling_laws`), for N counted with
and without the token embedding.

Every run of one seed starts from the same initialization for a given model size whatever the
variant, and reads its own variant's mixture of exactly its budget; the grid is the same for every
variant, so variants are compared cell by cell.

The sweep's runs (:func:`sweep_runs`, longest first), what each variant's curation kept
(:func:`sweep_curation`), and results.json with what the runs took (:func:`save_sweep_results`)
are here too; ``flows.sweep`` runs them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiment.config import ExperimentConfig, SweepModel, budget_label
from experiment.heldout import EVAL_MIXTURE
from experiment.results import run_metrics
from experiment.scaling import compare_scaling_laws
from experiment.statistics import spread
from experiment.task_results import AGGREGATES, COMPARED, decision_accuracy, final_task_metrics
from pipeline.config import RunConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import MANIFEST_FILE
from pipeline.formats.stats import recorded_stats
from pipeline.io.writer import read_json, write_json

COUNTS = ("non_embedding", "total")  # how N is counted: without the token embedding (Kaplan), with it
KIND = "sweep"  # results.json's "kind", so a sweep and an experiment never share one folder's files


@dataclass(frozen=True)
class Cell:
    """One run of the grid."""

    variant: str
    model: SweepModel
    tokens: int  # the budget: the mixture's tokens and the run's max_tokens
    seed: int

    @property
    def mixture(self) -> str:
        return f"{self.variant}-{budget_label(self.tokens)}"

    @property
    def name(self) -> str:
        """The run's name in results.json and on Prefect: ``<variant>-<budget>/<model>``."""
        return f"{self.mixture}/{self.model.name}"

    def folder(self, out_dir: Path) -> Path:
        return out_dir / "train" / self.mixture / self.model.name / f"seed-{self.seed}"


def grid(config: ExperimentConfig) -> list[Cell]:
    """Every run of the sweep: variants (reference first), then models, budgets and seeds."""
    return [
        Cell(variant, model, tokens, seed)
        for variant in config.sweep_names()
        for model in config.sweep.models
        for tokens in config.sweep.tokens
        for seed in config.seeds
    ]


def learning_rate(config: ExperimentConfig, model: SweepModel) -> float:
    """The model's peak learning rate: its own, or ``train.optim.lr`` scaled by the sweep's rule
    (``inverse_width``: lr x reference_width / n_embd, the rule of muP for Adam's hidden weights,
    applied to every weight here)."""
    from trainer.config import ModelSection, OptimSection

    if model.lr is not None:
        return model.lr
    base = OptimSection(**(config.train.get("optim") or {})).lr
    if config.sweep.lr_rule == "constant":
        return base
    reference = config.sweep.reference_width or ModelSection(**(config.train.get("model") or {})).n_embd
    return base * reference / model.n_embd


def train_data(config: ExperimentConfig, cell: Cell, mixture: Path, heldout: Path) -> dict:
    """The training config (a dict for ``trainer.config.parse_train_config``) of one run: the
    experiment's ``train`` section with the cell's depth, width and heads, its budget as
    ``max_tokens``, the learning rate of :func:`learning_rate` decaying to ``min_lr_ratio`` of it
    by a cosine over the run's own steps, and a warmup of ``warmup_fraction`` of those steps."""
    from trainer.config import parse_train_config

    sweep = config.sweep
    lr = learning_rate(config, cell.model)
    data = {
        **config.train,
        "mixture": str(mixture),
        "out_dir": str(cell.folder(config.out_dir)),
        "seed": cell.seed,
        "eval_mixtures": {EVAL_MIXTURE: str(heldout)},
        "max_steps": None,
        "max_tokens": cell.tokens,
        "model": {
            **(config.train.get("model") or {}),
            "n_layer": cell.model.n_layer,
            "n_head": cell.model.n_head,
            "n_embd": cell.model.n_embd,
        },
    }
    steps = parse_train_config({**data, "optim": {**(config.train.get("optim") or {}), "lr": lr}}).total_steps()
    data["optim"] = {
        **(config.train.get("optim") or {}),
        "schedule": "cosine",
        "lr": lr,
        "min_lr": lr * sweep.min_lr_ratio,
        "warmup_steps": round(sweep.warmup_fraction * steps),
    }
    return data


def parameter_counts(summary: dict) -> dict[str, int]:
    """N of a trained model both ways: ``total`` (every weight, the tied embedding and head once)
    and ``non_embedding`` (less the token embedding and a learned position table)."""
    model = summary["model"]
    embedding = model["vocab_size"] * model["n_embd"]
    if model.get("positions") == "learned":
        embedding += model["block_size"] * model["n_embd"]
    return {"total": int(summary["parameters"]), "non_embedding": int(summary["parameters"] - embedding)}


def _cells(runs: list[dict], metric: str) -> list[dict]:
    """Per variant, model and budget: its runs' tokens, N and compute, the spread over seeds of
    ``metric``, and the mean over seeds of every metric all its runs measured (``metrics``)."""
    cells = []
    keyed: dict[tuple, list[dict]] = {}
    for run in runs:
        keyed.setdefault((run["variant"], run["model"], run["budget"]), []).append(run)
    for (variant, model, budget), seeds in keyed.items():
        values = spread({str(r["seed"]): r["metrics"].get(metric) for r in seeds})
        first = seeds[0]
        cells.append(
            {
                "variant": variant,
                "model": model,
                "budget": budget,
                "tokens": first["tokens"],
                "parameters": first["parameters"],
                "flops": first["flops"],
                metric: values,
                "metrics": {
                    key: float(np.mean([r["metrics"][key] for r in seeds]))
                    for key in first["metrics"]
                    if all(r["metrics"].get(key) is not None for r in seeds)
                },
            }
        )
    return cells


def summarize_sweep(
    config: ExperimentConfig,
    summaries: dict[Cell, dict],
    eval_groups: dict[str, dict],
    curation: dict[str, dict],
    contamination: dict,
    metric: str = "heldout_bpb",
) -> dict:
    """results.json of a sweep: ``runs`` (each run's shape, learning rate, tokens, N both ways,
    compute and held-out losses), ``cells`` (per variant, model and budget: the mean over seeds),
    and ``fits[count]`` for each way of counting N: :func:`compare_scaling_laws` on the cells'
    mean ``metric``, the first variant the reference. ``headline`` names the count of
    ``sweep.parameters``; compute is C = 6 N D with each count."""
    sweep = config.sweep
    runs = []
    order = {cell: k for k, cell in enumerate(grid(config))}
    for cell, summary in sorted(summaries.items(), key=lambda item: order[item[0]]):
        counts = parameter_counts(summary)
        metrics = {**run_metrics(summary, eval_groups), **final_task_metrics(summary)}
        config_used = summary["config"]
        runs.append(
            {
                "name": cell.name,
                "variant": cell.variant,
                "model": cell.model.name,
                "budget": cell.tokens,
                "seed": cell.seed,
                "n_layer": cell.model.n_layer,
                "n_embd": cell.model.n_embd,
                "n_head": cell.model.n_head,
                "lr": config_used["optim"]["lr"],
                "warmup_steps": config_used["optim"]["warmup_steps"],
                "steps": summary["steps"],
                "tokens": summary["tokens"],
                "epochs": summary.get("epochs"),
                "parameters": counts,
                "flops": {count: 6.0 * counts[count] * summary["tokens"] for count in COUNTS},
                "metrics": metrics,
                "wall_time_s": summary.get("wall_time_s"),
            }
        )
    cells = _cells(runs, metric)
    names = config.sweep_names()
    fits = {}
    for count in COUNTS:
        table = {}
        for name in names:
            own = [c for c in cells if c["variant"] == name]
            table[name] = (
                [c["parameters"][count] for c in own],
                [c["tokens"] for c in own],
                [c[metric]["mean"] for c in own],
            )
        # Default budgets: the smallest, the middle (geometric) and the largest compute of the grid.
        low, high = min(c["flops"][count] for c in cells), max(c["flops"][count] for c in cells)
        flops = sweep.flops or [low, math.sqrt(low * high), high]
        curve = np.geomspace(low / 3, high * 3, 25)
        fits[count] = compare_scaling_laws(table, flops=flops, resamples=sweep.resamples, seed=config.seed, curve=curve)
    return {
        "kind": KIND,
        "config": config.model_dump(mode="json"),
        "metric": metric,
        "variants": names,
        "reference": names[0],
        "models": [m.model_dump() for m in sweep.models],
        "budgets": list(sweep.tokens),
        "seeds": list(config.seeds),
        "headline": sweep.parameters,
        "curation": curation,
        "contamination": contamination,
        "runs": runs,
        "cells": cells,
        "fits": fits,
        "proxy": _proxy(cells, names, sweep.parameters),
        "how": (
            f"L(N, D) = E + A / N^alpha + B / D^beta fitted per variant to the mean over seeds of each run's {metric} "
            "(held-out bits per byte, the mean over the clean held-out sets): Huber loss (delta 1e-3) on log L, "
            "L-BFGS-B from 72 starts (Hoffmann et al. 2022, approach 3). Intervals: percentiles of "
            f"{sweep.resamples} bootstrap fits over grid cells, the same cells for every variant (paired). "
            "Compute C = 6 N D; the compute-optimal N and D minimize the fit along C's iso-FLOP line."
        ),
    }


def residuals(fit: dict, cells: list[dict], variant: str, count: str, metric: str) -> list[dict]:
    """Each cell of ``variant``: its loss, the fit's prediction and the difference."""
    from experiment.scaling import ScalingFit

    law = ScalingFit(**fit)
    rows = []
    for cell in cells:
        if cell["variant"] != variant:
            continue
        predicted = float(law.predict(cell["parameters"][count], cell["tokens"]))
        rows.append({**cell, "predicted": predicted, "residual": cell[metric]["mean"] - predicted})
    return rows


def rms(values) -> float:
    array = np.asarray(list(values), dtype=np.float64)
    return float(np.sqrt(np.mean(array**2))) if array.size else float("nan")


# ---------------------------------------------------------------------------------------------
# The sweep's runs and files


def refuse_experiment_folder(config: ExperimentConfig) -> None:
    """A :class:`ConfigError` when ``out_dir`` holds an experiment's results (a sweep and an
    experiment never share a folder's files)."""
    results_path = config.out_dir / "results.json"
    if results_path.exists() and read_json(results_path).get("kind") != KIND:
        raise ConfigError(
            f"out_dir: {config.out_dir} holds an experiment's results; give the sweep an out_dir of its own"
        )


def _proxy(cells: list[dict], names: list[str], count: str) -> dict:
    """Which small cells order the variants as the largest does, per metric: held-out bits per
    byte, and where the runs scored the curve items, the tasks' aggregates and each task's
    ``acc_norm`` and ``gold_bpb`` (experiment.task_results.decision_accuracy)."""
    measured = set.intersection(*(set(c["metrics"]) for c in cells)) if cells else set()
    metrics = ["heldout_bpb", *[m for m in AGGREGATES if m in measured]]
    metrics += sorted(m for m in measured if m.startswith("task/") and m.rsplit("/", 1)[1] in COMPARED)
    table = [{**c, "parameters": c["parameters"][count], "flops": c["flops"][count]} for c in cells]
    return decision_accuracy(table, [m for m in metrics if m in measured], names)


def sweep_runs(
    config: ExperimentConfig, runs: dict[str, RunConfig], heldout: Path, curve_tasks: Path | None = None
) -> dict[tuple[str, int], tuple]:
    """Every run of the grid by ``(name, seed)``: its :class:`Cell` and its training config, on its
    variant's mixture of its budget, scoring ``curve_tasks`` at its evaluations (the proxy
    table's task metrics). The longest runs come first, so that runs side by side end together
    (the matmuls' parameters, the head's included, times the tokens)."""
    from trainer.config import parse_train_config

    planned = {}
    vocab = config.tokenizer.vocab_size
    for cell in sorted(
        grid(config), key=lambda c: -c.tokens * c.model.n_embd * (12 * c.model.n_layer * c.model.n_embd + vocab)
    ):
        mixture = RunLayout(runs[cell.mixture].run_dir).root / "mix" / cell.mixture
        data = train_data(config, cell, mixture, heldout)
        data["eval_tasks"] = [str(curve_tasks)] if curve_tasks is not None else []
        planned[(cell.name, cell.seed)] = (cell, parse_train_config(data))
    return planned


def sweep_curation(config: ExperimentConfig, runs: dict[str, RunConfig]) -> dict[str, dict]:
    """Per variant of the sweep: what its curation kept (the funnel) and, per budget, the tokens its
    pool holds, the tokens its mixture takes and the most epochs of any group."""
    info = {}
    for name in config.sweep_names():
        mixtures = {budget: f"{name}-{budget_label(budget)}" for budget in config.sweep.tokens}
        layout = RunLayout(runs[mixtures[config.sweep.tokens[0]]].run_dir)
        stages = recorded_stats(read_json(layout.manifest))
        budgets = {}
        for budget, mixture in mixtures.items():
            manifest = read_json(layout.root / "mix" / mixture / MANIFEST_FILE)
            budgets[str(budget)] = {
                "mixture": str(layout.root / "mix" / mixture),
                "tokens_available": sum(g["tokens_available"] for g in manifest["groups"].values()),
                "tokens_taken": manifest["tokens_taken"],
                "max_epochs": max(g["epochs"] for g in manifest["groups"].values()),
            }
        info[name] = {
            "run_dir": str(layout.root),
            "funnel": {stage: s.funnel() for stage, s in stages.items()},
            "budgets": budgets,
        }
    return info


def save_sweep_results(config: ExperimentConfig, results: dict, timing: dict, summaries: dict) -> None:
    """``out_dir/results.json``: ``results`` with ``timing``, the steps' times and what the runs
    took when they ran (``summaries``: each cell's training summary)."""
    timing["training_runs_s"] = sum(s["wall_time_s"] for s in summaries.values())
    timing["parallel_runs"] = config.parallel_runs
    results["timing"] = timing
    write_json(results, config.out_dir / "results.json")
