"""Atomic writers: every file appears under its final name complete, or not at all.

On a local file system a file is written to a hidden temporary name in its folder, flushed, then
renamed; a run killed midway leaves only temporaries, which :func:`remove_temporaries` clears on
the next run. An object store (see :mod:`pipeline.io.storage`) has no rename, but storing an
object is all or nothing: the file is written to memory and stored under its final name in one
put, only when it was written without error, so nothing is left behind at all.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.io.owner import note_written
from pipeline.io.storage import as_path, is_local, put_bytes

PARQUET_COMPRESSION = "zstd"

TMP_MARK = ".tmp-"


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside the local ``path``; rename it onto ``path`` if the block
    succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        # Recorded before it appears: a process killed between the two leaves no file unrecorded.
        note_written(path)
        os.replace(tmp, path)
    except OSError as error:
        if error.filename is None:  # Arrow's write errors name no file: a full disk names this one
            error.filename = str(path)
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_sink(path) -> Iterator[Path | io.BytesIO]:
    """Where to write a file that must appear under ``path`` whole, for writers that take a file
    name or a file object (pyarrow's Parquet and IPC writers do): for a local ``path`` a temporary
    path beside it (:func:`atomic_path`); for a remote one an in-memory buffer, stored under
    ``path`` in one put when the block succeeds."""
    path = as_path(path)
    if is_local(path):
        with atomic_path(path) as tmp:
            yield tmp
        return
    buffer = io.BytesIO()
    yield buffer
    put_bytes(buffer.getvalue(), path)


@contextmanager
def scratch_file(path, suffix: str) -> Iterator[Path]:
    """A local file for work in progress on ``path`` (a spool to memory-map), deleted on leaving:
    a temporary beside ``path`` when it is local, one in the system's temporary folder when not."""
    path = as_path(path)
    if is_local(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}{suffix}")
    else:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}{TMP_MARK}", suffix=suffix)
        os.close(handle)
        scratch = Path(name)
    try:
        yield scratch
    finally:
        scratch.unlink(missing_ok=True)


def remove_temporaries(folder) -> int:
    """Delete temporaries a killed run left in ``folder`` (recursively); return how many."""
    folder = as_path(folder)
    if not folder.exists():
        return 0
    stale = [p for p in folder.rglob(f".*{TMP_MARK}*") if p.is_file()]
    for path in stale:
        path.unlink()
    return len(stale)


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` as one zstd Parquet file, atomically. Same table, same bytes."""
    with atomic_sink(path) as sink:
        pq.write_table(table, sink, compression=PARQUET_COMPRESSION)


@contextmanager
def parquet_stream(
    path: Path, schema: pa.Schema, use_dictionary: bool | list[str] = True
) -> Iterator[pq.ParquetWriter]:
    """A Parquet writer for batch-at-a-time output that appears under ``path`` only when closed
    without error. ``use_dictionary``: the columns to try dictionary encoding on (all by default);
    leave out columns of values that rarely repeat, such as hashes, whose dictionary is built and
    thrown away (dedup's forwarded shingle sets write in a fifth less CPU time without it, and
    with less of the writer's memory)."""
    with atomic_sink(path) as sink:
        with pq.ParquetWriter(sink, schema, compression=PARQUET_COMPRESSION, use_dictionary=use_dictionary) as out:
            yield out


def write_bytes(data: bytes, path: Path) -> None:
    """Write ``data`` to ``path``, atomically."""
    with atomic_sink(path) as sink:
        if isinstance(sink, Path):
            sink.write_bytes(data)
        else:
            sink.write(data)


def write_text(text: str, path: Path) -> None:
    """Write ``text`` to ``path`` as UTF-8, atomically."""
    write_bytes(text.encode("utf-8"), path)


def write_json(obj: object, path: Path) -> None:
    """Write ``obj`` as pretty, key-sorted JSON, atomically."""
    write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", path)


def read_json(path: Path) -> dict:
    return json.loads(as_path(path).read_text(encoding="utf-8"))


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
