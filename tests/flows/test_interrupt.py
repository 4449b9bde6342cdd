"""Ctrl-C at a terminal during ``curate run``: the terminal signals the whole foreground process
group, so the test starts ``curate`` in a session of its own and sends SIGINT to that group, as a
terminal does, once a stage after source is under way. The run stops in seconds with one line
saying what is done and exit code 130; its temporary Prefect server (in a session of its own)
is gone with it; running the same command again finishes the run, with outputs byte for byte
those of a run that was never interrupted."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.flows.test_cli_errors import WORDS
from tests.helpers import REPO, curate_command, curate_environment, run_curate, shared_api_env

pytestmark = pytest.mark.flow

STAGES = ("source", "lang", "filter", "dedup", "lines", "tokenize", "mix")
STOP_S = 15  # a few seconds on a busy two-core machine (the run unwinds, or ends at once after 5 s)


def write_run(tmp_path: Path, files: int = 8, docs: int = 400) -> Path:
    """A config over ``files`` JSON lines files of English-looking documents (one source unit each)."""
    rng = random.Random(0)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for f in range(files):
        with (inputs / f"part-{f}.jsonl").open("w") as handle:
            for _ in range(docs):
                text = " ".join(" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "." for _ in range(10))
                handle.write(json.dumps({"text": text}) + "\n")
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "{tmp_path / "run"}"\n[[sources]]\nname = "web"\nreader = "jsonl"\npaths = ["{inputs}/*.jsonl"]\n'
    )
    return config


def servers_of(run_dir: Path) -> list[int]:
    """The processes still running with ``run_dir``'s Prefect home (its temporary server)."""
    home = f"PREFECT_HOME={run_dir.resolve() / '.prefect'}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and home in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            pass
    return found


def stage_files(run_dir: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(run_dir)): path.read_bytes()
        for stage in STAGES
        for path in sorted((run_dir / stage).rglob("*"))
        if path.is_file()
    }


def test_ctrl_c_stops_the_run_in_seconds_with_one_line_and_the_same_command_resumes_it(tmp_path, prefect_server):
    config = write_run(tmp_path)
    run_dir = tmp_path / "run"
    args = ["run", str(config), "--quiet"]
    command, env = curate_command(args), curate_environment()
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 600
    while not list(run_dir.glob("lang/parts/*.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()[1].decode()[-3000:]
    os.killpg(process.pid, signal.SIGINT)
    sent = time.monotonic()
    out, err = process.communicate(timeout=300)
    took = time.monotonic() - sent
    lines = err.decode().strip().splitlines()
    assert process.returncode == 130, err.decode()[-3000:]
    assert took < STOP_S, f"{took:.1f} s"
    assert len(lines) == 1 and "Traceback" not in err.decode(), err.decode()[-3000:]
    assert re.fullmatch(
        r"interrupted: source is done; lang stopped at \d of 8 units; run the same command again to resume", lines[0]
    ), lines[0]
    assert out == b""
    assert servers_of(run_dir) == []
    assert not (run_dir / "mix").exists()

    resumed = run_curate(args, REPO, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stderr == ""
    shutil.move(run_dir, tmp_path / "resumed")

    whole = run_curate(args, REPO, env=shared_api_env(), timeout=900)  # the reference: on the session's server
    assert whole.returncode == 0, whole.stderr[-3000:]
    resumed_files, whole_files = stage_files(tmp_path / "resumed"), stage_files(run_dir)
    assert sorted(resumed_files) == sorted(whole_files)
    assert [name for name in whole_files if resumed_files[name] != whole_files[name]] == []
    assert any(name.startswith("mix/") for name in whole_files)


@pytest.mark.parametrize("runner", ["processes", "dask"])
def test_ctrl_c_with_worker_processes_stops_them_all_in_seconds_with_one_line(tmp_path, runner, prefect_server):
    """The terminal's Ctrl-C reaches the worker processes too (the process pool's, the Dask
    LocalCluster's): they leave it to the run, which stops them; none outlives it, none prints a
    traceback. (The run reports to the test session's server: its own is tested above.)"""
    config = write_run(tmp_path, files=4)
    run_dir = tmp_path / "run"
    command = curate_command(["run", str(config), "--quiet", "--runner", runner, "--workers", "2"])
    env = curate_environment(shared_api_env())
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 600
    while not list(run_dir.glob("source/parts/*.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()[1].decode()[-3000:]
    os.killpg(process.pid, signal.SIGINT)
    sent = time.monotonic()
    _, err = process.communicate(timeout=300)  # until every process holding its pipes has exited
    took = time.monotonic() - sent
    assert process.returncode == 130, err.decode()[-3000:]
    assert took < STOP_S, f"{took:.1f} s"
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted: "), err.decode()[-3000:]
    # A killed worker may take a moment to be gone (under load, its exit outlasts its parent's).
    deadline = time.monotonic() + 5
    while running_in_group(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running_in_group(process.pid) == []


def running_in_group(pgid: int) -> list[tuple[int, list[str]]]:
    """The processes of a process group that still run (a killed worker whose parent exited first
    stays a zombie until the system reaps it: dead, so not counted)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                found.append((proc.pid, proc.info["cmdline"]))
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def test_on_a_terminal_the_run_shows_its_status_at_once_and_log_lines_never_break_the_display(tmp_path):
    """``curate run --verbose`` on a pseudo-terminal: a status line within seconds (before Prefect
    is even imported), Prefect's info lines each on a line of its own (never glued to a progress
    row, as when they were written past rich's live display), no telemetry banner."""
    import pty

    config = write_run(tmp_path, files=2, docs=50)
    leader, follower = pty.openpty()
    started = time.monotonic()
    process = subprocess.Popen(
        curate_command(["run", str(config), "--verbose"]),
        cwd=REPO,
        env={**curate_environment(), "TERM": "xterm", "COLUMNS": "120"},
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    seen, first = b"", None
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the run ended
            break
        if not chunk:
            break
        first = first or time.monotonic() - started
        seen += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0, seen.decode(errors="replace")[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))
    assert first is not None and first < 5, first
    assert "importing Prefect" in text and "starting Prefect's temporary server" in text
    assert "anonymous usage" not in text and "Traceback" not in text
    rows = re.split(r"[\r\n]", text)
    logged = [row for row in rows if " | INFO " in row]
    assert any("Finished in state Completed()" in row for row in logged)
    assert [row for row in logged if not re.match(r"\d\d:\d\d:\d\d\.\d{3} \| INFO ", row)] == []
