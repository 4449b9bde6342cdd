"""What stops a run early, with one line: a model too big for the memory there is (estimated
before anything is allocated) and a loss that is no longer finite (the run stops at that step and
writes no checkpoint of its garbage weights)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pipeline.formats.configfile import ConfigError
from tests.trainer_fixtures import toml_text, train_config_dict
from trainer.checkpoints import load_latest_checkpoint
from trainer.config import parse_train_config
from trainer.divergence import TrainingDiverged
from trainer.memory import ModelTooLargeError, available_memory, check_memory, estimate_memory, size
from trainer.model import GPTConfig
from trainer.train import preflight, train

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")


def test_inf_and_nan_are_refused_anywhere_in_the_config(mixture_dir, tmp_path):
    for overrides, key in [
        ({"optim": {"lr": math.inf}}, "optim.lr"),
        ({"optim": {"lr": math.nan}}, "optim.lr"),
        ({"optim": {"grad_clip": math.inf}}, "optim.grad_clip"),
        ({"model": {"dropout": math.nan}}, "model.dropout"),
    ]:
        with pytest.raises(ConfigError, match=rf"^{key}: Input should be a finite number") as error:
            parse_train_config(train_config_dict(mixture_dir, tmp_path / "out", **overrides))
        assert "\n" not in str(error.value)


def test_a_model_too_big_is_refused_with_its_estimate_and_the_limit_before_allocating(mixture_dir, tmp_path):
    config = parse_train_config(train_config_dict(mixture_dir, tmp_path / "out", model={"n_embd": 4_000_000}))
    with pytest.raises(ModelTooLargeError) as error:
        preflight(config)
    limit, _ = available_memory(CPU)
    message = str(error.value)
    assert message.startswith("model: 384,001,300,000,000 parameters (n_layer 2, n_embd 4000000, vocab_size 320)")
    assert "needs about 6.1 PB to train" in message and f"more than the {size(limit)} of RAM available" in message
    assert "\n" not in message and not (tmp_path / "out").exists()


def test_the_estimate_counts_state_activations_and_logits():
    shape = GPTConfig(vocab_size=1000, block_size=64, n_layer=2, n_head=2, n_embd=32)
    parameters = 1000 * 32 + 2 * (12 * 32 * 32 + 2 * 32) + 32
    fp32, bf16 = estimate_memory(shape, 8, bf16=False), estimate_memory(shape, 8, bf16=True)
    assert fp32.parameters == parameters and fp32.state_bytes == 16 * parameters
    assert fp32.activation_bytes == 8 * 64 * (2 * 68 * 32 + 8 * 1000)
    assert bf16.activation_bytes == 8 * 64 * (2 * 34 * 32 + 8 * 1000)
    assert check_memory(shape, 8, False, CPU) == fp32  # a small model passes


def diverging(mixture: Path, out: Path) -> dict:
    """A learning rate of 1e10 without warmup: the weights blow up after the first step."""
    return train_config_dict(
        mixture, out, optim={"lr": 1e10, "min_lr": 0.0, "warmup_steps": 0}, checkpoint_interval=1, max_steps=4
    )


def test_a_loss_that_is_not_finite_stops_the_run_and_keeps_the_checkpoint_before(mixture_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TrainingDiverged) as error:
        train(parse_train_config(diverging(mixture_dir, out)), log=None)
    message = str(error.value)
    assert message.startswith("step 2: the training loss is nan, so training stopped and saved nothing")
    assert "step-000001.pt, is kept" in message and "lr 1e+10" in message and "\n" not in message
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["latest", "step-000001.pt", "step-000001.pt.sha256"]
    path, checkpoint = load_latest_checkpoint(out)
    assert path.name == "step-000001.pt"
    assert all(torch.isfinite(tensor).all() for tensor in checkpoint["model"].values())
    assert not (out / "summary.json").exists()


def test_a_diverging_run_is_one_error_line_from_the_command(mixture_dir, tmp_path):
    config = tmp_path / "train.toml"
    config.write_text(toml_text(diverging(mixture_dir, tmp_path / "out")))
    done = subprocess.run(
        [sys.executable, "-m", "trainer.train", str(config)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("error: step 2: the training loss is nan") and done.stderr.count("\n") == 1
    assert not (tmp_path / "out" / "checkpoints" / "step-000002.pt").exists()
