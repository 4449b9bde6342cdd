"""What the benchmarks share: virtualenvs for the peers they compare against (never the
project's dependencies), the demo corpus as the source stage reads it, and the rounding of their
final JSON line.

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


def demo_documents(corpus_dir: Path, run_dir: Path, docs: int, seed: int, docs_path: Path, labels: dict):
    """The documents of the demo corpus (:func:`demo.corpus.build_demo_corpus`, ``docs``
    documents, ``seed``) as the project's ``source`` stage writes them (run without Prefect, as
    ``tests.helpers.run_units`` does), with the label columns ``labels`` maps (name in
    ``labels.parquet`` -> column); corpus and documents (``docs_path``) are made once."""
    import shutil

    import polars as pl

    from demo.config import demo_config
    from demo.corpus import build_demo_corpus
    from pipeline.config import parse_config
    from pipeline.formats.documents import RunLayout
    from pipeline.stages.source import source_jobs, source_unit

    if not docs_path.exists():
        print(
            f"Building the demo corpus ({docs} documents) and reading it with the source stage; "
            "both are reused afterwards",
            file=sys.stderr,
        )
        build_demo_corpus(corpus_dir, docs=docs, seed=seed)
        config = parse_config(demo_config(corpus_dir, run_dir, seed=seed))
        stage = RunLayout(config.run_dir).stage("source").make()
        for job in source_jobs(config, stage):
            source_unit(job)
        frame = pl.read_parquet(str(stage.docs / "*.parquet"))
        tmp = docs_path.with_suffix(".tmp")
        frame.write_parquet(tmp, compression="zstd")
        tmp.rename(docs_path)
        shutil.rmtree(run_dir)
    # A document's id is "<source>/<key>", key being its label's (see demo.writers).
    label_frame = pl.read_parquet(Path(corpus_dir) / "labels.parquet").select(
        id=pl.col("source") + "/" + pl.col("key"), **{column: name for name, column in labels.items()}
    )
    return pl.read_parquet(docs_path).join(label_frame, on="id", how="left", maintain_order="left")


def rounded(value):
    """Floats to 4 decimals, through nested dicts (for a benchmark's final JSON line)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value
