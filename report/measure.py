"""The rules of a run, in words, and the language stage's rules applied to documents again, with
the pipeline's own code and the run's config (the report's rule tables and "kept, but close"
examples, ``curate inspect``'s language verdict). The filter stage's verdicts on documents are
read from the run's stored measurements by :mod:`pipeline.stages.verdicts`.
"""

from __future__ import annotations

import polars as pl

from pipeline.config import RunConfig
from pipeline.formats.step import Rule
from pipeline.lang import RULE_LOW_SCORE, RULE_NOT_KEPT, lang_decisions
from pipeline.stages.verdicts import built_filters


def filter_rules(config: RunConfig) -> tuple[list[tuple[Rule, str]], list[str]]:
    """Every rule of the filter stage (the stage's filters', then those only a language runs),
    with its threshold as ``measure op threshold`` and, where a language's settings
    (``[filter.by_lang]``, the built-in profiles) differ, theirs: ``sentence_count < 3 (de: < 1;
    th: < 0)``; a language that does not run the rule's filter says ``off``. The second list
    names filters that could not be built."""
    settings = config.filter
    groups = [(code, *built_filters(settings, code)) for code in [None, *settings.languages()]]
    errors = list(dict.fromkeys(e for _, _, failed in groups for e in failed))
    by_group = [(code, {r.name: r for f in filters for r in f.rules()}) for code, filters, _ in groups]
    every: dict[str, Rule] = {}
    for _, rules in by_group:
        for name, rule in rules.items():
            every.setdefault(name, rule)
    described = []
    for name, rule in every.items():
        stage = by_group[0][1].get(name)
        own = []
        for code, rules in by_group[1:]:
            theirs = rules.get(name)
            if theirs is None and stage is not None:
                own.append(f"{code}: off")
            elif theirs is not None and (stage is None or theirs.threshold != stage.threshold):
                own.append(f"{code}: {theirs.op} {_number(theirs.threshold)}")
        if stage is None:  # a rule only some languages run
            own.append("other languages: off")
        text = f"{rule.measure} {rule.op} {_number(rule.threshold)}" if stage else rule.measure
        text += f" ({'; '.join(own)})" if own else ""
        described.append((rule, text + (f"; counts {rule.counts}" if rule.counts else "")))
    return described, errors


def _number(value: float) -> str:
    return f"{value:.3g}" if value % 1 else f"{int(value)}"


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
