"""The multiple-choice tasks' numbers in the results: each run's metrics (:func:`task_metrics`),
the per-item values the paired bootstrap over seeds and items reads (:func:`task_item_values`),
and what the tasks were (:func:`tasks_info`: items, chance, files and their sha256)."""

from __future__ import annotations

import numpy as np
import polars as pl

TASK_MEASURES = ("acc", "acc_norm", "centred_acc_norm", "gold_bpb", "margin_bpb", "top_answer_share")
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
