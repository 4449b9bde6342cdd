"""Atomic writers: every file appears under its final name complete, or not at all.

A file is written to a hidden temporary name in its folder, flushed, then renamed; a run killed
midway leaves only temporaries, which :func:`remove_temporaries` clears on the next run.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.schema import PARQUET_COMPRESSION

TMP_MARK = ".tmp-"


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def remove_temporaries(folder: Path) -> int:
    """Delete temporaries a killed run left in ``folder`` (recursively); return how many."""
    if not folder.exists():
        return 0
    stale = [p for p in folder.rglob(f".*{TMP_MARK}*") if p.is_file()]
    for path in stale:
        path.unlink()
    return len(stale)


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` as one zstd Parquet file, atomically. Same table, same bytes."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression=PARQUET_COMPRESSION)


@contextmanager
def parquet_stream(path: Path, schema: pa.Schema) -> Iterator[pq.ParquetWriter]:
    """A Parquet writer for batch-at-a-time output that appears under ``path`` only when closed
    without error."""
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, schema, compression=PARQUET_COMPRESSION) as out:
            yield out


def write_json(obj: object, path: Path) -> None:
    """Write ``obj`` as pretty, key-sorted JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


class ShardWriter:
    """Collects record batches and writes them as numbered Parquet shards of bounded size.

    Shards are named ``<prefix>-<part:04d>.parquet``; a shard is cut when it reaches
    ``max_rows`` rows or ``max_bytes`` of Arrow memory, whichever comes first.
    """

    def __init__(self, folder: Path, prefix: str, schema: pa.Schema, max_rows: int, max_bytes: int):
        self.folder = folder
        self.prefix = prefix
        self.schema = schema
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self.shards: list[dict] = []

    @property
    def rows_written(self) -> int:
        return sum(shard["rows"] for shard in self.shards)

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= self.max_rows or self._pending_bytes >= self.max_bytes:
            self._flush(final=False)

    def close(self) -> list[dict]:
        """Write what is pending; return ``[{"file", "rows"}]`` for every shard written."""
        self._flush(final=True)
        return self.shards

    def _flush(self, final: bool) -> None:
        """Write full shards; keep a remainder of fewer than ``max_rows`` rows pending unless
        ``final`` or the byte limit is reached."""
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        by_bytes = self._pending_bytes >= self.max_bytes
        start = 0
        while table.num_rows - start >= self.max_rows or (start < table.num_rows and (final or by_bytes)):
            piece = table.slice(start, self.max_rows).combine_chunks()
            name = f"{self.prefix}-{len(self.shards):04d}.parquet"
            write_parquet(piece, self.folder / name)
            self.shards.append({"file": name, "rows": piece.num_rows})
            start += piece.num_rows
        rest = table.slice(start)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        self._pending_bytes = rest.nbytes
