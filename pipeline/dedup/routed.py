"""Exact Jaccard similarity of document pairs, measured where the shingle sets are: the pairs
travel to the sets, never the sets of a whole corpus to the pairs.

The shards are dealt into groups of consecutive shards (``group_of[shard]``, a run-wide map
sized by documents; ``pipeline.dedup.engine.group_shards``); a group is the unit of each hop,
and files go from group to group, so a hop writes at most groups x groups files whatever the
number of shards. Two hops::

    route_pairs(pairs, folders, name, group_of)
        folders.pair_file(G, name): the pairs whose doc_a is in group G (PAIRS_SCHEMA)
    first_hop(G, folders, signatures of G, threshold, group_of)
        reads group G's pairs and, once, the row groups of G's signature files that hold their
        doc_a; measures the pairs whose doc_b is in G too (exact pairs need no sets); sends each
        other doc_a's set, once per target group T, with its partners in T, to
        folders.forward_file(T, G) (FORWARD_SCHEMA); writes folders.measured("first", G)
    second_hop(T, folders, signatures of T, threshold)
        reads what was sent to group T and, once, the row groups of T's signature files that
        hold the partners; measures the rest: folders.measured("second", T)

``folders`` is the pass's :class:`pipeline.dedup.layout.PassFolders`, the owner of these paths.

Each hop reads each signature file once at most, so a pass reads at most twice the signature
files' shingle sets plus the pairs, whatever the number of pairs, partitions, shards or groups:
the I/O grows with the corpus. (Verifying each partition's pairs against every signature file
instead reads partitions x corpus.) Memory per unit is bounded by a group: its pairs, its sets,
and the sets sent to it, read one row group of :data:`FORWARD_ROWS` sent sets at a time.

The dedup stage runs two passes: verification of the LSH candidate pairs (``threshold``: the
edges that reach it) and the similarity of each clustered document with its cluster's kept
document (no threshold: every value). Outputs are ``SIMILARITY_SCHEMA`` files sorted by
``doc_a, doc_b``; every unit returns counts, ``bytes_read`` among them (compressed Parquet column
chunks read, footers aside).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.dedup.clusters import ShingleLookup, jaccard_of_pairs
from pipeline.dedup.layout import FIRST, SECOND, PassFolders
from pipeline.dedup.lsh import PAIRS_SCHEMA, SET_TYPE, SIGNATURE_COMPRESSION, set_arrays, shard_of
from pipeline.dedup.runs import pair_order, run_starts, runs
from pipeline.io.storage import empty_table, parquet_bytes, parquet_file, parquet_files, read_table_counted
from pipeline.io.writer import PARQUET_COMPRESSION, atomic_sink, write_parquet

FORWARD_SCHEMA = pa.schema(
    [
        pa.field("doc_a", pa.int64(), nullable=False),
        pa.field("shingle_set", SET_TYPE, nullable=False),
        pa.field("partners", pa.large_list(pa.int64()), nullable=False),
    ]
)
# The sets stored plain as in the signature files; doc_a alone gets a dictionary (hashes rarely repeat).
FORWARD_WRITER = {
    "compression": {name: SIGNATURE_COMPRESSION.get(name, PARQUET_COMPRESSION) for name in FORWARD_SCHEMA.names},
    "use_dictionary": ["doc_a"],
}
# Sent sets per row group of a forwarded file: the second hop reads one row group at a time, so it
# holds one row group's sets, never a whole sender's file.
FORWARD_ROWS = 1024
SIMILARITY_SCHEMA = pa.schema(
    [
        pa.field("doc_a", pa.int64(), nullable=False),
        pa.field("doc_b", pa.int64(), nullable=False),
        pa.field("jaccard", pa.float64(), nullable=False),
        pa.field("exact", pa.bool_(), nullable=False),
    ]
)


@dataclass(frozen=True)
class HopCounts:
    """What a hop measured: distinct ``pairs``, those ``kept`` (written: reaching the threshold,
    or all), those ``forwarded`` to a second hop, and the bytes read."""

    pairs: int = 0
    kept: int = 0
    forwarded: int = 0
    bytes_read: int = 0


def groups_of(docs: np.ndarray, group_of: Sequence[int]) -> np.ndarray:
    """The group of each document number (``group_of[shard]``)."""
    return np.asarray(group_of, dtype=np.int64)[shard_of(docs)]


def route_pairs(pairs: pl.DataFrame, folders: PassFolders, name: str, group_of: Sequence[int]) -> int:
    """Write ``pairs`` (``doc_a, doc_b, exact``) as one file per group of ``doc_a``:
    ``folders.pair_file(G, name)``, sorted by ``doc_a, doc_b``; groups with no pair get
    no file. Returns the number of files written."""
    if pairs.height == 0:
        return 0
    table = pairs.select(
        pl.col("doc_a").cast(pl.Int64), pl.col("doc_b").cast(pl.Int64), pl.col("exact").cast(pl.Boolean)
    ).sort("doc_a", "doc_b")
    written = 0
    for group, part in by_group(table, "doc_a", group_of):
        write_parquet(part.to_arrow().cast(PAIRS_SCHEMA), folders.pair_file(group, name))
        written += 1
    return written


def by_group(frame: pl.DataFrame, column: str, group_of: Sequence[int]) -> Iterator[tuple[int, pl.DataFrame]]:
    """``(group, rows)`` for each group of the documents in ``column``, ``frame`` being sorted by
    it (the groups are consecutive shards, so each group's rows are one slice)."""
    if frame.height == 0:
        return
    groups = groups_of(frame[column].to_numpy(), group_of)
    if (np.diff(groups) < 0).any():
        raise ValueError("a group of shards is not a run of consecutive shards")
    for lo, hi in runs(groups):
        yield int(groups[lo]), frame.slice(lo, hi - lo)


def _read_all(paths: list[Path], schema: pa.Schema) -> tuple[pa.Table, int]:
    """The files as one table, and the bytes read."""
    tables, read = [], 0
    for path in paths:
        table, size = read_table_counted(path)
        tables.append(table.cast(schema))
        read += size
    return (pa.concat_tables(tables) if tables else empty_table(schema)), read


class _Measured:
    """Pairs measured by a hop, gathered as arrays (``doc_a, doc_b, jaccard, exact``), filtered,
    sorted and written in numpy, as the hop's other steps (a polars group-by would hold several
    times the pairs' bytes)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, a: np.ndarray, b: np.ndarray, jaccard: np.ndarray, exact: np.ndarray) -> None:
        self.pieces.append(
            (a.astype(np.int64, copy=False), b.astype(np.int64, copy=False), jaccard.astype(np.float64), exact)
        )

    def write(self, threshold: float | None, out_path: Path) -> int:
        """Write the pairs that reach ``threshold`` (every pair when None) to ``out_path``, sorted
        by ``doc_a, doc_b``; returns how many."""
        a, b, jaccard, exact = (
            np.concatenate([piece[i] for piece in self.pieces]) if self.pieces else np.zeros(0, dtype)
            for i, dtype in enumerate((np.int64, np.int64, np.float64, bool))
        )
        if threshold is not None:
            keep = exact | (jaccard >= threshold)
            a, b, jaccard, exact = a[keep], b[keep], jaccard[keep], exact[keep]
        order = pair_order(a, b)
        columns = [a[order], b[order], jaccard[order], exact[order]]
        write_parquet(pa.Table.from_arrays([pa.array(c) for c in columns], schema=SIMILARITY_SCHEMA), out_path)
        return len(order)


def distinct_pairs(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``doc_a, doc_b, exact`` of each distinct pair of ``table`` (``PAIRS_SCHEMA`` rows, a pair
    found in several bands or partitions more than once), sorted by ``doc_a, doc_b``; a pair is
    exact when any of its rows is."""
    a = table.column("doc_a").to_numpy()
    b = table.column("doc_b").to_numpy()
    exact = table.column("exact").to_numpy(zero_copy_only=False)
    order = pair_order(a, b)
    a, b, exact = a[order], b[order], exact[order]
    starts = run_starts(a, b)
    return a[starts], b[starts], (np.logical_or.reduceat(exact, starts) if len(starts) else exact)


def _group_sets(signature_paths: Sequence[Path], docs: np.ndarray) -> tuple[pa.Table, int]:
    """``doc, shingle_set`` of ``docs`` (sorted, distinct) from a group's signature files, and the
    bytes read (only the row groups that hold them)."""
    lookup = ShingleLookup(signature_paths)
    if "shingle_set" not in lookup.columns:
        raise ValueError(
            f"{signature_paths[0]}: near-duplicate pairs need shingle sets; the signatures were made with near=False"
        )
    table = lookup.rows(docs, ["shingle_set"])
    return table, lookup.bytes_read


def first_hop(
    group: int, folders: PassFolders, signature_paths: Sequence[Path], threshold: float | None, group_of: Sequence[int]
) -> HopCounts:
    """Group ``group``'s first hop (module docstring): measure the pairs routed to it whose both
    documents it holds, and send the sets of the others on. Pairs found more than once (in
    several bands or partitions) count once; a pair found through the exact hash is exact, with
    similarity 1.0. Returns its :class:`HopCounts`."""
    routed, read = _read_all(parquet_files(folders.pairs(group)), PAIRS_SCHEMA)
    a, b, exact = distinct_pairs(routed)
    del routed
    measured = _Measured()
    measured.add(a[exact], b[exact], np.ones(int(exact.sum())), np.ones(int(exact.sum()), bool))
    forwarded = 0
    a, b = a[~exact], b[~exact]
    if len(a):
        target = groups_of(b, group_of)
        here = target == group
        needed = np.unique(np.concatenate([a, b[here]]))
        sets, read_sets = _group_sets(signature_paths, needed)
        read += read_sets
        docs = sets.column("doc").to_numpy()
        column = sets.column("shingle_set").combine_chunks()  # once: each target's take reads it
        del sets
        values, offsets = set_arrays(column)
        local_a, local_b = a[here], b[here]
        similarity = jaccard_of_pairs(values, offsets, np.searchsorted(docs, local_a), np.searchsorted(docs, local_b))
        measured.add(local_a, local_b, similarity, np.zeros(len(local_a), bool))
        # The pairs that go on, by target group, each target's in (doc_a, doc_b) order.
        away = np.flatnonzero(~here)
        away = away[np.argsort(target[away], kind="stable")]
        forwarded = len(away)
        for lo, hi in runs(target[away]):
            part = away[lo:hi]
            part_a, part_b = a[part], b[part]
            starts = run_starts(part_a)
            ends = np.append(starts[1:], len(part_b))
            path = folders.forward_file(int(target[part[0]]), group)
            with atomic_sink(path) as sink, pq.ParquetWriter(sink, FORWARD_SCHEMA, **FORWARD_WRITER) as out:
                # FORWARD_ROWS sets at a time: a target may take most of the group's sets.
                for lo in range(0, len(starts), FORWARD_ROWS):
                    first, last = starts[lo : lo + FORWARD_ROWS], ends[lo : lo + FORWARD_ROWS]
                    senders = part_a[first]
                    partners = pa.LargeListArray.from_arrays(
                        pa.array(np.append(first, last[-1]) - first[0], pa.int64()),
                        pa.array(part_b[first[0] : last[-1]], pa.int64()),
                    )
                    sets = column.take(pa.array(np.searchsorted(docs, senders)))
                    out.write_table(pa.table([pa.array(senders), sets, partners], schema=FORWARD_SCHEMA))
                    del sets
            pa.default_memory_pool().release_unused()  # the writer's buffers, before the next target's
    kept = measured.write(threshold, folders.measured(FIRST, group))
    return HopCounts(int(exact.size), kept, forwarded, read)


def second_hop(group: int, folders: PassFolders, signature_paths: Sequence[Path], threshold: float | None) -> HopCounts:
    """Group ``group``'s second hop (module docstring): measure the pairs whose ``doc_b`` it holds
    against the sets the first hops sent it, one row group of a sending group's file at a time.
    Returns its :class:`HopCounts`."""
    files = parquet_files(folders.forward(group))
    read = 0
    partners, footers = [], []
    for path in files:  # the partners first (a small column), to read this group's sets once
        opened = parquet_file(path)
        partners.append(opened.read(columns=["partners"]).column("partners").combine_chunks())  # sliced below
        footers.append(opened.metadata)  # kept: the file is opened again below without reading it
        read += parquet_bytes(opened.metadata, ["partners"])
    measured = _Measured()
    pairs = 0
    if files:
        needed = np.unique(np.concatenate([_flatten(column) for column in partners]))
        sets, read_sets = _group_sets(signature_paths, needed)
        read += read_sets
        docs = sets.column("doc").to_numpy()
        own_values, own_offsets = set_arrays(sets.column("shingle_set"))
        for path, column, footer in zip(files, partners, footers):
            opened = parquet_file(path, footer)
            first = 0
            for row_group in range(footer.num_row_groups):  # one at a time: memory bounded by it
                sent = opened.read_row_group(row_group, columns=["doc_a", "shingle_set"])
                read += parquet_bytes(footer, ["doc_a", "shingle_set"], [row_group])
                mine = column.slice(first, sent.num_rows)
                first += sent.num_rows
                sent_values, sent_offsets = set_arrays(sent.column("shingle_set"))
                counts = np.diff(_list_offsets(mine))
                a = np.repeat(sent.column("doc_a").to_numpy(), counts)
                b = _flatten(mine)
                left = np.repeat(np.arange(sent.num_rows), counts)
                # The sent sets against this group's, each array as it is (not joined per sender).
                similarity = jaccard_of_pairs(
                    sent_values, sent_offsets, left, np.searchsorted(docs, b), (own_values, own_offsets)
                )
                measured.add(a, b, similarity, np.zeros(len(a), bool))
                pairs += len(a)
                del sent, sent_values, sent_offsets
                pa.default_memory_pool().release_unused()
    kept = measured.write(threshold, folders.measured(SECOND, group))
    return HopCounts(pairs, kept, 0, read)


def _list_offsets(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = column.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0]


def _flatten(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The values of a list column, flattened, as numpy."""
    return pc.list_flatten(column).to_numpy() if len(column) else np.zeros(0, np.int64)
