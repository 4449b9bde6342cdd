"""JSON-lines reader: `.jsonl`/`.json`/`.ndjson`, plain, gzip or zstd, streamed line by line.

Memory stays bounded: a line longer than the limit is skipped in chunks and quarantined, never
held whole. A file that ends early (truncated gzip or zstd) keeps every record read before the
break and quarantines the break itself with its line and offset. A UTF-8 byte-order mark at the
start of a file is dropped.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import orjson
import pyarrow as pa
import zstandard

from pipeline.io.records import RawBatchBuilder, ReadLimits, strip_bom

READ_BUFFER = 1 << 20
# A JSON line may be longer than its text (escapes, other fields); allow this much beyond the text limit.
LINE_OVERHEAD = 1 << 20


@contextmanager
def open_binary(path: Path) -> Iterator[BinaryIO]:
    """Open a file for reading bytes, decompressing `.gz` and `.zst` by their suffix."""
    name = path.name.lower()
    raw = open(path, "rb", buffering=READ_BUFFER)
    try:
        if name.endswith(".gz"):
            # GzipFile buffers in small blocks, so a truncated file still yields its lines up to
            # close to the break before EOFError.
            yield gzip.GzipFile(fileobj=raw, mode="rb")
        elif name.endswith(".zst"):
            yield io.BufferedReader(_ZstdFrames(raw), READ_BUFFER)
        else:
            yield raw
    finally:
        raw.close()


class _ZstdFrames(io.RawIOBase):
    """Decompressed bytes of a stream of zstd frames; raises EOFError where the input ends inside
    a frame (zstandard's own stream reader ends silently there)."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._decoder = zstandard.ZstdDecompressor().decompressobj()
        self._in_frame = False
        self._out = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._out:
            chunk = self._raw.read(READ_BUFFER)
            if not chunk:
                if self._in_frame:
                    raise EOFError("zstd stream ended inside a frame")
                return 0
            while chunk:
                self._in_frame = True
                self._out += self._decoder.decompress(chunk)
                chunk = b""
                if self._decoder.eof:  # a frame ended; what follows starts the next one
                    chunk = self._decoder.unused_data
                    self._decoder = zstandard.ZstdDecompressor().decompressobj()
                    self._in_frame = False
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


def get_field(obj: dict, dotted: str):
    """``obj["a"]["b"]`` for ``"a.b"``; None where any step is missing."""
    value = obj
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
        if value is None:
            return None
    return value


def _meta(
    obj: dict, text_field: str, id_field: str | None, url_field: str | None, meta_fields: list[str] | None
) -> str | None:
    if meta_fields is not None:
        kept = {f: get_field(obj, f) for f in meta_fields}
    else:
        # Dotted fields live inside a top-level object that is kept whole in meta.
        taken = {f for f in (text_field, id_field, url_field) if f and "." not in f}
        kept = {k: v for k, v in obj.items() if k not in taken}
    return orjson.dumps(kept).decode() if kept else None


def _classify_bad_line(line: bytes, error: Exception) -> tuple[str, str]:
    if b"\x00" in line:
        return "nul_bytes", "raw NUL byte in the line"
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as decode_error:
        return "invalid_utf8", f"invalid UTF-8 at byte {decode_error.start} of the line"
    return "invalid_json", str(error)


def read_jsonl(
    path: Path,
    *,
    text_field: str = "text",
    id_field: str | None = None,
    url_field: str | None = None,
    meta_fields: list[str] | None = None,
    limits: ReadLimits = ReadLimits(),
) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches from one JSON-lines file (or one JSON document, see
    :func:`opens_a_document`)."""
    max_line = limits.max_doc_bytes + LINE_OVERHEAD
    if opens_a_document(path, max_line):
        yield from _read_document(path, limits, text_field, id_field, url_field, meta_fields)
        return
    out = RawBatchBuilder(limits.batch_docs)
    line_no = offset = 0
    try:
        with open_binary(path) as stream:
            while True:
                line = stream.readline(max_line + 1)
                if not line:
                    break
                line_no += 1
                start = offset
                offset += len(line)
                if line_no == 1:  # a byte-order mark is not part of the first record
                    line, skipped = strip_bom(line)
                    start += skipped
                if len(line) > max_line and not line.endswith(b"\n"):
                    skipped = _skip_rest_of_line(stream)
                    offset += skipped
                    out.bad(
                        "too_large",
                        f"line of more than {len(line) + skipped} bytes (limit {max_line})",
                        line[:200],
                        line_no,
                        start,
                    )
                elif line.strip():
                    _parse_line(line, line_no, start, out, text_field, id_field, url_field, meta_fields)
                if out.full:
                    yield out.flush()
    except (EOFError, zlib.error, gzip.BadGzipFile, zstandard.ZstdError, OSError) as error:
        reason = "truncated_file" if isinstance(error, EOFError) else "unreadable_file"
        out.bad(reason, f"{type(error).__name__}: {error} (after {line_no} lines)", None, line_no + 1, offset)
    batch = out.flush()
    if batch is not None:
        yield batch


def _skip_rest_of_line(stream: BinaryIO) -> int:
    skipped = 0
    while True:
        chunk = stream.readline(READ_BUFFER)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


def opens_a_document(path: Path, max_line: int) -> bool:
    """Whether a file is one JSON document rather than JSON lines: its first non-blank line is
    not JSON by itself and opens an array (``[``, as a pretty-printed array of records does) or
    is a lone ``{`` (a pretty-printed object). A JSON-lines file whose first record is broken
    starts with more than ``{`` on its line and is still read line by line."""
    try:
        with open_binary(path) as stream:
            first = True
            while line := stream.readline(max_line + 1):
                if first:
                    line, _ = strip_bom(line)
                    first = False
                if line.strip():
                    break
    except (EOFError, zlib.error, gzip.BadGzipFile, zstandard.ZstdError, OSError):
        return False  # the line reader reports it
    head = line.strip()
    if not head:
        return False
    try:
        orjson.loads(head)
        return False
    except orjson.JSONDecodeError:
        return head.startswith(b"[") or head == b"{"


def _read_document(
    path: Path,
    limits: ReadLimits,
    text_field: str,
    id_field: str | None,
    url_field: str | None,
    meta_fields: list[str] | None,
) -> Iterator[pa.RecordBatch]:
    """Records of one JSON document of at most ``limits.max_json_document_bytes``: each element
    of a top-level array (its ``line`` is the element's 1-based position), or a single object."""
    out = RawBatchBuilder(limits.batch_docs)
    bound = limits.max_json_document_bytes
    try:
        with open_binary(path) as stream:
            data = stream.read(bound + 1)
    except (EOFError, zlib.error, gzip.BadGzipFile, zstandard.ZstdError, OSError) as error:
        reason = "truncated_file" if isinstance(error, EOFError) else "unreadable_file"
        out.bad(reason, f"{type(error).__name__}: {error} (in a file that is one JSON document)", None, 1, 0)
        yield out.flush()
        return
    data, skipped = strip_bom(data)
    if len(data) > bound:
        out.bad(
            "too_large",
            f"one JSON document of more than {bound} bytes, not JSON lines; convert it "
            "to JSON lines (jq -c '.[]' in.json > out.jsonl)",
            data,
            1,
            skipped,
        )
        yield out.flush()
        return
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        reason, detail = _classify_bad_line(data, error)
        out.bad(reason, f"{detail} (the file is neither JSON lines nor one JSON document)", data, 1, skipped)
        yield out.flush()
        return
    for position, obj in enumerate(value if isinstance(value, list) else [value], 1):
        _add_record(obj, None, position, None, out, text_field, id_field, url_field, meta_fields)
        if out.full:
            yield out.flush()
    batch = out.flush()
    if batch is not None:
        yield batch


def _parse_line(
    line: bytes,
    line_no: int,
    offset: int,
    out: RawBatchBuilder,
    text_field: str,
    id_field: str | None,
    url_field: str | None,
    meta_fields: list[str] | None,
) -> None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        reason, detail = _classify_bad_line(line, error)
        out.bad(reason, detail, line, line_no, offset)
        return
    _add_record(obj, line, line_no, offset, out, text_field, id_field, url_field, meta_fields)


def _add_record(
    obj,
    line: bytes | None,
    line_no: int,
    offset: int | None,
    out: RawBatchBuilder,
    text_field: str,
    id_field: str | None,
    url_field: str | None,
    meta_fields: list[str] | None,
) -> None:
    """One parsed JSON value as a document or a bad record (``line``: its raw bytes, if known)."""

    def raw() -> bytes:
        return line if line is not None else orjson.dumps(obj)

    if not isinstance(obj, dict):
        out.bad("not_an_object", f"JSON {type(obj).__name__}, expected an object", raw(), line_no, offset)
        return
    text = get_field(obj, text_field)
    if text is None:
        out.bad("missing_text", f"no field {text_field!r}", raw(), line_no, offset)
        return
    own_id = None
    if id_field is not None:
        own_id = get_field(obj, id_field)
        if own_id is None or isinstance(own_id, (dict, list)):
            out.bad("missing_id", f"no usable id in field {id_field!r}", raw(), line_no, offset)
            return
        own_id = str(own_id)
    url = get_field(obj, url_field) if url_field else None
    out.doc(
        text,
        own_id,
        None if url is None else str(url),
        _meta(obj, text_field, id_field, url_field, meta_fields),
        line_no,
        offset,
    )
