"""Stopping a run whose numbers stopped being finite: the loss or the gradient norm of a step (on
any process, checked before the step is logged or saved), or a weight (checked before a
checkpoint is written). The run then stops at once and saves nothing, so its last checkpoint
stays its last good one, and the one-line error says at which step and what to change."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from pipeline.formats.configfile import ConfigError
from trainer.config import OptimSection
from trainer.processes import Processes


class TrainingDiverged(ConfigError):
    """The loss (or the gradients, or the weights) stopped being finite; the run stopped without
    saving, and the message (one line) says at which step and what to change."""


def not_finite(loss: torch.Tensor, norm: torch.Tensor | None, processes: Processes) -> str | None:
    """What of this step is not finite on any process (the weights AdamW just updated with it are
    then garbage), or None. ``norm``: the gradients' global norm (None without clipping). A
    collective under DDP: every process calls it every step."""
    loss_ok = torch.isfinite(loss)
    norm_ok = torch.isfinite(norm) if norm is not None else loss_ok
    bad = (~(loss_ok & norm_ok)).float()
    if processes.distributed:
        dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    if not bad.item():
        return None
    if not loss_ok.item():
        return f"the training loss is {loss.item()}"
    if not norm_ok.item():
        return f"the gradient norm is {norm.item()}"
    return "the training loss of another process is not finite"


def weights_finite(model: torch.nn.Module) -> bool:
    """Whether every weight is finite (an update from a finite loss can still overflow, unclipped)."""
    params = [p.detach() for p in model.parameters()]
    return bool(torch.stack([torch.isfinite(p).all() for p in params]).all())


def diverged(*, step: int, what: str, lr: float, optim: OptimSection, last_checkpoint: Path | None) -> TrainingDiverged:
    """The error of a run stopped at ``step`` because ``what`` is not finite: where the last good
    checkpoint is, the likely causes and the fix."""
    kept = f"the checkpoint before, {last_checkpoint}, is kept" if last_checkpoint else "no checkpoint was written"
    return TrainingDiverged(
        f"step {step}: {what}, so training stopped and saved nothing ({kept}); "
        f"likely causes: a learning rate too high (lr {lr:.3g} at this step, optim.lr {optim.lr:g}), "
        f"too short a warmup (optim.warmup_steps {optim.warmup_steps}), "
        f"{'no gradient clipping (optim.grad_clip 0), ' if optim.grad_clip == 0 else ''}"
        "or bad tokens in the mixture; lower optim.lr or raise optim.warmup_steps, and train again "
        "in a new out_dir"
    )
