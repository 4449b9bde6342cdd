"""Connected components of the verified edges without one unit that holds them all: the
alternating Large-Star and Small-Star rounds of Kiveris et al. (2014, "Connected Components in
MapReduce and Beyond"), one function call per bucket per half-round (the dedup stage groups the
calls into units, ``pipeline.dedup.jobs``), the edges routed between half-rounds to the bucket of
the document they are keyed by.

A record keyed by document ``u`` goes to bucket ``u % buckets`` (the dedup stage sizes the
buckets by the edges), not to the shard of ``u``: the rounds gather each component around its
smallest document, and a corpus's first copies sit in a few shards, so by shard those few would
hold most of the records; the remainder of a document
number (``shard << 32 | row``) spreads them by row. The buckets are dealt to ``units`` units
(bucket B to unit B % units, the dedup stage's units of a half-round), and records go from unit
to unit (:class:`Outbox`): one file per sending unit and receiving unit, a row group per bucket
and call, so a half-round writes units x units files, not buckets x buckets. The files are where
:class:`pipeline.dedup.layout.ComponentsFolders` puts them.

    seed_edges(G)       the verified edges of group G's files (a group of shards), both ways
                        round, routed by key to round 0's Large-Star
    large_star(r, B)    per key u of bucket B, with m the smallest of u and its neighbours: an edge
                        (v, m) for every neighbour v > u; routed by the larger end (v) to round
                        r's Small-Star
    small_star(r, B)    per key u of bucket B, with N its smaller neighbours and m the smallest of
                        N and u: an edge (v, m) for every v in N and u but m; routed both ways
                        round to round r + 1's Large-Star
    component_labels(r, B)  once round r's edges are those of round r - 1: each document of
                        bucket B and its component (its smallest document); the engine sends each
                        label on to the group of its document, which sends it to its component's
                        home (home_of), where the keep rule runs over the whole component

Both steps keep each component connected and its smallest document in it; a round that changes
nothing leaves every component a star around its smallest document, and the rounds reach it after
O(log^2 n) of them (Kiveris et al.). Each large-star unit reports a fingerprint of its edges
(their number and a sum of their hashes), so the run stops when a round's fingerprint equals the
round before's. Memory per unit is bounded by the edges keyed by one bucket's documents; the
labels do not depend on the order of the edges.

Record files (``EDGE_SCHEMA``): ``u`` the document the record is keyed by (and routed to the
bucket of), ``v`` the other end; row groups of one bucket each, their buckets listed in the
file's metadata (``BUCKETS_KEY``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.dedup.layout import ComponentsFolders, RoundFolder
from pipeline.dedup.runs import distinct_pairs_sorted, run_starts, runs
from pipeline.io.storage import as_path, parquet_bytes, parquet_file, parquet_files, read_table_counted
from pipeline.io.writer import parquet_stream, write_parquet

EDGE_SCHEMA = pa.schema([pa.field("u", pa.int64(), nullable=False), pa.field("v", pa.int64(), nullable=False)])
COMPONENTS_SCHEMA = pa.schema(
    [pa.field("doc", pa.int64(), nullable=False), pa.field("component", pa.int64(), nullable=False)]
)
MAX_ROUNDS = 200
_MASK = (1 << 64) - 1
# In a record file's metadata: the bucket of each of its row groups, in order.
BUCKETS_KEY = b"components.buckets"

# Records (u, v) as two int64 arrays; each step a sort and runs of equal keys in numpy, which holds
# less than a group-by or a join of the same records (docs/scale.md measures the steps' memory).
Records = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class BucketCounts:
    """What calls over buckets did, summed with ``+``: the edges Large-Star read and the sum of
    their hashes (its fingerprint, :func:`fingerprint`), the documents labelled, the bytes read."""

    edges: int = 0
    hash: int = 0
    docs: int = 0
    bytes_read: int = 0

    def __add__(self, other: BucketCounts) -> BucketCounts:
        return BucketCounts(
            self.edges + other.edges,
            (self.hash + other.hash) & _MASK,
            self.docs + other.docs,
            self.bytes_read + other.bytes_read,
        )


def _no_records() -> Records:
    return np.zeros(0, np.int64), np.zeros(0, np.int64)


def _distinct(u: np.ndarray, v: np.ndarray) -> Records:
    """The distinct records, sorted by ``u, v``."""
    return distinct_pairs_sorted(u, v)


def _runs(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted keys ``u``: where each key's run starts, and its length."""
    starts = run_starts(u)
    return starts, np.diff(np.append(starts, len(u)))


class Outbox:
    """The records one unit sends in one half-round, held until :meth:`send`, then written as one
    file per unit they go to: ``to.file(U, sender)``, where a record keyed by
    ``u`` goes to bucket ``u % buckets``, owned by unit ``bucket % units``. Each :meth:`add` puts
    a row group per bucket (sorted by ``u, v``; the buckets listed in order in the file's
    metadata), so a half-round writes units x units files, not buckets x buckets; a unit holds
    what it sends in the half-round (about what it read: its buckets' records)."""

    def __init__(self, to: RoundFolder, sender: int, buckets: int, units: int):
        self.to, self.sender, self.buckets, self.units = to, sender, buckets, units
        self._parts: dict[int, list[tuple[int, pa.Table]]] = {}

    def add(self, records: Records) -> None:
        u, v = _distinct(*records)
        if not len(u):
            return
        bucket = u % self.buckets
        order = np.argsort(bucket, kind="stable")  # each bucket's records stay sorted by u, v
        u, v, bucket = u[order], v[order], bucket[order]
        for lo, hi in runs(bucket):
            table = pa.Table.from_arrays([pa.array(u[lo:hi]), pa.array(v[lo:hi])], schema=EDGE_SCHEMA)
            self._parts.setdefault(int(bucket[lo]) % self.units, []).append((int(bucket[lo]), table))

    def send(self) -> None:
        for to_unit, parts in sorted(self._parts.items()):
            schema = EDGE_SCHEMA.with_metadata({BUCKETS_KEY: json.dumps([b for b, _ in parts])})
            with parquet_stream(self.to.file(to_unit, self.sender), schema) as out:
                for _, table in parts:
                    out.write_table(table, row_group_size=table.num_rows)
        self._parts.clear()


def _route(records: Records, to: RoundFolder, sender: int, buckets: int, units: int, outbox: Outbox | None) -> None:
    """``records`` into ``outbox``, or, without one, straight to their units' files as ``sender``."""
    if outbox is not None:
        outbox.add(records)
        return
    alone = Outbox(to, sender, buckets, units)
    alone.add(records)
    alone.send()


class Footers:
    """The record files a unit reads in a half-round and their footers, each listed and read once:
    every call of the unit reads its bucket's row groups from the same files, and a footer of
    hundreds of row groups costs more to read than to reuse."""

    def __init__(self) -> None:
        self._files: dict[str, list[Path]] = {}
        self._footers: dict[str, tuple[pq.FileMetaData, list[int]]] = {}

    def files(self, folder: Path) -> list[Path]:
        if str(folder) not in self._files:
            self._files[str(folder)] = parquet_files(folder)
        return self._files[str(folder)]

    def of(self, path: Path) -> tuple[pq.FileMetaData, list[int]]:
        """A file's footer and the bucket of each of its row groups."""
        if str(path) not in self._footers:
            metadata = parquet_file(path).metadata
            self._footers[str(path)] = (metadata, json.loads(metadata.metadata[BUCKETS_KEY]))
        return self._footers[str(path)]


def _read(folder: RoundFolder, bucket: int, units: int, footers: Footers | None = None) -> tuple[Records, int]:
    """The distinct records routed to ``bucket`` in the half-round ``folder`` (its row groups of each file sent to
    its unit), sorted by ``u, v``, and the bytes read. ``footers``: the unit's files and footers
    as read by its calls before (default: read here)."""
    footers = footers or Footers()
    tables, read = [], 0
    for path in footers.files(folder.unit(bucket % units)):
        metadata, owners = footers.of(path)
        row_groups = [g for g, b in enumerate(owners) if b == bucket]
        if row_groups:
            tables.append(parquet_file(path, metadata).read_row_groups(row_groups).cast(EDGE_SCHEMA))
            read += parquet_bytes(metadata, None, row_groups)
    if not tables:
        return _no_records(), read
    records = pa.concat_tables(tables)
    return _distinct(records.column("u").to_numpy(), records.column("v").to_numpy()), read


def _both_ways(u: np.ndarray, v: np.ndarray) -> Records:
    return np.concatenate([u, v]), np.concatenate([v, u])


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on uint64."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def fingerprint(records: Records) -> tuple[int, int]:
    """(number, sum of hashes mod 2^64) of the undirected edges whose smaller end is the key: each
    edge of a both-ways edge set counted once, in the unit of its smaller end."""
    u, v = records
    once = u < v
    u, v = u[once].astype(np.uint64), v[once].astype(np.uint64)
    with np.errstate(over="ignore"):
        hashes = _mix(_mix(u) ^ v)
    return len(u), int(hashes.sum(dtype=np.uint64)) if len(hashes) else 0


def seed_edges(
    sender: int, edge_files: list[Path], folders: ComponentsFolders, buckets: int = 1, units: int = 1
) -> BucketCounts:
    """Route the edges of ``edge_files`` (``doc_a, doc_b``), both ways round, into round 0's
    ``buckets`` buckets, as ``from-<sender>`` files."""
    found = [read_table_counted(f, ["doc_a", "doc_b"]) for f in edge_files if as_path(f).exists()]
    u, v = _no_records()
    if found:
        edges = pa.concat_tables([table for table, _ in found])
        u, v = edges.column("doc_a").to_numpy().astype(np.int64), edges.column("doc_b").to_numpy().astype(np.int64)
    read = sum(size for _, size in found)
    _route(_both_ways(u, v), folders.round("large", 0), sender, buckets, units, None)
    return BucketCounts(bytes_read=read)


def large_star(
    round_: int,
    bucket: int,
    folders: ComponentsFolders,
    buckets: int = 1,
    units: int = 1,
    outbox: Outbox | None = None,
    footers: Footers | None = None,
) -> BucketCounts:
    """Round ``round_``'s Large-Star for the documents of bucket ``bucket`` (module docstring); what
    it sends goes to ``outbox`` (default: written at once, sent from ``bucket``); ``footers``, the
    unit's (:class:`Footers`)."""
    (u, v), read = _read(folders.round("large", round_), bucket, units, footers)
    count, hashes = fingerprint((u, v))
    starts, lengths = _runs(u)
    smallest = np.repeat(np.minimum(v[starts], u[starts]), lengths)  # a key's first v is its least
    up = v > u
    _route((v[up], smallest[up]), folders.round("small", round_), bucket, buckets, units, outbox)  # keyed by v
    return BucketCounts(edges=count, hash=hashes, bytes_read=read)


def small_star(
    round_: int,
    bucket: int,
    folders: ComponentsFolders,
    buckets: int = 1,
    units: int = 1,
    outbox: Outbox | None = None,
    footers: Footers | None = None,
) -> BucketCounts:
    """Round ``round_``'s Small-Star for the documents of bucket ``bucket`` (module docstring); its
    records are keyed by their larger end. What it sends goes to ``outbox``, and ``footers`` are
    the unit's, as Large-Star's."""
    (u, v), read = _read(folders.round("small", round_), bucket, units, footers)
    starts, lengths = _runs(u)
    least = v[starts]  # v < u always: a key's first v is its smallest neighbour
    smallest = np.repeat(least, lengths)
    other = v != smallest
    # (v, m) for each neighbour but m, and (u, m) for each key u (m < u).
    out = np.concatenate([v[other], u[starts]]), np.concatenate([smallest[other], least])
    _route(_both_ways(*out), folders.round("large", round_ + 1), bucket, buckets, units, outbox)
    return BucketCounts(bytes_read=read)


def home_of(components: np.ndarray, homes: int) -> np.ndarray:
    """The home (``0..homes-1``) of each component, by a hash of its name: components spread
    evenly over the homes (by the shard of their smallest document, they would pile up where a
    corpus's first copies are)."""
    mixed = _mix(np.asarray(components, dtype=np.int64).view(np.uint64))
    return (mixed % np.uint64(homes)).astype(np.int64)


def component_labels(
    round_: int,
    bucket: int,
    folders: ComponentsFolders,
    units: int = 1,
    held: list[Records] | None = None,
    footers: Footers | None = None,
) -> BucketCounts:
    """Each document of bucket ``bucket`` in an edge and its component, from round ``round_``'s
    edges (stars around each component's smallest document), written to ``folders.labels``; with
    ``held``, also kept there for the unit to send on with its other buckets' (``footers``: the
    unit's, :class:`Footers`)."""
    (u, v), read = _read(folders.round("large", round_), bucket, units, footers)
    starts, _ = _runs(u)
    labels = u[starts], np.minimum(v[starts], u[starts])  # doc, component (sorted by doc)
    write_parquet(pa.Table.from_arrays([pa.array(x) for x in labels], schema=COMPONENTS_SCHEMA), folders.labels(bucket))
    if held is not None:
        held.append(labels)
    return BucketCounts(docs=len(starts), bytes_read=read)


def combined_fingerprint(parts: list[BucketCounts]) -> tuple[int, int]:
    """A whole Large-Star half-round's fingerprint, from its units' (:func:`fingerprint`)."""
    total = sum(parts, BucketCounts())
    return total.edges, total.hash
