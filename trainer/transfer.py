"""Transfer to a downstream classification task as a label-efficiency curve.

For a model (a pretrained checkpoint, or the same architecture at random initialization) and a
task (``pipeline.formats.task``: id, text, label, split), the task's train split is cut into a dev
split (fixed by the task's seed, class-balanced) and a labelled pool; at each labelled-set size,
several labelled subsets are drawn from the pool (nested over sizes within a draw, class-balanced,
seeded by the run's seed and the draw, so every model of one seed sees the same draws), and on each:

* **linear probe**: the backbone is frozen; a document's features are its final hidden states
  (after the last LayerNorm) averaged over its tokens; a multinomial logistic regression with an
  L2 penalty is fitted on the standardized features of the labelled examples (full-batch L-BFGS,
  deterministic), its penalty chosen among a few on the dev split, and scored on the test split;
* **fine-tuning**: the whole network plus a linear head on the same pooled features is trained
  with AdamW on the labelled examples (seeded batches; the head takes a 10x learning rate), with a
  linear warmup, at each of a few learning rates; the dev split is scored every few steps, each
  learning rate stops when it has not improved for ``patience`` measurements and keeps its best
  state, the best learning rate is chosen, and that state is scored on the
  test split. Steps are capped by epochs over the labelled examples (at least ``min_steps``, at
  most ``max_steps``);
* **bag of words** (:func:`bag_of_words`, no model): TF-IDF of the words of the same text the
  models read and a logistic regression (scikit-learn), its penalty chosen on the dev split, as a
  reference line a pretrained model should beat.

"Best on the dev split" is the highest dev accuracy, ties broken by the lower dev loss
(:func:`_key`).

Texts are encoded with the model's tokenizer and cut to their first ``max_tokens`` tokens (for a
news article, the headline and the opening paragraphs). Scores are test accuracy and mean
cross-entropy (nats), each size's the mean over its draws (the whole pool is one draw).

The dev split is larger than the smallest labelled sets: it stands for a held-out selection a
practitioner rarely has at 10 labels ("true few-shot", Perez et al. 2021), so the small sizes'
scores are what the best of a few settings gives, not what one could pick blind.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import polars as pl
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from pipeline.formats.task import draw_seed, labelled_subsets, labels, task_splits
from pipeline.formats.tokens import special_ids
from trainer.model import GPT

NO_DEV = {"accuracy": math.nan, "loss": math.nan}  # the dev scores when there is no dev split


@dataclass(frozen=True)
class TransferSettings:
    max_tokens: int = 128  # tokens of each text the classifier reads (its first ones)
    draws: int = 3  # labelled subsets per size (one at the whole pool)
    dev_docs: int = 100  # carved from the train split when the task has no dev split
    dev_seed: int = 0  # which documents the dev split takes (the task's, not the run's)
    probe_l2: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)  # per example, on standardized features
    probe_iterations: int = 200
    bow_c: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)  # scikit-learn's inverse penalty
    finetune_sizes: tuple[int, ...] | None = None  # None: every size; (): no fine-tuning
    finetune_draws: int = 1
    finetune_lrs: tuple[float, ...] = (3e-4, 1e-3)  # backbone; the head takes 10x
    finetune_batch: int = 16
    finetune_epochs: float = 20.0
    finetune_min_steps: int = 20
    finetune_max_steps: int = 120
    finetune_warmup_steps: int = 10
    finetune_eval_every: int = 10
    finetune_patience: int = 3
    finetune_weight_decay: float = 0.01
    eval_batch: int = 64

    def steps(self, examples: int) -> int:
        """Fine-tuning steps for ``examples`` labelled examples: ``finetune_epochs`` passes,
        within ``[finetune_min_steps, finetune_max_steps]``."""
        per_epoch = examples / min(self.finetune_batch, examples)
        return max(self.finetune_min_steps, min(self.finetune_max_steps, math.ceil(self.finetune_epochs * per_epoch)))


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


def read_prefixes(texts: Sequence[str], tokenizer: Tokenizer, max_tokens: int) -> list[str]:
    """The part of each text its first ``max_tokens`` tokens cover: what the models read."""
    cut = []
    for text, encoding in zip(texts, tokenizer.encode_batch(list(texts), add_special_tokens=False), strict=True):
        offsets = encoding.offsets[:max_tokens]
        cut.append(text[: offsets[-1][1]] if offsets else "")
    return cut


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
    """Accuracy, balanced accuracy (the mean over the classes present of each one's recall: what a
    classifier that always answers the majority class cannot inflate) and cross-entropy."""
    right = (logits.argmax(1) == targets).float()
    recalls = [right[targets == c].mean() for c in targets.unique()]
    return {
        "accuracy": float(right.mean()),
        "balanced_accuracy": float(torch.stack(recalls).mean()),
        "loss": float(F.cross_entropy(logits.float(), targets)),
    }


def _test_scores(logits: torch.Tensor, targets: torch.Tensor) -> dict:
    """:func:`_scores` and ``correct``, per test item (in id order) 1 if classified right: what a
    bootstrap over test items resamples."""
    return {**_scores(logits, targets), "correct": (logits.argmax(1) == targets).int().tolist()}


def _key(dev: dict) -> tuple[float, float]:
    """How settings and stopping points are ranked on the dev split: accuracy first, then loss.
    Loss alone would favour a classifier that stays near the uniform guess (its loss is log C with
    any accuracy), which is where a model trained on 10 labels sits when it is unsure."""
    return (-dev["accuracy"], dev["loss"])


def _logistic(x: torch.Tensor, y: torch.Tensor, classes: int, l2: float, iterations: int):
    """A multinomial logistic regression fitted by full-batch L-BFGS (float64): ``(weight, bias)``."""
    weight = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    x64 = x.double()
    optimizer = torch.optim.LBFGS(
        [weight, bias],
        lr=1.0,
        max_iter=iterations,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(x64 @ weight + bias, y) + l2 * (weight**2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return weight.detach(), bias.detach()


def linear_probe(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    dev_x: torch.Tensor | None,
    dev_y: torch.Tensor | None,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    classes: int,
    settings: TransferSettings,
) -> dict:
    """Fit a logistic regression on frozen features at each penalty of ``settings.probe_l2``; score
    the one best on the dev split (:func:`_key`; the first penalty without a dev split) on the test
    split."""
    mean, std = train_x.mean(0), train_x.std(0, unbiased=False).clamp_min(1e-6)

    def scaled(x: torch.Tensor) -> torch.Tensor:
        return ((x - mean) / std).double()

    best = None
    for l2 in settings.probe_l2 if dev_x is not None else settings.probe_l2[:1]:
        weight, bias = _logistic(scaled(train_x), train_y, classes, l2, settings.probe_iterations)
        dev = _scores(scaled(dev_x) @ weight + bias, dev_y) if dev_x is not None else NO_DEV
        if best is None or _key(dev) < _key(best[0]):
            best = (dev, l2, weight, bias)
    dev, l2, weight, bias = best
    return {
        **_test_scores(scaled(test_x) @ weight + bias, test_y),
        "l2": l2,
        "dev_accuracy": dev["accuracy"],
        "dev_loss": dev["loss"],
    }


@torch.no_grad()
def _classify(backbone: GPT, head: torch.nn.Linear, tokens, lengths, batch: int) -> torch.Tensor:
    backbone.eval()
    return torch.cat(
        [head(pooled(backbone, tokens[i : i + batch], lengths[i : i + batch])) for i in range(0, len(tokens), batch)]
    )


def _finetune_once(model: GPT, train, dev, classes: int, lr: float, settings: TransferSettings, seed: int):
    """Fine-tune a copy of ``model`` at one learning rate; ``(backbone, head, dev scores, steps)`` at
    the best dev scores seen (:func:`_key`; the last step's without a dev split)."""
    tokens, lengths, y = train
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    backbone = copy.deepcopy(model)
    head = torch.nn.Linear(backbone.config.n_embd, classes)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    parameters = [*backbone.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(
        [{"params": list(backbone.parameters()), "lr": lr}, {"params": list(head.parameters()), "lr": lr * 10}],
        weight_decay=settings.finetune_weight_decay,
    )
    base = [group["lr"] for group in optimizer.param_groups]
    n, steps = len(y), settings.steps(len(y))
    best, since = (None, None, 0), 0

    def measure(step: int) -> bool:
        """Score the dev split; keep the state if it is the best; True when patience ran out."""
        nonlocal best, since
        if dev is None:
            best = (NO_DEV, (backbone.state_dict(), head.state_dict()), step)
            return False
        scores = _scores(_classify(backbone, head, dev[0], dev[1], settings.eval_batch), dev[2])
        if best[0] is None or _key(scores) < _key(best[0]):
            state = (copy.deepcopy(backbone.state_dict()), copy.deepcopy(head.state_dict()))
            best, since = (scores, state, step), 0
        else:
            since += 1
        return since >= settings.finetune_patience

    for step in range(1, steps + 1):
        backbone.train()
        warm = min(1.0, step / max(settings.finetune_warmup_steps, 1))
        for group, lr0 in zip(optimizer.param_groups, base, strict=True):
            group["lr"] = lr0 * warm
        rows = torch.randint(0, n, (min(settings.finetune_batch, n),), generator=generator)
        loss = F.cross_entropy(head(pooled(backbone, tokens[rows], lengths[rows])), y[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        if (step % settings.finetune_eval_every == 0 or step == steps) and measure(step):
            break
    scores, (backbone_state, head_state), step = best
    backbone.load_state_dict(backbone_state)
    head.load_state_dict(head_state)
    return backbone, head, scores, step


def finetune(model: GPT, train, dev, test, classes: int, settings: TransferSettings, seed: int) -> dict:
    """Fine-tune at each learning rate of ``settings.finetune_lrs`` (the first alone without a dev
    split); score the one best on the dev split (:func:`_key`) on the test split. ``train``, ``dev``
    and ``test`` are ``(tokens, lengths, labels)``; ``dev`` may be None."""
    best = None
    for lr in settings.finetune_lrs if dev is not None else settings.finetune_lrs[:1]:
        backbone, head, scores, step = _finetune_once(model, train, dev, classes, lr, settings, seed)
        if best is None or _key(scores) < _key(best[2]):
            best = (backbone, head, scores, step, lr)
    backbone, head, dev_scores, step, lr = best
    logits = _classify(backbone, head, test[0], test[1], settings.eval_batch)
    return {
        **_test_scores(logits, test[2]),
        "lr": lr,
        "steps": step,
        "dev_accuracy": dev_scores["accuracy"],
        "dev_loss": dev_scores["loss"],
    }


def _mean_over_draws(draws: list[dict]) -> dict:
    """A size's scores: accuracy, loss and each test item's share of draws that got it right
    (``correct``) as means over the draws, and the draws without their per-item lists."""
    correct = [d.pop("correct") for d in draws]
    return {
        "n": draws[0]["n"],
        "accuracy": sum(d["accuracy"] for d in draws) / len(draws),
        "balanced_accuracy": sum(d["balanced_accuracy"] for d in draws) / len(draws),
        "loss": sum(d["loss"] for d in draws) / len(draws),
        "correct": [sum(column) / len(draws) for column in zip(*correct, strict=True)],
        "draws": draws,
    }


def _draws(pool: pl.DataFrame, sizes: Sequence[int], seed: int, settings: TransferSettings, score) -> dict:
    """``{size: mean over draws}`` of ``score(draw, size, subset)`` (None: not scored) on the labelled
    subsets of the ``pool`` in each draw; the whole pool is one draw."""
    scored: dict[str, list[dict]] = {}
    for draw in range(settings.draws):
        for size, subset in labelled_subsets(pool, sizes, draw_seed(seed, draw)).items():
            if draw > 0 and subset.height == pool.height:
                continue  # every draw of the whole pool is the same set
            result = score(draw, size, subset)
            if result is not None:
                scored.setdefault(str(size), []).append({"draw": draw, "n": int(subset.height), **result})
    return {size: _mean_over_draws(draws) for size, draws in scored.items()}


def _described(settings: TransferSettings, classes: list[str], pool, dev, test, **curves) -> dict:
    """A transfer result: its settings, the classes, the split sizes, the lines to read accuracy
    against (chance, 1 / classes; the majority class's share of the test split, what always
    answering it scores) and the curves."""
    return {
        "settings": asdict(settings),
        "labels": classes,
        "pool_examples": int(pool.height),
        "dev_examples": int(dev.height),
        "test_examples": int(test.height),
        "chance": 1.0 / len(classes),
        "majority": float(test["label"].value_counts()["count"].max() / test.height),
        **curves,
    }


def evaluate_transfer(
    model: GPT,
    tokenizer: Tokenizer,
    task: pl.DataFrame,
    sizes: Sequence[int],
    seed: int,
    settings: TransferSettings = TransferSettings(),
) -> dict:
    """Probe (and fine-tune) ``model`` on ``task`` at each labelled-set size, over the draws.

    Returns ``{"settings", "labels", "dev_examples", "test_examples", "probe": {size: {"n",
    "accuracy", "loss", "draws": [...]}}, "finetune": {...}}`` with sizes as strings (JSON keys);
    size 0 means the whole labelled pool."""
    classes = labels(task)
    index = {name: i for i, name in enumerate(classes)}
    pool, dev, test = task_splits(task, settings.dev_docs, settings.dev_seed)

    def encoded(frame: pl.DataFrame):
        if frame.height == 0:
            return None
        tokens, lengths = encode_texts(frame["text"].to_list(), tokenizer, settings.max_tokens)
        return tokens, lengths, torch.tensor([index[name] for name in frame["label"]], dtype=torch.long)

    pool_data, dev_data, test_data = encoded(pool), encoded(dev), encoded(test)
    position = {doc_id: i for i, doc_id in enumerate(pool["id"])}
    torch.manual_seed(seed)
    pool_x, dev_x, test_x = (
        None if data is None else features(model, data[0], data[1], settings.eval_batch)
        for data in (pool_data, dev_data, test_data)
    )
    dev_y = None if dev_data is None else dev_data[2]
    finetune_sizes = set(sizes if settings.finetune_sizes is None else settings.finetune_sizes)

    def rows_of(subset: pl.DataFrame) -> torch.Tensor:
        return torch.tensor([position[doc_id] for doc_id in subset["id"]], dtype=torch.long)

    def probe(draw: int, size: int, subset: pl.DataFrame) -> dict:
        rows = rows_of(subset)
        return linear_probe(
            pool_x[rows], pool_data[2][rows], dev_x, dev_y, test_x, test_data[2], len(classes), settings
        )

    def tune(draw: int, size: int, subset: pl.DataFrame) -> dict | None:
        if size not in finetune_sizes or draw >= settings.finetune_draws:
            return None
        rows = rows_of(subset)
        train = (pool_data[0][rows], pool_data[1][rows], pool_data[2][rows])
        return finetune(model, train, dev_data, test_data, len(classes), settings, draw_seed(seed, draw))

    return _described(
        settings,
        classes,
        pool,
        dev,
        test,
        probe=_draws(pool, sizes, seed, settings, probe),
        finetune=_draws(pool, sizes, seed, settings, tune) if finetune_sizes else {},
    )


def bag_of_words(tokenizer: Tokenizer, task: pl.DataFrame, sizes: Sequence[int], seed: int, settings) -> dict:
    """The reference line: TF-IDF over the words of what the models read (each text's first
    ``max_tokens`` tokens) and a logistic regression, its inverse penalty C chosen among
    ``settings.bow_c`` on the dev split, on the same draws as :func:`evaluate_transfer` at ``seed``.
    Returns ``{"settings", "labels", ..., "bow": {size: {"n", "accuracy", "loss", "draws"}}}``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    classes = labels(task)
    index = {name: i for i, name in enumerate(classes)}
    pool, dev, test = task_splits(task, settings.dev_docs, settings.dev_seed)
    text = {
        frame_id: cut
        for frame in (pool, dev, test)
        for frame_id, cut in zip(
            frame["id"], read_prefixes(frame["text"].to_list(), tokenizer, settings.max_tokens), strict=True
        )
    }

    def targets(frame: pl.DataFrame) -> torch.Tensor:
        return torch.tensor([index[name] for name in frame["label"]], dtype=torch.long)

    def score(draw: int, size: int, subset: pl.DataFrame) -> dict:
        vectorizer = TfidfVectorizer(lowercase=True, sublinear_tf=True)
        x = vectorizer.fit_transform([text[i] for i in subset["id"]])
        y = targets(subset).numpy()

        def logits(model, frame: pl.DataFrame) -> torch.Tensor:
            # a column per class; one absent from the labelled subset gets probability 1e-6
            out = torch.full((frame.height, len(classes)), math.log(1e-6), dtype=torch.float64)
            out[:, torch.as_tensor(model.classes_)] = torch.as_tensor(
                model.predict_log_proba(vectorizer.transform([text[i] for i in frame["id"]]))
            )
            return out

        best = None
        for c in settings.bow_c if dev.height else settings.bow_c[:1]:
            model = LogisticRegression(C=c, max_iter=1000).fit(x, y)
            scores = _scores(logits(model, dev), targets(dev)) if dev.height else NO_DEV
            if best is None or _key(scores) < _key(best[0]):
                best = (scores, c, model)
        scores, c, model = best
        return {
            **_test_scores(logits(model, test), targets(test)),
            "c": c,
            "dev_accuracy": scores["accuracy"],
            "dev_loss": scores["loss"],
        }

    return _described(settings, classes, pool, dev, test, bow=_draws(pool, sizes, seed, settings, score))
