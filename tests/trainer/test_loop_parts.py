"""The parts of the training loop on their own: the divergence checks, the loss window between
logged rows, and the run state a checkpoint carries (saved, then restored into fresh objects)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from tests.trainer_fixtures import train_config_dict
from trainer.config import parse_train_config
from trainer.data import TrainLoader, open_mixture
from trainer.divergence import TrainingDiverged, diverged, not_finite, weights_finite
from trainer.metrics import LossWindow
from trainer.model import GPT, GPTConfig
from trainer.processes import Processes
from trainer.state import Progress, checkpoint_state, restore


def test_a_step_that_is_not_finite_is_named():
    one = Processes()
    assert not_finite(torch.tensor(2.5), torch.tensor(0.7), one) is None
    assert not_finite(torch.tensor(2.5), None, one) is None
    assert not_finite(torch.tensor(math.nan), torch.tensor(0.7), one) == "the training loss is nan"
    assert not_finite(torch.tensor(2.5), torch.tensor(math.inf), one) == "the gradient norm is inf"
    model = torch.nn.Linear(3, 2)
    assert weights_finite(model)
    with torch.no_grad():
        model.weight[1, 2] = math.inf
    assert not weights_finite(model)


def test_the_divergence_error_says_where_and_what_to_change(tmp_path):
    config = parse_train_config(train_config_dict(tmp_path, tmp_path / "out", optim={"grad_clip": 0.0}))
    error = diverged(step=7, what="a weight is not finite", lr=0.0025, optim=config.optim, last_checkpoint=None)
    assert isinstance(error, TrainingDiverged) and "\n" not in str(error)
    assert str(error).startswith("step 7: a weight is not finite, so training stopped and saved nothing")
    assert "no checkpoint was written" in str(error) and "lr 0.0025 at this step, optim.lr 0.003" in str(error)
    assert "no gradient clipping (optim.grad_clip 0)" in str(error)


def test_the_loss_window_averages_since_the_last_row_and_starts_over():
    window = LossWindow(loss_sum=torch.zeros(()))
    for loss in (3.0, 2.0, 1.0):
        window.add(torch.tensor(loss), tokens=512, seconds=0.5)
    assert window.take(Processes()) == (2.0, 1024.0)
    window.add(torch.tensor(4.0), tokens=100, seconds=0.25)
    assert window.take(Processes()) == (4.0, 400.0)


def test_the_run_state_restores_weights_moments_loader_rng_and_progress(mixture_dir, tmp_path):
    config = parse_train_config(train_config_dict(mixture_dir, tmp_path / "out"))
    mixture = open_mixture(config.mixture)
    model_config = GPTConfig(vocab_size=mixture.vocab_size, **config.model.model_dump())

    def parts(seed: int):
        torch.manual_seed(seed)
        model = GPT(model_config)
        optimizer = model.configure_optimizer(0.1, 1e-3, (0.9, 0.95), "cpu")
        return model, optimizer, TrainLoader(mixture, block_size=32, micro_batch=4, seed=0)

    model, optimizer, loader = parts(0)
    for _ in range(2):
        inputs, targets = loader.next_batch()
        model(inputs, targets)[1].backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.manual_seed(11), random.seed(11)
    progress = Progress(step=2, tokens_seen=256, train_time=1.5, wall_before=4.0)
    state = checkpoint_state(
        progress=progress,
        wall_time_s=5.0,
        config=config,
        model_config=model_config,
        mixture=mixture,
        world_size=1,
        model=model,
        optimizer=optimizer,
        loader=loader,
        rng=[{"torch": torch.get_rng_state(), "cuda": None, "python": random.getstate()}],
    )
    expected = (torch.rand(3), random.random(), loader.next_batch()[0])

    fresh, fresh_optimizer, fresh_loader = parts(1)
    torch.manual_seed(99), random.seed(99)
    resumed = restore(
        state, model=fresh, optimizer=fresh_optimizer, loader=fresh_loader, rank=0, device=torch.device("cpu")
    )
    assert resumed == Progress(step=2, tokens_seen=256, train_time=1.5, wall_before=5.0)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters(), strict=True))
    moments = fresh_optimizer.state_dict()["state"][0]
    assert torch.equal(moments["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]
    assert torch.equal(fresh_loader.next_batch()[0], expected[2])
    with pytest.raises(TypeError):
        Progress(2, 256)  # counters are named, never positional
