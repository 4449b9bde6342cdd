"""The shingle sets' lookup, exact Jaccard, the keep rule and the clusters table: what the
engine's units (``pipeline.dedup.jobs``) run over a group or a home at a time.

    ShingleLookup(signature files).rows(docs, columns) -> the rows of ``docs``, reading only
                                                  the row groups (1,024 documents) that hold them
    jaccard_of_pairs(sets, left, right)            -> exact Jaccard of each pair of sets
    with_attributes(components, lookup, rule)      -> the columns the keep rule needs
    members_of_labelled(labelled, rule)            -> each member, its cluster and kept document
    finish_clusters(members, similarities)         -> the clusters table, once each member's
                                                      similarity with its kept document is measured
    dedup_step(clusters, threshold, shard)         -> a pipeline.stages.shard step that drops the
                                                      duplicates of a shard with each one's rule
    largest_clusters(clusters, inputs)             -> the stage's examples of its largest clusters

Verification computes the Jaccard similarity of the two documents' shingle sets exactly (sorted
distinct 64-bit shingle hashes kept in the signature files), not the MinHash estimate, so LSH false
positives are dropped. The hashes are 64-bit, not the signatures' 32: two unrelated documents
shorter than a shingle (one shingle each) share a 32-bit hash about once in 100,000 such
documents, and their equal signatures and equal 32-bit sets made them near duplicates at
Jaccard 1.0; with 64 bits two different shingles share a hash about once in 2^64 pairs, so a
pair at 1.0 has the same shingles. Pairs found through the exact hash have similarity 1.0 by
construction and are not looked up. ``pipeline.dedup.reference`` finds the same table in one
process, in memory: the reference the tests hold the engine to.

The clusters table has one row per document that belongs to a cluster of two or more documents
(a document not in it is unique, and kept):

    id, doc          the document (doc: its number, shard << 32 | row)
    cluster          the cluster's smallest document number
    cluster_size     documents in the cluster
    kept             whether this document is the one kept
    kept_id, kept_doc the cluster's kept document
    jaccard          exact Jaccard similarity of the shingle sets with the kept document (1.0 for
                     the kept one and for exact duplicates). Clusters are connected components,
                     so a member linked to the kept document through another member may be less
                     similar to it than the threshold: the value says how similar it really is.
    exact            same normalized text as the kept document
    url              same normalized URL as the kept document (``pipeline.dedup.urls``; only
                     with URL dedup, else false)

A removed document's rule (:func:`removals`) is its own relation to the kept document: exact when
its text is the same, else url when its URL is, else near.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.lsh import (
    SET_TYPE,
    SHARD_BITS,
    SHARD_KEY,
    read_params,
    read_sets,
    row_of,
    set_column,
    sets_path,
    shard_of,
)
from pipeline.formats.step import Step, StepResult, removed_frame
from pipeline.io.storage import as_path, empty_table, parquet_bytes, parquet_file, scan_parquet

STAGE = "dedup"
RULE_EXACT = "dedup.exact_duplicate"
RULE_NEAR = "dedup.near_duplicate"
RULE_URL = "dedup.url"

KeepRule = Literal["first", "longest", "quality"]
KEEP_RULES = ("first", "longest", "quality")

CLUSTERS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("doc", pa.int64(), nullable=False),
        pa.field("cluster", pa.int64(), nullable=False),
        pa.field("cluster_size", pa.int64(), nullable=False),
        pa.field("kept", pa.bool_(), nullable=False),
        pa.field("kept_id", pa.string(), nullable=False),
        pa.field("kept_doc", pa.int64(), nullable=False),
        pa.field("jaccard", pa.float64(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
        pa.field("url", pa.bool_(), nullable=False),
    ]
)

# The clusters the stage's stats show, with this many characters of each example's text.
LARGEST_CLUSTERS = 10
EXAMPLE_CHARS = 300


class ShingleLookup:
    """Rows of the signature files by document number, reading only the Parquet row groups that
    hold the requested documents (signature files are written in row groups of 1,024 documents).
    It holds file names and row-group sizes only, so it is cheap to make in every task."""

    def __init__(self, signature_paths: Sequence[Path]):
        self._files: dict[int, tuple[Path, np.ndarray]] = {}
        self.params: dict | None = None
        self.bytes_read = 0  # compressed bytes of the column chunks read so far by rows()
        for path in map(as_path, signature_paths):
            metadata = parquet_file(path).metadata
            keys = metadata.metadata or {}
            if SHARD_KEY not in keys:
                raise ValueError(f"{path} is not a dedup signature file (no shard number in its metadata)")
            shard = int(keys[SHARD_KEY])
            if shard in self._files:
                raise ValueError(f"two signature files for shard {shard}: {self._files[shard][0]} and {path}")
            params = read_params(path)
            if self.params is None:
                self.params = params
            elif params != self.params:
                raise ValueError(
                    f"{path} was made with other dedup parameters than {next(iter(self._files.values()))[0]}; "
                    f"rebuild the signatures with one configuration"
                )
            rows = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
            self._files[shard] = (path, np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]))
        self.columns = parquet_file(next(iter(self._files.values()))[0]).schema_arrow.names if self._files else []
        # The shingle sets come from the sets files beside the signature files (pipeline.dedup.lsh)
        self._set_offsets: dict[int, np.ndarray] = {}
        if self.params and self.params.get("near") and "shingles" in self.columns:
            self.columns = [*self.columns, "shingle_set"]

    def _sets(self, shard: int, rows: np.ndarray) -> pa.LargeBinaryArray:
        """The shingle sets of rows ``rows`` (sorted) of shard ``shard``, from its sets file: each
        set's start in the file from the ``shingles`` column, read once per shard."""
        path, _ = self._files[shard]
        if shard not in self._set_offsets:
            opened = parquet_file(path)
            sizes = opened.read(columns=["shingles"]).column("shingles").to_numpy()
            self.bytes_read += parquet_bytes(opened.metadata, ["shingles"])
            self._set_offsets[shard] = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        offsets = self._set_offsets[shard]
        values, set_offsets = read_sets(sets_path(path), offsets[rows], offsets[rows + 1])
        self.bytes_read += values.nbytes
        return set_column(values, set_offsets)

    def rows(self, docs: np.ndarray, columns: Sequence[str]) -> pa.Table:
        """The rows of ``docs`` (any order, repeats allowed) as a table sorted by ``doc``, one row
        per distinct document, with ``doc`` and ``columns``."""
        docs = np.unique(np.asarray(docs, dtype=np.int64))
        columns = ["doc"] + [c for c in columns if c != "doc"]
        missing = [c for c in columns if c not in self.columns]
        if missing:
            raise ValueError(f"the signature files have no column(s) {', '.join(missing)}")
        shards = shard_of(docs)
        pieces = []
        for shard in np.unique(shards):
            if int(shard) not in self._files:
                raise KeyError(f"no signature file for shard {int(shard)}")
            path, row_group_starts = self._files[int(shard)]
            rows = row_of(docs[shards == shard])
            if rows.max() >= row_group_starts[-1]:
                raise KeyError(f"shard {int(shard)} has {row_group_starts[-1]} documents; row {int(rows.max())} asked")
            stored = [c for c in columns if c != "shingle_set"]
            if stored == ["doc"]:  # the document numbers are those asked
                piece = pa.table({"doc": pa.array(docs[shards == shard], pa.int64())})
            else:
                row_groups = np.searchsorted(row_group_starts, rows, side="right") - 1
                needed = np.unique(row_groups)
                opened = parquet_file(path)
                table = opened.read_row_groups(needed.tolist(), columns=stored)
                self.bytes_read += parquet_bytes(opened.metadata, stored, needed.tolist())
                read_sizes = row_group_starts[needed + 1] - row_group_starts[needed]
                read_starts = np.concatenate([[0], np.cumsum(read_sizes)])[:-1]
                positions = read_starts[np.searchsorted(needed, row_groups)] + rows - row_group_starts[row_groups]
                piece = table.take(pa.array(positions))
                del table  # the whole row groups read: handed back to the system before the next shard's
                pa.default_memory_pool().release_unused()
            if "shingle_set" in columns:
                piece = piece.append_column(pa.field("shingle_set", SET_TYPE, nullable=False), self._sets(shard, rows))
            pieces.append(piece.select(columns))
        if not pieces:
            schema = parquet_file(next(iter(self._files.values()))[0]).schema_arrow if self._files else None
            if schema is None:
                return pa.table({"doc": pa.array([], pa.int64())})
            if "shingle_set" in columns:
                schema = schema.append(pa.field("shingle_set", SET_TYPE, nullable=False))
            return empty_table(schema).select(columns)
        return pa.concat_tables(pieces)


def jaccard_of_pairs(
    values: np.ndarray,
    offsets: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    right_sets: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Exact Jaccard similarity of sets ``left[i]`` and ``right[i]`` (indices into ``offsets``;
    set ``k`` is ``values[offsets[k]:offsets[k + 1]]``, distinct and sorted, uint32 or uint64; with
    ``right_sets``, ``(values, offsets)`` of the right sets, so two arrays need not be joined):
    one compiled merge of the two sets per pair (:func:`pipeline.dedup.kernels.pair_jaccard`).
    Two empty sets have similarity 0."""
    from pipeline.dedup.kernels import pair_jaccard  # numba: imported by the processes that measure

    return pair_jaccard(
        np.asarray(values), np.asarray(offsets), np.asarray(left), np.asarray(right), *(right_sets or ())
    )


def choose_kept(components: pl.DataFrame, rule: KeepRule = "first") -> pl.DataFrame:
    """Mark one kept document per component; return ``components`` with ``kept`` and ``kept_doc``.

    Rules, each a total order so the choice never depends on the input's order:
    ``"first"`` the smallest document number (shard order, then row order); ``"longest"`` the most
    characters (column ``chars``), ties to the smallest number; ``"quality"`` the highest
    ``score`` (nulls last), ties to the smallest number."""
    if rule not in KEEP_RULES:
        raise ValueError(f"unknown keep rule {rule!r}: use one of {', '.join(KEEP_RULES)}")
    needed = {"first": [], "longest": ["chars"], "quality": ["score"]}[rule]
    missing = [c for c in ["doc", "component", *needed] if c not in components.columns]
    if missing:
        raise ValueError(
            f"keep rule {rule!r} needs column(s) {', '.join(missing)}"
            + ("; set the dedup score_column" if "score" in missing else "")
        )
    if rule == "first":
        order, descending = ["component", "doc"], [False, False]
    elif rule == "longest":
        order, descending = ["component", "chars", "doc"], [False, True, False]
    else:
        order, descending = ["component", "score", "doc"], [False, True, False]
    ranked = components.sort(order, descending=descending, nulls_last=True)
    ranked = ranked.with_columns(kept_doc=pl.col("doc").first().over("component"))
    return ranked.with_columns(kept=pl.col("doc") == pl.col("kept_doc")).sort("doc")


MEMBERS_SCHEMA = {
    "id": pl.String,
    "doc": pl.Int64,
    "cluster": pl.Int64,
    "cluster_size": pl.Int64,
    "kept": pl.Boolean,
    "kept_id": pl.String,
    "kept_doc": pl.Int64,
    "exact": pl.Boolean,
    "url": pl.Boolean,
}


def keep_rule_columns(rule: KeepRule, available: Sequence[str]) -> list[str]:
    """The columns of the signature files that the members of a cluster need under ``rule``
    (``available``: the files' columns), and the URL hash where the files have one (URL dedup)."""
    if rule == "quality" and "score" not in available:
        raise ValueError("keep rule 'quality' needs a score: set the dedup score_column to a column of the documents")
    return (
        ["id", "chars", "exact_hash"]
        + (["score"] if rule == "quality" else [])
        + (["url_hash"] if "url_hash" in available else [])
    )


def with_attributes(components: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule) -> pl.DataFrame:
    """``components`` (``doc, component``, sorted by ``doc``) with the columns the keep rule
    needs (:func:`keep_rule_columns`), read from the signature files."""
    wanted = keep_rule_columns(rule, lookup.columns)
    attributes = pl.from_arrow(lookup.rows(components["doc"].to_numpy(), wanted))
    return components.join(attributes, on="doc", how="left")


def members_of_labelled(labelled: pl.DataFrame, rule: KeepRule = "first") -> pl.DataFrame:
    """Every member of each component, sorted by ``doc``, with its cluster, the cluster's kept
    document, and whether it is an exact copy of it (same normalized text) or has its normalized
    URL, from ``doc, component`` and the columns the keep rule needs (:func:`with_attributes`)."""
    if labelled.height == 0:
        return pl.DataFrame(schema=MEMBERS_SCHEMA)
    if "url_hash" not in labelled.columns:
        labelled = labelled.with_columns(url_hash=pl.lit(None, pl.UInt64))
    members = choose_kept(labelled, rule)
    kept = members.filter(pl.col("kept")).select(
        pl.col("doc").alias("kept_doc"),
        pl.col("id").alias("kept_id"),
        pl.col("exact_hash").alias("kept_hash"),
        pl.col("url_hash").alias("kept_url_hash"),
    )
    members = members.join(kept, on="kept_doc", how="left").with_columns(
        exact=pl.col("exact_hash") == pl.col("kept_hash"),
        url=(pl.col("url_hash") == pl.col("kept_url_hash")).fill_null(False),
        cluster_size=pl.len().over("component"),
    )
    return members.select(
        pl.col("id").cast(pl.String),
        pl.col("doc").cast(pl.Int64),
        pl.col("component").cast(pl.Int64).alias("cluster"),
        pl.col("cluster_size").cast(pl.Int64),
        "kept",
        pl.col("kept_id").cast(pl.String),
        pl.col("kept_doc").cast(pl.Int64),
        "exact",
        "url",
    ).sort("doc")


def similarity_pairs(members: pl.DataFrame) -> pl.DataFrame:
    """The pairs whose similarity the clusters table needs measured: each member that is neither
    kept nor an exact copy, with its kept document (``doc_a`` the kept document, ``doc_b`` the
    member, ``exact`` false)."""
    return members.filter(~pl.col("kept") & ~pl.col("exact")).select(
        pl.col("kept_doc").alias("doc_a"), pl.col("doc").alias("doc_b"), exact=pl.lit(False)
    )


def finish_clusters(members: pl.DataFrame, measured: pl.DataFrame) -> pl.DataFrame:
    """The clusters table: ``members`` (:func:`members_of_labelled`) with ``jaccard``, the similarity
    with the kept document: 1.0 for the kept document and exact copies, else the value of the
    pair (kept document, member) in ``measured`` (``doc_a, doc_b, jaccard``)."""
    wanted = similarity_pairs(members)
    values = measured.select(
        pl.col("doc_a").cast(pl.Int64).alias("kept_doc"), pl.col("doc_b").cast(pl.Int64).alias("doc"), "jaccard"
    ).unique(["kept_doc", "doc"])
    found = wanted.join(values, left_on=["doc_a", "doc_b"], right_on=["kept_doc", "doc"], how="inner").height
    if found != wanted.height:
        raise ValueError(f"{wanted.height - found} of {wanted.height} similarities with the kept document are missing")
    table = members.join(values, on=["kept_doc", "doc"], how="left", maintain_order="left").with_columns(
        jaccard=pl.when(pl.col("kept") | pl.col("exact")).then(pl.lit(1.0)).otherwise(pl.col("jaccard"))
    )
    return table.select(
        "id",
        "doc",
        "cluster",
        "cluster_size",
        "kept",
        "kept_id",
        "kept_doc",
        pl.col("jaccard").cast(pl.Float64),
        "exact",
        "url",
    ).sort("doc")


def kept_cluster_sizes(clusters_path: Path, ids: pl.Series) -> pl.Series:
    """The size of the duplicate cluster each of ``ids`` stood for: its ``cluster_size`` where it
    is a cluster's kept document, 1 where it is in no cluster (read: the kept rows of the table
    whose id is among ``ids``)."""
    wanted = ids.cast(pl.String).rename("id")
    sizes = (
        scan_parquet([clusters_path])
        .filter(pl.col("kept"))
        .select("id", "cluster_size")
        .join(wanted.to_frame().lazy(), on="id", how="semi")
        .collect()
    )
    joined = wanted.to_frame().join(sizes, on="id", how="left", maintain_order="left")
    return joined["cluster_size"].fill_null(1).cast(pl.Int64).rename("cluster_size")


def removals(clusters: pl.DataFrame, threshold: float, shard: int | None = None) -> pl.DataFrame:
    """``id, rule, value, threshold`` of every document dedup removes (of shard ``shard`` only,
    when given): rule ``dedup.exact_duplicate`` (same normalized text as the kept document,
    threshold 1.0), else ``dedup.url`` (same normalized URL, no threshold), else
    ``dedup.near_duplicate`` (threshold: the Jaccard threshold); value: the Jaccard similarity
    with the kept document."""
    removed = clusters.filter(~pl.col("kept"))
    if shard is not None:
        removed = removed.filter(pl.col("doc") // (1 << SHARD_BITS) == shard)
    return removed.select(
        pl.col("id").cast(pl.String),
        rule=pl.when(pl.col("exact"))
        .then(pl.lit(RULE_EXACT))
        .when(pl.col("url"))
        .then(pl.lit(RULE_URL))
        .otherwise(pl.lit(RULE_NEAR)),
        value=pl.col("jaccard").cast(pl.Float64),
        threshold=pl.when(pl.col("exact"))
        .then(pl.lit(1.0))
        .when(pl.col("url"))
        .then(pl.lit(None, pl.Float64))
        .otherwise(pl.lit(float(threshold))),
    )


def dedup_step(clusters: pl.DataFrame, threshold: float, shard: int | None = None) -> Step:
    """The step that applies the clusters to batches of documents (see ``pipeline.stages.shard``): it
    removes every document that is in a cluster and not kept, matched by id, with its rule,
    Jaccard similarity and threshold; pass ``shard`` to hold only that shard's removals."""
    return removal_step(removals(clusters, threshold, shard))


def removal_step(removal: pl.DataFrame) -> Step:
    """The step that removes the documents of ``removal`` (``id, rule, value, threshold``, as
    :func:`removals` gives), matched by id, and counts each rule that fired."""

    def step(docs: pl.DataFrame) -> StepResult:
        found = docs.select(pl.col("id").cast(pl.String)).join(removal, on="id", how="left", maintain_order="left")
        removed = found["rule"].is_not_null()
        counts = Counter({f"fired|{rule}": n for rule, n in Counter(found["rule"].drop_nulls().to_list()).items()})
        return StepResult(
            kept=docs.filter(~removed),
            removed=removed_frame(
                docs.filter(removed),
                STAGE,
                found["rule"].filter(removed),
                found["value"].filter(removed),
                found["threshold"].filter(removed),
            ),
            counts=counts,
        )

    return step


def largest_clusters(clusters: pl.LazyFrame, inputs: list[Path], n: int = LARGEST_CLUSTERS) -> list[dict]:
    """The ``n`` largest clusters: size, the kept document and one removed one, with their text
    (read lazily: only the cluster column of the whole table, and the rows of the top clusters)."""
    top = (
        clusters.group_by("cluster")
        .agg(pl.len().alias("size"))
        .sort(["size", "cluster"], descending=[True, False])
        .head(n)
        .collect()
    )
    if top.height == 0:
        return []
    members = clusters.join(top.lazy(), on="cluster").sort("cluster", "doc").collect()
    wanted = members.group_by("cluster", maintain_order=True).agg(
        pl.col("kept_id").first(),
        pl.col("id").filter(~pl.col("kept")).first().alias("removed_id"),
        pl.col("jaccard").filter(~pl.col("kept")).min().alias("min_jaccard"),
        pl.col("size").first(),
    )
    ids = set(wanted["kept_id"].to_list()) | set(wanted["removed_id"].drop_nulls().to_list())
    texts = dict(scan_parquet(inputs).filter(pl.col("id").is_in(list(ids))).select("id", "text").collect().iter_rows())
    return [
        {
            "cluster": row["cluster"],
            "size": row["size"],
            "kept_id": row["kept_id"],
            "kept_text": texts.get(row["kept_id"], "")[:EXAMPLE_CHARS],
            "removed_id": row["removed_id"],
            "removed_text": texts.get(row["removed_id"], "")[:EXAMPLE_CHARS],
            "min_jaccard": row["min_jaccard"],
        }
        for row in wanted.sort("size", "cluster", descending=[True, False]).iter_rows(named=True)
    ]


# Band-key rows a partition holds when the corpus is small enough to need fewer than
