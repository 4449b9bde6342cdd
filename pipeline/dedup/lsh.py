"""The on-disk LSH steps: signatures per document shard, band keys per partition, candidate pairs.

Each step is a plain function over one shard or one partition, so a flow runs one task per file
and memory is bounded by a shard or a partition, never the corpus::

    signatures_for_shard(docs/shard-00007.parquet, sig/shard-00007.parquet, params, shard=7)
    partition_band_keys([sig/shard-00000.parquet, ...], [bands/part-0000/block-00000.parquet, ...])
        -> bands/part-0000/block-00000.parquet ... bands/part-0015/block-00000.parquet
           (a block of shards' band keys, one file per partition)
    candidate_pairs(bands/part-0003)      (reads every file of partition 3)

Signature file (one per document shard, zstd Parquet, row groups of ``ROW_GROUP_ROWS`` rows,
rows in the shard's order; key-value metadata ``dedup.params`` (JSON) and ``dedup.shard``; with
its sets file, nearly all of it the shingle sets of 64-bit hashes, ``pipeline.dedup.clusters``
says why 64 bits):

    doc          int64    document number: shard << 32 | row in the shard (its global order)
    id           string   the document's id
    exact_hash   uint64   hash of the normalized text (pipeline.dedup.normalize.exact_hash)
    words        int32    words of the normalized text (0: nothing to compare, never a duplicate)
    chars        int64    characters of the original text (the "longest" keep rule)
    score        float64  the ``params.score_column`` value, only when one is named
    url_hash     uint64   the hash of the normalized URL (pipeline.dedup.urls), null without
                          one; only with params.url
    shingles     int32    distinct shingles                               } only when
    band_keys    fixed_size_list<uint64>[bands]                            } params.near
    signature    fixed_size_list<uint32 | uint64>[num_perm], only with params.keep_signature

With params.near, the shingle sets in a file beside it (:data:`SETS_SUFFIX`, :func:`read_sets`):
each document's distinct shingle hashes, sorted, little-endian uint64, in row order, stored plain
(:data:`SIGNATURE_COMPRESSION`). In memory (:func:`signature_batch`) and between the routed hops
a set is one ``large_binary`` value (:func:`set_column`, :func:`set_arrays`).

Band-key partition file (``<out_dir>/part-<p:04d>/<signature file name>``), band by band, each
band's documents in order, not sorted by key (:data:`BAND_KEYS_WRITER`); a key lands in partition
``key % partitions``, so equal keys of all shards meet in one partition folder:

    band  int16   the LSH band, EXACT_BAND (-1) for the exact hash, URL_BAND (-2) for the URL's
    key   uint64  the band's key (minhash.band_keys) or the exact hash
    doc   int64
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.dedup.minhash import (
    MinHashParams,
    band_keys,
    minhash_signatures,
    polynomial_shingle_sets,
    sha1_shingle_hashes,
    shingle_sets,
    signature_hashes,
)
from pipeline.dedup.normalize import combine_word_hashes, words
from pipeline.dedup.runs import pair_order
from pipeline.dedup.urls import url_hashes
from pipeline.io.storage import as_path, empty_table, is_local, is_path, parquet_file, parquet_files, read_table
from pipeline.io.writer import PARQUET_COMPRESSION, atomic_sink

EXACT_BAND = -1
# The URL hash's band (params.url). Buckets of the bands at or below EXACT_BAND are duplicates as
# they are (same text, same URL): their pairs are stars on the smallest document, never measured.
URL_BAND = -2
ROW_GROUP_ROWS = 1024
# Documents per batch: small enough that a batch's temporaries (tens of MB at 2 KB per document)
# stay warm in memory from one batch to the next; larger batches were slower, not faster.
DOCS_PER_BATCH = 2048
# Near-duplicate buckets up to this many documents are verified pair by pair (candidate_pairs).
ALL_PAIRS_BUCKET = 8
SHARD_BITS = 32
PARAMS_KEY = b"dedup.params"
SHARD_KEY = b"dedup.shard"

BAND_KEYS_SCHEMA = pa.schema(
    [
        pa.field("band", pa.int16(), nullable=False),
        pa.field("key", pa.uint64(), nullable=False),
        pa.field("doc", pa.int64(), nullable=False),
    ]
)

# Band-key files: the keys (hashes, incompressible) stored plain; the band (runs) and the document
# (increasing runs, band by band) delta-encoded or with a dictionary, and compressed.
BAND_KEYS_WRITER = {
    "compression": {"band": PARQUET_COMPRESSION, "key": "none", "doc": PARQUET_COMPRESSION},
    "use_dictionary": ["band"],
    "column_encoding": {"doc": "DELTA_BINARY_PACKED"},
}

PAIRS_SCHEMA = pa.schema(  # candidate pairs routed by group of shards (pipeline.dedup.routed)
    [
        pa.field("doc_a", pa.int64(), nullable=False),
        pa.field("doc_b", pa.int64(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
    ]
)


# A shingle set is one binary value (its sorted uint64 hashes' bytes), not a list of uint64: Parquet
# then writes no repetition level per hash, so writing and reading the sets is cheaper.
SET_TYPE = pa.large_binary()
# zstd saves little on hashes and costs writing time: the sets are stored plain.
SIGNATURE_COMPRESSION = {"shingle_set": "none"}
# Beside each signature file, its shingle sets: every document's sorted distinct uint64 hashes,
# little-endian, one after the other in row order (set k starts at the sum of the ``shingles``
# column before row k). A hop needs the sets of a fraction of a group's documents, spread over
# every row group, and reads just those.
SETS_SUFFIX = ".sets"


def sets_path(signature_path: Path) -> Path:
    """The shingle sets file of a signature file."""
    return as_path(signature_path).with_suffix(SETS_SUFFIX)


def read_sets(path: Path, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)`` of the sets at hash positions ``[starts[i], stops[i])`` of a sets file
    (:data:`SETS_SUFFIX`): only their bytes read where the file is local (memory-mapped, the pages
    touched handed back on return), the whole file from a remote store."""
    lengths = np.asarray(stops, np.int64) - np.asarray(starts, np.int64)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not offsets[-1]:
        return np.zeros(0, np.uint64), offsets
    from pipeline.dedup.kernels import gather_ranges  # numba: imported by the processes that measure

    path = as_path(path)
    source = np.memmap(path, dtype="<u8", mode="r") if is_local(path) else np.frombuffer(path.read_bytes(), "<u8")
    values = gather_ranges(source.view(np.ndarray), starts, offsets)
    del source
    return values, offsets


def set_column(values: np.ndarray, offsets: np.ndarray) -> pa.LargeBinaryArray:
    """Shingle sets as a :data:`SET_TYPE` column: set ``k`` is ``values[offsets[k]:offsets[k + 1]]``
    (uint64)."""
    values = np.ascontiguousarray(values, dtype="<u8")
    offsets = np.asarray(offsets, dtype=np.int64)
    bounds = pa.py_buffer((offsets - offsets[0]) * 8)
    data = pa.py_buffer(values[offsets[0] : offsets[-1]])
    return pa.LargeBinaryArray.from_buffers(SET_TYPE, len(offsets) - 1, [None, bounds, data])


def set_arrays(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets from 0) of a column of shingle sets (:data:`SET_TYPE`): the inverse of
    :func:`set_column`, without copying the values."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], SET_TYPE)
        if isinstance(column, pa.ChunkedArray):
            column = column.chunk(0) if column.num_chunks else pa.array([], SET_TYPE)
    if column.type != SET_TYPE:
        raise TypeError(f"shingle sets are {SET_TYPE}, got {column.type}")
    _, bounds, data = column.buffers()
    offsets = np.frombuffer(bounds, np.int64, count=len(column) + 1, offset=column.offset * 8)
    start, stop = int(offsets[0]), int(offsets[-1])
    if stop == start:
        return np.zeros(0, np.uint64), np.zeros(len(offsets), np.int64)
    return np.frombuffer(data, np.uint64, count=(stop - start) // 8, offset=start), (offsets - start) // 8


def doc_numbers(shard: int, rows: int, first_row: int = 0) -> np.ndarray:
    """Global document numbers of rows ``[first_row, first_row + rows)`` of shard ``shard``."""
    if not 0 <= shard < (1 << 31):
        raise ValueError(f"shard number must be in [0, 2^31), got {shard}")
    return (np.int64(shard) << np.int64(SHARD_BITS)) + np.arange(first_row, first_row + rows, dtype=np.int64)


def shard_of(docs: np.ndarray) -> np.ndarray:
    return np.asarray(docs, dtype=np.int64) >> np.int64(SHARD_BITS)


def row_of(docs: np.ndarray) -> np.ndarray:
    return np.asarray(docs, dtype=np.int64) & np.int64((1 << SHARD_BITS) - 1)


def signature_schema(params: MinHashParams) -> pa.Schema:
    fields = [
        pa.field("doc", pa.int64(), nullable=False),
        pa.field("id", pa.string(), nullable=False),
        pa.field("exact_hash", pa.uint64(), nullable=False),
        pa.field("words", pa.int32(), nullable=False),
        pa.field("chars", pa.int64(), nullable=False),
    ]
    if params.score_column:
        fields.append(pa.field("score", pa.float64(), nullable=True))
    if params.url:
        fields.append(pa.field("url_hash", pa.uint64(), nullable=True))
    if params.near:
        bands, _ = params.lsh
        fields += [
            pa.field("shingles", pa.int32(), nullable=False),
            pa.field("band_keys", pa.list_(pa.uint64(), bands), nullable=False),
        ]
        if params.keep_signature:
            value = pa.uint32() if params.scheme == "affine32" else pa.uint64()
            fields.append(pa.field("signature", pa.list_(value, params.num_perm), nullable=False))
    metadata = {PARAMS_KEY: json.dumps(params.to_dict(), sort_keys=True).encode()}
    return pa.schema(fields, metadata=metadata)


def signature_batch(texts: pa.Array | pa.ChunkedArray, params: MinHashParams) -> dict[str, object]:
    """Everything a signature file holds about a batch of texts, as arrays (one row per text);
    processed :data:`DOCS_PER_BATCH` texts at a time."""
    if len(texts) > DOCS_PER_BATCH:
        parts = [
            _signature_batch(texts.slice(lo, DOCS_PER_BATCH), params) for lo in range(0, len(texts), DOCS_PER_BATCH)
        ]
        return {
            name: pa.concat_arrays([p[name] for p in parts])
            if name == "shingle_set"
            else np.concatenate([p[name] for p in parts])
            for name in parts[0]
        }
    return _signature_batch(texts, params)


def _signature_batch(texts: pa.Array | pa.ChunkedArray, params: MinHashParams) -> dict[str, object]:
    found = words(texts)
    columns: dict[str, object] = {
        "exact_hash": combine_word_hashes(found.hashes, found.doc_offsets),
        "words": found.counts.astype(np.int32),
        "chars": pc.fill_null(pc.utf8_length(texts), 0).to_numpy(zero_copy_only=False).astype(np.int64),
    }
    if not params.near:
        return columns
    if params.shingle_hash == "sha1":
        sets, set_offsets = shingle_sets(*sha1_shingle_hashes(found, params.ngram, wide=True))
    else:
        sets, set_offsets = polynomial_shingle_sets(found.hashes, found.doc_offsets, params.ngram)
    # The signatures permute the 32-bit hashes (the low halves), datasketch's; the minimum over
    # them is the same with repeats or without, so the 64-bit set's low halves do.
    signatures = minhash_signatures(signature_hashes(sets), set_offsets, params.num_perm, params.seed, params.scheme)
    bands, rows = params.lsh
    columns["shingles"] = np.diff(set_offsets).astype(np.int32)
    columns["band_keys"] = band_keys(signatures, bands, rows)
    columns["shingle_set"] = set_column(sets, set_offsets)
    if params.keep_signature:
        columns["signature"] = signatures
    return columns


def _fixed_list(values: np.ndarray, value_type: pa.DataType) -> pa.FixedSizeListArray:
    rows, width = values.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), value_type), width)


def signatures_for_shard(docs_shard_path: Path, out_path: Path, params: MinHashParams, *, shard: int) -> dict:
    """Write the signature file of one document shard (layout in the module docstring).

    ``docs_shard_path`` is a Parquet file with at least ``id`` and ``text`` (and
    ``params.score_column`` when set); ``shard`` is this shard's number in the corpus (documents
    of lower shards come first in the keep rule "first"). Returns counts: documents, documents
    without words, shingles."""
    docs_shard_path, out_path = as_path(docs_shard_path), as_path(out_path)
    if not docs_shard_path.exists():
        raise FileNotFoundError(f"documents shard not found: {docs_shard_path}")
    schema = signature_schema(params)
    parquet = parquet_file(docs_shard_path)
    columns = ["id", "text"]
    if params.score_column:
        if params.score_column not in parquet.schema_arrow.names:
            raise ValueError(
                f"{docs_shard_path}: no column {params.score_column!r} for the score "
                f"(dedup score_column); add it upstream or unset score_column"
            )
        columns.append(params.score_column)
    if params.url:
        if "url" not in parquet.schema_arrow.names:
            raise ValueError(f"{docs_shard_path}: no column url for URL dedup; unset dedup url")
        columns.append("url")
    missing = [c for c in ("id", "text") if c not in parquet.schema_arrow.names]
    if missing:
        raise ValueError(f"{docs_shard_path}: missing column(s) {', '.join(missing)}; dedup reads id and text")
    metadata = dict(schema.metadata)
    metadata[SHARD_KEY] = str(shard).encode()
    schema = schema.with_metadata(metadata)
    counts = {"docs": 0, "docs_without_words": 0, "shingles": 0}
    row = 0
    with ExitStack() as files:
        sink = files.enter_context(atomic_sink(out_path))  # entered first: renamed after the sets file
        if params.near:
            target = files.enter_context(atomic_sink(sets_path(out_path)))
            sets = files.enter_context(open(target, "wb")) if isinstance(target, Path) else target
        # The document numbers delta-encoded (consecutive integers).
        encoding = {"doc": "DELTA_BINARY_PACKED"}
        compression = {name: SIGNATURE_COMPRESSION.get(name, PARQUET_COMPRESSION) for name in schema.names}
        with pq.ParquetWriter(
            sink, schema, compression=compression, use_dictionary=False, column_encoding=encoding
        ) as writer:
            for batch in parquet.iter_batches(batch_size=DOCS_PER_BATCH, columns=columns):
                cols = signature_batch(batch.column("text"), params)
                arrays = {
                    "doc": pa.array(doc_numbers(shard, batch.num_rows, row)),
                    "id": batch.column("id").cast(pa.string()),
                    "exact_hash": pa.array(cols["exact_hash"], pa.uint64()),
                    "words": pa.array(cols["words"], pa.int32()),
                    "chars": pa.array(cols["chars"], pa.int64()),
                }
                if params.score_column:
                    arrays["score"] = batch.column(params.score_column).cast(pa.float64())
                if params.url:
                    arrays["url_hash"] = url_hashes(batch.column("url"))
                if params.near:
                    arrays["shingles"] = pa.array(cols["shingles"], pa.int32())
                    arrays["band_keys"] = _fixed_list(cols["band_keys"], pa.uint64())
                    sets.write(memoryview(set_arrays(cols["shingle_set"])[0]))
                    if params.keep_signature:
                        arrays["signature"] = _fixed_list(cols["signature"], schema.field("signature").type.value_type)
                    counts["shingles"] += int(cols["shingles"].sum())
                table = pa.Table.from_pydict(arrays, schema=schema)
                writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
                counts["docs"] += batch.num_rows
                counts["docs_without_words"] += int((cols["words"] == 0).sum())
                row += batch.num_rows
    return counts


def read_params(signature_path: Path) -> dict:
    metadata = parquet_file(signature_path).schema_arrow.metadata or {}
    if PARAMS_KEY not in metadata:
        raise ValueError(f"{signature_path} is not a dedup signature file (no {PARAMS_KEY.decode()} metadata)")
    return json.loads(metadata[PARAMS_KEY])


def partition_band_keys(signature_paths: Sequence[Path], targets: Sequence[Path]) -> list[Path]:
    """Write the band keys (and exact hashes) of the signature files as one file per partition,
    ``targets[p]`` (:meth:`pipeline.dedup.layout.DedupWork.band_files`); a key goes to partition
    ``key % len(targets)``. Each file's rows in turn, band by band in document order (none sorted by
    key: :func:`candidate_pairs` finds the buckets, whatever the order of rows and files), the
    URL hashes (:data:`URL_BAND`) of the documents with a URL last. Documents without words are
    left out: they have nothing to compare."""
    partitions = len(targets)
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    written = []
    pieces: list[list[pa.Table]] = [[] for _ in range(partitions)]
    for path in map(as_path, signature_paths):
        params = read_params(path)
        names = parquet_file(path).schema_arrow.names
        read = ["doc", "exact_hash", "words"] + [c for c in ("band_keys", "url_hash") if c in names]
        table = read_table(path, columns=read)
        has_words = table.column("words").to_numpy() > 0
        docs = table.column("doc").to_numpy()[has_words]
        bands, keys, members = [], [], []
        if params.get("exact", True):
            bands.append(np.full(len(docs), EXACT_BAND, np.int16))
            keys.append(table.column("exact_hash").to_numpy()[has_words])
            members.append(docs)
        if "band_keys" in names and params.get("near", True):
            width = table.schema.field("band_keys").type.list_size
            flat = pc.list_flatten(table.column("band_keys")).to_numpy()
            matrix = flat.reshape(table.num_rows, width)[has_words]
            bands.append(np.repeat(np.arange(width, dtype=np.int16), len(docs)))
            keys.append(matrix.T.reshape(-1))  # band by band: each band's documents in order
            members.append(np.tile(docs, width))
        if "url_hash" in names and params.get("url", False):
            urls = table.column("url_hash").combine_chunks().filter(pa.array(has_words))
            present = urls.is_valid().to_numpy(zero_copy_only=False)
            bands.append(np.full(int(present.sum()), URL_BAND, np.int16))
            keys.append(urls.drop_null().to_numpy())
            members.append(docs[present])
        band = np.concatenate(bands) if bands else np.zeros(0, np.int16)
        key = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        doc = np.concatenate(members) if members else np.zeros(0, np.int64)
        if partitions == 1:
            bounds = np.array([0, len(key)])
        else:
            # A stable sort on the partition (a 16-bit radix sort where it fits) keeps each band's
            # documents in order within a partition.
            partition = (key % np.uint64(partitions)).astype(np.int16 if partitions < (1 << 15) else np.int64)
            order = np.argsort(partition, kind="stable")
            band, key, doc, partition = band[order], key[order], doc[order], partition[order]
            bounds = np.searchsorted(partition, np.arange(partitions + 1))
        for p in range(partitions):
            lo, hi = bounds[p], bounds[p + 1]
            part = pa.Table.from_arrays(
                [pa.array(band[lo:hi]), pa.array(key[lo:hi]), pa.array(doc[lo:hi])], schema=BAND_KEYS_SCHEMA
            )
            pieces[p].append(part)
    for p, parts in enumerate(pieces):
        target = as_path(targets[p])
        table = pa.concat_tables(parts) if parts else empty_table(BAND_KEYS_SCHEMA)
        with atomic_sink(target) as sink:
            pq.write_table(table, sink, **BAND_KEYS_WRITER)
        written.append(target)
    return written


def _partition_files(partition_path: Path | Iterable[Path]) -> list[Path]:
    if is_path(partition_path):
        path = as_path(partition_path)
        if path.is_dir():
            return parquet_files(path)
        if not path.exists():
            raise FileNotFoundError(f"band-key partition not found: {path}")
        return [path]
    return [as_path(p) for p in partition_path]


def candidate_pairs(partition_path: Path | Iterable[Path]) -> pl.DataFrame:
    """Pairs of documents that share a band key in one partition (a folder of band-key files, one
    file, or a list of files, in any order): ``doc_a < doc_b``, ``exact`` when they share the
    exact hash or the URL hash (a pair that is a duplicate as it is, never measured).

    A near-duplicate band's bucket of at most :data:`ALL_PAIRS_BUCKET` documents gives all its
    k (k - 1) / 2 pairs; a larger bucket (boilerplate pages, templates), and every bucket of the
    exact hash, gives k - 1 pairs, each member with the bucket's first (smallest) document: the
    usual way to keep huge buckets linear. Components come out the same when the pairs hold, but a
    member that resembles another member and not the first would be missed where no other band
    brings the two together: in small buckets, where near copies of one article meet, that cost
    recall at the threshold (5 of 629 true pairs on the near-copies benchmark with stars only)."""
    files = _partition_files(partition_path)
    tables = [read_table(f, columns=["band", "key", "doc"]) for f in files]
    band, key, doc = (
        np.concatenate([t.column(c).to_numpy() for t in tables]) if tables else np.zeros(0, dtype)
        for c, dtype in (("band", np.int16), ("key", np.uint64), ("doc", np.int64))
    )
    from pipeline.dedup.kernels import bucket_pairs  # numba: imported by the processes that pair

    doc_a, doc_b, exact = bucket_pairs(band, key, doc, ALL_PAIRS_BUCKET, EXACT_BAND)
    order = pair_order(doc_a, doc_b)
    return pl.DataFrame(
        {"doc_a": doc_a[order], "doc_b": doc_b[order], "exact": exact[order]},
        schema={"doc_a": pl.Int64, "doc_b": pl.Int64, "exact": pl.Boolean},
    )
