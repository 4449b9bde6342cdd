"""Per-document held-out scoring: each token of each document predicted once, from its own
document's context, whatever the batch; and bits per byte per language from those scores."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import torch
import torch.nn.functional as F

from experiment.results import language_metrics
from trainer.model import GPT, GPTConfig
from trainer.scoring import document_losses

VOCAB, EOD, BLOCK = 50, 0, 8


def _model() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=VOCAB, block_size=BLOCK, n_layer=1, n_head=2, n_embd=16)).eval()


@torch.no_grad()
def _one_by_one(model: GPT, ids: list[int]) -> float:
    """The document's summed nats, scored alone: windows of BLOCK predicted tokens."""
    sequence, total = [EOD, *ids], 0.0
    for start in range(0, len(sequence) - 1, BLOCK):
        piece = torch.tensor([sequence[start : start + BLOCK + 1]])
        logits, _ = model(piece[:, :-1])
        total += float(F.cross_entropy(logits[0], piece[0, 1:], reduction="sum"))
    return total


def test_every_token_scored_once_whatever_the_batch():
    model = _model()
    rng = np.random.default_rng(0)
    documents = [rng.integers(1, VOCAB, size=n).tolist() for n in (3, 8, 9, 17, 1, 30)] + [[]]
    nats, tokens = document_losses(model, documents, EOD, batch=3)
    assert tokens.tolist() == [len(d) for d in documents]
    assert nats[-1] == 0.0
    expected = [_one_by_one(model, d) for d in documents[:-1]]
    assert nats[:-1] == pytest.approx(expected, rel=1e-5)
    again, _ = document_losses(model, documents, EOD, batch=64)
    assert again == pytest.approx(nats, rel=1e-5)


def test_bits_per_byte_per_language_and_the_macro_averages():
    frame = pl.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e"],
            "set": ["news", "web", "web", "web", "junk"],
            "lang": ["en", "en", "fr", "sw", "en"],
            "clean": [True, True, True, True, False],
            "bytes": [100, 300, 50, 10, 999],
            "tokens": [30, 90, 20, 5, 300],
            "nats": [80.0, 200.0, 60.0, 20.0, 1.0],
        }
    )
    metrics = language_metrics(frame, ["en"])
    assert metrics["lang_bpb/en"] == pytest.approx(280 / math.log(2) / 400)  # the junk is not counted
    assert metrics["lang_bpb/fr"] == pytest.approx(60 / math.log(2) / 50)
    assert metrics["lang_bpb/low-resource"] == pytest.approx((metrics["lang_bpb/fr"] + metrics["lang_bpb/sw"]) / 2)
    assert metrics["lang_bpb/high-resource"] == metrics["lang_bpb/en"]
