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

from dataclasses import dataclass, field
from typing import Literal, Protocol

import polars as pl

Op = Literal["<", "<=", ">", ">="]


@dataclass(frozen=True)
class Rule:
    name: str  # "<filter>.<rule>", e.g. "c4.min_sentences"
    measure: str  # a column of the filter's measures frame
    op: Op  # remove when ``measure <op> threshold``
    threshold: float

    def fires(self, value: pl.Expr) -> pl.Expr:
        """True where a document breaks this rule (never on a null measurement)."""
        threshold = pl.lit(self.threshold)
        broken = {"<": value < threshold, "<=": value <= threshold, ">": value > threshold, ">=": value >= threshold}[
            self.op
        ]
        return broken.fill_null(False)


@dataclass
class FilterOutput:
    """One row per input document, in input order."""

    measures: pl.DataFrame  # a Float64 column per measure the rules name
    text: pl.Series | None = None  # the rewritten text, or None when unchanged
    counts: dict[str, pl.Series] = field(default_factory=dict)  # per-document counts (e.g. PII hits)
    # Per-document values to keep as columns of the output documents (e.g. quality_score, which
    # dedup's keep rule "quality" reads).
    columns: dict[str, pl.Series] = field(default_factory=dict)


class DocFilter(Protocol):
    name: str

    def rules(self) -> list[Rule]: ...

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        """Measure ``docs`` (columns: id, text, source, url, meta, lang, lang_score)."""
        ...
