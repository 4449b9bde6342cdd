"""Will the run fit? The memory a training run needs, estimated before anything is allocated, and
the memory there is.

The estimate is a floor, so that a refusal is always right: what it counts must be held at once,
and a run that passes may still need more (allocator slack, the attention scores of a kernel that
materializes them, a checkpoint being loaded). Per process:

* weights, gradients and AdamW's two moments, all float32: 16 bytes per parameter (the parameters
  counted from the config, ``trainer.model.parameter_count``, without building the model);
* activations kept for the backward pass: about ``34 * n_embd`` bytes per token and layer at 16
  bits (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  eq. 1, without its attention-score term, which fused attention does not keep), twice that in
  float32, for the ``micro_batch * block_size`` tokens of a micro step;
* the logits of a micro step and their gradient, float32: ``8 * vocab_size`` bytes per token.

The memory there is: the free memory of the GPU (``torch.cuda.mem_get_info``), or the available
RAM on the CPU (``psutil``, else ``os.sysconf``), shared by the processes torchrun starts on the
machine (``LOCAL_WORLD_SIZE``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from pipeline.formats.configfile import ConfigError
from trainer.model import GPTConfig, parameter_count

STATE_BYTES_PER_PARAMETER = 16  # float32 weights, gradients, AdamW exp_avg and exp_avg_sq
ACTIVATION_BYTES_PER_TOKEN_LAYER_16BIT = 34  # times n_embd (Korthikanti et al. 2022, eq. 1, sbh*34)
LOGIT_BYTES = 8  # float32 logits and their gradient, per token and vocabulary entry


class ModelTooLargeError(ConfigError):
    """A model (or micro batch) that cannot fit in the memory there is; one line with the numbers."""


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    parameters: int
    state_bytes: int  # weights, gradients, optimizer moments
    activation_bytes: int  # of one micro step, logits included

    @property
    def total(self) -> int:
        return self.state_bytes + self.activation_bytes


def estimate_memory(model_config: GPTConfig, micro_batch: int, bf16: bool) -> MemoryEstimate:
    """The floor of one process's training memory (see the module's docstring)."""
    parameters = parameter_count(model_config)
    tokens = micro_batch * model_config.block_size
    per_layer = ACTIVATION_BYTES_PER_TOKEN_LAYER_16BIT * model_config.n_embd * (1 if bf16 else 2)
    activations = tokens * (model_config.n_layer * per_layer + LOGIT_BYTES * model_config.vocab_size)
    return MemoryEstimate(
        parameters=parameters, state_bytes=STATE_BYTES_PER_PARAMETER * parameters, activation_bytes=activations
    )


def available_memory(device: torch.device) -> tuple[int, str]:
    """The bytes one process may use on ``device``, and what they are (for the message)."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return free, f"free on {torch.cuda.get_device_name(device)} ({size(total)} in all)"
    sharing = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    try:
        import psutil

        available = psutil.virtual_memory().available
    except ImportError:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if sharing > 1:
        return available // sharing, f"of RAM available to each of {sharing} processes"
    return available, "of RAM available"


def size(count: float) -> str:
    """Bytes as a person reads them: 512 B, 1.5 GB, 131.1 TB."""
    units = ("B", "kB", "MB", "GB", "TB", "PB")
    power = 0
    while abs(count) >= 1000 and power < len(units) - 1:
        count, power = count / 1000, power + 1
    return f"{count:,.0f} B" if power == 0 else f"{count:,.1f} {units[power]}"


def check_memory(model_config: GPTConfig, micro_batch: int, bf16: bool, device: torch.device) -> MemoryEstimate:
    """The estimate, or ModelTooLargeError with one line when it exceeds the memory there is."""
    estimate = estimate_memory(model_config, micro_batch, bf16)
    limit, what = available_memory(device)
    if estimate.total > limit:
        c = model_config
        raise ModelTooLargeError(
            f"model: {estimate.parameters:,} parameters (n_layer {c.n_layer}, n_embd {c.n_embd}, "
            f"vocab_size {c.vocab_size}) with micro_batch {micro_batch} x block_size {c.block_size} "
            f"needs about {size(estimate.total)} to train ({size(estimate.state_bytes)} for weights, "
            f"gradients and AdamW state, {size(estimate.activation_bytes)} for activations), more than "
            f"the {size(limit)} {what}; lower n_embd or n_layer (or micro_batch and block_size, "
            "raising grad_accum to keep the batch)"
        )
    return estimate
