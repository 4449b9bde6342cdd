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
        ({"??": {}}, "by_lang.??: not a language code"),
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
