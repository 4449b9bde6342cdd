"""The paths the CLI takes: a URL stays a URL (typer's own Path made ``memory://b/out`` the local
folder ``memory:/b/out``), ``file://localhost/x`` is the local ``/x``, a command that needs a local
path refuses a URL in one line, and an output that is a file where a folder is written (or the
reverse), or is under a file, is one line before any work."""

from __future__ import annotations

from types import SimpleNamespace

import fsspec
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.trainer_fixtures import shared_mixture


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    return shared_mixture(tmp_path_factory)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The test's own current folder, where a URL taken for a local path would land."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(args: list[str], says: str) -> str:
    """``curate ARGS`` exits 2 with one ``error:`` line that contains ``says``."""
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.output
    return lines[0]


def _calibrated(monkeypatch) -> str:
    """``curate calibrate`` made to calibrate nothing, quickly: the fragment it writes."""
    text = "# Filter thresholds per language, written by `curate calibrate`\n"
    calibration = SimpleNamespace(docs={"en": 60}, skipped=[], english="en", changes=lambda lang: [])
    found = SimpleNamespace(calibration=calibration, sources=["web"], text=text)
    monkeypatch.setattr("pipeline.stages.calibrate.calibrate_run", lambda *args: found)
    return text


# ---- URLs --------------------------------------------------------------------------------------


def test_export_to_a_url_is_refused_in_one_line_and_writes_no_local_folder(mixture, here, memory_root):
    line = refused(["export", str(mixture), f"{memory_root}/out"], f"{memory_root}/out is a URL;")
    assert "local folder" in line
    assert list(here.iterdir()) == []  # no ./memory:/<name>/out
    assert not fsspec.filesystem("memory").exists(f"/{memory_root[len('memory://') :]}/out")


def test_calibrate_writes_its_fragment_to_a_url_and_a_file_url_of_this_machine(monkeypatch, here, memory_root):
    text = _calibrated(monkeypatch)
    result = CliRunner().invoke(app, ["calibrate", "run", "--out", f"{memory_root}/frag.toml"])
    assert result.exit_code == 0, result.output
    assert fsspec.open(f"{memory_root}/frag.toml", "r").open().read() == text
    assert f"config fragment: {memory_root}/frag.toml" in result.output
    result = CliRunner().invoke(app, ["calibrate", "run", "--out", f"file://localhost{here}/local/frag.toml"])
    assert result.exit_code == 0, result.output
    assert (here / "local" / "frag.toml").read_text() == text
    assert sorted(p.name for p in here.iterdir()) == ["local"]  # not ./memory: nor ./localhost


@pytest.mark.parametrize(
    "args, says",
    [
        (["train-quality", "memory://x/quality"], "OUT: memory://x/quality is a URL; this command writes a local"),
        (["run", "memory://x/run.toml"], "CONFIG: memory://x/run.toml is a URL; this command reads a local file"),
        (["eval", "memory://x/train", "--tasks", "t.jsonl"], "CHECKPOINT: memory://x/train is a URL;"),
        (["demo-corpus", "memory://x/corpus"], "OUT: memory://x/corpus is a URL;"),
        (["calibrate", "run", "--out", "file://elsewhere/frag.toml"], "a file URL of the host 'elsewhere'"),
        (["calibrate", "run", "--out", "http://example.com/frag.toml"], "the http:// file system is read-only"),
        (["report", "nosuch://bucket/run"], "RUN_DIR: nosuch://bucket/run: no file system is known for nosuch://"),
    ],
)
def test_a_url_a_command_cannot_use_is_one_line(here, args, says):
    refused(args, says)
    assert list(here.iterdir()) == []


# ---- outputs that are files, folders, or under a file -------------------------------------------


def test_export_into_a_file_or_under_one_is_one_line(mixture, here):
    (here / "notes.txt").write_text("mine")
    refused(["export", str(mixture), "notes.txt"], "'notes.txt' is a file, not a folder")
    refused(["export", str(mixture), "notes.txt/out"], f"'{here / 'notes.txt'}' is a file, so no folder can be made")
    assert (here / "notes.txt").read_text() == "mine"


def test_calibrate_out_a_folder_or_under_a_file_is_one_line_before_any_work(monkeypatch, here):
    # The run does not exist: the --out check comes first, not after the calibration.
    monkeypatch.setattr("pipeline.stages.calibrate.calibrate_run", lambda *args: pytest.fail("calibrated"))
    (here / "folder").mkdir()
    (here / "notes.txt").write_text("mine")
    refused(["calibrate", "no-run", "--out", "folder", "--force"], "--out: 'folder' is a folder, not a file")
    refused(
        ["calibrate", "no-run", "--out", "notes.txt/frag.toml", "--force"],
        f"--out: '{here / 'notes.txt'}' is a file, so no file can be made under it",
    )
    assert (here / "notes.txt").read_text() == "mine"


def test_eval_json_a_folder_or_under_a_file_is_one_line_before_scoring(here):
    # Neither the checkpoint nor the items exist: --json is checked first, not after scoring.
    (here / "results").mkdir()
    (here / "notes.txt").write_text("mine")
    refused(["eval", "no-train", "--tasks", "no.jsonl", "--json", "results"], "--json: 'results' is a folder")
    refused(
        ["eval", "no-train", "--tasks", "no.jsonl", "--json", "notes.txt/r.json"],
        f"--json: '{here / 'notes.txt'}' is a file, so no file can be made under it",
    )


def test_other_outputs_under_a_file_are_one_line(here):
    (here / "notes.txt").write_text("mine")
    refused(["demo-corpus", "notes.txt"], "OUT: 'notes.txt' is a file, not a folder")
    refused(["train-quality", "notes.txt/q"], "is a file, so no folder can be made under it")
    refused(["train-tokenizer", "no-run", "notes.txt/tokenizer.json"], "is a file, so no file can be made under it")
    refused(["demo", "--corpus-dir", "notes.txt"], "--corpus-dir: 'notes.txt' is a file, not a folder")
