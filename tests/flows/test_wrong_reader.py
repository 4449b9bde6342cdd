"""`curate run` as a user meets a source that cannot be read as configured: a reader that does not
fit the files stops the run before Prefect starts; a source that loses most of its records to
quarantine fails the run after the source stage, which a run with the limit raised resumes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import html_page, run_curate, shared_api_env, write_jsonl, write_parquet_file, write_warc

OFF = "".join(f"[{stage}]\nenabled = false\n" for stage in ("lang", "filter", "dedup", "lines", "tokenize", "mix"))


def curate(tmp_path: Path, config: Path, shared: bool = False) -> subprocess.CompletedProcess:
    """``curate run --quiet CONFIG`` from ``tmp_path`` (files are named as from there); with
    ``shared``, reporting to the test session's server (no temporary server of its own to start)."""
    env = {"PREFECT_HOME": str(tmp_path / "prefect"), **(shared_api_env() if shared else {})}
    return run_curate(["run", "--quiet", str(config)], tmp_path, env=env)


def _one_error(done: subprocess.CompletedProcess) -> str:
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(errors) == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    return errors[0]


def _warcs(root: Path) -> None:
    for i in range(2):
        write_warc(root / "crawl" / f"{i}.warc.gz", [(f"https://w.example/{i}", "text/html", html_page("T", ["A."]))])


def _jsonl_gz(root: Path) -> None:
    write_jsonl(root / "dump" / "a.jsonl.gz", [{"text": f"Record {i}."} for i in range(5)], "gz")


def _jsonl(root: Path) -> None:
    write_jsonl(root / "dump" / "a.jsonl", [{"text": f"Record {i} " * 200} for i in range(50)])


@pytest.mark.parametrize(
    "write, reader, paths, message",
    [
        (_warcs, "jsonl", "crawl/*.warc.gz", 'crawl/0.warc.gz is a WARC file, not JSON lines; set reader = "warc"'),
        (_jsonl_gz, "parquet", "dump/*.gz", 'dump/a.jsonl.gz is JSON lines, not a Parquet file; set reader = "jsonl"'),
        (_jsonl, "warc", "dump/a.jsonl", 'dump/a.jsonl is JSON lines, not a WARC file; set reader = "jsonl"'),
    ],
    ids=["jsonl-on-warc", "parquet-on-jsonl-gz", "warc-on-jsonl"],
)
def test_a_reader_that_does_not_fit_its_files_stops_the_run_before_prefect_starts(
    tmp_path, write, reader, paths, message
):
    write(tmp_path)
    write_parquet_file(tmp_path / "good" / "a.parquet", {"text": ["Fine."]})
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "run"\n{OFF}'
        '[[sources]]\nname = "good"\nreader = "parquet"\npaths = ["good"]\n'
        f'[[sources]]\nname = "web"\nreader = "{reader}"\npaths = ["{paths}"]\n'
    )
    done = curate(tmp_path, config)
    line = _one_error(done)
    assert line.startswith("error: source 'web': ") and message in line, line
    assert not (tmp_path / "run").exists()  # nothing written, Prefect never started
    assert done.seconds < 60, f"{done.seconds:.1f} s"


@pytest.mark.flow  # starts a Prefect server of its own
def test_a_source_past_its_quarantine_limit_fails_after_the_source_stage_and_resumes_when_raised(
    tmp_path, prefect_server
):
    lines = [{"text": f"Record {i} is fine."} for i in range(4)] + [b'{"text": "cut'] * 12
    write_jsonl(tmp_path / "dump" / "a.jsonl", lines)
    write_jsonl(tmp_path / "news" / "b.jsonl", [{"text": "All good."}])
    config = tmp_path / "run.toml"
    sources = (
        '[[sources]]\nname = "news"\nreader = "jsonl"\npaths = ["news"]\n'
        '[[sources]]\nname = "dump"\nreader = "jsonl"\npaths = ["dump"]\n'
    )
    config.write_text(f'run_dir = "run"\n{OFF}{sources}')
    done = curate(tmp_path, config, shared=True)
    line = _one_error(done)
    assert line.startswith(
        "error: source 'dump': 12 of its 16 records were quarantined (75.0%), more than max_quarantine_fraction "
        "= 0.5; reasons: invalid_json 12 (e.g. dump/a.jsonl:5); fix the inputs (or the source's reader), or raise "
        "max_quarantine_fraction in its [[sources]] table (1.0 turns the check off) and run again: the source "
        "stage is kept"
    ), line
    parts = tmp_path / "run" / "source" / "parts"
    kept = {p.name: p.stat().st_mtime_ns for p in parts.glob("*.json")}
    assert sorted(kept) == ["dump-00000.json", "news-00000.json"]

    config.write_text(f'run_dir = "run"\n{OFF}{sources}max_quarantine_fraction = 0.8\n')
    done = curate(tmp_path, config, shared=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {p.name: p.stat().st_mtime_ns for p in parts.glob("*.json")} == kept  # resumed, not redone
    assert any("dump" in row and "4" in row for row in done.stdout.splitlines()), done.stdout
