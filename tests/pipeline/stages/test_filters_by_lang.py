"""[filter.by_lang.<code>]: the documents of a language are measured and judged with that
language's filters and parameters, the others with the stage's, in one batch and in its order."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.config import parse_config
from pipeline.filters.engine import apply_filters
from pipeline.filters.registry import build_filters
from pipeline.formats.configfile import ConfigError
from pipeline.stages.registry import filter_settings_step
from pipeline.stages.rerun import plan_run
from tests.helpers import curate_in_process, stage_outputs, write_jsonl

THAI = "วันนี้อากาศดีมาก เราไปเดินเล่นที่สวนสาธารณะ มีคนมากมายวิ่งออกกำลังกายอยู่ที่นั่น"  # no sentence mark
ENGLISH = " ".join(["The weather is fine today, and we walked in the park for an hour with the dog."] * 4)


def batch(texts_langs: list[tuple[str, str | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(len(texts_langs))],
            "text": [t for t, _ in texts_langs],
            "source": ["web"] * len(texts_langs),
            "lang": [lang for _, lang in texts_langs],
        },
        schema_overrides={"lang": pl.String},
    )


def settings(by_lang: dict, params: dict | None = None):
    sources = [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}]
    filters = {"filters": ["c4_quality", "gopher_quality"], "params": params or {}, "by_lang": by_lang}
    return parse_config({"run_dir": "runs/x", "sources": sources, "filter": filters}).filter


def test_a_languages_own_rules_judge_its_documents_and_the_others_keep_the_stages():
    docs = batch([(ENGLISH, "en"), (THAI, "th"), (THAI, "tha_Thai"), ("Too short.", "en"), (THAI, None)])
    thai = {"th": {"params": {"c4_quality": {"min_sentences": 0, "filter_no_terminal_punct": False}}}}
    result = filter_settings_step(settings(thai))(docs)
    assert result.kept["id"].to_list() == ["d0", "d1", "d2"]  # in the batch's order
    removed = dict(zip(result.removed["id"], result.removed["rule"]))
    assert removed == {"d3": "c4_quality.min_sentences", "d4": "c4_quality.min_sentences"}  # no lang: the stage's
    assert result.kept["text"].to_list()[1] == THAI  # the Thai line is no longer dropped for its end
    # Each group is exactly what its own filters make of it alone.
    alone = apply_filters(docs[[1, 2]], build_filters(*settings(thai).for_lang("th")))
    assert result.kept.filter(pl.col("lang") != "en").equals(alone.kept)
    assert result.counts["fired|c4_quality.min_sentences"] == 2


def test_a_language_may_run_other_filters():
    docs = batch([(ENGLISH, "en"), (THAI, "th")])
    step = filter_settings_step(settings({"th": {"filters": ["gopher_quality"]}}))
    result = step(docs)
    assert result.kept["id"].to_list() == ["d0", "d1"]
    assert "fired|c4_quality.min_sentences" in result.counts


@pytest.mark.parametrize(
    ("by_lang", "message"),
    [
        ({"th": {"params": {"c4_quality": {"min_sentence": 1}}}}, "filter.by_lang.th.params.c4_quality.min_sentence"),
        ({"th": {"filters": ["c4"]}}, "by_lang.th: unknown filter 'c4'"),
        ({"zh": {}, "zho_Hans": {}}, "'zh' and 'zho_Hans' name one language"),
        ({"??": {}}, "by_lang: '??' is not a language code"),
    ],
)
def test_a_wrong_by_lang_table_is_one_line_naming_it(by_lang, message):
    with pytest.raises(ConfigError, match=message.replace("?", r"\?").replace(".", r"\.")):
        settings(by_lang)


def test_a_languages_threshold_changed_decides_again_to_the_bytes_of_a_fresh_run(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in [ENGLISH * 3, THAI * 3, ENGLISH, THAI] * 20])

    def config(run: str, min_sentences):
        thai = {"th": {"params": {"c4_quality": {"min_sentences": min_sentences}}}}
        return parse_config(
            {
                "run_dir": str(tmp_path / run),
                "sources": [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
                "filter": {"by_lang": thai},
                "dedup": {"enabled": False},
                "tokenize": {"enabled": False},
            }
        )

    first = curate_in_process(config("run", 3))
    assert first["filter"]["languages"]["th"]["docs_out"] == 0  # C4 removes every Thai line (no marks)
    changed = config("run", 0)
    assert [str(p) for p in plan_run(changed).stages][2].startswith("filter: re-decides from its stored measurements")
    again = curate_in_process(changed)
    fresh = curate_in_process(config("fresh", 0))
    assert again == json.loads(json.dumps(fresh).replace("/fresh/", "/run/"))
    assert stage_outputs(tmp_path / "run") == stage_outputs(tmp_path / "fresh")


def test_langs_and_exclude_langs_scope_the_filters_and_the_others_pass_through():
    from pipeline.filters.scope import Scope

    docs = batch([(THAI, "th"), ("Too short.", "en"), ("Too short.", "eng_Latn"), ("Too short.", None)])
    only_english = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"langs": ["en"]},
        }
    ).filter
    result = filter_settings_step(only_english)(docs)
    assert sorted(result.removed["id"]) == ["d1", "d2"]  # eng_Latn is English; no language: out of scope
    assert result.kept["text"].to_list() == [THAI, "Too short."]  # unchanged
    no_thai = Scope("filter", exclude_langs=("tha",))
    assert no_thai.mask(docs).to_list() == [False, True, True, True]
    assert no_thai.outside("web", "th") == "its language (th) is in filter.exclude_langs"
    assert Scope("lines", ("news",), ("zh",)).outside("web", "zh") == "its source is not in lines.sources"
    assert Scope("lines", None, ("zh",)).outside("web", None) == "its language (none) is not in lines.langs"
    assert Scope("lines", ("web",), ("zh", "ja")).describe() == "sources web; languages zh, ja"


def test_the_lines_stage_leaves_a_language_it_excludes_alone(tmp_path):
    footer = "Share this page with your friends and family today"
    english = [f"Article {i} is about gardens and the weather in spring.\n{footer}" for i in range(30)]
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in english])
    config = parse_config(
        {
            "run_dir": str(tmp_path / "run"),
            "sources": [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
            "lang": {"enabled": False},
            "filter": {"enabled": False},
            "dedup": {"enabled": False},
            "tokenize": {"enabled": False},
            "lines": {"max_docs": 5},
        }
    )
    cut = curate_in_process(config)
    assert cut["lines"]["counts"]
    kept = pl.read_parquet(tmp_path / "run" / "lines" / "docs")["text"].to_list()
    assert not any(footer in t for t in kept)
    left_alone = config.model_copy(
        update={"run_dir": tmp_path / "alone", "lines": config.lines.model_copy(update={"langs": ["en"]})}
    )
    curate_in_process(left_alone)  # the lang stage is off: no document has a language in lines.langs
    kept = pl.read_parquet(tmp_path / "alone" / "lines" / "docs")["text"].to_list()
    assert all(footer in t for t in kept)


def test_the_built_in_profiles_keep_thai_and_armenian_prose_and_can_be_turned_off():
    armenian = "\n".join(
        [
            "Արքաների հովիտը քարքարոտ հովիտ է Եգիպտոսում, որտեղ կառուցվել են դամբարաններ:",
            "Հովիտը հայտնի է իր գեղեցիկ ու հին դամբարաններով և շատ այցելուներ ունի:",
            "Այստեղ աշխատում են շատ հնագետներ, ովքեր ուսումնասիրում են պատմությունը:",
        ]
        * 2
    )
    thai = "\n".join([THAI] * 3)
    docs = batch([(thai, "th"), (thai, "lo"), (armenian, "hy"), (ENGLISH, "en")]).with_columns(
        pl.Series("text", [thai, thai.replace("วันนี้", "ມື້ນີ້"), armenian, ENGLISH])
    )
    default = filter_settings_step(settings({}))(docs)
    assert default.kept["id"].to_list() == ["d0", "d1", "d2", "d3"]
    assert default.kept["text"].to_list()[2] == armenian  # no line dropped for its ':'
    off = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"filters": ["c4_quality", "gopher_quality"], "language_profiles": False},
        }
    ).filter
    assert filter_settings_step(off)(docs).kept["id"].to_list() == ["d3"]
    # A by_lang table of a language with a profile overrides it, parameter by parameter.
    names, params = settings({"th": {"params": {"c4_quality": {"min_sentences": 2}}}}).for_lang("th")
    assert params["c4_quality"] == {"min_sentences": 2, "filter_no_terminal_punct": False}
