"""A training run's state: what a checkpoint holds (:func:`checkpoint_state`), how a run resumes
from one (:func:`restore`), and the checks that it is the same run (:func:`check_same_run`).
``trainer.checkpoints`` writes, checks and reads the files.

Exact resume. A checkpoint holds everything the rest of the run depends on: weights, AdamW's
moments and step counts, the loader's ``(epoch, position)`` (the data order is a function of the
seed, see ``trainer.data``), the counters of :class:`Progress`, and every rank's RNG states (torch
CPU and CUDA, for dropout; Python's ``random``). No numpy generator keeps state between steps. On
the CPU, with the same number of processes and threads, the resumed run's losses and weights are
bit-equal to those of a run that never stopped; on CUDA, kernels that are not deterministic make
them close instead. A run may also resume with another number of processes (the loader's position
counts global windows; rank r takes the RNG states of rank r mod the saved count), then close
rather than bit-equal. A checkpoint stores only tensors and plain containers, so it loads with
``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from pipeline.formats.configfile import ConfigError
from trainer.checkpoints import CHECKPOINT_FORMAT
from trainer.config import BOOKKEEPING_KEYS, TrainConfig
from trainer.data import Mixture, TrainLoader
from trainer.model import GPTConfig
from trainer.processes import Processes


@dataclass(kw_only=True)
class Progress:
    """The counters a checkpoint carries besides the weights: steps and tokens done, and the
    seconds spent training and in all (earlier invocations included)."""

    step: int = 0
    tokens_seen: int = 0
    train_time: float = 0.0
    wall_before: float = 0.0


def rng_states(device: torch.device) -> dict:
    """This process's RNG states: torch's (CPU, and CUDA on a GPU) and Python's."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "python": random.getstate(),
    }


def set_rng_states(states: dict, device: torch.device) -> None:
    torch.set_rng_state(states["torch"])
    if device.type == "cuda" and states.get("cuda") is not None:
        torch.cuda.set_rng_state(states["cuda"], device)
    random.setstate(states["python"])


def every_rank_rng_states(device: torch.device, processes: Processes) -> list[dict]:
    """The RNG states of every process, in rank order (a collective under DDP)."""
    if not processes.distributed:
        return [rng_states(device)]
    states = [None] * processes.world_size
    dist.all_gather_object(states, rng_states(device))
    return states


def checkpoint_state(
    *,
    progress: Progress,
    wall_time_s: float,
    config: TrainConfig,
    model_config: GPTConfig,
    mixture: Mixture,
    world_size: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: TrainLoader,
    rng: list[dict],
) -> dict:
    """What a checkpoint holds (``trainer.checkpoints.save_checkpoint`` writes it)."""
    return {
        "format": CHECKPOINT_FORMAT,
        "step": progress.step,
        "tokens_seen": progress.tokens_seen,
        "train_time_s": progress.train_time,
        "wall_time_s": wall_time_s,
        "config": config.to_dict(),
        "model_config": asdict(model_config),
        "mixture_sha256": mixture.manifest_sha256,
        "world_size": world_size,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "loader": loader.state_dict(),
        "rng": rng,
    }


def restore(
    checkpoint: dict,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: TrainLoader,
    rank: int,
    device: torch.device,
) -> Progress:
    """Load ``checkpoint`` into the model, the optimizer, the loader and this process's RNGs (rank
    ``rank`` takes those of rank ``rank`` mod the saved count); return its progress."""
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    loader.load_state_dict(checkpoint["loader"])
    rng = checkpoint["rng"]
    set_rng_states(rng[rank % len(rng)], device)
    return Progress(
        step=checkpoint["step"],
        tokens_seen=checkpoint["tokens_seen"],
        train_time=checkpoint["train_time_s"],
        wall_before=checkpoint["wall_time_s"],
    )


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def check_same_config(saved: dict, config: TrainConfig, path: Path) -> None:
    """Refuse a run whose ``saved`` config (a checkpoint's or a summary's) differs from ``config``
    in anything but bookkeeping keys and the folders."""
    ignore = set(BOOKKEEPING_KEYS) | {"out_dir", "mixture"}
    before, now = _flat(saved), _flat(config.to_dict())
    for key in sorted(set(before) | set(now)):
        if key.split(".")[0] not in ignore and before.get(key) != now.get(key):
            raise ConfigError(
                f"{key}: {path} was trained with {before.get(key)!r}, this config says "
                f"{now.get(key)!r}; use another out_dir, or delete {path.parent} to start over"
            )


def check_same_run(saved: dict, config: TrainConfig, mixture: Mixture, path: Path) -> None:
    """Refuse to resume a checkpoint made by a different config or from a different mixture.
    Bookkeeping keys may change; ``out_dir`` and ``mixture`` may move (the mixture is compared by
    its manifest's sha256)."""
    check_same_config(saved["config"], config, path)
    if saved["mixture_sha256"] != mixture.manifest_sha256:
        raise ConfigError(
            f"mixture: {path} was trained on another mixture (manifest sha256 "
            f"{saved['mixture_sha256'][:12]}, now {mixture.manifest_sha256[:12]}); use another out_dir"
        )
