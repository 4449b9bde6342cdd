"""The `dedup` and `lines` stages: their units of work and the order they run in.

:func:`run_dedup` and :func:`run_lines` run a whole stage. They hand every list of units to
``run_units`` (``pipeline.stages.units``: by default one after the other in this process; the
Prefect flows in ``flows.dedup`` submit each as a task), so a stage runs, and is tested, with or
without Prefect, and writes the same files either way. :func:`deduplicate_shards` is the finding
of duplicates alone, on any list of document files.

    dedup, in <stage>/intermediate (P band-key partitions, :func:`partitions_for`: one per 1M
    band rows up to dedup.partitions, more past 6.5M rows each; G groups of consecutive shards,
    :func:`group_shards`: one per 50,000 documents up to dedup.partitions, the unit of every step
    that routes by document, so such a step writes at most G x G files whatever the number of
    shards):
    sign_block           per block of up to 16 shards
                                        signatures/shard-<S>, bands/part-<P>/block-<first S>
    find_candidates      per partition  verify/pairs/group-<G>/part-<P>, G the group of a pair's
                                        later document (pipeline.dedup.routed)
    measure_first        per group      verify/measured/first-<G>, verify/forward/group-<T>/from-<G>
    measure_second       per group      verify/measured/second-<T>: the edges, with the first's
    seed_components      per group      components/large-0000/...: the edges, both ways round,
                                        routed to buckets of documents (doc % buckets; one bucket
                                        per 50,000 edges, at most one per shard), a file per unit
                                        of the rounds
    large_stars, small_stars  per set of buckets (up to P units, one per two million edges), in
                                        rounds until a round changes nothing:
                                        components/large-<r>, small-<r> (pipeline.dedup.components):
                                        a file per pair of units, a row group per bucket and call
    label_components     per set of buckets
                                        components/labels/bucket-<B>: doc, component; and each
                                        label sent to the group of its document:
                                        components/labelled/group-<G>/from-<unit>
    home_members         per group      the group's labelled documents with the columns the keep
                                        rule needs (id, chars, exact hash, score), read from its own
                                        signature files, each sent to its component's home (one
                                        per 50,000 edges, up to P; chosen by a hash of the
                                        component, so the homes share the components evenly):
                                        components/home/home-<H>/from-<G>
    cluster_edges        per home       the keep rule over the components of home H:
                                        members/group-<G>/from-<H> (the members in group G) and
                                        similarity/pairs/group-<G>/members-<H>: each member's kept doc
    measure_first, measure_second  per group, again: similarity/measured/..., similarity/forward/...
    assemble             once           <stage>/clusters.parquet, group after group (each group's
                                        members with the similarities measured there)
    remove_duplicates    per shard      <stage>/docs, <stage>/removed

    lines:
    count_lines       per shard      counts/part-<P>/<shard>
    find_frequent     per partition  frequent/part-<P>.parquet, then frequent.parquet
    cut_lines         per shard      <stage>/docs (and removed: documents left blank)

The steps per shard of both stages (signatures, remove_duplicates, count_lines, cut_lines) are
short, so they are handed over in blocks of up to 16 shards (``pipeline.stages.units.in_blocks``;
the signatures' own blocks, :func:`sign_block`): one unit per block, which runs its shards one at
a time.

The shingle sets are read where they are: each verification and similarity hop reads each
signature file once at most (``pipeline.dedup.routed``), so the bytes a stage reads grow with
the corpus. Connected components run in rounds, each unit holding the edges keyed by the
documents of its buckets, one bucket at a time. Every unit reports ``bytes_read`` and
the finding sums them per step. The keep rule runs per home (the components dealt to the homes
by a hash of their name), over columns each group read from its own signature files and sent
there (so each row group is read once whatever the homes), and the clusters table is written
group after group, a row group at a time, so no unit holds more than a group's clusters however
large the corpus (the table is one file, written by one unit).

The intermediate folder is reused when it was made from the same input shards (by sha256) and
settings, so a re-run only redoes what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import RunConfig
from pipeline.dedup.clusters import (
    CLUSTERS_SCHEMA,
    KeepRule,
    ShingleLookup,
    dedup_step,
    finish_clusters,
    members_of_labelled,
    similarity_pairs,
    with_attributes,
)
from pipeline.dedup.components import (
    COMPONENTS_SCHEMA,
    MAX_ROUNDS,
    Footers,
    Outbox,
    Records,
    combined_fingerprint,
    component_labels,
    home_of,
    large_star,
    seed_edges,
    small_star,
)  # the unit functions below run these shard by shard (or bucket by bucket), over groups
from pipeline.dedup.layout import SIMILARITY, VERIFY, WORK_FORMAT, DedupWork, RoundFolder
from pipeline.dedup.lines import RepeatedLines, frequent_lines, line_counts_for_shard
from pipeline.dedup.lsh import SHARD_BITS, candidate_pairs, partition_band_keys, shard_of, signatures_for_shard
from pipeline.dedup.minhash import MinHashParams
from pipeline.dedup.routed import by_group, first_hop, route_pairs, second_hop
from pipeline.dedup.runs import runs
from pipeline.filters.scope import Scope
from pipeline.formats.documents import RunLayout, StageDir
from pipeline.formats.manifest import stage_outputs
from pipeline.io.storage import (
    as_path,
    parquet_bytes,
    parquet_file,
    parquet_files,
    read_parquet,
    read_parquet_counted,
    scan_parquet,
)
from pipeline.io.writer import parquet_stream, read_json, remove_temporaries, write_json, write_parquet
from pipeline.stages.registry import scoped_filters
from pipeline.stages.shard import finish_stage, mark_work_done, reusable_work, shard_unit
from pipeline.stages.units import JOBS_PER_BLOCK, RunUnits, blocks, in_blocks, in_process

STAGE = "dedup"
LINES_STAGE = "lines"
LARGEST_CLUSTERS = 10
EXAMPLE_CHARS = 300
# Documents into the stage per group of consecutive shards (up to dedup.partitions groups), the
# unit of the steps that route by document (the hops, the seed of the components, the members): a
# hop holds the shingle sets of its group's documents that have pairs, and the sets sent to it from
# one group at a time. Each of these steps writes a file per pair of groups, so fewer, larger
# groups mean fewer files.
DOCS_PER_GROUP = 50_000
# Work of one unit of the component rounds: edges in a round.
EDGES_PER_UNIT = 2_000_000
# Verified edges whose components one keep-rule unit (one home) takes. The million-document demo
# corpus' 453,225 edges (310,289 clustered documents) in one home (a budget of a million edges)
# grew 111-124 MiB (one process, the whole finding), in two homes (250,000) 58-72 MiB each, in
# eight (this budget; dedup.partitions caps them there) 26, in the same CPU time (21.3 against
# 21.7 s) and with the same clusters table. Since each group sends the homes their members'
# columns, more homes read no more of the signature files; they cost a task each and more,
# smaller files (groups x homes).
DOCS_PER_UNIT = 50_000
# Verified edges per bucket of the component rounds: what one call of a half-round holds (both ways
# round, about 100,000 records); a round writes a file per pair of buckets, so buckets are sized by
# the edges rather than one per shard.
EDGES_PER_BUCKET = 50_000


def sign_shard(in_path: Path, shard: int, work: Path, params: MinHashParams) -> dict:
    """Shard ``shard``'s signature file."""
    signatures = DedupWork(work).signatures(shard)
    counts = signatures_for_shard(in_path, signatures, params, shard=shard)
    opened = parquet_file(in_path)
    text_columns = ["id", "text"] + ([params.score_column] if params.score_column else [])
    band_columns = ["doc", "exact_hash", "words", "band_keys"]
    read = parquet_bytes(opened.metadata, text_columns) + parquet_bytes(parquet_file(signatures).metadata, band_columns)
    return {"unit": f"signatures-{shard:05d}", **counts, "bytes_read": read}


def sign_block(jobs: list[tuple[Path, int]], first: int, work: Path, params: MinHashParams, partitions: int) -> list:
    """The signature files of a block of consecutive shards (``(in_path, shard)`` each, from shard
    ``first``), one after the other, and the block's band keys split by partition: one file per
    partition for the whole block, bands/part-<P>/block-<first>, so the step writes blocks x
    partitions files, not shards x partitions. It holds the block's band keys (22 rows of 18 bytes a
    document with the default bands)."""
    signed = [sign_shard(path, shard, work, params) for path, shard in jobs]
    partition_band_keys(_signatures(work, [shard for _, shard in jobs]), DedupWork(work).band_files(first, partitions))
    return signed


def find_candidates(partition: int, work: Path, group_of: list[int]) -> dict:
    """Partition ``partition``'s candidate pairs, routed to the group of their later document (the
    group of its shard, ``group_of``): the pairs are written the other way round (``doc_a`` the
    later document), since the first hop runs where ``doc_a`` is. A document is the later one of
    few pairs a band (at most ``ALL_PAIRS_BUCKET - 1``: a large bucket pairs each member with its
    first document only) but the earlier one of a whole bucket's, so by the later document the
    pairs spread evenly over the shards, where by the earlier one they pile up where a corpus's
    first copies are (in the 100k-document demo run, one shard of 13 received 63% of the pairs)."""
    files = parquet_files(DedupWork(work).band_partition(partition))
    pairs = candidate_pairs(files)
    later_first = pairs.select(doc_a="doc_b", doc_b="doc_a", exact="exact")
    route_pairs(later_first, DedupWork(work).routed(VERIFY), f"part-{partition:04d}", group_of)
    read = sum(parquet_bytes(parquet_file(f).metadata) for f in files)
    return {"unit": f"candidates-{partition:04d}", "pairs": pairs.height, "bytes_read": read}


def buckets_for(edges: int, shards: int) -> int:
    """Buckets of the component rounds for ``edges`` verified edges: one per
    :data:`EDGES_PER_BUCKET`, at least 1 and at most one per shard."""
    return max(1, min(shards, -(-edges // EDGES_PER_BUCKET)))


def units_for(items: int, per_unit: int, most: int) -> int:
    """How many units a step that works across shards runs as: one per ``per_unit`` items (edges,
    documents of the keep rule), at least 1 and at most ``most`` (dedup.partitions). A unit works
    through its share one bucket or home at a time, so fewer units only save each task's fixed
    cost on a cluster (about half a second on a 2-worker Dask LocalCluster)."""
    return max(1, min(most, -(-items // per_unit)))


def deal_buckets(buckets: int, units: int) -> list[list[int]]:
    """Buckets ``0..buckets-1`` of the component rounds dealt into ``min(units, buckets)`` sets
    (bucket b to set b % units): the work of one unit of a half-round, bucket by bucket."""
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


def _summed(unit: str, counts: list[dict]) -> dict:
    total: dict = {"unit": unit}
    for found in counts:
        for key, value in found.items():
            total[key] = total.get(key, 0) + value
    return total


def _signatures(work: Path, shards: Sequence[int]) -> list[Path]:
    return [DedupWork(work).signatures(s) for s in shards]


def measure_first(
    step: str, group: int, shards: list[int], work: Path, threshold: float | None, group_of: list[int]
) -> dict:
    """The first routed hop of ``step`` (verify or similarity) for group ``group`` (its ``shards``)."""
    found = first_hop(group, DedupWork(work).routed(step), _signatures(work, shards), threshold, group_of)
    return {"unit": f"{step}-first-{group:04d}", **found}


def measure_second(step: str, group: int, shards: list[int], work: Path, threshold: float | None) -> dict:
    """The second routed hop of ``step`` for group ``group`` (its ``shards``)."""
    found = second_hop(group, DedupWork(work).routed(step), _signatures(work, shards), threshold)
    return {"unit": f"{step}-second-{group:04d}", **found}


def seed_components(group: int, work: Path, buckets: int, units: int) -> dict:
    """The verified edges of group ``group`` into the first round of components, routed to
    ``buckets`` buckets of documents (dealt to ``units`` units)."""
    layout = DedupWork(work)
    found = seed_edges(group, layout.routed(VERIFY).measured_files(group), layout.components, buckets, units)
    return {**found, "unit": f"components-seed-{group:04d}"}


def _stars(
    star, name: str, to: RoundFolder, round_: int, part: int, buckets: list[int], work: Path, count: int, units: int
) -> dict:
    """One unit of a half-round: ``star`` (Large-Star or Small-Star) for each bucket of
    ``buckets`` (of ``count``, dealt to ``units``), what they send written to ``to`` at the end,
    one file per unit it goes to."""
    outbox = Outbox(to, part, count, units)
    footers = Footers()  # the unit's files, listed and read once for all its buckets
    done = [star(round_, b, DedupWork(work).components, count, units, outbox, footers) for b in buckets]
    outbox.send()
    return _summed(f"{name}-{round_:04d}-{part:04d}", done)


def large_stars(round_: int, part: int, buckets: list[int], work: Path, count: int, units: int) -> dict:
    """Round ``round_``'s Large-Star for each bucket of ``buckets`` (:func:`_stars`)."""
    to = DedupWork(work).components.round("small", round_)
    return _stars(large_star, "large", to, round_, part, buckets, work, count, units)


def small_stars(round_: int, part: int, buckets: list[int], work: Path, count: int, units: int) -> dict:
    """Round ``round_``'s Small-Star for each bucket of ``buckets`` (:func:`_stars`)."""
    to = DedupWork(work).components.round("large", round_ + 1)
    return _stars(small_star, "small", to, round_, part, buckets, work, count, units)


def label_components(round_: int, part: int, buckets: list[int], work: Path, group_of: list[int], units: int) -> dict:
    """The component of each document of each bucket of ``buckets``, from round ``round_``; each
    label is also sent to the group of its document (``group_of``: each shard's), which reads the
    columns the keep rule needs from its own signature files (:func:`home_members`): the unit's
    labels held to the end, then one file per group, components/labelled/group-<G>/from-<part>."""
    folders = DedupWork(work).components
    held: list[Records] = []
    footers = Footers()
    done = [component_labels(round_, b, folders, units, held, footers) for b in buckets]
    doc, component = (np.concatenate(x) for x in zip(*held)) if held else (np.zeros(0, np.int64),) * 2
    labels = pl.DataFrame({"doc": doc, "component": component}, schema={"doc": pl.Int64, "component": pl.Int64})
    for group, rows in by_group(labels.sort("doc"), "doc", group_of):
        write_parquet(rows.to_arrow().cast(COMPONENTS_SCHEMA), folders.labelled_file(group, part))
    return _summed(f"components-{part:04d}", done)


def home_members(group: int, shards: list[int], work: Path, homes: int, rule: KeepRule) -> dict:
    """The labelled documents of group ``group`` (its ``shards``) with the columns the keep rule
    needs, read from the group's own signature files (so each row group is read once, whatever
    the homes), each sent to its component's home, one of ``homes`` by a hash of the component's
    name (``pipeline.dedup.components.home_of``): components/home/home-<H>/from-<G>, sorted by
    ``doc``. When each home read these columns from the signature files itself, a row group
    holding members of several homes was read once per home."""
    unit = f"members-{group:04d}"
    folders = DedupWork(work).components
    labels, read = read_parquet_counted(parquet_files(folders.labelled(group)))
    if labels is None:
        return {"unit": unit, "docs": 0, "bytes_read": 0}
    lookup = ShingleLookup(_signatures(work, shards))
    labelled = with_attributes(labels.sort("doc"), lookup, rule)
    home = home_of(labelled["component"].to_numpy(), homes)
    order = np.argsort(home, kind="stable")  # each home's rows stay sorted by doc
    labelled, home = labelled[order], home[order]
    for lo, hi in runs(home):
        write_parquet(labelled.slice(lo, hi - lo).to_arrow(), folders.home_file(int(home[lo]), group))
    return {"unit": unit, "docs": labelled.height, "bytes_read": read + lookup.bytes_read}


def find_components(work: Path, group_of: list[int], run_units: RunUnits, buckets: int = 1, units: int = 1) -> dict:
    """Connected components of the verified edges, in rounds of units (``pipeline.dedup.components``):
    the seed per group of shards (``group_of``: each shard's), the rounds over ``buckets`` buckets
    of documents dealt to ``units`` units, until a round changes nothing, each label sent to the
    group of its document; returns the rounds run and the bytes read."""
    groups = max(group_of, default=0) + 1
    jobs = list(enumerate(deal_buckets(buckets, units)))
    units = len(jobs)
    seeded = run_units(None, seed_components, [(g, work, buckets, units) for g in range(groups)])
    read = _total(seeded, "bytes_read")
    previous = None
    for round_ in range(MAX_ROUNDS):
        stars = run_units(None, large_stars, [(round_, g, owned, work, buckets, units) for g, owned in jobs])
        read += _total(stars, "bytes_read")
        now = combined_fingerprint(stars)
        if now == previous:
            break
        previous = now
        smalls = run_units(None, small_stars, [(round_, g, owned, work, buckets, units) for g, owned in jobs])
        read += _total(smalls, "bytes_read")
    else:
        raise RuntimeError(f"connected components did not settle in {MAX_ROUNDS} rounds")
    labelled = run_units(None, label_components, [(round_, g, owned, work, group_of, units) for g, owned in jobs])
    return {"rounds": round_ + 1, "docs": _total(labelled, "docs"), "bytes_read": read + _total(labelled, "bytes_read")}


def cluster_edges(home: int, work: Path, rule: KeepRule, group_of: list[int]) -> dict:
    """The keep rule over the components of home ``home`` (its memory bounded by one home's
    components, those of about :data:`DOCS_PER_UNIT` edges; their members' columns sent by
    :func:`home_members`): each member's row goes to the group of the member
    (members/group-<G>/from-<H>), and each member that is neither kept nor an exact copy is
    routed, with its kept document, to be measured."""
    unit = f"clusters-{home:04d}"
    layout = DedupWork(work)
    labelled, read = read_parquet_counted(parquet_files(layout.components.home(home)))
    if labelled is None:
        return {"unit": unit, "docs": 0, "pairs": 0, "bytes_read": 0}
    members = members_of_labelled(labelled.sort("doc"), rule)
    for group, rows in by_group(members, "doc", group_of):
        write_parquet(rows.to_arrow(), layout.members_file(group, home))
    measure = similarity_pairs(members)
    route_pairs(measure, layout.routed(SIMILARITY), f"members-{home:05d}", group_of)
    return {"unit": unit, "docs": members.height, "pairs": measure.height, "bytes_read": read}


# Rows of the clusters table written at a time (a Parquet row group): what assembling holds beside
# one group's rows, whatever the corpus.
CLUSTER_ROWS_PER_GROUP = 1 << 16


def _group_clusters(work: Path, group: int) -> tuple[pa.Table | None, int]:
    """Group ``group``'s rows of the clusters table (its members with their measured similarity to
    the kept document: measured where the member's group is, first-<G> and second-<G>), and the
    bytes read; None when no member of a cluster is in the group."""
    layout = DedupWork(work)
    files = parquet_files(layout.members(group))
    if not files:
        return None, 0
    measured, measured_read = read_parquet_counted(layout.routed(SIMILARITY).measured_files(group))
    measured = (
        measured.select("doc_a", "doc_b", "jaccard")
        if measured is not None
        else pl.DataFrame(schema={"doc_a": pl.Int64, "doc_b": pl.Int64, "jaccard": pl.Float64})
    )
    members, members_read = read_parquet_counted(files)
    return finish_clusters(members.sort("doc"), measured).to_arrow().cast(CLUSTERS_SCHEMA), members_read + measured_read


def assemble(work: Path, out_path: Path, groups: int) -> dict:
    """The clusters table, group after group in document order (so sorted by ``doc``), written
    :data:`CLUSTER_ROWS_PER_GROUP` rows at a time."""
    counts = dict.fromkeys(["clusters", "docs_in_clusters", "removed", "removed_exact", "removed_near"], 0)
    read = 0
    pending: list[pa.Table] = []
    with parquet_stream(out_path, CLUSTERS_SCHEMA) as out:
        for group in range(groups):
            table, group_read = _group_clusters(work, group)
            read += group_read
            if table is None:
                continue
            kept, exact = (
                table.column("kept").to_numpy(zero_copy_only=False),
                table.column("exact").to_numpy(zero_copy_only=False),
            )
            counts["clusters"] += int(kept.sum())  # one kept document per cluster
            counts["docs_in_clusters"] += table.num_rows
            counts["removed"] += int((~kept).sum())
            counts["removed_exact"] += int((~kept & exact).sum())
            counts["removed_near"] += int((~kept & ~exact).sum())
            pending.extend(_by_shard(table))
            if sum(t.num_rows for t in pending) >= CLUSTER_ROWS_PER_GROUP:
                pending = _write_full_groups(out, pending)
        rest = pa.concat_tables(pending) if pending else CLUSTERS_SCHEMA.empty_table()
        if rest.num_rows or not counts["docs_in_clusters"]:
            out.write_table(rest, row_group_size=CLUSTER_ROWS_PER_GROUP)
    return {"unit": "assemble", **counts, "bytes_read": read}


def _by_shard(table: pa.Table) -> list[pa.Table]:
    """``table`` (sorted by ``doc``) cut into its shards' rows: the table is written from the same
    pieces whatever the groups, and Parquet's pages depend on the pieces, so its bytes do not
    depend on the groups either."""
    return [table.slice(lo, hi - lo) for lo, hi in runs(shard_of(table.column("doc").to_numpy()))]


def _write_full_groups(out, pending: list[pa.Table]) -> list[pa.Table]:
    """Write every whole row group of ``pending``; return what is left (under a group's rows)."""
    table = pa.concat_tables(pending)
    whole = table.num_rows - table.num_rows % CLUSTER_ROWS_PER_GROUP
    out.write_table(table.slice(0, whole), row_group_size=CLUSTER_ROWS_PER_GROUP)
    return [table.slice(whole)] if whole < table.num_rows else []


def _total(parts: list[dict], key: str) -> int:
    return sum(int(part.get(key, 0)) for part in parts)


def find_duplicates(
    inputs: Sequence[Path],
    work: Path,
    params: MinHashParams,
    partitions: int,
    rule: KeepRule,
    out_path: Path,
    run_units: RunUnits = in_process,
    most_units: int | None = None,
) -> dict:
    """Every step from document shards to the clusters table at ``out_path`` (layout in the
    module docstring; shard numbers follow ``inputs``' order), with ``partitions`` band-key
    partitions. Each step that works across shards runs as units sized by its work, at most
    ``partitions`` or ``most_units`` (dedup.partitions), whichever is larger: those that route by
    document one per group of consecutive shards (:func:`group_shards`), a group per
    :data:`DOCS_PER_GROUP` documents.
    Returns the finding:
    counts of documents, shingles, candidate pairs, edges, false positives, clusters and removals,
    and the bytes read per step."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    most = max(partitions, most_units or 0)
    work = as_path(work)
    spans = blocks(len(inputs), -(-len(inputs) // JOBS_PER_BLOCK))
    signed = [
        found
        for block in run_units(
            "dedup signatures",
            sign_block,
            [([(inputs[s], s) for s in span], span.start, work, params, partitions) for span in spans],
        )
        for found in block
    ]
    docs = [found["docs"] for found in signed]
    group_of = group_shards(docs, units_for(sum(docs), DOCS_PER_GROUP, most))
    groups = list(enumerate(groups_of_shards(group_of)))
    candidates = run_units("dedup candidates", find_candidates, [(p, work, group_of) for p in range(partitions)])
    threshold = params.threshold
    n = len(inputs)
    verified = run_units("dedup verify", measure_first, [(VERIFY, g, s, work, threshold, group_of) for g, s in groups])
    verified_far = run_units(None, measure_second, [(VERIFY, g, s, work, threshold) for g, s in groups])
    edges = _total(verified, "kept") + _total(verified_far, "kept")
    # One keep-rule unit per home, sized by the edges, which are known before the components are: a
    # component of k documents has at least k - 1 edges, so a home holds at most twice as many
    # documents as its components have edges (about as many in the demo runs).
    homes = units_for(edges, DOCS_PER_UNIT, most)
    rounds = units_for(edges, EDGES_PER_UNIT, most)
    components = find_components(work, group_of, run_units, buckets_for(edges, n), rounds)
    homed = run_units(None, home_members, [(g, s, work, homes, rule) for g, s in groups])
    clustered = run_units(None, cluster_edges, [(home, work, rule, group_of) for home in range(homes)])
    similar = run_units(None, measure_first, [(SIMILARITY, g, s, work, None, group_of) for g, s in groups])
    similar_far = run_units(None, measure_second, [(SIMILARITY, g, s, work, None) for g, s in groups])
    (assembled,) = run_units(None, assemble, [(work, out_path, len(groups))])
    pairs = _total(verified, "pairs")
    return {
        "docs": _total(signed, "docs"),
        "docs_without_words": _total(signed, "docs_without_words"),
        "shingles": _total(signed, "shingles"),
        "candidate_pairs": pairs,
        "edges": edges,
        "false_positives": pairs - edges,
        **{k: v for k, v in assembled.items() if k not in ("unit", "bytes_read")},
        "bands_rows": list(params.lsh) if params.near else None,
        "component_rounds": components["rounds"],
        "bytes_read": {
            "signatures": _total(signed, "bytes_read"),
            "candidates": _total(candidates, "bytes_read"),
            "verify": _total(verified, "bytes_read") + _total(verified_far, "bytes_read"),
            "components": components["bytes_read"],
            "clusters": _total(homed, "bytes_read") + _total(clustered, "bytes_read"),
            "similarity": _total(similar, "bytes_read") + _total(similar_far, "bytes_read"),
            "assemble": assembled["bytes_read"],
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


def remove_duplicates(
    in_path: Path, shard: int, stage: StageDir, clusters: Path, threshold: float, batch_docs: int
) -> dict:
    """Shard ``shard``'s documents less its duplicates (its rows of the clusters table only:
    ``doc = shard << SHARD_BITS | row``), and its removed records."""
    mine = (
        scan_parquet([clusters])
        .filter(pl.col("doc").is_between(shard << SHARD_BITS, ((shard + 1) << SHARD_BITS) - 1))
        .collect()
    )
    return shard_unit(STAGE, in_path, stage, dedup_step(mine, threshold, shard=shard), batch_docs)


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
# dedup.partitions: its candidates unit is sized by the work, as the steps after it are (about 230
# MiB for a million rows; one unit paired 473,220 rows in 0.15 CPU s), so a small corpus pays no
# fixed cost per file and per task for partitions of a few thousand rows.
BAND_ROWS_PER_UNIT = 1_000_000
# Band-key rows per partition, at most, before the stage uses more partitions than dedup.partitions:
# a partition's candidates task grew by about 230 bytes per row in the million-document benchmark
# (223 MiB for 1.0M rows), so 6.5M rows is about 1.5 GB.
BAND_ROWS_PER_PARTITION = 6_500_000


def partitions_for(documents: int, params: MinHashParams, most: int) -> int:
    """Band-key partitions for ``documents``: one per :data:`BAND_ROWS_PER_UNIT` rows (a row per
    band and one for the exact hash per document), at least 1 and at most ``most``
    (dedup.partitions), as the units of the steps after it; and more than ``most`` when a
    partition would hold more than :data:`BAND_ROWS_PER_PARTITION` rows. The clusters do not
    depend on the number of partitions."""
    rows = documents * ((params.lsh[0] if params.near else 0) + 1)
    return max(units_for(rows, BAND_ROWS_PER_UNIT, most), -(-rows // BAND_ROWS_PER_PARTITION))


def run_dedup(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> dict:
    """Remove exact and near duplicates from the shards of ``previous``; write and return the
    stage's stats."""
    settings = config.dedup
    params = settings.minhash_params()
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE).make()
    remove_temporaries(stage.root)
    inputs = stage_outputs(config.run_dir, previous)
    work = stage.root / "intermediate"
    clusters = stage.root / "clusters.parquet"
    made_from = {**settings.model_dump(mode="json"), "work_format": WORK_FORMAT}
    if reusable_work(stage, inputs, made_from) and clusters.exists():
        finding = read_json(DedupWork(work).finding)
    else:
        documents = read_json(layout.stage(previous).stats)["docs_out"]
        partitions = partitions_for(documents, params, settings.partitions)
        finding = find_duplicates(
            inputs, work, params, partitions, settings.keep, clusters, run_units, most_units=settings.partitions
        )
        finding["partitions"] = partitions
        write_json(finding, DedupWork(work).finding)
        mark_work_done(stage, inputs, made_from)
    parts = in_blocks(
        run_units,
        STAGE,
        remove_duplicates,
        [(path, shard, stage, clusters, settings.threshold, config.batch_docs) for shard, path in enumerate(inputs)],
    )
    return finish_stage(
        STAGE,
        previous,
        config,
        sorted(parts, key=lambda part: part["unit"]),
        dedup=finding,
        largest_clusters=largest_clusters(scan_parquet([clusters]), inputs),
    )


def count_lines(in_path: Path, work: Path, partitions: int) -> dict:
    line_counts_for_shard(in_path, as_path(work) / "counts", partitions)
    return {"unit": in_path.stem}


def find_frequent(partition: int, work: Path, max_docs: int) -> dict:
    counts = as_path(work) / "counts" / f"part-{partition:04d}"
    # No folder: no shard had lines to count (a stage of no documents).
    frequent = frequent_lines(counts if counts.exists() else [], max_docs)
    write_parquet(frequent.to_arrow(), as_path(work) / "frequent" / f"part-{partition:04d}.parquet")
    return {"unit": f"frequent-{partition:04d}", "frequent_lines": frequent.height}


def cut_lines(in_path: Path, stage: StageDir, frequent: Path, scope: Scope, batch_docs: int) -> dict:
    hashes = read_parquet(frequent)["line_hash"].to_numpy() if frequent.exists() else np.zeros(0, np.uint64)
    step = scoped_filters([RepeatedLines(hashes)], scope)
    return shard_unit(LINES_STAGE, in_path, stage, step, batch_docs)


def run_lines(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> dict:
    """Cut lines found in more than ``lines.max_docs`` documents from the shards of ``previous``;
    write and return the stage's stats."""
    settings = config.lines
    layout = RunLayout(config.run_dir)
    stage = layout.stage(LINES_STAGE).make()
    remove_temporaries(stage.root)
    inputs = stage_outputs(config.run_dir, previous)
    work = stage.root / "intermediate"
    frequent = work / "frequent.parquet"
    if not (reusable_work(stage, inputs, settings.model_dump(mode="json")) and frequent.exists()):
        # Lines are counted over all documents; they are cut only from the sources in scope.
        in_blocks(run_units, "lines count", count_lines, [(path, work, settings.partitions) for path in inputs])
        found = run_units(
            "lines frequent", find_frequent, [(p, work, settings.max_docs) for p in range(settings.partitions)]
        )
        tables = [read_parquet(work / "frequent" / f"part-{p:04d}.parquet") for p in range(settings.partitions)]
        write_parquet(pl.concat(tables).sort("line_hash").to_arrow(), frequent)
        write_json({"frequent_lines": sum(f["frequent_lines"] for f in found)}, work / "finding.json")
        mark_work_done(stage, inputs, settings.model_dump(mode="json"))
    parts = in_blocks(
        run_units,
        LINES_STAGE,
        cut_lines,
        [(path, stage, frequent, settings.scope(), config.batch_docs) for path in inputs],
    )
    return finish_stage(
        LINES_STAGE,
        previous,
        config,
        sorted(parts, key=lambda part: part["unit"]),
        lines=read_json(work / "finding.json"),
    )
