"""GPT-2 small (124M) training throughput and MFU on one CUDA GPU, against the card's measured
bf16 matmul rate.

    python benchmarks/gpu_throughput.py                  # CUDA: 124M, bf16 autocast, torch.compile
    python benchmarks/gpu_throughput.py --tiny           # a tiny model on the CPU, float32, no compile

Phases, each printed as it starts:

1. peak: the best rate of large bf16 matmuls (8192^3 and 16384^3, synchronized) on CUDA, of
   512^3 float32 matmuls on the CPU. The MFU's denominator is this measured rate, not the
   datasheet's (which is printed too where the card is known).
2. memory: :class:`trainer.model.GPT` with GPT-2 small's shape (12 layers, 12 heads, 768 wide,
   windows of 1,024 tokens, 50,304-token vocabulary, the trainer's default rotary positions),
   AdamW as the trainer configures it (fused on CUDA), clipping at 1.0, bf16 autocast, compiled;
   batches of random tokens already on the device; warmup steps (compilation), then ``--steps``
   timed steps with one synchronize at the end.
3. loader: the trainer's loop shape: :class:`trainer.data.TrainLoader` on an in-memory mixture of
   random tokens, a host-to-device copy and a synchronize every step, as ``trainer.train`` does.

MFU = ``model.flops_per_token()`` (6N + 12 * n_layer * n_embd * block_size) x tokens/s / measured
peak. An out-of-memory error halves the micro batch and starts the phase again; the run stops
timing early rather than pass ``--budget-s``. The last line printed is one JSON object (also after
an error, with an ``"error"`` key); ``mfu`` is the memory phase's.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from trainer.data import Mixture, TrainLoader
from trainer.model import GPT, GPTConfig

GPT2_SMALL = {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50304}
TINY = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 128, "vocab_size": 512}
# Dense bf16 tensor-core peaks from the datasheets (FLOP/s), for comparison only.
DATASHEET_BF16 = {
    "H200": 989e12,
    "H100 SXM": 989e12,
    "H100 80GB HBM3": 989e12,
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "A100": 312e12,
    "L40S": 362e12,
    "A10G": 70e12,
}
START = time.perf_counter()


def say(line: str) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s] {line}", flush=True)


def is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------
# Peak


def matmul_rate(device: torch.device, size: int, dtype: torch.dtype, repeats: int, trials: int) -> float:
    """The best FLOP/s of ``trials`` timings of ``repeats`` back-to-back ``size``-cubed matmuls."""
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    out = torch.empty(size, size, device=device, dtype=dtype)
    for _ in range(2):
        torch.mm(a, b, out=out)
    synchronize(device)
    best = 0.0
    for _ in range(trials):
        start = time.perf_counter()
        for _ in range(repeats):
            torch.mm(a, b, out=out)
        synchronize(device)
        best = max(best, 2 * size**3 * repeats / (time.perf_counter() - start))
    del a, b, out
    free_memory(device)
    return best


def measure_peak(device: torch.device, tiny: bool) -> dict:
    if tiny:
        sizes, dtype, repeats, trials = (512,), torch.float32, 4, 3
    else:
        sizes, dtype, repeats, trials = (8192, 16384), torch.bfloat16, 10, 5
    rates = {}
    for size in sizes:
        try:
            rates[size] = matmul_rate(device, size, dtype, repeats, trials)
        except RuntimeError as error:
            if not is_oom(error):
                raise
            free_memory(device)
            say(f"  {size}^3 matmul ran out of memory; skipped")
            continue
        say(f"  {str(dtype).removeprefix('torch.')} matmul {size}^3: {rates[size] / 1e12:.2f} TFLOP/s")
    if not rates:
        raise RuntimeError("no matmul size fit in memory")
    return {
        "peak_flops": max(rates.values()),
        "peak_by_size": {str(k): round(v) for k, v in rates.items()},
        "peak_dtype": str(dtype).removeprefix("torch."),
    }


def datasheet_peak(device: torch.device) -> tuple[str, float | None]:
    if device.type != "cuda":
        return "cpu", None
    name = torch.cuda.get_device_name(device)
    for key, flops in DATASHEET_BF16.items():
        if all(part in name for part in key.split()):
            return name, flops
    return name, None


# --------------------------------------------------------------------------------------------
# Training steps


class Trainer:
    """The model, its optimizer and one training step, as ``trainer.train`` sets them up."""

    def __init__(self, shape: dict, device: torch.device, compile_model: bool, bf16: bool, positions: str):
        torch.manual_seed(0)
        self.config = GPTConfig(positions=positions, **shape)
        self.raw = GPT(self.config).to(device)
        self.optimizer = self.raw.configure_optimizer(0.1, 6e-4, (0.9, 0.95), device.type)
        self.model = torch.compile(self.raw, dynamic=False) if compile_model else self.raw
        self.compiled = compile_model
        self.device = device
        self.autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if bf16 else nullcontext
        self.simulate_oom_above: int | None = None
        self.compile_error: str | None = None

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, lr: float = 6e-4) -> torch.Tensor:
        if self.simulate_oom_above is not None and inputs.size(0) > self.simulate_oom_above:
            raise torch.OutOfMemoryError(
                f"simulated: a micro batch of {inputs.size(0)} is above {self.simulate_oom_above}"
            )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with self.autocast():
            _, loss = self.model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.raw.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def fall_back_to_eager(self) -> None:
        self.model, self.compiled = self.raw, False


def with_retries(run, trainer: Trainer, batch: int, what: str):
    """``run(batch)``, halving ``batch`` after each out-of-memory error. Returns (result, batch)."""
    while True:
        try:
            return run(batch), batch
        except RuntimeError as error:
            if not is_oom(error):
                raise
            say(f"  {what}: {str(error).splitlines()[0][:200] if str(error) else 'out of memory'}")
        # Out of the except block, the error's traceback (which holds the failed step's tensors) is gone.
        trainer.optimizer.zero_grad(set_to_none=True)
        free_memory(trainer.device)
        if batch == 1:
            raise RuntimeError(f"{what}: out of memory at a micro batch of 1")
        batch //= 2
        say(f"  {what}: out of memory; micro batch halved to {batch}")


def memory_phase(trainer: Trainer, batch: int, steps: int, warmup: int, deadline: float) -> dict:
    device, vocab, block = trainer.device, trainer.config.vocab_size, trainer.config.block_size
    pool = 4

    def run(micro_batch: int) -> dict:
        generator = torch.Generator(device=device).manual_seed(1)
        tokens = torch.randint(0, vocab, (pool, micro_batch, block + 1), device=device, generator=generator)
        inputs, targets = tokens[..., :-1].contiguous(), tokens[..., 1:].contiguous()
        del tokens
        for i in range(warmup):
            start = time.perf_counter()
            loss = trainer.step(inputs[i % pool], targets[i % pool])
            synchronize(device)
            say(f"  warmup step {i + 1}/{warmup}: {time.perf_counter() - start:.2f} s, loss {loss.item():.3f}")
        done = 0
        start = time.perf_counter()
        while done < steps:
            loss = trainer.step(inputs[done % pool], targets[done % pool])
            done += 1
            if done % 10 == 0:
                synchronize(device)
                if time.perf_counter() > deadline:
                    say(f"  time budget reached after {done} of {steps} timed steps")
                    break
        synchronize(device)
        seconds = time.perf_counter() - start
        return {"steps": done, "seconds": seconds, "final_loss": loss.item()}

    def run_compiled_or_eager(micro_batch: int) -> dict:
        try:
            return run(micro_batch)
        except Exception as error:  # a compiler failure: measure eagerly rather than nothing
            if is_oom(error) or not trainer.compiled:
                raise
            traceback.print_exc()
            trainer.compile_error = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
        say(f"  torch.compile failed ({trainer.compile_error.split(':')[0]}); measuring without it")
        trainer.fall_back_to_eager()
        trainer.optimizer.zero_grad(set_to_none=True)
        free_memory(device)
        return run(micro_batch)

    return with_retries(run_compiled_or_eager, trainer, batch, "memory phase")


def synthetic_mixture(vocab_size: int, tokens: int, seed: int = 2) -> Mixture:
    """A mixture held in memory: random tokens as one train shard, no validation."""
    stream = np.random.default_rng(seed).integers(
        0, vocab_size, tokens, dtype=np.uint16 if vocab_size <= 65536 else np.uint32
    )
    specials = {"eod": 0, "pad": 1, "mask": 2, "cls": 3}
    return Mixture(
        path=Path("synthetic"),
        manifest={"groups": {}},
        manifest_sha256="",
        tokenizer_path=Path(),
        vocab_size=vocab_size,
        special_ids=specials,
        train=[stream],
        validation={},
        validation_tokens={},
        validation_bytes={},
    )


def loader_phase(trainer: Trainer, batch: int, steps: int, deadline: float) -> tuple[dict, int]:
    device, block = trainer.device, trainer.config.block_size

    def run(micro_batch: int) -> dict:
        mixture = synthetic_mixture(trainer.config.vocab_size, (steps + 2) * micro_batch * block + block + 1)
        loader = TrainLoader(mixture, block, micro_batch, seed=0)
        inputs, targets = loader.next_batch()  # one untimed step: the batch shape may be new
        trainer.step(inputs.to(device), targets.to(device))
        synchronize(device)
        times = []
        for _ in range(steps):
            tick = time.perf_counter()
            inputs, targets = loader.next_batch()
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
            loss = trainer.step(inputs, targets)
            synchronize(device)
            times.append(time.perf_counter() - tick)
            if time.perf_counter() > deadline:
                say(f"  time budget reached after {len(times)} of {steps} steps")
                break
        return {
            "steps": len(times),
            "seconds": sum(times),
            "median_step_s": float(np.median(times)),
            "final_loss": loss.item(),
        }

    return with_retries(run, trainer, batch, "loader phase")


# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny model on the CPU in float32 (automatic when CUDA is not available)"
    )
    parser.add_argument("--steps", type=int, help="timed steps of the memory phase (default 50; tiny 4)")
    parser.add_argument("--batch", type=int, help="micro batch in windows (default 32; tiny 4)")
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the model (default: on for CUDA, off for --tiny)",
    )
    parser.add_argument("--warmup", type=int, help="untimed steps first, compilation among them (default 5; tiny 1)")
    parser.add_argument("--loader-steps", type=int, help="steps of the loader phase, 0 to skip (default 20; tiny 2)")
    parser.add_argument(
        "--positions",
        choices=("rope", "learned"),
        default="rope",
        help="rotary (the trainer's default) or GPT-2's learned position table",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=270.0,
        help="stop timing early past this many seconds since start (default 270)",
    )
    parser.add_argument(
        "--simulate-oom-above",
        type=int,
        metavar="N",
        help="raise an out-of-memory error for micro batches above N (tests the retry path)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    tiny = args.tiny or not cuda
    if not args.tiny and not cuda:
        say("no CUDA device: running the tiny CPU mode")
    device = torch.device("cpu") if tiny else torch.device("cuda", torch.cuda.current_device())
    mode = "tiny" if tiny else "gpu"
    shape = TINY if tiny else GPT2_SMALL
    steps = args.steps if args.steps is not None else (4 if tiny else 50)
    batch = args.batch if args.batch is not None else (4 if tiny else 32)
    warmup = args.warmup if args.warmup is not None else (1 if tiny else 5)
    loader_steps = args.loader_steps if args.loader_steps is not None else (2 if tiny else 20)
    compile_model = args.compile if args.compile is not None else not tiny
    deadline = START + args.budget_s
    if min(steps, batch) < 1 or min(warmup, loader_steps) < 0:
        raise SystemExit("--steps and --batch must be at least 1, --warmup and --loader-steps at least 0")

    name, datasheet = datasheet_peak(device)
    result: dict = {
        "device": device.type,
        "mode": mode,
        "device_name": name,
        "torch": torch.__version__,
        "dtype": "float32" if tiny else "bfloat16",
        "compile": compile_model,
        **shape,
        "positions": args.positions,
    }
    try:
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        say(f"{mode} mode on {name} (torch {torch.__version__}, {torch.get_num_threads()} CPU threads)")
        say("phase 1/3: peak matmul rate")
        result.update(measure_peak(device, tiny))
        peak = result["peak_flops"]

        trainer = Trainer(shape, device, compile_model, bf16=not tiny, positions=args.positions)
        trainer.simulate_oom_above = args.simulate_oom_above
        result["requested_micro_batch"] = batch
        flops_per_token = trainer.raw.flops_per_token()
        result.update(parameters=trainer.raw.num_parameters(non_embedding=False), flops_per_token=flops_per_token)
        say(
            f"phase 2/3: {result['parameters'] / 1e6:.1f}M parameters, {flops_per_token / 1e9:.3f} GFLOP per token; "
            f"{warmup} warmup + {steps} timed steps, micro batch {batch} x {shape['block_size']} tokens"
            f"{', compiling' if compile_model else ''}"
        )
        memory, batch = memory_phase(trainer, batch, steps, warmup, deadline)
        tokens = memory["steps"] * batch * shape["block_size"]
        tokens_per_s = tokens / memory["seconds"]
        result.update(
            micro_batch=batch,
            tokens_per_step=batch * shape["block_size"],
            steps=memory["steps"],
            compiled=trainer.compiled,
            tokens_per_s=tokens_per_s,
            ms_per_step=memory["seconds"] / memory["steps"] * 1e3,
            mfu=flops_per_token * tokens_per_s / peak,
            final_loss=memory["final_loss"],
        )
        if trainer.compile_error:
            result["compile_error"] = trainer.compile_error
        if datasheet:
            result.update(datasheet_peak_flops=datasheet, mfu_vs_datasheet=flops_per_token * tokens_per_s / datasheet)
        if device.type == "cuda":
            result["max_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        say(
            f"  {tokens_per_s:,.0f} tokens/s, {result['ms_per_step']:.1f} ms per step, MFU {result['mfu']:.1%} of "
            f"the measured {peak / 1e12:.2f} TFLOP/s"
        )

        if loader_steps and time.perf_counter() < deadline:
            say(f"phase 3/3: {loader_steps} steps through TrainLoader, copy and synchronize per step")
            loader, batch = loader_phase(trainer, batch, loader_steps, deadline)
            loader_tps = loader["steps"] * batch * shape["block_size"] / loader["seconds"]
            result.update(
                loader_micro_batch=batch,
                loader_steps=loader["steps"],
                loader_tokens_per_s=loader_tps,
                loader_mfu=flops_per_token * loader_tps / peak,
                loader_ratio=loader_tps / tokens_per_s,
            )
            say(f"  {loader_tps:,.0f} tokens/s, MFU {result['loader_mfu']:.1%}")
        else:
            say("phase 3/3: skipped")
    except Exception as error:  # the JSON line still comes, with what was measured
        traceback.print_exc()
        result["error"] = f"{type(error).__name__}: {error}"[:500]

    result["seconds"] = time.perf_counter() - START
    if "tokens_per_s" in result:
        print()
        print(f"{'':<30}{'tokens/s':>14}{'ms/step':>10}{'MFU':>8}")
        print(
            f"{'random tokens in memory':<30}{result['tokens_per_s']:>14,.0f}{result['ms_per_step']:>10.1f}"
            f"{result['mfu']:>8.1%}"
        )
        if "loader_tokens_per_s" in result:
            ms = result["loader_micro_batch"] * shape["block_size"] / result["loader_tokens_per_s"] * 1e3
            print(
                f"{'TrainLoader, sync per step':<30}{result['loader_tokens_per_s']:>14,.0f}{ms:>10.1f}"
                f"{result['loader_mfu']:>8.1%}"
            )
        print(
            f"measured peak {result['peak_flops'] / 1e12:.2f} TFLOP/s {result['peak_dtype']}"
            + (
                f"; datasheet {datasheet / 1e12:.0f} TFLOP/s (MFU {result['mfu_vs_datasheet']:.1%})"
                if datasheet
                else ""
            )
        )
    print(
        json.dumps(
            {
                key: (round(value, 4) if isinstance(value, float) and math.isfinite(value) else value)
                for key, value in result.items()
            }
        )
    )
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
