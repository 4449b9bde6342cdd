"""A finished run's curated documents into a dedup index (``pipeline.dedup.index``), and what an
index holds: what ``curate index add`` and ``curate index show`` run.

The index is built from what the run's dedup stage stored: its signature files (band keys, exact
hashes, shingle sets) in ``dedup/intermediate``, keeping the rows of the documents in the run's
curated output (its last document stage: a document the lines stage emptied is not kept). A
run is known by its curated files' sha256, so adding the same run twice changes nothing, and a
run made again with other output is another run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.dedup.index import DedupIndex, DedupIndexError, ShardToAdd, add_run
from pipeline.dedup.layout import DedupWork
from pipeline.formats.manifest import stage_outputs
from pipeline.stages.run import RunFiles
from pipeline.stages.shard import fingerprint
from pipeline.stages.units import RunUnits, in_process

DEDUP = "dedup"


def _shards(run: RunFiles) -> tuple[list[ShardToAdd], list[Path]]:
    """The dedup stage's signature file of each of its input shards, with the curated file of the
    same name (None where the curated stage kept none of it); and the curated files."""
    name = run.root.name
    if DEDUP not in run.stats:
        raise DedupIndexError(f"run {name} has no finished dedup stage; add a run made with dedup enabled")
    previous = run.previous(DEDUP) or "source"
    inputs = stage_outputs(run.root, previous, manifest=run.manifest)
    curated = run.outputs(run.last_document_stage, "docs")
    by_name = {path.name: path for path in curated}
    work = DedupWork(run.root / DEDUP / "intermediate")
    shards = [ShardToAdd(work.signatures(s), by_name.get(path.name)) for s, path in enumerate(inputs)]
    missing = next((s.signatures for s in shards if not s.signatures.exists()), None)
    if missing is not None:
        raise DedupIndexError(f"run {name} has no dedup signatures ({missing} is missing); run its dedup stage again")
    return shards, curated


def run_record(run_dir) -> tuple[dict, list[ShardToAdd]]:
    """The run's record for the index (key, name, source) and its shards to add."""
    run = RunFiles.open(run_dir)
    shards, curated = _shards(run)
    digests = [fingerprint(path)["sha256"] for path in curated]
    key = hashlib.sha256(json.dumps(digests).encode()).hexdigest()[:16]
    return {"key": key, "name": run.root.name, "source": str(run.root)}, shards


def add_to_index(index_path, run_dir, partitions: int | None = None, run_units: RunUnits = in_process) -> dict:
    """Add the run's curated documents to the index at ``index_path`` (made, with ``partitions``
    band-key partitions or the run's dedup.partitions, if there is none); the run's record."""
    record, shards = run_record(run_dir)
    config = RunFiles.open(run_dir).config
    default = config.dedup.partitions if config else 8
    return add_run(DedupIndex(index_path), record, shards, partitions, run_units, default_partitions=default)


def index_summary(index_path) -> dict:
    """What the index holds: its manifest, less the paths of its files."""
    manifest = DedupIndex(index_path).opened()
    runs = [{k: r[k] for k in ("name", "key", "source", "docs", "shards")} for r in manifest["runs"]]
    return {
        "path": str(index_path),
        "docs": manifest["docs"],
        "partitions": manifest["partitions"],
        "keys": manifest["keys"],
        "settings": manifest["settings"],
        "runs": runs,
    }
