"""The trainer against a bare PyTorch loop, same model and batch, on the CPU.

Model: the ``[model]`` and ``[batch]`` of ``configs/train-demo.toml`` (about 1.2M parameters,
windows of 256 tokens, micro batch 16), with the vocabulary of the demo mixture
(``runs/demo/mix/main``, made by ``curate demo``; if it is missing, a mixture is built the way the
trainer's tests build theirs, with a vocabulary of the same size). :data:`REPEATS` times each,
alternating (trainer first on even repeats, bare first on odd ones), :data:`STEPS` optimizer steps
each, every run from freshly initialized weights:

* trainer: :func:`trainer.train.train` as the demo config says (loader, AdamW, clipping, the
  learning-rate schedule, metrics.csv and TensorBoard, evaluation and checkpoints), evaluation
  scaled to :data:`STEPS` so that it does the same share of the work as in the demo's 250 steps
  (:func:`trainer_config`); timed from the call to its return, setup included, in a fresh
  ``out_dir``;
* bare: the same GPT (same seed), the same AdamW groups, clipping and batch, fed random tokens
  already in memory; no loader, schedule, evaluation, logging or checkpoints.

Medians over the repeats count. The achievable peak is measured, not looked up: the best rate of
2048 x 2048 x 2048 float32 matmuls with the same thread count, before and after the runs. MFU =
``model.flops_per_token()`` (6N + attention) x tokens/s / that peak.

The last line printed is one JSON object; the headline is ``overhead_ratio``, the trainer's
wall time per step over the bare loop's (the target is at most 1.05), everything included.
``overhead_ratio_without_eval`` leaves out the time in ``evaluate`` (work the demo config asks
for, about a tenth of its run's arithmetic) and ``step_overhead_ratio`` counts the trainer's
training steps only (its own ``train_time_s``: loader, forward, backward, clipping, AdamW).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from pipeline.formats.configfile import read_toml
from trainer import train as train_module
from trainer.config import parse_train_config
from trainer.data import open_mixture
from trainer.model import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
DEMO_CONFIG = ROOT / "configs" / "train-demo.toml"
DEMO_MIXTURE = ROOT / "runs" / "demo" / "mix" / "main"
STEPS = 25
REPEATS = 3
PEAK_SIZE = 2048
PEAK_REPEATS = 6


def measured_peak(size: int = PEAK_SIZE, repeats: int = PEAK_REPEATS) -> list[float]:
    """FLOP/s of each of ``repeats`` float32 ``size``-cubed matmuls, after one untimed."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator)
    b = torch.randn(size, size, generator=generator)
    out = torch.empty(size, size)
    torch.mm(a, b, out=out)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        rates.append(2 * size**3 / (time.perf_counter() - start))
    return rates


def demo_mixture(scratch: Path, vocab_size: int = 8192) -> tuple[Path, str]:
    """The demo mixture, or a synthetic one built like the trainer tests' (``tests/trainer_fixtures``)."""
    if (DEMO_MIXTURE / "manifest.json").is_file():
        return DEMO_MIXTURE, "demo mixture (runs/demo/mix/main)"
    sys.path.insert(0, str(ROOT))
    from tests.trainer_fixtures import build_mixture

    print("runs/demo/mix/main is missing (run `curate demo` to make it); building a synthetic mixture", flush=True)
    folder = build_mixture(scratch / "mix" / "main", train_docs=3000, validation_docs=150, vocab_size=vocab_size)
    return folder, "synthetic mixture (tests/trainer_fixtures.build_mixture)"


def trainer_config(demo: dict, mixture: Path, out_dir: Path, steps: int):
    """The demo config on ``mixture`` for ``steps`` steps, on the CPU, its bookkeeping scaled so that
    each kind takes the share of the run it takes in the demo: logging at the demo's interval (a
    cost per logged step); evaluation as often as the demo's interval allows in ``steps`` (at least
    once: the trainer always evaluates at the last step), each on as many tokens as the demo
    evaluates per step in between (whole batches, as in the demo, rather than many tiny ones);
    checkpoints at the demo's interval (and the one at the end the trainer always writes)."""
    evals = max(1, round(steps / demo["eval_interval"]))
    data = {
        **demo,
        "mixture": str(mixture),
        "out_dir": str(out_dir),
        "device": "cpu",
        "dtype": "float32",
        "compile": False,
        "max_steps": steps,
        "eval_interval": -(-steps // evals),
        "eval_tokens": max(1, round(demo["eval_tokens"] * steps / (demo["eval_interval"] * evals))),
    }
    data.pop("max_tokens", None)
    return parse_train_config(data)


class Timed:
    """Wraps a function of the trainer module and adds up the seconds spent in it."""

    def __init__(self, name: str):
        self.name, self.original, self.seconds, self.calls = name, getattr(train_module, name), 0.0, 0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.original(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def __enter__(self):
        setattr(train_module, self.name, self)
        return self

    def __exit__(self, *exc):
        setattr(train_module, self.name, self.original)


def run_trainer(demo: dict, mixture: Path, steps: int, scratch: Path, index: int) -> dict:
    config = trainer_config(demo, mixture, scratch / f"trainer-{index}", steps)
    with Timed("evaluate") as evaluation, Timed("_save_checkpoint") as checkpoints:
        start = time.perf_counter()
        summary = train_module.train(config, log=None)
        wall = time.perf_counter() - start
    assert summary["steps"] == steps, summary["steps"]
    rest = wall - summary["train_time_s"] - evaluation.seconds - checkpoints.seconds
    return {
        "wall_s": wall,
        "loop_s": summary["train_time_s"],
        "eval_s": evaluation.seconds,
        "rest_s": rest,
        "evals": evaluation.calls,
        "checkpoint_s": checkpoints.seconds,
        "checkpoints": checkpoints.calls,
        "final_val_loss": summary["final"]["loss"],
    }


def run_bare(model_config: GPTConfig, demo: dict, steps: int, seed: int) -> dict:
    """The same model, optimizer, clipping and batch as the trainer, on random tokens in memory."""
    optim, batch = demo.get("optim", {}), demo.get("batch", {})
    micro_batch, grad_accum = batch.get("micro_batch", 16), batch.get("grad_accum", 1)
    generator = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(
        0, model_config.vocab_size, (steps, grad_accum, micro_batch, model_config.block_size + 1), generator=generator
    )
    inputs, targets = tokens[..., :-1].contiguous(), tokens[..., 1:].contiguous()
    grad_clip = optim.get("grad_clip", 1.0)
    start = time.perf_counter()
    torch.manual_seed(seed)
    model = GPT(model_config)
    optimizer = model.configure_optimizer(
        optim.get("weight_decay", 0.1),
        optim.get("lr", 6e-4),
        (optim.get("beta1", 0.9), optim.get("beta2", 0.95)),
        "cpu",
    )
    model.train()
    loop_start = time.perf_counter()
    for step in range(steps):
        for micro in range(grad_accum):
            _, loss = model(inputs[step, micro], targets[step, micro])
            (loss / grad_accum).backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    end = time.perf_counter()
    return {"wall_s": end - start, "loop_s": end - loop_start, "final_train_loss": loss.item()}


def main() -> None:
    demo = read_toml(DEMO_CONFIG)
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="bench-train-") as scratch_name:
        scratch = Path(scratch_name)
        mixture_path, mixture_kind = demo_mixture(scratch)
        mixture = open_mixture(mixture_path)
        probe = trainer_config(demo, mixture_path, scratch / "probe", STEPS)
        model_config = GPTConfig(vocab_size=mixture.vocab_size, **probe.model.model_dump())
        flops_per_token = GPT(model_config).flops_per_token()
        parameters = GPT(model_config).num_parameters(non_embedding=False)
        tokens_per_step = probe.tokens_per_step()
        print(
            f"model: {parameters:,} parameters, {flops_per_token:,} FLOPs per token; {STEPS} steps of "
            f"{tokens_per_step:,} tokens per run, {REPEATS} runs each, {threads} threads; {mixture_kind}",
            flush=True,
        )
        print(
            f"trainer bookkeeping in {STEPS} steps: log every {probe.log_interval}, evaluate every "
            f"{probe.eval_interval} ({probe.eval_tokens:,} tokens x {len(mixture.validation_groups)} groups), "
            f"checkpoint every {probe.checkpoint_interval} and at the end",
            flush=True,
        )

        peaks = measured_peak()
        print(
            f"fp32 matmul {PEAK_SIZE}^3: best {max(peaks) / 1e9:.1f} GFLOP/s, median "
            f"{statistics.median(peaks) / 1e9:.1f}",
            flush=True,
        )
        import tensorboardX  # noqa: F401  (the trainer's first import of it is a one-time cost of the process)

        trainer_runs, bare_runs = [], []
        loads = []
        for repeat in range(REPEATS):
            order = ("trainer", "bare") if repeat % 2 == 0 else ("bare", "trainer")
            for kind in order:
                loads.append(os.getloadavg()[0])
                if kind == "trainer":
                    result = run_trainer(demo, mixture_path, STEPS, scratch, repeat)
                    trainer_runs.append(result)
                    print(
                        f"  run {repeat + 1} trainer: {result['wall_s']:.2f} s ({result['loop_s']:.2f} s in steps, "
                        f"{result['eval_s']:.2f} s in {result['evals']} evaluation(s), "
                        f"{result['checkpoint_s']:.2f} s in "
                        f"{result['checkpoints']} checkpoint(s))",
                        flush=True,
                    )
                else:
                    result = run_bare(model_config, demo, STEPS, probe.seed)
                    bare_runs.append(result)
                    print(
                        f"  run {repeat + 1} bare:    {result['wall_s']:.2f} s ({result['loop_s']:.2f} s in steps)",
                        flush=True,
                    )
        peaks += measured_peak()
    peak = max(peaks)

    def median(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    trainer_step = median(trainer_runs, "wall_s") / STEPS
    trainer_loop_step = median(trainer_runs, "loop_s") / STEPS
    bare_step = median(bare_runs, "wall_s") / STEPS
    trainer_tps, trainer_loop_tps, bare_tps = (
        tokens_per_step / s for s in (trainer_step, trainer_loop_step, bare_step)
    )
    mfu = {
        name: flops_per_token * tps / peak
        for name, tps in (("trainer", trainer_tps), ("trainer_steps", trainer_loop_tps), ("bare", bare_tps))
    }
    eval_s, checkpoint_s = median(trainer_runs, "eval_s"), median(trainer_runs, "checkpoint_s")
    other_s = median(trainer_runs, "rest_s")

    print()
    print(f"{'per run of ' + str(STEPS) + ' steps (median)':<34}{'trainer':>12}{'bare':>12}")
    print(f"{'wall seconds':<34}{median(trainer_runs, 'wall_s'):>12.2f}{median(bare_runs, 'wall_s'):>12.2f}")
    print(f"{'  in training steps':<34}{median(trainer_runs, 'loop_s'):>12.2f}{median(bare_runs, 'loop_s'):>12.2f}")
    print(f"{'  in evaluation':<34}{eval_s:>12.2f}{'-':>12}")
    print(f"{'  in checkpoints':<34}{checkpoint_s:>12.2f}{'-':>12}")
    print(
        f"{'  setup, logging, summary':<34}{other_s:>12.2f}"
        f"{median(bare_runs, 'wall_s') - median(bare_runs, 'loop_s'):>12.2f}"
    )
    print(f"{'ms per step (wall)':<34}{trainer_step * 1e3:>12.1f}{bare_step * 1e3:>12.1f}")
    print(f"{'tokens/s (wall)':<34}{trainer_tps:>12,.0f}{bare_tps:>12,.0f}")
    print(f"{'tokens/s (training steps only)':<34}{trainer_loop_tps:>12,.0f}{bare_tps:>12,.0f}")
    print(f"{'MFU (wall)':<34}{mfu['trainer']:>12.1%}{mfu['bare']:>12.1%}")
    print(
        f"overhead ratio (trainer / bare time per step): {trainer_step / bare_step:.3f} (target <= 1.05); "
        f"without evaluation {(trainer_step - eval_s / STEPS) / bare_step:.3f}; training steps only "
        f"{trainer_loop_step / bare_step:.3f}"
    )
    print(
        f"measured peak {peak / 1e9:.1f} GFLOP/s fp32 ({threads} threads); 1-minute load average during the "
        f"runs {min(loads):.1f}-{max(loads):.1f}"
    )
    print(
        json.dumps(
            {
                "steps": STEPS,
                "repeats": REPEATS,
                "tokens_per_step": tokens_per_step,
                "threads": threads,
                "parameters": parameters,
                "flops_per_token": flops_per_token,
                "mixture": mixture_kind.split(" (")[0],
                "trainer_tokens_per_s": round(trainer_tps, 1),
                "trainer_step_tokens_per_s": round(trainer_loop_tps, 1),
                "bare_tokens_per_s": round(bare_tps, 1),
                "trainer_ms_per_step": round(trainer_step * 1e3, 2),
                "bare_ms_per_step": round(bare_step * 1e3, 2),
                "overhead_ratio": round(trainer_step / bare_step, 4),
                "step_overhead_ratio": round(trainer_loop_step / bare_step, 4),
                "overhead_ratio_without_eval": round((trainer_step - eval_s / STEPS) / bare_step, 4),
                "eval_share": round(eval_s / median(trainer_runs, "wall_s"), 4),
                "checkpoint_share": round(checkpoint_s / median(trainer_runs, "wall_s"), 4),
                "mfu": round(mfu["trainer"], 4),
                "trainer_step_mfu": round(mfu["trainer_steps"], 4),
                "bare_mfu": round(mfu["bare"], 4),
                "peak_flops": round(peak),
                "peak_flops_median": round(statistics.median(peaks)),
                "load_avg_max": round(max(loads), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
