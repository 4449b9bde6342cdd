"""Where a run directory lives: a local folder, or any fsspec file system (``s3://bucket/run``,
``gs://...``, ``memory://run`` in tests).

This module is the one place that knows about fsspec. :func:`as_path` turns what a user wrote into
a path object: a plain :class:`pathlib.Path` for a local path (so a local run takes exactly the
code paths it always did: pyarrow and polars on file names, memory-mapped Arrow files), and a
:class:`upath.UPath` for a URL, whose methods (``/``, ``glob``, ``exists``, ``open``,
``read_text``, ``unlink``, ``mkdir`` ...) go to the URL's file system. Both have the same methods,
so code that walks a run directory works on either.

What pyarrow and polars cannot open by URL goes through the readers here: on a local path they
make the same calls as before; on a remote one they read through a pyarrow file system over the
fsspec one, so Parquet reads still fetch only the columns and row groups asked for.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from upath import UPath

# A path in a run directory: local, or on an fsspec file system.
AnyPath = Path | UPath

# ``scheme://`` at the start of a string: a URL, not a local path (a Windows drive is one letter
# and a colon, never followed by two slashes).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# fsspec protocols that name this machine's own files.
_LOCAL_PROTOCOLS = ("", "file", "local")


def as_path(path: str | os.PathLike | UPath) -> AnyPath:
    """A path object for ``path``: a :class:`UPath` for a URL with a protocol (``s3://b/run``),
    a :class:`pathlib.Path` for anything local (``runs/demo``, ``/data/run``, ``file:///data/run``).
    A relative local path stays relative; a path object passes through unchanged."""
    if isinstance(path, UPath):
        return Path(path.path) if path.protocol in _LOCAL_PROTOCOLS else path
    if isinstance(path, Path):
        return path
    text = os.fspath(path)
    if not _URL.match(text):
        return Path(text)
    url = UPath(text)
    return Path(url.path) if url.protocol in _LOCAL_PROTOCOLS else url


def is_local(path: str | os.PathLike | UPath) -> bool:
    """Whether ``path`` is on this machine's file system (not behind an fsspec URL)."""
    return not isinstance(as_path(path), UPath)


def is_path(value) -> bool:
    """Whether ``value`` names one file or folder (a str or a path object), not several."""
    return isinstance(value, (str, os.PathLike, UPath))


def arrow_filesystem(path: str | os.PathLike | UPath) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system ``path`` is on and the path within it: pyarrow's local file system
    and the absolute path, or fsspec's file system wrapped for pyarrow and the path without its
    protocol (``bucket/run/...``)."""
    path = as_path(path)
    if is_local(path):
        return pafs.LocalFileSystem(), str(path.absolute())
    return pafs.PyFileSystem(pafs.FSSpecHandler(path.fs)), path.path


def put_bytes(data: bytes, path: UPath) -> None:
    """Store ``data`` as the remote file ``path`` in one put: the object appears whole or not at
    all (there is no rename on an object store to make it so)."""
    path.fs.pipe_file(path.path, data)


def remove_tree(path: str | os.PathLike | UPath) -> None:
    """Delete a folder and everything in it (nothing when it is not there)."""
    path = as_path(path)
    if not path.exists():
        return
    if is_local(path):
        shutil.rmtree(path)
    else:
        path.fs.rm(path.path, recursive=True)


# ---------------------------------------------------------------------------------------------
# Readers


def parquet_file(path: str | os.PathLike | UPath, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """A Parquet file opened for reading (its schema, metadata, row groups and batches); with
    ``metadata``, its footer as read before, not read again."""
    path = as_path(path)
    if is_local(path):
        return pq.ParquetFile(path, metadata=metadata)
    filesystem, where = arrow_filesystem(path)
    return pq.ParquetFile(where, filesystem=filesystem, metadata=metadata)


def read_table(path: str | os.PathLike | UPath, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file as an Arrow table (only ``columns``, when given). Read through one
    ``ParquetFile``: ``pq.read_table`` sets up the dataset machinery for every file, which cost
    more than reading the small files dedup's routed steps exchange."""
    path = as_path(path)
    if is_local(path):
        return pq.ParquetFile(path).read(columns=columns)
    filesystem, where = arrow_filesystem(path)
    return pq.read_table(where, columns=columns, filesystem=filesystem)


def parquet_bytes(
    metadata: pq.FileMetaData, columns: Iterable[str] | None = None, row_groups: Iterable[int] | None = None
) -> int:
    """Compressed bytes of the column chunks a read of ``columns`` (default: all) from
    ``row_groups`` (default: all) fetches from a Parquet file: what the read costs in I/O, the
    footer aside."""
    wanted = None if columns is None else set(columns)
    groups = range(metadata.num_row_groups) if row_groups is None else row_groups
    total = 0
    for g in groups:
        group = metadata.row_group(int(g))
        for c in range(group.num_columns):
            chunk = group.column(c)
            if wanted is None or chunk.path_in_schema.split(".")[0] in wanted:
                total += chunk.total_compressed_size
    return total


def read_table_counted(path: str | os.PathLike | UPath, columns: list[str] | None = None) -> tuple[pa.Table, int]:
    """``(table, bytes)``: a Parquet file's ``columns`` (default: all) and what the read fetched
    (:func:`parquet_bytes`), the file opened once: opening it again for its footer cost about a
    fifth of dedup's second hop at a million documents, whose steps read many small files."""
    opened = parquet_file(path)
    return opened.read(columns=columns), parquet_bytes(opened.metadata, columns)


def read_parquet_counted(paths: Sequence[str | os.PathLike | UPath], columns: list[str] | None = None):
    """``(frame, bytes)``: the rows of the Parquet files ``paths`` one after another as a polars
    DataFrame (None for no files) and what the reads fetched, each file opened once
    (:func:`read_table_counted`)."""
    found = [read_table_counted(path, columns) for path in paths]
    frame = pl.from_arrow(pa.concat_tables([table for table, _ in found])) if found else None
    return frame, sum(size for _, size in found)


def parquet_files(folder: str | os.PathLike | UPath) -> list[AnyPath]:
    """The finished Parquet files of ``folder``, sorted (a writer's temporaries start with a dot);
    none when the folder is not there. A local entry that is not a file (a folder, or a link to
    one, named ``*.parquet``) is no Parquet file and not listed."""
    folder = as_path(folder)
    if not folder.exists():
        return []
    local = is_local(folder)  # a remote store has no such entries, and a check there is a request
    return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith(".") and (not local or p.is_file()))


def read_parquet(path: str | os.PathLike | UPath, columns: list[str] | None = None) -> pl.DataFrame:
    """A Parquet file as a polars DataFrame (only ``columns``, when given)."""
    path = as_path(path)
    if is_local(path):
        return pl.read_parquet(path, columns=columns)
    return pl.from_arrow(read_table(path, columns))


def scan_parquet(paths: Iterable[str | os.PathLike | UPath]) -> pl.LazyFrame:
    """Parquet files (of one schema) as one lazy frame: ``pl.scan_parquet`` on local files; on a
    remote file system a scan of a pyarrow dataset, which still reads only the columns selected."""
    paths = [as_path(p) for p in paths]
    if not paths or is_local(paths[0]):
        return pl.scan_parquet(paths)
    import pyarrow.dataset as ds  # only here: it takes a while to import

    filesystem, _ = arrow_filesystem(paths[0])
    return pl.scan_pyarrow_dataset(ds.dataset([p.path for p in paths], format="parquet", filesystem=filesystem))


def open_arrow_file(path: str | os.PathLike | UPath) -> pa.NativeFile:
    """An Arrow IPC file opened for ``pyarrow.ipc.open_file``: memory-mapped when local (zero
    copy), a random-access input file of the remote file system otherwise."""
    path = as_path(path)
    if is_local(path):
        return pa.memory_map(str(path), "r")
    filesystem, where = arrow_filesystem(path)
    return filesystem.open_input_file(where)
