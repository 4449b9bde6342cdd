"""The experiment: curated vs raw mixtures of one raw pool, trained alike, compared on held-out
loss and on transfer to a downstream task, over several seeds.

This module holds what needs neither Prefect nor torch: the experiment's config, the curation run
config of each variant, the held-out sets and their evaluation folder, the tokenizer's sample, what
each variant trained on, and the statistics of the results. ``flows.experiment`` runs it.

Variants. Each variant names the document stages it runs after ``source`` (any of lang, filter,
dedup, lines; ``quality`` adds the fastText quality filter) and how its training mixture is
weighted. Variants with the same stages are one curation run with one mixture each (a mixing
variant such as T = 1 vs T = 3.3 costs no extra curation). Every variant is tokenized with one
neutral tokenizer, trained on a seeded sample of the raw pool (the source stage's documents, the
held-out texts left out), and mixed to the same token budget, which is also what the trainer
trains on.

Held-out sets, fixed before any variant exists and stored raw (no curation step chose or rewrote
them): with ``demo`` the demo corpus's ``heldout/texts.parquet`` (news, dialogues, web pages, and
a junk set reported on its own), plus the user's own ``[[eval_sets]]``. Columns
(:data:`HELDOUT_COLUMNS`): ``id, text, set, group, lang, kind, clean``. They and the downstream
task's texts are excluded from every pool by ``mix.exclude`` (by id, by near-duplicate, by shared
token windows), then every training mixture is checked for shared 13-token windows. They are
tokenized once into one evaluation folder (mixture format, validation shards only, one group
``<set>/<group>`` per set and source), which the trainer evaluates; bits per byte are reported per
group, per set, and as a headline macro-average over the clean sets (junk apart).
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field, field_validator, model_validator
from scipy import stats

from pipeline.core.config import (
    DEFAULT_FILTERS,
    EXCLUDE_SUFFIXES,
    ConfigError,
    _existing_file,
    _Strict,
    read_toml,
    validate_model,
)
from pipeline.mix.plan import seeded_id_hash

DOCUMENT_STEPS = ("lang", "filter", "dedup", "lines")
SALT_TOKENIZER = 0x544F4B53  # "TOKS"
# The held-out texts' columns (the demo corpus's heldout/texts.parquet has them too).
HELDOUT_COLUMNS = {
    "id": pl.String,
    "text": pl.String,
    "set": pl.String,
    "group": pl.String,
    "lang": pl.String,
    "kind": pl.String,
    "clean": pl.Boolean,
}
DEMO_SETS = ("news", "dialogues", "web", "junk")
EVAL_MIXTURE = "heldout"  # the trainer's name for the evaluation folder: metrics heldout_bpb/<set>/<group>


class VariantConfig(_Strict):
    """One variant: the curation it runs and how its mixture is weighted."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    stages: list[Literal["lang", "filter", "dedup", "lines"]] = Field(default_factory=list)
    quality: bool = False  # add the fastText quality filter (needs the filter stage)
    temperature: float | None = Field(default=None, gt=0)  # over the groups; None: 1 (natural)
    weights: dict[str, float] | None = None
    uniform: bool = False  # every group weighs the same; with max_epochs, UniMax (Chung et al. 2023)
    max_epochs: float | None = Field(default=None, gt=0)  # None: the experiment's
    budget_tokens: int | None = Field(default=None, ge=1)  # None: the experiment's
    # A leave-one-out variant (FineWeb-style ablation) is also compared with the pipeline it leaves
    # a step out of: what removing that step costs, measured inside the pipeline that uses it.
    ablation_of: str | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if self.quality and "filter" not in self.stages:
            raise ValueError(f"variant {self.name}: quality = true needs 'filter' in stages")
        if sum([self.temperature is not None, self.weights is not None, self.uniform]) > 1:
            raise ValueError(f"variant {self.name}: give one of temperature, weights and uniform")
        return self

    @property
    def sampling_temperature(self) -> float | None:
        """The temperature its groups are sampled at (uniform: infinite); None for explicit weights."""
        if self.weights is not None:
            return None
        return math.inf if self.uniform else (self.temperature or 1.0)

    @property
    def curation_key(self) -> str:
        """The folder of this variant's curation run: variants with equal curation share it."""
        steps = [s for s in DOCUMENT_STEPS if s in self.stages] + (["quality"] if self.quality else [])
        return "+".join(steps) or "raw"


class EvalSetConfig(_Strict):
    """A held-out set of the user's: a Parquet or JSON-lines file of texts, with an optional group
    and id column. Excluded from every pool and evaluated like the demo's held-out sets."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    path: Path
    text_field: str = "text"
    group_field: str | None = None  # default: one group named after the set
    id_field: str | None = None  # default: "<name>:<row>"; a pool document with an equal id is excluded
    clean: bool = True  # clean sets make the headline; others are reported on their own

    @field_validator("path")
    @classmethod
    def _set_exists(cls, value):
        _existing_file(value, "eval_sets.path", "a Parquet or JSON-lines file of held-out texts")
        if Path(value).suffix not in EXCLUDE_SUFFIXES:
            raise ValueError(
                f"{str(value)!r} is neither Parquet nor JSON lines; point eval_sets.path at "
                f"{' or '.join(EXCLUDE_SUFFIXES)} files"
            )
        return value


class DecontaminationConfig(_Strict):
    """How held-out and task texts are kept out of training (passed to every run's mix section)."""

    window_tokens: int = Field(default=13, ge=0)  # 0: no token-window exclusion (the check still runs)
    common_window_docs: int = Field(default=10, ge=1)  # windows in more documents are common text


class FinetuneConfig(_Strict):
    """Full fine-tuning on the labelled subsets (trainer.transfer): at each learning rate of
    ``lrs`` with a linear warmup; the dev loss every ``eval_every`` steps stops a learning rate
    after ``patience`` measurements without improvement and picks the learning rate. Steps:
    ``epochs`` passes over the labelled examples, within ``[min_steps, max_steps]``."""

    sizes: list[int] | None = None  # the labelled-set sizes fine-tuned (None: all of task.sizes; []: none)
    draws: int = Field(default=1, ge=1)  # labelled subsets fine-tuned per size (the first of task.draws)
    lrs: list[float] = Field(default_factory=lambda: [3e-4, 1e-3], min_length=1)  # backbone; head 10x
    batch: int = Field(default=16, ge=1)
    epochs: float = Field(default=20.0, gt=0)
    min_steps: int = Field(default=20, ge=1)
    max_steps: int = Field(default=120, ge=1)
    warmup_steps: int = Field(default=10, ge=0)
    eval_every: int = Field(default=10, ge=1)
    patience: int = Field(default=3, ge=1)
    weight_decay: float = Field(default=0.01, ge=0)

    @field_validator("lrs")
    @classmethod
    def _positive_lrs(cls, value):
        if any(lr <= 0 for lr in value):
            raise ValueError("learning rates must be positive")
        return value


class TaskConfig(_Strict):
    """The downstream task: a file (id, text, label, split), or with ``demo`` BBC News topics.
    Transfer is a label-efficiency curve: at each of ``sizes`` labelled examples, ``draws``
    labelled subsets, each probed (and fine-tuned, see :class:`FinetuneConfig`), with the bag-of-words
    reference line; ``dev_docs`` of the train split (unless the file has a dev split) choose the
    probe's penalty and the fine-tuning learning rate, and stop fine-tuning."""

    path: Path | None = None
    train_docs: int = Field(default=500, ge=10)  # demo task only
    test_docs: int = Field(default=300, ge=10)  # demo task only
    sizes: list[int] = Field(default_factory=lambda: [10, 25, 50, 100, 0], min_length=1)  # 0: the whole pool
    draws: int = Field(default=3, ge=1)
    dev_docs: int = Field(default=100, ge=0)
    max_tokens: int = Field(default=128, ge=8)
    probe_l2: list[float] = Field(default_factory=lambda: [1e-3, 1e-2, 1e-1, 1.0], min_length=1)
    bag_of_words: bool = True
    bow_c: list[float] = Field(default_factory=lambda: [1.0, 10.0, 100.0, 1000.0], min_length=1)
    finetune: FinetuneConfig = Field(default_factory=FinetuneConfig)
    variants: list[str] | None = None  # the variants with transfer runs (None: all)

    @model_validator(mode="before")
    @classmethod
    def _former_keys(cls, data):
        if isinstance(data, dict):
            former = [k for k in ("finetune_steps", "finetune_batch", "finetune_lr") if k in data]
            if former or isinstance(data.get("finetune"), bool):
                raise ValueError(
                    f"task.{(former or ['finetune'])[0]}: fine-tuning is set in [task.finetune] (lrs, batch, "
                    "epochs, min_steps, max_steps, warmup_steps, eval_every, patience; sizes = [] for none)"
                )
        return data

    @field_validator("path")
    @classmethod
    def _task_exists(cls, value):
        return _existing_file(value, "task.path", "a Parquet file with id, text, label, split columns")

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value):
        if any(n < 0 for n in value) or len(set(value)) != len(value):
            raise ValueError("sizes must be distinct labelled-set sizes (0: the whole pool)")
        return value

    @model_validator(mode="after")
    def _finetuned_sizes(self):
        extra = sorted(set(self.finetune.sizes or []) - set(self.sizes))
        if extra:
            raise ValueError(f"task.finetune.sizes: {extra} are not among task.sizes {self.sizes}")
        if self.finetune.draws > self.draws:
            raise ValueError(f"task.finetune.draws ({self.finetune.draws}) exceeds task.draws ({self.draws})")
        return self


class MemorizationConfig(_Strict):
    """Memorization of planted canaries (trainer.memorization): with ``demo``, the demo corpus's
    (``heldout/canaries.parquet``); otherwise ``canaries``, a Parquet file with ``id``, ``text``,
    ``occurrences`` (how many times the text occurs in the raw pool; 0 for control canaries, made
    alike and put in no pool) and optionally ``pool_ids`` (the pool ids of its occurrences)."""

    enabled: bool = True
    canaries: Path | None = None
    prefix_tokens: int = Field(default=32, ge=1)
    suffix_tokens: int = Field(default=32, ge=1)

    @field_validator("canaries")
    @classmethod
    def _canaries_exist(cls, value):
        return _existing_file(value, "memorization.canaries", "a Parquet file with id, text, occurrences columns")


class LanguagesConfig(_Strict):
    """Bits per byte per language on the held-out text (every document of the clean sets scored
    whole after pretraining, trainer.scoring; the held-out texts' ``lang``), the macro-average over
    the low-resource languages (every language with held-out text not in ``high_resource``) and
    over the high-resource ones; and the temperature family: ``variants`` (sampled at different
    temperatures over groups that include the language, e.g. ``group_by = ["source", "lang"]``),
    each compared with the first on both averages. Expected (mT5, UniMax): a higher temperature
    helps the low-resource languages and costs the high-resource ones a little."""

    enabled: bool = True
    high_resource: list[str] = Field(default_factory=lambda: ["en"])
    variants: list[str] = Field(default_factory=list)  # the first is the reference


def budget_label(tokens: int) -> str:
    """A token budget as a name: 150000 -> ``150k``, 1200000 -> ``1.2M``."""
    return f"{tokens / 1e6:g}M" if tokens >= 1_000_000 else f"{tokens / 1e3:g}k" if tokens >= 1000 else str(tokens)


class EfficiencyConfig(_Strict):
    """The data-efficiency multiplier: ``variants`` trained again at each of ``budgets`` (token
    budgets besides the experiment's ``budget_tokens``), each budget a mixture of the same curation
    run and a pretraining run per seed (no transfer, no memorization), named ``<variant>-<budget>``
    (``raw-150k``). Per variant and seed, held-out loss against tokens is fitted with
    L(D) = E + B / D^beta (:func:`fit_power_law`); the multiplier says how many times fewer tokens the
    other variants need to reach the first one's loss at the largest budget."""

    budgets: list[int] = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)  # the first is the reference (the baseline, usually)

    @field_validator("budgets")
    @classmethod
    def _positive(cls, value):
        if any(b < 1 for b in value) or len(set(value)) != len(value):
            raise ValueError("budgets must be distinct positive token counts")
        return sorted(value)


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
    eval_sets: list[EvalSetConfig] = Field(default_factory=list)  # the user's own held-out sets
    decontamination: DecontaminationConfig = Field(default_factory=DecontaminationConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    memorization: MemorizationConfig = Field(default_factory=MemorizationConfig)
    efficiency: EfficiencyConfig = Field(default_factory=EfficiencyConfig)
    languages: LanguagesConfig = Field(default_factory=LanguagesConfig)
    quality_model: Path | None = None  # fastText quality model; default with demo: trained on it
    variants: list[VariantConfig] = Field(min_length=1)
    baseline: str | None = None  # the variant others are compared with; default: the first
    train: dict = Field(default_factory=dict)  # trainer config less mixture, out_dir and seed
    # Pretraining and transfer runs at a time, each in a process of its own with its share of the
    # cores (on a CPU, two small models train faster side by side than one on both cores); 1 runs
    # them one after the other in the flow's process (one GPU: 1).
    parallel_runs: int = Field(default=1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _no_reference(cls, data):
        if isinstance(data, dict) and "reference" in data:
            raise ValueError(
                "reference: the held-out set is no longer sampled from a curated variant; remove "
                "[reference] (demo = true brings held-out sets; add your own with [[eval_sets]])"
            )
        return data

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
        for variant in self.variants:
            if variant.ablation_of is not None and (
                variant.ablation_of not in names or variant.ablation_of == variant.name
            ):
                raise ValueError(
                    f"variant {variant.name}: ablation_of {variant.ablation_of!r} is not another variant "
                    f"({', '.join(names)})"
                )
        if "lang" in self.group_by and any("lang" not in v.stages for v in self.variants):
            raise ValueError('group_by "lang" needs the lang stage in every variant')
        sets = [s.name for s in self.eval_sets]
        taken = [name for name in sets if sets.count(name) > 1 or (self.demo and name in DEMO_SETS)]
        if taken:
            raise ValueError(
                f"eval_sets: the set name {taken[0]!r} is repeated or taken by the demo's held-out sets; rename it"
            )
        if not self.demo and not self.eval_sets:
            raise ValueError(
                "eval_sets: name at least one held-out file ([[eval_sets]] name, path); the "
                "experiment compares variants on text no curation chose"
            )
        if not self.demo and self.task.path is None:
            raise ValueError("task.path: name the downstream task's file (demo = true has a built-in one)")
        if not self.demo and any(v.quality for v in self.variants) and self.quality_model is None:
            raise ValueError(
                "quality_model: a variant uses the quality filter; train one with "
                "`curate train-quality` and name it here"
            )
        for key, chosen in (
            ("task.variants", self.task.variants or []),
            ("languages.variants", self.languages.variants),
        ):
            unknown = [name for name in chosen if name not in names]
            if unknown:
                raise ValueError(f"{key}: {', '.join(unknown)} is not a variant ({', '.join(names)})")
        if self.languages.variants:
            by_name = {v.name: v for v in self.variants}
            family = [by_name[name] for name in self.languages.variants]
            if not self.languages.enabled or len(family) < 2 or any(v.weights is not None for v in family):
                raise ValueError(
                    "languages.variants: name at least two variants sampled by temperature or uniform "
                    "(not explicit weights), with languages.enabled"
                )
        if self.efficiency.budgets:
            unknown = [name for name in self.efficiency.variants if name not in names]
            if len(self.efficiency.variants) < 2 or unknown:
                raise ValueError(
                    "efficiency.variants: name at least two variants"
                    + (f"; {', '.join(unknown)} is not one ({', '.join(names)})" if unknown else "")
                )
            if len({*self.efficiency.budgets, self.budget_tokens}) < 3:
                raise ValueError(
                    "efficiency.budgets: a power law of three parameters needs at least three budgets "
                    "in all (budget_tokens counts); four give it a residual"
                )
            taken = {v.name for v in self.efficiency_variants()} & set(names)
            if taken:
                raise ValueError(f"efficiency: the run name {sorted(taken)[0]!r} is taken by a variant; rename it")
        block = (self.train.get("model") or {}).get("block_size", 256)  # the trainer's default
        cut = self.memorization.prefix_tokens + self.memorization.suffix_tokens
        if self.memorization.enabled and isinstance(block, int) and cut > block:
            raise ValueError(
                f"memorization: prefix_tokens + suffix_tokens ({cut}) must fit the model's block_size "
                f"({block}); shorten them or set memorization.enabled = false"
            )
        for key in ("mixture", "out_dir", "seed"):
            if key in self.train:
                raise ValueError(f"train.{key}: set by the experiment for every run; remove it")
        return self

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.variants[0].name

    def efficiency_variants(self) -> list[VariantConfig]:
        """The variants of the data-efficiency fit at the budgets besides ``budget_tokens``."""
        by_name = {v.name: v for v in self.variants}
        return [
            by_name[name].model_copy(
                update={"name": f"{name}-{budget_label(budget)}", "budget_tokens": budget, "ablation_of": None}
            )
            for name in self.efficiency.variants
            for budget in self.efficiency.budgets
            if budget != self.budget_tokens
        ]

    def all_variants(self) -> list[VariantConfig]:
        """Every mixture the experiment trains on: the variants, then the data-efficiency runs."""
        return [*self.variants, *self.efficiency_variants()]

    def curations(self) -> dict[str, list[VariantConfig]]:
        """Curation folder -> the variants it serves (data-efficiency runs included), in config order."""
        runs: dict[str, list[VariantConfig]] = {}
        for variant in self.all_variants():
            runs.setdefault(variant.curation_key, []).append(variant)
        return runs


def load_experiment(path: Path) -> ExperimentConfig:
    return validate_model(ExperimentConfig, read_toml(path))


def parse_experiment(data: dict) -> ExperimentConfig:
    return validate_model(ExperimentConfig, data)


def curation_config(
    base: dict,
    variants: list[VariantConfig],
    experiment: ExperimentConfig,
    run_dir: Path,
    tokenizer: Path | None,
    exclude: list[Path],
    quality_model: Path | None,
) -> dict:
    """The curation run config (a dict for ``pipeline.core.config.parse_config``) of ``variants``, which
    share their stages: ``base``'s sources and stage settings, the variants' stages turned on and
    the others off, the shared tokenizer, ``exclude`` (held-out and task texts) and one mixture per
    variant. With ``tokenizer=None`` the run stops at the curated documents (with no stages: the
    source-only run the tokenizer's sample comes from)."""
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
        mixture = {
            "name": variant.name,
            "budget_tokens": variant.budget_tokens or experiment.budget_tokens,
            "max_epochs": variant.max_epochs or experiment.max_epochs,
        }
        if variant.weights is not None:
            mixture["weights"], mixture["default_weight"] = variant.weights, 0.0
        elif variant.uniform:
            mixture["weights"], mixture["default_weight"] = {}, 1.0
        else:
            mixture["temperature"] = variant.temperature or 1.0
        mixtures.append(mixture)
    # Each variant's own validation split stays, but its training documents are not decontaminated
    # against it: that would drop every copy of any document one of whose copies landed in the
    # split, so raw would lose its most duplicated clusters whole (measured on the demo: 5,277
    # documents, 14% of raw's tokens, and 99 of 100 copies of most canaries) -- a dedup of its own
    # that would hide what dedup does. The experiment's measure is the fixed held-out sets, kept out
    # of every pool by ``exclude``; a variant's own validation loss is reported, never compared.
    config["mix"] = {
        "group_by": list(experiment.group_by),
        "validation_fraction": experiment.validation_fraction,
        "validation_max_docs": 500,
        "decontaminate": False,
        "exclude": [str(p) for p in exclude],
        "mixtures": mixtures,
    }
    # The mix stage's token-window exclusion (pipeline.decontaminate), as the check judges it.
    config["mix"]["exclude_ngram"] = experiment.decontamination.window_tokens
    config["mix"]["common_window_docs"] = experiment.decontamination.common_window_docs
    return config


# ---------------------------------------------------------------------------------------------
# Held-out sets


def read_eval_set(spec: EvalSetConfig) -> pl.DataFrame:
    """A user's held-out file as :data:`HELDOUT_COLUMNS` rows (set = its name, group = its group
    column or the set's name, kind "user"); rows without text are left out."""
    path = Path(spec.path)
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_ndjson(path)
    except Exception as error:  # noqa: BLE001 - any reader error is the file's
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"eval_sets {spec.name}: {str(path)!r} cannot be read ({first}); give Parquet or JSON lines"
        ) from None
    for key, column in (
        ("text_field", spec.text_field),
        ("group_field", spec.group_field),
        ("id_field", spec.id_field),
    ):
        if column is not None and column not in frame.columns:
            raise ConfigError(
                f"eval_sets {spec.name}: {str(path)!r} has no {column!r} column (columns: "
                f"{', '.join(frame.columns)}); set {key} to one of them"
            )
    rows = pl.int_range(pl.len()).cast(pl.String)
    texts = frame.select(
        id=pl.col(spec.id_field).cast(pl.String) if spec.id_field else pl.lit(f"{spec.name}:") + rows,
        text=pl.col(spec.text_field).cast(pl.String),
        set=pl.lit(spec.name),
        group=pl.col(spec.group_field).cast(pl.String).fill_null(spec.name) if spec.group_field else pl.lit(spec.name),
        lang=pl.lit(None, dtype=pl.String),
        kind=pl.lit("user"),
        clean=pl.lit(spec.clean),
    )
    texts = texts.filter(pl.col("text").is_not_null() & (pl.col("text").str.strip_chars() != ""))
    if texts.height == 0:
        raise ConfigError(f"eval_sets {spec.name}: {str(path)!r} holds no text; point it at a file with texts")
    return texts


def heldout_texts(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The held-out sets as one frame of :data:`HELDOUT_COLUMNS`, sorted by set, group, id; ids
    must be unique across sets (an id names one text in the exclusion and in the evaluation)."""
    texts = pl.concat([f.select([pl.col(c).cast(t) for c, t in HELDOUT_COLUMNS.items()]) for f in frames])
    repeated = texts.filter(pl.col("id").is_duplicated())
    if repeated.height:
        raise ConfigError(
            f"held-out sets: the id {repeated['id'][0]!r} names more than one text (sets "
            f"{', '.join(sorted(set(repeated['set'])))}); give every held-out text its own id"
        )
    return texts.sort(["set", "group", "id"])


def eval_group(texts: pl.DataFrame) -> pl.Expr:
    """The evaluation group of a held-out text: ``<set>/<group>``."""
    return pl.concat_str([pl.col("set"), pl.col("group")], separator="/")


def write_eval_folder(texts: pl.DataFrame, tokenizer_path: Path, folder: Path, seed: int) -> dict:
    """Tokenize the held-out texts into ``folder`` in the mixture format (pipeline.mix.mixture: the
    manifest, the tokenizer, ``validation/<set>+<group>-0000.arrow``; no training side): one group
    ``<set>/<group>`` each, documents in id order, so the same texts and tokenizer give the same
    bytes. Returns the manifest (its groups say which sets are clean)."""
    from pipeline.io.writer import write_json
    from pipeline.mix.mixture import MANIFEST_FILE, TOKENIZER_FILE, manifest, shard_entry, shard_file, tokenizer_entry
    from pipeline.tokenize import load_tokenizer, write_token_shard

    tokenizer = load_tokenizer(tokenizer_path)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOKENIZER_FILE).write_bytes(Path(tokenizer_path).read_bytes())
    grouped = texts.with_columns(eval_group=eval_group(texts)).sort(["eval_group", "id"])
    entries, groups = [], {}
    for (group,), rows in grouped.group_by(["eval_group"], maintain_order=True):
        file = shard_file("validation", group, 0)
        entry = write_token_shard(zip(rows["id"].to_list(), rows["text"].to_list()), tokenizer, folder / file, group)
        size = int(rows["text"].str.len_bytes().sum())
        entries.append(shard_entry(file, group, entry["documents"], entry["tokens"], size, entry["sha256"]))
        groups[group] = {
            "validation_documents": entry["documents"],
            "validation_tokens": entry["tokens"],
            "validation_bytes": size,
            "set": rows["set"][0],
            "clean": bool(rows["clean"].all()),
        }
    found = manifest(
        EVAL_MIXTURE,
        seed,
        tokenizer_entry(tokenizer, folder / TOKENIZER_FILE),
        dict(sorted(groups.items())),
        [],
        entries,
    )
    write_json(found, folder / MANIFEST_FILE)
    return found


def heldout_provenance(texts: pl.DataFrame, origins: dict[str, dict], manifest: dict) -> dict:
    """results.json's ``heldout``: per set its origin (file, sha256, how it was chosen), whether it
    is clean, documents and bytes per group, and the evaluation folder's shards (sha256)."""
    sets = {}
    stats = (
        texts.with_columns(bytes=pl.col("text").str.len_bytes())
        .group_by(["set", "group"])
        .agg(documents=pl.len(), bytes=pl.col("bytes").sum(), clean=pl.col("clean").all())
        .sort(["set", "group"])
    )
    for (name,), rows in stats.group_by(["set"], maintain_order=True):
        sets[name] = {
            **origins.get(name, {}),
            "clean": bool(rows["clean"].all()),
            "documents": int(rows["documents"].sum()),
            "bytes": int(rows["bytes"].sum()),
            "groups": {
                g: {"documents": int(d), "bytes": int(b)}
                for g, d, b in rows.select("group", "documents", "bytes").iter_rows()
            },
        }
    clean = sorted(n for n, s in sets.items() if s["clean"])
    return {
        "sets": sets,
        "clean_sets": clean,
        "headline": f"mean of the clean sets' bits per byte ({', '.join(clean)})",
        "documents": texts.height,
        "bytes": int(texts["text"].str.len_bytes().sum()),
        "shards": {e["group"]: e["sha256"] for e in manifest["validation"]},
        "tokenizer_sha256": manifest["tokenizer"]["sha256"],
    }


def tokenizer_sample(docs: pl.DataFrame, heldout: pl.DataFrame, sample_docs: int, seed: int) -> pl.DataFrame:
    """The tokenizer's training documents: a seeded sample of the raw pool (``docs``: the source
    stage's documents), none of them a held-out text (same id or same text). The sample depends on
    the ids and the seed, not on the rows' order, and favours no variant: none has curated it."""
    pool = docs.filter(~pl.col("id").is_in(heldout["id"].implode()) & ~pl.col("text").is_in(heldout["text"].implode()))
    keys = seeded_id_hash(pool["id"], seed, SALT_TOKENIZER)
    return (
        pool.with_columns(key=pl.Series(keys, dtype=pl.UInt64))
        .sort(["key", "id"])
        .head(sample_docs)
        .drop("key")
        .sort("id")
    )


# ---------------------------------------------------------------------------------------------
# What a variant trained on


def trained_on(documents: pl.DataFrame, plan: pl.DataFrame, labels: pl.DataFrame | None = None) -> dict:
    """Training tokens and bytes of a mixture, bytes per token, epochs per group, and (with the demo
    corpus's ``labels``: ``id`` = ``<source>/<key>``, ``kind``) each kind's share of the tokens.

    ``documents`` is the mix stage's ``documents.parquet`` (id, group, tokens, bytes), ``plan`` the
    mixture's ``plan.parquet`` (id, repeats): a document trained on ``repeats`` times counts so often."""
    used = (
        plan.select("id", "repeats")
        .join(documents.select("id", "group", "tokens", "bytes"), on="id", how="inner")
        .with_columns(
            trained_tokens=pl.col("tokens") * pl.col("repeats"), trained_bytes=pl.col("bytes") * pl.col("repeats")
        )
    )
    tokens, size = int(used["trained_tokens"].sum()), int(used["trained_bytes"].sum())
    pool = documents.filter(pl.col("split") == "train") if "split" in documents.columns else documents
    available = dict(pool.group_by("group").agg(pl.col("tokens").sum()).iter_rows())
    epochs = {
        g: int(t) / available[g] if available.get(g) else 0.0
        for g, t in used.group_by("group").agg(pl.col("trained_tokens").sum()).sort("group").iter_rows()
    }
    result = {
        "tokens": tokens,
        "bytes": size,
        "bytes_per_token": size / tokens if tokens else None,
        "epochs": epochs,
        "documents": int((used["repeats"] > 0).sum()),
    }
    if labels is not None:
        kinds = (
            used.join(labels.select("id", "kind"), on="id", how="left")
            .with_columns(pl.col("kind").fill_null("unlabelled"))
            .group_by("kind")
            .agg(tokens=pl.col("trained_tokens").sum(), bytes=pl.col("trained_bytes").sum())
            .sort("kind")
        )
        result["kinds"] = {
            k: {"tokens": int(t), "bytes": int(b), "share": int(t) / tokens if tokens else 0.0}
            for k, t, b in kinds.iter_rows()
        }
    return result


TASK_SET = "task"  # the set name of the downstream task's texts in the protected texts


def protected_texts(heldout: pl.DataFrame, task: pl.DataFrame) -> pl.DataFrame:
    """``id, text, set`` of the texts no training document may share a token window with: the
    clean held-out sets and the task's texts (ids ``task/<id>``). Every pool is decontaminated
    against them (``mix.exclude``) and every mixture is checked against them.

    Junk sets are not among them: they are kept out of the pools by lineage (the corpus never
    writes them or their copies into a pool), while the templates they were made from are the
    pools' own junk; excluding everything that shares a template window with them would take most
    junk out of every variant and hide what curation removes. Their overlap is checked and
    reported apart (:func:`contamination_total` counts only protected sets)."""
    clean = heldout.filter(pl.col("clean")).select("id", "text", "set")
    tasks = task.select(
        id=pl.lit(f"{TASK_SET}/") + pl.col("id").cast(pl.String), text=pl.col("text"), set=pl.lit(TASK_SET)
    )
    return pl.concat([clean, tasks]).sort(["set", "id"])


def contamination_total(check: dict) -> int:
    """Training documents that share a window with protected text, in a check's result
    (:func:`pipeline.decontaminate.check_contamination`)."""
    return int(check.get("contaminated_documents", 0))


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
    return {
        "mean": float(array.mean()),
        "std": float(array.std(ddof=1)) if array.size > 1 else 0.0,
        "min": float(array.min()),
        "max": float(array.max()),
        "n": int(array.size),
        "by_seed": by_seed,
    }


ALPHA = 0.05  # the family-wise error rate of each family of comparisons (Holm)


def compare(a: dict, b: dict, lower_is_better: bool) -> dict:
    """``a`` against ``b`` (two :func:`spread` results): the difference, its standard error, a
    two-sided t-test and the 95% confidence interval of the difference.

    Paired by seed when both have the same seeds (two or more): a seed fixes the model's
    initialization and the order of its batches, so runs of one seed on two variants differ only by
    their data, and the per-seed differences d_i are what varies: Student's t on mean(d) with
    standard error sd(d) / sqrt(n) and n - 1 degrees of freedom. Unpaired otherwise: Welch's t on
    the difference of means (Welch-Satterthwaite degrees of freedom). With fewer than two values
    on a side there is no test (``p`` is None). ``better`` is the direction of the difference
    (whether ``a`` is better), not a verdict: :func:`holm` decides which differences are
    significant within a family of comparisons."""
    empty = {
        "difference": None,
        "stderr": None,
        "df": None,
        "t": None,
        "p": None,
        "ci95": None,
        "better": None,
        "paired": False,
    }
    if a["mean"] is None or b["mean"] is None:
        return empty
    seeds = sorted(a["by_seed"])
    paired = len(seeds) >= 2 and seeds == sorted(b["by_seed"])
    if paired:
        d = np.array([a["by_seed"][s] - b["by_seed"][s] for s in seeds])
        difference = float(d.mean())
        stderr = float(d.std(ddof=1) / math.sqrt(d.size))
        df = float(d.size - 1)
    else:
        difference = a["mean"] - b["mean"]
        va, vb = (a["std"] ** 2) / max(a["n"], 1), (b["std"] ** 2) / max(b["n"], 1)
        stderr = math.sqrt(va + vb)
        if a["n"] < 2 or b["n"] < 2:
            df = None
        elif va + vb == 0:
            df = float(a["n"] + b["n"] - 2)
        else:
            df = (va + vb) ** 2 / (va**2 / (a["n"] - 1) + vb**2 / (b["n"] - 1))
    better = (difference < 0) if lower_is_better else (difference > 0)
    result = {
        **empty,
        "difference": difference,
        "stderr": stderr,
        "df": df,
        "paired": paired,
        "better": bool(better) if difference != 0 else None,
    }
    if df is None:
        return result
    if stderr == 0:  # every seed shows exactly the same difference: no spread to test against
        t, p, half = None, (0.0 if difference != 0 else 1.0), 0.0
    else:
        t = difference / stderr
        p = float(2 * stats.t.sf(abs(t), df))
        half = float(stats.t.ppf(0.975, df) * stderr)
    return {**result, "t": t, "p": p, "ci95": [difference - half, difference + half]}


BOOTSTRAP_REPLICATES = 2000


def bootstrap_ratio_difference(
    numerator_a: np.ndarray,
    numerator_b: np.ndarray,
    denominator: np.ndarray,
    strata: np.ndarray,
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = 0,
) -> dict:
    """A paired bootstrap over seeds and test items of ``stat(a) - stat(b)``.

    ``numerator_a`` and ``numerator_b`` are ``(seeds, items)``, the same items in the same order
    (for held-out text: each document's bits; for a task: 1 where an item was classified right);
    ``denominator`` is ``(items,)`` (the document's bytes; 1 per task item). A model's statistic on
    one stratum (a held-out set) is its summed numerator over the summed denominator; over several
    strata, their mean (each set counts once, as in the headline). Each replicate draws the seeds
    with replacement and, within each stratum, the items with replacement, the same draws for both
    sides (paired), and takes the mean over the drawn seeds. Returns the observed difference, the
    95% percentile interval and a two-sided p-value (twice the smaller tail share beyond 0, at most
    1), with the number of items and replicates.

    With few seeds the seed half of this resampling is coarse (3 seeds have 10 distinct draws) and
    narrower than the t-interval; it is reported beside the seed t-test, for what the test items'
    variation adds, not instead of it."""
    rng = np.random.default_rng(seed)
    seeds = numerator_a.shape[0]
    chosen_seeds = rng.integers(0, seeds, size=(replicates, seeds))
    labels = np.unique(strata)
    observed, replicated = 0.0, np.zeros(replicates)
    for label in labels:
        columns = np.flatnonzero(strata == label)
        a, b, d = numerator_a[:, columns], numerator_b[:, columns], denominator[columns]
        observed += (a.sum(1).mean() - b.sum(1).mean()) / d.sum()
        counts = rng.multinomial(len(columns), np.full(len(columns), 1 / len(columns)), size=replicates)
        per_seed = counts @ (a - b).T  # (replicates, seeds): each seed's summed difference
        taken = np.take_along_axis(per_seed, chosen_seeds, axis=1).mean(1)
        replicated += taken / np.maximum(counts @ d, 1e-12)
    observed /= len(labels)
    replicated /= len(labels)
    low, high = np.percentile(replicated, [2.5, 97.5])
    tail = min((replicated <= 0).mean(), (replicated >= 0).mean())
    return {
        "difference": float(observed),
        "ci95": [float(low), float(high)],
        "p": float(min(1.0, 2 * tail)),
        "items": int(numerator_a.shape[1]),
        "seeds": int(seeds),
        "replicates": replicates,
    }


def _item_values(metric: str, model: str, scores: dict, transfer: dict):
    """``(seed -> per-item numerators, item ids, denominators, strata)`` behind ``metric`` for
    ``model``, for :func:`bootstrap_ratio_difference`; None when the measure has no items kept
    (a held-out group, a loss) or the model has none."""
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


def holm(comparisons: list[dict], alpha: float = ALPHA) -> None:
    """Holm's step-down correction across ``comparisons`` (each with ``p`` from :func:`compare`):
    adds ``p_holm`` (the adjusted p-value, None without a test) and ``significant`` (``p_holm`` <
    ``alpha``), so the chance that any comparison of the family calls a difference where there is
    none stays below ``alpha``, however many comparisons there are (Holm 1979)."""
    tested = sorted((c for c in comparisons if c.get("p") is not None), key=lambda c: c["p"])
    m = len(tested)
    running = 0.0
    for rank, comparison in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * comparison["p"]))
        comparison["p_holm"] = running
    for comparison in comparisons:
        comparison.setdefault("p_holm", None)
        comparison["significant"] = comparison["p_holm"] is not None and comparison["p_holm"] < alpha
        comparison["family_size"] = m


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if abs(value) >= 10**-digits else f"{value:.1e}"


def _p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def sentence(
    metric: str, a_name: str, b_name: str, a: dict, b: dict, comparison: dict, lower_is_better: bool, digits: int = 3
) -> str:
    """The plain sentence a comparison supports (after :func:`holm`)."""
    if comparison["difference"] is None:
        return f"{metric}: no values for {a_name} or {b_name}."
    a_text = f"{a['mean']:.{digits}f} ± {a['std']:.{digits}f}"
    b_text = f"{b['mean']:.{digits}f} ± {b['std']:.{digits}f}"
    direction = "lower" if comparison["difference"] < 0 else "higher"
    pairing = "paired by seed" if comparison.get("paired") else "unpaired"
    head = (
        f"{metric}: {a_name} {a_text} vs {b_name} {b_text}, {direction} by {abs(comparison['difference']):.{digits}f}"
    )
    if comparison["p"] is None:
        return f"{head} ({a['n']} and {b['n']} seeds: too few for a test); no verdict."
    low, high = comparison["ci95"]
    head += (
        f" (95% CI {_number(low, digits)} to {_number(high, digits)}; {a['n']} and {b['n']} seeds, {pairing}, "
        + (
            f"t = {comparison['t']:.2f} at {comparison['df']:.3g} df, "
            if comparison["t"] is not None
            else "the same difference on every seed, "
        )
        + f"{_p_text(comparison['p'])}, "
        f"Holm-adjusted over the {comparison['family_size']} comparisons of its family, "
        f"{comparison['family']}: {_p_text(comparison['p_holm'])})"
    )
    if not comparison["significant"]:
        return f"{head}: not significant, so these runs show no difference."
    if metric.startswith("memorization/"):
        return f"{head}: significant; {a_name} memorizes {'less' if comparison['better'] else 'more'} than {b_name}."
    verdict = "better" if comparison["better"] else "worse"
    return f"{head}: significant; {a_name} is {verdict} than {b_name} on this measure."


# ---------------------------------------------------------------------------------------------
# Results


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
    """``probe_accuracy@50``, ``finetune_loss@all``, ``bow_accuracy@10``, ... of one transfer result
    (each size's mean over its draws)."""
    metrics = {}
    for method in TRANSFER_METHODS:
        for size, scores in results.get(method, {}).items():
            metrics[f"{method}_accuracy@{_size_label(size)}"] = scores["accuracy"]
            metrics[f"{method}_loss@{_size_label(size)}"] = scores["loss"]
    return metrics


# ---------------------------------------------------------------------------------------------
# Data efficiency


def fit_power_law(tokens, losses) -> dict | None:
    """Fit L(D) = E + B / D^beta to ``losses`` at ``tokens`` (D in millions of tokens), least squares
    with E in [0, min loss], B >= 0 and beta in [0.01, 5], started from several betas; the best fit's
    ``E``, ``B``, ``beta`` and root-mean-square residual ``rms``, or None with fewer than three
    points or no decreasing fit."""
    from scipy.optimize import least_squares

    d = np.asarray(tokens, dtype=np.float64) / 1e6
    loss = np.asarray(losses, dtype=np.float64)
    if len(d) < 3 or len(set(d.tolist())) < 3 or not np.all(np.isfinite(loss)):
        return None
    floor = float(loss.min())
    best = None
    for beta in (0.1, 0.3, 0.6, 1.0, 2.0):
        scale = max(float(loss.max() - loss.min()), 1e-6) * float(d.min()) ** beta
        start = [max(0.0, floor - scale), scale, beta]
        found = least_squares(
            lambda p: p[0] + p[1] * d ** -p[2] - loss,
            start,
            bounds=([0.0, 0.0, 0.01], [floor, np.inf, 5.0]),
            x_scale="jac",
        )
        rms = float(np.sqrt(np.mean(found.fun**2)))
        if best is None or rms < best["rms"]:
            best = {"E": float(found.x[0]), "B": float(found.x[1]), "beta": float(found.x[2]), "rms": rms}
    return best if best is not None and best["B"] > 0 else None


def tokens_to_reach(fit: dict, loss: float) -> float | None:
    """Tokens a fitted power law needs to reach ``loss``: (B / (loss - E))^(1/beta) million, or None
    when ``loss`` is at or below its floor E."""
    if fit is None or loss <= fit["E"]:
        return None
    return 1e6 * (fit["B"] / (loss - fit["E"])) ** (1.0 / fit["beta"])


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
    high = config.languages.high_resource
    by_name = {v.name: v for v in config.variants}
    return {
        "high_resource": [lang for lang in per["lang"] if lang in high],
        "low_resource": [lang for lang in per["lang"] if lang not in high],
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
    for name, chosen in (
        ("low-resource", [v for lang, v in bpb.items() if lang not in high_resource]),
        ("high-resource", [v for lang, v in bpb.items() if lang in high_resource]),
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


def canary_views(canaries: pl.DataFrame, plan: pl.DataFrame) -> dict[str, dict]:
    """How often a mixture (its ``plan``: id, repeats) trains on the canaries, per number of
    occurrences in the raw pool: the mean number of times a canary is trained on, and the share
    of canaries trained on at least once. ``canaries`` needs ``id``, ``occurrences``, ``pool_ids``."""
    planted = canaries.filter(pl.col("occurrences") > 0).select("id", "occurrences", "pool_ids")
    views = (
        planted.explode("pool_ids")
        .join(plan.select(pool_ids="id", repeats="repeats"), on="pool_ids", how="left")
        .group_by("id", "occurrences")
        .agg(views=pl.col("repeats").fill_null(0).sum())
    )
    return {
        str(n): {"canaries": int(count), "mean_views": float(mean), "seen_share": float(seen)}
        for n, count, mean, seen in views.group_by("occurrences")
        .agg(pl.len(), pl.col("views").mean().alias("mean"), (pl.col("views") > 0).mean().alias("seen"))
        .sort("occurrences")
        .iter_rows()
    }


# The questions an experiment asks, each a family that Holm's correction covers: the headline
# (the clean sets' mean held-out loss of each variant against the baseline, the question the
# experiment is built for), the held-out sets and groups one by one, each leave-one-out variant
# against the pipeline it leaves a step out of (``ablation_of``), pretrained against random
# initialization, and fine-tuning against probing. Correcting the headline for the exploratory
# per-set tests as well would leave three seeds (2 degrees of freedom) unable to answer it.
FAMILIES = (
    "headline",
    "held-out sets",
    "leave-one-out",
    "memorization",
    "transfer",
    "label efficiency",
    "languages",
    "fine-tuning vs probing",
)


OPEN = "open"  # a comparison with no expected direction: nothing it finds goes against an expectation


def _family(metric: str) -> str:
    if metric == "heldout_bpb":
        return "headline"
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
    return "bpb" in metric or "loss" in metric


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
) -> dict:
    """results.json: every run's numbers, their spread over seeds, and the comparisons with the
    sentence each supports (and whether it goes against the expectation); the held-out sets'
    provenance (``heldout``, :func:`heldout_provenance`), the contamination check's counts per
    variant (``contamination``), and what ``memorization`` (per variant and seed, a memorization
    task's result) measured on the ``canaries`` (what they are, how often each variant saw them)."""
    baseline = config.baseline_name
    names = [v.name for v in config.variants]
    eval_groups = eval_manifest["groups"]
    per_run = {
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
    per_transfer = {
        name: {str(seed): transfer_metrics(result) for seed, result in seeds.items()}
        for name, seeds in transfer.items()
    }
    per_memorization = {
        name: {str(seed): memorization_metrics(result) for seed, result in seeds.items()}
        for name, seeds in (memorization or {}).items()
    }
    per_language = {
        name: {str(seed): language_metrics(frame, config.languages.high_resource) for seed, frame in seeds.items()}
        for name, seeds in (scores or {}).items()
    }
    metrics: dict[str, dict[str, dict]] = {}
    for table in (per_run, per_transfer, per_memorization, per_language):
        for name, seeds in table.items():
            keys = sorted({key for values in seeds.values() for key in values})
            for key in keys:
                metrics.setdefault(key, {})[name] = spread({seed: values.get(key) for seed, values in seeds.items()})

    comparisons = []

    def add(
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
        b_metric = b_metric or metric
        if a not in metrics.get(metric, {}) or b not in metrics.get(b_metric, {}):
            return
        lower = _lower_is_better(metric)
        name = name or (metric if b_metric == metric else metric.replace("finetune_", "finetune_vs_probe_"))
        comparisons.append(
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

    # The family Holm corrects over: each test once. A set's only group is the set itself, and a
    # transfer's cross-entropy says what its accuracy says: both are reported, not tested again.
    groups_of = Counter(m.split("/")[1] for m in metrics if m.startswith("heldout_bpb/") and m.count("/") == 2)
    held_out = [
        m for m in metrics if m.startswith("heldout_bpb") and (m.count("/") < 2 or groups_of[m.split("/")[1]] > 1)
    ]
    junk = {name for name, info in heldout["sets"].items() if not info["clean"]}
    by_name = {v.name: v for v in config.variants}

    def held_out_against(curated: str, other: str, family: str | None = None) -> None:
        """``curated`` (more curation) against ``other``, on every held-out measure: expected lower
        on the clean sets, higher on the junk its curation removes."""
        a, b = (curated, other) if family is None else (other, curated)  # leave-one-out: a lacks a step
        mixing_only = by_name[a].curation_key == by_name[b].curation_key
        for metric in held_out:
            on_junk = bool(metric.split("/")[1:2]) and metric.split("/")[1] in junk
            if mixing_only:
                # The same documents mixed otherwise: sets of several languages and sources give no
                # direction to expect (the languages family has one).
                add(metric, a, b, OPEN, f"{a} and {b} mix the same curated documents differently", family=family)
                continue
            why = (
                f"curation ({curated}) removes junk, so its loss on junk is higher"
                if on_junk
                else f"more curation ({curated}) gives lower held-out loss than {other}"
            )
            add(metric, a, b, (not on_junk) == (a == curated), why, family=family)

    for name in names:
        if name != baseline:
            held_out_against(name, baseline)
    for variant in config.variants:
        if variant.ablation_of is not None:
            held_out_against(variant.ablation_of, variant.name, family="leave-one-out")
    # Memorization: each variant against the baseline, and each leave-one-out variant against the
    # pipeline it leaves a step out of, at every planted count. The expected direction follows the
    # training views (how many times a mixture trained on a canary, summed over its copies): fewer
    # views, less memorization; a canary planted once is expected alike, as are equal views.
    views = (canaries or {}).get("trained", {})
    planted = sorted(
        (m for m in metrics if m.startswith("memorization/exposure/") and m != "memorization/exposure/control"),
        key=lambda m: int(m.rsplit("/", 1)[1]),
    )

    def memorized_against(a: str, b: str) -> None:
        for metric in planted:
            n = metric.rsplit("/", 1)[1]
            seen_a = views.get(a, {}).get(n, {}).get("mean_views")
            seen_b = views.get(b, {}).get(n, {}).get("mean_views")
            if n == "1" or seen_a is None or seen_b is None or math.isclose(seen_a, seen_b, rel_tol=0.1):
                shown = "" if seen_a is None or seen_b is None else f" ({seen_a:.2f} and {seen_b:.2f} views)"
                add(
                    metric,
                    a,
                    b,
                    None,
                    f"{a} and {b} train on a canary planted {n} times alike{shown}, so they memorize it alike",
                    family="memorization",
                )
            else:
                add(
                    metric,
                    a,
                    b,
                    seen_a < seen_b,
                    f"{a} trains on a canary planted {n} times {seen_a:.2f} times on "
                    f"average, {b} {seen_b:.2f} times: more views, more memorization",
                    family="memorization",
                )

    for name in names:
        if name != baseline:
            memorized_against(name, baseline)
    for variant in config.variants:
        if variant.ablation_of is not None:
            memorized_against(variant.name, variant.ablation_of)
    # Languages: each variant of the temperature family against its first, on the macro-average over
    # the low-resource languages and over the high-resource ones.
    family = {v.name: v for v in config.variants if v.name in config.languages.variants}
    if family:
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
                add(
                    metric,
                    name,
                    reference.name,
                    expected,
                    f"a higher sampling temperature lowers the loss of the languages it upsamples and raises "
                    f"that of the high-resource ones ({why})",
                    family="languages",
                )
    transfer_keys = [m for m in metrics if "_accuracy@" in m]
    # Label efficiency: each variant's gain in accuracy over random initialization, seed by seed,
    # at the fewest labels against the most (expected larger with few labels).
    task_info = transfer_summary(transfer)
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
                add(
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
    for name in names:
        for metric in transfer_keys:
            add(metric, name, "random", True, "pretraining helps over random initialization")
    for name in ["random", *names]:
        for metric in [m for m in transfer_keys if m.startswith("finetune_")]:
            add(
                metric,
                name,
                name,
                True,
                "fine-tuning beats a linear probe",
                f"{name} fine-tuned",
                f"{name} probed",
                b_metric=metric.replace("finetune_", "probe_"),
            )
    for family in dict.fromkeys(c["family"] for c in comparisons):
        holm([c for c in comparisons if c["family"] == family])
    for c in comparisons:
        metric, a, b_metric, b, lower, name = c.pop("_sides")
        if metric == b_metric:
            sides = [_item_values(metric, model, scores or {}, transfer) for model in (a, b)]
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
    return {
        "format": "curate.experiment/1",
        "config": config.model_dump(mode="json"),
        "baseline": baseline,
        "variants": names,
        "seeds": list(config.seeds),
        "curation": curation,
        "heldout": heldout,
        "contamination": contamination,
        "runs": per_run,
        "transfer": per_transfer,
        "task": task_info,
        "memorization": {**(canaries or {}), "runs": per_memorization} if memorization else None,
        "languages": _languages_info(config, scores) if scores else None,
        "data_efficiency": data_efficiency(config, per_run) or None,
        "metrics": metrics,
        "alpha": ALPHA,
        "families": {f: sum(c["family"] == f and c["p"] is not None for c in comparisons) for f in FAMILIES},
        "comparisons": comparisons,
        "curves": curves or {},
    }
