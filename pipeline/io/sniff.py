"""What an input file is, from its first bytes: the check that a source's reader fits its files.

A reader given files of another format does not fail: it quarantines every record (JSON lines
read as WARC) or reads nothing (JSON lines read as Parquet), and the source is lost. So before
any work each input file's head is read (:data:`HEAD_BYTES` of it, decompressed) and told apart:

============  ===========================================================  =============
compression   magic bytes at the start                                     readers
============  ===========================================================  =============
gzip          ``1f 8b``                                                    jsonl (``.gz``), warc
zstd          ``28 b5 2f fd``                                              jsonl (``.zst``)
bz2           ``BZh`` + level + ``1AY&SY``                                 none
============  ===========================================================  =============

=========  ==================================================================  ==========
kind       the (decompressed) head                                             reader
=========  ==================================================================  ==========
parquet    ``PAR1`` at the start                                               parquet
warc       first non-blank line ``WARC/<version>`` (``WARC/1.0``, ``1.1``)     warc, wet
arc        first non-blank line ``filedesc://``                                warc, wet
jsonl      first non-blank byte (after a byte-order mark) ``{`` or ``[``       jsonl
text       anything else that is UTF-8 without NUL bytes                       text
binary     anything else                                                       text
=========  ==================================================================  ==========

The text reader takes any file as one document, so it is refused only the formats that are
surely not prose: Parquet, WARC, ARC, compressed files, and JSON whose first line is a whole
JSON value or a lone ``[`` or ``{`` (a pretty-printed document). A Parquet file cut before its
footer (no ``PAR1`` at its end) is still Parquet here: the reader quarantines it as
``unreadable_file``. An empty file, or one whose head cannot be read or decompressed, fits every
reader: the reader quarantines what it cannot read, with file and offset.
"""

from __future__ import annotations

import bz2
import io
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import orjson
import zstandard

from pipeline.io.records import strip_bom

HEAD_BYTES = 8192
PARQUET_MAGIC = b"PAR1"
_WARC_LINE = re.compile(rb"WARC/\d")
_BLANK = b" \t\r\n"

KIND_NAMES = {
    "parquet": "a Parquet file",
    "warc": "a WARC file",
    "arc": "an ARC file",
    "jsonl": "JSON lines",
    "text": "plain text",
    "binary": "binary data",
}
READER_NAMES = {
    "jsonl": "JSON lines",
    "parquet": "a Parquet file",
    "warc": "a WARC file",
    "wet": "a WET file",
    "text": "plain text",
}
# The kinds each reader reads.
READS = {
    "jsonl": ("jsonl",),
    "parquet": ("parquet",),
    "warc": ("warc", "arc"),
    "wet": ("warc", "arc"),
    "text": ("text", "binary", "jsonl"),  # JSON lines: unless its first line is a whole JSON value
}
# The compressions each reader reads (None: none).
UNPACKS = {
    "jsonl": (None, "gzip", "zstd"),  # by the file's suffix
    "parquet": (None,),
    "warc": (None, "gzip"),
    "wet": (None, "gzip"),
    "text": (None,),
}
SUFFIX = {"gzip": ".gz", "zstd": ".zst"}


@dataclass(frozen=True)
class Sniffed:
    """What a file's head says it is; ``kind`` None where the head could not be read."""

    kind: str | None
    compression: str | None = None
    json_line: bool = False  # the first non-blank line is a whole JSON value, or opens a document
    start: bytes = b""  # the first bytes of the file, as they are on disk


def compression_of(head: bytes) -> str | None:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    if head.startswith(b"BZh") and head[3:4].isdigit() and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bz2"
    return None


def _decompressed(head: bytes, compression: str | None, size: int) -> bytes | None:
    """Up to ``size`` bytes of ``head`` decompressed (a cut stream gives what it holds); None if
    the head does not decompress."""
    try:
        if compression == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, size)
        if compression == "zstd":
            return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head)).read(size)
        if compression == "bz2":
            return bz2.BZ2Decompressor().decompress(head, size)
    except (zlib.error, zstandard.ZstdError, OSError, EOFError):
        return None
    return head


def kind_of(data: bytes) -> tuple[str | None, bool]:
    """The kind of a (decompressed) head, and whether its first non-blank line is a whole JSON
    value; kind None for an empty head."""
    if data.startswith(PARQUET_MAGIC):
        return "parquet", False
    data = strip_bom(data)[0].lstrip(_BLANK)
    if not data:
        return None, False
    if _WARC_LINE.match(data):
        return "warc", False
    if data.startswith(b"filedesc://"):
        return "arc", False
    if data[:1] in (b"{", b"["):
        first = data.split(b"\n", 1)[0].strip()
        try:
            orjson.loads(first)
            whole = True
        except orjson.JSONDecodeError:
            whole = first in (b"[", b"{")  # a pretty-printed JSON document opens so
        return "jsonl", whole
    if b"\x00" not in data and _is_utf8(data):
        return "text", False
    return "binary", False


def _is_utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8, but for a character cut at its end."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start >= len(data) - 3 and error.reason == "unexpected end of data"
    return True


def sniff(path: Path, head_bytes: int = HEAD_BYTES) -> Sniffed:
    """What ``path`` is, from its first ``head_bytes`` (decompressed). A file that cannot be
    opened is kind None (the reader quarantines it)."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(head_bytes)
    except OSError:
        return Sniffed(None)
    compression = compression_of(head)
    data = _decompressed(head, compression, head_bytes)
    if data is None:
        return Sniffed(None, compression, start=head[:16])
    kind, json_line = kind_of(data)
    return Sniffed(kind, compression, json_line, head[:16])


def fitting_reader(sniffed: Sniffed, name: str) -> str | None:
    """The reader that reads what was sniffed (None for binary data)."""
    if sniffed.kind in ("warc", "arc"):
        return "wet" if ".wet" in name.lower() else "warc"
    return sniffed.kind if sniffed.kind in READS else None


def reader_mismatch(reader: str, sniffed: Sniffed, name: str) -> str | None:
    """Why the ``reader`` cannot read a file so sniffed and named, and the fix (completing
    "<file> ..."); None where it can."""
    if sniffed.compression == "bz2":
        return "is bz2-compressed, which no reader reads; decompress it (bunzip2) or recompress it with gzip"
    if sniffed.kind is None:
        return None
    problem = _kind_mismatch(reader, sniffed, name)
    if problem is not None:
        return problem
    if sniffed.compression not in UNPACKS[reader]:
        return _compression_mismatch(reader, sniffed)
    if reader == "jsonl":
        return _suffix_mismatch(sniffed, name)
    return None


def _kind_mismatch(reader: str, sniffed: Sniffed, name: str) -> str | None:
    text_json = reader == "text" and sniffed.kind == "jsonl" and sniffed.json_line
    if sniffed.kind is None or (sniffed.kind in READS[reader] and not text_json):
        return None
    what = KIND_NAMES[sniffed.kind]
    if sniffed.kind == "binary":
        what += f" (it starts with bytes {sniffed.start[:8].hex(' ')})"
    fit = fitting_reader(sniffed, name)
    fix = f'set reader = "{fit}"' if fit else f"point the source's paths at {READER_NAMES[reader]}"
    return f"is {what}, not {READER_NAMES[reader]}; {fix}"


def _compression_mismatch(reader: str, sniffed: Sniffed) -> str:
    noun = KIND_NAMES[sniffed.kind]
    article, _, rest = noun.partition(" ")
    what = (
        f"a {sniffed.compression}-compressed {rest}"
        if article in ("a", "an")
        else f"{sniffed.compression}-compressed {noun}"
    )
    if reader in ("warc", "wet"):
        fix = f"decompress it ({sniffed.compression} -d) or recompress it with gzip"
        return f"is {what}, which warcio cannot read; {fix}"
    return f"is {what}; the {reader} reader reads it uncompressed: decompress it ({sniffed.compression} -d)"


def _suffix_mismatch(sniffed: Sniffed, name: str) -> str | None:
    """The JSON-lines reader decompresses by the file's suffix: it must say what the bytes are."""
    lower = name.lower()
    said = next((c for c, suffix in SUFFIX.items() if lower.endswith(suffix)), None)
    if said == sniffed.compression:
        return None
    if sniffed.compression is None:
        return f"is not {said}-compressed, though its name ends in {SUFFIX[said]}; rename it without {SUFFIX[said]}"
    return (
        f"is {sniffed.compression}-compressed, but its name does not end in {SUFFIX[sniffed.compression]}, "
        f"so it would be read as plain JSON lines; rename it to end in {SUFFIX[sniffed.compression]}"
    )
