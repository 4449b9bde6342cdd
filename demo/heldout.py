"""Held-out sets and the task: the real documents set aside before anything is planned
(:func:`reserve`: the downstream task's BBC articles, held-out news, dialogues and web pages), and
the held-out texts with generated junk and their manifest (:func:`heldout_table`,
:func:`heldout_manifest`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from demo.plan import Doc, Materials, Plan, plan_noise
from demo.real_text import UNSPACED_LANGS, RealDoc, RealText
from demo.writers import PageRenderer
from pipeline.io.html import html_to_text

# Held-out sets: real documents (and generated junk) that no pool file holds, nor any copy of
# them. Only real documents sharing no span of ISOLATION_WORDS words (ISOLATION_CHARS characters
# in scripts without spaces) with any other real document are candidates, so that no pool
# document quotes one by accident.
HELDOUT_DIR = "heldout"
HELDOUT_TEXTS = "heldout/texts.parquet"
HELDOUT_MANIFEST = "heldout/manifest.json"
HELDOUT_TASK = "heldout/task.parquet"
HELDOUT_CANARIES = "heldout/canaries.parquet"

HELDOUT_SIZES = {"news": 150, "dialogues": 150, "web": 150, "junk": 150}
HELDOUT_JUNK_KINDS = ("spam", "boilerplate", "lorem", "gibberish")
ISOLATION_WORDS = 8
ISOLATION_CHARS = 12
HELDOUT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("set", pa.string()),
        ("group", pa.string()),
        ("lang", pa.string()),
        ("kind", pa.string()),
        ("clean", pa.bool_()),
    ]
)


def heldout_texts_path(corpus_dir: Path) -> Path:
    return Path(corpus_dir) / HELDOUT_TEXTS


def heldout_task_path(corpus_dir: Path) -> Path:
    return Path(corpus_dir) / HELDOUT_TASK


def _spans(doc: RealDoc) -> set[int]:
    """Hashes of the document's spans of ISOLATION_WORDS words (ISOLATION_CHARS characters where
    words are not spaced); a shorter document is one span."""
    if doc.lang in UNSPACED_LANGS:
        units, n = [c for c in doc.text if not c.isspace()], ISOLATION_CHARS
    else:
        units, n = doc.text.split(), ISOLATION_WORDS
    return {hash(tuple(units[i : i + n])) for i in range(max(1, len(units) - n + 1))}


def isolated(docs: list[RealDoc]) -> np.ndarray:
    """Whether each document shares no span (:func:`_spans`) with any other of ``docs``."""
    spans = [_spans(doc) for doc in docs]
    seen = Counter(span for found in spans for span in found)
    return np.array([all(seen[span] == 1 for span in found) for found in spans], dtype=bool)


@dataclass(frozen=True)
class Reserved:
    """The real documents kept out of every pool: the held-out sets' and the task's."""

    pool: RealText  # what the pools may hold
    sets: dict[str, list[RealDoc]]  # news, dialogues, web
    task: pl.DataFrame  # task columns of pipeline.formats.task, plus ``index`` into the BBC articles
    candidates: dict[str, int]  # isolated documents per source


def reserve(real: RealText, seed: int, rng: np.random.Generator, task_train_docs: int, task_test_docs: int) -> Reserved:
    """Choose the task's articles (pipeline.formats.task' class-balanced seeded selection) and the
    held-out news, dialogues (round robin over languages, at most half of a language's
    candidates) and web pages (half news, half dialogues), all among isolated documents."""
    from pipeline.formats.task import topic_task_frame

    alone = isolated(list(real.news) + list(real.dialogues))
    news_ok, dialogues_ok = alone[: len(real.news)], alone[len(real.news) :]
    task = topic_task_frame(real.news, task_train_docs, task_test_docs, seed, eligible=news_ok.tolist())
    taken = set(task["index"].to_list())
    news = [i for i in rng.permutation(len(real.news)).tolist() if news_ok[i] and i not in taken]
    web_news = HELDOUT_SIZES["web"] // 2
    if len(news) < HELDOUT_SIZES["news"] + web_news:
        raise ValueError(
            f"the task's {task_train_docs + task_test_docs} articles leave too few BBC "
            "articles for the held-out news; ask for a smaller task"
        )
    by_lang: dict[str, list[int]] = {}
    for i in rng.permutation(len(real.dialogues)).tolist():
        if dialogues_ok[i]:
            by_lang.setdefault(real.dialogues[i].lang, []).append(i)
    dialogues: list[int] = []
    turn = 0
    while len(dialogues) < HELDOUT_SIZES["dialogues"]:
        row = [found[turn] for found in by_lang.values() if turn < len(found) // 2]
        if not row:
            break
        dialogues += row[: HELDOUT_SIZES["dialogues"] - len(dialogues)]
        turn += 1
    chosen = set(dialogues)
    rest = [i for found in by_lang.values() for i in found if i not in chosen]
    web_dialogues = [
        rest[i] for i in sorted(rng.choice(len(rest), HELDOUT_SIZES["web"] - web_news, replace=False).tolist())
    ]
    sets = {
        "news": [real.news[i] for i in news[: HELDOUT_SIZES["news"]]],
        "dialogues": [real.dialogues[i] for i in dialogues],
        "web": [real.news[i] for i in news[HELDOUT_SIZES["news"] : HELDOUT_SIZES["news"] + web_news]]
        + [real.dialogues[i] for i in web_dialogues],
    }
    out_news = taken | set(news[: HELDOUT_SIZES["news"] + web_news])
    out_dialogues = chosen | set(web_dialogues)
    pool = RealText(
        tuple(d for i, d in enumerate(real.news) if i not in out_news),
        tuple(d for i, d in enumerate(real.dialogues) if i not in out_dialogues),
        {**real.stats, "reserved_news": len(out_news), "reserved_dialogues": len(out_dialogues)},
    )
    return Reserved(pool, sets, task, {"news": int(news_ok.sum()), "dialogues": int(dialogues_ok.sum())})


def _as_read(text: str) -> str:
    """The text as the source stage reads it: line ends made ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def heldout_table(reserved: Reserved, plan: Plan, rng: np.random.Generator) -> tuple[pa.Table, dict]:
    """The held-out texts (:data:`HELDOUT_SCHEMA`), raw as the source stage would read them (a web
    page: the project's HTML extraction of the rendered page), and their counts."""
    renderer = PageRenderer(plan.sites)
    materials = Materials(reserved.pool, plan.sites)
    rows: list[tuple] = []
    dropped = 0

    def add(set_name: str, doc: Doc, clean: bool) -> None:
        nonlocal dropped
        if doc.source == "web":
            text = html_to_text(renderer.render(doc), "utf-8")
        else:
            text = doc.text
        text = _as_read(text)
        if not text.strip():
            dropped += 1
            return
        key = rng.bytes(8).hex()
        rows.append((f"heldout/{set_name}/{key}", text, set_name, doc.source, doc.lang, doc.kind, clean))

    for set_name in ("news", "dialogues", "web"):
        for real in reserved.sets[set_name]:
            destination = "web" if set_name == "web" else real.source
            add(
                set_name,
                Doc(
                    "clean",
                    destination,
                    real.text,
                    real.title,
                    real.lang,
                    real.topic,
                    real.language,
                    real.source,
                    site=int(rng.integers(len(plan.sites))),
                ),
                True,
            )
    per_kind = np.diff(np.linspace(0, HELDOUT_SIZES["junk"], len(HELDOUT_JUNK_KINDS) + 1).round()).astype(int)
    for kind, count in zip(HELDOUT_JUNK_KINDS, per_kind.tolist()):
        for doc in plan_noise(kind, count, materials, rng, rng):
            add("junk", doc, False)
    columns = list(zip(*rows)) if rows else [[] for _ in HELDOUT_SCHEMA.names]
    table = pa.table({name: list(values) for name, values in zip(HELDOUT_SCHEMA.names, columns)}, schema=HELDOUT_SCHEMA)
    return table, {"empty_pages_dropped": dropped}


def heldout_manifest(table: pa.Table, reserved: Reserved, seed: int, task_info: dict, extra: dict) -> dict:
    """What the held-out sets hold (documents and bytes per set and group) and how they were chosen."""
    frame = pl.from_arrow(table).with_columns(bytes=pl.col("text").str.len_bytes())
    sets: dict[str, dict] = {}
    for (set_name, group), part in sorted(frame.group_by(["set", "group"]), key=lambda item: item[0]):
        entry = sets.setdefault(set_name, {"documents": 0, "bytes": 0, "groups": {}})
        entry["groups"][group] = {"documents": part.height, "bytes": int(part["bytes"].sum())}
        entry["documents"] += part.height
        entry["bytes"] += int(part["bytes"].sum())
    for set_name, part in frame.group_by("set"):
        sets[set_name[0]]["kinds"] = dict(sorted(Counter(part["kind"].to_list()).items()))
        if set_name[0] == "dialogues":
            sets["dialogues"]["languages"] = dict(sorted(Counter(part["lang"].to_list()).items()))
    return {
        "seed": seed,
        "texts": "texts.parquet",
        "task": "task.parquet",
        "sets": dict(sorted(sets.items())),
        "task_split": task_info,
        "candidates": reserved.candidates,
        **extra,
        "how_chosen": (
            "Chosen when the corpus is built, before any curation, from the packages' real "
            f"documents that share no span of {ISOLATION_WORDS} words ({ISOLATION_CHARS} characters "
            "in Chinese, Japanese, Thai) with any other real document; the task's BBC articles "
            "first (the class-balanced seeded selection of pipeline.formats.task), then, seeded, news "
            "articles, dialogues in a round robin over languages (at most half of a language's "
            "candidates), and web pages (half news, half dialogues, rendered on a corpus site and "
            "extracted by the project's HTML extraction, main content). Junk is generated by the "
            "corpus's own spam, boilerplate, lorem and gibberish generators. None of these "
            "documents, and no copy of them, is in any source file; texts are raw, as the source "
            "stage would read them. Junk shares template text with the pools by design."
        ),
    }
