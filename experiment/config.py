"""The experiment's config: its variants, held-out sets of the user's, decontamination, the
downstream task and its fine-tuning, memorization, languages, data efficiency and the tokenizer
(:class:`ExperimentConfig`, read by :func:`load_experiment`), and the curation run config of each
group of variants that share their stages (:func:`curation_config`)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config import DEFAULT_FILTERS, EXCLUDE_SUFFIXES, Weight, _existing_file, _Strict
from pipeline.formats.choices import read_choice_items
from pipeline.formats.configfile import ConfigError, ExpandedPath, OutputFolder, Seed, read_toml, validate_model
from pipeline.formats.names import check_component
from pipeline.formats.task import load_task

DOCUMENT_STEPS = ("lang", "filter", "dedup", "lines")
DEMO_SETS = ("news", "dialogues", "web", "junk")

Positive = Annotated[float, Field(gt=0)]


def _file_name(value: str, what: str) -> str:
    """A name that becomes a folder or file name (a variant's mixture and runs, a set's files)."""
    return check_component(value, what, [value])


class VariantConfig(_Strict):
    """One variant: the curation it runs and how its mixture is weighted."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    stages: list[Literal["lang", "filter", "dedup", "lines"]] = Field(default_factory=list)
    quality: bool = False  # add the fastText quality filter (needs the filter stage)
    temperature: float | None = Field(default=None, gt=0)  # over the groups; None: 1 (natural)
    weights: dict[str, Weight] | None = None
    uniform: bool = False  # every group weighs the same; with max_epochs, UniMax (Chung et al. 2023)
    max_epochs: float | None = Field(default=None, gt=0)  # None: the experiment's
    budget_tokens: int | None = Field(default=None, ge=1)  # None: the experiment's
    # A leave-one-out variant (FineWeb-style ablation) is also compared with the pipeline it leaves
    # a step out of: what removing that step costs, measured inside the pipeline that uses it.
    ablation_of: str | None = None

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return _file_name(value, "the variant name")

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
    path: ExpandedPath
    text_field: str = "text"
    group_field: str | None = None  # default: one group named after the set
    id_field: str | None = None  # default: "<name>:<row>"; a pool document with an equal id is excluded
    clean: bool = True  # clean sets make the headline; others are reported on their own

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return _file_name(value, "the set name")

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
    lrs: list[Positive] = Field(default_factory=lambda: [3e-4, 1e-3], min_length=1)  # backbone; head 10x
    batch: int = Field(default=16, ge=1)
    epochs: float = Field(default=20.0, gt=0)
    min_steps: int = Field(default=20, ge=1)
    max_steps: int = Field(default=120, ge=1)
    warmup_steps: int = Field(default=10, ge=0)
    eval_every: int = Field(default=10, ge=1)
    patience: int = Field(default=3, ge=1)
    weight_decay: float = Field(default=0.01, ge=0)

    @model_validator(mode="after")
    def _steps_in_order(self):
        if self.min_steps > self.max_steps:
            raise ValueError(f"min_steps ({self.min_steps}) is above max_steps ({self.max_steps}); lower it")
        return self


class TaskConfig(_Strict):
    """The downstream task: a file (id, text, label, split), or with ``demo`` BBC News topics.
    Transfer is a label-efficiency curve: at each of ``sizes`` labelled examples, ``draws``
    labelled subsets, each probed (and fine-tuned, see :class:`FinetuneConfig`), with the bag-of-words
    reference line; ``dev_docs`` of the train split (unless the file has a dev split) choose the
    probe's penalty and the fine-tuning learning rate, and stop fine-tuning."""

    path: ExpandedPath | None = None
    train_docs: int = Field(default=500, ge=10)  # demo task only
    test_docs: int = Field(default=300, ge=10)  # demo task only
    sizes: list[int] = Field(default_factory=lambda: [10, 25, 50, 100, 0], min_length=1)  # 0: the whole pool
    draws: int = Field(default=3, ge=1)
    dev_docs: int = Field(default=100, ge=0)
    max_tokens: int = Field(default=128, ge=8)
    probe_l2: list[Positive] = Field(default_factory=lambda: [1e-3, 1e-2, 1e-1, 1.0], min_length=1)
    bag_of_words: bool = True
    bow_c: list[Positive] = Field(default_factory=lambda: [1.0, 10.0, 100.0, 1000.0], min_length=1)
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
        _existing_file(value, "task.path", "a Parquet file with id, text, label, split columns")
        if value is not None:  # the whole file checked now, not when its first transfer run starts
            load_task(Path(value))
        return value

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


class ChoiceTasksConfig(_Strict):
    """Multiple-choice tasks scored by likelihood (trainer.likelihood) on every pretrained model:
    the built-in ones (experiment.tasks: continuation, cloze and minimal pairs from the clean
    held-out sets, the classification task in context at each of ``shots``) and the user's
    ``[[eval_tasks]]``. Each variant is compared with the baseline on every task (family
    ``tasks``)."""

    enabled: bool = True
    builtin: bool = True  # build the tasks of experiment.tasks from the held-out sets and the task
    items: int = Field(default=300, ge=10)  # per built-in task, at most
    # items per task (a seeded sample of each) scored at every evaluation of the training runs:
    # the curves over training steps and the signal table (monotonicity); 0: none
    curve_items: int = Field(default=50, ge=0)
    shots: list[int] = Field(default_factory=lambda: [0, 1, 3, 5])  # the classification task in context
    batch: int = Field(default=32, ge=1)

    @field_validator("shots")
    @classmethod
    def _shots(cls, value):
        if any(k < 0 for k in value) or len(set(value)) != len(value):
            raise ValueError("shots must be distinct numbers of labelled examples in the prompt (0: none)")
        return value


class EvalTaskConfig(_Strict):
    """A file of the user's multiple-choice items (pipeline.formats.choices), scored on every
    pretrained model beside the built-in tasks; its contexts and right answers are excluded from
    every pool and checked for contamination like the held-out sets."""

    path: ExpandedPath

    @field_validator("path")
    @classmethod
    def _items_valid(cls, value):
        _existing_file(value, "eval_tasks.path", "a JSON-lines or Parquet file of multiple-choice items")
        read_choice_items(Path(value))  # every item checked now, before any work
        return value


class MemorizationConfig(_Strict):
    """Memorization of planted canaries (trainer.memorization): with ``demo``, the demo corpus's
    (``heldout/canaries.parquet``); otherwise ``canaries``, a Parquet file with ``id``, ``text``,
    ``occurrences`` (how many times the text occurs in the raw pool; 0 for control canaries, made
    alike and put in no pool) and optionally ``pool_ids`` (the pool ids of its occurrences)."""

    enabled: bool = True
    canaries: ExpandedPath | None = None
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

    @model_validator(mode="after")
    def _language_codes(self):
        from pipeline.formats.langcodes import code_languages

        code_languages(self.high_resource, "high_resource")  # codes, each language once
        return self


def budget_label(tokens: int) -> str:
    """A token budget as a name: 150000 -> ``150k``, 1200000 -> ``1.2M``."""
    return f"{tokens / 1e6:g}M" if tokens >= 1_000_000 else f"{tokens / 1e3:g}k" if tokens >= 1000 else str(tokens)


def _distinct_budgets(value: list[int], key: str) -> list[int]:
    """Token budgets, sorted; each positive and given once."""
    if any(b < 1 for b in value) or len(set(value)) != len(value):
        raise ValueError(f"{key} must be distinct positive token counts")
    return sorted(value)


class EfficiencyConfig(_Strict):
    """The data-efficiency multiplier: ``variants`` trained again at each of ``budgets`` (token
    budgets besides the experiment's ``budget_tokens``), each budget a mixture of the same curation
    run and a pretraining run per seed (no transfer, no memorization), named ``<variant>-<budget>``
    (``raw-150k``). Per variant and seed, held-out loss against tokens is fitted with
    L(D) = E + B / D^beta (:func:`experiment.statistics.fit_power_law`); the multiplier says
    how many times fewer tokens the other variants need to reach the first one's loss at the largest
    budget."""

    budgets: list[int] = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)  # the first is the reference (the baseline, usually)

    @field_validator("budgets")
    @classmethod
    def _positive(cls, value):
        return _distinct_budgets(value, "budgets")


class SweepModel(_Strict):
    """One model size of a sweep: its depth and width (the rest of the shape is ``train.model``'s)
    and, optionally, a learning rate of its own instead of the sweep's rule."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    n_layer: int = Field(ge=1)
    n_head: int = Field(ge=1)
    n_embd: int = Field(ge=1)
    lr: float | None = Field(default=None, gt=0)

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return _file_name(value, "the model name")


class SweepConfig(_Strict):
    """A scaling-law sweep (``curate sweep``): every model of ``models`` trained on every token
    budget of ``tokens``, for each variant of ``variants`` (default: all; the first is the reference
    the others are compared with) and each seed of ``seeds``; each budget is a mixture of its own
    (``<variant>-<budget>``, like the data-efficiency runs) and each run a cosine schedule of its
    own length. Learning rate: ``train.optim.lr`` at width ``reference_width`` (default
    ``train.model.n_embd``), scaled by ``reference_width / n_embd`` (``inverse_width``) or not
    (``constant``), unless a model names its own; ``min_lr`` is ``min_lr_ratio`` of it, and the
    warmup ``warmup_fraction`` of each run's steps. Fitted per variant:
    L(N, D) = E + A / N^alpha + B / D^beta (:mod:`experiment.scaling`), N counted as
    ``parameters`` (``non_embedding``: the blocks' weights, Kaplan et al.'s count; ``total``: the
    token embedding too), with the compute-optimal split at each of ``flops`` (C = 6 N D; default:
    the smallest, middle and largest compute of the grid)."""

    models: list[SweepModel] = Field(min_length=2)
    tokens: list[int] = Field(min_length=2)
    variants: list[str] | None = None
    lr_rule: Literal["inverse_width", "constant"] = "inverse_width"
    reference_width: int | None = Field(default=None, ge=1)
    warmup_fraction: float = Field(default=0.1, ge=0.0, le=0.5)
    min_lr_ratio: float = Field(default=0.1, ge=0.0, le=1.0)
    parameters: Literal["non_embedding", "total"] = "non_embedding"
    flops: list[float] = Field(default_factory=list)
    resamples: int = Field(default=200, ge=20)

    @field_validator("tokens")
    @classmethod
    def _budgets(cls, value):
        return _distinct_budgets(value, "tokens")

    @field_validator("flops")
    @classmethod
    def _compute(cls, value):
        if any(not (c > 0 and math.isfinite(c)) for c in value):
            raise ValueError("flops must be positive compute budgets (FLOPs)")
        return sorted(value)

    @model_validator(mode="after")
    def _grid(self):
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"sweep.models: names must be unique: {names}")
        if len({(m.n_layer, m.n_embd) for m in self.models}) < 2:
            raise ValueError("sweep.models: give at least two model sizes")
        if len(self.models) * len(self.tokens) < 6:
            raise ValueError(
                f"sweep: {len(self.models)} models x {len(self.tokens)} budgets is fewer than 6 runs per "
                "variant; L(N, D) has 5 parameters, so the fit needs more runs than that"
            )
        return self


class PrimaryConfig(_Strict):
    """The primary comparison, named before the run: ``variant`` against the baseline on each of
    ``metrics`` (results.json keys, e.g. ``heldout_bpb``, ``tasks/gold_bpb``). These comparisons
    are a family of their own, Holm-corrected among themselves only, and reported first; every
    other comparison is secondary."""

    variant: str
    metrics: list[str] = Field(min_length=1)

    @field_validator("metrics")
    @classmethod
    def _once_each(cls, value):
        if len(set(value)) != len(value):
            raise ValueError(f"name each measure once: {value}")
        return value


# A baseline of the mixture search: natural token shares (T = 1), temperature sampling at T
# (``t3.33``: mT5's), or UniMax (every group the same share, capped at max_epochs).
BASELINE_NAME = r"^(natural|unimax|t[0-9]+(\.[0-9]+)?)$"


class MixsearchTarget(_Strict):
    """What the search minimizes: a weighted sum of results metrics, each lower-is-better bits
    per byte: ``heldout_bpb`` (the mean over the clean held-out sets), ``heldout_bpb/<set>`` or
    ``heldout_bpb/<set>/<group>``, ``lang_bpb/<code>`` (one language's held-out text, every
    document scored whole; ``lang_bpb/low-resource`` their macro-average), ``tasks/gold_bpb`` or
    ``task/<task>/gold_bpb`` (the likelihood tasks' gold answers)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    metrics: dict[str, Positive] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return _file_name(value, "the target name")

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value):
        for key in value:
            known = key in ("heldout_bpb", "tasks/gold_bpb") or key.startswith(("heldout_bpb/", "lang_bpb/"))
            if not known and not (key.startswith("task/") and key.endswith("/gold_bpb") and key.count("/") == 2):
                raise ValueError(
                    f"{key!r} is not a bits-per-byte measure the runs record; use heldout_bpb, "
                    "heldout_bpb/<set>[/<group>], lang_bpb/<code>, tasks/gold_bpb or task/<task>/gold_bpb"
                )
        return value

    def uses(self, prefix: str) -> bool:
        return any(key.startswith(prefix) for key in self.metrics)


class MixsearchConfig(_Strict):
    """A mixture search (``curate mixsearch``, RegMix: Liu et al. 2025): ``proxies`` mixtures of
    the pool variant's curated groups, drawn from a Dirichlet centred on the natural token shares
    (its concentration scaled log-uniformly over ``concentration``) inside the constraints (each
    group's ``min_share`` and ``max_share``, and ``max_epochs`` of its tokens), plus the
    ``baselines``, each trained once as a small ``proxy`` model on ``proxy_tokens``; per target, a
    regression from weights to the target (LightGBM trees, the mixing law of Ye et al. 2024 or a
    log-linear model, the best by cross-validated Spearman) whose optimum is the proposal; then, with
    ``validation``, the proposals and the baselines trained at the experiment's model size and
    ``budget_tokens`` over ``seeds``, each proposal compared with ``primary`` on its target first
    (Holm over the targets), with the other baselines after."""

    pool: str | None = None  # the variant whose curation the mixtures re-sample (default: the first)
    proxies: int = Field(default=48, ge=8)
    concentration: list[Positive] = Field(default_factory=lambda: [0.1, 5.0], min_length=2, max_length=2)
    proxy_tokens: int = Field(ge=1)
    # [train] for the proxies, section by section (model shape, optim, batch, eval_interval)
    proxy_train: dict = Field(default_factory=dict)
    baselines: list[Annotated[str, Field(pattern=BASELINE_NAME)]] = Field(
        default_factory=lambda: ["natural", "t3.33", "unimax"], min_length=1
    )
    primary: str = "natural"  # the baseline each proposal is compared with first
    targets: list[MixsearchTarget] = Field(min_length=1)
    max_epochs: float | None = Field(default=None, gt=0)  # default: the experiment's
    min_share: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)  # by group
    max_share: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    candidates: int = Field(default=100_000, ge=1000)  # mixtures the fitted model is asked about
    top_k: int = Field(default=100, ge=1)  # the proposal is the mean of the best top_k candidates
    resamples: int = Field(default=200, ge=20)  # bootstrap over proxy runs
    validation: bool = True  # train the proposals and baselines at the experiment's size

    @model_validator(mode="after")
    def _coherent(self):
        if self.concentration[0] > self.concentration[1]:
            raise ValueError(f"concentration: {list(self.concentration)} is not a range low to high")
        if len(set(self.baselines)) != len(self.baselines):
            raise ValueError(f"baselines: each once: {self.baselines}")
        if self.primary not in self.baselines:
            raise ValueError(f"primary: {self.primary!r} is not a baseline ({', '.join(self.baselines)})")
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"targets: names must be unique: {names}")
        if self.top_k > self.candidates:
            raise ValueError(f"top_k ({self.top_k}) exceeds candidates ({self.candidates})")
        return self


class TokenizerConfig(_Strict):
    vocab_size: int = Field(default=8192, ge=260)
    sample_docs: int = Field(default=20_000, ge=10)


class ExperimentConfig(_Strict):
    """An experiment (see :mod:`experiment`)."""

    out_dir: OutputFolder  # runs, mixtures and checkpoints: local folders (a URL is refused)
    demo: bool = False  # build the demo corpus and curate it with the demo's settings
    demo_docs: int = Field(default=20_000, ge=1000)
    corpus_dir: OutputFolder | None = None  # where the demo corpus is built (default: .cache/demo-corpus...)
    curation: ExpandedPath | None = None  # a curation config (sources, stage settings); its run_dir is not used
    seed: Seed = 0  # of the curation (splits, samples); training seeds are `seeds`
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    budget_tokens: int | None = Field(default=None, ge=1)  # training tokens of every variant
    max_epochs: float = Field(default=50.0, gt=0)  # repeats per group at most (small pools repeat)
    group_by: list[Literal["source", "lang"]] = Field(default_factory=lambda: ["source"], min_length=1)
    group_merge: dict[str, str] = Field(default_factory=dict)  # mix.merge: group -> the group it joins
    group_min_share: float = Field(default=0.0, ge=0.0, lt=1.0)  # mix.min_share: smaller groups mix as "other"
    validation_fraction: float = Field(default=0.02, ge=0.0, lt=1.0)  # each variant's own split
    eval_sets: list[EvalSetConfig] = Field(default_factory=list)  # the user's own held-out sets
    decontamination: DecontaminationConfig = Field(default_factory=DecontaminationConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    choice_tasks: ChoiceTasksConfig = Field(default_factory=ChoiceTasksConfig)
    eval_tasks: list[EvalTaskConfig] = Field(default_factory=list)  # the user's multiple-choice items
    memorization: MemorizationConfig = Field(default_factory=MemorizationConfig)
    efficiency: EfficiencyConfig = Field(default_factory=EfficiencyConfig)
    languages: LanguagesConfig = Field(default_factory=LanguagesConfig)
    sweep: SweepConfig | None = None  # `curate sweep`: a scaling-law grid over model sizes and budgets
    primary: PrimaryConfig | None = None  # the pre-registered comparison; None: every family alike
    mixsearch: MixsearchConfig | None = None  # `curate mixsearch`: which mixture of the groups to train on
    quality_model: ExpandedPath | None = None  # fastText quality model; default with demo: trained on it
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
        if self.sweep is None and self.budget_tokens is None:
            raise ValueError("budget_tokens: required key is missing; give the training tokens of every variant")
        if not self.demo and self.task.path is None and self.sweep is None and self.mixsearch is None:
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
            if len({*self.efficiency.budgets, self.budget_tokens} - {None}) < 3:
                raise ValueError(
                    "efficiency.budgets: a power law of three parameters needs at least three budgets "
                    "in all (budget_tokens counts); four give it a residual"
                )
            taken = {v.name for v in self.efficiency_variants()} & set(names)
            if taken:
                raise ValueError(f"efficiency: the run name {sorted(taken)[0]!r} is taken by a variant; rename it")
        if self.sweep is not None:
            self._check_sweep(names)
        if self.primary is not None:
            self._check_primary(names)
        if self.mixsearch is not None:
            self._check_mixsearch(names)
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

    def _check_sweep(self, names: list[str]) -> None:
        unknown = [name for name in self.sweep.variants or [] if name not in names]
        if unknown or (self.sweep.variants is not None and not self.sweep.variants):
            raise ValueError(
                "sweep.variants: name the variants of the sweep (default: all)"
                + (f"; {', '.join(unknown)} is not one ({', '.join(names)})" if unknown else "")
            )
        taken = {v.name for v in self.sweep_variants()} & set(names)
        if taken:
            raise ValueError(f"sweep: the mixture name {sorted(taken)[0]!r} is taken by a variant; rename it")
        for model in self.sweep.models:
            _check_shape(self.train, model, f"sweep.models {model.name}")

    def _check_primary(self, names: list[str]) -> None:
        variant = self.primary.variant
        if variant not in names or variant == self.baseline_name:
            raise ValueError(
                f"primary.variant: {variant!r} "
                + ("is the baseline" if variant == self.baseline_name else "is not a variant")
                + f"; name the variant compared with the baseline {self.baseline_name} "
                f"({', '.join(n for n in names if n != self.baseline_name)})"
            )
        known = self.primary_measures(variant)
        keys = {key for pattern, values in known.items() for key in _expand(pattern, values)}
        for metric in self.primary.metrics:
            if metric not in keys:
                shown, listed = [], []
                for pattern, values in known.items():
                    part = pattern.partition("<")[2].partition(">")[0]
                    told = f"the same {part}s" if values in listed else ", ".join(values)
                    shown.append(f"{pattern} ({told})" if values else pattern)
                    listed.append(values)
                raise ValueError(
                    f"primary.metrics: {metric!r} is not a measure {variant} is compared with "
                    f"{self.baseline_name} on; known: {'; '.join(shown)}"
                )

    def primary_measures(self, variant: str) -> dict[str, list[str]]:
        """The measures a primary comparison may name, as ``{pattern: the values of its <part>}``:
        what the experiment compares ``variant`` with the baseline on and the config alone
        decides (per-group held-out keys and memorization depend on the data, so are not offered).
        A built-in task named here that the data does not yield is reported as not measured."""
        sets = [*(DEMO_SETS if self.demo else ()), *(s.name for s in self.eval_sets)]
        known: dict[str, list[str]] = {"heldout_bpb": [], "heldout_bpb/<set>": sets}
        if self.choice_tasks.enabled:
            from experiment.task_results import AGGREGATES, COMPARED

            tasks = []
            if self.choice_tasks.builtin:  # experiment.tasks.built_tasks' names
                clean = [s for s in DEMO_SETS if self.demo and s != "junk"]
                clean += [s.name for s in self.eval_sets if s.clean]
                tasks = [f"{kind}-{name}" for name in clean for kind in ("continuation", "cloze", "pairs")]
                tasks += [f"topic-{k}shot" for k in self.choice_tasks.shots if self.demo or self.task.path is not None]
            for entry in self.eval_tasks:
                tasks += sorted(set(read_choice_items(Path(entry.path))["task"].to_list()))
            known.update({name: [] for name in AGGREGATES})
            known.update({f"task/<task>/{measure}": tasks for measure in COMPARED if tasks})
        chosen = self.task.variants
        if chosen is None or {variant, self.baseline_name} <= set(chosen):
            finetuned = self.task.sizes if self.task.finetune.sizes is None else self.task.finetune.sizes
            known["probe_accuracy@<size>"] = [str(n or "all") for n in self.task.sizes]
            if finetuned:
                known["finetune_accuracy@<size>"] = [str(n or "all") for n in finetuned]
        return known

    def _check_mixsearch(self, names: list[str]) -> None:
        search = self.mixsearch
        if search.pool is not None and search.pool not in names:
            raise ValueError(f"mixsearch.pool: {search.pool!r} is not a variant ({', '.join(names)})")
        from trainer.config import parse_train_config

        taken = [key for key in ("mixture", "out_dir", "seed", "max_steps", "max_tokens") if key in search.proxy_train]
        if taken:
            raise ValueError(f"mixsearch.proxy_train.{taken[0]}: set by the search for every proxy; remove it")
        try:  # a proxy's trainer config checked now, not when the first proxy starts
            parse_train_config(self.proxy_train(mixture=".", out_dir=".", seed=0))
        except ConfigError as error:
            raise ValueError(f"mixsearch.proxy_train: {error}") from None
        taken = sorted({*search.baselines, *(f"proposal-{t.name}" for t in search.targets)} & set(names))
        if taken:
            raise ValueError(f"mixsearch: the run name {taken[0]!r} is taken by a variant; rename it")
        for target in search.targets:
            if target.uses("lang_bpb/") and not self.languages.enabled:
                raise ValueError(f"mixsearch.targets {target.name}: lang_bpb needs languages.enabled")
            if (target.uses("task/") or target.uses("tasks/")) and not (
                self.choice_tasks.enabled and self.choice_tasks.curve_items
            ):
                raise ValueError(
                    f"mixsearch.targets {target.name}: the tasks' gold bits per byte need choice_tasks.enabled "
                    "and choice_tasks.curve_items > 0 (the items every run scores)"
                )

    def proxy_train(self, **run) -> dict:
        """The trainer config (a dict) of a mixture search's proxy run: ``[train]`` with
        ``mixsearch.proxy_train`` over it section by section, trained on ``proxy_tokens``, with the
        run's own keys (``mixture``, ``out_dir``, ``seed``, held-out sets)."""
        merged = copy.deepcopy(self.train)
        for key, value in self.mixsearch.proxy_train.items():
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
        return {**merged, "max_steps": None, "max_tokens": self.mixsearch.proxy_tokens, **run}

    def require(self, command: Literal["experiment", "sweep", "mixsearch"]) -> None:
        """A :class:`ConfigError` when the config lacks what ``curate <command>`` needs: the
        experiment a budget and (off the demo) a task, which a sweep config may leave out; the
        sweep its ``[sweep]`` section."""
        if command == "mixsearch" and self.mixsearch is None:
            raise ConfigError(
                "mixsearch: the config has no [mixsearch] section; add one (see configs/mixsearch-demo.toml)"
            )
        if command == "mixsearch" and self.mixsearch.validation and self.budget_tokens is None:
            raise ConfigError("budget_tokens: required key is missing; the search validates its proposals on it")
        if command == "sweep" and self.sweep is None:
            raise ConfigError("sweep: the config has no [sweep] section; add one (see configs/sweep-demo.toml)")
        if command == "experiment" and self.budget_tokens is None:
            raise ConfigError("budget_tokens: required key is missing; `curate experiment` trains every variant on it")
        if command == "experiment" and not self.demo and self.task.path is None:
            raise ConfigError("task.path: name the downstream task's file (demo = true has a built-in one)")

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

    def sweep_variants(self) -> list[VariantConfig]:
        """The mixtures of the sweep: each variant of ``sweep.variants`` at each of ``sweep.tokens``."""
        if self.sweep is None:
            return []
        by_name = {v.name: v for v in self.variants}
        return [
            by_name[name].model_copy(
                update={"name": f"{name}-{budget_label(budget)}", "budget_tokens": budget, "ablation_of": None}
            )
            for name in self.sweep_names()
            for budget in self.sweep.tokens
        ]

    def sweep_names(self) -> list[str]:
        """The variants of the sweep, the reference first."""
        return list(self.sweep.variants or [v.name for v in self.variants]) if self.sweep else []

    def all_variants(self) -> list[VariantConfig]:
        """Every mixture the experiment trains on: the variants, then the data-efficiency runs."""
        return [*self.variants, *self.efficiency_variants()]

    def curations(self, variants: list[VariantConfig] | None = None) -> dict[str, list[VariantConfig]]:
        """Curation folder -> the variants it serves, in config order, of ``variants`` (default:
        :meth:`all_variants`, the data-efficiency runs included)."""
        runs: dict[str, list[VariantConfig]] = {}
        for variant in self.all_variants() if variants is None else variants:
            runs.setdefault(variant.curation_key, []).append(variant)
        return runs


def _expand(pattern: str, values: list[str]) -> list[str]:
    """``pattern``'s keys: itself, or with its ``<part>`` replaced by each of ``values``."""
    head, _, rest = pattern.partition("<")
    return [pattern] if not rest else [f"{head}{value}{rest.partition('>')[2]}" for value in values]


def _check_shape(train: dict, model: SweepModel, where: str) -> None:
    """A ValueError naming ``where`` when ``model``'s depth, width and heads do not make a model
    with the rest of ``train.model``'s shape."""
    from trainer.config import ModelSection

    shape = {k: v for k, v in (train.get("model") or {}).items()}
    try:
        ModelSection(**{**shape, "n_layer": model.n_layer, "n_head": model.n_head, "n_embd": model.n_embd})
    except ValueError as error:
        problem = error.errors()[0]["msg"] if hasattr(error, "errors") else str(error)
        raise ValueError(f"{where}: {problem}") from None


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
    """The curation run config (a dict for ``pipeline.config.parse_config``) of ``variants``, which
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
    # of every pool by ``exclude``; a variant's own validation loss is reported, never compared, so
    # its split keeps to the fraction (no per-group minimum taken out of a small group's training).
    config["mix"] = {
        "group_by": list(experiment.group_by),
        "merge": dict(experiment.group_merge),
        "min_share": experiment.group_min_share,
        "validation_fraction": experiment.validation_fraction,
        "validation_max_docs": 500,
        "validation_min_docs": 0,
        "decontaminate": False,
        "exclude": [str(p) for p in exclude],
        "mixtures": mixtures,
    }
    # The mix stage's token-window exclusion (pipeline.decontaminate), as the check judges it.
    config["mix"]["exclude_ngram"] = experiment.decontamination.window_tokens
    config["mix"]["common_window_docs"] = experiment.decontamination.common_window_docs
    return config
