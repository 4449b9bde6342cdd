"""The threshold of a rule per language from reference values (pipeline.filters.calibrate)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.filters.calibrate import _roundest, calibrated, most_lenient, removed, threshold_settings


def setting(name: str, param: str, params: dict | None = None):
    return next(s for s in threshold_settings(name, params or {}) if s.param == param)


def test_each_threshold_parameter_names_the_rules_it_sets_and_its_type():
    words = setting("gopher_quality", "min_words")
    assert [r.name for r in words.rules] == ["gopher_quality.word_count_min"] and words.integer
    assert (words.value, words.low, words.high) == (50.0, 0, None)
    symbols = setting("gopher_quality", "max_symbol_word_ratio")
    assert [r.name for r in symbols.rules] == [
        "gopher_quality.hash_to_word_ratio",
        "gopher_quality.ellipsis_to_word_ratio",
    ]
    alpha = setting("gopher_quality", "min_alpha_words_ratio")
    assert not alpha.integer and (alpha.low, alpha.high) == (0, 1)
    # a rule turned off has nothing to calibrate
    assert "min_words" not in {s.param for s in threshold_settings("gopher_quality", {"min_words": None})}
    assert {s.param for s in threshold_settings("c4_quality", {})} == {"min_sentences"}


def test_a_language_measured_like_english_keeps_english_thresholds():
    rule_setting = setting("gopher_quality", "min_words")
    english = np.arange(10.0, 110.0)  # 40 of 100 under 50
    assert calibrated(rule_setting.rules[0], english, 100, english.copy(), 100, rule_setting) == 50


def test_a_threshold_moves_to_remove_the_english_share():
    rule_setting = setting("gopher_quality", "min_words")
    rule = rule_setting.rules[0]
    english = np.arange(40.0, 140.0)  # 10 of 100 under 50
    shorter = np.arange(20.0, 120.0)  # the same texts with fewer words: 30 under 50
    value = calibrated(rule, english, 100, shorter, 100, rule_setting)
    assert removed(shorter, "<", value) == 10 and value == 30
    # documents the rule does not measure count in the language's documents, never removed
    assert calibrated(rule, english, 100, shorter[:50], 200, rule_setting) == 40  # 20 of 200


def test_a_calibrated_threshold_is_a_round_number_within_its_bounds():
    rule_setting = setting("gopher_quality", "min_alpha_words_ratio")  # remove below 0.8
    rule = rule_setting.rules[0]
    english = np.array([0.9, 0.95, 0.7])  # 1 of 3
    value = calibrated(rule, english, 3, np.array([0.5123, 0.5561, 0.6]), 3, rule_setting)
    assert value == 0.55  # removes 0.5123 only: the end nearest 0.8 (0.5561), rounded into the interval
    # English removes none: the least threshold removing none of the language's
    bullet = setting("gopher_quality", "max_bullet_lines_ratio")  # remove above 0.9
    assert calibrated(bullet.rules[0], np.array([0.1, 0.2]), 2, np.array([0.95, 0.97]), 2, bullet) == 0.97


def test_roundest_prefers_the_english_value_then_two_significant_digits():
    assert _roundest(0.0, 1.0, False, False, 0.3, False) == 0.3
    assert _roundest(0.0, 2.71, False, False, 3.0, False) == 2.7
    assert _roundest(0.1267, 0.2, False, True, 0.1, False) == 0.13
    assert _roundest(0.1234, 0.1238, True, False, 0.1, False) == 0.1235  # more digits where two leave it
    assert _roundest(0.0, 0.05, False, True, 0.1, False) == 0.049  # 0.05 itself is not in
    assert _roundest(5.0, 8.0, True, False, 50.0, True) == 8
    assert _roundest(5.2, 5.8, False, False, 50.0, True) is None  # no whole number inside
    assert most_lenient("<", [3.0, 2.0]) == 2.0 and most_lenient(">", [0.1, 0.3]) == 0.3


values = st.lists(st.integers(0, 40).map(lambda i: i / 40), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(english=values, theirs=values, op=st.sampled_from(["<", "<=", ">", ">="]), at=st.integers(0, 40))
def test_no_threshold_in_bounds_comes_nearer_the_english_share(english, theirs, op, at):
    rule_setting = setting("gopher_quality", "min_alpha_words_ratio")
    rule = type(rule_setting.rules[0])("x.y", "y", op, at / 40)
    english, theirs = np.array(english), np.array(theirs)
    value = calibrated(rule, english, len(english), theirs, len(theirs), rule_setting)
    target = removed(english, op, rule.threshold) / len(english) * len(theirs)
    # every threshold that could matter: each value, and a point on either side of it, in [0, 1]
    candidates = [c for v in theirs for c in (v - 1e-9, v, v + 1e-9) if 0 <= c <= 1] + [0.0, 1.0]
    best = min(abs(removed(theirs, op, c) - target) for c in candidates)
    assert value is not None and 0 <= value <= 1
    assert abs(removed(theirs, op, value) - target) == pytest.approx(best)
