"""`curate run` again with a changed dedup threshold: `--plan` says what it will keep and redo, the
rerun says it as it goes, and the run ends with the bytes of a fresh run of the new config.

Each command that reads what an earlier one left runs in a process of its own, as a user's; the
first run and the fresh runs compared with are the same command run in this process (typer's
CliRunner), without a process's start (a few seconds each)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.flows.test_cli_errors import curate
from tests.helpers import near_copies_corpus, shared_api_env, stage_outputs

pytestmark = pytest.mark.flow


def write_config(path, run_dir, corpus, threshold: float, filter_params: str = ""):
    path.write_text(
        f'run_dir = "{run_dir}"\n'
        f"[dedup]\nthreshold = {threshold}\n{filter_params}"
        "[tokenize]\nvocab_size = 300\n[mix]\nvalidation_fraction = 0.1\n"
        f'[[sources]]\nname = "web"\nreader = "jsonl"\npaths = ["{corpus}"]\n'
    )
    return path


def run_here(config) -> None:
    """``curate run CONFIG --quiet`` in this process, on the test session's Prefect server."""
    result = CliRunner().invoke(app, ["run", str(config), "--quiet"])
    assert result.exit_code == 0, result.output


def test_a_changed_dedup_threshold_reruns_dedup_and_after_as_a_fresh_run_would(tmp_path, prefect_server):
    corpus = near_copies_corpus(tmp_path / "in")
    run = tmp_path / "run"
    run_here(write_config(tmp_path / "a.toml", run, corpus, 0.8))

    changed = write_config(tmp_path / "b.toml", run, corpus, 0.95)
    before = {p: p.stat().st_mtime_ns for p in sorted(run.rglob("*")) if p.is_file()}
    planned = curate(["run", str(changed), "--plan"], tmp_path, env=shared_api_env())
    assert planned.returncode == 0, planned.stderr
    expected = [
        "changed: dedup.threshold: 0.8 -> 0.95 (read by dedup)",
        "source: kept (same config)",
        "lang: kept (same config)",
        "filter: kept (same config)",
        "dedup: reruns (dedup.threshold: 0.8 -> 0.95)",
        "lines: reruns (its input changes: dedup reruns)",
        "tokenize: reruns (its input changes: dedup reruns)",
        "mix: reruns (its input changes: dedup reruns)",
    ]
    assert planned.stdout.splitlines() == expected
    assert {p: p.stat().st_mtime_ns for p in sorted(run.rglob("*")) if p.is_file()} == before  # ran nothing

    rerun = curate(["run", str(changed), "--quiet"], tmp_path, env=shared_api_env())
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.splitlines()[: len(expected)] == expected
    docs = run / "source" / "docs"
    assert all(p.stat().st_mtime_ns == before[p] for p in docs.iterdir())  # source kept its shards

    fresh = tmp_path / "fresh"
    run_here(write_config(tmp_path / "c.toml", fresh, corpus, 0.95))
    assert stage_outputs(run) == stage_outputs(fresh)
    shards = [entry["file"] for entry in json.loads((run / "mix" / "main" / "manifest.json").read_text())["train"]]
    assert shards and all(f"mix/main/{file}" in stage_outputs(run) for file in shards)  # compared above
    stats = json.loads((run / "dedup" / "stats.json").read_text())
    assert stats["docs_out"] == stats["docs_in"]  # at 0.95 the near copies stay

    again = curate(["run", str(changed), "--quiet"], tmp_path, env=shared_api_env())
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:7] == [
        f"{stage}: kept (same config)" for stage in ("source", "lang", "filter", "dedup", "lines", "tokenize", "mix")
    ]

    # A filter threshold: the filter stage decides again from what it measured, through the flows.
    measured = {p: p.stat().st_mtime_ns for p in (run / "filter" / "attributes").iterdir()}
    assert measured
    sentences = "[filter.params.c4_quality]\nmin_sentences = 1\n"
    redecided = curate(
        ["run", str(write_config(tmp_path / "d.toml", run, corpus, 0.95, sentences)), "--quiet"],
        tmp_path,
        env=shared_api_env(),
    )
    assert redecided.returncode == 0, redecided.stderr
    assert redecided.stdout.splitlines()[3] == (
        'filter: re-decides from its stored measurements (filter.params.c4_quality: null -> {"min_sentences": 1})'
    )
    assert {p: p.stat().st_mtime_ns for p in (run / "filter" / "attributes").iterdir()} == measured
    fresh = tmp_path / "fresh-sentences"
    run_here(write_config(tmp_path / "e.toml", fresh, corpus, 0.95, sentences))
    assert stage_outputs(run) == stage_outputs(fresh)
