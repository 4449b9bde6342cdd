"""The GPU throughput benchmark's code path, in its tiny CPU mode: it runs, and its last line is
the JSON the GPU run will print."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_throughput.py"


def run_tiny(*flags: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", *flags], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    return json.loads(last), done.stdout


def test_tiny_mode_prints_its_figures_as_json_last():
    result, _ = run_tiny("--steps", "3")
    assert result["mode"] == "tiny" and result["device"] == "cpu"
    assert "error" not in result
    assert result["tokens_per_s"] > 0 and result["loader_tokens_per_s"] > 0
    assert "mfu" in result and 0 < result["mfu"]
    assert result["peak_flops"] > 0 and result["flops_per_token"] > 0
    assert result["steps"] == 3 and result["micro_batch"] == result["requested_micro_batch"] == 4


def test_out_of_memory_halves_the_micro_batch():
    result, stdout = run_tiny("--steps", "2", "--batch", "16", "--simulate-oom-above", "5", "--loader-steps", "1")
    assert result["requested_micro_batch"] == 16 and result["micro_batch"] == 4
    assert result["loader_micro_batch"] == 4 and result["tokens_per_s"] > 0
    assert "micro batch halved to 8" in stdout and "micro batch halved to 4" in stdout
