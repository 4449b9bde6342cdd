"""A stage's stats.json has one reader and writer (pipeline.formats.stats): a file read and written
again is the same bytes, and no other module of the product spells a stats key as a string."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest

from pipeline.formats.ledger import Ledger
from pipeline.formats.stats import StageStats, docs_handed_over, recorded_stats
from pipeline.io.writer import write_json

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("flows", "report", "experiment", "demo", "trainer", "pipeline")
OWNERS = {"pipeline/formats/stats.py", "pipeline/formats/ledger.py"}
# Fields whose names are everyday words of other records too (a stage's name, a part record's
# key, a mixture manifest's figure): the scan would flag what is not a stats key.
SHARED_WORDS = {
    "stage", "removed", "counts", "sources", "languages", "licences", "dedup", "lines", "tokens",
    "tokenizer", "shards", "groups", "mixtures", "warnings", "extra",
    "tokens_in",  # the mix stage's block counts
    "validation_documents",  # a mixture manifest's groups
    "largest_clusters",  # the demo corpus's summary
    "quarantined",  # a document's status in inspect, and its colour in the charts
}  # fmt: skip
LOOKUPS = {"get", "pop", "setdefault"}


def stats_keys() -> set[str]:
    return {f.name for f in fields(StageStats)} - SHARED_WORDS


def keys_spelled(tree: ast.AST, keys: set[str]) -> list[tuple[int, str]]:
    """Where a string in ``keys`` is used as a key: ``x["k"]``, ``{"k": ...}``, ``x.get("k")``
    (``pop``, ``setdefault``) or ``"k" in x``."""
    found = []
    for node in ast.walk(tree):
        spelled = []
        if isinstance(node, ast.Subscript):
            spelled = [node.slice]
        elif isinstance(node, ast.Dict):
            spelled = [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOOKUPS:
            spelled = node.args[:1]
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            spelled = [node.left]
        found += [(n.lineno, n.value) for n in spelled if isinstance(n, ast.Constant) and n.value in keys]
    return found


def spelled_outside_owner(root: Path) -> list[str]:
    keys = stats_keys()
    out = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            if where in OWNERS:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            out += [f"{where}:{line} {key!r}" for line, key in keys_spelled(tree, keys)]
    return out


def test_no_stats_key_is_spelled_outside_its_owner():
    assert {"docs_in", "docs_out", "units", "train_documents", "exclusion"} <= stats_keys()
    found = spelled_outside_owner(ROOT)
    assert not found, "stats keys spelled outside pipeline/formats/stats.py (use StageStats):\n" + "\n".join(found)


def test_the_scan_finds_a_key_in_each_way_it_can_be_spelled():
    code = 'a["docs_out"]; {"docs_in": 1}; b.get("train_documents", 0); "units" in c; d.pop("exclusion"); f("docs_out")'
    found = sorted(key for _, key in keys_spelled(ast.parse(code), stats_keys()))
    assert found == ["docs_in", "docs_out", "exclusion", "train_documents", "units"]  # a call's argument is no key


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
