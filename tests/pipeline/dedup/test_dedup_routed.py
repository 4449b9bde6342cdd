"""Verification routed between groups of shards (pipeline.dedup.routed): the same edges and
similarities as one lookup over every signature file, whatever the groups; each signature file
read once per hop, the bytes read not multiplied by the number of partitions, and the files a hop
writes bounded by the square of the groups, not of the shards."""

from __future__ import annotations

import dataclasses
import json
import pickle
import random

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline.dedup.engine as engine
import pipeline.dedup.routed as routed_module
from pipeline.dedup.clusters import ShingleLookup
from pipeline.dedup.components import BUCKETS_KEY
from pipeline.dedup.engine import deduplicate_shards, find_duplicates
from pipeline.dedup.layout import PassFolders
from pipeline.dedup.lsh import PAIRS_SCHEMA, candidate_pairs, sets_path, shard_of
from pipeline.dedup.minhash import MinHashParams
from pipeline.dedup.reference import cluster_table, verify_pairs
from pipeline.dedup.routed import distinct_pairs, first_hop, route_pairs, second_hop
from tests.pipeline.dedup.test_dedup import edit_words, make_vocabulary, random_text, write_shards

LOOSE = MinHashParams(num_perm=64, bands=64, rows=1, threshold=0.8)  # many false positives


def overlapping_corpus(seed: int) -> list[tuple[str, str]]:
    """Groups of five texts that share a third to two thirds of their words (Jaccard far below
    0.8, but candidates under bands of one row), some exact and near copies, shuffled."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    docs = []
    for g in range(30):
        base = random_text(rng, vocabulary, 240).split(" ")
        for v in range(5):
            keep = rng.randint(80, 160)
            docs.append((f"g{g}-{v}", " ".join(base[:keep] + [rng.choice(vocabulary) for _ in range(240 - keep)])))
        docs.append((f"g{g}-near", edit_words(rng, " ".join(base), 1)))
        docs.append((f"g{g}-base", " ".join(base)))
        docs.append((f"g{g}-exact", " ".join(base).upper()))
    rng.shuffle(docs)
    return docs


def all_candidates(work, partitions: int) -> pl.DataFrame:
    found = [candidate_pairs(work / "bands" / f"part-{p:04d}") for p in range(partitions)]
    return pl.concat(found).group_by("doc_a", "doc_b").agg(pl.col("exact").any()).sort("doc_a", "doc_b")


def measured(folder) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in sorted(folder.glob("*.parquet"))]).sort("doc_a", "doc_b")


def signatures(work, shards: int) -> list:
    return [work / "signatures" / f"shard-{s:05d}.parquet" for s in range(shards)]


@pytest.mark.parametrize("group_of", [[0, 1, 2, 3], [0, 0, 1, 1], [0, 0, 0, 0]])
def test_routed_hops_measure_what_one_lookup_measures(tmp_path, monkeypatch, group_of):
    """With bands of one row, LSH proposes many pairs far below the threshold, across shards: the
    routed hops give every pair the value one lookup over every file gives, and keep the same
    edges, in groups of one shard, two or four; the second hop reading the sent sets a row group
    of 3 at a time."""
    monkeypatch.setattr(engine, "DOCS_PER_GROUP", 240 // (max(group_of) + 1))  # 60 documents a shard
    monkeypatch.setattr(routed_module, "FORWARD_ROWS", 3)
    paths = write_shards(tmp_path / "docs", overlapping_corpus(3), shards=4)
    work = tmp_path / "work"
    finding = find_duplicates(paths, work, LOOSE, 5, "first", work / "clusters.parquet")
    pairs = all_candidates(work, 5)
    near = pairs.filter(~pl.col("exact"))
    assert near.height > 200 and (shard_of(near["doc_a"].to_numpy()) != shard_of(near["doc_b"].to_numpy())).sum() > 100
    lookup = ShingleLookup(signatures(work, 4))

    assert len(list((work / "verify" / "measured").glob("first-*.parquet"))) == max(group_of) + 1

    # Every pair's value, no threshold: the hops again, into a folder of their own.
    every = PassFolders(tmp_path / "all")
    route_pairs(pairs, every, "all", group_of)
    for g in range(max(group_of) + 1):
        mine = [signatures(work, 4)[s] for s in range(4) if group_of[s] == g]
        first_hop(g, every, mine, None, group_of)
    for g in range(max(group_of) + 1):
        mine = [signatures(work, 4)[s] for s in range(4) if group_of[s] == g]
        second_hop(g, every, mine, None)
    routed = measured(tmp_path / "all" / "measured")
    sent = list((tmp_path / "all" / "forward").rglob("*.parquet"))
    assert (max((pq.ParquetFile(p).metadata.num_row_groups for p in sent), default=0) > 1) == (max(group_of) > 0)
    reference = verify_pairs(pairs, lookup, threshold=0.0).sort("doc_a", "doc_b")
    assert routed.select("doc_a", "doc_b", "exact").equals(reference.select("doc_a", "doc_b", "exact"))
    assert np.allclose(routed["jaccard"].to_numpy(), reference["jaccard"].to_numpy(), rtol=0, atol=1e-12)
    assert (routed["jaccard"] < 0.8).sum() > 100  # the false positives were measured too

    # The stage's edges: those that reach the threshold, counted once each (measured where the later
    # document is, so written later document first).
    later_first = measured(work / "verify" / "measured")
    assert (later_first["doc_a"] > later_first["doc_b"]).all()
    edges = later_first.select(doc_a="doc_b", doc_b="doc_a", jaccard="jaccard", exact="exact").sort("doc_a", "doc_b")
    assert edges.equals(verify_pairs(pairs, lookup, threshold=0.8).sort("doc_a", "doc_b"))
    assert finding["candidate_pairs"] == pairs.height
    assert finding["edges"] == edges.height and finding["false_positives"] == pairs.height - edges.height
    # And the clusters table equals the one made in this process from the same edges.
    assert pl.read_parquet(work / "clusters.parquet").equals(cluster_table(edges, lookup, "first"))


def test_distinct_pairs_count_each_pair_once_exact_if_any_row_is():
    """A pair found in several bands or partitions comes to a hop once per finding, in no order:
    the hop measures it once, exact when any finding was (the exact hash's), as polars' group-by
    gives."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 40, 3_000)
    b = a + rng.integers(1, 30, 3_000)
    exact = rng.random(3_000) < 0.1
    table = pa.table({"doc_a": a, "doc_b": b, "exact": exact}).cast(PAIRS_SCHEMA)
    got_a, got_b, got_exact = distinct_pairs(table)
    expected = pl.from_arrow(table).group_by("doc_a", "doc_b").agg(pl.col("exact").any()).sort("doc_a", "doc_b")
    assert len(got_a) == expected.height < 3_000
    assert got_a.tolist() == expected["doc_a"].to_list() and got_b.tolist() == expected["doc_b"].to_list()
    assert got_exact.tolist() == expected["exact"].to_list() and 0 < got_exact.sum() < len(got_a)
    assert [len(x) for x in distinct_pairs(table.slice(0, 0))] == [0, 0, 0]


def test_a_set_is_sent_once_per_group_whatever_its_partners(tmp_path, monkeypatch):
    """Verification runs where a pair's later document is: six near copies of an article in
    shards 0 and 1 (group 0) and the article in shard 2 (group 1), so group 1 sends the article's
    set to group 0 once, with its six partners in two shards. The similarity pass runs where the
    kept document is: the article in shard 0 (group 0, with five other documents) and six copies
    in shards 1 and 2 (group 1), so group 0 sends the kept article's set to group 1 once, with six
    partners."""
    rng = random.Random(4)
    vocabulary = make_vocabulary(rng)
    article = random_text(rng, vocabulary, 300)
    copies = [(f"copy-{i}", edit_words(rng, article, 1)) for i in range(6)]
    other = ("other", random_text(rng, vocabulary, 300))
    monkeypatch.setattr(engine, "DOCS_PER_GROUP", 4)  # 8 documents: two groups

    paths = [write_shards(tmp_path / f"a{s}", copies[3 * s : 3 * s + 3], 1)[0] for s in range(2)]
    paths += write_shards(tmp_path / "b", [("article", article), other], 1)
    clusters = deduplicate_shards(paths, tmp_path / "work", MinHashParams(), partitions=3)
    assert sorted(clusters["id"].to_list()) == sorted(["article"] + [d[0] for d in copies])
    forward = tmp_path / "work" / "verify" / "forward"
    assert [p.relative_to(forward).as_posix() for p in forward.rglob("*.parquet")] == ["group-00000/from-00001.parquet"]
    sent = pq.read_table(forward / "group-00000" / "from-00001.parquet")
    assert sent.num_rows == 1 and len(sent.column("partners")[0]) == 6

    others = [(f"other-{i}", random_text(rng, vocabulary, 300)) for i in range(5)]
    monkeypatch.setattr(engine, "DOCS_PER_GROUP", 6)  # 12 documents: shard 0, then shards 1 and 2
    paths = write_shards(tmp_path / "c", [("article", article), *others], 1)
    paths += [write_shards(tmp_path / f"d{s}", copies[3 * s : 3 * s + 3], 1)[0] for s in range(2)]
    clusters = deduplicate_shards(paths, tmp_path / "work2", MinHashParams(), partitions=3)
    assert clusters.filter(pl.col("kept"))["id"].to_list() == ["article"] and clusters.height == 7
    forward = tmp_path / "work2" / "similarity" / "forward"
    assert [p.relative_to(forward).as_posix() for p in forward.rglob("*.parquet")] == ["group-00001/from-00000.parquet"]
    sent = pq.read_table(forward / "group-00001" / "from-00000.parquet")
    assert sent.num_rows == 1 and len(sent.column("partners")[0]) == 6


def test_files_grow_with_the_square_of_the_groups_not_of_the_shards(tmp_path, monkeypatch):
    """Twelve shards whose near copies are spread over all of them: routed from shard to shard,
    each hop would write a file for nearly every pair of shards (up to 132); in three groups, at
    most 9 a hop, and the pairs and members files one per group; the clusters table the same as in
    groups of one shard."""
    docs = overlapping_corpus(8)
    paths = write_shards(tmp_path / "docs", docs, shards=12)
    tables, files = {}, {}
    for name, per_group in (("shards", 1), ("groups", len(docs) // 3 + 1)):
        monkeypatch.setattr(engine, "DOCS_PER_GROUP", per_group)
        work = tmp_path / name
        find_duplicates(paths, work, LOOSE, 2, "first", work / "clusters.parquet", most_units=12)
        tables[name] = pl.read_parquet(work / "clusters.parquet")
        files[name] = {
            folder: len(list((work / folder).rglob("*.parquet")))
            for folder in ("verify/forward", "similarity/forward", "verify/pairs", "members")
        }
    assert tables["groups"].equals(tables["shards"]) and tables["groups"].height == 90
    # The same bytes: the table is written from its shards' rows whatever the groups.
    assert (tmp_path / "groups" / "clusters.parquet").read_bytes() == (
        tmp_path / "shards" / "clusters.parquet"
    ).read_bytes()
    assert files["shards"]["verify/forward"] > 60 and files["shards"]["similarity/forward"] > 20
    assert files["groups"]["verify/forward"] <= 9 and files["groups"]["similarity/forward"] <= 9
    assert files["groups"]["verify/pairs"] <= 2 * 3 and files["groups"]["members"] <= 3


@pytest.mark.parametrize("partitions", [12])
def test_bytes_read_do_not_grow_with_partitions(tmp_path, partitions):
    """Verifying each partition against every signature file would read the shingle sets once
    per partition; routed, the signature files are read once per hop whatever the partitions."""
    paths = write_shards(tmp_path / "docs", overlapping_corpus(5), shards=3)
    few = find_duplicates(paths, tmp_path / "few", LOOSE, 1, "first", tmp_path / "few.parquet")
    many = find_duplicates(paths, tmp_path / "many", LOOSE, partitions, "first", tmp_path / "many.parquet")
    assert pl.read_parquet(tmp_path / "few.parquet").equals(pl.read_parquet(tmp_path / "many.parquet"))
    # Each hop reads each sets file (and where its sets start) once at most: at most twice the sets.
    sets = sum(sets_path(p).stat().st_size for p in signatures(tmp_path / "many", 3)) + sum(
        pq.ParquetFile(p).metadata.row_group(g).column(c).total_compressed_size
        for p in signatures(tmp_path / "many", 3)
        for g in range(pq.ParquetFile(p).metadata.num_row_groups)
        for c in range(pq.ParquetFile(p).metadata.num_columns)
        if pq.ParquetFile(p).metadata.row_group(g).column(c).path_in_schema in ("doc", "shingles")
    )
    for finding in (few, many):
        pairs_and_sent = sum(
            p.stat().st_size for p in (tmp_path / "many" / "verify").rglob("*.parquet") if "measured" not in p.parts
        )
        assert finding["bytes_read"]["verify"] <= 2 * sets + 2 * pairs_and_sent
    assert many["bytes_read"]["verify"] <= 1.25 * few["bytes_read"]["verify"]

    # The former verification, one lookup per partition over every signature file, read the sets
    # once per partition (here about 12 times as much with 12 partitions as with one).
    def former(folder: str, count: int) -> int:
        read = 0
        for p in range(count):
            lookup = ShingleLookup(signatures(tmp_path / folder, 3))
            verify_pairs(candidate_pairs(tmp_path / folder / "bands" / f"part-{p:04d}"), lookup, threshold=0.8)
            read += lookup.bytes_read
        return read

    assert former("many", partitions) > 6 * former("few", 1)


def test_no_pairs_no_clusters(tmp_path):
    rng = random.Random(6)
    vocabulary = make_vocabulary(rng)
    docs = [(f"d{i}", random_text(rng, vocabulary, 200)) for i in range(20)]
    paths = write_shards(tmp_path / "docs", docs, shards=2)
    finding = find_duplicates(paths, tmp_path / "work", MinHashParams(), 4, "first", tmp_path / "clusters.parquet")
    assert pl.read_parquet(tmp_path / "clusters.parquet").height == 0
    assert finding["candidate_pairs"] == finding["edges"] == finding["clusters"] == 0


def test_the_work_spreads_over_the_copies_shards_not_the_originals(tmp_path, monkeypatch):
    """Forty articles in shard 0 and three near copies of each spread over shards 1 to 4 (a
    corpus's first copies sit in its first shards): verification runs where the later document of
    each pair is, so shard 0 gets no pairs; and the component rounds, whose records go to buckets
    by the remainder of the document number rather than by shard, do not gather them all in one
    bucket, though each component's records gather around its original."""
    rng = random.Random(7)
    vocabulary = make_vocabulary(rng)
    articles = [(f"a{i}", random_text(rng, vocabulary, 200)) for i in range(40)]
    copies: list[list[tuple[str, str]]] = [[] for _ in range(4)]
    for i, (name, text) in enumerate(articles):
        for c in range(3):
            copies[(i + c) % 4].append((f"{name}-copy{c}", edit_words(rng, text, 1)))
    paths = write_shards(tmp_path / "s0", articles, 1)
    paths += [write_shards(tmp_path / f"s{s + 1}", docs, 1)[0] for s, docs in enumerate(copies)]
    monkeypatch.setattr(engine, "EDGES_PER_BUCKET", 10)  # a bucket per shard
    monkeypatch.setattr(engine, "DOCS_PER_GROUP", 1)  # a group per shard (at most a group per partition)
    clusters = deduplicate_shards(paths, tmp_path / "work", MinHashParams(), partitions=5)
    assert clusters.filter(pl.col("kept"))["id"].sort().to_list() == sorted(name for name, _ in articles)
    work = tmp_path / "work"
    routed = {p.parent.name for p in (work / "verify" / "pairs").glob("group-*/*.parquet")}
    assert routed == {"group-00001", "group-00002", "group-00003", "group-00004"}
    # The last round: stars around each component's smallest document, half the records keyed by
    # an original (all in shard 0).
    last = sorted((work / "components").glob("large-*"))[-1]
    records: dict[int, int] = {}
    for f in last.glob("unit-*/*.parquet"):  # a row group per bucket, listed in the file's metadata
        metadata = pq.ParquetFile(f).metadata
        for group, bucket in enumerate(json.loads(metadata.metadata[BUCKETS_KEY])):
            records[bucket] = records.get(bucket, 0) + metadata.row_group(group).num_rows
    assert len(records) == 5 and max(records.values()) < 0.3 * sum(records.values())


def test_each_unit_takes_one_typed_job_that_pickles(tmp_path):
    """A process or Dask runner pickles each unit's job and its result: every unit of the finding
    takes one job, a frozen dataclass, and returns a dataclass (a list of them for a block), and
    the finding run through pickles writes the clusters table the finding in this process writes."""
    kinds: dict[str, int] = {}

    def pickling(label, fn, jobs):
        done = []
        for job in jobs:
            assert dataclasses.is_dataclass(job), fn.__name__
            with pytest.raises(dataclasses.FrozenInstanceError):
                job.__setattr__(dataclasses.fields(job)[0].name, None)
            result = pickle.loads(pickle.dumps(fn(pickle.loads(pickle.dumps(job)))))
            assert all(dataclasses.is_dataclass(r) for r in (result if isinstance(result, list) else [result]))
            kinds[fn.__name__] = kinds.get(fn.__name__, 0) + 1
            done.append(result)
        return done

    paths = write_shards(tmp_path / "docs", overlapping_corpus(3), shards=3)
    here = find_duplicates(paths, tmp_path / "here", LOOSE, 2, "first", tmp_path / "here.parquet")
    sent = find_duplicates(paths, tmp_path / "sent", LOOSE, 2, "first", tmp_path / "sent.parquet", pickling)
    assert sent == here and here["clusters"] > 10
    assert (tmp_path / "sent.parquet").read_bytes() == (tmp_path / "here.parquet").read_bytes()
    assert len(kinds) == 11 and kinds["assemble"] == 1 and kinds["find_candidates"] == 2
