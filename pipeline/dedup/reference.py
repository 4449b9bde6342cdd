"""The finding of duplicates in one process, in memory: the reference the tests compare the
engine (``pipeline.dedup.engine``) against, pair for pair and table for table. No stage runs it;
it holds a whole corpus's pairs, edges and components, which the engine never does.

    verify_pairs(candidate pairs, ShingleLookup(signature files), threshold) -> edges
        (the routed verification pass, ``pipeline.dedup.routed``, must give the same)
    connected_components(edges)         -> doc -> component, by scipy (the rounds of
                                           ``pipeline.dedup.components`` must give the same)
    cluster_table(edges, lookup, rule)  -> the clusters table (the engine's must be the same)
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as scipy_components

from pipeline.dedup.clusters import (
    MEMBERS_SCHEMA,
    KeepRule,
    ShingleLookup,
    finish_clusters,
    jaccard_of_pairs,
    members_of_labelled,
    similarity_pairs,
    with_attributes,
)
from pipeline.dedup.lsh import set_arrays
from pipeline.io.storage import empty_table

EDGES_SCHEMA = pa.schema(
    [
        pa.field("doc_a", pa.int64(), nullable=False),
        pa.field("doc_b", pa.int64(), nullable=False),
        pa.field("jaccard", pa.float64(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
    ]
)

# Pairs verified per step: this bounds the rows read and the temporaries.
PAIRS_PER_STEP = 50_000


def _shingle_sets(lookup: ShingleLookup, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct docs, set values, set offsets) for ``docs``."""
    table = lookup.rows(docs, ["shingle_set"])
    values, offsets = set_arrays(table.column("shingle_set"))
    return table.column("doc").to_numpy(), values, offsets


def _empty_edges() -> pl.DataFrame:
    return pl.from_arrow(empty_table(EDGES_SCHEMA))


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


def connected_components(edges: pl.DataFrame) -> pl.DataFrame:
    """``doc, component`` for every document of an edge, the component named by its smallest
    document number (so the numbering does not depend on the edges' order), by
    ``scipy.sparse.csgraph.connected_components``: the reference for the rounds of
    ``pipeline.dedup.components``."""
    if edges.height == 0:
        return pl.DataFrame(schema={"doc": pl.Int64, "component": pl.Int64})
    a_docs = edges["doc_a"].to_numpy()
    b_docs = edges["doc_b"].to_numpy()
    docs, inverse = np.unique(np.concatenate([a_docs, b_docs]), return_inverse=True)
    a, b = inverse[: len(a_docs)], inverse[len(a_docs) :]
    graph = coo_matrix((np.ones(len(a), np.int32), (a, b)), shape=(len(docs), len(docs))).tocsr()
    _, labels = scipy_components(graph, directed=False)
    # docs are sorted, so a label's first occurrence is its smallest document.
    _, first = np.unique(labels, return_index=True)
    smallest = np.empty(labels.max() + 1, dtype=np.int64)
    smallest[labels[first]] = docs[first]
    return pl.DataFrame({"doc": docs, "component": smallest[labels]})


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


def cluster_table(edges: pl.DataFrame, lookup: ShingleLookup, rule: KeepRule = "first") -> pl.DataFrame:
    """The clusters table (``pipeline.dedup.clusters``) from all verified edges, in this process:
    the components, the keep rule over their members, the similarities measured by
    :func:`measure_pairs`, then :func:`finish_clusters`. The engine's table must equal it."""
    components = connected_components(edges)
    if components.height == 0:
        members = pl.DataFrame(schema=MEMBERS_SCHEMA)
    else:
        members = members_of_labelled(with_attributes(components, lookup, rule), rule)
    return finish_clusters(members, measure_pairs(similarity_pairs(members), lookup))
