"""What the trainer measures while it trains: the validation loss and bits per byte of each
held-out group (:func:`evaluate`), and the eval tasks scored by likelihood (:func:`score_tasks`)."""

from __future__ import annotations

import polars as pl
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tokenizers import Tokenizer

from trainer.config import TrainConfig
from trainer.data import Mixture, bits_per_byte, validation_batches
from trainer.model import IGNORE_INDEX
from trainer.processes import Processes, autocast


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    mixture: Mixture,
    config: TrainConfig,
    device: torch.device,
    processes: Processes = Processes(),
) -> dict:
    """Validation loss (mean nats per predicted token) and bits per byte of every validation group,
    and their means over groups weighted by predicted tokens (``"loss"``, ``"bpb"``).

    Returns ``{"loss", "bpb", "tokens", "groups": {group: {"loss", "bpb", "tokens"}}}``. Each
    group's first ``eval_tokens`` predicted tokens are evaluated (``trainer.data.validation_batches``),
    shared out over the processes and summed in float64.
    """
    was_training = model.training
    model.eval()
    groups = {}
    for group in mixture.validation_groups:
        sums = torch.zeros(2, dtype=torch.float64, device=device)  # nats, predicted tokens
        for inputs, targets in validation_batches(
            mixture,
            group,
            block_size=config.model.block_size,
            max_tokens=config.eval_tokens,
            batch_size=config.batch.micro_batch,
            objective=config.model.objective,
            seed=config.seed,
            rank=processes.rank,
            world_size=processes.world_size,
        ):
            inputs, targets = inputs.to(device), targets.to(device)
            with autocast(config, device):
                logits, _ = model(inputs)
            nats = F.cross_entropy(
                logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
            )
            sums += torch.stack([nats.double(), (targets != IGNORE_INDEX).sum().double()])
        if processes.distributed:
            dist.all_reduce(sums)
        nats, tokens = sums.tolist()
        loss = nats / tokens if tokens else float("nan")
        groups[group] = {
            "loss": loss,
            "tokens": int(tokens),
            "bpb": bits_per_byte(loss, mixture.validation_tokens[group], mixture.validation_bytes[group]),
        }
    model.train(was_training)
    counted = {g: r for g, r in groups.items() if r["tokens"]}
    total = sum(r["tokens"] for r in counted.values())
    mean = {
        key: sum(r[key] * r["tokens"] for r in counted.values()) / total if total else float("nan")
        for key in ("loss", "bpb")
    }
    return {**mean, "tokens": total, "groups": groups}


def read_task_items(config: TrainConfig) -> pl.DataFrame | None:
    """The items of ``eval_tasks``, read and checked once (None without any)."""
    if not config.eval_tasks:
        return None
    from trainer.likelihood import read_choice_files

    return pl.concat([frame for _, frame in read_choice_files(config.eval_tasks)])


def score_tasks(model: torch.nn.Module, tokenizer: Tokenizer, items: pl.DataFrame) -> dict:
    """The eval tasks scored by the model as it is now (``trainer.likelihood.choice_metrics``:
    ``{"aggregate": {"core", "gold_bpb"}, "tasks": {task: {"acc_norm", "gold_bpb", ...}}}``), its
    training mode kept."""
    from trainer.likelihood import choice_loglikelihoods, choice_metrics

    was_training = model.training
    scores = choice_loglikelihoods(model, tokenizer, items)
    found = choice_metrics(scores, items)
    model.train(was_training)
    return found
