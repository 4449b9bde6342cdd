"""``manifest.json``: what a run was made from (config, package versions, input checksums) and
its counts per stage. It holds no times, so the same config and inputs give the same bytes.

The manifest is also what makes a folder a run: a run writes only into a new folder, an empty
one, or a folder with a run's manifest (:func:`check_run_dir`), since its stages replace files in
the folders they write. While a run works, it holds ``<run_dir>/.run.lock`` (:func:`run_lock`), so a
second run on the same folder stops with one line instead of mixing its files into the first's.

For reruns with a changed config (pipeline.stages.rerun), the manifest records under ``made`` each
stage's identity and the files it wrote, so that a stage's outputs are removed only when they are
known to be its own.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.io.owner import RECORD, end_record, has_record, remove_written, written_files
from pipeline.io.storage import as_path, is_local, parquet_files
from pipeline.io.writer import read_json, write_json

if TYPE_CHECKING:  # the manifest records a config it is given; it never parses one
    from pipeline.config import RunConfig

try:
    import fcntl
except ImportError:  # not a POSIX system: runs are not locked
    fcntl = None

LOCK_NAME = ".run.lock"
# What a run folder may hold before its manifest is written: the lock, the flows' Prefect home and
# the run logs (flows.runtime).
OWN_ENTRIES = (LOCK_NAME, ".prefect", "logs")
# Keys every run manifest has (a mixture's manifest.json, for one, has others).
MANIFEST_KEYS = ("config", "stages")


class RunDirInUse(ConfigError):
    """Another run holds the run directory's lock."""


def _where(root) -> str:
    return str(Path(root).absolute()) if is_local(root) else str(root)


def check_run_dir(run_dir) -> None:
    """Refuse a ``run_dir`` that is neither new, nor empty, nor a run of this project: a run's
    stages clear and replace files in the folders they write, so a folder of other files is never
    adopted. Raises ConfigError with one line."""
    root = as_path(run_dir)
    if not root.exists():
        return
    if not root.is_dir():
        raise ConfigError(f"run_dir: {_where(root)!r} is a file, not a folder; give a new or empty folder")
    manifest = RunLayout(root).manifest
    if manifest.exists():
        try:
            record = read_json(manifest)
        except Exception:
            record = None
        if isinstance(record, dict) and all(key in record for key in MANIFEST_KEYS):
            return
        raise ConfigError(
            f"run_dir: {_where(root)!r} holds a manifest.json that is not a curate run's; give a new or empty folder"
        )
    others = sorted(entry.name for entry in root.iterdir() if entry.name not in OWN_ENTRIES)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise ConfigError(
            f"run_dir: {_where(root)!r} is a folder of other files ({shown}), not a run; "
            "give a new or empty folder (a run replaces files in the folders it writes)"
        )


_HELD: dict[str, list] = {}  # resolved run_dir -> [lock file descriptor, holders in this process]
_HELD_GUARD = threading.Lock()


def _holder(path: Path) -> str:
    try:
        record = json.loads(path.read_text())
        return f"pid {record['pid']} on {record['host']}, since {record['started']}"
    except Exception:
        return "a process whose lock record is unreadable"


@contextmanager
def run_lock(run_dir) -> Iterator[None]:
    """Hold ``<run_dir>/.run.lock`` for as long as the block runs; raise RunDirInUse with one line
    when another process holds it. The lock is an ``flock`` on that file, which the system lets go
    when its holder exits, so a lock left by a killed run is taken over. A process may nest holds on
    one folder. Folders on remote file systems (s3:// ...) are not locked."""
    root = as_path(run_dir)
    if fcntl is None or not is_local(root):
        yield
        return
    root = Path(root).absolute()
    root.mkdir(parents=True, exist_ok=True)
    key = str(root.resolve())
    with _HELD_GUARD:
        if key in _HELD:
            _HELD[key][1] += 1
            nested = True
        else:
            nested = False
    if not nested:
        path = root / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RunDirInUse(
                f"run_dir: {str(root)!r} is in use by another run ({_holder(path)}); wait for it "
                "to finish, or give another run_dir"
            ) from None
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode() + b"\n", 0)
        with _HELD_GUARD:
            _HELD[key] = [fd, 1]
    try:
        yield
    finally:
        with _HELD_GUARD:
            entry = _HELD[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _HELD[key]
                # The file stays: removing it would let a process that opened it just now lock a
                # file no longer in the folder while a third one locks a new one.
                fcntl.flock(entry[0], fcntl.LOCK_UN)
                os.close(entry[0])


PACKAGES = (
    "curate",
    "pyarrow",
    "polars",
    "prefect",
    "pydantic",
    "orjson",
    "warcio",
    "resiliparse",
    "license-expression",
    "zstandard",
    "datasketch",
    "fasttext-numpy2",
    "tokenizers",
    "torch",
)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def config_record(config: RunConfig) -> dict:
    return config.model_dump(mode="json")


# Settings that decide only whether a finished stage passes, never what a stage writes: a run
# resumes with them changed (a source that failed max_quarantine_fraction, with the limit raised).
CHECK_SETTINGS = ("max_quarantine_fraction",)


def what_is_made(record: dict) -> dict:
    """A config record without :data:`CHECK_SETTINGS` (the run's and each source's)."""
    record = {k: v for k, v in record.items() if k not in CHECK_SETTINGS}
    if isinstance(record.get("sources"), list):
        record["sources"] = [
            {k: v for k, v in s.items() if k not in CHECK_SETTINGS} if isinstance(s, dict) else s
            for s in record["sources"]
        ]
    return record


def new_manifest(config: RunConfig) -> dict:
    """The manifest of a run that has written nothing yet."""
    return {"config": config_record(config), "versions": package_versions(), "inputs": [], "stages": {}, MADE: {}}


# What the manifest records of each stage it began: ``identity`` (the config it reads and the
# identity of the stage before it, see pipeline.stages.rerun), ``foreign`` (the files its folder
# held before this project wrote there) and, once it finished, ``files`` (every file it wrote).
# A manifest without this key was made before reruns were recorded.
MADE = "made"
# A stage's record flag: its folder keeps a record of the files it writes (pipeline.io.owner), so
# that, unfinished, its own files are those the record names (none without one), never the others;
# on a remote file system, which keeps no records, those it did not find there first.
RECORDED = "recorded"


def stage_files(run_dir, stage: str, under: str = "") -> list[str]:
    """Every file under the stage's folder (with ``under``, under that subfolder of it; its record
    of what it wrote aside), as sorted paths relative to the stage's folder."""
    root = RunLayout(run_dir).stage(stage).root
    top = root / under if under else root
    if not top.exists():
        return []
    return sorted(
        p.relative_to(root).as_posix()
        for p in top.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != RECORD  # a link is never the stage's own
    )


def own_files(run_dir, stage: str, record: dict, under: str = "") -> list[str]:
    """The files of the stage's folder (with ``under``, of that subfolder) that this project wrote
    there: those the finished stage recorded and those its folder's record names (a stage at work,
    or killed midway). A stage begun before such records were kept: every file there but those it
    found there first."""
    here = stage_files(run_dir, stage, under)
    root = RunLayout(run_dir).stage(stage).root
    unrecorded = not is_local(root) or not (record.get(RECORDED) or has_record(root))  # no records on a remote one
    if "files" not in record and unrecorded:
        return sorted(set(here) - set(record.get("foreign", [])))
    return sorted((set(record.get("files", [])) | written_files(root)) & set(here))


def remove_own_outputs(run_dir, stage: str, record: dict, keep: Iterable[str] = (), under: str = "") -> list[str]:
    """Delete the files the stage wrote (:func:`own_files`) but those in ``keep`` (with ``under``,
    only those in that subfolder of the stage's), then the folders they leave empty; return the
    files. A file the project did not write stays, and so does its folder."""
    root = RunLayout(run_dir).stage(stage).root
    prefix = f"{under}/" if under else ""
    own = [rel for rel in own_files(run_dir, stage, record) if rel.startswith(prefix)]
    if is_local(root):
        gone = remove_written(root, under=under, keep=keep, also=own)
    else:  # no records on a remote file system: the recorded files, one by one
        kept = set(keep)
        gone = [rel for rel in own if rel not in kept]
        for rel in gone:
            (root / rel).unlink()
    if not under and root.exists() and not stage_files(run_dir, stage):
        end_record(root)
        folders = (p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
        if not any(root.iterdir()):
            root.rmdir()
    return gone


def _made_record(run_dir, stage: str, manifest: dict | None = None) -> dict:
    if manifest is None:
        manifest_path = RunLayout(run_dir).manifest
        manifest = read_json(manifest_path) if manifest_path.exists() else {}
    made = manifest.get(MADE) if isinstance(manifest, dict) else None
    record = made.get(stage) if isinstance(made, dict) else None
    return record if isinstance(record, dict) else {}


def stage_own_files(run_dir, stage: str, manifest: dict | None = None) -> set[str]:
    """The files of the stage's folder it wrote (:func:`own_files`, by the manifest's record of
    it), relative to the folder. ``manifest``: the run's, when read already."""
    return set(own_files(run_dir, stage, _made_record(run_dir, stage, manifest)))


# What a stage writes in each folder that a later stage or a view reads: Parquet shards of documents
# (docs), of the documents it removed (removed), of records it could not read (quarantine, source),
# of its measurements (attributes, filter), and one JSON record per finished unit (parts).
OUTPUT_SUFFIX = {
    "docs": ".parquet",
    "removed": ".parquet",
    "quarantine": ".parquet",
    "attributes": ".parquet",
    "parts": ".json",
}


def curate_folder(path) -> Path | None:
    """The nearest folder above the local file ``path`` that this project writes: a run directory
    (its ``manifest.json`` is a run's record) or a folder claimed for a command's outputs (it holds
    a record, pipeline.io.owner). None when there is none, or for a URL. A command's output file
    never goes there, even with --force: the file it would replace is the run's."""
    path = as_path(path)
    if not is_local(path):
        return None
    for folder in Path(os.path.abspath(path)).parents:
        if has_record(folder) or _is_run_record(RunLayout(folder).manifest):
            return folder
    return None


def _is_run_record(path: Path) -> bool:
    try:
        found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and isinstance(found.get("stages"), dict)


def stage_outputs(run_dir, stage: str, kind: str = "docs", manifest: dict | None = None) -> list:
    """The files of ``kind`` (a key of :data:`OUTPUT_SUFFIX`) the stage wrote, as sorted paths: by
    the manifest's record of the files it wrote and its folder's (:func:`own_files`), so a file
    someone else put in its folder is never read (it stays where it is). A stage of a run made
    before such records were kept: the folder's listing, as :func:`pipeline.io.storage.parquet_files`
    gives it. ``manifest``: the run's, when read already."""
    record = _made_record(run_dir, stage, manifest)
    root = RunLayout(run_dir).stage(stage).root
    folder, suffix = root / kind, OUTPUT_SUFFIX[kind]
    if "files" not in record and not record.get(RECORDED) and not has_record(root):
        foreign = set(record.get("foreign", []))
        listed = parquet_files(folder) if suffix == ".parquet" else sorted(folder.glob(f"*{suffix}"))
        return [p for p in listed if f"{kind}/{p.name}" not in foreign and not p.name.startswith(".")]
    names = [rel[len(kind) + 1 :] for rel in own_files(run_dir, stage, record, under=kind)]
    return [folder / name for name in names if "/" not in name and name.endswith(suffix) and not name.startswith(".")]


def remove_stage_outputs(run_dir, stage: str, under: str) -> list[str]:
    """Delete what the stage wrote in its subfolder ``under`` (its intermediate files of an earlier
    run, a mixture of other settings), by the manifest's record of the stage and its folder's; a
    file put there by someone else stays. Returns the files deleted."""
    return remove_own_outputs(run_dir, stage, _made_record(run_dir, stage), under=under)


def record_stage(config: RunConfig, stage: str, counts: dict, inputs: list[dict] | None = None) -> dict:
    """Add a finished stage's counts (and, for the source stage, the input checksums), and the
    files it wrote (the last thing it does, so that every file it writes is named)."""
    layout = RunLayout(config.run_dir)
    manifest = read_json(layout.manifest)
    manifest["stages"][stage] = counts
    if inputs is not None:
        manifest["inputs"] = inputs
    record = manifest.get(MADE, {}).get(stage)
    if record is not None:  # begun by open_run: the files it recorded, taken over from its folder's record
        record["files"] = own_files(config.run_dir, stage, record)
    write_json(manifest, layout.manifest)
    if record is not None:  # else (a stage run on its own) the folder's record stays the only list
        end_record(layout.stage(stage).root)
    return manifest
