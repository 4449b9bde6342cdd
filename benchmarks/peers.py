"""What the benchmarks share: virtualenvs for the peers they compare against (never the
project's dependencies), and the rounding of their final JSON line.

Each peer gets its own virtualenv under ``.cache/bench-peers/<name>``, made on first use;
``PEER_PYTHON`` points a benchmark at another interpreter that has the peer instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / ".cache" / "bench-peers"


def peer_python(name: str, packages: list[str], modules: list[str]) -> str:
    """An interpreter where ``modules`` import: ``PEER_PYTHON``, or the virtualenv ``name`` with
    ``packages`` installed (made now if it is missing or broken)."""
    if os.environ.get("PEER_PYTHON"):
        return os.environ["PEER_PYTHON"]
    venv = PEERS_DIR / name
    python = venv / "bin" / "python"
    probe = f"import {', '.join(modules)}"
    ready = python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0
    if not ready:
        print(f"Installing {' '.join(packages)} into {venv.relative_to(ROOT)}", file=sys.stderr)
        for command in (
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", *packages],
        ):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"peer setup failed: {' '.join(command)}\n{done.stderr[-4000:]}")
    return str(python)


def rounded(value):
    """Floats to 4 decimals, through nested dicts (for a benchmark's final JSON line)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value
