"""From candidate pairs to duplicate clusters: verification, connected components, the keep rule.

    verify_pairs(candidate_pairs(partition), ShingleLookup(signature files), threshold)
        -> edges: pairs whose exact Jaccard similarity of shingle sets reaches the threshold
    connected_components(all edges)            -> doc -> component (its smallest document)
    choose_kept(components + attributes, rule) -> one kept document per component
    cluster_table(all edges, lookup, rule)     -> the clusters table (the three steps above)
    dedup_step(clusters, threshold, shard)     -> a pipeline.stages.shard step that drops the duplicates
                                                  of a shard and records each one's rule and value

Verification computes the Jaccard similarity of the two documents' shingle sets exactly (sorted
distinct 32-bit shingle hashes kept in the signature files), not the MinHash estimate, so LSH false
positives are dropped. The sets are of 32-bit hashes: two documents of 1,000 shingles each have
about one chance in 2,000 that two different shingles share a hash, which then moves their
similarity by about 0.001. Pairs found through the exact hash have similarity 1.0 by construction
and are not looked up.

Verification reads, for each step of pairs, only the Parquet row groups (1,024 documents) of the
signature files that hold the pairs' documents. A partition's pairs reach documents of every
shard, so with many duplicates a partition's verification reads most of every signature file's
shingle sets: the I/O grows with partitions x corpus. Partitions only need to bound the band keys
(about 150 bytes per document), so a few (4 to 16) are enough for millions of documents; past
that, a join by shard (pairs routed to the shard of one document, sets attached, routed to the
shard of the other) would read each signature file twice in all.

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
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.lsh import (
    SHARD_BITS,
    SHARD_KEY,
    candidate_pairs,
    partition_band_keys,
    read_params,
    row_of,
    shard_of,
    signatures_for_shard,
)
from pipeline.dedup.minhash import MinHashParams
from pipeline.io.storage import as_path, parquet_file, read_parquet
from pipeline.io.writer import write_parquet
from pipeline.stages.shard import Step, StepResult, removed_frame

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

# Pairs verified per step, and shingle values compared per step: these bound the temporaries.
PAIRS_PER_STEP = 50_000
VALUES_PER_STEP = 1 << 22


class ShingleLookup:
    """Rows of the signature files by document number, reading only the Parquet row groups that
    hold the requested documents (signature files are written in row groups of 1,024 documents).
    It holds file names and row-group sizes only, so it is cheap to make in every task."""

    def __init__(self, signature_paths: Sequence[Path]):
        self._files: dict[int, tuple[Path, np.ndarray]] = {}
        self.params: dict | None = None
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
            groups = np.searchsorted(group_starts, rows, side="right") - 1
            needed = np.unique(groups)
            table = parquet_file(path).read_row_groups(needed.tolist(), columns=columns)
            read_sizes = group_starts[needed + 1] - group_starts[needed]
            read_starts = np.concatenate([[0], np.cumsum(read_sizes)])[:-1]
            positions = read_starts[np.searchsorted(needed, groups)] + rows - group_starts[groups]
            pieces.append(table.take(pa.array(positions)))
        if not pieces:
            schema = parquet_file(next(iter(self._files.values()))[0]).schema_arrow if self._files else None
            return (
                schema.empty_table().select(columns)
                if schema is not None
                else pa.table({"doc": pa.array([], pa.int64())})
            )
        return pa.concat_tables(pieces)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` for every (s, n), vectorized."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)


def jaccard_of_pairs(values: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Exact Jaccard similarity of sets ``left[i]`` and ``right[i]`` (indices into ``offsets``;
    set ``k`` is ``values[offsets[k]:offsets[k + 1]]``, distinct and sorted uint32). Vectorized:
    every value is tagged with its pair's number in the high bits, which keeps the left sets, all
    pairs in a row, sorted, and the right ones too; one binary search of the left tags in the
    right ones counts the shared values. Two empty sets have similarity 0."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    counts = np.diff(offsets)
    size_left, size_right = counts[left], counts[right]
    result = np.zeros(len(left), dtype=np.float64)
    work = np.cumsum(size_left + size_right)
    begin = 0
    while begin < len(left):
        base = work[begin - 1] if begin else 0
        end = max(int(np.searchsorted(work, base + VALUES_PER_STEP, side="right")), begin + 1)
        lo, ro = left[begin:end], right[begin:end]
        nl, nr = size_left[begin:end], size_right[begin:end]
        pair = np.arange(end - begin, dtype=np.uint64)
        pair_of_left = np.repeat(pair, nl)
        tagged_left = (pair_of_left << np.uint64(32)) | values[_ranges(offsets[lo], nl)].astype(np.uint64)
        tagged_right = (np.repeat(pair, nr) << np.uint64(32)) | values[_ranges(offsets[ro], nr)].astype(np.uint64)
        shared = np.zeros(end - begin, dtype=np.int64)
        if len(tagged_left) and len(tagged_right):
            found = np.minimum(np.searchsorted(tagged_right, tagged_left), len(tagged_right) - 1)
            hit = tagged_right[found] == tagged_left
            shared = np.bincount(pair_of_left[hit].astype(np.int64), minlength=end - begin)
        union = nl + nr - shared
        result[begin:end] = np.where(union > 0, shared / np.maximum(union, 1), 0.0)
        begin = end
    return result


def _shingle_sets(lookup: ShingleLookup, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct docs, set values, set offsets) for ``docs``."""
    table = lookup.rows(docs, ["shingle_set"])
    column = table.column("shingle_set").combine_chunks()
    if isinstance(column, pa.ChunkedArray):
        column = column.chunk(0) if column.num_chunks else pa.array([], pa.large_list(pa.uint32()))
    offsets = column.offsets.to_numpy().astype(np.int64)
    values = column.values.to_numpy()
    base = offsets[0]
    return table.column("doc").to_numpy(), values[base : offsets[-1]], offsets - base


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


def cluster_table(edges: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule = "first") -> pl.DataFrame:
    """The clusters table (columns in the module docstring) from all verified edges."""
    components = connected_components(edges)
    if components.height == 0:
        return pl.from_arrow(CLUSTERS_SCHEMA.empty_table())
    wanted = ["id", "chars", "exact_hash"] + (["score"] if rule == "quality" else [])
    if rule == "quality" and "score" not in lookup.columns:
        raise ValueError("keep rule 'quality' needs a score: set the dedup score_column to a column of the documents")
    attributes = pl.from_arrow(lookup.rows(components["doc"].to_numpy(), wanted))
    members = choose_kept(components.join(attributes, on="doc", how="left"), rule)
    kept = members.filter(pl.col("kept")).select(
        pl.col("doc").alias("kept_doc"), pl.col("id").alias("kept_id"), pl.col("exact_hash").alias("kept_hash")
    )
    members = members.join(kept, on="kept_doc", how="left").with_columns(
        exact=pl.col("exact_hash") == pl.col("kept_hash"),
        cluster_size=pl.len().over("component"),
    )
    # Similarity with the kept document: 1.0 for itself and exact copies, else computed.
    similarity = np.ones(members.height, dtype=np.float64)
    to_measure = (~members["kept"] & ~members["exact"]).to_numpy()
    if to_measure.any():
        if "shingle_set" not in lookup.columns:
            raise ValueError("near-duplicate clusters need shingle sets: the signature files were made with near=False")
        docs = members["doc"].to_numpy()[to_measure]
        kept_docs = members["kept_doc"].to_numpy()[to_measure]
        measured = np.empty(len(docs), dtype=np.float64)
        for start in range(0, len(docs), PAIRS_PER_STEP):
            a, b = docs[start : start + PAIRS_PER_STEP], kept_docs[start : start + PAIRS_PER_STEP]
            found, values, offsets = _shingle_sets(lookup, np.concatenate([a, b]))
            measured[start : start + len(a)] = jaccard_of_pairs(
                values, offsets, np.searchsorted(found, a), np.searchsorted(found, b)
            )
        similarity[to_measure] = measured
    members = members.with_columns(jaccard=pl.Series(similarity))
    table = members.select(
        pl.col("id").cast(pl.String),
        pl.col("doc").cast(pl.Int64),
        pl.col("component").cast(pl.Int64).alias("cluster"),
        pl.col("cluster_size").cast(pl.Int64),
        "kept",
        pl.col("kept_id").cast(pl.String),
        pl.col("kept_doc").cast(pl.Int64),
        "jaccard",
        "exact",
    ).sort("doc")
    return table


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


def verify_partition(
    partition_path: Path | Iterable[Path], lookup: ShingleLookup, threshold: float, out_path: Path
) -> dict:
    """One partition's task: candidate pairs, verified, written as an edges file
    (``EDGES_SCHEMA``). Returns counts: candidate pairs, verified edges, false positives."""
    pairs = candidate_pairs(partition_path)
    edges = verify_pairs(pairs, lookup, threshold)
    write_parquet(edges.to_arrow().cast(EDGES_SCHEMA), out_path)
    candidates = pairs.select("doc_a", "doc_b").unique().height
    return {"candidate_pairs": candidates, "edges": edges.height, "false_positives": candidates - edges.height}


def clusters_from_edges(edge_paths: Sequence[Path], lookup: ShingleLookup, rule: KeepRule, out_path: Path) -> dict:
    """The corpus-wide task: all edges, components, keep rule; writes the clusters table."""
    frames = [read_parquet(p) for p in edge_paths]
    edges = pl.concat(frames, how="vertical") if frames else _empty_edges()
    clusters = cluster_table(edges, lookup, rule)
    write_parquet(clusters.to_arrow().cast(CLUSTERS_SCHEMA), out_path)
    removed = clusters.filter(~pl.col("kept"))
    return {
        "clusters": int(clusters["cluster"].n_unique()) if clusters.height else 0,
        "docs_in_clusters": clusters.height,
        "removed": removed.height,
        "removed_exact": int(removed["exact"].sum()) if removed.height else 0,
        "removed_near": int((~removed["exact"]).sum()) if removed.height else 0,
    }


def deduplicate_shards(
    doc_paths: Sequence[Path],
    work_dir: Path,
    params: MinHashParams = MinHashParams(),
    partitions: int = 8,
    rule: KeepRule = "first",
) -> pl.DataFrame:
    """All steps in order, in this process: the reference for a flow, which runs the same calls
    as one task per shard or partition. Shard numbers follow ``doc_paths``' order. Layout::

        <work_dir>/signatures/shard-<i:05d>.parquet     signatures_for_shard
        <work_dir>/bands/part-<p:04d>/shard-<i:05d>.parquet   partition_band_keys
        <work_dir>/edges/part-<p:04d>.parquet           verify_partition
        <work_dir>/clusters.parquet                     clusters_from_edges
    """
    work_dir = as_path(work_dir)
    signature_paths = []
    for shard, path in enumerate(doc_paths):
        out = work_dir / "signatures" / f"shard-{shard:05d}.parquet"
        signatures_for_shard(path, out, params, shard=shard)
        signature_paths.append(out)
    for path in signature_paths:
        partition_band_keys([path], work_dir / "bands", partitions)
    lookup = ShingleLookup(signature_paths)
    edge_paths = []
    for p in range(partitions):
        out = work_dir / "edges" / f"part-{p:04d}.parquet"
        verify_partition(work_dir / "bands" / f"part-{p:04d}", lookup, params.threshold, out)
        edge_paths.append(out)
    clusters_from_edges(edge_paths, lookup, rule, work_dir / "clusters.parquet")
    return read_parquet(work_dir / "clusters.parquet")
