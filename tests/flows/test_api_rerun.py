"""``run_stage`` with a config that changes a stage before the one asked for: refused in one line
naming the key that moved, before Prefect starts, and no other stage's file is touched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flows.api import ConfigError, run_stage
from tests.helpers import curate_in_process, near_copies_corpus, source_config


def _config(tmp_path: Path, **settings):
    sources = [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}]
    return source_config(tmp_path, sources, lines={"enabled": False}, tokenize={"enabled": False}, **settings)


def _files(run: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(run)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}


def test_run_stage_refuses_where_the_config_changes_a_stage_before_it(tmp_path, monkeypatch):
    near_copies_corpus(tmp_path / "in")
    curate_in_process(_config(tmp_path))
    run = tmp_path / "run"
    before = _files(run)

    def no_prefect(*args, **kwargs):
        raise AssertionError("the run was opened")

    monkeypatch.setattr("flows.api.configure_prefect", no_prefect)
    threshold = _config(tmp_path, filter={"params": {"gopher_quality": {"min_words": 40}}})
    expected = (
        f"dedup: the filter stage in '{run}' is out of date for this config (filter: re-decides from its "
        'stored measurements (filter.params.gopher_quality: null -> {"min_words": 40})); '
        "run_stage('filter', config) first, or curate(config)"
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(expected)}$"):
        run_stage("dedup", threshold)
    lang = _config(tmp_path, lang={"min_score": 0.9})
    with pytest.raises(ConfigError, match=r"^dedup: the lang and filter stages in .* are out of date for this "
                                          r"config \(lang: reruns \(lang.min_score: .* -> 0.9\); filter: reruns "
                                          r"\(its input changes: lang reruns\)\); run_stage\('lang', config\) "
                                          r"first, or curate\(config\)$"):  # fmt: skip
        run_stage("dedup", lang)
    assert _files(run) == before  # nothing deleted, nothing rewritten
