"""Training configuration: a TOML file of plain values, validated before any work.

Every key has a default but ``mixture`` and ``out_dir``; a problem stops the run with one line
(``pipeline.config.ConfigError``) naming the key and the fix. Values are strict: ``lr = "3e-4"``
or ``compile = 1`` is an error, not a guess, and so is a number that is not finite (``lr = inf``).
Paths have ``~`` and environment variables (``$DATA``) expanded; relative ones are resolved from the
current working directory, ``file://localhost/x`` is the local ``/x``, and another URL is refused.
An example, the CPU demo::

    mixture = "runs/demo/mix/main"
    out_dir = "runs/demo/train/main"
    max_steps = 600

    [model]
    n_layer = 4
    n_head = 4
    n_embd = 128

    [batch]
    micro_batch = 16

Length of training: ``max_steps`` optimizer steps, or ``max_tokens`` tokens (rounded up to whole
steps of ``micro_batch * grad_accum * world_size * block_size`` tokens). When both are given,
``max_steps`` wins and ``max_tokens`` is ignored; one of them is required.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.formats.configfile import ConfigError, ExpandedPath, Seed, local_path, read_toml, validate_model

# The trainer memory-maps local mixture folders; said wherever a remote one is given.
COPY_MIXTURE_HERE = (
    "the trainer memory-maps a local mixture folder, so copy it here first "
    "(fsspec.filesystem(protocol).get(remote, local, recursive=True), or your object store's "
    "CLI, e.g. aws s3 cp --recursive) and point mixture at the copy"
)


# Where the trainer writes: said when out_dir is a URL.
WRITE_HERE = "the trainer writes its checkpoints to a local folder: give a local path, then copy out_dir to the URL"


def _local_folder(value, why: str):
    """A folder setting as a local absolute path (a ``file://`` URL read as the path it names); any
    other URL (s3://...) is refused with ``why``, before pathlib would mangle it into a local
    name (s3:/...)."""
    if not isinstance(value, (str, Path)):
        return value  # the type check says what is wrong
    return Path(local_path(why)(value)).absolute()


# Keys that change what is logged or kept, never what is computed: a run may resume with other
# values of these.
BOOKKEEPING_KEYS = (
    "log_interval",
    "eval_interval",
    "checkpoint_interval",
    "keep_last",
    "eval_mixtures",
    "eval_tasks",
)


class _Strict(BaseModel):
    # No inf or nan anywhere: TOML spells them (lr = inf), and such a run trains on NaN weights.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ModelSection(_Strict):
    """The GPT's shape (``trainer.model.GPTConfig`` less ``vocab_size``, which the mixture's
    tokenizer sets)."""

    block_size: int = Field(default=256, ge=2)
    n_layer: int = Field(default=4, ge=1)
    n_head: int = Field(default=4, ge=1)
    n_embd: int = Field(default=128, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    bias: bool = False
    positions: Literal["rope", "learned"] = "rope"
    objective: Literal["causal", "masked"] = "causal"

    @model_validator(mode="after")
    def _heads_divide_width(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}; change one of them")
        if self.positions == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"rotary positions need an even head size (n_embd / n_head = "
                f"{self.n_embd // self.n_head}); change n_embd or n_head, or use positions = 'learned'"
            )
        return self


class OptimSection(_Strict):
    """AdamW and its learning-rate schedule: linear warmup over ``warmup_steps``, then ``"cosine"``
    decay to ``min_lr`` at the last step, or ``"wsd"`` (warmup-stable-decay): ``lr`` until the
    last ``decay_fraction`` of the steps, then linear decay to ``min_lr``."""

    lr: float = Field(default=6e-4, gt=0)
    min_lr: float = Field(default=6e-5, ge=0)
    weight_decay: float = Field(default=0.1, ge=0)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.95, ge=0, lt=1)
    grad_clip: float = Field(default=1.0, ge=0)  # max global gradient norm; 0 turns clipping off
    warmup_steps: int = Field(default=100, ge=0)
    schedule: Literal["cosine", "wsd"] = "cosine"
    decay_fraction: float = Field(default=0.2, gt=0, le=1)  # wsd only

    @model_validator(mode="after")
    def _min_below_peak(self):
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr {self.min_lr} is above lr {self.lr}; lower min_lr")
        return self


class BatchSection(_Strict):
    """Windows per process per forward pass, and forward passes per optimizer step. The tokens of
    one step are ``micro_batch * grad_accum * world_size * block_size``."""

    micro_batch: int = Field(default=16, ge=1)
    grad_accum: int = Field(default=1, ge=1)


class TrainConfig(_Strict):
    """One training run."""

    mixture: Path = Field(strict=False)  # a mixture directory: <run_dir>/mix/<mixture>
    out_dir: Path = Field(strict=False)  # checkpoints, metrics.csv, tb/, summary.json, tokenizer.json
    seed: Seed = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: cuda if available
    # auto: bfloat16 autocast on CUDA, float32 on the CPU.
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    compile: bool = False  # torch.compile the model
    model: ModelSection = Field(default_factory=ModelSection)
    optim: OptimSection = Field(default_factory=OptimSection)
    batch: BatchSection = Field(default_factory=BatchSection)
    max_steps: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    eval_interval: int = Field(default=100, ge=1)  # steps; also evaluated at the last step
    eval_tokens: int = Field(default=65_536, ge=1)  # predicted validation tokens per group, at most
    log_interval: int = Field(default=10, ge=1)
    checkpoint_interval: int = Field(default=200, ge=1)  # steps; also saved at the last step
    keep_last: int = Field(default=3, ge=1)  # checkpoints kept; older ones are deleted
    # More held-out sets, evaluated with the mixture's own validation: name -> a folder in the
    # mixture format whose validation shards are read (its train list may be empty), e.g. a
    # reference set shared by the runs of an experiment. Logged as <name>_loss, <name>_bpb/<group>.
    eval_mixtures: dict[str, Annotated[Path, Field(strict=False)]] = Field(default_factory=dict)
    # Multiple-choice items files (pipeline.formats.choices) scored by likelihood at every
    # evaluation (trainer.likelihood, on the first process): logged as task_acc_norm/<task>,
    # task_gold_bpb/<task>, tasks_core and tasks_gold_bpb, the curves of what the model knows.
    eval_tasks: list[ExpandedPath] = Field(default_factory=list)

    @field_validator("mixture", mode="before")
    @classmethod
    def _local_mixture(cls, value) -> Path:
        return _local_folder(value, COPY_MIXTURE_HERE)

    @field_validator("out_dir", mode="before")
    @classmethod
    def _local_out_dir(cls, value) -> Path:
        return _local_folder(value, WRITE_HERE)

    @field_validator("eval_mixtures", mode="before")
    @classmethod
    def _named_folders(cls, value) -> dict:
        if not isinstance(value, dict):
            return value  # the type check says what is wrong
        for name in value:
            if not str(name).replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"eval set name {name!r}: use letters, digits, - and _")
        return {name: _local_folder(path, COPY_MIXTURE_HERE) for name, path in value.items()}

    @model_validator(mode="after")
    def _length_given(self):
        if self.max_steps is None and self.max_tokens is None:
            raise ValueError("give max_steps (optimizer steps) or max_tokens (tokens to train on)")
        return self

    def tokens_per_step(self, world_size: int = 1) -> int:
        return self.batch.micro_batch * self.batch.grad_accum * world_size * self.model.block_size

    def total_steps(self, world_size: int = 1) -> int:
        """``max_steps`` if given, else ``max_tokens`` rounded up to whole steps."""
        if self.max_steps is not None:
            return self.max_steps
        return -(-self.max_tokens // self.tokens_per_step(world_size))

    def to_dict(self) -> dict:
        """The config as plain JSON values (paths as strings): what checkpoints and summaries hold."""
        return self.model_dump(mode="json")


def parse_train_config(data: dict) -> TrainConfig:
    """Validate a config mapping; ConfigError with one line on the first problem."""
    if isinstance(data, dict) and data.get("max_steps") is None and data.get("max_tokens") is None:
        raise ConfigError(
            "max_steps: required key is missing; give max_steps (optimizer steps) or max_tokens (tokens to train on)"
        )
    return validate_model(TrainConfig, data)


def load_train_config(path: Path) -> TrainConfig:
    """Read and validate a training config TOML file."""
    return parse_train_config(read_toml(path))


__all__ = ["BOOKKEEPING_KEYS", "ConfigError", "TrainConfig", "load_train_config", "parse_train_config"]
