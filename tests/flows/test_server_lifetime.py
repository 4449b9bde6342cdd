"""``curate run`` killed outright (SIGKILL: nothing unwinds, no atexit) while its stages run: its
temporary Prefect server, in a session of its own, ends within seconds too."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.flows.test_interrupt import servers_of, write_run
from tests.helpers import REPO, curate_command, curate_environment

pytestmark = pytest.mark.flow


def test_the_temporary_server_ends_with_a_curate_process_killed_outright(tmp_path):
    config = write_run(tmp_path, files=2, docs=50)
    run_dir = tmp_path / "run"
    command, env = curate_command(["run", str(config), "--quiet"]), curate_environment()
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 600
        while not list(run_dir.glob("source/parts/*.json")) and process.poll() is None:
            assert time.monotonic() < deadline, "the run did not start its stages"
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be killed"
        assert servers_of(run_dir), "no temporary server to outlive the run"
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 10
        while servers_of(run_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert servers_of(run_dir) == []
    finally:
        for pid in servers_of(run_dir):  # what a failure leaves
            os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
