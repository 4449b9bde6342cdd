"""Pretrain a GPT on a mixture directory: one process, or data-parallel under torchrun.

    python -m trainer.train configs/train-demo.toml             # one process (CPU or one GPU)
    torchrun --nproc_per_node 2 -m trainer.train CONFIG          # DDP: gloo on CPU, nccl on CUDA
    python -m trainer.train CONFIG --resume                      # continue; fails if nothing to resume

One optimizer step: ``grad_accum`` micro steps of ``micro_batch`` windows per process (gradients
synchronized on the last only), clipping of the global gradient norm, AdamW at the step's learning
rate (:func:`learning_rate`). Every ``eval_interval`` steps and at the end, each validation group
is evaluated (``trainer.evaluation``); every ``log_interval`` steps a row goes to ``metrics.csv`` and
TensorBoard; every ``checkpoint_interval`` steps and at the end a checkpoint is written.

Outputs in ``out_dir`` (rank 0 writes them)::

    tokenizer.json               the mixture's tokenizer, for generation
    metrics.csv                  one row per log or eval event
    tb/                          TensorBoard event files (tensorboardX)
    checkpoints/step-NNNNNN.pt   model, optimizer, step, loader state, RNG states, config
    checkpoints/step-NNNNNN.pt.sha256   its checksum, checked before it is loaded
    checkpoints/latest           the name of the newest checkpoint
    summary.json                 at the end: config, sizes, tokens, final losses, speed

Exact resume. A checkpoint holds everything the rest of the run depends on: weights, AdamW's
moments and step counts, the loader's ``(epoch, position)`` (the data order is a function of the
seed, see ``trainer.data``), and every rank's RNG states (torch CPU and CUDA, for dropout; Python's
``random``). No numpy generator keeps state between steps. On the CPU, with the same number of
processes and threads, the resumed run's losses and weights are bit-equal to those of a run that
never stopped; on CUDA, kernels that are not deterministic make them close instead. A run may
also resume with another number of processes (the loader's position counts global windows; rank
r takes the RNG states of rank r mod the saved count), then close rather than bit-equal. A
checkpoint stores only tensors and plain containers, so it loads with
``torch.load(..., weights_only=True)``. A checkpoint that fails its checksum or does not load is
skipped, with a warning, for the newest older one that does (``trainer.checkpoints``).
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl
import torch
import torch.distributed as dist
from tokenizers import Tokenizer
from torch.nn.parallel import DistributedDataParallel

from pipeline.formats.configfile import ConfigError
from pipeline.formats.tokens import load_tokenizer
from pipeline.io.writer import atomic_path, write_json
from trainer import metrics as report
from trainer.checkpoints import (  # noqa: F401
    CHECKPOINT_DIR,
    CHECKPOINT_FORMAT,
    LATEST,
    load_checkpoint,
    load_latest_checkpoint,
    remove_checkpoint_temporaries,
)
from trainer.checkpoints import save_checkpoint as _save_checkpoint  # a module global: benchmarks time it
from trainer.config import BOOKKEEPING_KEYS, OptimSection, TrainConfig, load_train_config
from trainer.data import Mixture, MixtureError, TrainLoader, open_mixture
from trainer.divergence import diverged, not_finite, weights_finite
from trainer.evaluation import evaluate, read_task_items, score_tasks
from trainer.memory import check_memory
from trainer.metrics import LossWindow, Metrics
from trainer.model import GPT, GPTConfig
from trainer.processes import Processes, autocast, device_for, start_processes, uses_bf16

# --------------------------------------------------------------------------------------------
# Schedule


def learning_rate(step: int, total_steps: int, optim: OptimSection) -> float:
    """The learning rate of optimizer step ``step`` (0-based) of ``total_steps``.

    Linear warmup from ``lr / warmup_steps`` to ``lr`` over the first ``warmup_steps``; then
    ``"cosine"``: half a cosine from ``lr`` down to ``min_lr`` at the last step (Loshchilov &
    Hutter 2017, without restarts), or ``"wsd"``: ``lr`` held, then a linear decay to ``min_lr``
    over the last ``decay_fraction`` of the steps (warmup-stable-decay, Hu et al. 2024, MiniCPM).
    """
    if step < optim.warmup_steps:
        return optim.lr * (step + 1) / optim.warmup_steps
    if optim.schedule == "cosine":
        span = total_steps - 1 - optim.warmup_steps
        progress = min(1.0, (step - optim.warmup_steps) / span) if span > 0 else 1.0
        return optim.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (optim.lr - optim.min_lr)
    decay_steps = max(1, round(optim.decay_fraction * total_steps))
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return optim.lr
    progress = min(1.0, (step - decay_start + 1) / decay_steps)
    return optim.lr + progress * (optim.min_lr - optim.lr)


# --------------------------------------------------------------------------------------------
# Checkpoints


def _rng_states(device: torch.device) -> dict:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "python": random.getstate(),
    }


def _set_rng_states(states: dict, device: torch.device) -> None:
    torch.set_rng_state(states["torch"])
    if device.type == "cuda" and states.get("cuda") is not None:
        torch.cuda.set_rng_state(states["cuda"], device)
    random.setstate(states["python"])


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


def _check_same_run(saved: dict, config: TrainConfig, mixture: Mixture, path: Path) -> None:
    """Refuse to resume a checkpoint made by a different config or from a different mixture.
    Bookkeeping keys may change; ``out_dir`` and ``mixture`` may move (the mixture is compared by
    its manifest's sha256)."""
    check_same_config(saved["config"], config, path)
    if saved["mixture_sha256"] != mixture.manifest_sha256:
        raise ConfigError(
            f"mixture: {path} was trained on another mixture (manifest sha256 "
            f"{saved['mixture_sha256'][:12]}, now {mixture.manifest_sha256[:12]}); use another out_dir"
        )


def log_line(line: str) -> None:
    """The default ``log``: print, flushed, so that progress shows in redirected output too."""
    print(line, flush=True)


def train(
    config: TrainConfig, resume: bool = False, log: Callable[[str], None] | None = log_line, verified: bool = False
) -> dict:
    """Train as ``config`` says; return the summary (also written to ``out_dir/summary.json``).

    If ``out_dir`` holds a checkpoint, the run continues from it, provided it was made by the same
    config (else a ConfigError); ``resume=True`` additionally requires one. Under torchrun, each
    process calls this; only rank 0 writes files and logs. ``log`` gets one line per event
    (None: silent; a warning's line starts with ``trainer.checkpoints.WARNING``). ``verified``:
    :func:`preflight` passed just before, so the shards' checksums are not computed again. A loss
    that is not finite stops the run at once with TrainingDiverged, saving nothing.
    """
    processes, device = start_processes(config)
    # On the CPU, ask for deterministic kernels (a kernel without one warns) so that a resumed run
    # repeats the bits of one that never stopped. Filling every new tensor with NaN (the flag's
    # companion) guards only against reading memory no kernel wrote; it halved the speed of a
    # 256-token window, so it stays off.
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )
    if device.type == "cpu":
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        result = _train(config, resume, log if processes.main else None, processes, device, verified)
        if processes.distributed:
            # Every rank reaches here before any tears the group down: a rank that leaves while
            # another's gloo work is still in flight aborts the other at exit.
            dist.barrier()
        return result
    finally:
        if device.type == "cpu":  # as the caller had them
            torch.use_deterministic_algorithms(before[0], warn_only=before[1])
            torch.utils.deterministic.fill_uninitialized_memory = before[2]
        if processes.distributed:
            dist.destroy_process_group()


@dataclass
class Progress:
    """The counters a checkpoint carries besides the weights: steps and tokens done, and the
    seconds spent training and in all (earlier invocations included)."""

    step: int = 0
    tokens_seen: int = 0
    train_time: float = 0.0
    wall_before: float = 0.0


@dataclass
class Run:
    """Everything one training run holds while it runs (set up by :func:`_setup`)."""

    config: TrainConfig
    processes: Processes
    device: torch.device
    say: Callable[[str], None]
    started: float
    mixture: Mixture
    extra_sets: dict[str, Mixture]
    model_config: GPTConfig
    raw_model: GPT
    model: torch.nn.Module  # raw_model, compiled and/or wrapped in DDP
    eval_model: torch.nn.Module  # compiled, not wrapped
    optimizer: torch.optim.Optimizer
    loader: TrainLoader
    progress: Progress
    resumed: bool
    metrics: Metrics | None
    total_steps: int
    tokens_per_step: int
    task_items: pl.DataFrame | None = None  # eval_tasks' items, scored at every evaluation (main process)
    task_tokenizer: Tokenizer | None = None  # the mixture's, which scores them
    last_tasks: dict | None = None  # their scores at the latest evaluation (the summary's final_tasks)
    last_checkpoint: Path | None = None  # the newest good one: resumed from or written


def _open_data(config: TrainConfig, verify_checksums: bool = True) -> tuple[Mixture, dict[str, Mixture]]:
    """The training mixture and the extra evaluation sets, which must share its tokenizer."""
    mixture = open_mixture(config.mixture, verify_checksums)
    extra_sets = {name: open_mixture(path, verify_checksums) for name, path in config.eval_mixtures.items()}
    for name, extra in extra_sets.items():
        if extra.manifest["tokenizer"]["sha256"] != mixture.manifest["tokenizer"]["sha256"]:
            raise ConfigError(
                f"eval_mixtures.{name}: {extra.path} was tokenized with another tokenizer than "
                f"the mixture; tokenize both with one tokenizer"
            )
    return mixture, extra_sets


@dataclass
class Inputs:
    """What a run starts from, every check a user can fail passed (:func:`_checked_inputs`)."""

    mixture: Mixture
    extra_sets: dict[str, Mixture]
    loader: TrainLoader
    model_config: GPTConfig
    task_items: pl.DataFrame | None
    checkpoint_path: Path | None
    checkpoint: dict | None


def _checked_inputs(
    config: TrainConfig,
    resume: bool,
    say: Callable[[str], None] | None,
    processes: Processes,
    device: torch.device,
    verify_checksums: bool = True,
    mmap: bool = False,
) -> Inputs:
    """The data, the loader, the model's shape and the checkpoint to resume from, checked in the
    order a user can fail them, before anything big is allocated: the mixture and the eval sets
    (files, checksums, tokenizer), enough windows for a micro batch, the eval tasks' items, the
    memory the model needs (trainer.memory), and the checkpoint (it loads, and was made by this
    config on this mixture). Each failure is a ConfigError with one line."""
    mixture, extra_sets = _open_data(config, verify_checksums)
    loader = TrainLoader(
        mixture,
        config.model.block_size,
        config.batch.micro_batch,
        config.seed,
        config.model.objective,
        processes.rank,
        processes.world_size,
    )
    task_items = read_task_items(config) if processes.main else None
    model_config = GPTConfig(vocab_size=mixture.vocab_size, **config.model.model_dump())
    check_memory(model_config, config.batch.micro_batch, uses_bf16(config, device), device)
    checkpoint_path, checkpoint = load_latest_checkpoint(config.out_dir, say, mmap=mmap) or (None, None)
    if resume and checkpoint_path is None:
        raise ConfigError(
            f"out_dir: nothing to resume, {config.out_dir / CHECKPOINT_DIR} holds no checkpoint; "
            "run without --resume to start"
        )
    if checkpoint is not None:
        _check_same_run(checkpoint, config, mixture, checkpoint_path)
    return Inputs(mixture, extra_sets, loader, model_config, task_items, checkpoint_path, checkpoint)


def preflight(config: TrainConfig, resume: bool = False) -> None:
    """Every check of a run's start that a user can fail (:func:`_checked_inputs`), in this one
    process, allocating nothing big and writing nothing: run it before handing the run to a
    scheduler (``curate train`` does, before the Prefect flow starts), so that a missing shard or a
    model too big is one line within seconds. The checkpoint is memory-mapped, not loaded."""
    processes = Processes()
    _checked_inputs(config, resume, None, processes, device_for(config, processes), mmap=True)


def _setup(
    config: TrainConfig,
    resume: bool,
    say: Callable[[str], None],
    processes: Processes,
    device: torch.device,
    verify_checksums: bool = True,
) -> Run:
    """Data, model, optimizer and loader, resumed from the latest good checkpoint of ``out_dir``
    when there is one; rank 0's outputs opened."""
    started = time.perf_counter()
    out_dir = config.out_dir
    if processes.main:
        for stale in remove_checkpoint_temporaries(out_dir):
            say(f"removed {stale}, left by a checkpoint write that was killed")
    inputs = _checked_inputs(config, resume, say, processes, device, verify_checksums)
    mixture, extra_sets, loader, model_config = inputs.mixture, inputs.extra_sets, inputs.loader, inputs.model_config
    checkpoint_path, checkpoint, task_items = inputs.checkpoint_path, inputs.checkpoint, inputs.task_items
    del inputs

    torch.manual_seed(config.seed)  # the same initial weights in every process
    raw_model = GPT(model_config).to(device)
    optimizer = raw_model.configure_optimizer(
        config.optim.weight_decay, config.optim.lr, (config.optim.beta1, config.optim.beta2), device.type
    )
    torch.manual_seed(config.seed + processes.rank)  # dropout differs between processes
    random.seed(config.seed + processes.rank)
    progress = Progress()
    if checkpoint is not None:
        raw_model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["loader"])
        rng = checkpoint["rng"]
        _set_rng_states(rng[processes.rank % len(rng)], device)
        progress = Progress(
            checkpoint["step"], checkpoint["tokens_seen"], checkpoint["train_time_s"], checkpoint["wall_time_s"]
        )
        say(f"resuming from {checkpoint_path} (step {progress.step})")
        del checkpoint

    model = torch.compile(raw_model) if config.compile else raw_model
    eval_model = model
    if processes.distributed:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    metrics = None
    if processes.main:
        out_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(out_dir / "tokenizer.json") as tmp:
            shutil.copyfile(mixture.tokenizer_path, tmp)
        metrics = Metrics(
            out_dir,
            groups=mixture.validation_groups,
            resumed_step=progress.step if checkpoint_path else None,
            extra_groups={name: extra.validation_groups for name, extra in extra_sets.items()},
            tasks=sorted(set(task_items["task"])) if task_items is not None else None,
        )
    run = Run(
        config,
        processes,
        device,
        say,
        started,
        mixture,
        extra_sets,
        model_config,
        raw_model,
        model,
        eval_model,
        optimizer,
        loader,
        progress,
        checkpoint_path is not None,
        metrics,
        config.total_steps(processes.world_size),
        config.tokens_per_step(processes.world_size),
        task_items,
        load_tokenizer(mixture.tokenizer_path) if task_items is not None else None,
        last_checkpoint=checkpoint_path,
    )
    say(
        f"{raw_model.num_parameters():,} parameters, {run.total_steps} steps of {run.tokens_per_step:,} tokens, "
        f"{processes.world_size} process(es) on {device.type}"
    )
    return run


def _step(run: Run, lr: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One optimizer step at ``lr``: ``grad_accum`` micro steps (gradients all-reduced on the last
    only), gradient clipping, AdamW. Returns the step's mean loss and the gradients' global norm
    before clipping (None without clipping); tensors, not synchronized."""
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    grad_accum = run.config.batch.grad_accum
    step_loss = torch.zeros((), device=run.device)
    for micro in range(grad_accum):
        inputs, targets = run.loader.next_batch()
        inputs, targets = inputs.to(run.device, non_blocking=True), targets.to(run.device, non_blocking=True)
        syncing = not run.processes.distributed or micro == grad_accum - 1
        with nullcontext() if syncing else run.model.no_sync():
            with autocast(run.config, run.device):
                _, loss = run.model(inputs, targets)
            (loss / grad_accum).backward()
        step_loss += loss.detach()
    norm = None
    if run.config.optim.grad_clip > 0:
        norm = torch.nn.utils.clip_grad_norm_(run.raw_model.parameters(), run.config.optim.grad_clip)
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return step_loss / grad_accum, norm


def _stop(run: Run, lr: float, what: str) -> None:
    """Stop the run, saving nothing: ``what`` is not finite (``trainer.divergence``)."""
    if run.metrics is not None:
        run.metrics.close()
    raise diverged(
        step=run.progress.step, what=what, lr=lr, optim=run.config.optim, last_checkpoint=run.last_checkpoint
    )


def _evaluate_all(run: Run) -> tuple[dict, dict[str, dict]]:
    """The mixture's validation groups and every extra evaluation set."""
    final = evaluate(run.eval_model, run.mixture, run.config, run.device, run.processes)
    extra = {
        name: evaluate(run.eval_model, mixture, run.config, run.device, run.processes)
        for name, mixture in run.extra_sets.items()
    }
    return final, extra


def _log(run: Run, window: LossWindow, lr: float, logging: bool, evaluating: bool) -> tuple | None:
    """A metrics row at this step: the training loss since the last row (``logging``) and the
    evaluations (``evaluating``); returns the evaluations when it ran them."""
    step, say = run.progress.step, run.say
    row = {"step": step, "tokens_seen": run.progress.tokens_seen, "epoch": run.loader.epochs_done, "lr": lr}
    if logging:
        row["train_loss"], row["tokens_per_s"] = window.take(run.processes)
        say(
            f"step {step}/{run.total_steps}: train loss {row['train_loss']:.4f}, lr {lr:.2e}, "
            f"{row['tokens_per_s']:,.0f} tokens/s"
        )
    evaluated = None
    if evaluating:
        final, extra = evaluated = _evaluate_all(run)
        row.update(report.evaluation_fields(final, extra))
        say(f"step {step}: val loss {final['loss']:.4f}, {final['bpb']:.4f} bits per byte")
        for name, result in extra.items():
            say(f"step {step}: {name} loss {result['loss']:.4f}, {result['bpb']:.4f} bits per byte")
        if run.task_items is not None:
            run.last_tasks = report.task_fields(score_tasks(run.raw_model, run.task_tokenizer, run.task_items))
            row.update(run.last_tasks)
            say(f"step {step}: tasks CORE {row['tasks_core']:.4f}, gold {row['tasks_gold_bpb']:.4f} bits per byte")
    if run.metrics is not None:
        run.metrics.write(row)
    return evaluated


def _save(run: Run) -> None:
    """A checkpoint of the run (every rank's RNG states gathered; rank 0 writes it)."""
    rng = [_rng_states(run.device)]
    if run.processes.distributed:
        rng = [None] * run.processes.world_size
        dist.all_gather_object(rng, _rng_states(run.device))
    if not run.processes.main:
        return
    progress = run.progress
    path = _save_checkpoint(
        run.config.out_dir,
        {
            "format": CHECKPOINT_FORMAT,
            "step": progress.step,
            "tokens_seen": progress.tokens_seen,
            "train_time_s": progress.train_time,
            "wall_time_s": progress.wall_before + time.perf_counter() - run.started,
            "config": run.config.to_dict(),
            "model_config": asdict(run.model_config),
            "mixture_sha256": run.mixture.manifest_sha256,
            "world_size": run.processes.world_size,
            "model": run.raw_model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "loader": run.loader.state_dict(),
            "rng": rng,
        },
        run.config.keep_last,
    )
    run.last_checkpoint = path
    run.say(f"step {progress.step}: saved {path.name}")


def _finish(run: Run, final: dict, extra_final: dict[str, dict]) -> dict:
    """The run's summary, written (with the metrics closed) by the main process."""
    progress, config = run.progress, run.config
    summary = report.summary(
        config=config.to_dict(),
        model_config=asdict(run.model_config),
        model=run.raw_model,
        steps=progress.step,
        tokens=progress.tokens_seen,
        epochs=run.loader.epochs_done,
        world_size=run.processes.world_size,
        device=run.device.type,
        final=final,
        final_eval=extra_final,
        final_tasks=run.last_tasks,
        wall_time_s=progress.wall_before + time.perf_counter() - run.started,
        train_time_s=progress.train_time,
        mixture_manifest_sha256=run.mixture.manifest_sha256,
    )
    if run.processes.main:
        run.metrics.close()
        write_json(summary, config.out_dir / "summary.json")
        run.say(
            f"done: {progress.step} steps, {progress.tokens_seen:,} tokens, val loss {final['loss']:.4f}, "
            f"{final['bpb']:.4f} bits per byte; {config.out_dir / 'summary.json'}"
        )
    return summary


def _train(
    config: TrainConfig,
    resume: bool,
    log: Callable[[str], None] | None,
    processes: Processes,
    device: torch.device,
    verified: bool = False,
) -> dict:
    run = _setup(config, resume, log or (lambda line: None), processes, device, verify_checksums=not verified)
    progress = run.progress
    window = LossWindow(loss_sum=torch.zeros((), device=device))
    evaluated = None
    run.model.train()
    while progress.step < run.total_steps:
        tick = time.perf_counter()
        lr = learning_rate(progress.step, run.total_steps, config.optim)
        loss, norm = _step(run, lr)
        progress.step += 1
        what = not_finite(loss, norm, run.processes)
        if what is not None:
            _stop(run, lr, what)
        progress.tokens_seen += run.tokens_per_step
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # so that the step's time is its GPU time, not its launch time
        elapsed = time.perf_counter() - tick
        progress.train_time += elapsed
        window.add(loss, run.tokens_per_step, elapsed)

        done = progress.step == run.total_steps
        logging = progress.step % config.log_interval == 0 or done
        evaluating = progress.step % config.eval_interval == 0 or done
        if logging or evaluating:
            evaluated = _log(run, window, lr, logging, evaluating) or evaluated
        if progress.step % config.checkpoint_interval == 0 or done:
            if not weights_finite(run.raw_model):  # a non-finite update from a finite loss, unclipped
                _stop(run, lr, "a weight is not finite")
            _save(run)
    # Nothing left to train (a finished run, resumed): evaluate for the summary.
    final, extra_final = evaluated if evaluated is not None else _evaluate_all(run)
    if run.task_items is not None and run.last_tasks is None:
        run.last_tasks = report.task_fields(score_tasks(run.raw_model, run.task_tokenizer, run.task_items))

    return _finish(run, final, extra_final)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.train", description="Pretrain a GPT on a mixture directory."
    )
    parser.add_argument("config", type=Path, help="a training config (TOML)")
    parser.add_argument("--resume", action="store_true", help="continue from out_dir's latest checkpoint (required)")
    args = parser.parse_args(argv)
    try:
        train(load_train_config(args.config), resume=args.resume)
    except (ConfigError, MixtureError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
