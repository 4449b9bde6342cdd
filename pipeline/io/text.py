"""Plain-text folder reader: each `.txt` file is one document, identified by its relative path.

A UTF-8 byte-order mark at the start of a file is dropped. A file whose name is not valid UTF-8
cannot be named by an id and is quarantined as ``invalid_file_name``; the folder's other files
are read. Every record names its own file, so a quarantined one points at the file, not the
folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from pipeline.io.records import RawBatchBuilder, ReadLimits, bad_file_name, is_utf8_name, printable_name, strip_bom


def read_text_files(paths: list[Path], base: Path, *, limits: ReadLimits = ReadLimits()) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches, one record per file; ``base`` makes the ids relative."""
    out = RawBatchBuilder(limits.batch_docs)
    for path in paths:
        rel = path.relative_to(base).as_posix()
        if not is_utf8_name(rel):
            out.bad(*bad_file_name(rel), None, None, 0, file=printable_name(rel))
            continue
        try:
            size = path.stat().st_size
            if size > limits.max_doc_bytes:
                out.bad("too_large", f"file of {size} bytes (limit {limits.max_doc_bytes})", None, None, 0, file=rel)
                continue
            raw = path.read_bytes()
        except OSError as error:
            out.bad("unreadable_file", f"{type(error).__name__}: {error}", None, None, 0, file=rel)
            continue
        raw, skipped = strip_bom(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            at = skipped + error.start
            out.bad("invalid_utf8", f"invalid UTF-8 at byte {at}", raw, None, at, file=rel)
            continue
        out.doc(text, own_id=rel, offset=0, file=rel)
        if out.full:
            yield out.flush()
    batch = out.flush()
    if batch is not None:
        yield batch
