"""Multiple-choice items scored by likelihood: each choice's summed log-probability as the
continuation of its context (the cloze formulation of OLMES and lighteval, the one small models
can do), and the metrics the field reads from it.

Encoding follows lm-evaluation-harness, so that its numbers and these can be compared: trailing
spaces of the context move to the start of the continuation, the pair is encoded whole, and the
continuation's tokens are those after the context's own. The model sees the end-of-document token
first, as every document starts in training. A context too long for the model's window is cut
from the left (as lm-eval does), and the results count how many items were cut; a continuation
longer than the window is an error naming the item.

Per task (DCLM's CORE, OLMES, DataDecide):

    acc            the gold choice has the highest summed log-likelihood (a tie goes to the
                   first of the tied choices)
    acc_norm       ... the highest log-likelihood per byte of the choice (lengths differ)
    acc_pmi        ... the highest log-likelihood over the choice's own without the context (the
                   pointwise mutual information, lm-eval's acc_mutual_info; Holtzman et al. 2021):
                   what is left when a model's preference for some answers whatever the item
                   (a label's prior) is taken out
    centred_acc    (acc - chance) / (1 - chance), chance = the mean of 1 / choices over items;
                   0 is guessing, 1 is every item right (centred_acc_norm likewise)
    gold_bpb       bits per byte of the gold choice, -log2 p(gold | context) / bytes: the
                   continuous measure, which ranks data recipes more reliably than accuracy at
                   small scale (DataDecide); lower is better
    margin_bpb     the best wrong choice's bits per byte minus the gold's: above 0 when the gold
                   choice is likelier per byte than every wrong one
    majority       the accuracy of always giving the most common right answer (the majority
                   class, where the choices are a fixed set of labels; near 0 where every item
                   has answers of its own)
    top_answer_share  how often the model gave its own most common answer: 1.0 is one answer
                   whatever the item, a model that knows only the labels' prior

with 95% intervals over items (Wilson's score interval for the accuracies, the normal one with
the standard error of the mean for the continuous measures). Over tasks: ``core`` (the mean centred
accuracy, per-byte normalized, CORE's aggregate) and the mean ``gold_bpb``.

Every row runs without gradients, in batches of similar lengths, deterministically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from pipeline.formats.choices import read_choice_items
from pipeline.formats.tokens import file_sha256, shard_encoder, special_ids
from trainer.model import GPT

Z95 = 1.959963984540054


class ChoiceScoringError(ValueError):
    """An item the model cannot score (its continuation does not fit the window); one line."""


def encode_pair(
    tokenizer: Tokenizer, context: str, continuation: str, known: dict | None = None
) -> tuple[list[int], list[int]]:
    """The context's and the continuation's token ids, as lm-evaluation-harness splits them;
    ``known`` keeps contexts already encoded (an item's choices share one)."""
    spaces = len(context) - len(context.rstrip(" "))
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer.encode(context + continuation, add_special_tokens=False).ids
    known = {} if known is None else known
    if context not in known:
        known[context] = tokenizer.encode(context, add_special_tokens=False).ids if context else []
    context_ids = known[context]
    continuation_ids = whole[len(context_ids) :]
    if not continuation_ids:  # the pair merged into the context's last token
        continuation_ids = tokenizer.encode(continuation, add_special_tokens=False).ids
    return context_ids, continuation_ids


def _encoded(
    tokenizer: Tokenizer, pairs: list[tuple[str, str]], block_size: int, label
) -> list[tuple[list[int], int, bool]]:
    """``(tokens, continuation length, cut)`` per ``(context, continuation)`` pair: ``[eod, context,
    continuation]`` cut from the left to ``block_size + 1`` tokens (``cut`` when it was longer). A
    continuation longer than the window is a :class:`ChoiceScoringError` naming ``label(k)``."""
    eod = special_ids(tokenizer)["eod"]
    encoder = shard_encoder(tokenizer)  # a literal "<|endoftext|>" is text, as in the shards
    rows: list[tuple[list[int], int, bool]] = []
    known: dict[str, list[int]] = {}
    for k, (context, continuation) in enumerate(pairs):
        context_ids, continuation_ids = encode_pair(encoder, context, continuation, known)
        if len(continuation_ids) > block_size:
            raise ChoiceScoringError(
                f"{label(k)} is {len(continuation_ids)} tokens, longer than the model's window of "
                f"{block_size}; shorten it"
            )
        tokens = [eod, *context_ids, *continuation_ids]
        rows.append((tokens[-(block_size + 1) :], len(continuation_ids), len(tokens) > block_size + 1))
    return rows


@dataclass
class _Row:
    """One row of a forward pass: its input tokens, and per request it scores the row positions
    whose outputs predict the request's continuation tokens and those tokens. A packed row holds
    one context and several continuations after it (``prefix`` tokens shared, then each
    continuation's block, ``blocks``); a plain row one request, causal from position 0."""

    tokens: list[int]
    reads: list[tuple[int, list[int], list[int]]]
    prefix: int = 0
    blocks: list[tuple[int, int]] | None = None


def _plain(index: int, tokens: list[int], length: int) -> _Row:
    return _Row(tokens[:-1], [(index, list(range(len(tokens) - 1 - length, len(tokens) - 1)), tokens[-length:])])


def _packed(indices: list[int], requests: list[tuple[list[int], int, bool]]) -> _Row:
    """The requests (of one context, none cut) in one row: ``[eod, context]`` once, then each
    continuation but its last token, each at the positions it has alone and seeing only the
    context and itself. The context's last output predicts every continuation's first token."""
    first = requests[indices[0]]
    prefix = first[0][: len(first[0]) - first[1]]
    tokens, reads, blocks = list(prefix), [], []
    for index in indices:
        continuation = requests[index][0][len(prefix) :]
        start = len(tokens)
        tokens += continuation[:-1]
        blocks.append((start, len(tokens)))
        reads.append((index, [len(prefix) - 1, *range(start, len(tokens))], continuation))
    return _Row(tokens, reads, len(prefix), blocks)


def _pieces(indices: list[int], requests: list[tuple[list[int], int, bool]], most: int) -> list[list[int]]:
    """``indices`` (requests of one context) in runs whose packed row stays within ``most``
    tokens (the context and at least one continuation each): many short continuations of one
    context, as the choices scored without any, do not make one row of quadratic attention."""
    pieces, current, size = [], [], 0
    for index in indices:
        tokens, length, _ = requests[index]
        if current and size + length - 1 > most:
            pieces.append(current)
            current, size = [], 0
        if not current:
            size = len(tokens) - length
        current.append(index)
        size += length - 1
    return pieces + ([current] if current else [])


def _layout(rows: list[_Row], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions (B, width) and the attention mask (B, 1, width, width) of packed rows; padding
    sees only itself."""
    positions = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), 1, width, width, dtype=torch.bool)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    for line, row in enumerate(rows):
        mask[line, 0, : row.prefix, : row.prefix] = causal[: row.prefix, : row.prefix]
        positions[line, : row.prefix] = torch.arange(row.prefix)
        for start, end in row.blocks:
            mask[line, 0, start:end, : row.prefix] = True
            mask[line, 0, start:end, start:end] = causal[: end - start, : end - start]
            positions[line, start:end] = torch.arange(row.prefix, row.prefix + end - start)
        pad = torch.arange(len(row.tokens), width)
        mask[line, 0, pad, pad] = True
    return positions, mask


def _score_rows(model: GPT, rows: list[_Row], eod: int, budget: int, loglik: np.ndarray, greedy: np.ndarray) -> None:
    """Run ``rows`` in batches of about ``budget`` tokens, longest first, and fill each request's
    summed log-likelihood and greedy flag. The head and the softmax run only where a continuation
    token is predicted: most positions are context, and the head over the vocabulary costs as
    much as the blocks."""
    device = next(model.parameters()).device
    rows = sorted(rows, key=lambda row: -len(row.tokens))
    start = 0
    while start < len(rows):
        width = len(rows[start].tokens)
        chosen = rows[start : start + max(1, budget // max(width, 1))]
        start += len(chosen)
        inputs = torch.full((len(chosen), width), eod, dtype=torch.long)
        for line, row in enumerate(chosen):
            inputs[line, : len(row.tokens)] = torch.tensor(row.tokens)
        if chosen[0].blocks is None:
            hidden = model.hidden_states(inputs.to(device))
        else:
            positions, mask = _layout(chosen, width)
            hidden = model.hidden_states(inputs.to(device), positions.to(device), mask.to(device))
        reads = [(line, read) for line, row in enumerate(chosen) for read in row.reads]
        lines = torch.cat([torch.full((len(read[1]),), line) for line, read in reads])
        at = torch.cat([torch.tensor(read[1]) for _, read in reads])
        targets = torch.cat([torch.tensor(read[2]) for _, read in reads])
        logprobs = F.log_softmax(model.lm_head(hidden[lines.to(device), at.to(device)]).float(), dim=-1).cpu()
        picked = logprobs[torch.arange(len(targets)), targets].double()
        hits = logprobs.argmax(-1) == targets
        offset = 0
        for _, (index, _, tokens) in reads:
            loglik[index] = picked[offset : offset + len(tokens)].sum().item()
            greedy[index] = bool(hits[offset : offset + len(tokens)].all())
            offset += len(tokens)


@torch.no_grad()
def pair_loglikelihoods(
    model: GPT, tokenizer: Tokenizer, pairs: list[tuple[str, str]], batch: int = 32, label=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per ``(context, continuation)`` pair: the continuation's summed natural log-probability
    given the context, whether greedy decoding would produce it (every token the argmax), its
    tokens, and whether the context was cut from the left to fit the window. Pairs that share a
    context (an item's choices) run it once, packed in one row (:func:`_packed`), unless one of
    them had to be cut; rows of similar length are batched together, about ``batch`` windows of
    tokens at a time. ``label(k)`` names pair k in an error."""
    model.eval()
    block = model.config.block_size
    eod = special_ids(tokenizer)["eod"]
    requests = _encoded(tokenizer, pairs, block, label or (lambda k: f"continuation {k}"))
    shared: dict[tuple, list[int]] = {}
    for index, ((context, _), (tokens, length, cut)) in enumerate(zip(pairs, requests)):
        key = (context, tuple(tokens[: len(tokens) - length])) if not cut else ("cut", index)
        shared.setdefault(key, []).append(index)
    groups = [piece for indices in shared.values() for piece in _pieces(indices, requests, 2 * block)]
    packed = [_packed(indices, requests) for indices in groups if len(indices) > 1]
    plain = [_plain(i, *requests[i][:2]) for indices in groups if len(indices) == 1 for i in indices]
    loglik = np.zeros(len(requests), dtype=np.float64)
    greedy = np.zeros(len(requests), dtype=bool)
    _score_rows(model, plain, eod, batch * block, loglik, greedy)
    _score_rows(model, packed, eod, batch * block, loglik, greedy)
    lengths = np.array([r[1] for r in requests], dtype=np.int64)
    cut = np.array([r[2] for r in requests], dtype=bool)
    return loglik, greedy, lengths, cut


def choice_loglikelihoods(model: GPT, tokenizer: Tokenizer, items: pl.DataFrame, batch: int = 32) -> pl.DataFrame:
    """One row per item and choice: ``row`` (the item's), ``choice``, ``loglik`` (summed natural
    log-probability of the choice's tokens given the context), ``unconditional`` (the same with no
    context: after the end-of-document token alone, each distinct choice scored once), ``tokens``,
    ``bytes`` (UTF-8 bytes of the choice as written), ``truncated`` (the context was cut from the
    left)."""
    where = [
        (row, choice, item, context, text)
        for row, (item, context, choices) in enumerate(items.select("id", "context", "choices").iter_rows())
        for choice, text in enumerate(choices)
    ]
    loglik, _, lengths, cut = pair_loglikelihoods(
        model,
        tokenizer,
        [(context, text) for *_, context, text in where],
        batch,
        label=lambda k: f"item {where[k][2]!r}: choice {where[k][1]}",
    )
    requests = [(row, choice, None, int(n), bool(c)) for (row, choice, *_), n, c in zip(where, lengths, cut)]
    distinct = list(dict.fromkeys(text for *_, text in where))
    alone, _, _, _ = pair_loglikelihoods(model, tokenizer, [("", text) for text in distinct], batch)
    unconditional = dict(zip(distinct, alone.tolist()))
    choices = items["choices"].to_list()
    return pl.DataFrame(
        {
            "row": [r[0] for r in requests],
            "choice": [r[1] for r in requests],
            "loglik": loglik,
            "unconditional": [unconditional[text] for *_, text in where],
            "tokens": [r[3] for r in requests],
            "bytes": [len(choices[r[0]][r[1]].encode("utf-8")) for r in requests],
            "truncated": [r[4] for r in requests],
        },
        schema={
            "row": pl.Int64,
            "choice": pl.Int64,
            "loglik": pl.Float64,
            "unconditional": pl.Float64,
            "tokens": pl.Int64,
            "bytes": pl.Int64,
            "truncated": pl.Boolean,
        },
    )


def _interval(mean: float, se: float) -> list[float]:
    return [mean - Z95 * se, mean + Z95 * se]


def _wilson(share: float, n: int) -> list[float]:
    """Wilson's 95% score interval of a share of n items: inside [0, 1], and not of zero width
    when every item (or none) is right, as the normal approximation would be."""
    z2 = Z95 * Z95
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [centre - half, centre + half]


def item_scores(scores: pl.DataFrame, items: pl.DataFrame) -> pl.DataFrame:
    """Per item (``id, task, group``): whether the gold choice wins by summed and by per-byte
    log-likelihood, its chance rate, the gold choice's bits per byte and the margin over the best
    wrong choice, whether its context was cut, and the texts of the gold choice and of the one
    chosen per byte (``gold_text``, ``answer``: what the constant-answer lines read)."""
    gold = items.select(pl.int_range(pl.len()).alias("row"), "id", "task", "group", "gold", "choices")
    frame = scores.join(gold, on="row").with_columns(
        bpb=-pl.col("loglik") / math.log(2) / pl.col("bytes"), is_gold=pl.col("choice") == pl.col("gold")
    )
    return (
        frame.group_by("row", maintain_order=True)
        .agg(
            pl.col("id").first(),
            pl.col("task").first(),
            pl.col("group").first(),
            acc=pl.col("choice").get(pl.col("loglik").arg_max()) == pl.col("gold").first(),
            acc_norm=pl.col("choice").get(pl.col("bpb").arg_min()) == pl.col("gold").first(),
            acc_pmi=pl.col("choice").get((pl.col("loglik") - pl.col("unconditional")).arg_max())
            == pl.col("gold").first(),
            chance=1.0 / pl.len(),
            gold_bpb=pl.col("bpb").filter(pl.col("is_gold")).first(),
            best_wrong_bpb=pl.col("bpb").filter(~pl.col("is_gold")).min(),
            truncated=pl.col("truncated").any(),
            gold_text=pl.col("choices").first().list.get(pl.col("gold").first()),
            answer=pl.col("choices").first().list.get(pl.col("choice").get(pl.col("bpb").arg_min())),
        )
        .with_columns(margin_bpb=pl.col("best_wrong_bpb") - pl.col("gold_bpb"))
        .drop("row", "best_wrong_bpb")
    )


def _task_metrics(per_item: pl.DataFrame) -> dict:
    """The metrics of the module docstring for one task's items, with 95% intervals."""
    n = per_item.height
    chance = float(per_item["chance"].mean())
    found: dict = {"items": n, "chance": chance, "truncated": int(per_item["truncated"].sum())}
    # The constant-answer lines: always answering the most common right answer (the majority
    # class, where the choices are a fixed set of labels), and how often the model gave its own
    # most common answer (1.0: one answer whatever the item, as a model that only knows the labels'
    # prior does).
    found["majority"] = float(per_item["gold_text"].value_counts()["count"].max() / n)
    found["top_answer_share"] = float(per_item["answer"].value_counts()["count"].max() / n)
    for name in ("acc", "acc_norm", "acc_pmi"):
        value = float(per_item[name].cast(pl.Float64).mean())
        interval = _wilson(value, n)
        found[name], found[f"{name}_ci"] = value, interval
        centred = [(v - chance) / (1 - chance) for v in (value, *interval)]
        found[f"centred_{name}"], found[f"centred_{name}_ci"] = centred[0], centred[1:]
    for name in ("gold_bpb", "margin_bpb"):
        values = per_item[name].to_numpy()
        mean = float(values.mean())
        found[name] = mean
        found[f"{name}_ci"] = _interval(mean, float(values.std(ddof=1)) / math.sqrt(n)) if n > 1 else None
    return found


def choice_metrics(scores: pl.DataFrame, items: pl.DataFrame) -> dict:
    """:func:`metrics_of` the :func:`item_scores` of :func:`choice_loglikelihoods`' rows for ``items``."""
    return metrics_of(item_scores(scores, items))


def metrics_of(per_item: pl.DataFrame) -> dict:
    """``{"tasks": {task: metrics}, "aggregate": {"core", "gold_bpb", "tasks"}}`` from
    :func:`item_scores`; a task whose items name groups has each group's metrics too
    (``groups``)."""
    tasks = {}
    for task in sorted(set(per_item["task"])):
        part = per_item.filter(pl.col("task") == task)
        tasks[task] = _task_metrics(part)
        named = part.filter(pl.col("group").is_not_null())
        if named.height:
            tasks[task]["groups"] = {
                group: _task_metrics(named.filter(pl.col("group") == group)) for group in sorted(set(named["group"]))
            }
    return {
        "tasks": tasks,
        "aggregate": {
            "tasks": len(tasks),
            "core": float(np.mean([m["centred_acc_norm"] for m in tasks.values()])),
            "gold_bpb": float(np.mean([m["gold_bpb"] for m in tasks.values()])),
        },
    }


def evaluate_checkpoint(checkpoint: Path, paths: list[Path], device: str = "cpu", batch: int = 32) -> dict:
    """:func:`evaluate_choices` with the model and tokenizer of a training out_dir (its newest
    checkpoint) or of one checkpoint file; the result names the checkpoint and its step."""
    from trainer.generate import load_model

    loaded = read_choice_files(paths)  # every file checked before the model loads
    model, tokenizer, info = load_model(checkpoint, device)
    results = evaluate_choices(model, tokenizer, loaded, batch=batch)
    return {"checkpoint": str(checkpoint), "step": info.get("step"), **results}


def read_choice_files(paths: list[Path]) -> list[tuple[Path, pl.DataFrame]]:
    """Each items file of ``paths`` with its items, read and checked (:func:`read_choice_items`)."""
    return [(Path(path), read_choice_items(path)) for path in paths]


def evaluate_choices(
    model: GPT, tokenizer: Tokenizer, loaded: list[tuple[Path, pl.DataFrame]], batch: int = 32
) -> dict:
    """The metrics of :func:`score_choices`."""
    return score_choices(model, tokenizer, loaded, batch)[0]


def score_choices(
    model: GPT, tokenizer: Tokenizer, loaded: list[tuple[Path, pl.DataFrame]], batch: int = 32
) -> tuple[dict, pl.DataFrame]:
    """Score the items of ``loaded`` (:func:`read_choice_files`): the metrics with each file's
    path, sha256 and item count, and the :func:`item_scores` behind them."""
    items = pl.concat([frame for _, frame in loaded], how="vertical")
    duplicated = items.filter(pl.col("id").is_duplicated())
    if duplicated.height:
        raise ChoiceScoringError(
            f"item id {duplicated['id'][0]!r} is in more than one of the files; ids must be unique"
        )
    per_item = item_scores(choice_loglikelihoods(model, tokenizer, items, batch=batch), items)
    results = metrics_of(per_item)
    results["files"] = [
        {"path": str(path), "sha256": file_sha256(path), "items": frame.height} for path, frame in loaded
    ]
    return results, per_item
