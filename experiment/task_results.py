"""The multiple-choice tasks' numbers in the results: each run's metrics (:func:`task_metrics`),
the per-item values the paired bootstrap over seeds and items reads (:func:`task_item_values`),
and what the tasks were (:func:`tasks_info`: items, chance, files and their sha256)."""

from __future__ import annotations

import numpy as np
import polars as pl

TASK_MEASURES = ("acc", "acc_norm", "acc_pmi", "centred_acc_norm", "gold_bpb", "margin_bpb", "top_answer_share")
COMPARED = ("acc_norm", "gold_bpb")  # per task: the accuracy (per byte) and the continuous measure
AGGREGATES = ("tasks/core", "tasks/gold_bpb")


def task_metrics(result: dict) -> dict[str, float]:
    """``task/<task>/<measure>`` for every task and :data:`TASK_MEASURES`, ``task/<task>/<group>/
    acc_norm`` and ``.../gold_bpb`` per group, and the aggregates ``tasks/core`` (CORE's mean centred
    accuracy) and ``tasks/gold_bpb`` (the mean over tasks of the gold choice's bits per byte) of
    one model's scored tasks (experiment.runs.score_tasks)."""
    metrics = {}
    for task, m in result["tasks"].items():
        for measure in TASK_MEASURES:
            metrics[f"task/{task}/{measure}"] = m[measure]
        for group, g in m.get("groups", {}).items():
            for measure in COMPARED:
                metrics[f"task/{task}/{group}/{measure}"] = g[measure]
    metrics["tasks/core"] = result["aggregate"]["core"]
    metrics["tasks/gold_bpb"] = result["aggregate"]["gold_bpb"]
    return metrics


def task_item_values(metric: str, items: dict[str, pl.DataFrame] | None):
    """``(seed -> per-item values, item ids, denominators, strata)`` behind a task metric
    (``task/<task>/acc_norm`` or ``.../gold_bpb``: one stratum; ``tasks/gold_bpb``: each task a
    stratum, as the aggregate counts each task once) from one model's per-item scores by seed,
    for experiment.statistics.bootstrap_ratio_difference; None for other metrics."""
    if not items:
        return None
    parts = metric.split("/")
    if metric == "tasks/gold_bpb":
        task, measure = None, "gold_bpb"
    elif len(parts) == 3 and parts[0] == "task" and parts[2] in COMPARED:
        task, measure = parts[1], parts[2]
    else:
        return None
    values = {}
    for seed, frame in items.items():
        part = frame if task is None else frame.filter(pl.col("task") == task)
        values[str(seed)] = part.sort("id")
    first = next(iter(values.values()))
    if first.height == 0:
        return None
    return (
        {seed: frame[measure].cast(pl.Float64).to_numpy() for seed, frame in values.items()},
        first["id"].to_list(),
        np.ones(first.height),
        first["task"].to_numpy(),
    )


def tasks_info(results: dict[str, dict[int, dict]]) -> dict | None:
    """results.json's ``tasks``: per task its items, chance rate, contexts cut to fit, groups, and
    the files scored with their sha256 (the same for every run)."""
    some = next((r for seeds in results.values() for r in seeds.values()), None)
    if some is None:
        return None
    return {
        "tasks": {
            task: {
                "items": m["items"],
                "chance": m["chance"],
                "majority": m.get("majority"),
                "truncated": m["truncated"],
                "groups": sorted(m.get("groups", {})),
            }
            for task, m in some["tasks"].items()
        },
        "files": some["files"],
    }


# Signal per task (FineWeb and FineWeb-2's task selection): a measure carries signal at this scale
# when it improves monotonically over training and the gap between recipes stands above the
# spread over seeds.
MONOTONIC = 0.5  # Spearman's rho between step and score, at least
SNR = 2.0  # a variant's gap over the baseline, over the seeds' standard deviation, at least


def _curve_key(measure: str) -> str:
    """The metrics.csv column of a measure: ``task/<t>/acc_norm`` -> ``task_acc_norm/<t>``,
    ``tasks/core`` -> ``tasks_core``."""
    if measure.startswith("tasks/"):
        return measure.replace("/", "_")
    _, task, name = measure.split("/")
    return f"task_{name}/{task}"


def _monotonicity(rows: list[dict], key: str, lower: bool) -> float | None:
    """Spearman's rho between step and the curve's score, signed so that improving is positive;
    0 for a constant score; None with fewer than three points."""
    from scipy import stats

    points = [(row["step"], row[key]) for row in rows if row.get(key) is not None]
    if len(points) < 3:
        return None
    values = [value for _, value in points]
    if max(values) == min(values):
        return 0.0
    rho = float(stats.spearmanr([step for step, _ in points], values).statistic)
    return -rho if lower else rho


def task_signal(metrics: dict, curves: dict, variants: list[str], baseline: str) -> dict:
    """Per measure (the aggregates, each task's ``acc_norm`` and ``gold_bpb``): ``monotonicity``,
    the mean over every variant's and seed's curve (the curve items) of :func:`_monotonicity`;
    ``spread``, the mean over variants of the seeds' standard deviation of the final score (every
    item); per variant other than the baseline its ``gap`` over the baseline (positive: better)
    and ``snr``, the gap over the spread; and ``signal``, whether the measure is monotonic
    (:data:`MONOTONIC`) and some variant's SNR reaches :data:`SNR`."""
    measures = [m for m in AGGREGATES if m in metrics]
    measures += [m for m in metrics if m.startswith("task/") and m.count("/") == 2 and m.rsplit("/", 1)[1] in COMPARED]
    found = {}
    for measure in measures:
        lower = "bpb" in measure
        values = metrics[measure]
        runs = [rows for name in variants for rows in curves.get(name, {}).values()]
        rhos = [r for r in (_monotonicity(rows, _curve_key(measure), lower) for rows in runs) if r is not None]
        spreads = [values[v]["std"] for v in variants if v in values and values[v]["n"] > 1]
        spread = float(np.mean(spreads)) if spreads else None
        gaps = {}
        for name in variants:
            if name != baseline and name in values and baseline in values:
                gap = values[name]["mean"] - values[baseline]["mean"]
                gap = -gap if lower else gap
                gaps[name] = {"gap": gap, "snr": gap / spread if spread else None}
        monotonicity = float(np.mean(rhos)) if rhos else None
        best = max((g["snr"] for g in gaps.values() if g["snr"] is not None), default=None)
        found[measure] = {
            "monotonicity": monotonicity,
            "curves": len(rhos),
            "spread": spread,
            "variants": gaps,
            "signal": bool(monotonicity is not None and monotonicity >= MONOTONIC and best is not None and best >= SNR),
        }
    return found


def final_task_metrics(summary: dict) -> dict[str, float]:
    """A training run's curve-item scores at its last evaluation (its summary's ``final_tasks``) as
    results metrics: ``tasks/core``, ``tasks/gold_bpb``, ``task/<task>/acc_norm``, ``.../gold_bpb``."""
    found = {}
    for key, value in (summary.get("final_tasks") or {}).items():
        if key in ("tasks_core", "tasks_gold_bpb"):
            found[key.replace("_", "/", 1)] = value
        elif key.startswith("task_"):
            name, task = key[len("task_") :].split("/", 1)
            found[f"task/{task}/{name}"] = value
    return found


def decision_accuracy(cells: list[dict], metrics: list[str], variants: list[str]) -> dict:
    """Proxy validity (DataDecide, Magnusson et al. 2025): the largest cell of the grid (the
    largest model at the largest budget) is the target; at every cell, per metric, the share of
    variant pairs ordered as at the target (a tie counts half; a pair tied at the target is left
    out). ``cells``: ``{"variant", "model", "budget", "flops", "parameters", "metrics": {metric:
    mean over seeds}}``, ``parameters`` and ``flops`` as numbers (N as the sweep's headline counts
    it)."""
    from itertools import combinations

    by_cell: dict[tuple, dict[str, dict]] = {}
    for cell in cells:
        by_cell.setdefault((cell["model"], cell["budget"]), {})[cell["variant"]] = cell
    target = max(by_cell, key=lambda k: (next(iter(by_cell[k].values()))["parameters"], k[1]))
    pairs = list(combinations(variants, 2))
    found: dict[str, list[dict]] = {}
    for metric in metrics:
        lower = "bpb" in metric or "loss" in metric
        goal = by_cell[target]
        rows = []
        for key, sides in sorted(by_cell.items(), key=lambda item: next(iter(item[1].values()))["flops"]):
            scores = []
            for a, b in pairs:
                values = [sides.get(v, {}).get("metrics", {}).get(metric) for v in (a, b)]
                aims = [goal.get(v, {}).get("metrics", {}).get(metric) for v in (a, b)]
                if None in values or None in aims or aims[0] == aims[1]:
                    continue
                better = (values[0] < values[1]) if lower else (values[0] > values[1])
                aimed = (aims[0] < aims[1]) if lower else (aims[0] > aims[1])
                scores.append(0.5 if values[0] == values[1] else float(better == aimed))
            rows.append(
                {
                    "model": key[0],
                    "budget": key[1],
                    "flops": next(iter(sides.values()))["flops"],
                    "target": key == target,
                    "pairs": len(scores),
                    "accuracy": float(np.mean(scores)) if scores else None,
                }
            )
        found[metric] = rows
    return {"target": {"model": target[0], "budget": target[1]}, "pairs": len(pairs), "metrics": found}
