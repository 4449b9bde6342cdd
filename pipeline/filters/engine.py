"""Applying filters to a batch: every rule measures the text as it entered the stage, rewrites apply
in order; the first rule that fires removes a document, and all are counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import polars as pl

from pipeline.formats.documents import blank_text
from pipeline.formats.step import DocFilter, FilterOutput, StepResult, removed_frame

STAGE = "filter"
# A document whose text the filters' rewrites (line removals) left blank is removed by this rule.
EMPTY_AFTER_REWRITE = "filter.empty_after_rewrite"


def walk_filters(
    docs: pl.DataFrame, filters: list[DocFilter]
) -> Iterator[tuple[DocFilter, FilterOutput, pl.DataFrame]]:
    """Run ``filters`` in order over ``docs``; yield each filter, its output (measures, counts,
    rewrites) and the documents after it.

    Every filter *measures* the text as it entered the filter stage, as its paper defines its
    rules on the page, so one filter's rewrite cannot hide another's rules (C4 drops blank lines
    and lines ending in "...", which Gopher's duplicate-paragraph and ellipsis-line rules count).
    *Rewrites* compose in order: each filter rewrites the text as the ones before it left it, and
    its per-document counts describe that rewrite. Columns a filter adds (``quality_score``) are
    seen by the later ones. A filter with rules that rewrites, after another filter rewrote, runs
    twice: on the stage's text for its measures and on the current text for its rewrite.
    """
    original = docs.get_column("text")
    current = docs
    rewritten = False
    for doc_filter in filters:
        if not rewritten:
            output = doc_filter.apply(current)
        elif not doc_filter.rules():  # nothing to measure (PII): rewrite the current text only
            output = doc_filter.apply(current)
        else:
            output = doc_filter.apply(current.with_columns(original))
            if output.text is not None:
                rewrite = doc_filter.apply(current)
                output = FilterOutput(
                    measures=output.measures, text=rewrite.text, counts=rewrite.counts, columns=output.columns
                )
        if output.text is not None:
            current = current.with_columns(output.text.alias("text"))
            rewritten = True
        if output.columns:
            current = current.with_columns(values.alias(name) for name, values in output.columns.items())
        yield doc_filter, output, current


def left_blank(docs: pl.DataFrame) -> pl.Series:
    """Whether the filters' rewrites left each document's text blank."""
    return blank_text(docs["text"]).fill_null(True)


def apply_filters(docs: pl.DataFrame, filters: list[DocFilter], stage: str = STAGE) -> StepResult:
    """Run ``filters`` in order over ``docs`` (:func:`walk_filters`: every rule measured on the
    text as it entered the stage, rewrites applied in order). Every document is measured by every
    rule, so the stats can count every rule that would fire; a removed document records the first
    rule that fired, with its measured value and threshold, and one that the rewrites left blank
    (and no rule removed) is removed by :data:`EMPTY_AFTER_REWRITE`."""
    n = docs.height
    rule = pl.Series("rule", [None] * n, dtype=pl.Utf8)
    value = pl.Series("value", [None] * n, dtype=pl.Float64)
    threshold = pl.Series("threshold", [None] * n, dtype=pl.Float64)
    counts: Counter = Counter()
    current = docs
    for doc_filter, output, current in walk_filters(docs, filters):
        for name, per_doc in output.counts.items():
            by_source = (
                pl.DataFrame({"source": current["source"], "n": per_doc}).group_by("source").agg(pl.col("n").sum())
            )
            counts[name] += int(per_doc.sum())
            counts.update({f"{name}|{src}": int(k) for src, k in by_source.iter_rows() if k})
        for filter_rule in doc_filter.rules():
            fired = output.measures.select(filter_rule.fires(pl.col(filter_rule.measure))).to_series()
            counts[f"fired|{filter_rule.name}"] += int(fired.sum())
            first = fired & rule.is_null()
            if first.any():
                rule = pl.select(pl.when(first).then(pl.lit(filter_rule.name)).otherwise(rule)).to_series()
                value = pl.select(
                    pl.when(first).then(output.measures[filter_rule.measure].cast(pl.Float64)).otherwise(value)
                ).to_series()
                threshold = pl.select(
                    pl.when(first).then(pl.lit(float(filter_rule.threshold))).otherwise(threshold)
                ).to_series()

    blank = left_blank(current) & rule.is_null()
    if blank.any():
        counts[f"fired|{EMPTY_AFTER_REWRITE}"] += int(blank.sum())
        rule = pl.select(pl.when(blank).then(pl.lit(EMPTY_AFTER_REWRITE)).otherwise(rule)).to_series()
        value = pl.select(pl.when(blank).then(pl.lit(0.0)).otherwise(value)).to_series()
    removed = rule.is_not_null()
    return StepResult(
        kept=current.filter(~removed),
        removed=removed_frame(
            docs.filter(removed), stage, rule.filter(removed), value.filter(removed), threshold.filter(removed)
        ),
        counts=counts,
    )
