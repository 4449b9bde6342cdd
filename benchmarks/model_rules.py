"""The cost per document of the filter stage's model-based rules, each on: an external fastText
classifier (``classifier``) and CCNet's perplexity under a KenLM model (``perplexity``).

Both are off by default, and no model ships or is downloaded, so the models are made here from
the documents themselves (their cost is what is measured, not their judgement):

* the classifier: a supervised fastText model with DCLM's labels (``__label__hq`` against
  ``__label__cc``: the first half of the documents against the second), word bigrams, dimension
  :data:`FASTTEXT_DIM` and :data:`FASTTEXT_BUCKET` hash buckets, as :mod:`pipeline.filters.quality`
  trains. DCLM's released model (bigrams, 2M buckets, dimension 256, about 7 GB) costs more per
  word, mostly in memory traffic.
* the perplexity: a bigram ARPA model counted from the documents' CCNet-normalized lines
  (absolute discounting, :data:`ARPA_VOCAB` most frequent words). CCNet's 5-gram models on
  SentencePiece pieces cost more per token.

Each rule's ``apply`` (its measures over the batch; the rule's decision is a comparison) is timed
on the documents in batches of the stage's size, best of :data:`REPEATS`, in this process with
the thread counts the caller sets (``POLARS_MAX_THREADS=1`` from ``benchmarks/filter_stage.py``),
beside the default filters (``c4_quality``, ``gopher_quality``, ``gopher_repetition``,
``fineweb_quality``, ``pii``) on the same documents.

Usage::

    python benchmarks/model_rules.py SAMPLE.parquet   # one JSON line: microseconds per document
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl

REPEATS = 3
BATCH = 4096
FASTTEXT_DIM = 64
FASTTEXT_BUCKET = 200_000
ARPA_VOCAB = 20_000
DISCOUNT = 0.5


def train_classifier(texts: list[str], folder: Path) -> Path:
    from pipeline.filters.quality import _fit, prepare_texts

    half = len(texts) // 2
    labels = ["__label__hq"] * half + ["__label__cc"] * (len(texts) - half)
    params = {"lr": 0.1, "dim": FASTTEXT_DIM, "wordNgrams": 2, "minCount": 2, "bucket": FASTTEXT_BUCKET}
    model, _ = _fit(prepare_texts(texts).to_list(), labels, folder, {**params, "thread": 1, "seed": 0}, False)
    path = folder / "dclm-like.bin"
    model.save_model(str(path))
    return path


def count_arpa(texts: list[str], path: Path) -> Path:
    """A bigram ARPA model of the texts' normalized lines: absolute discounting, the mass taken
    from each history given to its back-off onto unigrams."""
    from pipeline.filters.perplexity import ccnet_normalize

    lines = ccnet_normalize(pl.Series(texts).str.split("\n").explode()).to_list()
    unigrams: Counter = Counter()
    bigrams: Counter = Counter()
    for line in lines:
        words = ["<s>", *line.split(), "</s>"]
        unigrams.update(words[1:])
        bigrams.update(zip(words, words[1:]))
    vocab = {w for w, _ in unigrams.most_common(ARPA_VOCAB)} | {"</s>"}
    total = sum(unigrams[w] for w in vocab)
    history = Counter()
    follows = Counter()
    for (a, b), n in bigrams.items():
        if b in vocab and (a in vocab or a == "<s>"):
            history[a] += n
            follows[a] += 1
    kept = {(a, b): n for (a, b), n in bigrams.items() if a in history and b in vocab}
    out = ["", "\\data\\", f"ngram 1={len(vocab) + 2}", f"ngram 2={len(kept)}", "", "\\1-grams:"]
    out.append("-7.0\t<unk>\t0")
    for word in ["<s>", *sorted(vocab)]:
        prob = -99 if word == "<s>" else math.log10(unigrams[word] / total)
        backoff = math.log10(DISCOUNT * follows[word] / history[word]) if history[word] else 0.0
        out.append(f"{prob:.6f}\t{word}\t{backoff:.6f}" if word != "</s>" else f"{prob:.6f}\t{word}")
    out += ["", "\\2-grams:"]
    out += [f"{math.log10((n - DISCOUNT) / history[a]):.6f}\t{a} {b}" for (a, b), n in sorted(kept.items())]
    out += ["", "\\end\\", ""]
    path.write_text("\n".join(out))
    return path


def per_document(apply, docs: pl.DataFrame) -> float:
    """Microseconds per document of ``apply`` over ``docs`` in stage-size batches, best of REPEATS."""
    apply(docs.head(256))  # warm up: the model loads, regex caches fill
    best = math.inf
    for _ in range(REPEATS):
        started = time.perf_counter()
        for batch in docs.iter_slices(BATCH):
            apply(batch)
        best = min(best, time.perf_counter() - started)
    return best / docs.height * 1e6


def rule_costs(sample: pl.DataFrame) -> dict:
    """Microseconds per document of the default filters and of each model-based rule."""
    from pipeline.config import DEFAULT_FILTERS
    from pipeline.filters.classifier import FastTextClassifier
    from pipeline.filters.engine import measure
    from pipeline.filters.perplexity import KenLMPerplexity
    from pipeline.filters.registry import build_filters

    docs = sample.select("id", "text", *(["lang"] if "lang" in sample.columns else []))
    texts = docs["text"].to_list()
    defaults = build_filters(DEFAULT_FILTERS, {})
    with tempfile.TemporaryDirectory(prefix="bench-model-rules-") as folder:
        classifier = FastTextClassifier(model=train_classifier(texts, Path(folder)), threshold=0.5)
        costs = {
            "default_filters_us_per_doc": per_document(lambda d: measure(d, defaults), docs),
            "classifier_us_per_doc": per_document(classifier.apply, docs),
            "perplexity_us_per_doc": None,  # without the kenlm extra: not measured
        }
        if importlib.util.find_spec("kenlm") is not None:
            perplexity = KenLMPerplexity(model=count_arpa(texts, Path(folder) / "lm.arpa"), max_perplexity=1000.0)
            costs["perplexity_us_per_doc"] = per_document(perplexity.apply, docs)
    costs["docs"] = docs.height
    costs["mean_chars"] = float(docs["text"].str.len_chars().mean())
    costs["polars_threads"] = pl.thread_pool_size()
    return costs


def print_costs(costs: dict) -> None:
    base = costs["default_filters_us_per_doc"]
    print(f"\nModel-based rules, each on (one core, {costs['docs']:,} documents of {costs['mean_chars']:,.0f} chars)")
    print(f"  default filters (measures)        {base:10.1f} us/doc")
    for name, what in (("classifier", "fastText, DCLM's labels"), ("perplexity", "KenLM bigram, CCNet's")):
        cost = costs[f"{name}_us_per_doc"]
        if cost is None:
            print(f"  + {name:11} not measured: pip install 'curate[kenlm]'")
            continue
        print(f"  + {name:11} {'(' + what + ')':25} {cost:8.1f} us/doc  (+{cost / base:.0%} of the defaults)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(json.dumps(rule_costs(pl.read_parquet(sys.argv[1]))))
