"""A training run's checkpoints: the one module that names, writes, checks and reads them.

    checkpoints/step-NNNNNN.pt          model, optimizer, step, loader state, RNG states, config
    checkpoints/step-NNNNNN.pt.sha256   the checkpoint's sha256, as ``sha256sum`` writes it
    checkpoints/latest                  the name of the newest checkpoint

Each file is written atomically (a hidden temporary beside it, then a rename) and in that order:
the checkpoint, its checksum, the pointer. So ``latest`` never names a checkpoint whose checksum
is not written yet, and a run killed while writing leaves only a temporary, which the next run
deletes (:func:`remove_checkpoint_temporaries`).

Reading checks before it unpickles: the file's sha256 against its ``.sha256`` file (a checkpoint
without one, as written before checksums were, is checked against the CRC-32 of each record of
its zip archive instead). Unchecked, ``torch.load`` loads a flipped byte silently, and stops on a
truncated or empty file with a C++ error or a bare EOFError. A run resumes from the newest
checkpoint that passes (:func:`load_latest_checkpoint`): the one ``latest`` names, else the older
ones, newest first, naming each one it skipped and why; when none passes, one error names them.
A checkpoint stores only tensors and plain containers and loads with ``weights_only=True``.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import torch

from pipeline.formats.configfile import ConfigError
from pipeline.io.writer import TMP_MARK, atomic_path

CHECKPOINT_FORMAT = "curate.checkpoint/1"
CHECKPOINT_DIR = "checkpoints"
LATEST = "latest"
CHECKSUM_SUFFIX = ".sha256"
# How the trainer's log lines that are warnings begin (a log that has levels logs them as such).
WARNING = "warning: "

_CHECKPOINT = re.compile(r"step-(\d+)\.pt")
# The temporaries atomic_path makes of the files above: ".<name>.tmp-<pid>".
_TEMPORARY = re.compile(rf"\.(?:step-\d+\.pt(?:{re.escape(CHECKSUM_SUFFIX)})?|{LATEST}){re.escape(TMP_MARK)}\d+")


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used (missing, empty, truncated or altered); the message is one
    line naming the file(s) and what to do."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}.pt"


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def _step(path: Path) -> int | None:
    match = _CHECKPOINT.fullmatch(path.name)
    return int(match.group(1)) if match else None


def _checkpoints(folder: Path) -> list[Path]:
    """The checkpoint files in ``folder``, oldest first."""
    return sorted((p for p in folder.glob("step-*.pt") if _step(p) is not None), key=_step)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# --------------------------------------------------------------------------------------------
# Writing


def save_checkpoint(out_dir: Path, state: dict, keep_last: int) -> Path:
    """Write ``state`` as ``step-NNNNNN.pt``, then its ``.sha256``, then point ``latest`` at it,
    each atomically; delete all but the newest ``keep_last`` checkpoints up to this one, and any
    beyond it (left by a run that resumed from an earlier one: superseded)."""
    folder = Path(out_dir) / CHECKPOINT_DIR
    path = folder / checkpoint_name(state["step"])
    # A checksum of an earlier file of this name (a resumed run rewriting it) must not outlive it.
    checksum_path(path).unlink(missing_ok=True)
    # Serialized in memory, then written by Python: a full disk is then an OSError naming the
    # file (ENOSPC), where torch.save's own writer reports it as an opaque RuntimeError.
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getbuffer()
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data)
        digest = hashlib.sha256(data).hexdigest()
    with atomic_path(checksum_path(path)) as tmp:
        tmp.write_text(f"{digest}  {path.name}\n")
    with atomic_path(folder / LATEST) as tmp:
        tmp.write_text(path.name + "\n")
    kept = [p for p in _checkpoints(folder) if _step(p) <= state["step"]][-keep_last:]
    for old in _checkpoints(folder):
        if old not in kept:
            old.unlink()  # the checkpoint first: a checkpoint never stays without its checksum
    for sidecar in folder.glob(f"step-*.pt{CHECKSUM_SUFFIX}"):
        if not sidecar.with_suffix("").exists():
            sidecar.unlink()
    return path


def remove_checkpoint_temporaries(out_dir: Path) -> list[Path]:
    """Delete the temporaries that checkpoint writes killed midway left in ``out_dir/checkpoints``
    (only names of the form ``.step-NNNNNN.pt[.sha256].tmp-PID`` and ``.latest.tmp-PID``; other
    files stay); return them."""
    folder = Path(out_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    stale = sorted(p for p in folder.iterdir() if _TEMPORARY.fullmatch(p.name) and p.is_file())
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


# --------------------------------------------------------------------------------------------
# Checking and reading


def checkpoint_problem(path: Path) -> str | None:
    """Why the checkpoint at ``path`` cannot be loaded, without unpickling it; None if it passes.

    Against its ``.sha256`` when there is one; else (a checkpoint from before checksums) against
    the CRC-32 of each record of its zip archive."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size == 0:
        return "empty (0 bytes)"
    sidecar = checksum_path(path)
    if sidecar.is_file():
        fields = sidecar.read_text(errors="replace").split()
        if not fields or not re.fullmatch(r"[0-9a-f]{64}", fields[0]):
            return f"its checksum file {sidecar.name} is unreadable"
        actual = file_sha256(path)
        if actual != fields[0]:
            return f"sha256 {actual[:12]} does not match {fields[0][:12]} in {sidecar.name} ({size:,} bytes)"
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return f"not a whole checkpoint archive ({size:,} bytes: {error})"
    if bad is not None:
        return f"record {bad} fails its CRC-32 check"
    return None


def _load(path: Path, mmap: bool = False) -> tuple[dict | None, str | None]:
    """(checkpoint, None), or (None, why it cannot be used); ``mmap``: its tensors memory-mapped
    from the file rather than read (for a look at its config)."""
    problem = checkpoint_problem(path)
    if problem is not None:
        return None, problem
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as error:  # noqa: BLE001 - whatever the unpickler says, the file is unusable
        lines = str(error).strip().splitlines()
        return None, f"does not load ({type(error).__name__}{': ' + lines[0] if lines else ''})"
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        return None, f"{NOT_OURS} ({_found(checkpoint)})"
    return checkpoint, None


NOT_OURS = "not a curate checkpoint"


def _found(checkpoint) -> str:
    """What a loaded file that is not a checkpoint of this project holds, in a few words."""
    if not isinstance(checkpoint, dict):
        return f"a {type(checkpoint).__name__}"
    if "format" in checkpoint:
        return f"format {str(checkpoint['format'])[:40]!r}"
    keys = sorted(map(str, checkpoint))
    return f"a dict of {', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}" if keys else "an empty dict"


def _foreign(path: Path, problem: str) -> str | None:
    """What was found, where ``path`` is a file this project did not write (another tool's
    checkpoint, any other file); None for one of its own checkpoints (a checksum beside it, or its
    name), damaged."""
    if problem.startswith(NOT_OURS):
        return problem.removeprefix(NOT_OURS).strip(" ()")
    if checksum_path(path).is_file() or _step(path) is not None:
        return None
    return problem.replace("not a whole checkpoint archive", "not a PyTorch zip archive")


def load_checkpoint(path: Path) -> dict:
    """A checkpoint as saved, with tensors on the CPU, loaded with ``weights_only=True`` after
    :func:`checkpoint_problem` found nothing wrong; else a CheckpointError: a damaged checkpoint of
    this project's (delete it), or a file it did not write (not a curate checkpoint)."""
    path = Path(path)
    checkpoint, problem = _load(path)
    if problem is None:
        return checkpoint
    foreign = _foreign(path, problem)
    if foreign is not None:
        raise CheckpointError(
            f"{path}: {NOT_OURS} ({foreign}); `curate train` writes {CHECKPOINT_FORMAT} checkpoints: "
            "give its out_dir or one of its checkpoints/step-NNNNNN.pt"
        )
    raise CheckpointError(f"checkpoint {path}: {problem}; delete it, or use another checkpoint")


def checkpoint_candidates(out_dir: Path) -> tuple[list[Path], list[str]]:
    """The checkpoints to resume from, best first: the one ``latest`` names, then the older ones,
    newest first (none newer than it: ``latest`` is written last); and notes on a ``latest`` that
    names nothing usable. Without ``latest``, all checkpoints, newest first."""
    folder = Path(out_dir) / CHECKPOINT_DIR
    pointer = folder / LATEST
    found = _checkpoints(folder) if folder.is_dir() else []
    if not pointer.is_file():
        return found[::-1], []
    name = pointer.read_text(errors="replace").strip()
    named = folder / name
    if _CHECKPOINT.fullmatch(name) is None:
        return found[::-1], [f"{pointer} holds {name[:40]!r}, not a checkpoint name"]
    older = [p for p in found if _step(p) < _step(named)][::-1]
    return [named, *older], []


def load_latest_checkpoint(
    out_dir: Path, say: Callable[[str], None] | None = None, mmap: bool = False
) -> tuple[Path, dict] | None:
    """The newest checkpoint of ``out_dir`` that passes its checks and loads: (path, checkpoint);
    None if there is none at all. Each one skipped is named to ``say`` with the reason (a line
    that starts with :data:`WARNING`); if there are checkpoints but none loads, a CheckpointError
    names every one. ``mmap``: the tensors memory-mapped, not read."""
    candidates, notes = checkpoint_candidates(out_dir)
    say = say or (lambda line: None)
    for note in notes:
        say(f"{WARNING}{note}")
    skipped: list[tuple[Path, str]] = []
    for path in candidates:
        checkpoint, problem = _load(path, mmap)
        if problem is not None:
            say(f"{WARNING}skipping checkpoint {path}: {problem}")
            skipped.append((path, problem))
            continue
        if skipped:
            say(f"{WARNING}using the older checkpoint {path.name}, not {skipped[0][0].name} ({skipped[0][1]})")
        return path, checkpoint
    if skipped:
        folder = Path(out_dir) / CHECKPOINT_DIR
        listed = "; ".join(f"{path.name}: {problem}" for path, problem in skipped)
        if all(problem.startswith(NOT_OURS) for _, problem in skipped):
            raise CheckpointError(
                f"no curate checkpoint in {folder} ({listed}); move these files out, or use another out_dir"
            )
        raise CheckpointError(
            f"no checkpoint in {folder} loads ({listed}); delete the bad files "
            f"(or the folder, to start over) or restore them from a copy"
        )
    return None
