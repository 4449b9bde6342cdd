"""What readers produce: batches of raw records, each either a candidate document or a failure.

Every reader yields Arrow batches of :data:`RAW_SCHEMA`. A record a reader could not parse comes
with ``reason`` set (and ``text`` null); :func:`pipeline.stages.source.split_batch` then applies the checks
that do not depend on the format (missing, empty, NUL bytes, too large) to all records at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

RAW_SCHEMA = pa.schema(
    [
        pa.field("text", pa.string()),
        pa.field("own_id", pa.string()),  # the input's own id, if it has one
        pa.field("url", pa.string()),
        pa.field("meta", pa.string()),  # JSON object
        pa.field("line", pa.int64()),  # 1-based line (JSONL), element (JSON array file) or row (Parquet)
        pa.field("offset", pa.int64()),  # byte offset of the record (uncompressed for JSONL)
        pa.field("reason", pa.string()),  # set when the reader already knows the record is bad
        pa.field("detail", pa.string()),
        pa.field("sample", pa.string()),
        pa.field("file", pa.string()),  # set by readers of many files per batch; null: the file read
    ]
)

SAMPLE_BYTES = 200
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark
INVALID_FILE_NAME = "invalid_file_name"


@dataclass(frozen=True)
class ReadLimits:
    batch_docs: int = 4096
    max_doc_bytes: int = 8 * 1024 * 1024
    # A JSON file that is one document (an array of records), not JSON lines, is parsed whole
    # up to this size; a larger one is quarantined once.
    max_json_document_bytes: int = 128 * 1024 * 1024


def strip_bom(data: bytes) -> tuple[bytes, int]:
    """``data`` without a UTF-8 byte-order mark at its start, and how many bytes were dropped."""
    return (data[len(BOM) :], len(BOM)) if data.startswith(BOM) else (data, 0)


def is_utf8_name(name: str) -> bool:
    """Whether a file name (as Python decodes it from the file system) is valid UTF-8."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 written as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", errors="backslashreplace")


def shown_path(path: str | os.PathLike) -> str:
    """A path as a person finds it from where they ran the command: relative to the current
    folder when it lies under it, else absolute; as text (:func:`printable_name`)."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return printable_name(absolute if relative.startswith("..") else relative)


def bad_file_name(name: str) -> tuple[str, str]:
    """The quarantine reason and detail for a file whose name is not valid UTF-8."""
    return INVALID_FILE_NAME, (
        f"file name '{printable_name(name)}' is not valid UTF-8, so no id or "
        "path can name it; rename the file (e.g. convmv -f latin1 -t utf8) to read it"
    )


def sample_of(raw: bytes | str | None) -> str | None:
    """The first bytes of a raw record, readable whatever its encoding."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw[:SAMPLE_BYTES]
    return raw[:SAMPLE_BYTES].decode("utf-8", errors="replace")


class RawBatchBuilder:
    """Accumulates raw records row by row and hands them out as Arrow batches."""

    _columns = RAW_SCHEMA.names

    def __init__(self, batch_docs: int):
        self.batch_docs = batch_docs
        self._reset()

    def _reset(self) -> None:
        self._cols: dict[str, list] = {name: [] for name in self._columns}

    def __len__(self) -> int:
        return len(self._cols["text"])

    @property
    def full(self) -> bool:
        return len(self) >= self.batch_docs

    def doc(self, text, own_id=None, url=None, meta=None, line=None, offset=None, file: str | None = None) -> None:
        """A candidate document (``text`` is checked later; it may be None or not a str)."""
        reason = detail = sample = None
        if text is not None and not isinstance(text, str):
            reason, detail = "text_not_string", f"text is {type(text).__name__}"
            sample, text = sample_of(repr(text)), None
        self._append(text, own_id, url, meta, line, offset, reason, detail, sample, file)

    def bad(
        self, reason: str, detail: str | None = None, raw=None, line=None, offset=None, file: str | None = None
    ) -> None:
        """A record that could not be read, with why and where."""
        self._append(None, None, None, None, line, offset, reason, detail, sample_of(raw), file)

    def _append(self, *values) -> None:
        for name, value in zip(self._columns, values):
            self._cols[name].append(value)

    def flush(self) -> pa.RecordBatch | None:
        if not len(self):
            return None
        batch = pa.RecordBatch.from_pydict(self._cols, schema=RAW_SCHEMA)
        self._reset()
        return batch
