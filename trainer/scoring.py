"""Per-document loss on held-out text: every document scored on its own, whole.

The trainer's evaluation reads each held-out group as one stream of documents and stops after
``eval_tokens``; that is right for curves during training, but it gives one number per group. To
report bits per byte per language, and to resample documents for intervals that count test-set
variation, every document is scored apart here: the end-of-document token that precedes every
document in training, then the document's tokens, cut into windows of ``block_size`` predicted
tokens (each window after the first starts from the previous window's last token, so every token
is predicted once, with up to ``block_size`` tokens of context from its own document).

Everything runs in batches without gradients and is deterministic.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from trainer.model import GPT

IGNORE = -100


def _windows(token_lists: list[list[int]], eod: int, block_size: int) -> list[tuple[int, list[int]]]:
    """``(document index, tokens)`` per window: ``[eod, *ids]`` cut at stride ``block_size`` into
    pieces of at most ``block_size + 1`` tokens (inputs and targets overlap by one)."""
    windows = []
    for index, ids in enumerate(token_lists):
        sequence = [eod, *ids]
        for start in range(0, len(sequence) - 1, block_size):
            windows.append((index, sequence[start : start + block_size + 1]))
    return windows


@torch.no_grad()
def document_losses(
    model: GPT, token_lists: list[list[int]], eod: int, batch: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """``(nats, tokens)`` per document: the summed cross-entropy of its tokens (natural log) and how
    many were predicted (its token count; 0 and 0.0 for an empty document)."""
    model.eval()
    block = model.config.block_size
    windows = _windows(token_lists, eod, block)
    nats = np.zeros(len(token_lists), dtype=np.float64)
    tokens = np.zeros(len(token_lists), dtype=np.int64)
    order = sorted(range(len(windows)), key=lambda i: -len(windows[i][1]))  # similar lengths batch together
    for start in range(0, len(order), batch):
        chosen = [windows[i] for i in order[start : start + batch]]
        width = max(len(piece) for _, piece in chosen) - 1
        inputs = torch.full((len(chosen), width), eod, dtype=torch.long)
        targets = torch.full((len(chosen), width), IGNORE, dtype=torch.long)
        for row, (_, piece) in enumerate(chosen):
            inputs[row, : len(piece) - 1] = torch.tensor(piece[:-1])
            targets[row, : len(piece) - 1] = torch.tensor(piece[1:])
        logits, _ = model(inputs)
        # Flattened to (rows, vocab): 3x faster on a CPU than the class axis transposed to dim 1.
        loss = F.cross_entropy(
            logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="none"
        ).view(targets.shape)
        per_window = loss.sum(1).double().numpy()
        counted = (targets != IGNORE).sum(1).numpy()
        for row, (index, _) in enumerate(chosen):
            nats[index] += per_window[row]
            tokens[index] += counted[row]
    return nats, tokens
