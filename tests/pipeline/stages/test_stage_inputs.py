"""A stage reads the documents the stage before it recorded writing, and the views (report,
inspect, the Python API) read a stage's recorded files: a file a person put in a stage's folder is
never read, and stays. Runs by the stages' library calls (no Prefect)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from pipeline.api import read_run
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import stage_outputs
from pipeline.stages.run import RunFileError, RunFiles, damaged_file
from pipeline.stages.source import quarantine_problem
from report.inspect import rule_removals
from tests.helpers import curate_in_process, near_copies_corpus, source_config
from tests.helpers import stage_outputs as output_bytes

OFF = {"enabled": False}
FILTER = {"params": {"gopher_quality": {"max_mean_word_length": 5.0}}}


def config(tmp_path: Path, run: str, **settings):
    made = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
        tokenize=OFF,
        mix=OFF,
        **settings,
    )
    return made.model_copy(update={"run_dir": tmp_path / run})


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    near_copies_corpus(root / "in")
    curate_in_process(config(root, "run", filter=FILTER))
    return root / "run"


def _mine(run: Path) -> dict[Path, bytes]:
    """A person's files in the stage folders: junk named like shards, a copy of a real shard."""
    docs = sorted((run / "filter" / "docs").glob("*.parquet"))[0]
    return {
        run / "filter" / "docs" / "notes.parquet": b"mine\n",
        run / "filter" / "docs" / "backup.parquet": docs.read_bytes(),
        run / "filter" / "removed" / "user.parquet": b"u\n",
        run / "filter" / "attributes" / "user.parquet": b"u\n",
        run / "source" / "quarantine" / "user.parquet": b"u\n",
        run / "source" / "parts" / "user.json": b"mine\n",
    }


def test_a_stage_reads_only_the_documents_the_stage_before_it_wrote(tmp_path):
    near_copies_corpus(tmp_path / "in")
    curate_in_process(config(tmp_path, "run"))
    run = tmp_path / "run"
    recorded = stage_outputs(run, "filter")
    mine = _mine(run)
    for path, data in mine.items():
        path.write_bytes(data)
    assert stage_outputs(run, "filter") == recorded  # a file put there is not the stage's output

    changed = {"threshold": 0.9}
    curate_in_process(config(tmp_path, "run", dedup=changed))  # dedup and lines rerun on filter's docs
    assert all(path.read_bytes() == data for path, data in mine.items())
    assert quarantine_problem(RunLayout(run).stage("source"), config(tmp_path, "run")) is None
    for path in mine:
        path.unlink()
    curate_in_process(config(tmp_path, "fresh", dedup=changed))
    assert output_bytes(run) == output_bytes(tmp_path / "fresh")


def test_views_read_only_the_files_the_run_wrote(finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run, symlinks=True)
    before = RunFiles.open(run)
    removed, rules = before.removed("filter"), before.removed_rules()
    assert removed.height and rules
    mine = _mine(run)
    for path, data in mine.items():
        path.write_bytes(data)
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "empty", run / "filter" / "attributes" / "xx-00000-0000.parquet")

    after = RunFiles.open(run)
    assert after.removed("filter").equals(removed) and after.removed_rules() == rules
    assert after.docs_files("filter") == before.docs_files("filter")
    assert after.quarantine() is None or after.quarantine().equals(before.quarantine())
    assert read_run(run).removed("filter").height == removed.height
    rule = next(iter(rules))
    assert rule_removals(run, rule, 5) == rule_removals(finished, rule, 5)
    assert damaged_file(run) is None
    for args in (["report", str(run)], ["inspect", str(run)], ["inspect", str(run), "--rule", rule]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    assert all(path.read_bytes() == data for path, data in mine.items())


def test_a_damaged_file_of_the_run_is_never_advised_away_with_its_folder(finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "filter" / "notes.txt").write_text("a person's file")
    path = sorted((run / "filter" / "removed").glob("*.parquet"))[0]
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(RunFileError, match=rf"filter/removed/{path.name} is damaged or truncated"):
        read_run(run).removed("filter")  # no raw polars error from the Python API
    result = CliRunner().invoke(
        app, ["inspect", str(run), "--rule", next(iter(RunFiles.open(finished).removed_rules()))]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert f"filter/removed/{path.name} is damaged or truncated" in line
    assert "folder" not in line
    assert f"delete it and filter/parts/{path.stem}.json" in line and "curate run CONFIG" in line

    path.unlink()  # as the line says: the run writes both anew, and the person's file stays
    (run / "filter" / "parts" / f"{path.stem}.json").unlink()
    curate_in_process(config(finished.parent, "run", filter=FILTER).model_copy(update={"run_dir": run}))
    assert (run / "filter" / "notes.txt").read_text() == "a person's file"
    (run / "filter" / "notes.txt").unlink()
    assert output_bytes(run) == output_bytes(finished)


@pytest.mark.parametrize("manifest", ['{"stages": 5}', "[]", '{"config": {}, "stages": []}'])
def test_a_manifest_that_is_not_a_run_record_is_one_line_naming_it(finished, tmp_path, manifest):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "manifest.json").write_text(manifest)
    with pytest.raises(RunFileError, match=r"manifest\.json is damaged"):
        RunFiles.open(run)
    result = CliRunner().invoke(app, ["inspect", str(run)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert "manifest.json is damaged" in line, line
    assert json.loads(manifest) is not None  # the file is JSON: only its shape is wrong
