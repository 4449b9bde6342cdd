"""Thresholds per language from reference text, as FineWeb-2 (Penedo et al. 2025) sets them: a
rule's threshold for a language is the one that removes from that language's reference text the
share of documents the English threshold removes from English reference text.

A filter's threshold parameters (its ``thresholds``) are found with the rules each one sets
(:func:`threshold_settings`: the rules that go when the parameter is None). For one rule,
:func:`calibrated` looks at every threshold the language's measured values allow: each removes a
number of documents, and the one chosen removes the number nearest the English share of the
language's documents; among the thresholds that remove that number, the one nearest the English
threshold, rounded to two significant digits (more where two would leave them). So a rule whose
English threshold already removes that share keeps it, and a calibrated value reads as a person
would write it. A parameter that sets several rules (Gopher's ``max_symbol_word_ratio``: ``#``
and ellipses per word) takes the most lenient of their calibrated values.

A share measured on few documents is a rough one: the caller sets the least reference a language
needs (``curate calibrate --min-docs``), and every result carries its counts.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass

import numpy as np
from annotated_types import Ge, Gt, Interval, Le, Lt

from pipeline.filters.registry import FILTERS
from pipeline.formats.step import Rule

# The most significant digits a calibrated threshold is written with (at least two).
SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class Setting:
    """One threshold parameter of a filter and what it may be."""

    filter: str
    param: str
    value: float  # its value in the settings it was read from
    rules: tuple[Rule, ...]  # the rules it sets
    integer: bool  # a count: the calibrated value is a whole number
    low: float | None  # the bounds its type gives it (pipeline.filters.params)
    high: float | None


def _bounds(hint) -> tuple[bool, float | None, float | None]:
    """Whether a parameter's type is an integer, and its bounds, from its annotation."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is typing.Union else []
    hint = args[0] if len(args) == 1 else hint
    base, low, high = hint, None, None
    if typing.get_origin(hint) is typing.Annotated:
        base = typing.get_args(hint)[0]
        for bound in hint.__metadata__:
            if isinstance(bound, Interval):
                low = bound.ge if bound.ge is not None else bound.gt
                high = bound.le if bound.le is not None else bound.lt
            elif isinstance(bound, (Ge, Gt)):
                low = bound.ge if isinstance(bound, Ge) else bound.gt
            elif isinstance(bound, (Le, Lt)):
                high = bound.le if isinstance(bound, Le) else bound.lt
    return base is int, low, high


def threshold_settings(name: str, params: dict) -> list[Setting]:
    """The threshold parameters of filter ``name`` built with ``params`` that are set (not None),
    each with the rules it sets: the rules of the filter that are gone when it is None."""
    cls = FILTERS[name]
    built = cls(**params)
    rules = {rule.name: rule for rule in built.rules()}
    hints = typing.get_type_hints(cls.__init__, include_extras=True)
    found = []
    for param in getattr(cls, "thresholds", ()):
        value = getattr(built, param, None)
        if value is None:
            continue
        left = {rule.name for rule in cls(**{**params, param: None}).rules()}
        own = tuple(rule for name_, rule in rules.items() if name_ not in left)
        if own:
            integer, low, high = _bounds(hints.get(param))
            found.append(Setting(name, param, float(value), own, integer, low, high))
    return found


def removed(values: np.ndarray, op: str, threshold: float) -> int:
    """How many of ``values`` (measured, no NaN) ``op threshold`` removes."""
    fired = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op]
    return int(fired(values, threshold).sum())


def _roundest(low: float, high: float, low_open: bool, high_open: bool, near: float, integer: bool) -> float | None:
    """``near`` if the interval holds it, else the interval's end nearest it rounded into the
    interval to two significant digits, or more where two leave it (a whole number, for an
    ``integer``); None when the interval holds no such number."""

    def inside(x: float) -> bool:
        above = x > low if low_open else x >= low
        below = x < high if high_open else x <= high
        return above and below

    if inside(near) and (not integer or float(near).is_integer()):
        return near
    end, inward = (low, 1) if near <= low else (high, -1)
    if not math.isfinite(end):
        return None
    magnitude = math.floor(math.log10(abs(end))) if end else 0
    for digits in range(2, SIGNIFICANT_DIGITS + 1):
        unit = 10.0 ** (magnitude - digits + 1)
        unit = max(unit, 1.0) if integer else unit
        rounded = (math.ceil(end / unit) if inward > 0 else math.floor(end / unit)) * unit
        for value in (rounded, rounded + inward * unit):  # one unit in, where the end is open
            value = round(value, 12)
            if inside(value):
                return value
    return None


def calibrated(
    rule: Rule,
    english: np.ndarray,
    english_docs: int,
    values: np.ndarray,
    docs: int,
    setting: Setting,
) -> float | None:
    """The threshold of ``rule`` for a language whose measured values are ``values`` (of ``docs``
    documents; the others are not measured, and no rule removes them), given English's measured
    values ``english`` of ``english_docs`` documents at the English threshold ``rule.threshold``
    (module docstring). None when no value within the parameter's bounds will do."""
    target = removed(english, rule.op, rule.threshold) / english_docs * docs
    distinct, counts = np.unique(values, return_counts=True)
    below = np.concatenate([[0], np.cumsum(counts)])
    # Thresholds between distinct[j-1] and distinct[j] (j = 0 .. m, open-ended at the ends) all
    # remove the same count: below[j] (for < and <=) or len(values) - below[j] (for > and >=).
    edges = np.concatenate([[-math.inf], distinct, [math.inf]])
    low_open = rule.op in ("<", ">=")  # which end of each interval belongs to it
    low_bound = -math.inf if setting.low is None else setting.low
    high_bound = math.inf if setting.high is None else setting.high
    options = []
    for j in range(len(distinct) + 1):
        count = below[j] if rule.op in ("<", "<=") else len(values) - below[j]
        low, high = edges[j], edges[j + 1]
        lo_open, hi_open = low_open, not low_open
        if low_bound > low or (low_bound == low and lo_open):
            low, lo_open = low_bound, False
        if high_bound < high or (high_bound == high and hi_open):
            high, hi_open = high_bound, False
        if low > high or (low == high and (lo_open or hi_open)):
            continue
        value = _roundest(low, high, lo_open, hi_open, rule.threshold, setting.integer)
        if value is not None:
            options.append((abs(count - target), abs(value - rule.threshold), value))
    return min(options)[2] if options else None


def most_lenient(op: str, values: list[float]) -> float:
    """Of several thresholds of rules with ``op``, the one that removes least."""
    return min(values) if op in ("<", "<=") else max(values)
