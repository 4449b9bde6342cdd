"""What a training run reports: ``metrics.csv`` and TensorBoard (:class:`Metrics`), the training
loss and throughput averaged between logged steps (:class:`LossWindow`), and ``summary.json``
(:func:`summary`, with the achieved model FLOP/s that, over a device's peak, is the MFU).

``metrics.csv`` has one row per log or eval event and fixed columns, blank where not measured::

    step, tokens_seen, epoch, lr, train_loss, val_loss, val_bpb, val_loss/<group>, val_bpb/<group>,
    <eval set>_loss, <eval set>_bpb, <eval set>_loss/<group>, <eval set>_bpb/<group>,
    tasks_core, tasks_gold_bpb, task_acc_norm/<task>, task_gold_bpb/<task>, tokens_per_s
"""

from __future__ import annotations

import csv
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from pipeline.io.writer import atomic_path
from trainer.processes import Processes

METRICS_FILE = "metrics.csv"
# TensorBoard's tags of the columns that are not named as their tag.
_TAGS = {
    "train_loss": "train/loss",
    "lr": "train/lr",
    "tokens_per_s": "train/tokens_per_s",
    "val_loss": "val/loss",
    "val_bpb": "val/bpb",
}


class Metrics:
    """``metrics.csv`` and TensorBoard scalars (``tb/``) of a run in ``out_dir``. On a resumed
    run, rows and events after the checkpoint's step (left by the interrupted run) are dropped
    first."""

    def __init__(
        self,
        out_dir: Path,
        *,
        groups: list[str],
        resumed_step: int | None,
        extra_groups: dict[str, list[str]] | None = None,
        tasks: list[str] | None = None,
    ):
        self.path = out_dir / METRICS_FILE
        self.columns = [
            "step",
            "tokens_seen",
            "epoch",
            "lr",
            "train_loss",
            "val_loss",
            "val_bpb",
            *[f"val_loss/{g}" for g in groups],
            *[f"val_bpb/{g}" for g in groups],
        ]
        for name, names in (extra_groups or {}).items():
            self.columns += [
                f"{name}_loss",
                f"{name}_bpb",
                *[f"{name}_loss/{g}" for g in names],
                *[f"{name}_bpb/{g}" for g in names],
            ]
        if tasks:
            self.columns += ["tasks_core", "tasks_gold_bpb"]
            self.columns += [f"task_{m}/{t}" for t in tasks for m in ("acc_norm", "gold_bpb")]
        self.columns.append("tokens_per_s")
        self._keep_rows_until(resumed_step)
        from tensorboardX import SummaryWriter

        tb_dir = out_dir / "tb"
        if resumed_step is None and tb_dir.exists():
            shutil.rmtree(tb_dir)  # events of an earlier run that left no checkpoint
        purge = resumed_step + 1 if resumed_step is not None else None
        self.tb = SummaryWriter(logdir=str(tb_dir), purge_step=purge)
        self.handle = open(self.path, "a", newline="")
        self.writer = csv.DictWriter(self.handle, self.columns)

    def _keep_rows_until(self, resumed_step: int | None) -> None:
        """Rewrite the file with its header and the rows up to ``resumed_step`` (none: a new run)."""
        kept: list[dict] = []
        if resumed_step is not None and self.path.is_file():
            with open(self.path, newline="") as handle:
                kept = [row for row in csv.DictReader(handle) if int(row["step"]) <= resumed_step]
        with atomic_path(self.path) as tmp:
            with open(tmp, "w", newline="") as handle:
                writer = csv.DictWriter(handle, self.columns, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(kept)

    def write(self, row: dict) -> None:
        self.writer.writerow({key: ("" if row.get(key) is None else _text(row[key])) for key in self.columns})
        self.handle.flush()
        step = row["step"]
        for key in self.columns[3:]:
            if row.get(key) is not None:
                self.tb.add_scalar(_TAGS.get(key, key), row[key], step)

    def close(self) -> None:
        self.handle.close()
        self.tb.close()


def _text(value) -> str:
    """Numbers as Python writes them (repr: a float reads back bit-equal)."""
    return repr(value) if isinstance(value, float) else str(value)


def read_metrics(out_dir: Path) -> list[dict]:
    """``metrics.csv`` as rows of numbers (None where blank)."""
    with open(Path(out_dir) / METRICS_FILE, newline="") as handle:
        return [
            {
                key: (None if value == "" else float(value) if key not in ("step", "tokens_seen") else int(value))
                for key, value in row.items()
            }
            for row in csv.DictReader(handle)
        ]


def evaluation_fields(final: dict, extra: dict[str, dict]) -> dict:
    """The row's columns of the mixture's validation (``final``) and of each extra eval set, as
    ``trainer.evaluation.evaluate`` returns them."""
    row = {"val_loss": final["loss"], "val_bpb": final["bpb"]}
    for group, result in final["groups"].items():
        row[f"val_loss/{group}"], row[f"val_bpb/{group}"] = result["loss"], result["bpb"]
    for name, result in extra.items():
        row[f"{name}_loss"], row[f"{name}_bpb"] = result["loss"], result["bpb"]
        for group, values in result["groups"].items():
            row[f"{name}_loss/{group}"], row[f"{name}_bpb/{group}"] = values["loss"], values["bpb"]
    return row


def task_fields(found: dict) -> dict:
    """The row's columns of the eval tasks' scores (``trainer.evaluation.score_tasks``)."""
    row = {"tasks_core": found["aggregate"]["core"], "tasks_gold_bpb": found["aggregate"]["gold_bpb"]}
    for task, m in found["tasks"].items():
        row[f"task_acc_norm/{task}"], row[f"task_gold_bpb/{task}"] = m["acc_norm"], m["gold_bpb"]
    return row


@dataclass(kw_only=True)
class LossWindow:
    """The training loss and throughput since the last logged row; the loss summed on the device,
    so that a step does not wait for it."""

    loss_sum: torch.Tensor
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add(self, loss: torch.Tensor, tokens: int, seconds: float) -> None:
        self.loss_sum += loss
        self.steps += 1
        self.tokens += tokens
        self.seconds += seconds

    def take(self, processes: Processes) -> tuple[float, float]:
        """``(mean loss over the processes, tokens per second)``, and start a new window."""
        if processes.distributed:
            dist.all_reduce(self.loss_sum)
            self.loss_sum /= processes.world_size
        result = (self.loss_sum.item() / self.steps, self.tokens / self.seconds)
        self.loss_sum.zero_()
        self.steps, self.tokens, self.seconds = 0, 0, 0.0
        return result


def summary(
    *,
    config: dict,
    model_config: dict,
    model,
    steps: int,
    tokens: int,
    epochs: float,
    world_size: int,
    device: str,
    final: dict,
    final_eval: dict[str, dict],
    final_tasks: dict | None,
    wall_time_s: float,
    train_time_s: float,
    mixture_manifest_sha256: str,
) -> dict:
    """``summary.json``: the config, the model's size, what was trained, the final evaluations
    and the speed. ``model`` is the GPT (its parameter and FLOP counts)."""
    flops_per_token = model.flops_per_token()
    return {
        "config": config,
        "model": model_config,
        "parameters": model.num_parameters(non_embedding=False),
        "non_embedding_parameters": model.num_parameters(non_embedding=True),
        "flops_per_token": flops_per_token,
        "steps": steps,
        "tokens": tokens,
        "epochs": epochs,
        "world_size": world_size,
        "device": device,
        "final": final,
        "final_eval": final_eval,
        **({"final_tasks": final_tasks} if final_tasks is not None else {}),
        "wall_time_s": wall_time_s,
        "train_time_s": train_time_s,
        "tokens_per_s": tokens / train_time_s if train_time_s else None,
        # Achieved model FLOP/s; divided by the hardware's peak it is the MFU.
        "model_flops_per_s": tokens * flops_per_token / train_time_s if train_time_s else None,
        "mixture_manifest_sha256": mixture_manifest_sha256,
    }
