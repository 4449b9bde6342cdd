"""A stage's stats.json has one reader and writer (pipeline.formats.stats): a file read and written
again is the same bytes."""

from __future__ import annotations

import json

import pytest

from pipeline.formats.ledger import Ledger
from pipeline.formats.stats import StageStats, docs_handed_over, recorded_stats
from pipeline.io.writer import write_json


def ledger(stage: str, docs_in: int, docs_out: int, removed: dict, **more) -> dict:
    return {"stage": stage, "docs_in": docs_in, "docs_out": docs_out, "removed": removed, "quarantined": {}, **more}


# One file of each shape the stages write (document stage, source with files, tokenize, mix),
# and one with a key this version does not know.
SHAPES = {
    "source": {
        **ledger("source", 7, 6, {}),
        "quarantined": {"invalid_json": 1},
        "units": 1,
        "sources": {"web": {**ledger("source", 7, 6, {}), "quarantined": {"invalid_json": 1}, "files": 2}},
        "licences": {"MIT": {**ledger("source", 7, 6, {}), "quarantined": {"invalid_json": 1}}},
    },
    "filter": {
        **ledger("filter", 6, 4, {"c4_quality.min_sentences": 2}),
        "units": 2,
        "counts": {"fired|c4_quality.min_sentences": 3},
        "sources": {"web": ledger("filter", 6, 4, {"c4_quality.min_sentences": 2})},
        "languages": {"en": ledger("filter", 5, 4, {"c4_quality.min_sentences": 1}), "fr": ledger("filter", 1, 0, {})},
        "licences": {"MIT": ledger("filter", 6, 4, {"c4_quality.min_sentences": 2})},
    },
    "tokenize": {
        **ledger("tokenize", 4, 4, {}),
        "tokens": 90,
        "licences": {"MIT": {"documents": 4, "tokens": 90}},
        "shards": [{"file": "a.arrow", "documents": 4, "tokens": 90}],
        "tokenizer": {"path": "t.json", "sha256": "ab", "vocab_size": 512},
    },
    "mix": {
        **ledger("mix", 4, 3, {"validation_near_duplicate": 1}),
        "tokens_in": 90,
        "train_documents": 2,
        "validation_documents": 1,
        "exclusion": {},
        "groups": ["web"],
        "licences": {"MIT": {"train": {"documents": 2, "tokens": 40}}},
        "mixtures": {"main": {"budget_tokens": 40}},
        "warnings": [],
    },
    "future": {**ledger("lines", 4, 4, {}), "a_later_key": {"x": 1}},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_file_read_and_written_again_is_the_same_bytes(tmp_path, shape):
    written, again = tmp_path / "a.json", tmp_path / "b.json"
    write_json(SHAPES[shape], written)
    StageStats.read(written).write(again)
    assert again.read_bytes() == written.read_bytes()


def test_the_fields_read_back_typed(tmp_path):
    write_json(SHAPES["filter"], tmp_path / "stats.json")
    stats = StageStats.read(tmp_path / "stats.json")
    assert (stats.docs_in, stats.docs_out, stats.units) == (6, 4, 2)
    assert isinstance(stats.languages["en"], Ledger) and stats.languages["en"].removed["c4_quality.min_sentences"] == 1
    assert stats.ledger.check().accounted == 6 and stats.tokens is None
    assert StageStats.from_dict(SHAPES["source"]).sources["web"].files == 2
    assert StageStats.from_dict(SHAPES["tokenize"]).licences["MIT"] == {"documents": 4, "tokens": 90}
    assert docs_handed_over(tmp_path / "stats.json") == 4
    assert recorded_stats({"stages": {"filter": SHAPES["filter"]}})["filter"].funnel() == {"docs_in": 6, "docs_out": 4}


def test_a_file_that_is_not_a_stages_stats_is_refused(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a stage's stats"):
        StageStats.read(tmp_path / "stats.json")
