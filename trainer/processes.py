"""Where a training process runs: its place among the data-parallel processes (torchrun's
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``), its device, and the precision it computes in."""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist

from pipeline.formats.configfile import ConfigError
from trainer.config import TrainConfig


@dataclass(frozen=True, kw_only=True)
class Processes:
    """Where this process stands among the data-parallel ones."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def device_for(config: TrainConfig, processes: Processes) -> torch.device:
    """The config's device: this process's GPU, or the CPU (``"auto"`` without CUDA)."""
    cuda = torch.cuda.is_available()
    if config.device == "cuda" and not cuda:
        raise ConfigError("device: 'cuda' but torch sees no CUDA device; use device = 'auto' or 'cpu'")
    if config.device == "cpu" or not cuda:
        return torch.device("cpu")
    return torch.device("cuda", processes.local_rank)


def start_processes(config: TrainConfig) -> tuple[Processes, torch.device]:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK and join the process group (gloo on the
    CPU, nccl on CUDA); one plain process without them."""
    processes = Processes(
        rank=int(os.environ.get("RANK", "0")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
    )
    device = device_for(config, processes)
    if processes.distributed:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return processes, device


def uses_bf16(config: TrainConfig, device: torch.device) -> bool:
    """bfloat16 autocast on CUDA for dtype 'auto' or 'bfloat16' (and on the CPU for 'bfloat16');
    float32 otherwise. Weights and optimizer state stay float32."""
    return config.dtype == "bfloat16" or (config.dtype == "auto" and device.type == "cuda")


def autocast(config: TrainConfig, device: torch.device):
    """The autocast context of :func:`uses_bf16`."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if uses_bf16(config, device) else nullcontext()
