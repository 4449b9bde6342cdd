"""CI's script runs the README's test command and then the linter, and fails when either fails:
run against a stand-in `make` that records what it was asked and fails where told."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_ci(tmp_path: Path, failing: str = "") -> tuple[int, list[str]]:
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", checkout / ".ci" / "run")
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make = bin_dir / "make"
    make.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n[ "$*" != "{failing}" ]\n')
    make.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(checkout / ".ci" / "run")], env=env, capture_output=True, timeout=60)
    asked = calls.read_text().split("\n")[:-1] if calls.exists() else []
    return result.returncode, asked


def test_ci_runs_the_tests_then_the_linter(tmp_path):
    assert run_ci(tmp_path) == (0, ["test", "lint"])


@pytest.mark.parametrize(("failing", "asked"), [("test", ["test"]), ("lint", ["test", "lint"])])
def test_ci_fails_when_a_step_fails(tmp_path, failing, asked):
    code, calls = run_ci(tmp_path, failing)
    assert code != 0
    assert calls == asked
