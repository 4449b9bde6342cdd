"""Measuring documents again, with the pipeline's own filters and language rules and the run's
config, to show how far from a threshold a document was (the report's "kept, but close" examples
and ``curate inspect``'s verdicts).

:func:`measure_filters` walks the filter chain as the filter stage does
(:func:`pipeline.filters.engine.walk_filters`: every rule measures the text as it entered the
stage, rewrites apply in order) and keeps, per rule, every document's measured value and whether
the rule fires, instead of only the first rule that fired.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from pipeline.config import RunConfig
from pipeline.filters.engine import EMPTY_AFTER_REWRITE, left_blank, walk_filters
from pipeline.filters.registry import FILTERS
from pipeline.formats.step import Rule
from pipeline.lang import RULE_LOW_SCORE, RULE_NOT_KEPT, lang_decisions


@dataclass
class Measured:
    """Per document (rows in input order) and rule (columns named by rule)."""

    rules: list[Rule]
    filter_of: dict[str, str]  # rule name -> filter name
    values: pl.DataFrame  # Float64, null where a rule does not measure a document
    fires: pl.DataFrame  # Boolean
    first: pl.Series  # the rule that removes the document (the first that fired), null when kept
    text_after: pl.Series  # the text as the filters left it
    errors: list[str] = field(default_factory=list)  # filters that could not be rebuilt


def run_filters(config: RunConfig) -> tuple[list, list[str]]:
    """The run's filters, in order, built from its config; a filter that cannot be built (e.g. a
    quality model that is gone) is left out and named in the second list."""
    built, errors = [], []
    for name in config.filter.filters:
        try:
            built.append(FILTERS[name](**config.filter.params.get(name, {})))
        except Exception as error:  # whatever the reason, this filter cannot be measured here
            errors.append(f"{name}: {error}")
    return built, errors


def measure_filters(docs: pl.DataFrame, filters: list) -> Measured:
    """Every rule of ``filters`` measured on ``docs`` (id, text, source, ... as the filter stage
    received them)."""
    if docs.height == 0:  # nothing to measure: the rules alone
        rules = [rule for f in filters for rule in f.rules()]
        empty = pl.DataFrame({r.name: pl.Series([], dtype=pl.Float64) for r in rules})
        return Measured(
            rules=rules,
            filter_of={r.name: f.name for f in filters for r in f.rules()},
            values=empty,
            fires=empty.cast(pl.Boolean),
            first=pl.Series("rule", [], dtype=pl.String),
            text_after=docs["text"] if "text" in docs.columns else pl.Series([], dtype=pl.String),
        )
    current = docs
    rules: list[Rule] = []
    filter_of: dict[str, str] = {}
    values: dict[str, pl.Series] = {}
    fires: dict[str, pl.Series] = {}
    first = pl.Series("rule", [None] * docs.height, dtype=pl.String)
    for doc_filter, output, _ in walk_filters(docs, filters):
        for rule in doc_filter.rules():
            rules.append(rule)
            filter_of[rule.name] = doc_filter.name
            values[rule.name] = output.measures[rule.measure].cast(pl.Float64).alias(rule.name)
            fired = output.measures.select(rule.fires(pl.col(rule.measure))).to_series().alias(rule.name)
            fires[rule.name] = fired
            first = pl.select(pl.when(fired & first.is_null()).then(pl.lit(rule.name)).otherwise(first)).to_series()
    blank = left_blank(current)
    first = (
        pl.select(pl.when(blank & first.is_null()).then(pl.lit(EMPTY_AFTER_REWRITE)).otherwise(first))
        .to_series()
        .alias("rule")
    )
    return Measured(
        rules=rules,
        filter_of=filter_of,
        values=pl.DataFrame(list(values.values())) if values else pl.DataFrame(),
        fires=pl.DataFrame(list(fires.values())) if fires else pl.DataFrame(),
        first=first,
        text_after=current["text"],
    )


def lang_rules(config: RunConfig) -> list[tuple[str, str]]:
    """The language stage's rules: ``(name, description)``."""
    settings = config.lang
    keep = "all languages" if settings.keep is None else ", ".join(settings.keep)
    overrides = ", ".join(f"{k} {v}" for k, v in sorted(settings.min_score_by_lang.items()))
    score = f"score < {settings.min_score}" + (f" (per language: {overrides})" if overrides else "")
    return [(RULE_NOT_KEPT, f"language not in keep ({keep})"), (RULE_LOW_SCORE, score)]


def measure_lang(docs: pl.DataFrame, config: RunConfig) -> pl.DataFrame:
    """The language rules on documents with ``lang`` and ``lang_score``: ``rule`` (null: kept),
    ``value`` (the score) and ``threshold`` (the minimum for its language)."""
    settings = config.lang
    return lang_decisions(docs, settings.keep, settings.min_score, settings.min_score_by_lang)
