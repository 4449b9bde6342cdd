"""A run with no document left: `curate run` as a user runs it, every stage completes with zero
counts (in a process of its own, reporting to the test session's Prefect server)."""

from __future__ import annotations

import json

import pytest

from pipeline.formats.documents import RunLayout
from pipeline.stages.registry import REGISTRY
from tests.helpers import REPO, run_curate, shared_api_env, write_jsonl, write_parquet_file

pytestmark = pytest.mark.flow


def test_a_run_whose_every_record_is_quarantined_completes_with_zero_counts_in_every_stage(tmp_path, prefect_server):
    # A Parquet file cut before its footer, and JSON lines without a text field: every record is
    # quarantined (the quarantine limit turned off), so no stage after source has a document.
    cut = write_parquet_file(tmp_path / "web" / "crawl.parquet", {"text": ["A page.", "Another page."]})
    cut.write_bytes(cut.read_bytes()[:-10])
    write_jsonl(tmp_path / "notes" / "a.jsonl", [{"id": f"n{i}", "title": "no text"} for i in range(3)])
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "{tmp_path / "run"}"\nmax_quarantine_fraction = 1.0\n'
        f'[[sources]]\nname = "web"\nreader = "parquet"\npaths = ["{cut}"]\n'
        f'[[sources]]\nname = "notes"\nreader = "jsonl"\npaths = ["{tmp_path / "notes"}"]\n'
    )
    env = {"PREFECT_HOME": str(tmp_path / "prefect"), **shared_api_env()}  # the test session's server
    done = run_curate(["run", "--quiet", str(config)], REPO, env=env)  # REPO: the language-ID model's .cache
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "Error" not in output

    layout = RunLayout(tmp_path / "run")
    stats = {name: json.loads(layout.stage(name).stats.read_text()) for name in REGISTRY}
    assert stats["source"]["docs_in"] == 4 and stats["source"]["docs_out"] == 0
    assert stats["source"]["quarantined"] == {"unreadable_file": 1, "missing_text": 3}
    for name in REGISTRY:
        if name != "source":
            assert (stats[name]["docs_in"], stats[name]["docs_out"]) == (0, 0), name
            assert stats[name]["removed"] == {} and stats[name]["quarantined"] == {}, name
    assert stats["tokenize"]["tokens"] == 0
    manifest = json.loads(layout.manifest.read_text())
    assert set(manifest["stages"]) == set(REGISTRY)
