"""The results: each run's metrics (held-out bits per byte, transfer, memorization, languages), the
data-efficiency multiplier, the families of comparisons and results.json (:func:`summarize`)."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import polars as pl
from scipy import stats

from experiment.config import ExperimentConfig, budget_label
from experiment.heldout import EVAL_MIXTURE
from experiment.statistics import (
    ALPHA,
    PRE_REGISTERED,
    PRIMARY,
    bootstrap_ratio_difference,
    compare,
    fit_power_law,
    holm,
    pre_register,
    pre_registered,
    sentence,
    spread,
    tokens_to_reach,
)
from experiment.task_results import (
    AGGREGATES,
    COMPARED,
    MONOTONIC,
    SNR,
    task_item_values,
    task_metrics,
    task_signal,
    tasks_info,
)
from pipeline.formats.langcodes import language_of


def _size_label(size: str) -> str:
    return "all" if size == "0" else size


def heldout_scores(groups: dict[str, dict], eval_groups: dict[str, dict]) -> dict[str, float]:
    """Bits per byte on the held-out sets from one evaluation's groups (``{group: {"bpb", "tokens"}}``,
    the trainer's): ``heldout_bpb/<set>/<group>`` as evaluated; ``heldout_bpb/<set>``, the set's bits
    over its bytes (each group's evaluated tokens stand for tokens x bytes/token of its text); and
    the headline ``heldout_bpb``, the mean over the clean sets (each set counts once, whatever its
    size; sets with ``clean`` false, the junk, are reported on their own only)."""
    metrics: dict[str, float] = {}
    bits: dict[str, float] = {}
    size: dict[str, float] = {}
    for group, values in groups.items():
        info = eval_groups.get(group)
        if info is None or values.get("bpb") is None or not math.isfinite(values["bpb"]) or not values.get("tokens"):
            continue
        metrics[f"heldout_bpb/{group}"] = values["bpb"]
        represented = values["tokens"] * info["validation_bytes"] / info["validation_tokens"]
        bits[info["set"]] = bits.get(info["set"], 0.0) + values["bpb"] * represented
        size[info["set"]] = size.get(info["set"], 0.0) + represented
    clean = {info["set"] for info in eval_groups.values() if info.get("clean", True)}
    per_set = {name: bits[name] / size[name] for name in sorted(bits) if size[name]}
    for name, value in per_set.items():
        metrics[f"heldout_bpb/{name}"] = value
    headline = [value for name, value in per_set.items() if name in clean]
    metrics["heldout_bpb"] = sum(headline) / len(headline) if headline else None
    return metrics


def run_metrics(summary: dict, eval_groups: dict[str, dict]) -> dict[str, float]:
    """The held-out numbers of one pretraining run (a trainer summary)."""
    heldout = summary.get("final_eval", {}).get(EVAL_MIXTURE, {})
    return {**heldout_scores(heldout.get("groups", {}), eval_groups), "own_validation_bpb": summary["final"].get("bpb")}


def transfer_summary(transfer: dict[str, dict[int, dict]]) -> dict:
    """What the transfer runs measured on: labelled pool, dev and test sizes, draws, and the
    labelled-set sizes of each method in curve order (smallest first, ``all`` last), with the
    number of labelled examples each stands for."""
    results = [result for seeds in transfer.values() for result in seeds.values()]
    if not results:
        return {}
    sizes: dict[str, list[str]] = {}
    examples: dict[str, int] = {}
    for result in results:
        for method in TRANSFER_METHODS:
            ordered = sorted(result.get(method, {}), key=lambda n: int(n) or math.inf)
            if ordered:
                sizes[method] = [_size_label(n) for n in ordered]
                examples.update({_size_label(n): result[method][n]["n"] for n in ordered})
    first = next((r for r in results if "probe" in r), results[0])
    settings = first.get("settings", {})
    return {
        "pool_examples": first.get("pool_examples"),
        "dev_examples": first.get("dev_examples"),
        "test_examples": first.get("test_examples"),
        "labels": first.get("labels"),
        "chance": first.get("chance"),
        "majority": first.get("majority"),
        "draws": settings.get("draws"),
        "finetune_draws": settings.get("finetune_draws") if "finetune" in sizes else None,
        "sizes": {method: sizes[method] for method in TRANSFER_METHODS if method in sizes},
        "examples": examples,
    }


def paired_difference(a: dict, b: dict) -> dict[str, float]:
    """Seed by seed, ``a - b`` (two :func:`spread` results) over the seeds both have."""
    return {seed: value - b["by_seed"][seed] for seed, value in a["by_seed"].items() if seed in b["by_seed"]}


TRANSFER_METHODS = ("probe", "finetune", "bow")  # bow: the bag-of-words reference line


def transfer_metrics(results: dict) -> dict[str, float]:
    """``probe_accuracy@50``, ``finetune_loss@all``, ``bow_accuracy@10``, ``probe_balacc@10`` (the
    balanced accuracy, reported beside the accuracy and not tested again), ... of one transfer
    result (each size's mean over its draws)."""
    metrics = {}
    for method in TRANSFER_METHODS:
        for size, scores in results.get(method, {}).items():
            metrics[f"{method}_accuracy@{_size_label(size)}"] = scores["accuracy"]
            if "balanced_accuracy" in scores:
                metrics[f"{method}_balacc@{_size_label(size)}"] = scores["balanced_accuracy"]
            metrics[f"{method}_loss@{_size_label(size)}"] = scores["loss"]
    return metrics


def _item_values(metric: str, model: str, scores: dict, transfer: dict, task_items: dict):
    """``(seed -> per-item numerators, item ids, denominators, strata)`` behind ``metric`` for
    ``model``, for :func:`bootstrap_ratio_difference`; None when the measure has no items kept
    (a held-out group, a loss) or the model has none."""
    if metric.startswith("task"):
        return task_item_values(metric, task_items.get(model))
    if metric == "heldout_bpb" or (metric.startswith("heldout_bpb/") and metric.count("/") == 1):
        runs = scores.get(model)
        if not runs:
            return None
        chosen = None if metric == "heldout_bpb" else metric.split("/")[1]
        values = {}
        for seed, frame in runs.items():
            part = frame.filter(pl.col("clean") if chosen is None else pl.col("set") == chosen)
            part = part.filter(pl.col("bytes") > 0).sort("id")
            values[str(seed)] = part
        first = next(iter(values.values()))
        if first.height == 0:
            return None
        return (
            {seed: (frame["nats"] / math.log(2)).to_numpy() for seed, frame in values.items()},
            first["id"].to_list(),
            first["bytes"].to_numpy().astype(np.float64),
            first["set"].to_numpy(),
        )
    method, _, size = metric.partition("_accuracy@")
    if not size or model not in transfer:
        return None
    key = "0" if size == "all" else size
    correct = {
        str(seed): result.get(method, {}).get(key, {}).get("correct") for seed, result in transfer[model].items()
    }
    if not correct or any(v is None for v in correct.values()):
        return None
    items = len(next(iter(correct.values())))
    return (
        {seed: np.asarray(v, dtype=np.float64) for seed, v in correct.items()},
        list(range(items)),
        np.ones(items),
        np.zeros(items, dtype=np.int64),
    )


def _paired_bootstrap(a, b) -> dict | None:
    """:func:`bootstrap_ratio_difference` over the seeds and items both sides have."""
    seeds = sorted(set(a[0]) & set(b[0]))
    if len(seeds) < 2 or a[1] != b[1]:
        return None
    return bootstrap_ratio_difference(
        np.stack([a[0][s] for s in seeds]), np.stack([b[0][s] for s in seeds]), a[2], a[3]
    )


# ---------------------------------------------------------------------------------------------
# Data efficiency


def data_efficiency(config: ExperimentConfig, per_run: dict[str, dict[str, dict]], metric: str = "heldout_bpb") -> dict:
    """results.json's ``data_efficiency``: per variant of ``efficiency.variants`` and seed, the
    held-out loss at each budget and its power-law fit; per variant after the first (the
    reference), the data multiplier: the reference's tokens at the largest budget over the tokens
    the variant's fit needs to reach the reference's loss there, per seed, with its geometric mean
    and a 95% interval over seeds (Student's t on the logarithms). ``extrapolated`` when the tokens
    needed lie outside the budgets measured."""
    if not config.efficiency.budgets:
        return {}
    names = config.efficiency.variants
    derived = {v.name: v for v in config.efficiency_variants()}
    budgets = sorted({config.budget_tokens, *config.efficiency.budgets})

    def run_name(variant: str, budget: int) -> str:
        return variant if budget == config.budget_tokens else f"{variant}-{budget_label(budget)}"

    points: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for variant in names:
        for budget in budgets:
            name = run_name(variant, budget)
            if name != variant and name not in derived:
                continue
            for seed, run in per_run.get(name, {}).items():
                if run.get(metric) is not None:
                    points.setdefault(variant, {}).setdefault(seed, []).append((int(run["tokens"]), float(run[metric])))
    fits = {
        variant: {
            seed: {"points": sorted(found), "fit": fit_power_law(*zip(*sorted(found)))} for seed, found in seeds.items()
        }
        for variant, seeds in points.items()
    }
    reference = names[0]
    multipliers = {}
    for variant in names[1:]:
        by_seed, extrapolated = {}, False
        for seed, entry in fits.get(variant, {}).items():
            own = fits.get(reference, {}).get(seed)
            if own is None or entry["fit"] is None:
                continue
            largest_tokens, target = own["points"][-1]
            needed = tokens_to_reach(entry["fit"], target)
            if needed is None:
                continue
            by_seed[seed] = largest_tokens / needed
            measured = [t for t, _ in entry["points"]]
            extrapolated |= not (min(measured) <= needed <= max(measured))
        logs = np.log(np.array(list(by_seed.values()))) if by_seed else np.zeros(0)
        summary = {
            "by_seed": by_seed,
            "n": len(by_seed),
            "extrapolated": extrapolated,
            "geomean": float(np.exp(logs.mean())) if logs.size else None,
            "ci95": None,
        }
        if logs.size > 1:
            half = stats.t.ppf(1 - ALPHA / 2, logs.size - 1) * logs.std(ddof=1) / math.sqrt(logs.size)
            summary["ci95"] = [float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))]
        multipliers[variant] = summary
    return {
        "metric": metric,
        "reference": reference,
        "budgets": budgets,
        "runs": {variant: {str(b): run_name(variant, b) for b in budgets} for variant in names},
        "fits": fits,
        "multiplier": multipliers,
        "how": (
            "L(D) = E + B / D^beta fitted per variant and seed to held-out bits per byte at each budget "
            "(D: tokens trained, in millions); the multiplier is the reference's tokens at its largest "
            "budget over the tokens the variant's fit needs to reach the reference's loss there"
        ),
    }


MEMORIZATION_MEASURES = ("exposure", "exact", "matched", "suffix_loss")


def _languages_info(config: ExperimentConfig, scores: dict[str, dict[int, pl.DataFrame]]) -> dict:
    """The held-out text per language (documents, bytes; clean sets), which are high- and
    low-resource, and the temperature family with each variant's sampling temperature."""
    frame = next(iter(next(iter(scores.values())).values()))
    per = (
        frame.filter(pl.col("clean") & pl.col("lang").is_not_null())
        .group_by("lang")
        .agg(documents=pl.len(), bytes=pl.col("bytes").sum())
        .sort("bytes", descending=True)
    )
    high = {language_of(code) for code in config.languages.high_resource}  # eng and en are one
    by_name = {v.name: v for v in config.variants}
    return {
        "high_resource": [lang for lang in per["lang"] if language_of(lang) in high],
        "low_resource": [lang for lang in per["lang"] if language_of(lang) not in high],
        "heldout": {lang: {"documents": docs, "bytes": size} for lang, docs, size in per.iter_rows()},
        "family": {
            name: {"temperature": _json_number(by_name[name].sampling_temperature), "uniform": by_name[name].uniform}
            for name in config.languages.variants
        },
    }


def _json_number(value: float | None) -> float | str | None:
    return "inf" if value is not None and math.isinf(value) else value


def language_metrics(documents: pl.DataFrame, high_resource: list[str]) -> dict[str, float]:
    """Bits per byte per language from one run's document scores (``id, set, lang, clean, bytes,
    tokens, nats``; trainer.scoring), over the clean sets' documents with a language: each
    language's summed nats over its summed bytes (``lang_bpb/<lang>``), and the macro-averages
    ``lang_bpb/low-resource`` (each language not in ``high_resource`` counts once) and
    ``lang_bpb/high-resource``."""
    per = (
        documents.filter(pl.col("clean") & pl.col("lang").is_not_null() & (pl.col("bytes") > 0))
        .group_by("lang")
        .agg(pl.col("nats").sum(), pl.col("bytes").sum())
        .sort("lang")
    )
    bpb = {lang: nats / math.log(2) / size for lang, nats, size in per.iter_rows()}
    metrics = {f"lang_bpb/{lang}": value for lang, value in bpb.items()}
    high = {language_of(code) for code in high_resource}
    for name, chosen in (
        ("low-resource", [v for lang, v in bpb.items() if language_of(lang) not in high]),
        ("high-resource", [v for lang, v in bpb.items() if language_of(lang) in high]),
    ):
        if chosen:
            metrics[f"lang_bpb/{name}"] = float(np.mean(chosen))
    return metrics


def _occurrence_label(occurrences: int) -> str:
    return "control" if occurrences == 0 else str(occurrences)


def memorization_metrics(result: dict) -> dict[str, float]:
    """``memorization/<measure>/<occurrences>`` of one model (a memorization task's result: per
    canary ``occurrences``, ``exposure``, ``exact``, ``matched``, ``suffix_loss``): the mean over the
    canaries that occur that many times in the raw pool (``control``: in no pool)."""
    frame = pl.DataFrame({key: result["canaries"][key] for key in ("occurrences", *MEMORIZATION_MEASURES)})
    metrics = {}
    for (occurrences,), part in sorted(frame.group_by(["occurrences"]), key=lambda item: item[0]):
        for measure in MEMORIZATION_MEASURES:
            metrics[f"memorization/{measure}/{_occurrence_label(occurrences)}"] = float(
                part[measure].cast(pl.Float64).mean()
            )
    return metrics


# The questions an experiment asks, each a family that Holm's correction covers: the primary
# comparison when the config names one (``[primary]``: a variant against the baseline on the
# measures named before the run; those tests leave the families below), the headline
# (the clean sets' mean held-out loss of each variant against the baseline, the question the
# experiment is built for), the held-out sets and groups one by one, each leave-one-out variant
# against the pipeline it leaves a step out of (``ablation_of``), pretrained against random
# initialization, each variant's transfer against the baseline's, every probe against the bag of
# words, and fine-tuning against probing. Correcting the headline for the exploratory
# per-set tests as well would leave three seeds (2 degrees of freedom) unable to answer it.
FAMILIES = (
    PRIMARY,
    "headline",
    "held-out sets",
    "leave-one-out",
    "memorization",
    "transfer",
    "transfer vs baseline",
    "transfer vs bag of words",
    "label efficiency",
    "languages",
    "fine-tuning vs probing",
    "task aggregates",
    "tasks",
)


OPEN = "open"  # a comparison with no expected direction: nothing it finds goes against an expectation


def _family(metric: str) -> str:
    if metric == "heldout_bpb":
        return "headline"
    if metric.startswith("tasks/"):
        return "task aggregates"
    if metric.startswith("task/"):
        return "tasks"
    if metric.startswith("memorization/"):
        return "memorization"
    if metric.startswith("lang_bpb/"):
        return "languages"
    if metric.startswith("heldout_bpb/"):
        return "held-out sets"
    if metric.startswith("finetune_vs_probe_"):
        return "fine-tuning vs probing"
    if "_gain@" in metric:
        return "label efficiency"
    return "transfer"


def _lower_is_better(metric: str) -> bool:
    """Lower held-out loss is better; for memorization, less of it (a higher suffix loss)."""
    if metric.startswith("memorization/"):
        return not metric.startswith("memorization/suffix_loss")
    if "margin" in metric:  # the gold choice's lead over the best wrong one
        return False
    return "bpb" in metric or "loss" in metric


def _pretraining_metrics(summaries: dict[str, dict[int, dict]], eval_groups: dict[str, dict]) -> dict:
    """Per variant and seed (a string), the held-out numbers of its pretraining run and what the run
    took (tokens, steps, time, throughput, parameters)."""
    return {
        name: {
            str(seed): {
                **run_metrics(summary, eval_groups),
                "tokens": summary["tokens"],
                "steps": summary["steps"],
                "train_time_s": summary["train_time_s"],
                "tokens_per_s": summary["tokens_per_s"],
                "parameters": summary["parameters"],
            }
            for seed, summary in seeds.items()
        }
        for name, seeds in summaries.items()
    }


def _per_seed(results: dict[str, dict], measure) -> dict[str, dict[str, dict]]:
    """``measure`` of each model's result per seed, the seeds as strings."""
    return {name: {str(seed): measure(result) for seed, result in seeds.items()} for name, seeds in results.items()}


def _spread_metrics(tables: tuple[dict[str, dict[str, dict]], ...]) -> dict[str, dict[str, dict]]:
    """``{metric: {model: spread over seeds}}`` of every table of per-model, per-seed numbers."""
    metrics: dict[str, dict[str, dict]] = {}
    for table in tables:
        for name, seeds in table.items():
            keys = sorted({key for values in seeds.values() for key in values})
            for key in keys:
                metrics.setdefault(key, {})[name] = spread({seed: values.get(key) for seed, values in seeds.items()})
    return metrics


class _Comparisons:
    """The comparisons made so far between the models' spreads in ``metrics``, in the order made."""

    def __init__(self, metrics: dict[str, dict[str, dict]]):
        self.metrics = metrics
        self.made: list[dict] = []

    def add(
        self,
        metric: str,
        a: str,
        b: str,
        expected: bool | None,
        why: str,
        a_label: str | None = None,
        b_label: str | None = None,
        b_metric: str | None = None,
        family: str | None = None,
        name: str | None = None,
    ) -> None:
        """``a``'s ``metric`` against ``b``'s ``b_metric`` (default: the same), when both were
        measured; ``expected`` the direction expected (None: no difference, OPEN: none), ``why``
        the expectation in words."""
        metrics = self.metrics
        b_metric = b_metric or metric
        if a not in metrics.get(metric, {}) or b not in metrics.get(b_metric, {}):
            return
        lower = _lower_is_better(metric)
        name = name or (metric if b_metric == metric else metric.replace("finetune_", "finetune_vs_probe_"))
        self.made.append(
            {
                "metric": name,
                "a": a_label or a,
                "b": b_label or b,
                "family": family or _family(name),
                **compare(metrics[metric][a], metrics[b_metric][b], lower),
                "expected": why,
                "_expected": expected,
                "_sides": (metric, a, b_metric, b, lower, name),
            }
        )


def _held_out_measures(metrics: dict[str, dict]) -> list[str]:
    """The held-out measures Holm's family covers, each test once. A set's only group is the set
    itself, and a transfer's cross-entropy says what its accuracy says: both are reported, not
    tested again."""
    groups_of = Counter(m.split("/")[1] for m in metrics if m.startswith("heldout_bpb/") and m.count("/") == 2)
    return [m for m in metrics if m.startswith("heldout_bpb") and (m.count("/") < 2 or groups_of[m.split("/")[1]] > 1)]


def _held_out_against(
    comparisons: _Comparisons,
    config: ExperimentConfig,
    held_out: list[str],
    junk: set[str],
    curated: str,
    other: str,
    family: str | None = None,
) -> None:
    """``curated`` (more curation) against ``other``, on every held-out measure: expected lower
    on the clean sets, higher on the junk its curation removes."""
    by_name = {v.name: v for v in config.variants}
    a, b = (curated, other) if family is None else (other, curated)  # leave-one-out: a lacks a step
    mixing_only = by_name[a].curation_key == by_name[b].curation_key
    for metric in held_out:
        on_junk = bool(metric.split("/")[1:2]) and metric.split("/")[1] in junk
        if mixing_only:
            # The same documents mixed otherwise: sets of several languages and sources give no
            # direction to expect (the languages family has one).
            comparisons.add(
                metric, a, b, OPEN, f"{a} and {b} mix the same curated documents differently", family=family
            )
            continue
        why = (
            f"curation ({curated}) removes junk, so its loss on junk is higher"
            if on_junk
            else f"more curation ({curated}) gives lower held-out loss than {other}"
        )
        comparisons.add(metric, a, b, (not on_junk) == (a == curated), why, family=family)


def _held_out_comparisons(comparisons: _Comparisons, config: ExperimentConfig, heldout: dict) -> None:
    """Every variant against the baseline, and each leave-one-out variant against the pipeline it
    leaves a step out of (``ablation_of``), on every held-out measure."""
    held_out = _held_out_measures(comparisons.metrics)
    junk = {name for name, info in heldout["sets"].items() if not info["clean"]}
    for name in [v.name for v in config.variants]:
        if name != config.baseline_name:
            _held_out_against(comparisons, config, held_out, junk, name, config.baseline_name)
    for variant in config.variants:
        if variant.ablation_of is not None:
            _held_out_against(comparisons, config, held_out, junk, variant.ablation_of, variant.name, "leave-one-out")


def _memorized_against(comparisons: _Comparisons, planted: list[str], views: dict, a: str, b: str) -> None:
    """``a`` against ``b`` at every planted count: expected alike where they train on the canaries
    alike (or they are planted once), else less memorization for fewer views."""
    for metric in planted:
        n = metric.rsplit("/", 1)[1]
        seen_a = views.get(a, {}).get(n, {}).get("mean_views")
        seen_b = views.get(b, {}).get(n, {}).get("mean_views")
        if n == "1" or seen_a is None or seen_b is None or math.isclose(seen_a, seen_b, rel_tol=0.1):
            shown = "" if seen_a is None or seen_b is None else f" ({seen_a:.2f} and {seen_b:.2f} views)"
            comparisons.add(
                metric,
                a,
                b,
                None,
                f"{a} and {b} train on a canary planted {n} times alike{shown}, so they memorize it alike",
                family="memorization",
            )
        else:
            comparisons.add(
                metric,
                a,
                b,
                seen_a < seen_b,
                f"{a} trains on a canary planted {n} times {seen_a:.2f} times on "
                f"average, {b} {seen_b:.2f} times: more views, more memorization",
                family="memorization",
            )


def _memorization_comparisons(comparisons: _Comparisons, config: ExperimentConfig, canaries: dict | None) -> None:
    """Memorization: each variant against the baseline, and each leave-one-out variant against the
    pipeline it leaves a step out of, at every planted count. The expected direction follows the
    training views (how many times a mixture trained on a canary, summed over its copies): fewer
    views, less memorization; a canary planted once is expected alike, as are equal views."""
    views = (canaries or {}).get("trained", {})
    planted = sorted(
        (
            m
            for m in comparisons.metrics
            if m.startswith("memorization/exposure/") and m != "memorization/exposure/control"
        ),
        key=lambda m: int(m.rsplit("/", 1)[1]),
    )
    for name in [v.name for v in config.variants]:
        if name != config.baseline_name:
            _memorized_against(comparisons, planted, views, name, config.baseline_name)
    for variant in config.variants:
        if variant.ablation_of is not None:
            _memorized_against(comparisons, planted, views, variant.name, variant.ablation_of)


def _language_comparisons(comparisons: _Comparisons, config: ExperimentConfig) -> None:
    """Languages: each variant of the temperature family against its first, on the macro-average
    over the low-resource languages and over the high-resource ones."""
    family = {v.name: v for v in config.variants if v.name in config.languages.variants}
    if not family:
        return
    reference = family[config.languages.variants[0]]
    for name in config.languages.variants[1:]:
        hotter, colder = (
            family[name].sampling_temperature > reference.sampling_temperature,
            family[name].sampling_temperature < reference.sampling_temperature,
        )
        for metric, expected, why in (
            (
                "lang_bpb/low-resource",
                hotter if hotter or colder else None,
                "upsampling the low-resource languages",
            ),
            ("lang_bpb/high-resource", colder if hotter or colder else None, "fewer tokens of the high-resource"),
        ):
            comparisons.add(
                metric,
                name,
                reference.name,
                expected,
                f"a higher sampling temperature lowers the loss of the languages it upsamples and raises "
                f"that of the high-resource ones ({why})",
                family="languages",
            )


def _label_efficiency(comparisons: _Comparisons, names: list[str], task_info: dict) -> None:
    """Label efficiency: each variant's gain in accuracy over random initialization, seed by seed
    (``<method>_gain@<size>``, added to the metrics), at the fewest labels against the most
    (expected larger with few labels)."""
    metrics = comparisons.metrics
    for method in ("probe", "finetune"):
        sizes = [size for size in task_info.get("sizes", {}).get(method, []) if f"{method}_accuracy@{size}" in metrics]
        for size in sizes:
            accuracy = metrics[f"{method}_accuracy@{size}"]
            if "random" not in accuracy:
                continue
            for name in names:
                if name in accuracy:
                    paired = paired_difference(accuracy[name], accuracy["random"])
                    if paired:
                        metrics.setdefault(f"{method}_gain@{size}", {})[name] = spread(paired)
        if len(sizes) >= 2:
            few, most = f"{method}_gain@{sizes[0]}", f"{method}_gain@{sizes[-1]}"
            for name in names:
                comparisons.add(
                    few,
                    name,
                    name,
                    True,
                    "pretraining helps most with few labels: its gain over random initialization is larger "
                    f"with {sizes[0]} labelled examples than with {sizes[-1]}",
                    f"{name} @ {sizes[0]}",
                    f"{name} @ {sizes[-1]}",
                    b_metric=most,
                    name=f"{method}_gain@{sizes[0]}_vs_{sizes[-1]}",
                )


def _transfer_comparisons(comparisons: _Comparisons, names: list[str], transfer_keys: list[str], baseline: str) -> None:
    """Each variant pretrained against random initialization on every transfer measure, each
    variant against the baseline (the question the experiment exists to answer), every model's
    probe against the bag of words on the same labels, and fine-tuning against probing for every
    model."""
    for name in names:
        for metric in transfer_keys:
            comparisons.add(metric, name, "random", True, "pretraining helps over random initialization")
    for name in names:
        if name != baseline:
            for metric in [m for m in transfer_keys if not m.startswith("bow_")]:
                comparisons.add(
                    metric,
                    name,
                    baseline,
                    True,
                    f"curation improves transfer over {baseline}",
                    family="transfer vs baseline",
                )
    for name in ["random", *names]:
        for metric in [m for m in transfer_keys if m.startswith("probe_")]:
            comparisons.add(
                metric,
                name,
                "bag-of-words",
                OPEN,
                "a linear probe of the model against a bag of words trained on the same labels",
                f"{name} probed",
                "bag of words",
                b_metric=metric.replace("probe_", "bow_"),
                family="transfer vs bag of words",
                name=metric.replace("probe_", "probe_vs_bow_"),
            )
    for name in ["random", *names]:
        for metric in [m for m in transfer_keys if m.startswith("finetune_")]:
            comparisons.add(
                metric,
                name,
                name,
                True,
                "fine-tuning beats a linear probe",
                f"{name} fine-tuned",
                f"{name} probed",
                b_metric=metric.replace("finetune_", "probe_"),
            )


def _task_comparisons(comparisons: _Comparisons, names: list[str], baseline: str) -> None:
    """Each variant against the baseline on the tasks' aggregates (CORE's mean centred accuracy,
    the mean gold bits per byte) and on every task's per-byte accuracy and gold bits per byte."""
    metrics = comparisons.metrics
    per_task = [m for m in metrics if m.startswith("task/") and m.count("/") == 2 and m.rsplit("/", 1)[1] in COMPARED]
    for name in names:
        if name == baseline:
            continue
        for metric in [*[m for m in AGGREGATES if m in metrics], *per_task]:
            comparisons.add(
                metric, name, baseline, True, f"curation improves what the model knows of text over {baseline}"
            )


def _conclude(c: dict, metrics: dict[str, dict], scores: dict, transfer: dict, task_items: dict) -> None:
    """One comparison, Holm-adjusted: its bootstrap over seeds and items (where the measure keeps
    its items), whether it goes against the expectation, and its sentence."""
    metric, a, b_metric, b, lower, name = c.pop("_sides")
    if metric == b_metric:
        sides = [_item_values(metric, model, scores, transfer, task_items) for model in (a, b)]
        if sides[0] is not None and sides[1] is not None:
            c["bootstrap"] = _paired_bootstrap(*sides)
    expected = c.pop("_expected")
    # expected None: no difference expected, so any significant one goes against it; OPEN: no
    # direction expected, so none does
    c["contradicts_expectation"] = bool(
        c["significant"] and expected is not OPEN and (expected is None or c["better"] is not expected)
    )
    shown = metric if b_metric == metric or "_gain@" in name else metric.replace("finetune_", "")
    c["sentence"] = sentence(
        shown,
        c["a"],
        c["b"],
        metrics[metric][a],
        metrics[b_metric][b],
        c,
        lower,
        digits=4 if "bpb" in metric else 3,
    )


def _comparisons(
    config: ExperimentConfig,
    metrics: dict[str, dict],
    heldout: dict,
    canaries: dict | None,
    transfer: dict[str, dict[int, dict]],
    task_info: dict,
    scores: dict,
    task_items: dict,
) -> list[dict]:
    """Every comparison of the families, Holm-corrected within each family (the primary comparison
    named in the config a family of its own), with its conclusion (:func:`_conclude`); adds the
    label-efficiency gains to ``metrics``."""
    names = [v.name for v in config.variants]
    comparisons = _Comparisons(metrics)
    _held_out_comparisons(comparisons, config, heldout)
    _memorization_comparisons(comparisons, config, canaries)
    _language_comparisons(comparisons, config)
    transfer_keys = [m for m in metrics if "_accuracy@" in m]
    _label_efficiency(comparisons, names, task_info)
    _transfer_comparisons(comparisons, names, transfer_keys, config.baseline_name)
    _task_comparisons(comparisons, names, config.baseline_name)
    made = comparisons.made
    if config.primary is not None:
        pre_register(made, [(m, config.primary.variant, config.baseline_name) for m in config.primary.metrics])
    for family in dict.fromkeys(c["family"] for c in made):
        holm([c for c in made if c["family"] == family])
    for c in made:
        _conclude(c, metrics, scores, transfer, task_items)
    return made


def _primary(config: ExperimentConfig, comparisons: list[dict]) -> dict | None:
    """results.json's ``primary``: the comparison the config named before the run (variant, the
    baseline it is compared with, the measures), each of its tests in short (Holm within the
    family of these alone) and any measure the runs did not yield; None when none was named."""
    if config.primary is None:
        return None
    found = pre_registered(comparisons)
    return {
        "variant": config.primary.variant,
        "against": config.baseline_name,
        "metrics": list(config.primary.metrics),
        "named": PRE_REGISTERED,
        "family": PRIMARY,
        "comparisons": found,
        "not_measured": [m for m in config.primary.metrics if m not in {c["metric"] for c in found}],
    }


def results_json(results: dict, first: tuple[str, ...] = (PRIMARY,)) -> str:
    """results.json's text: the keys of ``first`` at the top, where a reader looks first, then the
    rest; every nested table key-sorted, as pipeline.io.writer.write_json writes."""
    top = {key: results[key] for key in first if key in results}
    top.update({key: results[key] for key in sorted(results) if key not in top})
    return json.dumps({k: json.loads(json.dumps(v, sort_keys=True)) for k, v in top.items()}, indent=2,
                      ensure_ascii=False) + "\n"  # fmt: skip


def summarize(
    config: ExperimentConfig,
    curation: dict,
    summaries: dict[str, dict[int, dict]],
    transfer: dict[str, dict[int, dict]],
    eval_manifest: dict,
    heldout: dict,
    contamination: dict,
    curves: dict | None = None,
    memorization: dict[str, dict[int, dict]] | None = None,
    canaries: dict | None = None,
    scores: dict[str, dict[int, pl.DataFrame]] | None = None,
    tasks: dict[str, dict[int, dict]] | None = None,
    task_items: dict[str, dict[int, pl.DataFrame]] | None = None,
) -> dict:
    """results.json: every run's numbers, their spread over seeds, and the comparisons with the
    sentence each supports (and whether it goes against the expectation); the held-out sets'
    provenance (``heldout``, :func:`experiment.heldout.heldout_provenance`), the
    contamination check's counts per variant (``contamination``), and what ``memorization`` (per
    variant and seed, a memorization task's result) measured on the ``canaries`` (what they are, how
    often each variant saw them), and what the multiple-choice ``tasks`` measured (per variant and
    seed, experiment.runs.score_tasks' result; ``task_items`` its per-item scores). ``primary``, first,
    is the comparison the config named before the run (:func:`_primary`; None without one)."""
    high_resource = config.languages.high_resource
    per_run = _pretraining_metrics(summaries, eval_manifest["groups"])
    per_transfer = _per_seed(transfer, transfer_metrics)
    per_memorization = _per_seed(memorization or {}, memorization_metrics)
    per_language = _per_seed(scores or {}, lambda frame: language_metrics(frame, high_resource))
    per_task = _per_seed(tasks or {}, task_metrics)
    metrics = _spread_metrics((per_run, per_transfer, per_memorization, per_language, per_task))
    task_info = transfer_summary(transfer)
    comparisons = _comparisons(
        config, metrics, heldout, canaries, transfer, task_info, scores or {}, {
            name: {str(seed): frame for seed, frame in seeds.items()} for name, seeds in (task_items or {}).items()
        }
    )  # fmt: skip
    return {
        "primary": _primary(config, comparisons),  # first: the question named before the run
        "format": "curate.experiment/1",
        "config": config.model_dump(mode="json"),
        "baseline": config.baseline_name,
        "variants": [v.name for v in config.variants],
        "seeds": list(config.seeds),
        "curation": curation,
        "heldout": heldout,
        "contamination": contamination,
        "runs": per_run,
        "transfer": per_transfer,
        "task": task_info,
        "memorization": {**(canaries or {}), "runs": per_memorization} if memorization else None,
        "languages": _languages_info(config, scores) if scores else None,
        "tasks": {
            **tasks_info(tasks),
            "runs": per_task,
            "signal": task_signal(metrics, curves or {}, [v.name for v in config.variants], config.baseline_name),
            "thresholds": {"monotonicity": MONOTONIC, "snr": SNR},
        }
        if tasks
        else None,
        "data_efficiency": data_efficiency(config, per_run) or None,
        "metrics": metrics,
        "alpha": ALPHA,
        "families": {f: sum(c["family"] == f and c["p"] is not None for c in comparisons) for f in FAMILIES},
        "comparisons": comparisons,
        "curves": curves or {},
    }
