"""From candidate pairs to duplicate clusters: verification, connected components, the keep rule.

    verify_pairs(candidate_pairs(partition), ShingleLookup(signature files), threshold)
        -> edges: pairs whose exact Jaccard similarity of shingle sets reaches the threshold
    connected_components(all edges)            -> doc -> component (its smallest document)
    choose_kept(components + attributes, rule) -> one kept document per component
    cluster_members(all edges, lookup, rule)   -> the two steps above, with the kept document
    finish_clusters(members, similarities)     -> the clusters table, once each member's
                                                  similarity with its kept document is measured
    cluster_table(all edges, lookup, rule)     -> all of it in this process
    dedup_step(clusters, threshold, shard)     -> a pipeline.stages.shard step that drops the duplicates
                                                  of a shard and records each one's rule and value

Verification computes the Jaccard similarity of the two documents' shingle sets exactly (sorted
distinct 64-bit shingle hashes kept in the signature files), not the MinHash estimate, so LSH false
positives are dropped. The hashes are 64-bit, not the signatures' 32: two unrelated documents
shorter than a shingle (one shingle each) share a 32-bit hash about once in 100,000 such
documents, and their equal signatures and equal 32-bit sets made them near duplicates at
Jaccard 1.0; with 64 bits two different shingles share a hash about once in 2^64 pairs, so a
pair at 1.0 has the same shingles. Pairs found through the exact hash have similarity 1.0 by
construction and are not looked up.

:class:`ShingleLookup` reads only the Parquet row groups (1,024 documents) of the signature
files that hold the documents asked for. :func:`verify_pairs` and :func:`cluster_table` verify and
measure in this process through one lookup over every signature file, the reference for small
inputs and tests; the dedup stage measures the same pairs routed to the shards that hold their
sets (``pipeline.dedup.routed``), so that its reads grow with the corpus, and gets the same
table.

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
    set_arrays,
    set_column,
    sets_path,
    shard_of,
)
from pipeline.formats.step import Step, StepResult, removed_frame
from pipeline.io.storage import as_path, parquet_bytes, parquet_file, scan_parquet

STAGE = "dedup"
RULE_EXACT = "dedup.exact_duplicate"
RULE_NEAR = "dedup.near_duplicate"

KeepRule = Literal["first", "longest", "quality"]
KEEP_RULES = ("first", "longest", "quality")

EDGES_SCHEMA = pa.schema(
    [
        pa.field("doc_a", pa.int64(), nullable=False),
        pa.field("doc_b", pa.int64(), nullable=False),
        pa.field("jaccard", pa.float64(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
    ]
)

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
    ]
)

# The clusters the stage's stats show, with this many characters of each example's text.
LARGEST_CLUSTERS = 10
EXAMPLE_CHARS = 300

# Pairs verified per step: this bounds the rows read and the temporaries.
PAIRS_PER_STEP = 50_000


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
            path, group_starts = self._files[int(shard)]
            rows = row_of(docs[shards == shard])
            if rows.max() >= group_starts[-1]:
                raise KeyError(f"shard {int(shard)} has {group_starts[-1]} documents; row {int(rows.max())} asked")
            stored = [c for c in columns if c != "shingle_set"]
            if stored == ["doc"]:  # the document numbers are those asked
                piece = pa.table({"doc": pa.array(docs[shards == shard], pa.int64())})
            else:
                groups = np.searchsorted(group_starts, rows, side="right") - 1
                needed = np.unique(groups)
                opened = parquet_file(path)
                table = opened.read_row_groups(needed.tolist(), columns=stored)
                self.bytes_read += parquet_bytes(opened.metadata, stored, needed.tolist())
                read_sizes = group_starts[needed + 1] - group_starts[needed]
                read_starts = np.concatenate([[0], np.cumsum(read_sizes)])[:-1]
                positions = read_starts[np.searchsorted(needed, groups)] + rows - group_starts[groups]
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
            return schema.empty_table().select(columns)
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
    one compiled merge of the two sets per pair (:func:`pipeline.dedup.kernels.pair_jaccard`),
    where numpy tagged every value with its pair's number and binary-searched the left sets' values
    in the right ones (8-9 times as long on 400,000 pairs of demo signature sets). Two empty sets
    have similarity 0."""
    from pipeline.dedup.kernels import pair_jaccard  # numba: imported by the processes that measure

    return pair_jaccard(
        np.asarray(values), np.asarray(offsets), np.asarray(left), np.asarray(right), *(right_sets or ())
    )


def _shingle_sets(lookup: ShingleLookup, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct docs, set values, set offsets) for ``docs``."""
    table = lookup.rows(docs, ["shingle_set"])
    values, offsets = set_arrays(table.column("shingle_set"))
    return table.column("doc").to_numpy(), values, offsets


def _empty_edges() -> pl.DataFrame:
    return pl.from_arrow(EDGES_SCHEMA.empty_table())


def verify_pairs(pairs: pl.DataFrame, lookup: ShingleLookup, threshold: float) -> pl.DataFrame:
    """Edges ``doc_a, doc_b, jaccard, exact``: the candidate pairs whose exact Jaccard similarity
    reaches ``threshold`` (pairs sharing the exact hash pass with 1.0). Repeated pairs (found in
    several bands or partitions) are verified once."""
    if pairs.height == 0:
        return _empty_edges()
    pairs = pairs.group_by(["doc_a", "doc_b"]).agg(pl.col("exact").any()).sort(["doc_a", "doc_b"])
    exact = pairs.filter(pl.col("exact")).with_columns(jaccard=pl.lit(1.0))
    near = pairs.filter(~pl.col("exact"))
    verified = [exact.select("doc_a", "doc_b", "jaccard", "exact")]
    if near.height:
        if "shingle_set" not in lookup.columns:
            raise ValueError("near-duplicate pairs need shingle sets: the signature files were made with near=False")
        for start in range(0, near.height, PAIRS_PER_STEP):
            step = near.slice(start, PAIRS_PER_STEP)
            a = step["doc_a"].to_numpy()
            b = step["doc_b"].to_numpy()
            docs, values, offsets = _shingle_sets(lookup, np.concatenate([a, b]))
            similarity = jaccard_of_pairs(values, offsets, np.searchsorted(docs, a), np.searchsorted(docs, b))
            keep = similarity >= threshold
            verified.append(
                pl.DataFrame(
                    {
                        "doc_a": a[keep],
                        "doc_b": b[keep],
                        "jaccard": similarity[keep],
                        "exact": np.zeros(int(keep.sum()), bool),
                    }
                )
            )
    edges = pl.concat(verified, how="vertical").sort(["doc_a", "doc_b"])
    return edges.select(
        pl.col("doc_a").cast(pl.Int64),
        pl.col("doc_b").cast(pl.Int64),
        pl.col("jaccard").cast(pl.Float64),
        pl.col("exact").cast(pl.Boolean),
    )


def _components_union_find(a: np.ndarray, b: np.ndarray, nodes: int) -> np.ndarray:
    """Minimum-label propagation with pointer jumping, vectorized (used without scipy)."""
    label = np.arange(nodes, dtype=np.int64)
    while True:
        low = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, low)
        np.minimum.at(label, b, low)
        while True:  # pointer jumping: follow labels to their root
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
        if np.array_equal(label, before):
            return label


def connected_components(edges: pl.DataFrame, use_scipy: bool = True) -> pl.DataFrame:
    """``doc, component`` for every document of an edge, the component named by its smallest
    document number (so the numbering does not depend on the edges' order).
    ``scipy.sparse.csgraph.connected_components`` when scipy is there, else a vectorized
    minimum-label propagation."""
    if edges.height == 0:
        return pl.DataFrame(schema={"doc": pl.Int64, "component": pl.Int64})
    a_docs = edges["doc_a"].to_numpy()
    b_docs = edges["doc_b"].to_numpy()
    docs, inverse = np.unique(np.concatenate([a_docs, b_docs]), return_inverse=True)
    a, b = inverse[: len(a_docs)], inverse[len(a_docs) :]
    labels = None
    if use_scipy:
        try:
            from scipy.sparse import coo_matrix
            from scipy.sparse.csgraph import connected_components as scipy_components
        except ImportError:
            scipy_components = None
        if scipy_components is not None:
            graph = coo_matrix((np.ones(len(a), np.int32), (a, b)), shape=(len(docs), len(docs))).tocsr()
            _, labels = scipy_components(graph, directed=False)
    if labels is None:
        labels = _components_union_find(a, b, len(docs))
    # docs are sorted, so a label's first occurrence is its smallest document.
    _, first = np.unique(labels, return_index=True)
    smallest = np.empty(labels.max() + 1, dtype=np.int64)
    smallest[labels[first]] = docs[first]
    return pl.DataFrame({"doc": docs, "component": smallest[labels]})


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
}


def cluster_members(edges: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule = "first") -> pl.DataFrame:
    """The clusters table without its similarity column: every document of an edge with its
    cluster, the cluster's kept document, and whether it is an exact copy of it (same
    normalized text). Reads the attributes the keep rule needs from the signature files."""
    return members_of_components(connected_components(edges), lookup, rule)


def keep_rule_columns(rule: KeepRule, available: Sequence[str]) -> list[str]:
    """The columns of the signature files that the members of a cluster need under ``rule``
    (``available``: the files' columns)."""
    if rule == "quality" and "score" not in available:
        raise ValueError("keep rule 'quality' needs a score: set the dedup score_column to a column of the documents")
    return ["id", "chars", "exact_hash"] + (["score"] if rule == "quality" else [])


def with_attributes(components: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule) -> pl.DataFrame:
    """``components`` (``doc, component``, sorted by ``doc``) with the columns the keep rule
    needs (:func:`keep_rule_columns`), read from the signature files."""
    wanted = keep_rule_columns(rule, lookup.columns)
    attributes = pl.from_arrow(lookup.rows(components["doc"].to_numpy(), wanted))
    return components.join(attributes, on="doc", how="left")


def members_of_components(components: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule = "first") -> pl.DataFrame:
    """:func:`cluster_members` from ``doc, component`` (the component named by its smallest
    document), however the components were found."""
    if components.height == 0:
        return pl.DataFrame(schema=MEMBERS_SCHEMA)
    return members_of_labelled(with_attributes(components, lookup, rule), rule)


def members_of_labelled(labelled: pl.DataFrame, rule: KeepRule = "first") -> pl.DataFrame:
    """:func:`cluster_members` from ``doc, component`` and the columns the keep rule needs
    (:func:`with_attributes`): every member of each component, sorted by ``doc``."""
    if labelled.height == 0:
        return pl.DataFrame(schema=MEMBERS_SCHEMA)
    members = choose_kept(labelled, rule)
    kept = members.filter(pl.col("kept")).select(
        pl.col("doc").alias("kept_doc"), pl.col("id").alias("kept_id"), pl.col("exact_hash").alias("kept_hash")
    )
    members = members.join(kept, on="kept_doc", how="left").with_columns(
        exact=pl.col("exact_hash") == pl.col("kept_hash"),
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
    ).sort("doc")


def similarity_pairs(members: pl.DataFrame) -> pl.DataFrame:
    """The pairs whose similarity the clusters table needs measured: each member that is neither
    kept nor an exact copy, with its kept document (``doc_a`` the kept document, ``doc_b`` the
    member, ``exact`` false)."""
    return members.filter(~pl.col("kept") & ~pl.col("exact")).select(
        pl.col("kept_doc").alias("doc_a"), pl.col("doc").alias("doc_b"), exact=pl.lit(False)
    )


def measure_pairs(pairs: pl.DataFrame, lookup: ShingleLookup) -> pl.DataFrame:
    """``doc_a, doc_b, jaccard``: the exact Jaccard similarity of every pair (in this process, in
    steps of :data:`PAIRS_PER_STEP` pairs, each reading the row groups that hold its documents)."""
    a_all, b_all = pairs["doc_a"].to_numpy(), pairs["doc_b"].to_numpy()
    measured = np.empty(len(a_all), dtype=np.float64)
    if len(a_all) and "shingle_set" not in lookup.columns:
        raise ValueError("near-duplicate clusters need shingle sets: the signature files were made with near=False")
    for start in range(0, len(a_all), PAIRS_PER_STEP):
        a, b = a_all[start : start + PAIRS_PER_STEP], b_all[start : start + PAIRS_PER_STEP]
        found, values, offsets = _shingle_sets(lookup, np.concatenate([a, b]))
        measured[start : start + len(a)] = jaccard_of_pairs(
            values, offsets, np.searchsorted(found, a), np.searchsorted(found, b)
        )
    return pl.DataFrame({"doc_a": a_all, "doc_b": b_all, "jaccard": measured})


def finish_clusters(members: pl.DataFrame, measured: pl.DataFrame) -> pl.DataFrame:
    """The clusters table: ``members`` (:func:`cluster_members`) with ``jaccard``, the similarity
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
    ).sort("doc")


def cluster_table(edges: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule = "first") -> pl.DataFrame:
    """The clusters table (columns in the module docstring) from all verified edges, in this
    process: :func:`cluster_members`, the similarities measured by :func:`measure_pairs`, then
    :func:`finish_clusters`. The dedup stage measures them routed between groups of shards instead
    (``pipeline.dedup.routed``); the table is the same."""
    members = cluster_members(edges, lookup, rule)
    return finish_clusters(members, measure_pairs(similarity_pairs(members), lookup))


def removals(clusters: pl.DataFrame, threshold: float, shard: int | None = None) -> pl.DataFrame:
    """``id, rule, value, threshold`` of every document dedup removes (of shard ``shard`` only,
    when given): rule ``dedup.exact_duplicate`` (same normalized text as the kept document,
    threshold 1.0) or ``dedup.near_duplicate`` (threshold: the Jaccard threshold); value: the
    Jaccard similarity with the kept document."""
    removed = clusters.filter(~pl.col("kept"))
    if shard is not None:
        removed = removed.filter(pl.col("doc") // (1 << SHARD_BITS) == shard)
    return removed.select(
        pl.col("id").cast(pl.String),
        rule=pl.when(pl.col("exact")).then(pl.lit(RULE_EXACT)).otherwise(pl.lit(RULE_NEAR)),
        value=pl.col("jaccard").cast(pl.Float64),
        threshold=pl.when(pl.col("exact")).then(pl.lit(1.0)).otherwise(pl.lit(float(threshold))),
    )


def dedup_step(clusters: pl.DataFrame, threshold: float, shard: int | None = None) -> Step:
    """The step that applies the clusters to batches of documents (see ``pipeline.stages.shard``): it
    removes every document that is in a cluster and not kept, matched by id, with its rule,
    Jaccard similarity and threshold; pass ``shard`` to hold only that shard's removals."""
    removal = removals(clusters, threshold, shard)

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
