"""The ``lang`` + ``filter`` stages against datatrove's heuristic filters: speed, agreement, accuracy.

The documents are those of the demo corpus (:func:`demo.corpus.build_demo_corpus`,
:data:`DOCS` documents, seed :data:`SEED`) as the pipeline sees them: the project's ``source``
stage is run over it without Prefect (as ``tests.helpers.run_units`` does) and its output shards
are read back. Corpus and documents are made once under ``.cache/bench-filter/``.

Three measurements:

* **Throughput, one core.** Ours: :func:`pipeline.stages.steps.lang_step` then
  :func:`pipeline.stages.steps.filter_step` (the default filters: c4_quality, gopher_quality,
  gopher_repetition, fineweb_quality, pii; every source in scope), batch by batch as a stage
  runs them, in a subprocess with ``POLARS_MAX_THREADS=1``. datatrove 0.10.1:
  ``C4QualityFilter``, ``GopherQualityFilter``, ``GopherRepetitionFilter`` and
  ``FineWebQualityFilter`` in sequence (our filter order; datatrove's later filters see C4's
  cleaned text, ours measure the text as it entered the stage; a document leaves the chain at
  the first filter that removes it),
  calling each filter's ``filter(doc)`` on ``Document`` objects built beforehand. Only the
  filtering is timed, not reading or interpreter start. datatrove works one document at a time
  in Python and splits words and sentences with spaCy, so it is timed on a random sample of
  :data:`SAMPLE` documents, and ours on the same sample (the headline,
  ``speed_ratio_vs_datatrove``) and on all documents. Docs/s per core divides by the larger of
  wall and CPU seconds; ``speed_ratio_vs_datatrove_cpu`` is the ratio of CPU seconds alone (the
  same runs), which other work on the machine inflates less.
* **Agreement per filter.** On the sample, each of the four filters alone on both sides (ours:
  the class's ``apply`` and ``rules()`` over the documents with their ``lang`` column) with our
  thresholds set to datatrove's defaults where the two differ (:func:`matched_filters`): the
  share of documents with the same keep/remove decision, over the whole sample and over its
  English documents (datatrove's filters treat every document as English; ours use its
  ``lang``), and the disagreements counted by our first rule that fired (or ``kept``) against
  datatrove's reason (or ``kept``), by the documents' labels, and on pages with a navigation line
  (:data:`NAVIGATION_LINE`), with the agreement left once those pages and lorem ipsum are set
  aside (``agreement_<filter>_without_navigation_lines_and_lorem``): the two definitions that
  differ most (a "|" is a word for datatrove's spaCy tokens, not for ours; Gopher's stop-word rule
  applies to English only here, and lorem ipsum is not English). A few examples of each class go
  to stderr.
* **Accuracy against the demo's labels.** The noise kinds (:data:`NOISE_KINDS`) should be
  removed, clean documents and copies kept (dedup is a later stage). Precision, recall and F1 of
  removal, and the share of each kind removed, on the sample for: ours as in
  ``configs/demo.toml`` (lang ``min_score`` 0.5 then the filters) with every source in scope and
  with the demo's ``filter.sources`` scope; ours without the language threshold (``lang`` only
  labels the documents); datatrove's four filters in sequence. Ours as in the demo config but
  with every source in scope is also scored on all documents (from the timed run).

datatrove is not a dependency of this project: it runs in its own virtualenv, made on first use
under ``.cache/bench-peers/datatrove-filters/`` (``PEER_PYTHON`` points at another interpreter
that has datatrove 0.10, spaCy, regex and orjson).

**The rules off by default** (:func:`optional_rules`: the word list and the URL lists, each with
lists made from the sample under ``.cache/bench-filter/``) are timed in the same subprocess, each alone on the
sample after the lang step: the filter step with ``filters = [rule]`` against ``filters = []``,
best of :data:`SAMPLE_REPEATS`, is the cost per document that turning the rule on adds
(``rule_cost_us_per_doc``); the headline is the stage with every one of them off.

The last line printed is one JSON object with the figures; a readable table comes before it.

Usage::

    python benchmarks/filter_stage.py                       # the benchmark
    python benchmarks/filter_stage.py ours DOCS SAMPLE KEPT  # the timed run of our side only
                                                            # (Parquet files: documents, sample,
                                                            # ids kept, written)
    python benchmarks/filter_stage.py rules                 # the rules off by default, alone
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import polars as pl
from model_rules import print_costs
from peers import demo_documents, peer_python, rounded

DOCS = 100_000
SEED = 0
SAMPLE = 4_000
# Runs of our side on the sample; the best counts (the sample takes about a second).
SAMPLE_REPEATS = 3
# Disagreement examples printed per class.
EXAMPLES = 3

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench-filter" / f"demo-{DOCS}-{SEED}"
CORPUS_DIR = CACHE / "corpus"
RUN_DIR = CACHE / "run"
DOCS_PATH = CACHE / "docs.parquet"
SAMPLE_PATH = CACHE / f"sample-{SAMPLE}.parquet"
SAMPLE_JSONL = CACHE / f"sample-{SAMPLE}.jsonl"
OURS_KEPT = CACHE / "ours-kept.parquet"
PEER_VERDICTS = CACHE / f"datatrove-{SAMPLE}.jsonl"

PEER_PACKAGES = ["datatrove==0.10.1", "spacy", "regex", f"orjson=={orjson.__version__}"]
PEER_MODULES = ["datatrove", "spacy", "regex", "orjson"]
FILTERS = ("c4_quality", "gopher_quality", "gopher_repetition", "fineweb_quality")
# A line of three or more items between " | " (a site's menu: "Home | News | Sport"): datatrove's
# spaCy tokens count each "|" as a word without a letter, ours drop tokens of punctuation only.
NAVIGATION_LINE = r"(?m)^[^\n]*\S\s+\|\s+\S[^\n]*\|"
NOISE_KINDS = ("boilerplate", "spam", "lorem", "gibberish", "mixed_lang")
KEEP_KINDS = ("clean", "exact_dup", "near_dup")

# Run by the peer's interpreter: argv = [sample JSONL, verdicts JSONL]. Writes one line per
# document: the chain's verdict ("<filter>:<reason>", or null when kept) and each filter's own
# (its reason, or null); prints the chain's timing as one JSON line.
PEER_SCRIPT = """
import json, sys, time
from importlib.metadata import version

import orjson
from datatrove.data import Document
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)

sample, out = sys.argv[1], sys.argv[2]
records = [orjson.loads(line) for line in open(sample, "rb")]
filters = {"c4_quality": C4QualityFilter(), "gopher_quality": GopherQualityFilter(),
           "gopher_repetition": GopherRepetitionFilter(), "fineweb_quality": FineWebQualityFilter()}

def reason(result):
    if result is True:
        return None
    return result[1] if isinstance(result, tuple) else "removed"

def chain(doc):
    for name, f in filters.items():
        why = reason(f.filter(doc))
        if why is not None:
            return f"{name}:{why}"
    return None

chain(Document(text="Warm up the tokenizer. It loads on first use.", id="warm-up"))
docs = [Document(text=r["text"], id=r["id"]) for r in records]
wall, cpu = time.perf_counter(), time.process_time()
verdicts = [chain(doc) for doc in docs]
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu

alone = {name: [reason(f.filter(Document(text=r["text"], id=r["id"]))) for r in records]
         for name, f in filters.items()}
with open(out, "wb") as f:
    for i, r in enumerate(records):
        f.write(orjson.dumps({"id": r["id"], "chain": verdicts[i], **{k: v[i] for k, v in alone.items()}}) + b"\\n")
print(json.dumps({"seconds": wall, "cpu_seconds": cpu, "docs": len(docs),
                  "version": version("datatrove"), "spacy": version("spacy")}))
"""


# --------------------------------------------------------------------------
# Documents and configs
# --------------------------------------------------------------------------


def run_config(min_score: float = 0.5, scoped: bool = False):
    """The demo's config (``demo.config.demo_config``) over the benchmark's corpus: lang
    ``min_score`` as given, the filters on every source unless ``scoped`` (the demo's scope)."""
    from demo.config import demo_config
    from pipeline.config import parse_config

    data = demo_config(CORPUS_DIR, RUN_DIR, seed=SEED)
    data["lang"] = {"min_score": min_score}
    if not scoped:
        data["filter"] = {}
    return parse_config(data)


def corpus_docs() -> pl.DataFrame:
    """The documents of the demo corpus as the source stage writes them, with their label
    (``kind``); made once."""
    docs = demo_documents(CORPUS_DIR, RUN_DIR, DOCS, SEED, DOCS_PATH, {"kind": "kind"})
    # Canaries are memorization probes (random words), neither text to keep nor noise to remove.
    docs = docs.filter(pl.col("kind") != "canary")
    unknown = docs.filter(~pl.col("kind").is_in([*NOISE_KINDS, *KEEP_KINDS]))
    if unknown.height:
        raise SystemExit(f"{unknown.height} documents have no usable label, e.g. {unknown['id'][0]}")
    return docs


def write_sample(docs: pl.DataFrame) -> pl.DataFrame:
    """A seeded random sample of :data:`SAMPLE` documents (corpus order), as Parquet for our side
    and JSON lines (id, text) for datatrove."""
    rows = np.sort(np.random.default_rng(SEED).choice(docs.height, size=SAMPLE, replace=False))
    sample = docs[rows]
    sample.drop("kind").write_parquet(SAMPLE_PATH)
    SAMPLE_JSONL.write_bytes(
        b"".join(orjson.dumps({"id": i, "text": t}) + b"\n" for i, t in zip(sample["id"], sample["text"]))
    )
    return sample


# --------------------------------------------------------------------------
# Our side
# --------------------------------------------------------------------------


def stages(config):
    """A function running the lang and filter steps of ``config`` batch by batch over a frame of
    documents; it returns the ids kept."""
    from pipeline.stages.steps import filter_step, lang_step

    lang, filt = lang_step(config), filter_step(config)

    def run(docs: pl.DataFrame) -> pl.Series:
        kept = [filt(lang(batch).kept).kept["id"] for batch in docs.iter_slices(config.batch_docs)]
        return pl.concat(kept) if kept else pl.Series("id", [], dtype=pl.String)

    return run


def timed(run, docs: pl.DataFrame) -> tuple[dict, pl.Series]:
    wall, cpu = time.perf_counter(), time.process_time()
    kept = run(docs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"seconds": wall, "cpu_seconds": cpu, "docs": docs.height, "kept": len(kept)}, kept


# A word list of C4's size (LDNOOBW's English list: 403 entries): words of the sample, from this
# rank by frequency, so that they are real words some documents hold.
WORD_LIST_ENTRIES = 400
WORD_LIST_FROM_RANK = 2000
# URL lists: made-up domains (UT1's adult list holds about 4.6 million; the lookup costs the same
# per document whatever the size) and the hosts of a few of the sample's URLs, so that some match.
URL_LIST_DOMAINS = 1_000_000
URL_LIST_URLS = 100_000
URL_LIST_SAMPLE_HOSTS = 5
URL_SUBSTRINGS = ["porn", "casino", "xxx"]


def _made_up_names(n: int, seed: int) -> list[str]:
    letters = np.random.default_rng(seed).integers(0, 26, size=(n, 10), dtype=np.uint8) + ord("a")
    return [row.tobytes().decode() for row in letters]


def url_lists(sample: pl.DataFrame, folder: Path) -> dict:
    """``url_blocklist``'s settings over UT1-style lists written under ``folder`` (made once)."""
    category = folder / "bench"
    if not (category / "urls").exists():
        category.mkdir(parents=True, exist_ok=True)
        hosts = sample["url"].drop_nulls().str.extract(r"//([^/:]+)", 1).drop_nulls().unique().sort()
        domains = [f"{name}.com" for name in _made_up_names(URL_LIST_DOMAINS, SEED)]
        domains += hosts.head(URL_LIST_SAMPLE_HOSTS).to_list()
        (category / "domains").write_text("\n".join(domains) + "\n", encoding="utf-8")
        urls = [f"{name}.org/page" for name in _made_up_names(URL_LIST_URLS, SEED + 1)]
        (category / "urls").write_text("\n".join(urls) + "\n", encoding="utf-8")
    return {"domains": [str(folder)], "urls": [str(folder)], "substrings": URL_SUBSTRINGS}


def optional_rules(sample: pl.DataFrame) -> dict[str, dict]:
    """The ``[filter]`` settings that turn on each rule off by default, with the lists it reads
    (made from ``sample`` under :data:`CACHE`)."""
    words = (
        sample["text"].str.to_lowercase().str.extract_all(r"[a-z]{4,}").explode().drop_nulls().value_counts(sort=True)
    )
    entries = words["text"].slice(WORD_LIST_FROM_RANK, WORD_LIST_ENTRIES).to_list()
    lists = CACHE / "lists"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "en.txt").write_text("\n".join(entries) + "\n", encoding="utf-8")
    return {
        "c4_badwords": {"filters": ["c4_badwords"], "params": {"c4_badwords": {"lists": str(lists)}}},
        "url_blocklist": {"filters": ["url_blocklist"], "params": {"url_blocklist": url_lists(sample, CACHE / "ut1")}},
    }


def rule_costs(sample: pl.DataFrame, config) -> dict[str, dict]:
    """Per rule of :func:`optional_rules`: microseconds a document it adds to the filter step
    (alone against no filter, on the sample after the lang step; best of :data:`SAMPLE_REPEATS`)
    and the documents it removes."""
    from pipeline.config import FilterConfig
    from pipeline.stages.steps import filter_settings_step, lang_step

    lang = lang_step(config)
    batches = [lang(batch).kept for batch in sample.iter_slices(config.batch_docs)]
    docs = sum(b.height for b in batches)

    def best(settings: dict) -> tuple[float, int]:
        step = filter_settings_step(FilterConfig(**settings))
        step(batches[0].head(64))  # warm up: compiled expressions, lists read
        times, removed = [], 0
        for _ in range(SAMPLE_REPEATS):
            started = time.process_time()
            removed = sum(step(batch).removed.height for batch in batches)
            times.append(time.process_time() - started)
        return min(times), removed

    base, _ = best({"filters": []})
    costs = {"unicode_repair": repair_cost(sample)}
    for name, settings in optional_rules(sample).items():
        seconds, removed = best(settings)
        costs[name] = {"us_per_doc": (seconds - base) / docs * 1e6, "removed": removed, "docs": docs}
    return costs


def repair_cost(sample: pl.DataFrame) -> dict:
    """A source's ``unicode_repair`` (ftfy, before language ID) on the sample's texts: microseconds
    a document, best of :data:`SAMPLE_REPEATS`, and the documents it changed."""
    from pipeline.io.repair import RepairOptions, repair_texts

    texts = sample["text"].to_arrow()
    repair_texts(texts.slice(0, 64), RepairOptions())  # warm up: ftfy's import and tables
    times, changed = [], 0
    for _ in range(SAMPLE_REPEATS):
        started = time.process_time()
        changed = repair_texts(texts, RepairOptions())[1]
        times.append(time.process_time() - started)
    return {"us_per_doc": min(times) / sample.height * 1e6, "removed": 0, "changed": changed, "docs": sample.height}


def print_rule_costs(costs: dict[str, dict]) -> None:
    print("\nRules off by default, each on alone (one core; the headline has them off)")
    for name, cost in costs.items():
        what = "changed" if "changed" in cost else "removed"
        print(
            f"  {name:18} +{cost['us_per_doc']:7.1f} us a document  "
            f"({cost[what]:,} of {cost['docs']:,} sample documents {what})"
        )


def run_ours(docs_path: Path, sample_path: Path, kept_path: Path) -> None:
    """The timed runs of our side (all documents once, the sample best of
    :data:`SAMPLE_REPEATS`); writes the ids kept of all documents, prints one JSON line."""
    docs = pl.read_parquet(docs_path)
    sample = pl.read_parquet(sample_path)
    run = stages(run_config())
    run(sample.head(256))  # warm up: regex caches, the model's first predictions
    full, kept = timed(run, docs)
    best = min((timed(run, sample)[0] for _ in range(SAMPLE_REPEATS)), key=lambda r: r["seconds"])
    kept.to_frame("id").write_parquet(kept_path)
    costs = rule_costs(sample, run_config())
    print(json.dumps({"all": full, "sample": best, "polars_threads": pl.thread_pool_size(), "rule_costs": costs}))


def subprocess_json(side: str, command: list[str], env: dict | None = None) -> dict:
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode:
        raise SystemExit(f"{side} run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def per_core(report: dict) -> float:
    """Docs/s per core: wall time, or CPU time when more than one thread worked."""
    return report["docs"] / max(report["seconds"], report["cpu_seconds"])


# --------------------------------------------------------------------------
# Agreement
# --------------------------------------------------------------------------


def matched_filters() -> dict:
    """Our four filters with datatrove 0.10's defaults where their thresholds differ (the class
    docstrings list the differences; the others are definitions and stay ours)."""
    from pipeline.filters.heuristics import (
        C4_END_MARKS,
        C4Quality,
        FineWebQuality,
        GopherQuality,
        GopherRepetition,
    )

    return {
        # datatrove: >= 3 words per line, >= 5 sentences, and "'" ends a line too.
        "c4_quality": C4Quality(min_words_per_line=3, min_sentences=5, end_marks=(*C4_END_MARKS, "'")),
        "gopher_quality": GopherQuality(),
        "gopher_repetition": GopherRepetition(),
        # datatrove: char_dup_ratio threshold 0.01; short lines are <= 30 characters (ours: < 31).
        "fineweb_quality": FineWebQuality(char_duplicates_ratio=0.01, short_line_length=31),
    }


def datatrove_measure(filter_name: str, reason: str) -> str | None:
    """The measure of ours that a datatrove reason is about (None for datatrove's "empty")."""
    if filter_name == "gopher_quality":
        return {
            "gopher_short_doc": "word_count",
            "gopher_long_doc": "word_count",
            "gopher_below_avg_threshold": "mean_word_length",
            "gopher_above_avg_threshold": "mean_word_length",
            "gopher_too_many_hashes": "hash_to_word_ratio",
            "gopher_too_many_ellipsis": "ellipsis_to_word_ratio",
            "gopher_too_many_bullets": "bullet_lines_ratio",
            "gopher_too_many_end_ellipsis": "ellipsis_lines_ratio",
            "gopher_below_alpha_threshold": "alpha_words_ratio",
            "gopher_enough_stop_words": "stop_word_count",
        }.get(reason)
    if filter_name == "gopher_repetition":
        if m := re.fullmatch(r"top_(\d+)_gram", reason):
            return f"top_{m[1]}gram_char_frac"
        if m := re.fullmatch(r"duplicated_(\d+)_n_grams", reason):
            return f"dup_{m[1]}gram_char_frac"
        return None if reason == "empty" else reason
    if filter_name == "c4_quality":
        return {
            "lorem_ipsum": "has_lorem_ipsum",
            "curly_bracket": "has_curly_bracket",
            "too_few_sentences": "sentence_count",
        }.get(reason)
    return {"list_ratio": "new_line_ratio", "empty": "line_punct_ratio"}.get(reason, reason)


def our_verdicts(doc_filter, docs: pl.DataFrame) -> tuple[list[str | None], pl.DataFrame]:
    """Per document, the first of the filter's rules that fires (short name) or None; and the
    filter's measures."""
    output = doc_filter.apply(docs)
    first = [None] * docs.height
    for rule in doc_filter.rules():
        fired = output.measures.select(rule.fires(pl.col(rule.measure))).to_series().to_list()
        first = [f if f is not None or not hit else rule.name.split(".", 1)[1] for f, hit in zip(first, fired)]
    return first, output.measures


def agreement(sample: pl.DataFrame, peer: pl.DataFrame) -> dict:
    """Per filter: the share of the sample with the same decision on both sides, over all
    documents and over those our language ID calls English (datatrove's filters tokenize every
    document as English), and the disagreements counted as "<our first rule or kept> |
    <datatrove's reason or kept>"; prints examples of each class to stderr, English ones first."""
    english = (sample["lang"] == "en").to_list()
    navigation = sample["text"].str.contains(NAVIGATION_LINE).to_list()
    results = {}
    for name, doc_filter in matched_filters().items():
        ours, measures = our_verdicts(doc_filter, sample)
        theirs = peer[name].to_list()
        classes: dict[str, list[int]] = {}
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if (a is None) != (b is None):
                classes.setdefault(f"{a or 'kept'} | {b or 'kept'}", []).append(i)
        classes = dict(sorted(classes.items(), key=lambda item: (-len(item[1]), item[0])))
        differ = sum(map(len, classes.values()))
        differ_en = {k: sum(english[i] for i in rows) for k, rows in classes.items()}
        differing = sorted(i for rows in classes.values() for i in rows)
        kinds = sample["kind"].to_list()
        plain = [i for i in range(sample.height) if not navigation[i] and kinds[i] != "lorem"]
        results[name] = {
            "agreement": 1 - differ / sample.height,
            "agreement_en": 1 - sum(differ_en.values()) / sum(english),
            "disagreements": {k: len(rows) for k, rows in classes.items()},
            "disagreements_en": {k: n for k, n in differ_en.items() if n},
            # where they come from: the documents' labels, and pages with a navigation line
            "disagreements_by_kind": dict(Counter(kinds[i] for i in differing).most_common()),
            "disagreements_with_navigation_line": sum(navigation[i] for i in differing),
            "agreement_without_navigation_lines_and_lorem": 1 - len(set(differing) & set(plain)) / len(plain),
        }
        print(f"\n== {name}: disagreements (ours | datatrove), up to {EXAMPLES} examples each", file=sys.stderr)
        rules = {r.name.split(".", 1)[1]: r for r in doc_filter.rules()}
        for label, rows in classes.items():
            print(f"-- {label}: {len(rows)} ({differ_en[label]} English)", file=sys.stderr)
            for i in sorted(rows, key=lambda row: not english[row])[:EXAMPLES]:
                shown = []
                if ours[i] is not None:
                    rule = rules[ours[i]]
                    shown.append(f"ours {rule.measure}={measures[rule.measure][i]} ({rule.op} {rule.threshold:g})")
                if theirs[i] is not None and (measure := datatrove_measure(name, theirs[i])):
                    shown.append(f"ours {measure}={measures[measure][i]}")
                text = sample["text"][i]
                print(
                    f"   {sample['id'][i]} [{sample['kind'][i]}, {sample['lang'][i]}, {len(text)} chars] "
                    f"{'; '.join(shown)}\n      {text[:240]!r}",
                    file=sys.stderr,
                )
    return results


# --------------------------------------------------------------------------
# Accuracy
# --------------------------------------------------------------------------


def scores(kinds: pl.Series, removed: pl.Series) -> dict:
    """Precision, recall and F1 of removal against the labels, and the share removed per kind."""
    noise = kinds.is_in(NOISE_KINDS)
    hits = int((noise & removed).sum())
    precision = hits / max(int(removed.sum()), 1)
    recall = hits / max(int(noise.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    by_kind = (
        pl.DataFrame({"kind": kinds, "removed": removed}).group_by("kind").agg(pl.col("removed").mean()).sort("kind")
    )
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "removed": int(removed.sum()),
        "by_kind": dict(by_kind.iter_rows()),
    }


def accuracy(sample: pl.DataFrame, docs: pl.DataFrame, peer: pl.DataFrame) -> dict[str, dict]:
    variants = {
        "ours": run_config(),
        "ours_demo_scope": run_config(scoped=True),
        "ours_filters_only": run_config(min_score=0.0),
    }
    frame = sample.drop("kind", "lang", "lang_score")
    out = {
        name: scores(sample["kind"], ~sample["id"].is_in(stages(config)(frame).implode()))
        for name, config in variants.items()
    }
    out["datatrove"] = scores(sample["kind"], peer["chain"].is_not_null())
    kept = pl.read_parquet(OURS_KEPT)["id"]
    out["ours_all_docs"] = scores(docs["kind"], ~docs["id"].is_in(kept.implode()))
    return out


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def print_tables(results: dict, agree: dict, acc: dict[str, dict]) -> None:
    # The timed run of all documents reads the corpus as the stage does: the canaries too.
    print(
        f"\nThroughput, one core ({results['docs']:,} demo documents, {results['ours_docs']:,} with the canaries; "
        f"sample {results['sample_docs']:,})"
    )
    print(f"  ours lang+filter, all documents   {results['ours_docs_per_s_per_core']:10,.0f} docs/s")
    print(f"  ours lang+filter, sample          {results['ours_sample_docs_per_s_per_core']:10,.0f} docs/s")
    print(f"  datatrove 4 filters, sample       {results['datatrove_docs_per_s_per_core']:10,.0f} docs/s")
    print(f"  speed ratio (sample)              {results['speed_ratio_vs_datatrove']:10.1f} x")
    print(f"  speed ratio, CPU seconds (sample) {results['speed_ratio_vs_datatrove_cpu']:10.1f} x")
    print("\nAgreement with datatrove per filter (same keep/remove decision, thresholds matched)")
    print(f"  {'':18} {'all':>6} {'English':>8}   largest disagreement classes (ours | datatrove)")
    for name, a in agree.items():
        top = ", ".join(f"{k}: {v}" for k, v in list(a["disagreements"].items())[:3])
        print(f"  {name:18} {a['agreement']:6.1%} {a['agreement_en']:8.1%}   {top}")
    kinds = [*NOISE_KINDS, *KEEP_KINDS]
    print("\nRemoval against the labels (share of each kind removed)")
    print(f"  {'':18} {'prec':>6} {'recall':>6} {'f1':>6}  " + " ".join(f"{k[:10]:>10}" for k in kinds))
    for name, s in acc.items():
        print(
            f"  {name:18} {s['precision']:6.3f} {s['recall']:6.3f} {s['f1']:6.3f}  "
            + " ".join(f"{s['by_kind'].get(k, float('nan')):10.1%}" for k in kinds)
        )


def main() -> None:
    if sys.argv[1:2] == ["ours"]:
        run_ours(*map(Path, sys.argv[2:5]))
        return
    if sys.argv[1:2] == ["rules"]:
        CACHE.mkdir(parents=True, exist_ok=True)
        sample = pl.read_parquet(SAMPLE_PATH) if SAMPLE_PATH.exists() else write_sample(corpus_docs()).drop("kind")
        print_rule_costs(rule_costs(sample, run_config()))
        return
    started = time.perf_counter()
    CACHE.mkdir(parents=True, exist_ok=True)
    docs = corpus_docs()
    sample = write_sample(docs)

    env = {**os.environ, "POLARS_MAX_THREADS": "1"}
    ours = subprocess_json(
        "ours",
        [sys.executable, str(Path(__file__).resolve()), "ours", str(DOCS_PATH), str(SAMPLE_PATH), str(OURS_KEPT)],
        env=env,
    )
    print(
        f"ours: {ours['all']['docs']} documents in {ours['all']['seconds']:.1f} s, sample in "
        f"{ours['sample']['seconds']:.2f} s (polars threads: {ours['polars_threads']})",
        file=sys.stderr,
    )
    # the model-based rules (off by default), each on: their cost per document (benchmarks/model_rules.py)
    model_rules = subprocess_json(
        "model rules", [sys.executable, str(Path(__file__).with_name("model_rules.py")), str(SAMPLE_PATH)], env=env
    )
    python = peer_python("datatrove-filters", PEER_PACKAGES, PEER_MODULES)
    peer = subprocess_json("datatrove", [python, "-c", PEER_SCRIPT, str(SAMPLE_JSONL), str(PEER_VERDICTS)])
    print(f"datatrove: sample in {peer['seconds']:.1f} s", file=sys.stderr)
    verdicts = pl.read_ndjson(
        PEER_VERDICTS, schema={"id": pl.String, "chain": pl.String, **{name: pl.String for name in FILTERS}}
    )
    if verdicts["id"].to_list() != sample["id"].to_list():
        raise SystemExit("datatrove's verdicts are not in the sample's order")

    from pipeline.lang import LanguageIdentifier, identify_languages
    from pipeline.lang.model import lid_model_path

    labelled = identify_languages(sample, LanguageIdentifier(lid_model_path()))
    agree = agreement(labelled, verdicts)
    acc = accuracy(labelled, docs, verdicts)

    results: dict[str, object] = {
        "docs": docs.height,
        "sample_docs": sample.height,
        "seed": SEED,
        "datatrove_version": peer["version"],
        "spacy_version": peer["spacy"],
        "ours_stages": "lang (min_score 0.5) + filter (c4_quality, gopher_quality, gopher_repetition, "
        "fineweb_quality, pii), all sources",
        "datatrove_filters": "C4Quality, GopherQuality, GopherRepetition, FineWebQuality in sequence",
        "ours_docs": ours["all"]["docs"],
        "ours_seconds": ours["all"]["seconds"],
        "ours_cpu_seconds": ours["all"]["cpu_seconds"],
        "ours_docs_per_s_per_core": per_core(ours["all"]),
        "ours_docs_kept": ours["all"]["kept"],
        "ours_sample_seconds": ours["sample"]["seconds"],
        "ours_sample_cpu_seconds": ours["sample"]["cpu_seconds"],
        "ours_sample_docs_per_s_per_core": per_core(ours["sample"]),
        "datatrove_seconds": peer["seconds"],
        "datatrove_cpu_seconds": peer["cpu_seconds"],
        "datatrove_docs_per_s_per_core": per_core(peer),
    }
    results["speed_ratio_vs_datatrove"] = (
        results["ours_sample_docs_per_s_per_core"] / results["datatrove_docs_per_s_per_core"]
    )
    # Beside the headline: CPU seconds on both sides, which a machine busy with other work
    # inflates less than wall time.
    results["speed_ratio_vs_datatrove_cpu"] = peer["cpu_seconds"] / ours["sample"]["cpu_seconds"]
    results["sample_english_docs"] = int((labelled["lang"] == "en").sum())
    for name, a in agree.items():
        results |= {f"agreement_{name}": a["agreement"], f"agreement_{name}_en": a["agreement_en"]}
    for name, a in agree.items():
        results |= {f"disagreements_{name}": a["disagreements"], f"disagreements_{name}_en": a["disagreements_en"]}
        results |= {
            f"disagreements_{name}_by_kind": a["disagreements_by_kind"],
            f"disagreements_{name}_with_navigation_line": a["disagreements_with_navigation_line"],
            f"agreement_{name}_without_navigation_lines_and_lorem": a["agreement_without_navigation_lines_and_lorem"],
        }
    for name, s in acc.items():
        results |= {f"{name}_precision": s["precision"], f"{name}_recall": s["recall"], f"{name}_f1": s["f1"]}
    results["removed_share_by_kind"] = {name: s["by_kind"] for name, s in acc.items()}
    results["sample_kinds"] = dict(sorted(Counter(sample["kind"].to_list()).items()))
    results["model_rules"] = model_rules
    results["rule_cost_us_per_doc"] = {name: cost["us_per_doc"] for name, cost in ours["rule_costs"].items()}
    results["benchmark_seconds"] = time.perf_counter() - started

    print_tables(results, agree, acc)
    print_rule_costs(ours["rule_costs"])
    print_costs(model_rules)
    print(json.dumps(rounded(results)))


if __name__ == "__main__":
    main()
