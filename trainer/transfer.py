"""Transfer to a downstream classification task, by the classic pretrain-then-adapt protocol.

For a model (a pretrained checkpoint, or the same architecture at random initialization) and a
task (``pipeline.downstream``: id, text, label, split), at each labelled-set size:

* **linear probe**: the backbone is frozen; a document's features are its final hidden states
  (after the last LayerNorm) averaged over its tokens; a multinomial logistic regression with an
  L2 penalty is fitted on the standardized features of the labelled examples (full-batch L-BFGS,
  deterministic) and scored on the test split;
* **fine-tuning**: the whole network plus a linear head on the same pooled features is trained
  with AdamW for a fixed number of steps on the labelled examples (seeded batches; the head takes
  a 10x learning rate), and scored on the test split.

Texts are encoded with the model's tokenizer and cut to their first ``max_tokens`` tokens (for a
news article, the headline and the opening paragraphs). Scores are test accuracy and mean
cross-entropy (nats). The labelled subsets are nested and class-balanced
(:func:`pipeline.downstream.labelled_subsets`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import polars as pl
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from pipeline.downstream import labelled_subsets, labels
from pipeline.tokenize import special_ids
from trainer.model import GPT


@dataclass(frozen=True)
class TransferSettings:
    max_tokens: int = 128  # tokens of each text the classifier reads (its first ones)
    probe_l2: float = 1e-2  # L2 penalty of the probe, per example, on standardized features
    probe_iterations: int = 200
    finetune_steps: int = 60
    finetune_batch: int = 16
    finetune_lr: float = 3e-4  # backbone; the head takes 10x
    finetune_weight_decay: float = 0.01
    eval_batch: int = 64


def encode_texts(texts: Sequence[str], tokenizer: Tokenizer, max_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens (N, T), lengths (N,))``: each text's first ``max_tokens`` tokens, right-padded with
    the padding id to the longest (T <= max_tokens); an empty encoding gets one padding token."""
    pad = special_ids(tokenizer)["pad"]
    encoded = [e.ids[:max_tokens] or [pad] for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]
    width = max(len(ids) for ids in encoded)
    tokens = torch.full((len(encoded), width), pad, dtype=torch.long)
    for row, ids in enumerate(encoded):
        tokens[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return tokens, torch.tensor([len(ids) for ids in encoded], dtype=torch.long)


def pooled(model: GPT, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean of the final hidden states over each text's real tokens, ``(N, n_embd)``."""
    hidden = model.hidden_states(tokens)
    mask = (torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]).to(hidden.dtype)
    return (hidden * mask[..., None]).sum(1) / lengths[:, None].to(hidden.dtype)


@torch.no_grad()
def features(model: GPT, tokens: torch.Tensor, lengths: torch.Tensor, batch: int = 64) -> torch.Tensor:
    model.eval()
    return torch.cat(
        [pooled(model, tokens[i : i + batch], lengths[i : i + batch]) for i in range(0, len(tokens), batch)]
    )


def _scores(logits: torch.Tensor, targets: torch.Tensor) -> dict:
    return {
        "accuracy": float((logits.argmax(1) == targets).float().mean()),
        "loss": float(F.cross_entropy(logits, targets)),
    }


def linear_probe(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    classes: int,
    settings: TransferSettings,
) -> dict:
    """Fit a logistic regression on frozen features; score it on the test split."""
    mean, std = train_x.mean(0), train_x.std(0, unbiased=False).clamp_min(1e-6)
    x, test = (train_x - mean) / std, (test_x - mean) / std
    weight = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    x64, y = x.double(), train_y
    optimizer = torch.optim.LBFGS(
        [weight, bias],
        lr=1.0,
        max_iter=settings.probe_iterations,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(x64 @ weight + bias, y) + settings.probe_l2 * (weight**2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return _scores((test.double() @ weight + bias).float(), test_y)


def finetune(
    model: GPT,
    train_tokens: torch.Tensor,
    train_lengths: torch.Tensor,
    train_y: torch.Tensor,
    test_tokens: torch.Tensor,
    test_lengths: torch.Tensor,
    test_y: torch.Tensor,
    classes: int,
    settings: TransferSettings,
    seed: int,
) -> dict:
    """Fine-tune a copy of ``model`` with a new linear head; score it on the test split."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    backbone = copy.deepcopy(model)
    backbone.train()
    head = torch.nn.Linear(backbone.config.n_embd, classes)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for p in backbone.parameters()], "lr": settings.finetune_lr},
            {"params": list(head.parameters()), "lr": settings.finetune_lr * 10},
        ],
        weight_decay=settings.finetune_weight_decay,
    )
    n = len(train_y)
    for _ in range(settings.finetune_steps):
        rows = torch.randint(0, n, (min(settings.finetune_batch, n),), generator=generator)
        logits = head(pooled(backbone, train_tokens[rows], train_lengths[rows]))
        loss = F.cross_entropy(logits, train_y[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([*backbone.parameters(), *head.parameters()], 1.0)
        optimizer.step()
    backbone.eval()
    with torch.no_grad():
        logits = torch.cat(
            [
                head(
                    pooled(
                        backbone, test_tokens[i : i + settings.eval_batch], test_lengths[i : i + settings.eval_batch]
                    )
                )
                for i in range(0, len(test_y), settings.eval_batch)
            ]
        )
    return _scores(logits, test_y)


def evaluate_transfer(
    model: GPT,
    tokenizer: Tokenizer,
    task: pl.DataFrame,
    sizes: Sequence[int],
    seed: int,
    settings: TransferSettings = TransferSettings(),
    finetuning: bool = True,
) -> dict:
    """Probe (and fine-tune) ``model`` on ``task`` at each labelled-set size.

    Returns ``{"settings", "labels", "test_examples", "probe": {size: {"n", "accuracy", "loss"}},
    "finetune": {...}}`` with sizes as strings (JSON keys); size 0 means the whole train split."""
    classes = labels(task)
    index = {name: i for i, name in enumerate(classes)}
    test = task.filter(pl.col("split") == "test").sort("id")
    test_tokens, test_lengths = encode_texts(test["text"].to_list(), tokenizer, settings.max_tokens)
    test_y = torch.tensor([index[name] for name in test["label"]], dtype=torch.long)
    subsets = labelled_subsets(task, sizes, seed)
    largest = max(subsets.values(), key=lambda frame: frame.height)
    all_tokens, all_lengths = encode_texts(largest["text"].to_list(), tokenizer, settings.max_tokens)
    position = {doc_id: i for i, doc_id in enumerate(largest["id"])}
    torch.manual_seed(seed)
    train_features = features(model, all_tokens, all_lengths, settings.eval_batch)
    test_features = features(model, test_tokens, test_lengths, settings.eval_batch)
    results = {
        "settings": asdict(settings),
        "labels": classes,
        "test_examples": int(test.height),
        "probe": {},
        "finetune": {},
    }
    for size, subset in subsets.items():
        rows = torch.tensor([position[doc_id] for doc_id in subset["id"]], dtype=torch.long)
        y = torch.tensor([index[name] for name in subset["label"]], dtype=torch.long)
        results["probe"][str(size)] = {
            "n": int(subset.height),
            **linear_probe(train_features[rows], y, test_features, test_y, len(classes), settings),
        }
        if finetuning:
            results["finetune"][str(size)] = {
                "n": int(subset.height),
                **finetune(
                    model,
                    all_tokens[rows],
                    all_lengths[rows],
                    y,
                    test_tokens,
                    test_lengths,
                    test_y,
                    len(classes),
                    settings,
                    seed,
                ),
            }
    return results


def scores_summary(results: dict) -> dict[str, float]:
    """Flat ``{"probe_acc@50": ..., "finetune_loss@all": ...}`` for tables and reports."""
    flat = {}
    for method in ("probe", "finetune"):
        for size, scores in results.get(method, {}).items():
            label = "all" if size == "0" else size
            flat[f"{method}_acc@{label}"] = scores["accuracy"]
            flat[f"{method}_loss@{label}"] = scores["loss"]
    return flat
