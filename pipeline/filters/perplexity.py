"""Perplexity under a KenLM n-gram model per language, as CCNet scores documents (Wenzek et al.
2020, "CCNet", section 3.3; ``cc_net/perplexity.py``) and datatrove's ``CCNetPerplexityStats``
measures them; the models are the user's files (ARPA or KenLM's binary format), one per language.

Each line of a document is normalized as CCNet's ``text_normalizer.normalize`` does
(:func:`ccnet_normalize`: stripped, lower case, accents stripped by NFD and dropping combining
marks, every digit to ``0``, CCNet's table of Unicode punctuation to ASCII, control characters
removed) and scored by KenLM with sentence start and end; the document's perplexity is CCNet's,
``10 ** (-sum of log10 scores / sum of tokens)`` over its lines, a line's tokens being its words
and its end (``len(line.split()) + 1``). Where this differs from CCNet:

* CCNet scores SentencePiece pieces (its ``<lang>.sp.model`` beside each ``<lang>.arpa.bin``);
  this filter scores the normalized line's whitespace words, so its model must be trained on
  text normalized the same way and split on whitespace (``lmplz`` over :func:`ccnet_normalize`'s
  lines). CCNet's published models need their SentencePiece tokenizer and are not read here.
* the perplexity is kept as measured, not rounded to one decimal as CCNet stores it.

A document without text, or of a language without a model (when no ``model`` covers every
other), has no perplexity (null) and passes, as CCNet leaves it unscored.

Two ways to remove documents, both per language:

* ``max_perplexity``: rule ``perplexity.max`` fires when the perplexity is above it; a
  language's own threshold goes in ``[filter.by_lang.<code>.params.perplexity]``. It is stored
  with the stage's measures, so a changed threshold decides again without loading a model.
* buckets as CCNet's ``PerplexityBucket``: with per-language cut-offs ``(head, tail)`` a document
  is ``head`` (0) below ``head``, ``middle`` (1) below ``tail``, else ``tail`` (2), measured as
  ``bucket``; ``max_bucket = "middle"`` removes the tail (rule ``perplexity.bucket``,
  ``bucket > 1``). The cut-offs are the user's (``cutoffs = { en = [head, tail] }``) or, for the
  languages the user gives none, the ``head_percentile`` and ``tail_percentile`` (CCNet's 30 and
  60) of the perplexities of ``pool``'s documents of that language (a Parquet or JSON-lines sample
  of the stage's input; a language needs :data:`~pipeline.filters.quality.MIN_LANG_DOCS` of
  them). A language without cut-offs has no bucket (CCNet's ``all``) and passes. The cut-offs
  depend only on the files, so every shard and runner buckets alike; a changed cut-off or
  ``max_bucket`` measures again.

KenLM (``pip install 'curate[kenlm]'``; it builds from source) is imported when a model is first
loaded, once per process and file; building the filter only checks that the files look like
KenLM models and that the package is there, so a stage that decides again never loads a model.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from pipeline.filters.langmodels import model_table, read_pool, rows_by_model
from pipeline.filters.params import LangPaths, Ratio
from pipeline.filters.quality import MIN_LANG_DOCS
from pipeline.formats.langcodes import code_languages, lang_languages
from pipeline.formats.step import FilterOutput, Rule

# CCNet's text_normalizer.UNICODE_PUNCT: punctuation of other scripts and typography to ASCII.
UNICODE_PUNCT = {
    "，": ",",
    "。": ".",
    "、": ",",
    "„": '"',
    "”": '"',
    "“": '"',
    "«": '"',
    "»": '"',
    "１": '"',
    "」": '"',
    "「": '"',
    "《": '"',
    "》": '"',
    "´": "'",
    "∶": ":",
    "：": ":",
    "？": "?",
    "！": "!",
    "（": "(",
    "）": ")",
    "；": ";",
    "–": "-",
    "—": " - ",
    "．": ". ",
    "～": "~",
    "’": "'",
    "…": "...",
    "━": "-",
    "〈": "<",
    "〉": ">",
    "【": "[",
    "】": "]",
    "％": "%",
    "►": "-",
}
NON_PRINTING = r"[\x00-\x1f\x7f-\x9f]"  # CCNet's non-printing characters, removed
BUCKETS = ("head", "middle", "tail")
HEAD_PERCENTILE = 30  # CCNet's PerplexityBucket defaults
TAIL_PERCENTILE = 60
INSTALL = "pip install 'curate[kenlm]'"


def ccnet_normalize(lines: pl.Series) -> pl.Series:
    """Each line as CCNet's ``normalize(line)`` gives it (accent, case, numbers, punct=1)."""
    return (
        lines.cast(pl.String)
        .str.strip_chars()
        .str.to_lowercase()
        .str.normalize("NFD")
        .str.replace_all(r"\p{Mn}", "")
        .str.replace_all(r"\d", "0")
        .str.replace_many(list(UNICODE_PUNCT), list(UNICODE_PUNCT.values()))
        .str.replace_all(NON_PRINTING, "")
    )


def document_perplexity(model, texts: pl.Series) -> np.ndarray:
    """CCNet's perplexity of each text under the KenLM ``model`` (NaN for an empty text): every
    line normalized and scored with sentence start and end, ``10 ** (-sum log10 / sum tokens)``."""
    n = len(texts)
    frame = pl.DataFrame({"doc": np.arange(n), "text": texts.cast(pl.String).fill_null("")})
    lines = frame.filter(pl.col("text").str.len_bytes() > 0).with_columns(pl.col("text").str.split("\n"))
    lines = lines.explode("text")
    normalized = ccnet_normalize(lines["text"])
    tokens = (normalized.str.count_matches(r"\S+") + 1).to_numpy().astype(np.float64)
    # KenLM scores one sentence per call; the loop is over lines, everything else is vectorized.
    score = model.score
    logs = np.fromiter((score(line) for line in normalized.to_list()), dtype=np.float64, count=len(normalized))
    doc = lines["doc"].to_numpy()
    log_sum = np.bincount(doc, weights=logs, minlength=n)
    token_sum = np.bincount(doc, weights=tokens, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(token_sum > 0, 10.0 ** (-log_sum / np.maximum(token_sum, 1)), np.nan)


def _kenlm():
    if importlib.util.find_spec("kenlm") is None:
        raise ImportError(f"the perplexity filter needs the kenlm package: {INSTALL}")
    import kenlm

    return kenlm


@lru_cache(maxsize=8)
def _cached_model(path: str, mtime_ns: int, size: int):
    kenlm = _kenlm()
    config = kenlm.Config()
    config.show_progress = False
    config.arpa_complain = kenlm.ARPALoadComplain.NONE
    return kenlm.Model(path, config)


def load_kenlm_model(path: Path | str):
    """The KenLM model at ``path``, loaded once per process (again if the file changes)."""
    path = Path(path).resolve()
    stat = path.stat()
    return _cached_model(str(path), stat.st_mtime_ns, stat.st_size)


def check_kenlm_file(path: Path, what: str) -> None:
    """ValueError when ``path`` starts as neither an ARPA file (``\\data\\``) nor a KenLM binary."""
    with open(path, "rb") as handle:
        head = handle.read(256)
    if not (head.startswith(b"mmap lm ") or head.lstrip().startswith(b"\\data\\")):
        raise ValueError(f"{what}: {path} is not a KenLM model (an ARPA file or KenLM's binary format)")


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


_POOL_CUTOFFS: dict[tuple, dict] = {}  # cut-offs by model files, pool file and percentiles


class KenLMPerplexity:
    """CCNet's perplexity per language under the user's KenLM models; removes documents above
    ``max_perplexity`` or past ``max_bucket`` (see the module docstring). ``models``: a model
    per language code; ``model``: one for every other language; ``cutoffs``: ``(head, tail)``
    perplexities per language code; ``pool``, ``head_percentile``, ``tail_percentile``: the
    cut-offs of the languages ``cutoffs`` leaves out, from a sample's perplexities."""

    name = "perplexity"
    thresholds = ("max_perplexity",)

    def __init__(
        self,
        models: LangPaths | None = None,
        model: str | Path | None = None,
        max_perplexity: Ratio | None = None,
        max_bucket: Literal["head", "middle", "tail"] | None = None,
        cutoffs: Mapping[str, Sequence[Ratio]] | None = None,
        pool: str | Path | None = None,
        head_percentile: Ratio = HEAD_PERCENTILE,
        tail_percentile: Ratio = TAIL_PERCENTILE,
    ):
        self.table = model_table(model, models, self.name)
        for path in self.table.values():
            check_kenlm_file(path, self.name)
        _kenlm()  # the package, not a model: a missing one stops the run before any work
        if max_bucket is not None and max_bucket not in BUCKETS:
            raise ValueError(f"{self.name}.max_bucket: {max_bucket!r} is no bucket; give one of {', '.join(BUCKETS)}")
        if not 0 <= head_percentile <= tail_percentile <= 100:
            raise ValueError(
                f"{self.name}: head_percentile ({head_percentile}) and tail_percentile ({tail_percentile}) "
                "must rise within 0-100"
            )
        self.models, self.model = dict(models or {}), model
        self.max_perplexity, self.max_bucket = max_perplexity, max_bucket
        self.head_percentile, self.tail_percentile = head_percentile, tail_percentile
        self.pool = None if pool is None else Path(pool)
        self.cutoffs = self._given_cutoffs(cutoffs or {})
        if self.pool is not None:
            key = (tuple(sorted((str(k), *_stamp(p)) for k, p in self.table.items())), _stamp(self.pool))
            key += (head_percentile, tail_percentile)
            if key not in _POOL_CUTOFFS:  # once per process, not per unit
                _POOL_CUTOFFS[key] = self._pool_cutoffs()
            self.cutoffs = {**_POOL_CUTOFFS[key], **self.cutoffs}
        if max_bucket is not None and not self.cutoffs:
            raise ValueError(f"{self.name}.max_bucket needs cut-offs: cutoffs = {{ en = [head, tail] }} or a pool")

    def _given_cutoffs(self, cutoffs: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, float]]:
        given = {}
        for language, code in code_languages(cutoffs, f"{self.name}.cutoffs").items():
            pair = tuple(float(v) for v in cutoffs[code])
            if len(pair) != 2 or pair[0] > pair[1]:
                raise ValueError(
                    f"{self.name}.cutoffs.{code}: give two perplexities, head then tail ([300.0, 600.0]), got {pair}"
                )
            given[language] = pair
        return given

    def _pool_cutoffs(self) -> dict[str, tuple[float, float]]:
        """The cut-offs of each language with enough pool documents, at the two percentiles."""
        pool = read_pool(self.pool, self.name)
        values = self.perplexities(pool)
        frame = pl.DataFrame({"lang": lang_languages(pool["lang"]), "pp": values}).drop_nulls()
        cutoffs = {}
        for (language,), group in frame.group_by(["lang"]):
            if group.height >= MIN_LANG_DOCS:
                head, tail = np.percentile(group["pp"].to_numpy(), [self.head_percentile, self.tail_percentile])
                cutoffs[language] = (float(head), float(tail))
        return dict(sorted(cutoffs.items()))

    def rules(self) -> list[Rule]:
        rules = []
        covered = "" if None in self.table else f"; scored in {', '.join(sorted(self.table))} only, others pass"
        if self.max_perplexity is not None:
            counts = "the KenLM model's perplexity of the CCNet-normalized text, per word and line end" + covered
            rules.append(Rule("perplexity.max", "perplexity", ">", self.max_perplexity, counts=counts))
        if self.max_bucket is not None:
            counts = "the bucket by the language's perplexity cut-offs: 0 head, 1 middle, 2 tail" + covered
            counts += f" (cut-offs for {', '.join(self.cutoffs)} only, others pass)"
            rules.append(Rule("perplexity.bucket", "bucket", ">", float(BUCKETS.index(self.max_bucket)), counts=counts))
        return rules

    def perplexities(self, docs: pl.DataFrame) -> pl.Series:
        """Each document's perplexity by its language's model (null where none or no text)."""
        values = np.full(docs.height, np.nan)
        for path, rows in rows_by_model(docs, self.table):
            texts = docs["text"].gather(pl.Series(rows, dtype=pl.Int64))
            values[rows] = document_perplexity(load_kenlm_model(path), texts)
        return pl.Series("perplexity", values, dtype=pl.Float64).fill_nan(None)

    def buckets(self, docs: pl.DataFrame, perplexity: pl.Series) -> pl.Series:
        """0 (head), 1 (middle) or 2 (tail) by the document's language's cut-offs; null without."""
        lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
        languages = lang_languages(lang)
        head = languages.replace_strict(
            {k: v[0] for k, v in self.cutoffs.items()}, default=None, return_dtype=pl.Float64
        )
        tail = languages.replace_strict(
            {k: v[1] for k, v in self.cutoffs.items()}, default=None, return_dtype=pl.Float64
        )
        frame = pl.DataFrame({"pp": perplexity, "head": head, "tail": tail})
        bucket = (
            pl.when(pl.col("pp").is_null() | pl.col("head").is_null())
            .then(None)
            .when(pl.col("pp") < pl.col("head"))
            .then(0.0)
            .when(pl.col("pp") < pl.col("tail"))
            .then(1.0)
            .otherwise(2.0)
        )
        return frame.select(bucket.alias("bucket")).to_series()

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        perplexity = self.perplexities(docs)
        measures = pl.DataFrame([perplexity])
        if self.cutoffs:
            measures = measures.with_columns(self.buckets(docs, perplexity))
        return FilterOutput(measures=measures)
