"""`curate index add` and `curate index show`, and `curate inspect` naming the indexed document a
removed one duplicates: real `curate` processes over runs made in this process."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_curate, write_jsonl
from tests.pipeline.dedup.test_dedup_index import _crawls, _run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("index-cli")
    a, b, copied = _crawls()
    _run(tmp, "crawl-a", {"a.jsonl": a[:60]})
    return {"tmp": tmp, "a": a[:60], "b": b, "copied": copied}


def test_index_add_show_and_inspect(runs):
    tmp = runs["tmp"]
    added = run_curate(["index", "add", "idx", "crawl-a"], cwd=tmp)
    assert added.returncode == 0, added.stderr
    assert "added run crawl-a to idx: 60 documents" in added.stderr
    again = run_curate(["index", "add", "idx", "crawl-a"], cwd=tmp)
    assert again.returncode == 0 and "holds run crawl-a already (60 documents): nothing changed" in again.stderr
    shown = run_curate(["index", "show", "idx", "--json"], cwd=tmp)
    found = json.loads(shown.stdout)
    assert found["docs"] == 60 and [r["name"] for r in found["runs"]] == ["crawl-a"]
    assert found["settings"]["ngram"] == 5 and found["partitions"] == 8
    text = run_curate(["index", "show", "idx"], cwd=tmp)
    assert text.stdout.splitlines()[0] == "idx: 60 documents of 1 run, 8 band-key partitions"

    a_ids = {d["id"] for d in runs["a"]}
    copy = next(doc for doc, source in runs["copied"].items() if source in a_ids and doc.startswith("b"))
    _run(tmp, "crawl-b", {"b.jsonl": [d for d in runs["b"] if d["id"] == copy]}, index=str(tmp / "idx"))
    inspected = run_curate(["inspect", "crawl-b", f"web/{copy}", "--json"], cwd=tmp)
    assert inspected.returncode == 0, inspected.stderr
    dedup = json.loads(inspected.stdout)["dedup"]
    assert dedup["in_index"]["matched_id"] == f"web/{runs['copied'][copy]}"
    assert dedup["in_index"]["matched_run"] == "crawl-a"
    plain = run_curate(["inspect", "crawl-b", f"web/{copy}"], cwd=tmp)
    assert f"duplicate of web/{runs['copied'][copy]} of run crawl-a" in plain.stdout


def test_index_refusals_are_one_line(runs):
    tmp = runs["tmp"]
    missing = run_curate(["index", "show", "nothing-here"], cwd=tmp)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "error: no dedup index at nothing-here; make one with `curate index add nothing-here RUN`"
    ]
    write_jsonl(tmp / "busy" / "notes.jsonl", [{"x": 1}])
    foreign = run_curate(["index", "add", "busy", "crawl-a"], cwd=tmp)
    assert foreign.returncode == 2
    assert foreign.stderr.strip().splitlines() == [
        "error: busy holds notes.jsonl and no index.json; give a new or empty folder for the dedup index"
    ]
    assert sorted(p.name for p in (tmp / "busy").iterdir()) == ["notes.jsonl"]
