"""Language codes in the config: checked as the config is read against the codes the language-ID
model gives, aliases resolved to one language, each mistake one line naming the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.api import load_config as api_load_config
from pipeline.config import parse_config
from pipeline.formats.configfile import ConfigError


def config(tmp_path: Path, **sections) -> dict:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "hello"}\n')
    return {
        "run_dir": str(tmp_path / "run"),
        "sources": [{"name": "web", "reader": "jsonl", "paths": [str(source)]}],
        **sections,
    }


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_an_unknown_key_in_a_by_lang_table_is_one_line_with_a_suggestion(tmp_path):
    data = config(tmp_path, filter={"by_lang": {"en": {"filterz": ["c4_quality"]}}})
    assert (
        error_of(data) == "filter.by_lang.en.filterz: unknown key; did you mean 'filters'? (allowed: filters, params)"
    )
    with pytest.raises(ConfigError, match="filter.by_lang.en.filterz: unknown key"):
        api_load_config(data)  # the Python API raises the same ConfigError, not a KeyError


@pytest.mark.parametrize(
    "sections, message",
    [
        (
            {"lang": {"keep": ["english"]}},
            "lang.keep: 'english' is not a language code; did you mean 'en'?",
        ),
        ({"lang": {"keep": ["englsh"]}}, "lang.keep: 'englsh' is not a language code; did you mean 'en'?"),
        ({"lang": {"keep": ["xx"]}}, "lang.keep: lid.176.ftz gives no language 'xx'"),
        ({"lang": {"keep": ["enn"]}}, "lang.keep: lid.176.ftz gives no language 'enn'; did you mean 'en'?"),
        (
            {"lang": {"keep": []}},
            "lang.keep: an empty list keeps no document; omit keep to keep every language",
        ),
        (
            {"lang": {"keep": ["zh", "cmn_Hani"]}},
            "lang.keep: 'zh' and 'cmn_Hani' name one language (zh); keep one of them",
        ),
        (
            {"lang": {"min_score_by_lang": {"en": 0.3, "eng_Latn": 0.5}}},
            "lang.min_score_by_lang: 'en' and 'eng_Latn' name one language (en); keep one of them",
        ),
        ({"lang": {"min_score_by_lang": {"englsh": 0.5}}}, "lang.min_score_by_lang: 'englsh' is not a language code"),
        ({"filter": {"langs": ["englsh"]}}, "filter.langs: 'englsh' is not a language code; did you mean 'en'?"),
        (
            {"filter": {"langs": []}},
            "filter.langs: an empty list applies the stage's rules to no document; omit langs",
        ),
        ({"filter": {"exclude_langs": ["zz"]}}, "filter.exclude_langs: lid.176.ftz gives no language 'zz'"),
        (
            {"filter": {"langs": ["en"], "exclude_langs": ["eng"]}},
            "filter.langs: 'en' is also in exclude_langs ('eng'); keep it in one of them",
        ),
        (
            {"filter": {"by_lang": {"es\n": {}}}},
            "filter.by_lang: 'es\\n' has whitespace or control characters in it; write 'es'",
        ),
        (
            {"filter": {"by_lang": {"deutsch": {}}}},
            "filter.by_lang: 'deutsch' is not a language code; did you mean 'de'?",
        ),
        (
            {"filter": {"by_lang": {"zh": {}, "zho_Hans": {}}}},
            "filter.by_lang: 'zh' and 'zho_Hans' name one language (zh); keep one of them",
        ),
        ({"lines": {"langs": ["english"]}}, "lines.langs: 'english' is not a language code; did you mean 'en'?"),
        ({"lines": {"exclude_langs": ["en "]}}, "lines.exclude_langs: 'en ' has whitespace or control characters"),
    ],
)
def test_a_language_code_that_names_nothing_is_refused_with_the_nearest(tmp_path, sections, message):
    assert message in error_of(config(tmp_path, **sections))


def test_aliases_resolve_to_the_code_the_model_gives(tmp_path):
    # lid.176 labels English "en" and Chinese "zh": the other spellings of them are the same languages.
    data = config(
        tmp_path,
        lang={"keep": ["eng_Latn", "zho_Hans", "und"], "min_score_by_lang": {"eng": 0.5, "cmn_Hani": 0.4}},
        filter={"langs": ["en-GB", "zh"], "exclude_langs": ["deu"], "by_lang": {"eng_Latn": {}}},
    )
    parsed = parse_config(data)
    assert parsed.lang.keep == ["eng_Latn", "zho_Hans", "und"]  # the config as written


def test_the_lang_stage_keeps_by_language_whatever_the_spelling():
    import polars as pl

    from pipeline.lang import RULE_LOW_SCORE, RULE_NOT_KEPT, lang_decisions

    docs = pl.DataFrame({"lang": ["en", "zh", "de", "eng_Latn", "und"], "lang_score": [0.9, 0.3, 0.9, 0.9, 0.0]})
    out = lang_decisions(docs, keep=["eng_Latn", "cmn_Hani"], min_score=0.5, min_score_by_lang={"zho_Hans": 0.2})
    assert out["rule"].to_list() == [None, None, RULE_NOT_KEPT, None, RULE_NOT_KEPT]
    assert out["threshold"].to_list() == [0.5, 0.2, None, 0.5, None]
    out = lang_decisions(docs, keep=None, min_score=0.5, min_score_by_lang={"eng": 0.95})
    assert out["rule"].to_list() == [RULE_LOW_SCORE, RULE_LOW_SCORE, None, RULE_LOW_SCORE, RULE_LOW_SCORE]


def test_codes_are_checked_against_the_labels_of_the_model_given(tmp_path, monkeypatch):
    # A GlotLID-style model labels eng_Latn: "en" and "eng" name it, and the nearest is in its spelling.
    import pipeline.config as config_module

    labels = ("eng_Latn", "deu_Latn", "zho_Hans", "zho_Hant")
    monkeypatch.setattr(config_module, "_model_labels", lambda *args: labels)
    parse_config(config(tmp_path, lang={"keep": ["eng", "zh-Hant"]}, filter={"langs": ["en"], "by_lang": {"de": {}}}))
    message = error_of(config(tmp_path, lang={"keep": ["fr"]}))
    assert message.startswith("lang.keep: lid.176.ftz gives no language 'fr'; use one of the 3 languages it gives")
    assert "did you mean 'eng_Latn'?" in error_of(config(tmp_path, filter={"langs": ["enn"]}))


def test_codes_of_a_stage_that_does_not_run_are_not_checked_against_the_model(tmp_path):
    # An experiment variant turns stages off and keeps the rest of the config.
    parse_config(config(tmp_path, lang={"enabled": False, "keep": ["tlh"]}, filter={"langs": ["tlh"]}))
    with pytest.raises(ConfigError, match="lang.keep: 'klingon' is not a language code"):
        parse_config(config(tmp_path, lang={"enabled": False, "keep": ["klingon"]}))


def test_calibrate_english_is_one_line_for_a_code_with_a_newline():
    import polars as pl

    from pipeline.config import FilterConfig
    from pipeline.stages.calibrate import calibrate

    reference = pl.DataFrame({"id": ["a"], "text": ["A page."], "lang": ["en"], "source": ["ref"]})
    with pytest.raises(ConfigError) as error:
        calibrate(reference, FilterConfig(), english="en\n")
    assert str(error.value) == "--english: 'en\\n' has whitespace or control characters in it; write 'en'"


def test_the_experiments_high_resource_languages_are_codes_matched_by_language():
    import polars as pl

    from experiment.config import LanguagesConfig
    from experiment.results import language_metrics
    from pipeline.formats.configfile import validate_model

    with pytest.raises(ConfigError, match=r"^high_resource: 'english' is not a language code; did you mean 'en'\?"):
        validate_model(LanguagesConfig, {"high_resource": ["english"]})
    documents = pl.DataFrame({"lang": ["en", "sw"], "clean": [True, True], "bytes": [100, 100], "nats": [69.3, 138.6]})
    metrics = language_metrics(documents, ["eng"])  # lid.176 labels English "en"
    assert metrics["lang_bpb/high-resource"] == pytest.approx(metrics["lang_bpb/en"])
    assert metrics["lang_bpb/low-resource"] == pytest.approx(metrics["lang_bpb/sw"])


# Individual languages GlotLID and OpenLID label where lid.176 labels the macrolanguage (or another
# code): each names lid.176's language.
INDIVIDUAL_CODES = {
    "nb": "no",
    "nob": "no",
    "nob_Latn": "no",
    "nor": "no",
    "nn": "nn",
    "nno_Latn": "nn",
    "arb_Arab": "ar",
    "cmn_Hani": "zh",
    "pes_Arab": "fa",
    "prs_Arab": "fa",
    "zsm_Latn": "ms",
    "zlm_Latn": "ms",
    "ekk_Latn": "et",
    "lvs_Latn": "lv",
    "swh_Latn": "sw",
    "uzn_Latn": "uz",
    "azj_Latn": "az",
    "azb_Arab": "azb",
    "khk_Cyrl": "mn",
    "npi_Deva": "ne",
    "ory_Orya": "or",
    "pbt_Arab": "ps",
    "quy_Latn": "qu",
    "ydd_Hebr": "yi",
    "kmr_Latn": "ku",
    "ckb_Arab": "ckb",
    "plt_Latn": "mg",
    "gug_Latn": "gn",
    "kpv_Cyrl": "kv",
    "iw": "he",
    "in": "id",
    "ji": "yi",
    "jw": "jv",
    "mo": "ro",
}


@pytest.mark.parametrize("code, language", sorted(INDIVIDUAL_CODES.items()))
def test_individual_languages_name_the_language_lid176_gives(code, language):
    from pipeline.formats.langcodes import LID176_LABELS, check_model_codes, parse_lang

    assert parse_lang(code)[0] == language
    assert language in LID176_LABELS
    check_model_codes([code], "lang.keep", LID176_LABELS, "lid.176.ftz")


@pytest.mark.parametrize("label", ["als", "sh", "bh", "no", "nn", "azb", "arz", "pnb"])
def test_lid176s_own_labels_stay_themselves(label):
    # lid.176 labels by Wikipedia's codes: als is Alemannic there, not ISO's Tosk Albanian.
    from pipeline.formats.langcodes import parse_lang

    assert parse_lang(label)[0] == label


def test_norwegian_bokmal_is_kept_as_lid176s_norwegian(tmp_path):
    parse_config(config(tmp_path, lang={"keep": ["nb", "nn"]}, filter={"by_lang": {"nob": {}}}))
    message = error_of(config(tmp_path, lang={"keep": ["nb", "no"]}))
    assert message == "lang.keep: 'nb' and 'no' name one language (no); keep one of them"
