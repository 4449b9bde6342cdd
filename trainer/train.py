"""Pretrain a GPT on a mixture directory: one process, or data-parallel under torchrun.

    python -m trainer.train configs/train-demo.toml             # one process (CPU or one GPU)
    torchrun --nproc_per_node 2 -m trainer.train CONFIG          # DDP: gloo on CPU, nccl on CUDA
    python -m trainer.train CONFIG --resume                      # continue; fails if nothing to resume

One optimizer step: ``grad_accum`` micro steps of ``micro_batch`` windows per process (gradients
synchronized on the last only), clipping of the global gradient norm, AdamW at the step's learning
rate (:func:`learning_rate`). Every ``eval_interval`` steps and at the end, each validation group
is evaluated (``trainer.evaluation``); every ``log_interval`` steps a row goes to ``metrics.csv``
and TensorBoard (``trainer.metrics``); every ``checkpoint_interval`` steps and at the end a
checkpoint is written (``trainer.state`` says what it holds and how a run resumes exactly from
it). A loss, gradient norm or weight that is not finite stops the run (``trainer.divergence``).

Outputs in ``out_dir`` (rank 0 writes them)::

    tokenizer.json               the mixture's tokenizer, for generation
    metrics.csv                  one row per log or eval event
    tb/                          TensorBoard event files (tensorboardX)
    checkpoints/step-NNNNNN.pt   model, optimizer, step, loader state, RNG states, config
    checkpoints/step-NNNNNN.pt.sha256   its checksum, checked before it is loaded
    checkpoints/latest           the name of the newest checkpoint
    summary.json                 at the end: config, sizes, tokens, final losses, speed

A checkpoint that fails its checksum or does not load is skipped, with a warning, for the newest
older one that does (``trainer.checkpoints``).
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
from trainer.checkpoints import CHECKPOINT_DIR, load_latest_checkpoint, remove_checkpoint_temporaries
from trainer.checkpoints import save_checkpoint as _save_checkpoint  # a module global: benchmarks time it
from trainer.config import OptimSection, TrainConfig, load_train_config
from trainer.data import Mixture, MixtureError, TrainLoader, open_mixture
from trainer.divergence import diverged, not_finite, weights_finite
from trainer.evaluation import evaluate, read_task_items, score_tasks
from trainer.memory import check_memory
from trainer.metrics import LossWindow, Metrics
from trainer.model import GPT, GPTConfig
from trainer.processes import Processes, autocast, device_for, start_processes, uses_bf16
from trainer.state import Progress, check_same_run, checkpoint_state, every_rank_rng_states, restore


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


def log_line(line: str) -> None:
    """The default ``log``: print, flushed, so that progress shows in redirected output too."""
    print(line, flush=True)


def train(
    config: TrainConfig, *, resume: bool = False, log: Callable[[str], None] | None = log_line, verified: bool = False
) -> dict:
    """Train as ``config`` says; return the summary (also written to ``out_dir/summary.json``).

    If ``out_dir`` holds a checkpoint, the run continues from it, provided it was made by the same
    config (else a ConfigError); ``resume=True`` additionally requires one. Under torchrun, each
    process calls this; only rank 0 writes files and logs. ``log`` gets one line per event
    (None: silent; a warning's line starts with ``trainer.checkpoints.WARNING``). ``verified``:
    :func:`preflight` passed just before, so the shards' checksums are not computed again. A loss
    that is not finite stops the run at once with ``trainer.divergence.TrainingDiverged``, saving
    nothing.
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
        say = log if processes.main and log is not None else lambda line: None
        result = _train(_setup(config, resume, say, processes, device, verify_checksums=not verified))
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


# --------------------------------------------------------------------------------------------
# Setup


@dataclass(kw_only=True)
class Run:
    """Everything one training run holds while it runs (set up by :func:`_setup`)."""

    config: TrainConfig
    processes: Processes
    device: torch.device
    say: Callable[[str], None]
    started: float  # time.perf_counter() at the start of this invocation
    mixture: Mixture
    extra_sets: dict[str, Mixture]
    model_config: GPTConfig
    raw_model: GPT
    model: torch.nn.Module  # raw_model, compiled and/or wrapped in DDP
    eval_model: torch.nn.Module  # compiled, not wrapped
    optimizer: torch.optim.Optimizer
    loader: TrainLoader
    progress: Progress
    metrics: Metrics | None  # the main process's
    total_steps: int
    tokens_per_step: int
    task_items: pl.DataFrame | None = None  # eval_tasks' items, scored at every evaluation (main process)
    task_tokenizer: Tokenizer | None = None  # the mixture's, which scores them
    last_tasks: dict | None = None  # their metrics row at the latest evaluation (the summary's final_tasks)
    last_checkpoint: Path | None = None  # the newest good one: resumed from or written


@dataclass(kw_only=True)
class Inputs:
    """What a run starts from, every check a user can fail passed (:func:`_checked_inputs`)."""

    mixture: Mixture
    extra_sets: dict[str, Mixture]
    loader: TrainLoader
    model_config: GPTConfig
    task_items: pl.DataFrame | None
    checkpoint_path: Path | None
    checkpoint: dict | None


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


def _checked_inputs(
    config: TrainConfig,
    resume: bool,
    say: Callable[[str], None] | None,
    processes: Processes,
    device: torch.device,
    *,
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
        block_size=config.model.block_size,
        micro_batch=config.batch.micro_batch,
        seed=config.seed,
        objective=config.model.objective,
        rank=processes.rank,
        world_size=processes.world_size,
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
        check_same_run(checkpoint, config, mixture, checkpoint_path)
    return Inputs(
        mixture=mixture,
        extra_sets=extra_sets,
        loader=loader,
        model_config=model_config,
        task_items=task_items,
        checkpoint_path=checkpoint_path,
        checkpoint=checkpoint,
    )


def preflight(config: TrainConfig, resume: bool = False) -> None:
    """Every check of a run's start that a user can fail (:func:`_checked_inputs`), in this one
    process, allocating nothing big and writing nothing: run it before handing the run to a
    scheduler (``curate train`` does, before the Prefect flow starts), so that a missing shard or a
    model too big is one line within seconds. The checkpoint is memory-mapped, not loaded."""
    processes = Processes()
    _checked_inputs(config, resume, None, processes, device_for(config, processes), mmap=True)


def _open_metrics(config: TrainConfig, inputs: Inputs, resumed_step: int | None) -> Metrics:
    """The main process's outputs opened: out_dir, the tokenizer's copy, metrics.csv and tb/."""
    config.out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(config.out_dir / "tokenizer.json") as tmp:
        shutil.copyfile(inputs.mixture.tokenizer_path, tmp)
    return Metrics(
        config.out_dir,
        groups=inputs.mixture.validation_groups,
        resumed_step=resumed_step,
        extra_groups={name: extra.validation_groups for name, extra in inputs.extra_sets.items()},
        tasks=sorted(set(inputs.task_items["task"])) if inputs.task_items is not None else None,
    )


def _setup(
    config: TrainConfig,
    resume: bool,
    say: Callable[[str], None],
    processes: Processes,
    device: torch.device,
    *,
    verify_checksums: bool = True,
) -> Run:
    """Data, model, optimizer and loader, resumed from the latest good checkpoint of ``out_dir``
    when there is one; rank 0's outputs opened."""
    started = time.perf_counter()
    if processes.main:
        for stale in remove_checkpoint_temporaries(config.out_dir):
            say(f"removed {stale}, left by a checkpoint write that was killed")
    inputs = _checked_inputs(config, resume, say, processes, device, verify_checksums=verify_checksums)

    torch.manual_seed(config.seed)  # the same initial weights in every process
    raw_model = GPT(inputs.model_config).to(device)
    optimizer = raw_model.configure_optimizer(
        config.optim.weight_decay, config.optim.lr, (config.optim.beta1, config.optim.beta2), device.type
    )
    torch.manual_seed(config.seed + processes.rank)  # dropout differs between processes
    random.seed(config.seed + processes.rank)
    progress = Progress()
    if inputs.checkpoint is not None:
        progress = restore(
            inputs.checkpoint,
            model=raw_model,
            optimizer=optimizer,
            loader=inputs.loader,
            rank=processes.rank,
            device=device,
        )
        inputs.checkpoint = None  # the weights, loaded: freed
        say(f"resuming from {inputs.checkpoint_path} (step {progress.step})")

    model = torch.compile(raw_model) if config.compile else raw_model
    eval_model = model
    if processes.distributed:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    resumed_step = progress.step if inputs.checkpoint_path else None
    run = Run(
        config=config,
        processes=processes,
        device=device,
        say=say,
        started=started,
        mixture=inputs.mixture,
        extra_sets=inputs.extra_sets,
        model_config=inputs.model_config,
        raw_model=raw_model,
        model=model,
        eval_model=eval_model,
        optimizer=optimizer,
        loader=inputs.loader,
        progress=progress,
        metrics=_open_metrics(config, inputs, resumed_step) if processes.main else None,
        total_steps=config.total_steps(processes.world_size),
        tokens_per_step=config.tokens_per_step(processes.world_size),
        task_items=inputs.task_items,
        task_tokenizer=load_tokenizer(inputs.mixture.tokenizer_path) if inputs.task_items is not None else None,
        last_checkpoint=inputs.checkpoint_path,
    )
    say(
        f"{raw_model.num_parameters():,} parameters, {run.total_steps} steps of {run.tokens_per_step:,} tokens, "
        f"{processes.world_size} process(es) on {device.type}"
    )
    return run


# --------------------------------------------------------------------------------------------
# The loop


def _train(run: Run) -> dict:
    """Train from ``run.progress`` to the last step; evaluate, log and checkpoint on the way."""
    config, progress = run.config, run.progress
    window = LossWindow(loss_sum=torch.zeros((), device=run.device))
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
        if run.device.type == "cuda":
            torch.cuda.synchronize(run.device)  # so that the step's time is its GPU time, not its launch time
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
    rng = every_rank_rng_states(run.device, run.processes)
    if not run.processes.main:
        return
    state = checkpoint_state(
        progress=run.progress,
        wall_time_s=run.progress.wall_before + time.perf_counter() - run.started,
        config=run.config,
        model_config=run.model_config,
        mixture=run.mixture,
        world_size=run.processes.world_size,
        model=run.raw_model,
        optimizer=run.optimizer,
        loader=run.loader,
        rng=rng,
    )
    run.last_checkpoint = _save_checkpoint(run.config.out_dir, state, run.config.keep_last)
    run.say(f"step {run.progress.step}: saved {run.last_checkpoint.name}")


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
