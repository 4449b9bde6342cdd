"""How fairly the default filter stage treats each language: the share of good text it keeps, per
language, against English's, and the share of the demo's noise it still removes.

The filters (C4, Gopher quality and repetition, FineWeb) were written for English. FineWeb-2
(Penedo et al. 2025) sets each filter's threshold per language so that it removes a comparable
share of each language's good text; this benchmark measures how far the project's defaults are
from that today. Everything goes through the filter stage's own step,
``pipeline.stages.steps.filter_settings_step(parse_config({...}).filter)``, with the default
filter settings (built-in language profiles included) and each document's ``lang`` set to its
known language, as the ``lang`` stage gives it.

**Good text.** Real prose read at run time from two PyPI packages, installed into this
benchmark's own virtualenv (``.cache/bench-peers/filter-languages``, made on first use;
``PEER_PYTHON`` points at another interpreter that has them), never into the project's
dependencies; no text is copied into the repository:

* ``gflanguages`` 0.7.11 (Google Fonts language metadata; Apache-2.0): each language's
  ``sample_text`` specimens, paragraphs of the Universal Declaration of Human Rights in that
  language (the "UDHR in Unicode" translations, published by the OHCHR for free use), about
  1,300-2,000 characters per language, for all 19 languages measured here;
* ``mimesis`` 22.2.0 (MIT): the ``datasets/<locale>/text.json`` ``text`` list of the locales
  where it is encyclopedic prose taken from Wikipedia articles (CC BY-SA) with its sentence marks:
  :data:`MIMESIS_LOCALES` (en, ja, ru, fr, tr, el, uk; 15 to 81 sentences). Left out: zh and ar
  (split into sentences with their full stops removed, which would blame the rules for the
  package's editing), de and es (lists of short phrasebook sentences), ko (Middle Korean and
  poetry) and fa (a placeholder word).

The UDHR's preamble is one sentence over seven clauses, each a paragraph ending in a comma; such
paragraphs are left out (some languages' specimens hold the preamble, others none). So is a
source whose units lost their sentence marks (:func:`with_sentence_marks`: the Hebrew UDHR
specimens, none of whose 8 paragraphs ends in a full stop), as the mimesis zh and ar text is.

No package found ships multi-paragraph documents in all of these languages (Bible, UDHR and book
packages on PyPI are English-only, download their text at run time, or hold a language or two), so
documents are BUILT the same way for every language: a source's units in its own order (UDHR
paragraphs; Wikipedia sentences, :data:`SENTENCES_PER_PARAGRAPH` to a paragraph, joined by a
space, or nothing in Chinese and Japanese), paragraphs joined by newlines until the document
reaches :data:`DOC_CHARS` English-equivalent characters (characters times
:data:`EN_CHARS_PER_CHAR`, the rough ratio of an English translation's length to the
language's: about 3 for Chinese, 2.5 for Japanese, 2 for Korean, 1 elsewhere); a last piece
under half that size joins the document before it, or is left out where there is none (so de and
es, whose specimens are mostly the preamble, have no document). At most :data:`MAX_DOCS_PER_SOURCE` documents
per language and source, so that Spanish's 4,380 sentences do not outweigh the rest. A language
thus has a few documents only (the 95% Wilson interval says how little that is): the figures
are a measurement of today's rules, not of FineWeb-2's per-language thresholds.

**Noise.** The demo corpus (:func:`demo.corpus.build_demo_corpus`, :data:`NOISE_CORPUS_DOCS`
documents, seed 0), read by the ``source`` stage: its documents of the noise kinds
(:data:`NOISE_KINDS`: boilerplate, spam, lorem ipsum, gibberish, mixed-language pages; see
docs/demo-corpus.md). ``labels.parquet`` gives the language where the generator knows it
(English boilerplate and spam); the others get the ``lang`` stage's label (lid.176, the stage's
default settings). Removal recall overall and per language with at least :data:`MIN_NOISE`
pages.

Printed per language: documents, English-equivalent characters, the share kept with its 95%
Wilson interval, and the rules that removed its good text (the first rule of each removed
document, as the stage records it); the noise recall per language. The last line is one JSON
object: ``keep_rate_<lang>`` per language, ``noise_recall`` and ``noise_recall_<lang>``,
``keep_ratio_worst_vs_en`` (the lowest keep rate over English's) and ``worst_lang``.

``--tiny`` runs the same code on built-in text only, installing and downloading nothing: the
``chatterbot-corpus`` dialogues the demo is made of (a project dependency) as the "good" text and
a demo corpus of :data:`TINY_NOISE_DOCS` documents in a temporary folder (what the test runs;
its figures mean nothing about prose).

Usage::

    python benchmarks/filter_languages.py           # the benchmark (a few minutes on 2 cores)
    python benchmarks/filter_languages.py --tiny    # the code path on built-in text, seconds
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl
from peers import demo_documents, peer_python, rounded

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench-langs"

# gflanguages language ids (language_Script).
GFL_IDS = {
    "en": "en_Latn", "zh": "zh_Hans", "ja": "ja_Jpan", "ko": "ko_Kore", "hi": "hi_Deva", "ar": "ar_Arab",
    "ru": "ru_Cyrl", "hy": "hy_Armn", "th": "th_Thai", "de": "de_Latn", "fr": "fr_Latn", "es": "es_Latn",
    "fa": "fa_Arab", "tr": "tr_Latn", "vi": "vi_Latn", "he": "he_Hebr", "bn": "bn_Beng", "el": "el_Grek",
    "uk": "uk_Cyrl",
}  # fmt: skip
LANGS = tuple(GFL_IDS)  # en first: the reference
GFL_FIELDS = ("specimen_16", "specimen_21", "specimen_32", "specimen_36")  # whole sentences (the others are cut)
MIMESIS_LOCALES = ("en", "ja", "ru", "fr", "tr", "el", "uk")
COMMAS = ",，、،՝"  # a paragraph ending in one is a clause of a longer sentence (the UDHR's preamble)
PEER_PACKAGES = ["gflanguages==0.7.11", "mimesis==22.2.0"]
PEER_MODULES = ["gflanguages", "mimesis"]

DOC_CHARS = 900  # English-equivalent characters a document reaches (about 150 English words)
EN_CHARS_PER_CHAR = {"zh": 3.0, "ja": 2.5, "ko": 2.0}  # others 1
UNSPACED = {"zh", "ja"}  # sentences joined without a space
NO_SENTENCE_MARKS = {"th", "lo"}  # scripts without a Sentence_Terminal (pipeline.filters.profiles)
SENTENCES_PER_PARAGRAPH = 3
MAX_DOCS_PER_SOURCE = 12
NOISE_KINDS = ("boilerplate", "spam", "lorem", "gibberish", "mixed_lang")
NOISE_CORPUS_DOCS = 20_000
TINY_NOISE_DOCS = 600
MIN_NOISE = 30  # pages of a language for a recall of its own
TOP_RULES = 3

# Run by the peer's interpreter, argv[1] = JSON {"langs": {lang: [gflanguages id, mimesis locale]},
# "fields": the specimens read, "commas": what ends a clause}: prints
# {"texts": {lang: {source: [unit, ...]}}, "versions": {...}}, units in the packages' order.
PEER_SCRIPT = """
import json, sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import gflanguages

args = json.loads(sys.argv[1])
wanted, FIELDS, COMMAS = args["langs"], args["fields"], args["commas"]
languages = gflanguages.LoadLanguages()
datasets = Path(find_spec("mimesis").submodule_search_locations[0]) / "datasets"
texts = {}
for lang, (gfl_id, locale) in wanted.items():
    units = {}
    if gfl_id in languages:
        sample = languages[gfl_id].sample_text
        lines = [line.strip() for field in FIELDS for line in getattr(sample, field).split("\\n")]
        units["udhr"] = list(dict.fromkeys(line for line in lines if line and line[-1] not in COMMAS))
    path = datasets / (locale or "-") / "text.json"
    if path.exists():
        sentences = [s.strip() for s in json.loads(path.read_text("utf-8")).get("text", [])]
        units["wikipedia"] = list(dict.fromkeys(s for s in sentences if s))
    texts[lang] = {source: found for source, found in units.items() if found}
print(json.dumps({"texts": texts, "versions": {p: version(p) for p in ("gflanguages", "mimesis")}}))
"""


# --------------------------------------------------------------------------
# Good text
# --------------------------------------------------------------------------


def package_units() -> tuple[dict[str, dict[str, list[str]]], dict]:
    """Each language's units per source, read from the packages in the peer virtualenv."""
    python = peer_python("filter-languages", PEER_PACKAGES, PEER_MODULES)
    wanted = {lang: [GFL_IDS[lang], lang if lang in MIMESIS_LOCALES else None] for lang in LANGS}
    args = json.dumps({"langs": wanted, "fields": GFL_FIELDS, "commas": COMMAS})
    done = subprocess.run([python, "-c", PEER_SCRIPT, args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"reading the packages' text failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["texts"], {"packages": out["versions"]}


def with_sentence_marks(units: dict[str, dict[str, list[str]]]) -> tuple[dict[str, dict[str, list[str]]], list[str]]:
    """``units`` without the sources whose units lost their sentence marks: in a language whose
    script has them (not :data:`NO_SENTENCE_MARKS`), fewer than half of the units end in a
    Unicode ``Sentence_Terminal`` (closing quotes and brackets allowed). Such text was edited
    by its package (the Hebrew UDHR specimens: 0 of 8 paragraphs end in one), and C4's sentence
    rule removing it would blame the rule for the edit. Also returns a line per source left out."""
    ends = r"""\p{Sentence_Terminal}["'\p{Pe}\p{Pf}»]*\s*$"""
    kept: dict[str, dict[str, list[str]]] = {}
    left_out = []
    for lang, sources in units.items():
        for source, found in sources.items():
            marked = pl.Series(found, dtype=pl.String).str.contains(ends).sum()
            if lang in NO_SENTENCE_MARKS or 2 * marked >= len(found):
                kept.setdefault(lang, {})[source] = found
            else:
                left_out.append(f"{lang} {source}: {marked} of {len(found)} units end a sentence")
    return kept, left_out


def builtin_units() -> tuple[dict[str, dict[str, list[str]]], dict]:
    """The chatterbot-corpus dialogues the demo is made of, a dialogue a unit (``--tiny``)."""
    from demo.real_text import load_real_text

    units: dict[str, dict[str, list[str]]] = {}
    for doc in load_real_text().dialogues:
        units.setdefault(doc.lang, {}).setdefault("dialogues", []).append(doc.text)
    return units, {"packages": {"chatterbot-corpus": "built in"}}


def en_chars(text: str, lang: str) -> float:
    return len(text) * EN_CHARS_PER_CHAR.get(lang, 1.0)


def build_documents(units: list[str], lang: str, per_paragraph: int) -> list[str]:
    """Documents of about :data:`DOC_CHARS` English-equivalent characters from ``units`` in
    order: ``per_paragraph`` units to a paragraph, paragraphs joined by newlines; a last piece
    under half the size joins the document before it (or is left out, where there is none)."""
    sep = "" if lang in UNSPACED else " "
    paragraphs = [sep.join(units[i : i + per_paragraph]) for i in range(0, len(units), per_paragraph)]
    docs: list[list[str]] = []
    current: list[str] = []
    for paragraph in paragraphs:
        current.append(paragraph)
        if en_chars("\n".join(current), lang) >= DOC_CHARS:
            docs.append(current)
            current = []
    if current:
        if en_chars("\n".join(current), lang) >= DOC_CHARS / 2:
            docs.append(current)
        elif docs:
            docs[-1] += current
    return ["\n".join(doc) for doc in docs[:MAX_DOCS_PER_SOURCE]]


def good_documents(units: dict[str, dict[str, list[str]]]) -> pl.DataFrame:
    rows = []
    for lang, sources in units.items():
        for source, found in sources.items():
            per_paragraph = 1 if source in ("udhr", "dialogues") else SENTENCES_PER_PARAGRAPH
            for i, text in enumerate(build_documents(found, lang, per_paragraph)):
                rows.append({"id": f"{lang}/{source}/{i}", "text": text, "lang": lang, "origin": source})
    docs = pl.DataFrame(rows, schema={"id": pl.String, "text": pl.String, "lang": pl.String, "origin": pl.String})
    return docs.with_columns(source=pl.lit("web"))


# --------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------


def noise_documents(folder: Path, docs: int) -> pl.DataFrame:
    """The demo corpus's noise documents as the source stage reads them, ``lang`` the label's
    where the generator knows it, else the ``lang`` stage's."""
    from pipeline.stages.steps import lang_step

    cache = folder / f"demo-{docs}-0"
    cache.mkdir(parents=True, exist_ok=True)
    frame = demo_documents(
        cache / "corpus", cache / "run", docs, 0, cache / "docs.parquet", {"kind": "kind", "lang": "label_lang"}
    )
    frame = frame.filter(pl.col("kind").is_in(NOISE_KINDS))
    labelled = lang_step(settings_config())(frame.select("id", "text", "source")).kept
    frame = frame.join(labelled.select("id", stage_lang="lang"), on="id", how="left", maintain_order="left")
    lang = pl.coalesce("label_lang", "stage_lang").fill_null("und")
    return frame.select("id", "text", "source", "kind", lang=lang)


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------


def settings_config():
    """The project's default settings (one placeholder source; nothing is read from it)."""
    from pipeline.config import parse_config

    sources = [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}]
    return parse_config({"run_dir": str(CACHE / "run"), "sources": sources})


def filtered(docs: pl.DataFrame) -> pl.DataFrame:
    """``docs`` with ``rule``: the filter stage's rule that removed the document, null if kept."""
    from pipeline.stages.steps import filter_settings_step

    result = filter_settings_step(settings_config().filter)(docs.select("id", "text", "source", "lang"))
    return docs.join(result.removed.select("id", "rule"), on="id", how="left", maintain_order="left")


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def keep_table(good: pl.DataFrame) -> dict[str, dict]:
    table = {}
    for lang in [lang for lang in LANGS if lang in set(good["lang"])] + sorted(set(good["lang"]) - set(LANGS)):
        rows = good.filter(pl.col("lang") == lang)
        kept = int(rows["rule"].is_null().sum())
        table[lang] = {
            "docs": rows.height,
            "kept": kept,
            "keep_rate": kept / rows.height,
            "interval": wilson(kept, rows.height),
            "en_chars": sum(en_chars(t, lang) for t in rows["text"]) / rows.height,
            "by_origin": {o: int(rows.filter(pl.col("origin") == o)["rule"].is_null().sum()) for o in rows["origin"]},
            "origin_docs": dict(Counter(rows["origin"].to_list())),
            "removed_by": dict(Counter(rows["rule"].drop_nulls().to_list()).most_common()),
        }
    return table


def noise_table(noise: pl.DataFrame) -> tuple[dict, dict[str, dict]]:
    removed = noise["rule"].is_not_null()
    overall = {"pages": noise.height, "removed": int(removed.sum()), "recall": float(removed.mean())}
    per_lang = {}
    for lang, n in Counter(noise["lang"].to_list()).most_common():
        if n < MIN_NOISE:
            continue
        rows = noise.filter(pl.col("lang") == lang)
        hits = int(rows["rule"].is_not_null().sum())
        kinds = dict(Counter(rows["kind"].to_list()).most_common())
        per_lang[lang] = {"pages": n, "removed": hits, "recall": hits / n, "interval": wilson(hits, n), "kinds": kinds}
    return overall, per_lang


def print_tables(keep: dict[str, dict], noise: tuple[dict, dict[str, dict]], about: str) -> None:
    print(f"\nGood text kept by the default filter stage ({about})")
    print(f"  {'lang':5} {'docs':>4} {'chars':>6} {'kept':>4} {'keep':>6}  {'95% CI':13}  removed by (first rule)")
    for lang, row in keep.items():
        low, high = row["interval"]
        rules = ", ".join(f"{rule} {n}" for rule, n in list(row["removed_by"].items())[:TOP_RULES]) or "-"
        print(
            f"  {lang:5} {row['docs']:4d} {row['en_chars']:6.0f} {row['kept']:4d} {row['keep_rate']:6.0%}  "
            f"[{low:4.0%}, {high:4.0%}]  {rules}"
        )
    overall, per_lang = noise
    print(f"\nDemo noise removed: {overall['removed']} of {overall['pages']} pages, recall {overall['recall']:.3f}")
    print(f"  {'lang':5} {'pages':>6} {'recall':>7}  {'95% CI':13}  kinds")
    for lang, row in per_lang.items():
        low, high = row["interval"]
        kinds = ", ".join(f"{k} {n}" for k, n in row["kinds"].items())
        print(f"  {lang:5} {row['pages']:6d} {row['recall']:7.3f}  [{low:.3f}, {high:.3f}]  {kinds}")


def figures(keep: dict[str, dict], noise: tuple[dict, dict[str, dict]], mode: str, source: dict) -> dict:
    overall, per_lang = noise
    rates = {lang: row["keep_rate"] for lang, row in keep.items()}
    worst = min(rates, key=lambda lang: (rates[lang], lang)) if rates else None
    en = rates.get("en")
    out = {
        "benchmark": "filter_languages",
        "mode": mode,
        **source,
        "doc_chars": DOC_CHARS,
        **{f"keep_rate_{lang}": rate for lang, rate in rates.items()},
        "docs_by_lang": {lang: row["docs"] for lang, row in keep.items()},
        "keep_ratio_worst_vs_en": rates[worst] / en if worst is not None and en else None,
        "worst_lang": worst,
        "noise_pages": overall["pages"],
        "noise_recall": overall["recall"],
        **{f"noise_recall_{lang}": row["recall"] for lang, row in per_lang.items()},
        "removed_by_rule": {lang: row["removed_by"] for lang, row in keep.items() if row["removed_by"]},
    }
    return rounded(out)


def main() -> None:
    tiny = "--tiny" in sys.argv[1:]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        if tiny:
            units, source = builtin_units()
            noise = noise_documents(Path(scratch), TINY_NOISE_DOCS)
        else:
            units, source = package_units()
            units, left_out = with_sentence_marks(units)
            for line in left_out:
                print(f"left out (its sentence marks were removed): {line}", file=sys.stderr)
            source["left_out"] = left_out
            noise = noise_documents(CACHE, NOISE_CORPUS_DOCS)
        good = filtered(good_documents(units))
        noise = filtered(noise)
    keep = keep_table(good)
    noise_figures = noise_table(noise)
    about = f"documents of about {DOC_CHARS} English-equivalent characters built from " + (
        "chatterbot dialogues: built-in fallback, not prose" if tiny else "UDHR paragraphs and Wikipedia sentences"
    )
    print_tables(keep, noise_figures, about)
    print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(json.dumps(figures(keep, noise_figures, "tiny" if tiny else "full", source)))


if __name__ == "__main__":
    main()
