"""Memorization of training text, measured as extraction (Carlini et al. 2022, "Quantifying
Memorization Across Neural Language Models"; Lee et al. 2022, "Deduplicating Training Data Makes
Language Models Better") and exposure (Carlini et al. 2019, "The Secret Sharer").

A document is cut into a prefix of ``prefix`` tokens (after the end-of-document token that comes
before every document in training) and the ``suffix`` tokens that follow. Given the prefix:

* **matched**: how many leading tokens of the suffix greedy decoding reproduces;
* **exact**: greedy decoding reproduces the whole suffix, token for token (extractable);
* **suffix loss**: the mean cross-entropy (nats per token) of the true suffix, teacher-forced;
* **exposure**: how unusually likely the model finds the true suffix, in bits, against texts of
  the same kind it never trained on (:func:`exposure`).

Greedy decoding needs no loop: while the leading tokens decoded so far equal the true suffix, the
decoder's context is the teacher-forced one, so the next greedy token is the argmax of the
teacher-forced logits at that position. ``matched`` is therefore the length of the leading run of
positions whose argmax is the true token, from one forward pass (a test checks it against
step-by-step decoding).

Everything runs in batches without gradients and is deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from trainer.model import GPT


def cut(token_lists: list[list[int]], eod: int, prefix: int, suffix: int) -> tuple[torch.Tensor, np.ndarray]:
    """``(windows (N, 1 + prefix + suffix), kept)``: each document's end-of-document token, its first
    ``prefix`` tokens and the ``suffix`` after them; ``kept`` holds the indices of the documents
    long enough to cut (the others are left out, never padded)."""
    need = prefix + suffix
    kept = np.array([i for i, ids in enumerate(token_lists) if len(ids) >= need], dtype=np.int64)
    windows = torch.tensor([[eod, *token_lists[i][:need]] for i in kept], dtype=torch.long).reshape(len(kept), need + 1)
    return windows, kept


@torch.no_grad()
def extraction(model: GPT, windows: torch.Tensor, prefix: int, batch: int = 128) -> dict[str, np.ndarray]:
    """Per window (from :func:`cut`): ``matched`` (leading suffix tokens greedy decoding gets
    right), ``exact`` (all of them) and ``suffix_loss`` (nats per token, teacher-forced)."""
    model.eval()
    suffix = windows.shape[1] - 1 - prefix
    matched, loss = [], []
    for start in range(0, len(windows), batch):
        part = windows[start : start + batch]
        logits, _ = model(part[:, :-1])
        logits = logits[:, prefix:].float()  # the positions that predict the suffix
        targets = part[:, 1 + prefix :]
        right = (logits.argmax(-1) == targets).long()
        matched.append(right.cumprod(1).sum(1).numpy())
        loss.append(
            F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            .view(targets.shape)
            .mean(1)
            .numpy()
        )
    if not matched:
        return {"exact": np.zeros(0, bool), "matched": np.zeros(0, np.int64), "suffix_loss": np.zeros(0)}
    lead = np.concatenate(matched)
    return {"exact": lead == suffix, "matched": lead, "suffix_loss": np.concatenate(loss)}


def exposure(losses: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per loss, ``log2(R + 1) - log2(rank)``, rank being 1 + the number of the ``R`` reference
    losses below it: 0 bits for a suffix less likely than every reference, ``log2(R + 1)`` for one
    more likely than all of them.

    Carlini et al. (2019) rank a canary's secret among every other value its template could hold,
    after the same prefix. Here a canary's prefix is as random as its suffix, so the reference is
    the suffix loss of control canaries (made alike, trained on by no model) after their own
    prefixes: exposure says how far into the tail of never-seen canaries a canary's likelihood
    lies. A canary the model never saw has about 1.4 bits on average (rank uniform); the ceiling
    is ``log2(R + 1)``."""
    reference = np.sort(np.asarray(reference, dtype=np.float64))
    ranks = 1 + np.searchsorted(reference, np.asarray(losses, dtype=np.float64), side="left")
    return math.log2(len(reference) + 1) - np.log2(ranks)
