"""Parquet reader: streams row batches and maps columns onto the raw-record schema, vectorized."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.io.records import RAW_SCHEMA, RawBatchBuilder, ReadLimits


def _column(batch: pa.RecordBatch, dotted: str) -> pa.Array | None:
    """The column ``a`` or struct field ``a.b``; None if absent."""
    head, *rest = dotted.split(".")
    if head not in batch.schema.names:
        return None
    column = batch.column(head)
    for name in rest:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            return None
        column = pc.struct_field(column, name)
    return column


def _as_string(column: pa.Array | None, rows: int) -> pa.Array:
    if column is None:
        return pa.nulls(rows, pa.string())
    return column.cast(pa.string())


def _meta(batch: pa.RecordBatch, names: list[str]) -> pa.Array:
    """Each row's ``names`` columns as one JSON object string (null when there are none)."""
    names = [n for n in names if n in batch.schema.names]
    if not names:
        return pa.nulls(batch.num_rows, pa.string())
    frame = pl.from_arrow(pa.Table.from_batches([batch.select(names)]))
    return frame.select(pl.struct(names).struct.json_encode()).to_series().to_arrow().cast(pa.string())


def read_parquet(path: Path, *, text_field: str = "text", id_field: str | None = None,
                 url_field: str | None = None, meta_fields: list[str] | None = None,
                 limits: ReadLimits = ReadLimits()) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches from one Parquet file."""
    row = 0
    try:
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=limits.batch_docs):
            yield _map_batch(batch, row, text_field, id_field, url_field, meta_fields)
            row += batch.num_rows
    except (OSError, pa.ArrowException) as error:
        failure = RawBatchBuilder(1)
        failure.bad("unreadable_file", f"{type(error).__name__}: {error} (after {row} rows)", line=row + 1)
        yield failure.flush()


def _map_batch(batch: pa.RecordBatch, first_row: int, text_field: str, id_field: str | None,
               url_field: str | None, meta_fields: list[str] | None) -> pa.RecordBatch:
    rows = batch.num_rows
    text = _column(batch, text_field)
    reason = pa.nulls(rows, pa.string())
    detail = pa.nulls(rows, pa.string())
    if text is None:
        reason = pa.array(["missing_text"] * rows, pa.string())
        detail = pa.array([f"no column {text_field!r}"] * rows, pa.string())
        text = pa.nulls(rows, pa.string())
    elif not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        reason = pa.array(["text_not_string"] * rows, pa.string())
        detail = pa.array([f"column {text_field!r} is {text.type}"] * rows, pa.string())
        text = pa.nulls(rows, pa.string())
    else:
        text = text.cast(pa.string())
    own_id = None
    if id_field is not None:
        own_id = _as_string(_column(batch, id_field), rows)
        missing_id = pc.and_(pc.is_null(own_id), pc.is_null(reason))
        reason = pc.if_else(missing_id, "missing_id", reason)
        detail = pc.if_else(missing_id, f"no usable id in column {id_field!r}", detail)
    # As for JSON lines: a dotted field stays inside its top-level struct, which is kept in meta.
    taken = {f for f in (text_field, id_field, url_field) if f and "." not in f}
    meta_names = meta_fields if meta_fields is not None else [n for n in batch.schema.names if n not in taken]
    return pa.RecordBatch.from_arrays(
        [
            text,
            _as_string(own_id, rows),
            _as_string(_column(batch, url_field) if url_field else None, rows),
            _meta(batch, meta_names),
            pa.array(range(first_row + 1, first_row + rows + 1), pa.int64()),
            pa.nulls(rows, pa.int64()),
            reason,
            detail,
            pa.nulls(rows, pa.string()),
            pa.nulls(rows, pa.string()),
        ],
        schema=RAW_SCHEMA,
    )
