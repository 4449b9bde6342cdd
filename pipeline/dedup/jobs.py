"""The units of the finding of duplicates, kind by kind: each takes a typed job (a frozen
dataclass, which pickles, for process and Dask runners) and returns a typed result.
:func:`pipeline.dedup.engine.find_duplicates` builds the jobs and runs them in order; every path
is :class:`pipeline.dedup.layout.DedupWork`'s. The words (block, partition, group, pass, hop,
round, bucket, unit, home) are those of the package's glossary (``pipeline.dedup``).

    sign_block        per block      signatures of its shards, its band keys by partition
    find_candidates   per partition  its candidate pairs, routed to the group of the later document
    measure_first     per group      a pass's first hop
    measure_second    per group      a pass's second hop
    seed_components   per group      its verified edges, both ways round, into round 0
    large_stars, small_stars  per unit of the rounds  a half-round over the unit's buckets
    label_components  per unit       each document's component, sent to its document's group
    home_members      per group      the labelled documents with the keep rule's columns, sent home
    keep_in_home      per home       the keep rule over the home's components
    assemble          once           the clusters table, group after group
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.clusters import (
    CLUSTERS_SCHEMA,
    KeepRule,
    ShingleLookup,
    finish_clusters,
    members_of_labelled,
    similarity_pairs,
    with_attributes,
)
from pipeline.dedup.components import (
    COMPONENTS_SCHEMA,
    BucketCounts,
    Footers,
    Outbox,
    Records,
    component_labels,
    home_of,
    large_star,
    seed_edges,
    small_star,
)
from pipeline.dedup.layout import SIMILARITY, VERIFY, DedupWork
from pipeline.dedup.lsh import candidate_pairs, partition_band_keys, shard_of, signatures_for_shard
from pipeline.dedup.minhash import MinHashParams
from pipeline.dedup.routed import HopCounts, by_group, first_hop, route_pairs, second_hop
from pipeline.dedup.runs import runs
from pipeline.io.storage import empty_table, parquet_bytes, parquet_file, parquet_files, read_parquet_counted
from pipeline.io.writer import parquet_stream, write_parquet

# Rows of the clusters table per Parquet row group: what assembling holds beside one group's rows.
CLUSTER_ROWS_PER_ROW_GROUP = 1 << 16


@dataclass(frozen=True)
class Signed:
    """One shard's signatures: its documents, those without words, its shingles, bytes read."""

    docs: int
    docs_without_words: int
    shingles: int
    bytes_read: int


@dataclass(frozen=True)
class SignJob:
    """A block of consecutive shards: ``inputs`` are shards ``first``, ``first + 1``, ..."""

    work: DedupWork
    params: MinHashParams
    partitions: int
    first: int
    inputs: tuple[Path, ...]


def _sign_shard(work: DedupWork, in_path: Path, shard: int, params: MinHashParams) -> Signed:
    signatures = work.signatures(shard)
    counts = signatures_for_shard(in_path, signatures, params, shard=shard)
    text_columns = ["id", "text"] + ([params.score_column] if params.score_column else [])
    band_columns = ["doc", "exact_hash", "words", "band_keys"]
    read = parquet_bytes(parquet_file(in_path).metadata, text_columns)
    read += parquet_bytes(parquet_file(signatures).metadata, band_columns)
    return Signed(**counts, bytes_read=read)


def sign_block(job: SignJob) -> list[Signed]:
    """The signature files of the block's shards, one after the other, and the block's band keys
    split by partition: one file per partition for the whole block, so the step writes blocks x
    partitions files, not shards x partitions. It holds the block's band keys (a row of 18 bytes
    per band and document)."""
    shards = range(job.first, job.first + len(job.inputs))
    signed = [_sign_shard(job.work, path, shard, job.params) for path, shard in zip(job.inputs, shards)]
    partition_band_keys([job.work.signatures(s) for s in shards], job.work.band_files(job.first, job.partitions))
    return signed


@dataclass(frozen=True)
class Counted:
    """A unit's documents or pairs (what it counts, by kind), and the bytes it read."""

    count: int
    bytes_read: int


@dataclass(frozen=True)
class CandidatesJob:
    work: DedupWork
    partition: int
    group_of: tuple[int, ...]  # each shard's group


def find_candidates(job: CandidatesJob) -> Counted:
    """The partition's candidate pairs (counted), routed to the group of their later document:
    written that way round (``doc_a`` the later document), since the first hop runs where
    ``doc_a`` is. A document is the later one of few pairs a band (at most
    ``ALL_PAIRS_BUCKET - 1``) but the earlier one of a whole bucket's, so by the later document
    the pairs spread evenly over the groups; by the earlier one they pile up where a corpus's
    first copies are."""
    files = parquet_files(job.work.band_partition(job.partition))
    pairs = candidate_pairs(files)
    later_first = pairs.select(doc_a="doc_b", doc_b="doc_a", exact="exact")
    route_pairs(later_first, job.work.routed(VERIFY), f"part-{job.partition:04d}", job.group_of)
    return Counted(pairs.height, sum(parquet_bytes(parquet_file(f).metadata) for f in files))


@dataclass(frozen=True)
class HopJob:
    """One hop of pass ``pass_name`` (verify: ``threshold`` set; similarity: None) for ``group``
    (its ``shards``)."""

    work: DedupWork
    pass_name: str
    group: int
    shards: tuple[int, ...]
    threshold: float | None
    group_of: tuple[int, ...]

    @property
    def signatures(self) -> list[Path]:
        return [self.work.signatures(s) for s in self.shards]


def measure_first(job: HopJob) -> HopCounts:
    """The first hop of the job's pass (``pipeline.dedup.routed``)."""
    return first_hop(job.group, job.work.routed(job.pass_name), job.signatures, job.threshold, job.group_of)


def measure_second(job: HopJob) -> HopCounts:
    """The second hop of the job's pass (``pipeline.dedup.routed``)."""
    return second_hop(job.group, job.work.routed(job.pass_name), job.signatures, job.threshold)


@dataclass(frozen=True)
class SeedJob:
    """Group ``group``'s verified edges into round 0's ``buckets`` buckets, dealt to ``units``."""

    work: DedupWork
    group: int
    buckets: int
    units: int


def seed_components(job: SeedJob) -> BucketCounts:
    edges = job.work.routed(VERIFY).measured_files(job.group)
    return seed_edges(job.group, edges, job.work.components, job.buckets, job.units)


@dataclass(frozen=True)
class StarJob:
    """Unit ``unit`` of round ``round_``'s half-rounds (and its labels): its ``buckets`` of the
    ``bucket_count``, dealt to ``units`` units."""

    work: DedupWork
    round_: int
    unit: int
    buckets: tuple[int, ...]
    bucket_count: int
    units: int


def _stars(star, job: StarJob, to_star: str, to_round: int) -> BucketCounts:
    """``star`` (Large-Star or Small-Star) for each of the job's buckets, what they send written
    at the end, one file per unit it goes to."""
    folders = job.work.components
    outbox = Outbox(folders.round(to_star, to_round), job.unit, job.bucket_count, job.units)
    footers = Footers()  # the unit's files, listed and read once for all its buckets
    done = [star(job.round_, b, folders, job.bucket_count, job.units, outbox, footers) for b in job.buckets]
    outbox.send()
    return sum(done, BucketCounts())


def large_stars(job: StarJob) -> BucketCounts:
    """Round ``round_``'s Large-Star for each of the job's buckets; its fingerprint in the counts."""
    return _stars(large_star, job, "small", job.round_)


def small_stars(job: StarJob) -> BucketCounts:
    """Round ``round_``'s Small-Star for each of the job's buckets."""
    return _stars(small_star, job, "large", job.round_ + 1)


@dataclass(frozen=True)
class LabelJob:
    stars: StarJob  # the unit of the last round
    group_of: tuple[int, ...]


def label_components(job: LabelJob) -> BucketCounts:
    """The component of each document of the unit's buckets, from the last round; each label also
    sent on to the group of its document, which reads the keep rule's columns from its own
    signature files (:func:`home_members`): held to the end, then one file per group."""
    stars, folders = job.stars, job.stars.work.components
    held: list[Records] = []
    footers = Footers()
    done = [component_labels(stars.round_, b, folders, stars.units, held, footers) for b in stars.buckets]
    doc, component = (np.concatenate(x) for x in zip(*held)) if held else (np.zeros(0, np.int64),) * 2
    labels = pl.DataFrame({"doc": doc, "component": component}, schema={"doc": pl.Int64, "component": pl.Int64})
    for group, rows in by_group(labels.sort("doc"), "doc", job.group_of):
        write_parquet(rows.to_arrow().cast(COMPONENTS_SCHEMA), folders.labelled_file(group, stars.unit))
    return sum(done, BucketCounts())


@dataclass(frozen=True)
class MembersJob:
    """Group ``group`` (its ``shards``) sends its labelled documents to ``homes`` homes."""

    work: DedupWork
    group: int
    shards: tuple[int, ...]
    homes: int
    rule: KeepRule


def home_members(job: MembersJob) -> Counted:
    """The group's labelled documents (counted) with the columns the keep rule needs, read from
    its own signature files (so each row group is read once, whatever the homes), each sent to
    its component's home (``pipeline.dedup.components.home_of``), sorted by ``doc``."""
    folders = job.work.components
    labels, read = read_parquet_counted(parquet_files(folders.labelled(job.group)))
    if labels is None:
        return Counted(0, 0)
    lookup = ShingleLookup([job.work.signatures(s) for s in job.shards])
    labelled = with_attributes(labels.sort("doc"), lookup, job.rule)
    home = home_of(labelled["component"].to_numpy(), job.homes)
    order = np.argsort(home, kind="stable")  # each home's rows stay sorted by doc
    labelled, home = labelled[order], home[order]
    for lo, hi in runs(home):
        write_parquet(labelled.slice(lo, hi - lo).to_arrow(), folders.home_file(int(home[lo]), job.group))
    return Counted(labelled.height, read + lookup.bytes_read)


@dataclass(frozen=True)
class KeepJob:
    work: DedupWork
    home: int
    rule: KeepRule
    group_of: tuple[int, ...]


@dataclass(frozen=True)
class Kept:
    """A home's members of clusters, the pairs (member, kept document) sent to be measured, and
    the bytes read."""

    docs: int
    pairs: int
    bytes_read: int


def keep_in_home(job: KeepJob) -> Kept:
    """The keep rule over the home's components (its memory bounded by one home's): each
    member's row goes to its group, and each member that is neither kept nor an exact copy is
    routed, with its kept document, to the similarity pass."""
    labelled, read = read_parquet_counted(parquet_files(job.work.components.home(job.home)))
    if labelled is None:
        return Kept(0, 0, 0)
    members = members_of_labelled(labelled.sort("doc"), job.rule)
    for group, rows in by_group(members, "doc", job.group_of):
        write_parquet(rows.to_arrow(), job.work.members_file(group, job.home))
    measure = similarity_pairs(members)
    route_pairs(measure, job.work.routed(SIMILARITY), f"members-{job.home:05d}", job.group_of)
    return Kept(members.height, measure.height, read)


@dataclass(frozen=True)
class AssembleJob:
    work: DedupWork
    out_path: Path
    groups: int


@dataclass(frozen=True)
class Assembled:
    """The clusters table's counts, and the bytes read to write it."""

    clusters: int = 0
    docs_in_clusters: int = 0
    removed: int = 0
    removed_exact: int = 0
    removed_near: int = 0
    removed_url: int = 0
    bytes_read: int = 0

    def __add__(self, other: Assembled) -> Assembled:
        return Assembled(*(a + b for a, b in zip(astuple(self), astuple(other))))


def _group_clusters(work: DedupWork, group: int) -> tuple[pa.Table | None, int]:
    """Group ``group``'s rows of the clusters table (its members with their similarity to the
    kept document, measured where the member's group is), and the bytes read; None when no
    member of a cluster is in the group."""
    files = parquet_files(work.members(group))
    if not files:
        return None, 0
    measured, measured_read = read_parquet_counted(work.routed(SIMILARITY).measured_files(group))
    measured = (
        measured.select("doc_a", "doc_b", "jaccard")
        if measured is not None
        else pl.DataFrame(schema={"doc_a": pl.Int64, "doc_b": pl.Int64, "jaccard": pl.Float64})
    )
    members, members_read = read_parquet_counted(files)
    return finish_clusters(members.sort("doc"), measured).to_arrow().cast(CLUSTERS_SCHEMA), members_read + measured_read


def _counts(table: pa.Table) -> Assembled:
    kept = table.column("kept").to_numpy(zero_copy_only=False)
    exact = table.column("exact").to_numpy(zero_copy_only=False)
    url = table.column("url").to_numpy(zero_copy_only=False)
    return Assembled(
        clusters=int(kept.sum()),  # one kept document per cluster
        docs_in_clusters=table.num_rows,
        removed=int((~kept).sum()),
        removed_exact=int((~kept & exact).sum()),
        removed_near=int((~kept & ~exact & ~url).sum()),
        removed_url=int((~kept & ~exact & url).sum()),
    )


def assemble(job: AssembleJob) -> Assembled:
    """The clusters table, group after group in document order (so sorted by ``doc``), written
    :data:`CLUSTER_ROWS_PER_ROW_GROUP` rows at a time."""
    counts = Assembled()
    pending: list[pa.Table] = []
    with parquet_stream(job.out_path, CLUSTERS_SCHEMA) as out:
        for group in range(job.groups):
            table, read = _group_clusters(job.work, group)
            counts += Assembled(bytes_read=read)
            if table is None:
                continue
            counts += _counts(table)
            pending.extend(_by_shard(table))
            if sum(t.num_rows for t in pending) >= CLUSTER_ROWS_PER_ROW_GROUP:
                pending = _write_full_row_groups(out, pending)
        rest = pa.concat_tables(pending) if pending else empty_table(CLUSTERS_SCHEMA)
        if rest.num_rows or not counts.docs_in_clusters:
            out.write_table(rest, row_group_size=CLUSTER_ROWS_PER_ROW_GROUP)
    return counts


def _by_shard(table: pa.Table) -> list[pa.Table]:
    """``table`` (sorted by ``doc``) cut into its shards' rows: the table is written from the same
    pieces whatever the groups, and Parquet's pages depend on the pieces, so its bytes do not
    depend on the groups either."""
    return [table.slice(lo, hi - lo) for lo, hi in runs(shard_of(table.column("doc").to_numpy()))]


def _write_full_row_groups(out, pending: Sequence[pa.Table]) -> list[pa.Table]:
    """Write every whole row group of ``pending``; return what is left (under a row group's rows)."""
    table = pa.concat_tables(pending)
    whole = table.num_rows - table.num_rows % CLUSTER_ROWS_PER_ROW_GROUP
    out.write_table(table.slice(0, whole), row_group_size=CLUSTER_ROWS_PER_ROW_GROUP)
    return [table.slice(whole)] if whole < table.num_rows else []
