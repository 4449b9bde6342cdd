"""A run's dedup against a dedup index (``pipeline.dedup.index``): the index's documents count as
kept already, so a document of the run that is an exact or verified near duplicate of one of them
is removed (:data:`RULE_IN_INDEX`), and so is the kept document of a cluster of the run that such
a document belongs to (its cluster stands for the indexed document, as it would in one run over
both). Within the run, the clusters are the stage's own (``pipeline.dedup.engine``).

Three steps, after the stage's finding, over the files it wrote (its words are the package
glossary's):

    find_index_candidates  per partition   the run's band keys against the index's partitions
                                           that meet it (``key % partitions`` on both sides), so
                                           no unit reads more than one partition of the side with
                                           more partitions; pairs routed to the run document's group
    match_in_index         per group       exact Jaccard of each pair on the shingle sets (the run's
                                           from its signature files, the index's from the index's,
                                           reading only the row groups that hold them), the best
                                           match of each document at or over the threshold
    finish_matches         once            the matches, and the kept documents of the clusters they
                                           meet, measured the same way: ``index_matches.parquet``

The index matches table (:data:`MATCHES_SCHEMA`, one row per document removed as in the index):

    id, doc           the run's document
    matched_id        the indexed document it duplicates, ``matched_doc`` its number in the index,
    matched_run       and the run it came from
    jaccard, exact    exact Jaccard similarity of the two shingle sets; same normalized text
    url               same normalized URL (an index and a run with URL dedup: a URL match is a
                      match whatever its Jaccard, as within a run)
    via_id            null for a direct match; for a cluster's kept document, the member of its
                      cluster that matched the index
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.clusters import STAGE, ShingleLookup, jaccard_of_pairs
from pipeline.dedup.engine import DOCS_PER_GROUP, RunUnits, _here, group_shards, groups_of_shards, units_for
from pipeline.dedup.index import IndexView, meeting_partitions
from pipeline.dedup.jobs import Counted
from pipeline.dedup.layout import FIRST, DedupWork
from pipeline.dedup.lsh import ALL_PAIRS_BUCKET, EXACT_BAND, set_arrays, shard_of
from pipeline.dedup.routed import route_pairs
from pipeline.io.storage import parquet_file, parquet_files, read_parquet_counted, read_table_counted, scan_parquet
from pipeline.io.writer import write_parquet

RULE_IN_INDEX = f"{STAGE}.in_index"
# Indexed documents one band key pairs a run document with, the smallest first: all of them up to
# the stage's ALL_PAIRS_BUCKET; a key past that (a template many kept pages share) its first ones.
INDEX_BUCKET = ALL_PAIRS_BUCKET

MATCHES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("doc", pa.int64(), nullable=False),
        pa.field("matched_id", pa.string(), nullable=False),
        pa.field("matched_doc", pa.int64(), nullable=False),
        pa.field("matched_run", pa.string(), nullable=False),
        pa.field("jaccard", pa.float64(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
        pa.field("url", pa.bool_(), nullable=False),
        pa.field("via_id", pa.string(), nullable=True),
    ]
)
_MATCHES = pl.DataFrame(
    schema=dict(
        zip(
            MATCHES_SCHEMA.names,
            [pl.String, pl.Int64, pl.String, pl.Int64, pl.String, pl.Float64, pl.Boolean, pl.Boolean, pl.String],
        )
    )
)


@dataclass(frozen=True)
class IndexCandidatesJob:
    """Partition ``unit`` of the side with more partitions (the index's when ``by_index``)."""

    work: DedupWork
    view: IndexView
    run_partitions: int
    unit: int
    by_index: bool
    group_of: tuple[int, ...]


def _band_rows(files: Sequence, modulus: int, unit: int) -> tuple[tuple[np.ndarray, ...], int]:
    """``(band, key, doc)`` of the band-key rows of ``files`` whose key is ``unit`` modulo
    ``modulus``, and the bytes read."""
    tables, read = [], 0
    for path in files:
        table, size = read_table_counted(path, ["band", "key", "doc"])
        tables.append(table)
        read += size
    band, key, doc = (
        np.concatenate([t.column(c).to_numpy() for t in tables]) if tables else np.zeros(0, dtype)
        for c, dtype in (("band", np.int16), ("key", np.uint64), ("doc", np.int64))
    )
    mine = key % np.uint64(modulus) == np.uint64(unit)
    return (band[mine], key[mine], doc[mine]), read


def _band_key(band: np.ndarray, key: np.ndarray) -> np.ndarray:
    """One 64-bit key per (band, key): the key plus the band times an odd constant (wrapping). Two
    rows of one band share it exactly when they share the key; rows of two bands that share it by
    chance (about 2^-64 a pair) are only a candidate that verification drops, never exact."""
    with np.errstate(over="ignore"):
        return key + band.astype(np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def band_pairs(run: tuple[np.ndarray, ...], index: tuple[np.ndarray, ...]) -> pl.DataFrame:
    """``doc, indexed, exact``: each distinct pair of a run row and an index row of equal band and
    key (the index's first :data:`INDEX_BUCKET` documents of a key), ``exact`` when both rows are
    the exact hash's. One sort of each side's keys and a search of the run's in the index's."""
    keys = _band_key(index[0], index[1])
    # Stable: the rows of one band come in document order (pipeline.dedup.lsh.partition_band_keys,
    # the files in block order), so each key's rows stay smallest document first.
    order = np.argsort(keys, kind="stable")
    keys, indexed, exact_index = keys[order], index[2][order], index[0][order] == EXACT_BAND
    first = np.ones(len(keys), bool)  # a key's row past its first INDEX_BUCKET equals the one that far back
    first[INDEX_BUCKET:] = keys[INDEX_BUCKET:] != keys[:-INDEX_BUCKET]
    keys, indexed, exact_index = keys[first], indexed[first], exact_index[first]
    wanted = _band_key(run[0], run[1])
    order = np.argsort(wanted)  # sorted needles: the search walks the index's keys in order
    wanted, docs, exact_run = wanted[order], run[2][order], run[0][order] == EXACT_BAND
    lo = np.searchsorted(keys, wanted, "left")
    hit = keys[np.minimum(lo, len(keys) - 1)] == wanted if len(keys) else np.zeros(len(wanted), bool)
    wanted, docs, exact_run, lo = wanted[hit], docs[hit], exact_run[hit], lo[hit]
    counts = np.searchsorted(keys, wanted, "right") - lo
    total = int(counts.sum())
    # Each run row's matches: positions lo .. lo + count - 1 of the sorted index rows.
    positions = np.repeat(lo, counts) + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    pairs = pl.DataFrame(
        {
            "doc": np.repeat(docs, counts),
            "indexed": indexed[positions],
            "exact": np.repeat(exact_run, counts) & exact_index[positions],
        },
        schema={"doc": pl.Int64, "indexed": pl.Int64, "exact": pl.Boolean},
    )
    return pairs.group_by("doc", "indexed").agg(pl.col("exact").any())


def find_index_candidates(job: IndexCandidatesJob) -> Counted:
    """The pairs (run document, indexed document) that share a band key or the exact hash in the
    unit's partition, routed to the group of the run document (``doc_a``)."""
    run_n, index_n = job.run_partitions, job.view.partitions
    if job.by_index:
        run_parts, index_parts, modulus = meeting_partitions(index_n, run_n, job.unit), [job.unit], index_n
    else:
        run_parts, index_parts, modulus = [job.unit], meeting_partitions(run_n, index_n, job.unit), run_n
    run_files = [f for p in run_parts for f in parquet_files(job.work.band_partition(p))]
    run, run_read = _band_rows(run_files, modulus, job.unit)
    index, index_read = _band_rows([f for q in index_parts for f in job.view.band_files[q]], modulus, job.unit)
    pairs = band_pairs(run, index)
    route_pairs(
        pairs.select(doc_a="doc", doc_b="indexed", exact="exact"),
        job.work.against_index(),
        f"part-{job.unit:04d}",
        job.group_of,
    )
    return Counted(pairs.height, run_read + index_read)


def _jaccard(run: ShingleLookup, index: ShingleLookup, docs: np.ndarray, indexed: np.ndarray) -> np.ndarray:
    """Exact Jaccard of each pair (run document, indexed document) on their shingle sets."""
    left, right = run.rows(docs, ["shingle_set"]), index.rows(indexed, ["shingle_set"])
    left_rows = np.searchsorted(left.column("doc").to_numpy(), docs)
    right_rows = np.searchsorted(right.column("doc").to_numpy(), indexed)
    values, offsets = set_arrays(left.column("shingle_set"))
    return jaccard_of_pairs(values, offsets, left_rows, right_rows, set_arrays(right.column("shingle_set")))


def _same_url(run: ShingleLookup, index: ShingleLookup, docs: np.ndarray, indexed: np.ndarray) -> np.ndarray:
    """Whether each pair (run document, indexed document) has one normalized URL (both hashes set
    and equal; the signature files' ``url_hash``)."""
    return (_column(run, docs, "url_hash") == _column(index, indexed, "url_hash")).fill_null(False).to_numpy()


def _column(lookup: ShingleLookup, docs: np.ndarray, column: str) -> pl.Series:
    """``column`` of each of ``docs`` (in their order, repeats allowed; nulls kept)."""
    table = lookup.rows(docs, [column])
    at = np.searchsorted(table.column("doc").to_numpy(), docs)
    return pl.Series(column, table.column(column).take(pa.array(at)))


@dataclass(frozen=True)
class IndexVerifyJob:
    work: DedupWork
    view: IndexView
    group: int
    shards: tuple[int, ...]
    threshold: float


@dataclass(frozen=True)
class Matched:
    pairs: int
    matched: int
    bytes_read: int


def match_in_index(job: IndexVerifyJob) -> Matched:
    """The group's pairs measured; each document's best match at or over the threshold (exact
    first, then the most similar, then the smallest indexed number), written with both ids."""
    folders = job.work.against_index()
    pairs, read = read_parquet_counted(parquet_files(folders.pairs(job.group)))
    if pairs is None:
        return Matched(0, 0, read)
    pairs = pairs.group_by("doc_a", "doc_b").agg(pl.col("exact").any()).sort("doc_a", "doc_b")
    run = ShingleLookup([job.work.signatures(s) for s in job.shards])
    index = ShingleLookup(job.view.signatures_of(pairs["doc_b"].to_numpy()))
    docs, indexed = pairs["doc_a"].to_numpy(), pairs["doc_b"].to_numpy()
    jaccard = np.ones(pairs.height)
    near = ~pairs["exact"].to_numpy()
    if near.any():
        jaccard[near] = _jaccard(run, index, docs[near], indexed[near])
    url = _same_url(run, index, docs, indexed) if job.view.url else np.zeros(pairs.height, bool)
    best = (
        pairs.with_columns(jaccard=pl.Series(jaccard), url=pl.Series(url))
        .filter(pl.col("exact") | pl.col("url") | (pl.col("jaccard") >= job.threshold))
        .sort(["doc_a", "exact", "jaccard", "doc_b"], descending=[False, True, True, False])
        .unique("doc_a", keep="first", maintain_order=True)
    )
    docs, indexed = best["doc_a"].to_numpy(), best["doc_b"].to_numpy()
    matches = pl.DataFrame(
        {
            "id": _column(run, docs, "id"),
            "doc": docs,
            "matched_id": _column(index, indexed, "id"),
            "matched_doc": indexed,
            "matched_run": pl.Series(job.view.run_names(indexed), dtype=pl.String),
            "jaccard": best["jaccard"],
            "exact": best["exact"],
            "url": best["url"],
            "via_id": pl.Series([None] * best.height, dtype=pl.String),
        }
    )
    write_parquet(matches.to_arrow().cast(MATCHES_SCHEMA), folders.measured(FIRST, job.group))
    return Matched(pairs.height, best.height, read + run.bytes_read + index.bytes_read)


@dataclass(frozen=True)
class Finished:
    """Documents removed as in the index: matched directly, and kept documents of their clusters."""

    direct: int
    through: int
    bytes_read: int


@dataclass(frozen=True)
class IndexFinishJob:
    work: DedupWork
    view: IndexView
    groups: int
    signatures: tuple[Path, ...]  # the run's signature files, by shard
    clusters: Path
    out_path: Path


def _cluster_kept(direct: pl.DataFrame, clusters: Path) -> pl.DataFrame:
    """The kept document of each cluster that a direct match belongs to (unless it matched
    itself), with the cluster's best match: ``id, doc, matched_*, via_id``."""
    members = scan_parquet([clusters]).select("id", "doc", "cluster", "kept")
    hit = (
        members.join(direct.lazy().drop("id", "via_id"), on="doc")
        .sort(["cluster", "exact", "jaccard", "matched_doc"], descending=[False, True, True, False])
        .unique("cluster", keep="first", maintain_order=True)
        .select("cluster", "matched_id", "matched_doc", "matched_run", pl.col("id").alias("via_id"))
    )
    kept = members.filter(pl.col("kept")).join(hit, on="cluster").select(pl.exclude("cluster", "kept"))
    return kept.filter(~pl.col("doc").is_in(direct["doc"].implode())).collect().sort("doc")


def finish_matches(job: IndexFinishJob) -> Finished:
    """The index matches table at ``out_path`` (the module docstring's), sorted by ``doc``."""
    measured = [p for g in range(job.groups) if (p := job.work.against_index().measured(FIRST, g)).exists()]
    direct, read = read_parquet_counted(measured)
    direct = _MATCHES if direct is None else direct
    through = _cluster_kept(direct, job.clusters) if direct.height and job.clusters.exists() else _MATCHES
    if through.height:
        docs, indexed = through["doc"].to_numpy(), through["matched_doc"].to_numpy()
        run = ShingleLookup([job.signatures[s] for s in np.unique(shard_of(docs))])
        index = ShingleLookup(job.view.signatures_of(indexed))
        exact = (_column(run, docs, "exact_hash") == _column(index, indexed, "exact_hash")).to_numpy()
        jaccard = np.ones(len(docs))
        if (~exact).any() and "shingle_set" in run.columns:
            jaccard[~exact] = _jaccard(run, index, docs[~exact], indexed[~exact])
        url = _same_url(run, index, docs, indexed) if job.view.url else np.zeros(len(docs), bool)
        through = through.with_columns(jaccard=pl.Series(jaccard), exact=pl.Series(exact), url=pl.Series(url))
        through = through.select(_MATCHES.columns)
        read += run.bytes_read + index.bytes_read
    else:
        through = _MATCHES
    table = pl.concat([direct.select(_MATCHES.columns), through.cast(_MATCHES.schema)]).sort("doc")
    write_parquet(table.to_arrow().cast(MATCHES_SCHEMA), job.out_path)
    return Finished(direct.height, through.height, read)


def in_index_removals(matches: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """``id, rule, value, threshold`` of the documents removed as in the index (as
    ``pipeline.dedup.clusters.removals`` gives the run's own)."""
    return matches.select(
        pl.col("id").cast(pl.String),
        rule=pl.lit(RULE_IN_INDEX),
        value=pl.col("jaccard").cast(pl.Float64),
        threshold=pl.when(pl.col("exact"))
        .then(pl.lit(1.0))
        .when(pl.col("url") & (pl.col("jaccard") < threshold))  # a URL match has no threshold
        .then(pl.lit(None, pl.Float64))
        .otherwise(pl.lit(float(threshold))),
    )


def match_index(
    work: DedupWork,
    view: IndexView,
    shards: int,
    run_partitions: int,
    threshold: float,
    clusters: Path,
    out_path: Path,
    run_units: RunUnits = _here,
    most_units: int = 1,
) -> dict:
    """The run's documents matched in the index (the run's finding done: its signature files, band
    keys in ``run_partitions`` partitions and clusters table in ``work``), written to
    ``out_path``; returns the counts and the bytes each step read."""
    work = DedupWork(work)
    docs = [parquet_file(work.signatures(s)).metadata.num_rows for s in range(shards)]
    group_of = tuple(group_shards(docs, units_for(sum(docs), DOCS_PER_GROUP, max(run_partitions, most_units))))
    by_index = view.partitions >= run_partitions
    units = view.partitions if by_index else run_partitions
    found = run_units(
        "dedup index candidates",
        find_index_candidates,
        [IndexCandidatesJob(work, view, run_partitions, u, by_index, group_of) for u in range(units)],
    )
    groups = groups_of_shards(group_of)
    jobs = [IndexVerifyJob(work, view, g, tuple(s), threshold) for g, s in enumerate(groups)]
    verified = run_units("dedup index verify", match_in_index, jobs)
    signatures = tuple(work.signatures(s) for s in range(shards))
    (finished,) = run_units(
        None, finish_matches, [IndexFinishJob(work, view, len(groups), signatures, clusters, out_path)]
    )
    return {
        "path": str(view.root),
        "runs": len(view.runs),
        "indexed_docs": view.docs,
        "partitions": view.partitions,
        "candidate_pairs": sum(c.count for c in found),
        "matched": finished.direct,
        "through_clusters": finished.through,
        "removed": finished.direct + finished.through,
        "bytes_read": {
            "candidates": sum(c.bytes_read for c in found),
            "verify": sum(v.bytes_read for v in verified),
            "matches": finished.bytes_read,
        },
    }
