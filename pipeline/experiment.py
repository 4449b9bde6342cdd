"""The experiment: curated vs raw mixtures of one raw pool, trained alike, compared on held-out
loss and on transfer to a downstream task, over several seeds.

This module holds what needs neither Prefect nor torch: the experiment's config, the curation run
config of each variant, the choice of the clean reference set, and the statistics of the results.
``flows.experiment`` runs it.

Variants. Each variant names the document stages it runs after ``source`` (any of lang, filter,
dedup, lines; ``quality`` adds the fastText quality filter) and how its training mixture is
weighted. Variants with the same stages are one curation run with one mixture each (a mixing
variant such as T = 1 vs T = 3.3 costs no extra curation). Every variant is tokenized with one
shared tokenizer and mixed to the same token budget, which is also what the trainer trains on.

Held out from every variant, by ``mix.exclude`` (near-duplicates by MinHash + exact Jaccard):

* the downstream task's texts (pretrain-then-adapt needs a task the model never read);
* a clean reference set: a seeded sample, per group, of the documents the most curated variant
  keeps. Its bits per byte is the held-out loss every variant is compared on (each variant's own
  validation split holds whatever that variant keeps, junk included, so those differ).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field, field_validator, model_validator

from pipeline.config import DEFAULT_FILTERS, ConfigError, _existing_file, _Strict, read_toml, validate_model
from pipeline.mix import assign_groups, seeded_id_uniform

DOCUMENT_STEPS = ("lang", "filter", "dedup", "lines")
SALT_REFERENCE = 0x5245464552  # "REFER"


class VariantConfig(_Strict):
    """One variant: the curation it runs and how its mixture is weighted."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    stages: list[Literal["lang", "filter", "dedup", "lines"]] = Field(default_factory=list)
    quality: bool = False  # add the fastText quality filter (needs the filter stage)
    temperature: float | None = Field(default=None, gt=0)  # over the groups; None: 1 (natural)
    weights: dict[str, float] | None = None
    max_epochs: float | None = Field(default=None, gt=0)  # None: the experiment's

    @model_validator(mode="after")
    def _consistent(self):
        if self.quality and "filter" not in self.stages:
            raise ValueError(f"variant {self.name}: quality = true needs 'filter' in stages")
        if self.temperature is not None and self.weights is not None:
            raise ValueError(f"variant {self.name}: give temperature or weights, not both")
        return self

    @property
    def curation_key(self) -> str:
        """The folder of this variant's curation run: variants with equal curation share it."""
        steps = [s for s in DOCUMENT_STEPS if s in self.stages] + (["quality"] if self.quality else [])
        return "+".join(steps) or "raw"


class ReferenceConfig(_Strict):
    fraction: float = Field(default=0.05, gt=0.0, lt=1.0)  # of each group's curated documents
    max_docs: int = Field(default=200, ge=1)  # per group
    min_docs: int = Field(default=5, ge=1)  # groups with fewer reference documents are not reported


class TaskConfig(_Strict):
    """The downstream task: a file (id, text, label, split), or with ``demo`` BBC News topics."""

    path: Path | None = None
    train_docs: int = Field(default=500, ge=10)  # demo task only
    test_docs: int = Field(default=300, ge=10)  # demo task only
    sizes: list[int] = Field(default_factory=lambda: [50, 200, 0])  # labelled examples; 0: all
    max_tokens: int = Field(default=128, ge=8)
    finetune: bool = True
    finetune_steps: int = Field(default=60, ge=1)
    finetune_batch: int = Field(default=16, ge=1)
    finetune_lr: float = Field(default=3e-4, gt=0)
    probe_l2: float = Field(default=1e-2, ge=0)

    @field_validator("path")
    @classmethod
    def _task_exists(cls, value):
        return _existing_file(value, "task.path", "a Parquet file with id, text, label, split columns")


class TokenizerConfig(_Strict):
    vocab_size: int = Field(default=8192, ge=260)
    sample_docs: int = Field(default=20_000, ge=10)


class ExperimentConfig(_Strict):
    """An experiment (see the module docstring)."""

    out_dir: Path
    demo: bool = False  # build the demo corpus and curate it with the demo's settings
    demo_docs: int = Field(default=20_000, ge=1000)
    corpus_dir: Path | None = None  # where the demo corpus is built (default: .cache/demo-corpus...)
    curation: Path | None = None  # a curation config (sources, stage settings); its run_dir is not used
    seed: int = 0  # of the curation (splits, samples); training seeds are `seeds`
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    budget_tokens: int = Field(ge=1)  # training tokens of every variant
    max_epochs: float = Field(default=50.0, gt=0)  # repeats per group at most (small pools repeat)
    group_by: list[Literal["source", "lang"]] = Field(default_factory=lambda: ["source"], min_length=1)
    validation_fraction: float = Field(default=0.02, ge=0.0, lt=1.0)  # each variant's own split
    reference: ReferenceConfig = Field(default_factory=ReferenceConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    quality_model: Path | None = None  # fastText quality model; default with demo: trained on it
    variants: list[VariantConfig] = Field(min_length=1)
    baseline: str | None = None  # the variant others are compared with; default: the first
    train: dict = Field(default_factory=dict)  # trainer config less mixture, out_dir and seed

    @model_validator(mode="after")
    def _coherent(self):
        if self.demo == (self.curation is not None):
            raise ValueError("set demo = true, or curation = a curation config (one of the two)")
        if self.curation is not None:
            _existing_file(self.curation, "curation", "a curation config .toml")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique: {names}")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a variant ({', '.join(names)})")
        if "lang" in self.group_by and any("lang" not in v.stages for v in self.variants):
            raise ValueError('group_by "lang" needs the lang stage in every variant')
        if not self.demo and self.task.path is None:
            raise ValueError("task.path: name the downstream task's file (demo = true has a built-in one)")
        if not self.demo and any(v.quality for v in self.variants) and self.quality_model is None:
            raise ValueError("quality_model: a variant uses the quality filter; train one with "
                             "`curate train-quality` and name it here")
        for key in ("mixture", "out_dir", "seed"):
            if key in self.train:
                raise ValueError(f"train.{key}: set by the experiment for every run; remove it")
        return self

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.variants[0].name

    def curations(self) -> dict[str, list[VariantConfig]]:
        """Curation folder -> the variants it serves, in config order."""
        runs: dict[str, list[VariantConfig]] = {}
        for variant in self.variants:
            runs.setdefault(variant.curation_key, []).append(variant)
        return runs

    def most_curated(self) -> VariantConfig:
        """The variant whose documents the reference set is drawn from: the most stages."""
        return max(self.variants, key=lambda v: (len(v.stages) + v.quality, v.quality))


def load_experiment(path: Path) -> ExperimentConfig:
    return validate_model(ExperimentConfig, read_toml(path))


def parse_experiment(data: dict) -> ExperimentConfig:
    return validate_model(ExperimentConfig, data)


def curation_config(base: dict, variants: list[VariantConfig], experiment: ExperimentConfig, run_dir: Path,
                    tokenizer: Path | None, exclude: list[Path], quality_model: Path | None) -> dict:
    """The curation run config (a dict for ``pipeline.config.parse_config``) of ``variants``, which
    share their stages: ``base``'s sources and stage settings, the variants' stages turned on and
    the others off, the shared tokenizer, and one mixture per variant. With ``tokenizer=None`` the
    run stops at the curated documents (the reference run)."""
    first = variants[0]
    config = copy.deepcopy(base)
    config["run_dir"] = str(run_dir)
    config["seed"] = experiment.seed
    for step in DOCUMENT_STEPS:
        section = dict(config.get(step, {}))
        section["enabled"] = step in first.stages
        config[step] = section
    if first.quality:
        if quality_model is None:
            raise ConfigError(f"variant {first.name}: the quality filter needs a model (quality_model)")
        section = config["filter"]
        filters = list(section.get("filters", DEFAULT_FILTERS))
        if "quality" not in filters:
            # Before PII scrubbing: the classifier judges the text as it was written.
            filters.insert(filters.index("pii") if "pii" in filters else len(filters), "quality")
        section["filters"] = filters
        params = {name: dict(values) for name, values in section.get("params", {}).items()}
        params.setdefault("quality", {})["model"] = str(quality_model)
        section["params"] = params
    if tokenizer is None:
        config["tokenize"] = {"enabled": False}
        config["mix"] = {"enabled": False}
        return config
    config["tokenize"] = {"tokenizer": str(tokenizer)}
    mixtures = []
    for variant in variants:
        mixture = {"name": variant.name, "budget_tokens": experiment.budget_tokens,
                   "max_epochs": variant.max_epochs or experiment.max_epochs}
        if variant.weights is not None:
            mixture["weights"], mixture["default_weight"] = variant.weights, 0.0
        else:
            mixture["temperature"] = variant.temperature or 1.0
        mixtures.append(mixture)
    config["mix"] = {"group_by": list(experiment.group_by), "validation_fraction": experiment.validation_fraction,
                     "validation_max_docs": 500, "exclude": [str(p) for p in exclude], "mixtures": mixtures}
    return config


def reference_sample(docs: pl.DataFrame, group_by: list[str], reference: ReferenceConfig, seed: int) -> pl.DataFrame:
    """``id, text, group`` of the reference set: per group, the documents whose seeded uniform draw
    is below ``fraction``, at most ``max_docs`` of them (the smallest draws); groups with fewer
    than ``min_docs`` are dropped (a bits-per-byte figure over a handful of documents is noise)."""
    grouped = docs.with_columns(assign_groups(docs, group_by))
    draws = seeded_id_uniform(grouped["id"], seed, SALT_REFERENCE)
    chosen = (grouped.with_columns(draw=pl.Series(draws))
              .filter(pl.col("draw") < reference.fraction)
              .sort(["draw", "id"])
              .filter(pl.int_range(pl.len()).over("group") < reference.max_docs))
    counts = chosen.group_by("group").len()
    keep = counts.filter(pl.col("len") >= reference.min_docs)["group"]
    return chosen.filter(pl.col("group").is_in(keep.implode())).select("id", "text", "group").sort(["group", "id"])


# ---------------------------------------------------------------------------------------------
# Statistics over seeds


def spread(values: dict | list) -> dict:
    """Mean, sample standard deviation (0 for one value), min, max and n of the seeds' values;
    ``values`` maps seed -> value (a list counts its positions as seeds). ``by_seed`` keeps them,
    for paired comparisons."""
    items = values.items() if isinstance(values, dict) else enumerate(values)
    by_seed = {str(seed): float(v) for seed, v in items if v is not None and math.isfinite(v)}
    array = np.asarray(list(by_seed.values()), dtype=np.float64)
    if array.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0, "by_seed": {}}
    return {"mean": float(array.mean()), "std": float(array.std(ddof=1)) if array.size > 1 else 0.0,
            "min": float(array.min()), "max": float(array.max()), "n": int(array.size), "by_seed": by_seed}


def compare(a: dict, b: dict, lower_is_better: bool) -> dict:
    """``a`` against ``b`` (two :func:`spread` results).

    Paired by seed when both have the same seeds (two or more): a seed fixes the model's
    initialization and the order of its batches, so runs of one seed on two variants differ only by
    their data, and the per-seed differences d_i are what varies. Then the difference is mean(d),
    its standard error sd(d) / sqrt(n), and it exceeds the seed spread when every d_i has the same
    sign and |mean(d)| > 2 standard errors. Unpaired otherwise: the difference of means, the
    standard error sqrt(s_a^2/n_a + s_b^2/n_b), and it exceeds the spread when the seeds' ranges do
    not overlap and |difference| > 2 standard errors. ``better`` says whether ``a`` is better."""
    if a["mean"] is None or b["mean"] is None:
        return {"difference": None, "stderr": None, "exceeds_spread": False, "better": None, "paired": False}
    seeds = sorted(a["by_seed"])
    paired = len(seeds) >= 2 and seeds == sorted(b["by_seed"])
    if paired:
        d = np.array([a["by_seed"][s] - b["by_seed"][s] for s in seeds])
        difference = float(d.mean())
        stderr = float(d.std(ddof=1) / math.sqrt(d.size))
        exceeds = bool((np.all(d > 0) or np.all(d < 0)) and abs(difference) > 2 * stderr)
    else:
        difference = a["mean"] - b["mean"]
        stderr = math.sqrt((a["std"] ** 2) / max(a["n"], 1) + (b["std"] ** 2) / max(b["n"], 1))
        apart = a["max"] < b["min"] or b["max"] < a["min"]
        exceeds = bool(apart and abs(difference) > 2 * stderr)
    better = (difference < 0) if lower_is_better else (difference > 0)
    return {"difference": difference, "stderr": stderr, "exceeds_spread": exceeds,
            "better": bool(better) if difference != 0 else None, "paired": paired}


def sentence(metric: str, a_name: str, b_name: str, a: dict, b: dict, comparison: dict, lower_is_better: bool,
             digits: int = 3) -> str:
    """The plain sentence a comparison supports."""
    if comparison["difference"] is None:
        return f"{metric}: no values for {a_name} or {b_name}."
    a_text = f"{a['mean']:.{digits}f} ± {a['std']:.{digits}f}"
    b_text = f"{b['mean']:.{digits}f} ± {b['std']:.{digits}f}"
    direction = "lower" if comparison["difference"] < 0 else "higher"
    pairing = "paired by seed" if comparison.get("paired") else "unpaired"
    head = (f"{metric}: {a_name} {a_text} vs {b_name} {b_text} ({direction} by "
            f"{abs(comparison['difference']):.{digits}f} ± {comparison['stderr']:.{digits}f}; "
            f"{a['n']} and {b['n']} seeds, {pairing})")
    if not comparison["exceeds_spread"]:
        return f"{head}: within the seed spread, so these runs show no difference."
    verdict = "better" if comparison["better"] else "worse"
    return f"{head}: beyond the seed spread; {a_name} is {verdict} than {b_name} on this measure."


# ---------------------------------------------------------------------------------------------
# Results


def _size_label(size: str) -> str:
    return "all" if size == "0" else size


def run_metrics(summary: dict) -> dict[str, float]:
    """The held-out numbers of one pretraining run (a trainer summary)."""
    reference = summary.get("final_eval", {}).get("reference", {})
    metrics = {"reference_bpb": reference.get("bpb"), "own_validation_bpb": summary["final"].get("bpb")}
    for group, values in reference.get("groups", {}).items():
        metrics[f"reference_bpb/{group}"] = values["bpb"]
    return metrics


def transfer_metrics(results: dict) -> dict[str, float]:
    """``probe_accuracy@50``, ``finetune_loss@all``, ... of one transfer result."""
    metrics = {}
    for method in ("probe", "finetune"):
        for size, scores in results.get(method, {}).items():
            metrics[f"{method}_accuracy@{_size_label(size)}"] = scores["accuracy"]
            metrics[f"{method}_loss@{_size_label(size)}"] = scores["loss"]
    return metrics


def _lower_is_better(metric: str) -> bool:
    return "bpb" in metric or "loss" in metric


def summarize(config: ExperimentConfig, curation: dict, summaries: dict[str, dict[int, dict]],
              transfer: dict[str, dict[int, dict]], reference_manifest: dict, curves: dict | None = None) -> dict:
    """results.json: every run's numbers, their spread over seeds, and the comparisons with the
    sentence each supports (and whether it goes against the expectation)."""
    baseline = config.baseline_name
    names = [v.name for v in config.variants]
    per_run = {name: {str(seed): {**run_metrics(summary),
                                  "tokens": summary["tokens"], "steps": summary["steps"],
                                  "train_time_s": summary["train_time_s"], "tokens_per_s": summary["tokens_per_s"],
                                  "parameters": summary["parameters"]}
                      for seed, summary in seeds.items()} for name, seeds in summaries.items()}
    per_transfer = {name: {str(seed): transfer_metrics(result) for seed, result in seeds.items()}
                    for name, seeds in transfer.items()}
    metrics: dict[str, dict[str, dict]] = {}
    for table in (per_run, per_transfer):
        for name, seeds in table.items():
            keys = sorted({key for values in seeds.values() for key in values})
            for key in keys:
                metrics.setdefault(key, {})[name] = spread({seed: values.get(key) for seed, values in seeds.items()})

    comparisons = []

    def add(metric: str, a: str, b: str, expected: bool, why: str) -> None:
        if a not in metrics.get(metric, {}) or b not in metrics.get(metric, {}):
            return
        lower = _lower_is_better(metric)
        result = compare(metrics[metric][a], metrics[metric][b], lower)
        comparisons.append({
            "metric": metric, "a": a, "b": b, **result, "expected": why,
            "contradicts_expectation": bool(result["exceeds_spread"] and result["better"] is not expected),
            "sentence": sentence(metric, a, b, metrics[metric][a], metrics[metric][b], result, lower,
                                 digits=4 if "bpb" in metric else 3),
        })

    held_out = [m for m in metrics if m.startswith("reference_bpb")]
    for name in names:
        if name != baseline:
            for metric in held_out:
                add(metric, name, baseline, True, f"more curation ({name}) gives lower held-out loss than {baseline}")
    transfer_keys = [m for m in metrics if "@" in m]
    for name in names:
        for metric in transfer_keys:
            add(metric, name, "random", True, "pretraining helps over random initialization")
    for name in ["random", *names]:
        for metric in [m for m in transfer_keys if m.startswith("finetune_")]:
            probe = metric.replace("finetune_", "probe_")
            if probe in metrics and name in metrics[metric] and name in metrics[probe]:
                lower = _lower_is_better(metric)
                result = compare(metrics[metric][name], metrics[probe][name], lower)
                comparisons.append({
                    "metric": metric.replace("finetune_", "finetune_vs_probe_"), "a": f"{name} fine-tuned",
                    "b": f"{name} probed", **result, "expected": "fine-tuning beats a linear probe",
                    "contradicts_expectation": bool(result["exceeds_spread"] and result["better"] is False),
                    "sentence": sentence(metric.replace("finetune_", ""), f"{name} fine-tuned", f"{name} probed",
                                         metrics[metric][name], metrics[probe][name], result, lower),
                })
    return {
        "format": "curate.experiment/1",
        "config": config.model_dump(mode="json"),
        "baseline": baseline,
        "variants": names,
        "seeds": list(config.seeds),
        "curation": curation,
        "reference": {"groups": reference_manifest["groups"],
                      "documents": sum(g["validation_documents"] for g in reference_manifest["groups"].values())},
        "runs": per_run,
        "transfer": per_transfer,
        "metrics": metrics,
        "comparisons": comparisons,
        "curves": curves or {},
    }
