"""What a document filter is: measurements over a batch, and rules that compare them to thresholds.

A filter measures every document of a batch at once (polars expressions, numpy) and may rewrite
the text (line-level removals, PII placeholders). Its rules say when a document is removed::

    Rule("gopher_quality.word_count_min", measure="word_count", op="<", threshold=50)

removes a document whose ``word_count`` is below 50. The filter stage applies filters in order:
each measures the text as it entered the stage (so a rewrite cannot hide a later filter's rules)
and rewrites the text as the ones before it left it. It records for every removed document the
first rule that fired with its measured value and threshold; it also counts every rule that would
fire, for the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.formats.documents import DOC_SCHEMA, LANG_FIELDS, LICENCE, REMOVED_SCHEMA, licence_series
from pipeline.io.storage import empty_table

Op = Literal["<", "<=", ">", ">="]


@dataclass(frozen=True)
class Rule:
    name: str  # "<filter>.<rule>", e.g. "c4.min_sentences"
    measure: str  # a column of the filter's measures frame
    op: Op  # remove when ``measure <op> threshold``
    threshold: float
    # What the measure counts, in a phrase a reader of the report needs to read a value (C4's
    # sentences are counted after it drops the lines without an end mark).
    counts: str = field(default="", compare=False)

    def describe(self, threshold: str | None = None) -> str:
        """When the rule removes, and what its measure counts: ``sentence_count < 3 (sentences
        in ...)`` (``threshold``: the threshold as the caller formats it)."""
        shown = f"{self.threshold:g}" if threshold is None else threshold
        return f"{self.measure} {self.op} {shown}" + (f" ({self.counts})" if self.counts else "")

    def fires(self, value: pl.Expr) -> pl.Expr:
        """True where a document breaks this rule (never on a null measurement)."""
        threshold = pl.lit(self.threshold)
        broken = {"<": value < threshold, "<=": value <= threshold, ">": value > threshold, ">=": value >= threshold}[
            self.op
        ]
        return broken.fill_null(False)

    def fired(self, measured: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`fires` over a Series of the measure, in numpy (no polars expression per rule):
        where it fires, and the values as float64 (a null as NaN). Never on a null; a NaN is above
        every threshold, as polars compares it."""
        values = measured.cast(pl.Float64).to_numpy()
        compare = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[self.op]
        with np.errstate(invalid="ignore"):
            broken = compare(values, self.threshold)
        if self.op in (">", ">="):
            nan = np.isnan(values)
            if nan.any():
                broken |= nan & ~measured.is_null().to_numpy()
        return broken, values


@dataclass
class FilterOutput:
    """One row per input document, in input order."""

    measures: pl.DataFrame  # a Float64 column per measure the rules name
    text: pl.Series | None = None  # the rewritten text, or None when unchanged
    counts: dict[str, pl.Series] = field(default_factory=dict)  # per-document counts (e.g. PII hits)
    # Per-document values to keep as columns of the output documents (e.g. quality_score, which
    # dedup's keep rule "quality" reads).
    columns: dict[str, pl.Series] = field(default_factory=dict)
    # Per-document strings that say why a rule fired where a number cannot (the list entry a
    # document matched): stored with the measures, shown by the report and inspect, never
    # added to the documents. Null where there is nothing to say.
    notes: dict[str, pl.Series] = field(default_factory=dict)


class DocFilter(Protocol):
    name: str
    # The constructor parameters whose only effect is a rule's threshold: a change to them changes
    # no measure, rewrite or added column, so the filter stage decides again from the measures it
    # stored instead of measuring (pipeline.stages.attributes).
    thresholds: tuple[str, ...]

    def rules(self) -> list[Rule]: ...

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        """Measure ``docs`` (columns: id, text, source, url, meta, lang, lang_score)."""
        ...


@dataclass
class StepResult:
    """What a step did to one batch."""

    kept: pl.DataFrame
    removed: pl.DataFrame  # REMOVED_SCHEMA columns, one row per removed document
    counts: Counter = field(default_factory=Counter)  # extra tallies for stats.json (e.g. rules that fired)
    # Per-document measurements the stage stores beside its documents (the filter stage's
    # attributes, pipeline.filters.engine.to_attributes).
    attributes: pl.DataFrame | None = None


Step = Callable[[pl.DataFrame], StepResult]


def docs_table(docs: pl.DataFrame) -> pa.Table:
    """Documents as Arrow with the schema's own types (polars' string types vary by version)."""
    known = {f.name: f for f in [*DOC_SCHEMA, *LANG_FIELDS]}
    table = docs.to_arrow()
    schema = pa.schema([known.get(f.name, f) for f in table.schema])
    return table.cast(schema)


def removed_frame(docs: pl.DataFrame, stage: str, rule: pl.Series | str, value, threshold) -> pl.DataFrame:
    """REMOVED_SCHEMA rows for ``docs`` (rule, value and threshold: per row or one for all)."""
    n = docs.height
    lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * n, dtype=pl.Utf8)
    frame = pl.DataFrame(
        {
            "id": docs["id"],
            "source": docs["source"],
            "lang": lang,
            LICENCE: licence_series(docs),
            "stage": pl.Series([stage] * n, dtype=pl.Utf8),
            "rule": rule if isinstance(rule, pl.Series) else pl.Series([rule] * n, dtype=pl.Utf8),
            "value": value if isinstance(value, pl.Series) else pl.Series([value] * n, dtype=pl.Float64),
            "threshold": threshold
            if isinstance(threshold, pl.Series)
            else pl.Series([threshold] * n, dtype=pl.Float64),
        }
    )
    return frame.with_columns(pl.col("value").cast(pl.Float64), pl.col("threshold").cast(pl.Float64))


def empty_removed() -> pl.DataFrame:
    return pl.from_arrow(empty_table(REMOVED_SCHEMA))
