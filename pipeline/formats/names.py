"""Names that become file and folder names of a run (sources, mixtures, mixing groups): the file
system's limits on one path component, checked with the config so that a name the file system
refuses stops the run before any work, with one line, and not with ``OSError: File name too long``
after stages have written output.

A component is at most :data:`NAME_MAX` bytes (UTF-8) on the usual file systems (ext4, xfs, btrfs,
APFS; NTFS counts 255 UTF-16 units), holds no ``/`` and no NUL, and is neither ``.`` nor ``..``. The
limit holds for the longest file name the code makes from a name: its shards, part records and
their temporaries (``.<file>.tmp-<pid>``), as the functions below spell them out.
"""

from __future__ import annotations

import re

from pipeline.io.writer import TMP_MARK

NAME_MAX = 255  # bytes in one path component

# The widest numbers the code puts in a file name: a pid (Linux's pid_max is at most 2**22, seven
# digits), a source's unit and a shard's part (``-00000``, ``-0000``; more units widen them).
_PID = "9" * 7
_UNIT = "99999"
_PART = "9999"
# The longest language code the lang stage gives a mixing group ("eng_Latn" of GlotLID, "und"),
# with room to spare: the languages are known only once the documents are read.
LANG_CODE_BYTES = 16


def temporary(file: str, suffix: str = "") -> str:
    """The name of the temporary a file is written as before its rename (pipeline.io.writer)."""
    return f".{file}{TMP_MARK}{_PID}{suffix}"


def group_file_stem(group: str) -> str:
    """A group's name as a file name: every character other than letters, digits, ``_.-`` becomes
    ``+`` (``news/en`` -> ``news+en``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "+", group)


def source_files(source: str) -> list[str]:
    """The longest file names a source's name goes into: its units' document shards (each stage's
    Parquet, the tokenize stage's Arrow and its spool), quarantine files and part records."""
    unit = f"{source}-{_UNIT}"
    shard = f"{unit}-{_PART}"
    return [temporary(f"{shard}.parquet"), temporary(f"{shard}.arrow", ".tokens"), temporary(f"{unit}.json")]


def group_files(group: str) -> list[str]:
    """The longest file names of a mixing group's token shards (``train/<stem>-0000.arrow``)."""
    return [temporary(f"{group_file_stem(group)}-{_PART}.arrow")]


def mixture_files(mixture: str, group: str) -> list[str]:
    """The longest file names a mixture's name goes into with one of its groups: the folder
    ``mix/<mixture>`` and the part record of each of its shards
    (``parts/<mixture>.validation.<stem>-0000.json``)."""
    return [mixture, temporary(f"{mixture}.validation.{group_file_stem(group)}-{_PART}.json")]


def check_component(name: str, what: str, files: list[str], within: str = "") -> str:
    """``name`` if it and every file name in ``files`` (the names the code makes of it, ``within``
    saying with what) fit one path component; otherwise ValueError with one line that names the
    limit and the fix."""
    if not name:
        raise ValueError(f"{what} is empty; give it a name of letters, digits, _ . -")
    if name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{what} {name!r} cannot be a file name (no '/', no NUL, not '.' or '..'); rename it")
    longest = max(len(file.encode()) for file in files)
    if longest > NAME_MAX:
        size = len(name.encode())
        fix = (
            f"shorten the two by {longest - NAME_MAX} bytes in all"
            if within
            else f"shorten it to at most {NAME_MAX - (longest - size)} bytes"
        )
        raise ValueError(
            f"{what} {shown(name)!r} is {size} bytes, and the file names made of it{within} run to "
            f"{longest}, past the file system's {NAME_MAX}; {fix}"
        )
    return name


def shown(name: str) -> str:
    """A name as an error line shows it: a long one cut in the middle."""
    return name if len(name) <= 40 else f"{name[:20]}...{name[-10:]}"


def colliding(names: list[str], mapping=group_file_stem) -> tuple[str, str] | None:
    """The first two distinct ``names`` that ``mapping`` makes one file name of, or None."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(mapping(name), name)
        if other != name:
            return other, name
    return None


def check_group_names(groups: list[str]) -> None:
    """Mixing groups make distinct file names that fit one path component (:func:`group_files`);
    otherwise ValueError with one line that names the groups and the fix (mix.merge)."""
    pair = colliding(groups)
    if pair:
        raise ValueError(
            f"mix.merge: the groups {pair[0]!r} and {pair[1]!r} would share the file name "
            f"{group_file_stem(pair[1])!r}; rename one in mix.merge"
        )
    for group in groups:
        check_component(group_file_stem(group), "mix: the group name", group_files(group))
