"""Planning: what documents the corpus holds (:class:`Doc`), their kinds, texts and destinations
(:func:`make_plan`), then their keys and URLs (:func:`assign_keys`).

Shares of the documents: about 25% noise, 55% clean real documents as long as the real material
lasts (about 5,600 documents once the packages' own duplicates are dropped), copies for the rest.
So the bigger the corpus, the larger the share of copies: about 28% clean and 47% copies at
20,000 documents.
"""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from demo.noise import SPAM_THEMES, gibberish_text, lorem_text, mixed_lang_text, perturb, spam_text, tiny_png
from demo.real_text import PACKAGE_LICENCES, UNSPACED_LANGS, RealDoc, RealText, load_real_text
from demo.sites import BOILERPLATE_VARIANTS, Site, boilerplate_body, boilerplate_plain, make_sites, slug
from pipeline.licence import combine

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

BBC_SECTIONS = {
    "business": "business",
    "entertainment": "entertainment",
    "politics": "uk_politics",
    "sports": "sport",
    "tech": "technology",
}


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
    # The licence of the real text it holds (real_text.PACKAGE_LICENCES; an SPDX expression for
    # text from both packages); None for text this project generated, which states none.
    licence: str | None = None


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
            licence=PACKAGE_LICENCES[pool[i].source],
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


def plan_noise(
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
            doc.licence = combine([PACKAGE_LICENCES[first.source], PACKAGE_LICENCES[second.source]])
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
        plan += plan_noise(kind, counts[kind], materials, rng, text_rng)
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


def assign_keys(plan: Plan, rng: np.random.Generator) -> None:
    """Ids, WARC record ids, note paths and URLs, all unique and drawn from ``rng``."""
    random_bytes = rng.bytes(16 * len(plan.docs))
    bbc_pages = sum(d.kind == "clean" and d.real_source == "news" for d in plan.docs)
    story_numbers = iter((3_600_000 + rng.choice(900_000, size=bbc_pages, replace=False)).tolist())
    note_keys: set[str] = set()
    for i, doc in enumerate(plan.docs):
        chunk = random_bytes[16 * i : 16 * (i + 1)]
        site = plan.sites[doc.site]
        title_slug = slug(doc.title, 50)
        if doc.source == "web":
            doc.key = f"urn:uuid:{uuid.UUID(bytes=chunk, version=4)}"
            doc.url = (
                f"https://www.{site.domain}/images/{chunk[:6].hex()}.png"
                if doc.kind == "non_html"
                else f"https://www.{site.domain}/{site.year}/{title_slug}-{i}.html"
            )
        elif doc.source == "notes":
            folder = doc.topic if doc.real_source == "news" else "misc"
            doc.key = f"{folder}/{title_slug}-{chunk[:4].hex()}.txt"
            if doc.key in note_keys:  # the same title and 32 random bits again: take 64
                doc.key = f"{folder}/{title_slug}-{chunk[:8].hex()}.txt"
            note_keys.add(doc.key)
        else:
            doc.key = chunk[:8].hex()
            if doc.kind == "clean" and doc.real_source == "news":
                doc.url = (
                    f"http://news.bbc.co.uk/2/hi/{BBC_SECTIONS.get(doc.topic, doc.topic)}/{next(story_numbers)}.stm"
                )
            elif doc.source == "news":
                doc.url = f"https://www.{site.domain}/{slug(doc.topic or 'news')}/{title_slug}-{i}"
    keys = [doc.key for doc in plan.docs]
    if len(set(keys)) != len(keys):  # 64-bit ids colliding: practically never
        raise RuntimeError("duplicate keys in the demo corpus plan")
