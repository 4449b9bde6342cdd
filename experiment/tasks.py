"""Multiple-choice tasks built from text no curation chose: the held-out sets and the downstream
task's articles, which every pool excludes (by id, near copy and shared token windows) and the
contamination check covers. Items are those of :mod:`pipeline.formats.choices`, scored by
likelihood (trainer.likelihood); every task is seeded and its file's sha256 is in the results.

    continuation-<set>   HellaSwag-style: the start of a held-out text (up to CONTEXT_BYTES of
                         its sentences or lines), its true next sentence, and three endings taken
                         from other texts of the set (of the same language where the set has
                         several, the item's ``group``), the closest in length of a sample
    cloze-<set>          LAMBADA-style last-word cloze: a passage up to the last word of one of
                         its sentences, that word against three other words of the passage
    pairs-<set>          BLiMP-style minimal pairs: a sentence against a copy of it with two
                         adjacent words swapped, after the text that precedes it; the model
                         should prefer the original
    topic-<k>shot        the classification task by the likelihood of the label word, after k
                         labelled examples of the train split (k = 0: zero-shot, GPT-3's
                         in-context form), the examples cut so that all fits the model's window

Cloze and minimal pairs are built on sets whose texts are all English (their word-level edits
assume spaced words); continuation on every clean set. Texts are cut at sentence ends (``. ! ?``
followed by a space, ``。！？``) and line ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.formats.choices import OPTIONAL, REQUIRED, read_choice_items, write_choice_items
from pipeline.formats.hashing import seeded_id_hash

CONTEXT_BYTES = 480  # a context's bytes at most (whole sentences): with the ending, ~200 tokens
ENDING_BYTES = (15, 200)  # a true ending's bytes: long enough to judge, short enough to fit
CHOICES = 4
DISTRACTOR_SAMPLE = 12  # candidate endings drawn per item; the closest in length are kept
CLOZE_WORDS = 8  # a cloze sentence's words at least
PAIR_WORDS = (6, 25)  # a minimal pair's sentence words
TOPIC_CONTEXT_BYTES = 720  # examples (with their labels) and query together, "Topic:" aside
TOPIC_QUERY_BYTES = 260
TOPIC_EXAMPLE_BYTES = 160
SALT_TASKS = 0x43484F49  # "CHOI"

_UNIT_END = re.compile(r"[.!?][\"'”’)\]]*[ \t]+|[。！？]\s*|\n+")
_LAST_WORD = re.compile(r"(?<=\s)([A-Za-z]{3,})([.!?][\"'”’]*)$")
_WORD = re.compile(r"^[A-Za-z]+$")


def units(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of ``text``'s sentences and lines, stripped, non-empty."""
    spans, start = [], 0
    for end in _UNIT_END.finditer(text):
        spans.append((start, end.start() + len(end.group().rstrip())))
        start = end.end()
    spans.append((start, len(text)))
    found = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            found.append((a, b))
    return found


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _context_start(text: str, spans: list[tuple[int, int]], i: int, budget: int) -> int:
    """Where a context ending before unit ``i`` starts: the earliest unit boundary within
    ``budget`` bytes of the unit (at least the unit before it, whatever its length)."""
    start = spans[i - 1][0]
    for j in range(i - 2, -1, -1):
        if _bytes(text[spans[j][0] : spans[i][0]]) > budget:
            break
        start = spans[j][0]
    return start


def _rng(seed: int, task: str) -> np.random.Generator:
    """A task's own generator: its name and the seed, nothing else."""
    name = int(seeded_id_hash([task], seed, SALT_TASKS)[0])
    return np.random.default_rng([seed, name & 0xFFFFFFFF, name >> 32])


def _spread_over_texts(candidates: list[list[dict]], items: int, rng: np.random.Generator) -> list[dict]:
    """At most ``items`` of the candidates, one text at a time in a seeded order (every text gives
    one before any gives two), in the order taken."""
    order = rng.permutation(len(candidates)).tolist()
    pools = [list(rng.permutation(len(candidates[t])).tolist()) for t in range(len(candidates))]
    chosen: list[dict] = []
    while len(chosen) < items and any(pools[t] for t in order):
        for t in order:
            if pools[t] and len(chosen) < items:
                chosen.append(candidates[t][pools[t].pop(0)])
    return chosen


def _candidates(texts: pl.DataFrame, find) -> tuple[list[dict], list[list[dict]]]:
    """The rows of ``texts`` (id, text, lang) and, per text, the candidate items ``find(index,
    row, text, units)`` returns for it."""
    rows = texts.select("id", "text", "lang").to_dicts()
    return rows, [find(t, row, row["text"], units(row["text"])) for t, row in enumerate(rows)]


def _shuffled(gold: str, others: list[str], rng: np.random.Generator) -> tuple[list[str], int]:
    choices = [gold, *others]
    order = rng.permutation(len(choices)).tolist()
    return [choices[k] for k in order], order.index(0)


def _stratum(row: dict, by_lang: bool) -> str:
    return (row.get("lang") or "unknown") if by_lang else ""


Fits = Callable[[str], bool]  # whether a choice fits the model's window (see built_tasks)


def _always(_: str) -> bool:
    return True


def continuation_items(texts: pl.DataFrame, task: str, items: int, seed: int, fits: Fits = _always) -> pl.DataFrame:
    """``task``'s continuation items from ``texts`` (id, text, lang): see the module docstring.
    Sets of several languages draw their wrong endings within the language (``group``); every
    ending ``fits``."""
    rng = _rng(seed, task)
    by_lang = texts["lang"].n_unique() > 1
    endings: dict[str, list[tuple[int, str]]] = {}  # stratum -> (text index, ending)

    def find(t: int, row: dict, text: str, spans: list[tuple[int, int]]) -> list[dict]:
        found = []
        for i in range(1, len(spans)):
            ending = text[spans[i][0] : spans[i][1]]
            if ENDING_BYTES[0] <= _bytes(ending) <= ENDING_BYTES[1] and fits(ending):
                endings.setdefault(_stratum(row, by_lang), []).append((t, ending))
                start = _context_start(text, spans, i, CONTEXT_BYTES)
                found.append({"text": t, "unit": i, "context": text[start : spans[i][0]], "gold": ending})
        return found

    rows, candidates = _candidates(texts, find)
    out = []
    for chosen in _spread_over_texts(candidates, items, rng):
        row = rows[chosen["text"]]
        stratum = _stratum(row, by_lang)
        pool = [e for t, e in endings.get(stratum, []) if t != chosen["text"] and e != chosen["gold"]]
        if len(set(pool)) < CHOICES - 1:
            continue
        sample = list(dict.fromkeys(pool[k] for k in rng.permutation(len(pool))[: DISTRACTOR_SAMPLE * 2]))
        sample = sample[:DISTRACTOR_SAMPLE]
        gold_size = _bytes(chosen["gold"])
        others = sorted(sample, key=lambda e: (abs(_bytes(e) - gold_size), e))[: CHOICES - 1]
        if len(others) < CHOICES - 1:
            continue
        choices, gold = _shuffled(chosen["gold"], others, rng)
        out.append(_item(task, row, chosen["unit"], chosen["context"], choices, gold, stratum or None))
    return _frame(out)


def _item(task: str, row: dict, unit: int, context: str, choices: list[str], gold: int, group) -> dict:
    # the context ends with the space or line end before the continuation; a choice after a space
    # carries none of its own (the evaluator moves the context's trailing spaces into it)
    return {
        "id": f"{task}/{row['id']}/{unit}",
        "task": task,
        "context": context,
        "choices": choices,
        "gold": gold,
        "group": group,
        "lang": row.get("lang"),
    }


def _frame(items: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(items, schema={**REQUIRED, **OPTIONAL})


def cloze_items(texts: pl.DataFrame, task: str, items: int, seed: int, fits: Fits = _always) -> pl.DataFrame:
    """``task``'s last-word cloze items from ``texts`` (English): see the module docstring."""
    rng = _rng(seed, task)

    def find(t: int, row: dict, text: str, spans: list[tuple[int, int]]) -> list[dict]:
        found = []
        for i, (a, b) in enumerate(spans):
            sentence = text[a:b]
            last = _LAST_WORD.search(sentence)
            if last is None or len(sentence.split()) < CLOZE_WORDS:
                continue
            cut = a + last.start(1)
            start = _context_start(text, spans, i, CONTEXT_BYTES) if i else a
            context = text[start:cut]
            target = last.group(1)
            words = {w.strip(".,;:!?\"'()") for w in context.split()}
            others = sorted(w for w in words if _WORD.match(w) and len(w) >= 3 and w.lower() != target.lower())
            if len(others) >= CHOICES - 1 and fits(target):
                found.append({"text": t, "unit": i, "context": context, "gold": target, "others": others})
        return found

    rows, candidates = _candidates(texts, find)
    out = []
    for chosen in _spread_over_texts(candidates, items, rng):
        pool = chosen["others"]
        others = [pool[k] for k in sorted(rng.choice(len(pool), CHOICES - 1, replace=False).tolist())]
        choices, gold = _shuffled(chosen["gold"], others, rng)
        out.append(_item(task, rows[chosen["text"]], chosen["unit"], chosen["context"], choices, gold, None))
    return _frame(out)


def _swapped(sentence: str, rng: np.random.Generator) -> str | None:
    """``sentence`` with two adjacent words swapped (both alphabetic and different), or None."""
    words = sentence.split(" ")
    places = [
        k
        for k in range(len(words) - 1)
        if _WORD.match(words[k]) and _WORD.match(words[k + 1]) and words[k].lower() != words[k + 1].lower()
    ]
    if not places:
        return None
    k = places[int(rng.integers(len(places)))]
    words[k], words[k + 1] = words[k + 1], words[k]
    return " ".join(words)


def pair_items(texts: pl.DataFrame, task: str, items: int, seed: int, fits: Fits = _always) -> pl.DataFrame:
    """``task``'s minimal pairs from ``texts`` (English): see the module docstring."""
    rng = _rng(seed, task)

    def find(t: int, row: dict, text: str, spans: list[tuple[int, int]]) -> list[dict]:
        found = []
        for i in range(1, len(spans)):
            sentence = text[spans[i][0] : spans[i][1]]
            words = len(sentence.split())
            if PAIR_WORDS[0] <= words <= PAIR_WORDS[1] and "\n" not in sentence and fits(sentence):
                start = _context_start(text, spans, i, CONTEXT_BYTES // 2)
                found.append({"text": t, "unit": i, "context": text[start : spans[i][0]], "gold": sentence})
        return found

    rows, candidates = _candidates(texts, find)
    out = []
    for chosen in _spread_over_texts(candidates, items, rng):
        broken = _swapped(chosen["gold"], rng)
        if broken is None:
            continue
        choices, gold = _shuffled(chosen["gold"], [broken], rng)
        out.append(_item(task, rows[chosen["text"]], chosen["unit"], chosen["context"], choices, gold, None))
    return _frame(out)


def _lead(text: str, budget: int) -> str:
    """The start of ``text`` within ``budget`` bytes, cut at a space where there is one, its
    lines joined by spaces."""
    flat = " ".join(text.split())
    if _bytes(flat) <= budget:
        return flat
    cut = flat.encode("utf-8")[:budget].decode("utf-8", errors="ignore")
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


def topic_items(task_frame: pl.DataFrame, shots: int, seed: int, items: int | None = None) -> pl.DataFrame:
    """The classification task (pipeline.formats.task: id, text, label, split) as
    ``topic-<shots>shot`` items: each test text's lead, ``Topic:``, and every label word as a
    choice, after ``shots`` labelled examples drawn from the train split (each item its own)."""
    name = f"topic-{shots}shot"
    rng = _rng(seed, name)
    labels = sorted(set(task_frame["label"].to_list()))
    train = task_frame.filter(pl.col("split") == "train").select("text", "label").rows()
    test = task_frame.filter(pl.col("split") == "test").select("id", "text", "label").rows()
    if items is not None and len(test) > items:
        test = [test[k] for k in sorted(rng.choice(len(test), items, replace=False).tolist())]
    label_line = max(_bytes(f"\nTopic: {lab}\n\n") for lab in labels)
    example_bytes = min(TOPIC_EXAMPLE_BYTES, (TOPIC_CONTEXT_BYTES - TOPIC_QUERY_BYTES) // max(shots, 1) - label_line)
    out = []
    for item_id, text, label in test:
        shown = [train[k] for k in rng.choice(len(train), shots, replace=False).tolist()] if shots else []
        prompt = "".join(f"{_lead(t, example_bytes)}\nTopic: {lab}\n\n" for t, lab in shown)
        context = f"{prompt}{_lead(text, TOPIC_QUERY_BYTES)}\nTopic:"
        choices = [f" {lab}" for lab in labels]
        out.append(
            {**_item(name, {"id": item_id}, 0, context, choices, labels.index(label), None), "id": f"{name}/{item_id}"}
        )
    return _frame(out)


def _all_english(texts: pl.DataFrame) -> bool:
    return texts.height > 0 and texts["lang"].eq("en").fill_null(False).all()


def built_tasks(
    heldout: pl.DataFrame,
    task_frame: pl.DataFrame | None,
    items: int,
    shots: list[int],
    seed: int,
    fits: Fits = _always,
) -> Iterator[tuple[str, pl.DataFrame]]:
    """Every built-in task's ``(name, items)``: from each clean held-out set (``heldout``: the
    columns of experiment.heldout.HELDOUT_COLUMNS) its continuation task, and its cloze and
    minimal pairs where its texts are all English; from the classification task, the topic task
    at each number of ``shots``. Only choices that ``fits`` are used (the experiment's: at most
    half the model's window in tokens; a context too long is cut from the left when scored).
    Tasks that found no items are left out."""
    clean = heldout.filter(pl.col("clean"))
    for set_name in sorted(set(clean["set"].to_list())):
        texts = clean.filter(pl.col("set") == set_name).sort("id")
        builders = [("continuation", continuation_items)]
        if _all_english(texts):
            builders += [("cloze", cloze_items), ("pairs", pair_items)]
        for kind, build in builders:
            name = f"{kind}-{set_name}"
            frame = build(texts, name, items, seed, fits)
            if frame.height:
                yield name, frame
    if task_frame is not None:
        for k in shots:
            yield f"topic-{k}shot", topic_items(task_frame, k, seed, items)


def write_built_tasks(
    out_dir: Path,
    heldout: pl.DataFrame,
    task_frame: pl.DataFrame | None,
    items: int,
    shots: list[int],
    seed: int,
    fits: Fits = _always,
) -> list[Path]:
    """:func:`built_tasks` written as ``out_dir/<name>.jsonl``, each file rewritten only when its
    items changed; returns the paths."""
    paths = []
    for name, frame in built_tasks(heldout, task_frame, items, shots, seed, fits):
        path = Path(out_dir) / f"{name}.jsonl"
        if not path.exists() or not read_choice_items(path).equals(frame):
            write_choice_items(frame, path)
        paths.append(path)
    return paths
