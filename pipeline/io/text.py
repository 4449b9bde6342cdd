"""Plain-text folder reader: each `.txt` file is one document, identified by its relative path."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa

from pipeline.io.records import RawBatchBuilder, ReadLimits


def read_text_files(paths: list[Path], base: Path, *,
                    limits: ReadLimits = ReadLimits()) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches, one record per file; ``base`` makes the ids relative."""
    out = RawBatchBuilder(limits.batch_docs)
    for path in paths:
        rel = path.relative_to(base).as_posix()
        try:
            size = path.stat().st_size
            if size > limits.max_doc_bytes:
                out.bad("too_large", f"file of {size} bytes (limit {limits.max_doc_bytes})", None, None, 0, file=rel)
                continue
            raw = path.read_bytes()
        except OSError as error:
            out.bad("unreadable_file", f"{type(error).__name__}: {error}", None, None, 0, file=rel)
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            out.bad("invalid_utf8", f"invalid UTF-8 at byte {error.start}", raw, None, error.start, file=rel)
            continue
        out.doc(text, own_id=rel, offset=0)
        if out.full:
            yield out.flush()
    batch = out.flush()
    if batch is not None:
        yield batch
