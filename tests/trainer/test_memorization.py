"""Memorization measures on a tiny GPT: trained on a few documents until it recites them, it
extracts every one of them exactly, with top exposure; untrained, it extracts none; and the
one-pass extraction agrees with step-by-step greedy decoding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainer.memorization import cut, exposure, extraction
from trainer.model import GPT, GPTConfig

VOCAB, EOD, PREFIX, SUFFIX = 64, 0, 6, 6


def _documents(count: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, size=PREFIX + SUFFIX + 3).tolist() for _ in range(count)]


def _model() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=VOCAB, block_size=32, n_layer=2, n_head=2, n_embd=64))


def _train(model: GPT, windows: torch.Tensor, steps: int) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        _, loss = model(windows[:, :-1], windows[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def _greedy_matched(model: GPT, windows: torch.Tensor) -> list[int]:
    """Leading suffix tokens right, decoding one token at a time from the prefix."""
    model.eval()
    out = []
    for window in windows:
        context = window[: 1 + PREFIX].tolist()
        for _ in range(SUFFIX):
            logits, _ = model(torch.tensor([context]))
            context.append(int(logits[0, -1].argmax()))
        decoded, truth = context[1 + PREFIX :], window[1 + PREFIX :].tolist()
        out.append(next((i for i, (a, b) in enumerate(zip(decoded, truth)) if a != b), SUFFIX))
    return out


def test_cut_keeps_long_enough_documents_in_order():
    windows, kept = cut([[5] * 12, [1, 2], list(range(1, 20))], EOD, PREFIX, SUFFIX)
    assert kept.tolist() == [0, 2] and windows.shape == (2, 1 + PREFIX + SUFFIX)
    assert windows[1].tolist() == [EOD, *range(1, 13)]
    empty, none = cut([[1]], EOD, PREFIX, SUFFIX)
    assert empty.shape == (0, 1 + PREFIX + SUFFIX) and none.size == 0


def test_a_recited_document_is_extracted_and_exposed_an_unseen_one_is_not():
    seen, unseen = _documents(8, 1), _documents(40, 2)
    windows, _ = cut(seen, EOD, PREFIX, SUFFIX)
    fresh, _ = cut(unseen, EOD, PREFIX, SUFFIX)
    model = _model()
    before = extraction(model, windows, PREFIX)
    assert not before["exact"].any()

    _train(model, windows, 300)
    after = extraction(model, windows, PREFIX)
    assert after["exact"].all() and (after["matched"] == SUFFIX).all()
    assert after["suffix_loss"].max() < 0.1 < before["suffix_loss"].min()
    controls = extraction(model, fresh, PREFIX)
    assert not controls["exact"].any() and controls["suffix_loss"].min() > 1.0

    # Exposure against the unseen documents: every memorized one is beyond all of them; the
    # unseen ones against the others rank anywhere (about 1.4 bits on average).
    top = math.log2(len(fresh) + 1)
    assert exposure(after["suffix_loss"], controls["suffix_loss"]) == pytest.approx(np.full(len(windows), top))
    reference, probes = controls["suffix_loss"][:20], controls["suffix_loss"][20:]
    assert 0.3 < exposure(probes, reference).mean() < 2.5


def test_one_pass_extraction_equals_greedy_decoding():
    """A partly trained model (some suffixes right, some half right, some wrong): the one-pass
    leading run equals step-by-step greedy decoding's on every window."""
    windows, _ = cut(_documents(24, 3), EOD, PREFIX, SUFFIX)
    model = _model()
    _train(model, windows[:12], 40)
    matched = extraction(model, windows, PREFIX, batch=5)["matched"].tolist()
    assert matched == _greedy_matched(model, windows)
    assert len(set(matched)) > 2  # the check saw more than all-or-nothing


def test_exposure_ranks():
    reference = np.array([1.0, 2.0, 3.0])
    # below all three: rank 1, log2(4); between: rank 2 or 3; above all: rank 4, 0 bits
    assert exposure(np.array([0.5, 1.5, 2.5, 9.0]), reference).tolist() == pytest.approx(
        [2.0, 2.0 - 1.0, 2.0 - math.log2(3), 0.0]
    )
