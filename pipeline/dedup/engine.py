"""The finding of duplicates: from document shards to the clusters table, step after step, each
step a list of units (``pipeline.dedup.jobs``) handed to ``run_units``, and each step sized by its
work. :func:`find_duplicates` is the whole of it; the dedup stage (``pipeline.stages.dedup``)
calls it with the Prefect flow's runner, :func:`deduplicate_shards` in this process.

Sizes (the words are the package glossary's): band-key partitions by band rows
(:func:`partitions_for`); groups of consecutive shards by documents (:func:`group_shards`); the
component rounds' buckets and units, and the homes, by verified edges (:func:`buckets_for`,
:func:`units_for`). Each is at most dedup.partitions, except the partitions past
:data:`BAND_ROWS_PER_PARTITION`. How these were chosen is measured in docs/scale.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.dedup.clusters import KeepRule
from pipeline.dedup.components import MAX_ROUNDS, BucketCounts, combined_fingerprint
from pipeline.dedup.jobs import (
    AssembleJob,
    CandidatesJob,
    HopJob,
    KeepJob,
    LabelJob,
    MembersJob,
    SeedJob,
    SignJob,
    StarJob,
    assemble,
    find_candidates,
    home_members,
    keep_in_home,
    label_components,
    large_stars,
    measure_first,
    measure_second,
    seed_components,
    sign_block,
    small_stars,
)
from pipeline.dedup.layout import SIMILARITY, VERIFY, DedupWork
from pipeline.dedup.minhash import MinHashParams
from pipeline.io.storage import as_path, read_parquet

# ``run_units(label, fn, jobs)``: ``fn(job)`` for each of ``jobs``, results in order
# (pipeline.stages.units.RunUnits; label None: no progress shown).
RunUnits = Callable[[str | None, Callable[[Any], Any], Sequence], list]

# Documents per group of consecutive shards, the unit of the steps that route by document: each
# such step writes a file per pair of groups, so fewer, larger groups mean fewer files.
DOCS_PER_GROUP = 50_000
# Verified edges per unit of the component rounds.
EDGES_PER_ROUND_UNIT = 2_000_000
# Verified edges whose components one home takes (docs/scale.md measures the memory per home).
EDGES_PER_HOME = 50_000
# Verified edges per bucket of the component rounds: what one call of a half-round holds.
EDGES_PER_BUCKET = 50_000
# Band-key rows per partition while fewer than dedup.partitions suffice, so a small corpus pays
# no fixed cost per file and task for tiny partitions (docs/scale.md).
BAND_ROWS_PER_UNIT = 1_000_000
# Band-key rows per partition at most, past which the stage takes more than dedup.partitions: the
# candidates unit's memory grows with its rows (docs/scale.md).
BAND_ROWS_PER_PARTITION = 6_500_000
# Shards per block of the signatures step, as the stages' blocks (pipeline.stages.units).
SHARDS_PER_BLOCK = 16


def _here(label: str | None, fn: Callable[[Any], Any], jobs: Sequence) -> list:
    return [fn(job) for job in jobs]


def units_for(items: int, per_unit: int, most: int) -> int:
    """How many units a step that works across shards runs as: one per ``per_unit`` items (edges,
    band rows), at least 1 and at most ``most`` (dedup.partitions). A unit works through its
    share one bucket or home at a time, so fewer units only save each task's fixed cost."""
    return max(1, min(most, -(-items // per_unit)))


def fits_one_unit(documents: int, partitions: int, shards: int) -> bool:
    """Whether every step of :func:`find_duplicates` over ``documents`` in ``shards`` shards and
    ``partitions`` partitions would run as one unit (one block of shards, one partition, one group
    of shards): then the steps may as well run as one unit, sparing each its fixed cost."""
    return partitions == 1 and documents <= DOCS_PER_GROUP and shards <= SHARDS_PER_BLOCK


def partitions_for(documents: int, params: MinHashParams, most: int) -> int:
    """Band-key partitions for ``documents``: one per :data:`BAND_ROWS_PER_UNIT` rows (a row per
    band, one for the exact hash and one for the URL hash per document), at least 1 and at most ``most``
    (dedup.partitions); more than ``most`` when a partition would hold more than
    :data:`BAND_ROWS_PER_PARTITION` rows. The clusters do not depend on the partitions."""
    rows = documents * ((params.lsh[0] if params.near else 0) + 1 + params.url)
    return max(units_for(rows, BAND_ROWS_PER_UNIT, most), -(-rows // BAND_ROWS_PER_PARTITION))


def buckets_for(edges: int, shards: int) -> int:
    """Buckets of the component rounds for ``edges`` verified edges: one per
    :data:`EDGES_PER_BUCKET`, at least 1 and at most one per shard."""
    return max(1, min(shards, -(-edges // EDGES_PER_BUCKET)))


def deal_buckets(buckets: int, units: int) -> list[list[int]]:
    """Buckets ``0..buckets-1`` dealt into ``min(units, buckets)`` units (bucket b to unit
    b % units): each unit's buckets, which it takes one at a time."""
    return [list(range(u, buckets, units)) for u in range(min(units, buckets))]


def group_shards(docs: Sequence[int], count: int) -> list[int]:
    """The group of each shard (``docs[s]`` documents in shard s): ``count`` runs of consecutive
    shards of about equal documents (at most one group per shard, at least 1), numbered 0, 1, ...
    in shard order. A shard goes to the group where its first document falls when the documents
    are cut into ``count`` equal runs; a group that no shard starts in is dropped."""
    total = int(sum(docs))
    count = max(1, min(len(docs), count))
    before = np.concatenate([[0], np.cumsum(np.asarray(docs, dtype=np.int64))[:-1]]) if len(docs) else np.zeros(0)
    raw = np.minimum(before * count // max(total, 1), count - 1).astype(np.int64)
    return np.unique(raw, return_inverse=True)[1].astype(np.int64).tolist()


def groups_of_shards(group_of: Sequence[int]) -> list[list[int]]:
    """The shards of each group, from ``group_of`` (:func:`group_shards`)."""
    groups: list[list[int]] = [[] for _ in range(max(group_of, default=-1) + 1)]
    for shard, group in enumerate(group_of):
        groups[group].append(shard)
    return groups


def shard_blocks(shards: int, per_block: int) -> list[range]:
    """``0..shards-1`` in consecutive blocks of near-equal size, at most ``per_block`` each."""
    units = max(1, min(-(-shards // per_block), shards))
    edges = [shards * u // units for u in range(units + 1)]
    return [range(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]


@dataclass(frozen=True)
class Components:
    """What the component rounds did: the rounds run, the documents labelled, the bytes read."""

    rounds: int
    docs: int
    bytes_read: int


def find_components(
    work: DedupWork, group_of: Sequence[int], run_units: RunUnits = _here, buckets: int = 1, units: int = 1
) -> Components:
    """Connected components of the verified edges, in rounds (``pipeline.dedup.components``):
    the seed per group (``group_of``: each shard's), the rounds over ``buckets`` buckets dealt to
    ``units`` units, until a round changes nothing, each label sent to the group of its document.
    """
    group_of = tuple(group_of)
    dealt = deal_buckets(buckets, units)
    units = len(dealt)
    seeds = [SeedJob(work, g, buckets, units) for g in range(max(group_of, default=0) + 1)]
    done = sum(run_units(None, seed_components, seeds), BucketCounts())
    previous = None
    for round_ in range(MAX_ROUNDS):
        jobs = [StarJob(work, round_, u, tuple(owned), buckets, units) for u, owned in enumerate(dealt)]
        stars = run_units(None, large_stars, jobs)
        done = sum(stars, done)
        if combined_fingerprint(stars) == previous:
            break
        previous = combined_fingerprint(stars)
        done = sum(run_units(None, small_stars, jobs), done)
    else:
        raise RuntimeError(f"connected components did not settle in {MAX_ROUNDS} rounds")
    labelled = sum(run_units(None, label_components, [LabelJob(job, group_of) for job in jobs]), BucketCounts())
    return Components(round_ + 1, labelled.docs, done.bytes_read + labelled.bytes_read)


def _read(results: Sequence) -> int:
    return sum(r.bytes_read for r in results)


def find_duplicates(
    inputs: Sequence[Path],
    work: Path,
    params: MinHashParams,
    partitions: int,
    rule: KeepRule,
    out_path: Path,
    run_units: RunUnits = _here,
    most_units: int | None = None,
) -> dict:
    """Every step from document shards to the clusters table at ``out_path`` (shard numbers follow
    ``inputs``' order), its work in ``work`` (:class:`DedupWork`), with ``partitions`` band-key
    partitions; the other steps run as units sized by their work, at most ``partitions`` or
    ``most_units`` (dedup.partitions), whichever is larger. Returns the finding: counts of
    documents, shingles, candidate pairs, edges, false positives, clusters and removals, and the
    bytes read per step."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    most = max(partitions, most_units or 0)
    work = DedupWork(work)
    spans = shard_blocks(len(inputs), SHARDS_PER_BLOCK)
    blocks = [SignJob(work, params, partitions, span.start, tuple(inputs[s] for s in span)) for span in spans]
    signed = [one for block in run_units("dedup signatures", sign_block, blocks) for one in block]
    docs = [one.docs for one in signed]
    group_of = tuple(group_shards(docs, units_for(sum(docs), DOCS_PER_GROUP, most)))
    groups = [(g, tuple(shards)) for g, shards in enumerate(groups_of_shards(group_of))]
    partition_jobs = [CandidatesJob(work, p, group_of) for p in range(partitions)]
    candidates = run_units("dedup candidates", find_candidates, partition_jobs)

    def hops(name: str, label: str | None, threshold: float | None) -> tuple[list, list]:
        jobs = [HopJob(work, name, g, shards, threshold, group_of) for g, shards in groups]
        return run_units(label, measure_first, jobs), run_units(None, measure_second, jobs)

    verified = hops(VERIFY, "dedup verify", params.threshold)
    edges = sum(hop.kept for hop in verified[0] + verified[1])
    # A component of k documents has at least k - 1 edges, so sizing the homes by the edges, known
    # before the components are, gives a home at most twice as many documents as edges.
    homes = units_for(edges, EDGES_PER_HOME, most)
    rounds = units_for(edges, EDGES_PER_ROUND_UNIT, most)
    components = find_components(work, group_of, run_units, buckets_for(edges, len(inputs)), rounds)
    homed = run_units(None, home_members, [MembersJob(work, g, shards, homes, rule) for g, shards in groups])
    kept = run_units(None, keep_in_home, [KeepJob(work, home, rule, group_of) for home in range(homes)])
    similar = hops(SIMILARITY, None, None)
    (assembled,) = run_units(None, assemble, [AssembleJob(work, out_path, len(groups))])
    pairs = sum(hop.pairs for hop in verified[0])
    return {
        "docs": sum(docs),
        "docs_without_words": sum(one.docs_without_words for one in signed),
        "shingles": sum(one.shingles for one in signed),
        "candidate_pairs": pairs,
        "edges": edges,
        "false_positives": pairs - edges,
        "clusters": assembled.clusters,
        "docs_in_clusters": assembled.docs_in_clusters,
        "removed": assembled.removed,
        "removed_exact": assembled.removed_exact,
        "removed_near": assembled.removed_near,
        **({"removed_url": assembled.removed_url} if params.url else {}),
        "bands_rows": list(params.lsh) if params.near else None,
        "component_rounds": components.rounds,
        "bytes_read": {
            "signatures": _read(signed),
            "candidates": _read(candidates),
            "verify": _read(verified[0]) + _read(verified[1]),
            "components": components.bytes_read,
            "clusters": _read(homed) + _read(kept),
            "similarity": _read(similar[0]) + _read(similar[1]),
            "assemble": assembled.bytes_read,
        },
    }


def deduplicate_shards(
    doc_paths: Sequence[Path],
    work_dir: Path,
    params: MinHashParams = MinHashParams(),
    partitions: int = 8,
    rule: KeepRule = "first",
) -> pl.DataFrame:
    """:func:`find_duplicates` in this process, into ``work_dir`` (the clusters table at
    ``work_dir/clusters.parquet``), and the clusters table it wrote."""
    out = as_path(work_dir) / "clusters.parquet"
    find_duplicates(doc_paths, work_dir, params, partitions, rule, out)
    return read_parquet(out)
