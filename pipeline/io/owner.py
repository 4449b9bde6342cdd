"""Which files this project wrote in a folder, so that a command writes only into a folder it made,
was given empty, or wrote before, and deletes only the files it wrote.

A folder a command writes is *claimed* (:func:`claim`): it must be new, empty, or carry the
record of an earlier claim; the record, a hidden file :data:`RECORD` in the folder, is made before
any other file. Every file the atomic writers (:mod:`pipeline.io.writer`) finish under a folder
with a record is added to the nearest one, one JSON line per file, appended (so units of work in
other processes add theirs too, and a killed command leaves a record of all it finished).
:func:`remove_written` deletes recorded files only: a file someone else put in the folder stays.

A run's stage folders keep such a record while the stage works (:func:`begin_record`); the run's
manifest takes the list over when the stage finishes (pipeline.formats.manifest). Records are kept
on this machine's file system only: a remote folder (an fsspec URL) is written without one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from pipeline.io.storage import as_path, is_local

# The record of what this project wrote in a folder: a first line naming what claimed it, then
# one JSON string per file written, relative to the folder.
RECORD = ".curate-written"


class ForeignFolderError(ValueError):
    """A folder to write holds files this project did not write there."""


def _where(folder: Path) -> str:
    return str(Path(folder).absolute())


def has_record(folder) -> bool:
    folder = as_path(folder)
    return is_local(folder) and (folder / RECORD).is_file()


def begin_record(folder, what: str) -> Path:
    """Make ``folder`` (and its parents) and its record, when it has none; return the folder. No
    check of what it holds: for folders inside a claimed one (a run's stage folders)."""
    folder = Path(as_path(folder))
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / RECORD
    if not record.exists():
        with open(record, "a", encoding="utf-8") as out:
            out.write(f"# files written here by curate ({what})\n")
    return folder


def _others(folder: Path, written: set[str]) -> list[str]:
    entries = [p for p in folder.rglob("*") if p.is_file() and p.name != RECORD]
    return sorted(p.relative_to(folder).as_posix() for p in entries if p.relative_to(folder).as_posix() not in written)


def claim(folder, what: str, adopt: Iterable[str] = ()) -> Path:
    """Take ``folder`` for a command to write in: a new folder, an empty one, or one with a record
    (what an earlier run of a command wrote there), whose record is begun before any file is
    written. ``adopt``: files of the folder known to be this project's from a record of their own
    (a corpus summary's file list), added to the record. Raises ForeignFolderError with one line
    for any other folder: one of other files, or a file. Remote folders are only checked."""
    path = as_path(folder)
    if path.exists() and not path.is_dir():
        raise ForeignFolderError(f"{_where(path)!r} is a file, not a folder; give a new or empty folder for the {what}")
    if not is_local(path):
        if path.exists() and any(path.iterdir()):
            raise ForeignFolderError(f"{path} is not empty; give a new or empty folder for the {what}")
        return path
    adopted = sorted(set(adopt))
    if not has_record(path) and path.exists():
        others = _others(path, set(adopted))
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise ForeignFolderError(
                f"{_where(path)!r} holds files curate did not write ({shown}); give a new or empty folder "
                f"for the {what}, or move those files away"
            )
    begin_record(path, what)
    note_files(path, [rel for rel in adopted if rel not in written_files(path)])
    return path


def written_files(folder) -> set[str]:
    """Every file the record of ``folder`` names (present or not), relative to it; none when the
    folder has no record."""
    folder = as_path(folder)
    if not has_record(folder):
        return set()
    found = set()
    for line in (folder / RECORD).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            try:
                found.add(json.loads(line))
            except ValueError:  # a line cut by a killed process: that file was not finished
                continue
    return found


def note_files(folder, files: Iterable[str]) -> None:
    """Add ``files`` (relative to ``folder``) to the folder's record. One write per call in append
    mode: lines of concurrent writers never interleave."""
    lines = "".join(json.dumps(rel, ensure_ascii=False) + "\n" for rel in files)
    if lines:
        fd = os.open(Path(folder) / RECORD, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, lines.encode("utf-8"))
        finally:
            os.close(fd)


def note_written(path) -> None:
    """Add the finished local file ``path`` to the record of the nearest folder above it that has
    one (nothing when none has)."""
    path = Path(os.path.abspath(path))
    for folder in path.parents:
        if (folder / RECORD).is_file():
            note_files(folder, [path.relative_to(folder).as_posix()])
            return


def remove_written(folder, under: str = "", keep: Iterable[str] = (), also: Iterable[str] = ()) -> list[str]:
    """Delete the files of ``folder`` that its record names (and ``also``: files known from
    another record of the same writer), those in ``keep`` aside; with ``under``, only those in
    that subfolder. Folders left empty go too, the record's folder aside. Returns the files
    deleted, relative to ``folder``. A file the record does not name stays."""
    folder = as_path(folder)
    if not folder.exists():
        return []
    kept = set(keep)
    prefix = f"{under.strip('/')}/" if under else ""
    named = written_files(folder) | set(also)
    gone = sorted(rel for rel in named if rel.startswith(prefix) and rel not in kept and (folder / rel).is_file())
    for rel in gone:
        (folder / rel).unlink()
    if gone and has_record(folder):  # a path deleted is no longer this project's file
        _rewrite(folder, written_files(folder) - set(gone))
    for parent in sorted({(folder / rel).parent for rel in gone}, key=lambda p: len(p.parts), reverse=True):
        while parent != folder and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return gone


def _rewrite(folder, files: set[str]) -> None:
    record = Path(as_path(folder)) / RECORD
    header = record.read_text(encoding="utf-8").splitlines()[0]
    tmp = record.with_name(record.name + ".new")
    tmp.write_text(header + "\n" + "".join(json.dumps(rel, ensure_ascii=False) + "\n" for rel in sorted(files)))
    os.replace(tmp, record)


def end_record(folder) -> None:
    """Delete the folder's record (its list taken over by another record)."""
    if is_local(folder):
        (Path(as_path(folder)) / RECORD).unlink(missing_ok=True)
