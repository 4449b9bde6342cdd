"""The word-list rule in a run (library calls, no Prefect): what it removed names the entry in
the report, ``curate inspect`` and ``--rule``; a list changed at the same path reruns the filter
stage, which decides with the new list as a fresh run does."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.filters.wordlists import RULE_LISTED_WORD
from pipeline.stages.rerun import plan_run
from report.build import build_report
from report.inspect import inspect_document, rule_removals
from tests.helpers import curate_in_process, near_copies_corpus, source_config


@pytest.fixture
def corpus(tmp_path) -> Path:
    return near_copies_corpus(tmp_path / "in")  # 60 documents, 8 near copies holding "changed"


def config(tmp_path, corpus, lists: Path | dict, run="run"):
    lists = str(lists) if isinstance(lists, Path) else lists
    made = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(corpus)]}],
        filter={"filters": ["c4_badwords", "c4_quality"], "params": {"c4_badwords": {"lists": lists}}},
        dedup={"enabled": False},
        tokenize={"enabled": False},
        mix={"enabled": False},
    )
    return made.model_copy(update={"run_dir": tmp_path / run})


def removed(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "filter" / "removed" / "*.parquet").sort("id")


@pytest.mark.parametrize("form", ["folder", "table"])
def test_a_removed_document_names_its_entry_and_a_changed_list_reruns_the_filter(tmp_path, corpus, form):
    folder = tmp_path / "lists"
    folder.mkdir()
    (folder / "en.txt").write_text("Changed\n", encoding="utf-8")
    lists = folder if form == "folder" else {"en": str(folder / "en.txt")}
    stats = curate_in_process(config(tmp_path, corpus, lists))
    run_dir = tmp_path / "run"
    gone = removed(run_dir)
    assert stats["filter"]["removed"] == {RULE_LISTED_WORD: 8} and gone["value"].to_list() == [1.0] * 8

    found = inspect_document(run_dir, gone["id"][0])
    assert found["removed_by"]["match"] == "Changed" and found["filter"]["match"] == "Changed"
    assert found["fate"] == f"removed by the filter stage: {RULE_LISTED_WORD} (value 1, threshold 1); matched 'Changed'"
    assert {d["match"] for d in rule_removals(run_dir, RULE_LISTED_WORD)["documents"]} == {"Changed"}
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert page.count('<span class="note">matched:</span> <span class="id">Changed</span>') == 5  # the examples

    # a prefix of the word, on word boundaries, matches nothing: the rerun keeps every document
    (folder / "en.txt").write_text("chang\n", encoding="utf-8")
    key = "filter.params.c4_badwords.lists" + ("" if form == "folder" else ".en")  # a table: each language's
    assert [str(p) for p in plan_run(config(tmp_path, corpus, lists)).stages][2] == (
        f"filter: reruns (the contents of {key} changed)"
    )
    stats = curate_in_process(config(tmp_path, corpus, lists))
    assert stats["filter"]["removed"] == {} and not list((run_dir / "filter").glob("removed/*.parquet"))
    fresh = curate_in_process(config(tmp_path, corpus, lists, run="fresh"))
    assert stats == json.loads(json.dumps(fresh).replace("/fresh/", "/run/"))
