"""The step of each shard stage, built from a run's config (see pipeline.stages.shard): language
identification, and the filter chain with its licence rules and scope."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import FilterConfig, RunConfig
from pipeline.filters.engine import (
    NOTE,
    apply_filters,
    attribute_columns,
    decide,
    decide_groups,
    from_attributes,
    measure,
    measure_groups,
    to_attributes,
)
from pipeline.filters.registry import build_filters, filter_notes
from pipeline.filters.scope import Scope
from pipeline.formats.documents import StageDir, licence_series
from pipeline.formats.langcodes import lang_languages, parse_lang
from pipeline.formats.step import Step, StepResult, removed_frame
from pipeline.lang import LanguageIdentifier, identify_languages, lang_decisions
from pipeline.lang.model import lid_model_path
from pipeline.licence import LicenceRule
from pipeline.stages.attributes import UnitAttributes
from pipeline.stages.digests import measured_with


@lru_cache(maxsize=4)
def _identifier(model: str, sample_chars: int, sample_spans: int) -> LanguageIdentifier:
    return LanguageIdentifier(model, sample_chars=sample_chars, sample_spans=sample_spans)


def lang_step(config: RunConfig) -> Step:
    settings = config.lang
    identifier = _identifier(str(lid_model_path(settings.model)), settings.sample_chars, settings.sample_spans)

    def step(docs: pl.DataFrame) -> StepResult:
        docs = identify_languages(docs, identifier)
        decisions = lang_decisions(docs, settings.keep, settings.min_score, settings.min_score_by_lang)
        removed = decisions["rule"].is_not_null()
        return StepResult(
            kept=docs.filter(~removed),
            removed=removed_frame(
                docs.filter(removed),
                "lang",
                decisions["rule"].filter(removed),
                decisions["value"].filter(removed),
                decisions["threshold"].filter(removed),
            ),
        )

    return step


class FilterChain:
    """The step applying ``filters`` to a batch (pipeline.filters.engine): measured, or, where the
    unit's stored measurements hold the batch (``attributes``, pipeline.stages.attributes), read
    back from them and decided again with the filters' thresholds. Documents of a language in
    ``by_lang`` (a language as :func:`~pipeline.formats.langcodes.parse_lang` reads it, by its filters)
    are measured and judged with that language's filters instead. The result carries the batch's
    measurements for the unit to store."""

    def __init__(self, filters: list, stage: str, attributes: UnitAttributes | None = None, by_lang=None):
        self.filters, self.stage, self.attributes = filters, stage, attributes
        self.by_lang: dict[str, list] = {parse_lang(code)[0]: f for code, f in (by_lang or {}).items()}
        if attributes is not None:  # a stored file lacking a column these filters decide on is measured again
            names = [f.name for f in filters]
            every_batch = [fs for fs in self.by_lang.values() if [f.name for f in fs] != names]  # see groups()
            attributes.required = attribute_columns([*filters, *(f for fs in every_batch for f in fs)])

    def groups(self, docs: pl.DataFrame) -> list[tuple[np.ndarray, list]] | None:
        """The rows of each language with filters of its own, after those of every other language
        (with the stage's filters); None when every document takes the stage's filters. A language
        with no document in the batch is left out unless its filters are others than the stage's
        (they would add columns: every batch must have the same)."""
        if not self.by_lang:
            return None
        langs = lang_languages(docs["lang"]) if "lang" in docs.columns else pl.Series([None] * docs.height)
        langs = langs.cast(pl.String).to_numpy()
        names = [f.name for f in self.filters]
        own = [(np.flatnonzero(langs == lang), filters) for lang, filters in self.by_lang.items()]
        own = [(rows, filters) for rows, filters in own if len(rows) or [f.name for f in filters] != names]
        if not own:
            return None
        return [(np.flatnonzero(~np.isin(langs, list(self.by_lang))), self.filters), *own]

    def __call__(self, docs: pl.DataFrame) -> StepResult:
        stored = None if self.attributes is None else self.attributes.rows(docs)
        groups = self.groups(docs)
        if groups is None:
            measured = measure(docs, self.filters) if stored is None else from_attributes(docs, stored)
            result = decide(docs, measured, self.filters, self.stage)
        else:
            measured = measure_groups(docs, groups) if stored is None else from_attributes(docs, stored)
            result = decide_groups(docs, measured, groups, self.stage)
        if self.attributes is not None:
            result.attributes = to_attributes(docs, measured) if stored is None else stored
        return result


def scoped(step: Step, scope: Scope) -> Step:
    """``step`` applied to the documents in ``scope`` (pipeline.filters.scope); the others pass
    through unchanged, after the ones in scope."""
    if scope.everything:
        return step

    def scoped_step(docs: pl.DataFrame) -> StepResult:
        in_scope = scope.mask(docs)
        result = step(docs.filter(in_scope))
        # Columns a filter adds (e.g. pii_replacements) are null for documents out of scope.
        result.kept = pl.concat([result.kept, docs.filter(~in_scope)], how="diagonal_relaxed")
        return result

    return scoped_step


def scoped_filters(filters: list, scope: Scope) -> Step:
    """The step applying ``filters`` to the documents in ``scope``."""
    return scoped(lambda docs: apply_filters(docs, filters, scope.stage), scope)


def licence_step(rule: LicenceRule, then: Step, stage: str) -> Step:
    """The step removing documents by ``rule`` (every source), then running ``then`` on the rest."""

    def step(docs: pl.DataFrame) -> StepResult:
        rules = rule.rules(licence_series(docs))
        gone = rules.is_not_null()
        result = then(docs.filter(~gone))
        if not gone.any():
            return result
        dropped = docs.filter(gone)
        nothing = pl.Series([None] * dropped.height, dtype=pl.Float64)
        removed = removed_frame(dropped, stage, rules.filter(gone), nothing, nothing)
        result.removed = pl.concat([removed, result.removed])
        result.counts.update({f"fired|{name}": n for name, n in rules.filter(gone).value_counts().iter_rows()})
        return result

    return step


def filter_step(config: RunConfig, attributes: UnitAttributes | None = None) -> Step:
    return filter_settings_step(config.filter, attributes)


def filter_settings_step(settings: FilterConfig, attributes: UnitAttributes | None = None) -> Step:
    """The filter stage's step from its settings: the licence rules, then the filters in order
    (from the unit's stored measurements where they hold the batch)."""
    by_lang = {code: build_filters(*settings.for_lang(code)) for code in settings.languages()}
    chain = FilterChain(build_filters(settings.filters, settings.params), "filter", attributes, by_lang)
    step = scoped(chain, settings.scope())
    rule = settings.licence_rule()
    return step if rule is None else licence_step(rule, step, "filter")


class KeptMeasurements:
    """A :class:`FilterChain`'s ``attributes`` that reads nothing back and keeps each batch's
    measurements on the result (``StepResult.attributes``), for a caller outside a run that
    wants the filters' notes (:func:`with_matches`)."""

    required: set[str] = set()

    def rows(self, docs: pl.DataFrame) -> None:
        return None


def records_notes(settings: FilterConfig) -> bool:
    """Whether a filter of the stage or of a language records notes (the word and URL lists)."""
    names = [*settings.filters, *(n for code in settings.languages() for n in settings.for_lang(code)[0])]
    return any(filter_notes(name) for name in names)


def with_matches(removed: pl.DataFrame, measured: pl.DataFrame | None) -> pl.DataFrame:
    """``removed`` with a ``match`` column: the note of the filter whose rule removed each
    document (the list entry it matched), from its measurements ``measured`` (to_attributes'
    frame); null where that filter noted nothing."""
    notes = [c for c in (measured.columns if measured is not None else []) if c.startswith(NOTE)]
    match = pl.Series("match", [None] * removed.height, dtype=pl.String)
    if not notes or not removed.height:
        return removed.with_columns(match)
    found = removed.select("id").join(measured.select("id", *notes), on="id", how="left", maintain_order="left")
    owner = removed["rule"].str.split(".").list.first()
    for column in notes:
        mine = (owner == column.removeprefix(NOTE).split(".", 1)[0]) & match.is_null()
        match = pl.select(pl.when(mine).then(found[column]).otherwise(match)).to_series().alias("match")
    return removed.with_columns(match)


def unit_attributes(stage_name: str, stage: StageDir, in_path: Path, config: RunConfig) -> UnitAttributes | None:
    """Where a unit of ``stage_name`` stores its measurements (the filter stage's; None for others)."""
    if stage_name != "filter" or not config.filter.store_measures:
        return None
    return UnitAttributes(stage, in_path, measured_with(config))


def build_step(stage: str, config: RunConfig, attributes: UnitAttributes | None = None) -> Step:
    """The step of a shard stage's unit (with its stored measurements, see :func:`unit_attributes`)."""
    if stage == "filter":
        return filter_step(config, attributes)
    return {"lang": lang_step}[stage](config)
