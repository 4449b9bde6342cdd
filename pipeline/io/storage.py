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

A path a user gives (a CLI argument, a config's ``run_dir``) is read by :func:`location`, and one
to be written by :func:`output_location`: both keep a URL intact, and they say in one line
(:class:`LocationError`) when it cannot be used, before any work: a file system whose package is
not installed or that takes no writes, a URL where only a local path will do, an output that is a
folder where a file is written (or the reverse), or is under a file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

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
# The hosts of a file URL that mean this machine (RFC 8089: file:///x and file://localhost/x).
_LOCAL_HOSTS = ("", "localhost")


class LocationError(ValueError):
    """A path or URL that cannot be used as given: one line naming it and what to give instead."""


def as_path(path: str | os.PathLike | UPath) -> AnyPath:
    """A path object for ``path``: a :class:`UPath` for a URL with a protocol (``s3://b/run``),
    a :class:`pathlib.Path` for anything local (``runs/demo``, ``/data/run``, ``file:///data/run``,
    ``file://localhost/data/run``). A relative local path stays relative; a path object passes
    through unchanged. A file URL naming another host is a :class:`LocationError`."""
    if isinstance(path, UPath):
        return Path(path.path) if path.protocol in _LOCAL_PROTOCOLS else path
    if isinstance(path, Path):
        return path
    text = os.fspath(path)
    if not _URL.match(text):
        return Path(text)
    if text.split(":", 1)[0].lower() in _LOCAL_PROTOCOLS:
        return _file_url(text)
    return UPath(text)


def _file_url(text: str) -> Path:
    """The local path a ``file://`` (or ``local://``) URL names: its host must be this machine's
    (fsspec would read ``file://localhost/x`` as the relative path ``localhost/x``)."""
    url = urlsplit(text)
    if (url.hostname or "") not in _LOCAL_HOSTS or url.port is not None:
        raise LocationError(
            f"{text}: a file URL of the host {url.netloc!r}, not of this machine; give a local path "
            "(file:///path or file://localhost/path), or the URL of a file system that host serves"
        )
    return Path(unquote(url.path))


def is_local(path: str | os.PathLike | UPath) -> bool:
    """Whether ``path`` is on this machine's file system (not behind an fsspec URL)."""
    return not isinstance(as_path(path), UPath)


def is_path(value) -> bool:
    """Whether ``value`` names one file or folder (a str or a path object), not several."""
    return isinstance(value, (str, os.PathLike, UPath))


# ---------------------------------------------------------------------------------------------
# Paths a user gives


# fsspec protocols that only read (an archive's file systems are found by their class).
_READ_ONLY = ("http", "https", "github", "git", "reference", "data")
# Where to write instead, in a refusal.
_WRITABLE = "a local path or the URL of a file system that takes writes (s3://bucket/...)"


def location(value, local: str | None = None) -> AnyPath:
    """``value`` as a user wrote it (a local path, a ``file://`` URL, or the URL of an fsspec
    file system) as a path object (:func:`as_path`, the URL kept whole), checked without touching
    the file system: a URL names a file system fsspec knows, whose package is installed. With
    ``local`` (why a local path is needed, and what to do: "the export writes memory-mapped files;
    export to a local folder, then copy it"), a URL is refused. Raises :class:`LocationError`."""
    if not is_path(value) or not str(value).strip():
        raise LocationError(f"{value!r} is not a path; give a local path or a URL such as s3://bucket/run")
    try:
        path = as_path(value)
    except LocationError:
        raise
    except ValueError:  # upath's "Unsupported filesystem"
        if local is not None:
            raise LocationError(f"{value} is a URL; {local}") from None
        raise LocationError(
            f"{value}: no file system is known for {str(value).split(':', 1)[0]}://; give a local path "
            "or the URL of a file system fsspec knows (s3://bucket/...)"
        ) from None
    if is_local(path):
        return path
    if local is not None:
        raise LocationError(f"{value} is a URL; {local}")
    _filesystem_class(path, str(value))
    return path


def output_location(value, folder: bool, local: str | None = None) -> AnyPath:
    """:func:`location` for a path to be written: a folder (``folder``) or a file. A URL's file
    system must take writes; a local path must not be a file where a folder is written (or a
    folder where a file is), nor be under a file. Only a local path is looked at (no request
    goes to a remote file system). Raises :class:`LocationError`."""
    path = location(value, local)
    if not is_local(path):
        _check_writable(path, str(value))
        return path
    if path.exists():
        if folder and not path.is_dir():
            raise LocationError(f"{str(path)!r} is a file, not a folder; give a new or empty folder")
        if not folder and path.is_dir():
            raise LocationError(f"{str(path)!r} is a folder, not a file; name the file to write")
        return path
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                made = "folder" if folder else "file"
                raise LocationError(
                    f"{str(parent)!r} is a file, so no {made} can be made under it; "
                    "give a path whose parents are folders"
                )
            break
    return path


def _filesystem_class(path: UPath, shown: str) -> type:
    """The fsspec class of ``path``'s file system, imported: a missing package is a
    :class:`LocationError` naming it (and ``shown``, the URL as written)."""
    import fsspec
    from fsspec.registry import known_implementations

    try:
        return fsspec.get_filesystem_class(path.protocol)
    except ImportError:
        known = known_implementations.get(path.protocol, {})
        package = known.get("class", "").split(".")[0]
        if package and package != "fsspec":
            needs = f"the package {package}, which is not installed: pip install {package}"
        else:
            needs = f"a package that is not installed ({known.get('err', 'see fsspec')})"
        raise LocationError(
            f"{shown}: the {path.protocol}:// file system needs {needs}; or give a local path"
        ) from None


def _check_writable(path: UPath, shown: str) -> None:
    """Refuse a URL (``shown`` as written) whose file system cannot hold files written one by one."""
    from fsspec.archive import AbstractArchiveFileSystem

    kind = _filesystem_class(path, shown)
    if issubclass(kind, AbstractArchiveFileSystem):
        raise LocationError(
            f"{shown}: {path.protocol}:// reads the files in an archive and cannot write them one by one; "
            f"give {_WRITABLE}"
        )
    protocols = (kind.protocol,) if isinstance(kind.protocol, str) else tuple(kind.protocol)
    if path.protocol in _READ_ONLY or set(protocols) & set(_READ_ONLY):
        raise LocationError(f"{shown}: the {path.protocol}:// file system is read-only; give {_WRITABLE}")


def is_file(path: AnyPath, shown: str | None = None) -> bool:
    """Whether ``path`` is a file; a :class:`LocationError` naming ``shown`` (default: the path)
    when its file system cannot be opened at all: an archive that is not there or is no archive,
    a bucket that refuses the request."""
    try:
        return path.is_file()
    except Exception as error:  # whatever the file system's package raises, as one line
        why = f"{type(error).__name__}: {error}".replace("\n", " ")
        if "::" not in str(shown or path) and _is_archive(path):  # zip://x.zip: fsspec reads no archive
            why += f"; an archive's URL names the archive after '::', as {path.protocol}://run::/data/runs.zip"
        raise LocationError(f"{shown or path} cannot be opened ({why}); give a location that exists") from None


def _is_archive(path: AnyPath) -> bool:
    from fsspec.archive import AbstractArchiveFileSystem

    return isinstance(path, UPath) and issubclass(_filesystem_class(path, str(path)), AbstractArchiveFileSystem)


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


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows with ``schema`` (``Schema.empty_table`` imports pandas: a third of a
    second the first time in a process)."""
    return pa.Table.from_batches([], schema=schema)


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
