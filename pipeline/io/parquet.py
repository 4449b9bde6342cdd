"""Parquet reader: streams row batches and maps columns onto the raw-record schema, vectorized.

Text may come in any of Arrow's string layouts: dictionary-encoded (as pandas categoricals and
``pq.write_table`` of a dictionary column write it), ``large_string`` or ``string_view``; each is
read as plain text (:func:`plain_strings`) before any check. Parquet string columns may hold
bytes that are not UTF-8 (writers do not check); such a row is quarantined as ``invalid_utf8``,
naming its column, and the rest of its batch is read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.io.records import RAW_SCHEMA, RawBatchBuilder, ReadLimits


def plain_strings(column: pa.Array) -> pa.Array:
    """``column`` with dictionary encoding undone and ``large_string`` or ``string_view`` text as
    plain ``string``; other columns as they are. Casts do not check UTF-8, so a bad value stays
    in its own rows (a dictionary's bad entry would otherwise fail every row that uses it)."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_large_string(column.type) or pa.types.is_string_view(column.type):
        column = column.cast(pa.string())
    return column


def _plain_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    columns = [plain_strings(column) for column in batch.columns]
    if all(new is old for new, old in zip(columns, batch.columns)):
        return batch
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _column(batch: pa.RecordBatch, dotted: str) -> pa.Array | None:
    """The column ``a`` or struct field ``a.b`` (as :func:`plain_strings`); None if absent."""
    head, *rest = dotted.split(".")
    if head not in batch.schema.names:
        return None
    column = batch.column(head)
    for name in rest:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            return None
        column = pc.struct_field(column, name)
    return plain_strings(column)


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


def read_parquet(
    path: Path,
    *,
    text_field: str = "text",
    id_field: str | None = None,
    url_field: str | None = None,
    meta_fields: list[str] | None = None,
    limits: ReadLimits = ReadLimits(),
) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches from one Parquet file."""
    row = 0
    try:
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=limits.batch_docs):
            batch = _plain_batch(batch)
            lines = pa.array(range(row + 1, row + batch.num_rows + 1), pa.int64())
            row += batch.num_rows
            invalid = _invalid_utf8(batch, lines, _used_columns(batch, text_field, id_field, url_field, meta_fields))
            if invalid is not None:  # those rows are quarantined, the rest of the batch is read
                rows, quarantined = invalid
                yield quarantined
                batch, lines = batch.filter(pc.invert(rows)), lines.filter(pc.invert(rows))
            if batch.num_rows:
                yield _map_batch(batch, lines, text_field, id_field, url_field, meta_fields)
    except (OSError, pa.ArrowException) as error:
        failure = RawBatchBuilder(1)
        failure.bad("unreadable_file", f"{type(error).__name__}: {error} (in rows up to {row})", line=row + 1)
        yield failure.flush()


def _used_columns(
    batch: pa.RecordBatch, text_field: str, id_field: str | None, url_field: str | None, meta_fields: list[str] | None
) -> list[str]:
    """The top-level columns a batch's records are made of (fields, and those kept in meta)."""
    named = [f.split(".")[0] for f in (text_field, id_field, url_field) if f]
    taken = {f for f in (text_field, id_field, url_field) if f and "." not in f}
    meta = meta_fields if meta_fields is not None else [n for n in batch.schema.names if n not in taken]
    return [n for n in dict.fromkeys([*named, *meta]) if n in batch.schema.names]


def _invalid_utf8(batch: pa.RecordBatch, lines: pa.Array, names: list[str]) -> tuple[pa.Array, pa.RecordBatch] | None:
    """Rows whose string data in ``names`` is not valid UTF-8 (Parquet readers do not check it,
    Arrow compute refuses it): a mask of them, and their quarantine records; None if there are
    none. Whole columns are checked at once; only a column that fails is checked row by row."""
    bad_rows: dict[int, str] = {}
    for name in names:
        column = batch.column(name)
        try:
            column.validate(full=True)
            continue
        except pa.ArrowInvalid:
            pass
        for i in range(batch.num_rows):
            if i not in bad_rows and not _valid_row(column, i):
                bad_rows[i] = name
    if not bad_rows:
        return None
    out = RawBatchBuilder(len(bad_rows))
    for i, name in sorted(bad_rows.items()):
        column = batch.column(name)
        raw = column[i].cast(pa.binary()).as_py() if pa.types.is_string(column.type) else None
        out.bad("invalid_utf8", f"invalid UTF-8 in column {name!r}", raw, lines[i].as_py())
    mask = pa.array([i in bad_rows for i in range(batch.num_rows)])
    return mask, out.flush()


def _valid_row(column: pa.Array, i: int) -> bool:
    try:
        column.take([i]).validate(full=True)  # take, not slice: a struct slice keeps its whole children
    except pa.ArrowInvalid:
        return False
    return True


def _map_batch(
    batch: pa.RecordBatch,
    lines: pa.Array,
    text_field: str,
    id_field: str | None,
    url_field: str | None,
    meta_fields: list[str] | None,
) -> pa.RecordBatch:
    rows = batch.num_rows
    text = _column(batch, text_field)
    reason = pa.nulls(rows, pa.string())
    detail = pa.nulls(rows, pa.string())
    if text is None:
        reason = pa.array(["missing_text"] * rows, pa.string())
        detail = pa.array([f"no column {text_field!r}"] * rows, pa.string())
        text = pa.nulls(rows, pa.string())
    elif not pa.types.is_string(text.type):
        reason = pa.array(["text_not_string"] * rows, pa.string())
        detail = pa.array([f"column {text_field!r} is {text.type}"] * rows, pa.string())
        text = pa.nulls(rows, pa.string())
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
            lines,
            pa.nulls(rows, pa.int64()),
            reason,
            detail,
            pa.nulls(rows, pa.string()),
            pa.nulls(rows, pa.string()),
        ],
        schema=RAW_SCHEMA,
    )
