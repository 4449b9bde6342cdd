"""URL blocklists in a run (library calls, no Prefect): what they removed names the list and the
entry in the report, ``curate inspect`` and ``--rule``; a domain list changed in its UT1 folder
reruns the filter stage, which decides with the new list as a fresh run does."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from pipeline.filters.urls import RULE_DOMAIN
from pipeline.stages.rerun import plan_run
from report.build import build_report
from report.inspect import inspect_document, rule_removals
from tests.helpers import curate_in_process, near_copies_corpus, source_config, write_jsonl

HOSTS = ["news.example.com", "www.example.com", "blog.other.org", "spam.net"]


@pytest.fixture
def corpus(tmp_path) -> Path:
    """The near-copies corpus's 68 texts, each with a URL on one of :data:`HOSTS` in turn."""
    texts = near_copies_corpus(tmp_path / "texts") / "a.jsonl"
    records = [orjson.loads(line) for line in texts.read_bytes().splitlines()]
    urls = [f"https://{HOSTS[i % len(HOSTS)]}/page/{i}" for i in range(len(records))]
    return write_jsonl(tmp_path / "in" / "a.jsonl", [{**r, "url": u} for r, u in zip(records, urls)])


def config(tmp_path, corpus, blacklists: Path, run="run"):
    made = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(corpus)], "url_field": "url"}],
        filter={
            "filters": ["url_blocklist", "c4_quality"],
            "params": {"url_blocklist": {"domains": [str(blacklists)]}},
        },
        dedup={"enabled": False},
        tokenize={"enabled": False},
        mix={"enabled": False},
    )
    return made.model_copy(update={"run_dir": tmp_path / run})


def test_a_removed_document_names_its_list_and_a_changed_list_reruns_the_filter(tmp_path, corpus):
    blacklists = tmp_path / "blacklists"
    (blacklists / "adult").mkdir(parents=True)
    (blacklists / "adult" / "domains").write_text("example.com\n", encoding="utf-8")
    stats = curate_in_process(config(tmp_path, corpus, blacklists))
    run_dir = tmp_path / "run"
    assert stats["filter"]["removed"] == {RULE_DOMAIN: 34}  # news.example.com and www.example.com: half

    removal = rule_removals(run_dir, RULE_DOMAIN, limit=None)
    assert {d["match"] for d in removal["documents"]} == {"adult/domains: example.com"}
    found = inspect_document(run_dir, removal["documents"][0]["id"])
    assert found["removed_by"]["match"] == "adult/domains: example.com"
    assert found["fate"].endswith("; matched 'adult/domains: example.com'")
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert page.count('<span class="note">matched:</span> <span class="id">adult/domains: example.com</span>') == 5

    (blacklists / "adult" / "domains").write_text("other.org\nspam.net\n", encoding="utf-8")
    assert [str(p) for p in plan_run(config(tmp_path, corpus, blacklists)).stages][2] == (
        "filter: reruns (the contents of filter.params.url_blocklist.domains changed)"
    )
    stats = curate_in_process(config(tmp_path, corpus, blacklists))
    assert stats["filter"]["removed"] == {RULE_DOMAIN: 34}
    matched = {d["match"] for d in rule_removals(run_dir, RULE_DOMAIN, limit=None)["documents"]}
    assert matched == {"adult/domains: other.org", "adult/domains: spam.net"}
    fresh = curate_in_process(config(tmp_path, corpus, blacklists, run="fresh"))
    assert stats == json.loads(json.dumps(fresh).replace("/fresh/", "/run/"))
