"""Connected components in rounds of units per shard (pipeline.dedup.components): the same
components as scipy's on long chains, stars, cliques and random graphs, whatever the order of the
edges and the number of shards; and the groups of shards the dedup stage routes to."""

from __future__ import annotations

import collections
import random

import numpy as np
import polars as pl
import pytest

from pipeline.dedup.engine import deal_buckets, find_components, group_shards, groups_of_shards
from pipeline.dedup.layout import DedupWork
from pipeline.dedup.lsh import SHARD_BITS, shard_of
from pipeline.dedup.reference import connected_components
from pipeline.io.writer import write_parquet
from pipeline.stages.units import in_process


def docs_in_shards(count: int, shards: int, rng: random.Random) -> list[int]:
    """``count`` distinct document numbers spread over ``shards`` shards, shuffled."""
    docs = [(rng.randrange(shards) << SHARD_BITS) | row for row in range(count)]
    rng.shuffle(docs)
    return docs


def components_in_rounds(
    tmp_path, edges: list[tuple[int, int]], shards: int, buckets: int | None = None
) -> tuple[pl.DataFrame, int]:
    """Write the edges as the verification would (each in the file of its first document's
    shard, a group of one shard), find the components in rounds, and return them with the number
    of rounds."""
    frame = pl.DataFrame(
        {"doc_a": [min(e) for e in edges], "doc_b": [max(e) for e in edges]},
        schema={"doc_a": pl.Int64, "doc_b": pl.Int64},
    ).with_columns(jaccard=pl.lit(1.0), exact=pl.lit(False))
    measured = tmp_path / "verify" / "measured"
    for s in range(shards):
        mine = frame.filter(pl.Series(shard_of(frame["doc_a"].to_numpy()) == s))
        write_parquet(mine.to_arrow(), measured / f"first-{s:05d}.parquet")
    found = find_components(
        DedupWork(tmp_path), list(range(shards)), in_process, buckets=buckets or shards, units=3
    )  # 5 shards: 3 units
    labels = pl.concat([pl.read_parquet(p) for p in sorted((tmp_path / "components" / "labels").glob("*.parquet"))])
    return labels.sort("doc"), found.rounds


def reference(edges: list[tuple[int, int]]) -> pl.DataFrame:
    frame = pl.DataFrame({"doc_a": [e[0] for e in edges], "doc_b": [e[1] for e in edges]})
    return connected_components(frame).sort("doc")


def graphs(rng: random.Random, shards: int) -> dict[str, list[tuple[int, int]]]:
    docs = docs_in_shards(3000, shards, rng)
    chain = docs[:400]  # one long path, in a shuffled order of documents: the worst diameter
    star = docs[400:700]
    clique = docs[700:730]
    rest = docs[730:]
    return {
        "chain": [(chain[i], chain[i + 1]) for i in range(len(chain) - 1)],
        "star": [(star[0], d) for d in star[1:]],
        "clique": [(a, b) for i, a in enumerate(clique) for b in clique[i + 1 :]],
        "random": [tuple(rng.sample(rest, 2)) for _ in range(1500)],
        "ladder": [(chain[i], star[i % len(star)]) for i in range(0, 400, 7)] + [(clique[0], rest[0])],
    }


@pytest.mark.parametrize(("shards", "buckets"), [(1, None), (5, None), (5, 2), (5, 7)])
def test_components_in_rounds_equal_scipys(tmp_path, shards, buckets):
    """One graph of a long chain, a star, a clique, random edges and links between them; the rounds
    in one bucket of keys per shard, or in fewer or more."""
    rng = random.Random(shards)
    edges = [e for part in graphs(rng, shards).values() for e in part]
    expected = reference(edges)
    assert expected["component"].n_unique() > 100
    found, rounds = components_in_rounds(tmp_path / "given", edges, shards, buckets)
    assert found.equals(expected)
    assert rounds < 30
    # The edges in another order, each the other way round: the same labels.
    shuffled = [(b, a) for a, b in rng.sample(edges, len(edges))]
    again, _ = components_in_rounds(tmp_path / "shuffled", shuffled, shards, buckets)
    assert again.equals(expected)


def test_no_edges_no_components(tmp_path):
    found, rounds = components_in_rounds(tmp_path, [], shards=2)
    assert found.height == 0 and rounds == 2


def test_a_long_chain_settles_in_few_rounds(tmp_path):
    """Label propagation would need one round per link of a 2,000-document chain; the star
    rounds need O(log^2 n)."""
    docs = docs_in_shards(2000, 4, random.Random(0))
    edges = [(docs[i], docs[i + 1]) for i in range(len(docs) - 1)]
    found, rounds = components_in_rounds(tmp_path, edges, 4)
    assert found["component"].n_unique() == 1 and found["component"][0] == min(docs)
    assert rounds <= 25
    assert np.array_equal(found["doc"].to_numpy(), np.sort(np.array(docs)))


def test_units_follow_the_work_up_to_the_partitions():
    from pipeline.dedup.engine import units_for

    assert units_for(0, 1000, 8) == 1 and units_for(1000, 1000, 8) == 1 and units_for(1001, 1000, 8) == 2
    assert units_for(10**9, 1000, 8) == 8
    assert deal_buckets(5, 2) == [[0, 2, 4], [1, 3]] and deal_buckets(2, 8) == [[0], [1]]


def test_groups_of_shards_are_runs_of_consecutive_shards_of_about_equal_documents():
    assert group_shards([10] * 10, 4) == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]  # runs of 25 documents
    assert group_shards([10] * 10, 1) == [0] * 10 and group_shards([10] * 4, 9) == [0, 1, 2, 3]
    assert group_shards([], 5) == [] and group_shards([0, 0, 0], 2) == [0, 0, 0]
    # A shard far larger than the rest: the groups it spans collapse into one, none left empty.
    found = group_shards([1, 1, 100, 1, 1, 1], 6)
    assert found == sorted(found) and set(found) == set(range(max(found) + 1)) and found[2] != found[3]
    # Shards of uneven sizes: each group about total / groups documents.
    rng = random.Random(1)
    docs = [rng.randint(0, 5000) for _ in range(200)]
    sizes = [sum(docs[s] for s in shards) for shards in groups_of_shards(group_shards(docs, 11))]
    assert len(sizes) == 11 and max(sizes) <= sum(docs) / 11 + 5000
    assert groups_of_shards([0, 0, 1, 1, 1, 2]) == [[0, 1], [2, 3, 4], [5]]


def test_a_half_round_writes_a_file_per_pair_of_units_a_row_group_per_bucket(tmp_path):
    """Seven buckets dealt to three units: each unit sends one file a half-round to each unit (not
    one per pair of buckets: up to 9 files, not 49), with a row group per bucket and call, the
    buckets listed in its metadata, and one file of labels to each group of shards; and the labels
    are still scipy's."""
    import json

    import pyarrow.parquet as pq

    from pipeline.dedup.components import BUCKETS_KEY

    rng = random.Random(9)
    edges = [e for part in graphs(rng, 5).values() for e in part]
    found, _ = components_in_rounds(tmp_path, edges, 5, buckets=7)
    assert found.equals(reference(edges))
    rounds = [d for d in (tmp_path / "components").iterdir() if d.name.startswith(("large-", "small-"))]
    assert len(rounds) > 4
    units = {f"unit-{u:05d}" for u in range(3)}
    for folder in rounds:
        files = list(folder.glob("unit-*/from-*.parquet"))
        assert {f.parent.name for f in files} <= units
        if folder.name != "large-0000":  # the seed's senders are the 5 groups of shards
            assert {f.name for f in files} <= {f"from-{u:05d}.parquet" for u in range(3)} and len(files) <= 9
        for f in files:
            metadata = pq.ParquetFile(f).metadata
            buckets = json.loads(metadata.metadata[BUCKETS_KEY])
            assert len(buckets) == metadata.num_row_groups and len(set(buckets)) > 1
            assert all(b % 3 == int(f.parent.name.split("-")[1]) for b in buckets)
    # each unit sends each group of shards (here a shard each) one file of its documents' labels
    labelled = tmp_path / "components" / "labelled"
    sent = sorted(f.relative_to(labelled).as_posix() for f in labelled.rglob("*.parquet"))
    assert sent == [f"group-{g:05d}/from-{u:05d}.parquet" for g in range(5) for u in range(3)]
    for g in range(5):
        rows = pl.concat([pl.read_parquet(f) for f in sorted((labelled / f"group-{g:05d}").glob("*.parquet"))])
        assert (shard_of(rows["doc"].to_numpy()) == g).all()
        assert rows.sort("doc").equals(found.filter(pl.Series(shard_of(found["doc"].to_numpy()) == g)))


def test_a_unit_reads_each_footer_once_a_half_round(tmp_path, monkeypatch):
    """Seven buckets on three units: a unit's calls (two or three buckets) read their row groups
    from the same files, each file's footer read once by the unit, not once per bucket; the labels
    are still scipy's."""
    import pipeline.dedup.components as components_module

    opened = collections.Counter()
    real = components_module.parquet_file

    def counting(path, metadata=None):
        if metadata is None:  # a footer read from the file
            opened[str(path)] += 1
        return real(path, metadata)

    monkeypatch.setattr(components_module, "parquet_file", counting)
    rng = random.Random(9)
    edges = [e for part in graphs(rng, 5).values() for e in part]
    found, rounds = components_in_rounds(tmp_path, edges, 5, buckets=7)
    assert found.equals(reference(edges))
    # Each record file is read by one unit in one half-round (its receiver): its footer once. The
    # last round's large-star files are read twice: by Large-Star, then by the labels.
    last = f"large-{rounds - 1:04d}"
    assert opened and all(n == (2 if f"/{last}/" in path else 1) for path, n in opened.items())
    assert max(opened.values()) == 2


def test_runs_of_equal_keys_split_sorted_rows():
    from pipeline.dedup.runs import run_starts, runs

    u = np.array([1, 1, 1, 2, 5, 5])
    v = np.array([3, 3, 4, 0, 0, 0])
    assert run_starts(u).tolist() == [0, 3, 4] and run_starts(u, v).tolist() == [0, 2, 3, 4]
    assert list(runs(u)) == [(0, 3), (3, 4), (4, 6)]
    assert run_starts(u[:0]).tolist() == [] and list(runs(u[:0])) == []


@pytest.mark.parametrize("shards, rows", [(8, 25_000), (1, 1), (70_000, 40_000), (1 << 30, 1 << 31)])
def test_packed_pair_sorts_equal_lexsort(shards, rows):
    """Pairs of document numbers sorted through one packed 64-bit key (where the batch's shards
    and rows fit; the last two layouts do not, and fall back to lexsort) come out as lexsort
    puts them, and their distinct pairs as lexsort's."""
    from pipeline.dedup.runs import distinct_pairs_sorted, pair_order

    rng = np.random.default_rng(shards)
    n = 5_000
    a = (rng.integers(0, shards, n) << 32) + rng.integers(0, rows, n)
    b = (rng.integers(0, shards, n) << 32) + rng.integers(0, rows, n)
    a[:2000], b[:2000] = a[2000:4000], b[2000:4000]  # repeated pairs
    order = pair_order(a, b)
    expected = np.lexsort((b, a))
    assert np.array_equal(a[order], a[expected]) and np.array_equal(b[order], b[expected])
    distinct = sorted(set(zip(a.tolist(), b.tolist())))
    got_a, got_b = distinct_pairs_sorted(a, b)
    assert got_a.dtype == np.int64 and list(zip(got_a.tolist(), got_b.tolist())) == distinct
    empty = distinct_pairs_sorted(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert [len(x) for x in empty] == [0, 0] and len(pair_order(*empty)) == 0
