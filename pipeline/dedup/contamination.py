"""Near-duplicates of a fixed reference set: held-out validation documents, a downstream task's texts.

Deduplication asks which documents of a corpus duplicate each other; decontamination asks which
documents duplicate one of a small set of reference texts that must stay unseen in training. The
same machinery answers it (:mod:`pipeline.dedup.lsh` signatures, band keys and exact-hash band,
then exact Jaccard on the shingle sets), arranged for the asymmetric case: the reference set is
indexed once in memory, and any number of document batches (a shard per task, in parallel) are
looked up against it::

    index = ReferenceIndex(validation["id"], validation["text"], MinHashParams(threshold=0.8))
    pairs = index.matches(shard["id"], shard["text"])       # id, reference_id, jaccard

A pair is reported when the two texts share the exact hash of their normalized text, or when a
band of their signatures agrees and their exact Jaccard similarity reaches ``params.threshold``.
Texts with no words (after normalization) never match. Memory: about 3 KB of 64-bit shingle hashes
per 2 KB reference document, plus the batch being looked up.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.clusters import jaccard_of_pairs
from pipeline.dedup.lsh import EXACT_BAND, set_arrays, signature_batch
from pipeline.dedup.minhash import MinHashParams
from pipeline.formats.documents import string_array

MATCHES_SCHEMA = {"id": pl.String, "reference_id": pl.String, "jaccard": pl.Float64}


def _ids(ids: pl.Series | Sequence[str], count: int, what: str) -> pl.Series:
    series = ids.cast(pl.String) if isinstance(ids, pl.Series) else pl.Series(list(ids), dtype=pl.String)
    if len(series) != count:
        raise ValueError(f"{what}: {len(series)} ids for {count} texts; give one id per text")
    if series.null_count():
        raise ValueError(f"{what}: {series.null_count()} ids are null; every text needs an id")
    return series


class _Signed:
    """Band keys (exact hash as one more band), words and shingle sets of a batch of texts."""

    def __init__(self, texts: pa.Array, params: MinHashParams):
        columns = signature_batch(texts, params)
        self.count = len(texts)
        self.words = np.asarray(columns["words"])
        keys = [np.asarray(columns["exact_hash"], dtype=np.uint64)[:, None]] if params.exact else []
        bands = [EXACT_BAND] if params.exact else []
        if params.near:
            keys.append(np.asarray(columns["band_keys"], dtype=np.uint64))
            bands.extend(range(params.lsh[0]))
            self.values, self.offsets = set_arrays(columns["shingle_set"])
        else:
            self.offsets = np.zeros(self.count + 1, np.int64)
            self.values = np.zeros(0, np.uint64)
        matrix = np.concatenate(keys, axis=1) if keys else np.zeros((self.count, 0), np.uint64)
        has_words = self.words > 0
        rows = np.flatnonzero(has_words)
        self.keys = pl.DataFrame(
            {
                "band": np.tile(np.asarray(bands, dtype=np.int16), len(rows)),
                "key": matrix[rows].reshape(-1),
                "row": np.repeat(rows.astype(np.int64), len(bands)),
            },
            schema={"band": pl.Int16, "key": pl.UInt64, "row": pl.Int64},
        )


class ReferenceIndex:
    """The reference texts, indexed by band key, to look batches of documents up against.

    ``ids`` name the reference texts (they come back as ``reference_id``); ``params`` is the dedup
    stage's :class:`MinHashParams` (threshold, shingle size, permutations, LSH layout)."""

    def __init__(
        self,
        ids: pl.Series | Sequence[str],
        texts: pl.Series | pa.Array | Sequence[str],
        params: MinHashParams = MinHashParams(),
    ):
        array = string_array(texts)
        self.params = params
        self.ids = _ids(ids, len(array), "ReferenceIndex")
        self._signed = _Signed(array, params)
        self._keys = self._signed.keys.rename({"row": "reference"})

    def __len__(self) -> int:
        return self._signed.count

    def matches(self, ids: pl.Series | Sequence[str], texts: pl.Series | pa.Array | Sequence[str]) -> pl.DataFrame:
        """Pairs ``id, reference_id, jaccard`` of the given texts that duplicate a reference text
        (exact Jaccard at or above the threshold, or 1.0 for equal normalized texts), sorted by
        id and reference id."""
        array = string_array(texts)
        doc_ids = _ids(ids, len(array), "ReferenceIndex.matches")
        if not len(array) or not len(self):
            return pl.DataFrame(schema=MATCHES_SCHEMA)
        batch = _Signed(array, self.params)
        joined = batch.keys.join(self._keys, on=["band", "key"], how="inner")
        if joined.height == 0:
            return pl.DataFrame(schema=MATCHES_SCHEMA)
        pairs = (
            joined.group_by(["row", "reference"])
            .agg(exact=(pl.col("band") == EXACT_BAND).any())
            .sort(["row", "reference"])
        )
        rows = pairs["row"].to_numpy()
        refs = pairs["reference"].to_numpy()
        similarity = np.ones(len(rows), dtype=np.float64)
        near = ~pairs["exact"].to_numpy()
        if near.any():
            reference = self._signed
            values = np.concatenate([reference.values, batch.values])
            offsets = np.concatenate([reference.offsets, batch.offsets[1:] + reference.offsets[-1]])
            similarity[near] = jaccard_of_pairs(values, offsets, refs[near], rows[near] + reference.count)
        keep = similarity >= self.params.threshold
        return pl.DataFrame(
            {
                "id": doc_ids.gather(rows[keep]),
                "reference_id": self.ids.gather(refs[keep]),
                "jaccard": similarity[keep],
            },
            schema=MATCHES_SCHEMA,
        ).sort(["id", "reference_id"])


def read_reference_texts(paths: Sequence[Path]) -> pl.DataFrame:
    """``id, text`` of reference files: Parquet or JSON lines with a ``text`` column (and an ``id``
    column, else ids are ``<file name>:<row>``). Rows with an empty text are left out."""
    frames = []
    for path in map(Path, paths):
        if path.suffix == ".parquet":
            frame = pl.read_parquet(path)
        elif path.suffix in (".jsonl", ".json", ".ndjson"):
            frame = pl.read_ndjson(path)
        else:
            raise ValueError(f"{path}: reference texts are read from .parquet or .jsonl files")
        if "text" not in frame.columns:
            raise ValueError(f"{path} has no 'text' column (columns: {frame.columns})")
        ids = (
            frame["id"].cast(pl.String)
            if "id" in frame.columns
            else pl.Series([f"{path.name}:{row}" for row in range(frame.height)], dtype=pl.String)
        )
        frames.append(pl.DataFrame({"id": ids, "text": frame["text"].cast(pl.String)}))
    texts = pl.concat(frames) if frames else pl.DataFrame(schema={"id": pl.String, "text": pl.String})
    return texts.filter(pl.col("text").is_not_null() & (pl.col("text").str.strip_chars() != ""))


def read_reference_ids(paths: Sequence[Path]) -> pl.Series:
    """The ids of reference files that have an ``id`` column (every row, empty texts too), unique
    and sorted: documents of the pool with one of these ids are the reference texts themselves."""
    found = []
    for path in map(Path, paths):
        columns = (
            pl.read_parquet_schema(path) if path.suffix == ".parquet" else pl.scan_ndjson(path).collect_schema()
        ).keys()
        if "id" not in columns:
            continue
        frame = (
            pl.read_parquet(path, columns=["id"]) if path.suffix == ".parquet" else pl.read_ndjson(path).select("id")
        )
        found.append(frame["id"].cast(pl.String))
    ids = pl.concat(found) if found else pl.Series("id", [], dtype=pl.String)
    return ids.drop_nulls().unique().sort().alias("id")
