"""``curate calibrate``'s calibration of a run's filter settings (pipeline.stages.calibrate)."""

from __future__ import annotations

import tomllib

import polars as pl
import pytest

from pipeline.config import FilterConfig
from pipeline.formats.configfile import ConfigError
from pipeline.stages.calibrate import calibrate, checked, fragment
from pipeline.stages.steps import filter_settings_step

VOCABULARY = ["river", "stone", "garden", "window", "letter", "morning", "bridge", "market", "winter", "candle"]


def page(words: int) -> str:
    return " ".join(VOCABULARY[i % len(VOCABULARY)] for i in range(words)) + "."


def reference(counts: dict[str, range]) -> pl.DataFrame:
    rows = [
        {"id": f"{lang}/{i}", "text": page(n), "lang": lang, "source": "ref"}
        for lang, sizes in counts.items()
        for i, n in enumerate(sizes)
    ]
    return pl.DataFrame(rows)


SETTINGS = FilterConfig(filters=["gopher_quality"], params={"gopher_quality": {"min_stop_words": 0}})


def removed_by(settings: FilterConfig, docs: pl.DataFrame, rule: str) -> int:
    result = filter_settings_step(settings)(docs)
    return result.removed.filter(pl.col("rule") == rule).height


def test_the_calibrated_config_removes_the_english_share_from_each_language():
    # German pages of fewer words than the English (30 of 100 under Gopher's 50 words, English 10), French
    # of more (5)
    docs = reference({"en": range(40, 140), "de": range(20, 120), "fr": range(45, 145)})
    found = calibrate(docs, SETTINGS, min_docs=50)
    words = {(c.lang, c.param): c for c in found.results if c.param == "min_words"}
    assert words["de", "min_words"].value == 30 and words["fr", "min_words"].value == 55
    assert words["de", "min_words"].rules[0].english_removed == 10
    text = fragment(found, SETTINGS, ["a test"])
    tables = tomllib.loads(text)["filter"]["by_lang"]
    assert tables["de"]["params"]["gopher_quality"]["min_words"] == 30
    assert isinstance(tables["de"]["params"]["gopher_quality"]["min_words"], int)
    calibrated = checked(SETTINGS, text)
    rule = "gopher_quality.word_count_min"
    for lang in ("en", "de", "fr"):
        assert removed_by(calibrated, docs.filter(pl.col("lang") == lang), rule) == 10
    assert removed_by(SETTINGS, docs.filter(pl.col("lang") == "de"), rule) == 30


def test_a_table_of_the_run_keeps_its_own_values_and_a_filter_english_runs_alone_is_left_out():
    settings = FilterConfig(
        filters=["gopher_quality"],
        params={"gopher_quality": {"min_stop_words": 0}},
        by_lang={
            "deu_Latn": {"params": {"gopher_quality": {"max_words": 5000}}},
            "fr": {"filters": ["c4_quality"]},
        },
    )
    docs = reference({"en": range(40, 140), "de": range(20, 120), "fr": range(20, 120)})
    found = calibrate(docs, settings, min_docs=50)
    assert not [c for c in found.results if c.lang == "fr"]  # only the filters both languages run
    text = fragment(found, settings, [])
    table = tomllib.loads(text)["filter"]["by_lang"]["deu_Latn"]["params"]["gopher_quality"]
    assert table["max_words"] == 5000 and table["min_words"] == 30
    assert checked(settings, text).by_lang["deu_Latn"].params["gopher_quality"]["max_words"] == 5000


def test_languages_with_too_little_reference_are_left_as_they_are():
    docs = reference({"en": range(40, 140), "de": range(20, 40), "xx": range(20, 120)})
    found = calibrate(
        docs.with_columns(pl.when(pl.col("lang") == "xx").then(None).otherwise(pl.col("lang")).alias("lang")),
        SETTINGS,
        min_docs=50,
    )
    assert found.skipped == ["de"] and found.unlabelled == 100 and not found.results
    with pytest.raises(ConfigError, match="fewer than 50; add reference text"):
        calibrate(reference({"en": range(40, 60), "de": range(20, 120)}), SETTINGS, min_docs=50)
