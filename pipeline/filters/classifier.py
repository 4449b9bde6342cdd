"""External fastText classifiers: a model the user gives by its path, and the label whose
probability is the document's score, as DCLM applies its OpenHermes-2.5 + ELI5 model (Li et al.
2024, "DataComp-LM": ``__label__hq`` against ``__label__cc``, keeping the top 10% of the pool)
and datatrove's ``FastTextClassifierFilter`` keeps documents whose label scores above a threshold.

What the model sees of a document is what DCLM's ``classify_fasttext_hq_prob`` gives it: the whole
text, newlines (and carriage returns) folded to spaces (a fastText input is one line), case kept
(:func:`pipeline.filters.quality.prepare_texts`, with ``prefix_chars`` to cut long texts and
``lowercase`` for a model trained on lower-cased text). A text left blank scores 0.0.

The score is the model's probability of ``label`` (all labels predicted, so a model of more
than two labels works too), or with ``score = "expected"`` the expected value of labels that are
numbers (``__label__0`` ... ``__label__5``: a FineWeb-Edu-style educational score,
sum of P(label) times the label's number). It is stored with the stage's other measures
(``measure:<filter>.score`` in ``filter/attributes/``), so a changed ``threshold`` decides again
from the stored scores without loading the model. Two ways to remove documents:

* ``threshold`` (default 0.5): rule ``<filter>.score_min`` fires when ``score < threshold``
  (DCLM's top-10% cut on its pool was a score of 0.018112).
* ``top_fraction``: keep the best ``top_fraction`` of each language, with a fixed cut per
  language: the score at the ``1 - top_fraction`` quantile of that language's documents in
  ``pool`` (a Parquet or JSON-lines file of documents with ``text`` and, optionally, ``lang``:
  a sample of the data the stage will filter), scored with the same models. A language with fewer
  than :data:`~pipeline.filters.quality.MIN_LANG_DOCS` pool documents, and a document without a
  language, take the quantile of the whole pool. The cuts depend only on the model and pool files,
  never on how the stage's input is split into units, so every runner (local threads, Dask, Ray)
  and every shard decides alike; a global quantile of the stage's own scores would need every
  shard scored before any is decided. The filter measures ``margin = score - cut(lang)`` and rule
  ``<filter>.top_fraction`` fires when ``margin < 0`` (the removed-documents table reports the
  margin as value and 0.0 as threshold; the cut is ``score - margin``), as the project's own
  quality filter does (:class:`pipeline.filters.quality.QualityFilter`). ``threshold`` is unused
  then, and a changed ``top_fraction`` scores again (the margin is measured with its cut).

One model for every language (``model``) or one per language (``models``, a table by language
code; pipeline.filters.langmodels): a document of a language without a model, when no ``model``
covers the rest, is not scored (null) and passes. Several classifiers run in one stage under
names of their own, ``classifier_<name>`` (``classifier_dclm``, ``classifier_edu``): each is this
filter with its own parameters, measures and rules (``classifier_dclm.score_min``).

The model file's labels are read from its header when the filter is built (a label the model
lacks is one line naming the labels it has); the model itself is loaded on the first batch it
scores, once per process (:func:`pipeline.filters.quality.load_quality_model`), so a stage that
decides again from stored scores never loads it. Model and pool files are part of the filter
stage's identity (pipeline.stages.digests): a model replaced at the same path scores again.
"""

from __future__ import annotations

import struct
from functools import cache, lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from pipeline.filters import quality
from pipeline.filters.langmodels import model_table, read_pool, rows_by_model
from pipeline.filters.params import Count, LangPaths, Ratio, Share
from pipeline.formats.langcodes import lang_languages
from pipeline.formats.step import FilterOutput, Rule

FAMILY = "classifier"
DEFAULT_LABEL = "__label__hq"  # DCLM's positive label
LABEL_PREFIX = "__label__"
_MAGIC = 793712314  # the first four bytes of a fastText model file (.bin and .ftz)
_ARGS_BYTES = 12 * 4 + 8  # after magic and version: twelve int32 arguments and a double


def _read_exact(handle, n: int, path: Path) -> bytes:
    data = handle.read(n)
    if len(data) != n:
        raise ValueError(f"{path} ends inside its header: not a fastText model file")
    return data


@lru_cache(maxsize=32)
def _labels(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The labels of the fastText model at ``path`` from its dictionary, without loading its
    matrices (fastText's format: magic, version, arguments, then the dictionary's entries, each a
    NUL-ended word, an int64 count and an int8 type, 1 for a label)."""
    with open(path, "rb") as handle:
        magic, _version = struct.unpack("<ii", _read_exact(handle, 8, Path(path)))
        if magic != _MAGIC:
            raise ValueError(f"{path} is not a fastText model file (it does not start as one)")
        _read_exact(handle, _ARGS_BYTES, Path(path))
        entries, _nwords, _nlabels, _tokens, _pruned = struct.unpack("<iiiqq", _read_exact(handle, 28, Path(path)))
        labels, buffer, at = [], b"", 0
        for _ in range(entries):
            # each entry read at an offset into the buffer: a vocabulary of millions of words is
            # read in one pass, the buffer cut down only when it is refilled
            while (end := buffer.find(b"\0", at)) < 0 or len(buffer) < end + 10:
                chunk = handle.read(1 << 20)
                if not chunk:
                    raise ValueError(f"{path} ends inside its dictionary: not a whole fastText model file")
                buffer, at = buffer[at:] + chunk, 0
            if buffer[end + 9] == 1:
                labels.append(buffer[at:end].decode("utf-8", "replace"))
            at = end + 10
    return tuple(labels)


def model_labels(path: Path | str) -> tuple[str, ...]:
    """The labels of the fastText model file at ``path`` (read once per process and file)."""
    stat = Path(path).stat()
    return _labels(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


def resolve_label(path: Path, label: str, what: str) -> str:
    """``label`` as the model at ``path`` spells it (``hq`` is ``__label__hq``); ValueError naming
    the labels the model has when it has no such label."""
    labels = model_labels(path)
    for candidate in (label, LABEL_PREFIX + label):
        if candidate in labels:
            return candidate
    shown = ", ".join(labels[:20]) + (" ..." if len(labels) > 20 else "") if labels else "none"
    raise ValueError(
        f"{what}: the model {path} has no label {label!r}; its labels are {shown}: set label to one of them"
    )


def label_weights(path: Path, label: str, score: str, what: str) -> dict[str, float]:
    """What each label of the model at ``path`` adds to the score, times its probability: 1 for
    ``label`` (``score = "probability"``), or the number each label names (``"expected"``:
    ``__label__3`` is 3, as FineWeb-Edu's educational scores of 0 to 5 are)."""
    if score == "probability":
        return {resolve_label(path, label, what): 1.0}
    labels, values = model_labels(path), {}
    for name in labels:
        try:
            values[name] = float(name.removeprefix(LABEL_PREFIX))
        except ValueError:
            raise ValueError(
                f'{what}: score = "expected" needs labels that are numbers (__label__0 ... __label__5); the model '
                f"{path} has {name!r}: score its probability with label = {name!r} instead"
            ) from None
    if not values:
        raise ValueError(f"{what}: the model {path} has no labels: give a supervised fastText model")
    return values


def label_scores(model, prepared: pl.Series, weights: dict[str, float]) -> np.ndarray:
    """The sum over the model's labels of each label's probability times its weight, for each
    prepared text (the probability of one label, or the expected value of numbered labels); 0.0
    for a blank one. One ``predict`` call for the batch (fastText loops in C++); every label is
    predicted, so each label's probability is found whatever its rank."""
    scores = np.zeros(len(prepared), dtype=np.float64)
    has_text = (prepared.str.strip_chars().str.len_bytes() > 0).to_numpy()
    if not has_text.any():
        return scores
    labels, probs = model.predict(prepared.filter(pl.Series(has_text)).to_list(), k=-1)
    get = weights.get
    found = np.fromiter(
        (sum(p * get(label, 0.0) for label, p in zip(ls, ps)) for ls, ps in zip(labels, probs)),
        dtype=np.float64,
        count=len(probs),
    )
    # fastText adds 1e-5 to each probability: keep the score within what its weights allow
    scores[has_text] = np.clip(found, min(0.0, *weights.values()), max(weights.values()))
    return scores


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


class FastTextClassifier:
    """Scores documents with a fastText model given by its path; removes the low scorers (see the
    module docstring). ``model``: one model file for every document; ``models``: a model per
    language code; ``label``: the label whose probability is the score (``__label__hq``, or
    ``hq``); ``score``: that label's probability, or the expected value of numbered labels;
    ``threshold`` removes documents scoring below it (None: measure only);
    ``top_fraction`` keeps that share of each language by the cuts ``pool`` gives;
    ``prefix_chars`` cuts each text to its first characters (None: whole texts, as DCLM);
    ``lowercase`` for a model trained on lower-cased text."""

    name = FAMILY
    thresholds = ("threshold",)

    def __init__(
        self,
        model: str | Path | None = None,
        models: LangPaths | None = None,
        label: str = DEFAULT_LABEL,
        score: Literal["probability", "expected"] = "probability",
        threshold: Ratio | None = 0.5,
        top_fraction: Share | None = None,
        pool: str | Path | None = None,
        prefix_chars: Count | None = None,
        lowercase: bool = False,
    ):
        self.table = model_table(model, models, self.name)
        self.labels = {language: label_weights(path, label, score, self.name) for language, path in self.table.items()}
        if score == "probability" and threshold is not None and threshold > 1:
            raise ValueError(f"{self.name}.threshold: a probability is at most 1, got {threshold}")
        self.model, self.models = model, dict(models or {})
        self.label, self.score, self.threshold, self.top_fraction = label, score, threshold, top_fraction
        self.prefix_chars, self.lowercase = prefix_chars, lowercase
        self.pool = None if pool is None else Path(pool)
        self.cuts: dict[str | None, float] = {}
        if top_fraction is not None:
            if self.pool is None:
                raise ValueError(
                    f"{self.name}.top_fraction needs pool: a Parquet or JSON-lines sample of the stage's "
                    "documents (text, lang) whose scores give each language's cut"
                )
            self.cuts = self._pool_cuts()

    def rules(self) -> list[Rule]:
        if self.top_fraction is not None:
            margin = f"the score less the cut that keeps the top fraction of the document's language{self._covered()}"
            return [Rule(f"{self.name}.top_fraction", measure="margin", op="<", threshold=0.0, counts=margin)]
        if self.threshold is None:
            return []
        what = f"probability of {self.label}" if self.score == "probability" else "expected label (labels as numbers)"
        counts = f"the classifier's {what}{self._covered()}"
        return [Rule(f"{self.name}.score_min", measure="score", op="<", threshold=self.threshold, counts=counts)]

    def _covered(self) -> str:
        """Which languages are scored, when not every one is."""
        if None in self.table:
            return ""
        return f"; scored in {', '.join(sorted(self.table))} only, other languages pass"

    def scores(self, docs: pl.DataFrame) -> pl.Series:
        """Each document's score by its language's model (null where no model covers it)."""
        scores = np.full(docs.height, np.nan)
        scored = np.zeros(docs.height, dtype=bool)
        for path, rows in rows_by_model(docs, self.table):
            take = pl.Series(rows, dtype=pl.Int64)
            prepared = quality.prepare_texts(docs["text"].gather(take), self._prefix(), self.lowercase)
            language = next(lang for lang, p in self.table.items() if p == path)
            scores[rows] = label_scores(quality.load_quality_model(path), prepared, self.labels[language])
            scored[rows] = True
        return pl.Series("score", scores, dtype=pl.Float64).scatter(np.flatnonzero(~scored), None)

    def _prefix(self) -> int:
        return self.prefix_chars if self.prefix_chars is not None else 2**31 - 1

    def _pool_cuts(self) -> dict[str | None, float]:
        """The cut of each language with enough pool documents, and of the whole pool (key None)."""
        stamps = tuple(sorted((str(k), *_stamp(p)) for k, p in self.table.items()))
        return dict(_cached_cuts(self, stamps, _stamp(self.pool), self.top_fraction))

    def cut_for(self, docs: pl.DataFrame) -> pl.Series:
        """The ``top_fraction`` cut of each document, by its language."""
        lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
        own = {k: v for k, v in self.cuts.items() if k is not None}
        return lang_languages(lang).replace_strict(own, default=self.cuts[None], return_dtype=pl.Float64)

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        score = self.scores(docs)
        measures = pl.DataFrame([score])
        if self.top_fraction is not None:
            measures = measures.with_columns((score - self.cut_for(docs)).alias("margin"))
        return FilterOutput(measures=measures)


_CUTS: dict[tuple, dict] = {}  # cuts by model files, pool file and settings, for this process


def _cached_cuts(doc_filter: FastTextClassifier, stamps: tuple, pool: tuple, top_fraction: float) -> dict:
    """The cuts of ``doc_filter``'s pool (the ``1 - top_fraction`` quantile of each language's
    scores and of all), computed once per process for the same model files, pool file, labels,
    text preparation and fraction."""
    key = (stamps, pool, top_fraction, tuple(sorted(map(str, doc_filter.labels.items()))))
    key += (doc_filter.prefix_chars, doc_filter.lowercase)
    if key not in _CUTS:
        frame = read_pool(doc_filter.pool, doc_filter.name)
        scores = doc_filter.scores(frame.with_columns(pl.col("text").fill_null("")))
        scored = scores.is_not_null()
        if not scored.any():
            raise ValueError(f"{doc_filter.name}.pool: no pool document has a model for its language")
        langs = lang_languages(frame["lang"].filter(scored)).to_list()
        quantiles = quality.score_quantiles(scores.filter(scored).to_numpy(), langs)
        levels, level = np.asarray(quantiles["levels"]), 1.0 - top_fraction
        cuts = {lang: float(np.interp(level, levels, values)) for lang, values in quantiles["by_lang"].items()}
        _CUTS[key] = {None: float(np.interp(level, levels, quantiles["global"])), **cuts}
    return _CUTS[key]


def is_named_classifier(name: str) -> bool:
    """Whether ``name`` names a classifier of its own: ``classifier_<name>`` (letters, digits, ``_``)."""
    rest = name.removeprefix(FAMILY + "_")
    return rest != name and bool(rest) and rest.replace("_", "").isalnum() and rest.isascii()


def named_classifier(name: str) -> type:
    """The filter class of the classifier named ``name`` (:func:`is_named_classifier`)."""
    return _named(name)


@cache
def _named(name: str) -> type:
    return type(f"FastTextClassifier[{name}]", (FastTextClassifier,), {"name": name, "__module__": __name__})
