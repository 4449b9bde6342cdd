"""The dedup index (pipeline.dedup.index, pipeline.dedup.indexed, pipeline.stages.index): crawl A's
curated documents indexed, crawl B deduplicated against them. B overlaps A by exact copies, near
copies over the threshold and far copies under it, at known rates; the index must remove exactly
the copies whose exact Jaccard with an A document reaches the threshold, and keep what one run
over A and B together keeps."""

from __future__ import annotations

import filecmp
import json
import random
import re

import polars as pl
import pytest

import pipeline.dedup.index as index_format
from pipeline.config import ConfigError, parse_config
from pipeline.dedup.index import DedupIndex, DedupIndexError
from pipeline.dedup.indexed import RULE_IN_INDEX
from pipeline.stages.index import add_to_index, index_summary
from pipeline.stages.run import RunFiles
from tests.helpers import curate_in_process, write_jsonl
from tests.pipeline.dedup.test_dedup import edit_words, make_vocabulary, random_text

THRESHOLD = 0.8
A_DOCS = 240
# B's documents, by kind: exact copies of A (case changed: the same normalized text), near copies
# (1 word in 120 edited: Jaccard about 0.92), far copies (12 words: about 0.4), and new text.
EXACT, NEAR, FAR, NEW = 30, 40, 20, 110
# Chains: a near copy of an A document (1 edit, Jaccard 0.92) at B's end, and before it in B a near
# copy of that copy (2 edits more: 0.84 with the copy, 0.77 with the A document). One run over A
# and B puts the three in one cluster and keeps the A document; against the index the chain's
# first document is its B cluster's kept one, removed as in the index through its copy.
CHAINS = 5


def _edited(text: str, positions: list[int]) -> str:
    words = text.split(" ")
    for i in positions:
        words[i] = "edited"
    return " ".join(words)


def _crawls(seed: int = 3) -> tuple[list[dict], list[dict], dict[str, str]]:
    """Crawls A and B, and each copy in B with the A document it copies."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    a = [{"id": f"a{i:04d}", "text": random_text(rng, vocabulary, 120)} for i in range(A_DOCS)]
    sources = rng.sample(range(A_DOCS), EXACT + NEAR + FAR)
    b, copied = [], {}
    for n, i in enumerate(sources):
        text = a[i]["text"]
        if n < EXACT:
            text = text.upper()
        elif n < EXACT + NEAR:
            text = edit_words(rng, text, 1)
        else:
            text = edit_words(rng, text, 12)
        b.append({"id": f"b{n:04d}", "text": text})
        copied[f"b{n:04d}"] = a[i]["id"]
    b += [{"id": f"b{n:04d}", "text": random_text(rng, vocabulary, 120)} for n in range(len(b), len(b) + NEW)]
    rng.shuffle(b)
    unused = sorted(set(range(A_DOCS)) - set(sources))[:CHAINS]
    heads = [{"id": f"c{n:04d}", "text": _edited(a[i]["text"], [20, 60, 100])} for n, i in enumerate(unused)]
    tails = [{"id": f"d{n:04d}", "text": _edited(a[i]["text"], [20])} for n, i in enumerate(unused)]
    copied.update({f"d{n:04d}": a[i]["id"] for n, i in enumerate(unused)})
    return a, heads + b + tails, copied


def _shingles(text: str) -> set:
    words = re.findall(r"[a-z]+", text.lower())
    return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}


def _truth(a: list[dict], b: list[dict]) -> set[str]:
    """B's documents whose exact Jaccard with some A document reaches the threshold."""
    sets = [_shingles(d["text"]) for d in a]
    found = set()
    for doc in b:
        mine = _shingles(doc["text"])
        if any(len(mine & s) / len(mine | s) >= THRESHOLD for s in sets):
            found.add(f"web/{doc['id']}")  # as the source stage names it
    return found


def _run(tmp_path, name: str, files: dict[str, list[dict]], **dedup):
    for file, rows in files.items():
        write_jsonl(tmp_path / f"{name}-in" / file, rows)
    off = {"enabled": False}
    config = parse_config(
        {
            "run_dir": str(tmp_path / name),
            "sources": [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / f"{name}-in")], "id_field": "id"}],
            "shard_docs": 10,
            "lang": off,
            "filter": off,
            "tokenize": off,
            "dedup": {"threshold": THRESHOLD, **dedup},
        }
    )
    return config, curate_in_process(config)


def _kept(run_dir) -> set[str]:
    run = RunFiles.open(run_dir)
    return set(pl.concat([run._read("lines", p) for p in run.outputs("lines", "docs")])["id"].to_list())


@pytest.fixture(scope="module")
def crawls(tmp_path_factory):
    """A run, its index, and B deduplicated against it."""
    tmp_path = tmp_path_factory.mktemp("crawls")
    a, b, copied = _crawls()
    _run(tmp_path, "crawl-a", {"a.jsonl": a})
    index = tmp_path / "index"
    added = add_to_index(index, tmp_path / "crawl-a", partitions=4)
    config, stats = _run(tmp_path, "crawl-b", {"b.jsonl": b}, index=str(index))
    return {"tmp": tmp_path, "a": a, "b": b, "copied": copied, "index": index, "added": added, "stats": stats}


def test_the_index_removes_exactly_the_overlap(crawls):
    truth = _truth(crawls["a"], crawls["b"])
    assert len(truth) == EXACT + NEAR + CHAINS  # the far copies and the chains' heads stay under
    matches = pl.read_parquet(crawls["tmp"] / "crawl-b" / "dedup" / "index_matches.parquet")
    found = set(matches.filter(pl.col("via_id").is_null())["id"].to_list())
    precision = len(found & truth) / len(found)
    recall = len(found & truth) / len(truth)
    assert 2 * precision * recall / (precision + recall) >= 0.99
    assert found == truth
    through = matches.filter(pl.col("via_id").is_not_null())
    assert sorted(through["id"].to_list()) == [f"web/c{n:04d}" for n in range(CHAINS)]
    assert sorted(through["via_id"].to_list()) == [f"web/d{n:04d}" for n in range(CHAINS)]
    assert through["jaccard"].round(3).to_list() == [0.771] * CHAINS
    removed = RunFiles.open(crawls["tmp"] / "crawl-b").removed("dedup")
    assert set(removed.filter(pl.col("rule") == RULE_IN_INDEX)["id"].to_list()) == truth | set(through["id"])
    counts = crawls["stats"]["dedup"]
    assert counts["counts"]["fired|dedup.in_index"] == len(truth) + CHAINS
    assert counts["dedup"]["index"]["removed"] == len(truth) + CHAINS
    assert counts["dedup"]["index"]["indexed_docs"] == A_DOCS
    named = dict(zip(matches["id"].to_list(), matches["matched_id"].to_list()))
    assert all(named[doc] == f"web/{crawls['copied'][doc[4:]]}" for doc in truth)
    assert set(matches["matched_run"].to_list()) == {"crawl-a"}
    exact = set(matches.filter(pl.col("exact"))["id"].to_list())
    assert len(exact) == EXACT


def test_the_kept_set_is_that_of_one_run_over_both(crawls):
    tmp = crawls["tmp"]
    _run(tmp, "both", {"a.jsonl": crawls["a"], "b.jsonl": crawls["b"]})
    together = _kept(tmp / "both")
    assert together == _kept(tmp / "crawl-a") | _kept(tmp / "crawl-b")
    assert len(_kept(tmp / "crawl-b")) == len(crawls["b"]) - EXACT - NEAR - 2 * CHAINS


def test_adding_the_same_run_twice_changes_nothing(crawls):
    index = crawls["index"]
    before = (index / "index.json").read_bytes()
    files = sorted(p for p in index.rglob("*") if p.is_file())
    again = add_to_index(index, crawls["tmp"] / "crawl-a")
    assert again["added"] is False and crawls["added"]["added"] is True
    assert (index / "index.json").read_bytes() == before
    assert sorted(p for p in index.rglob("*") if p.is_file()) == files
    shown = index_summary(index)
    assert shown["docs"] == A_DOCS and [r["name"] for r in shown["runs"]] == ["crawl-a"]


def test_an_add_killed_in_the_middle_resumes_to_the_same_index(crawls, tmp_path, monkeypatch):
    copy_kept = index_format.copy_kept
    calls = []

    def killed(*args):
        calls.append(args)
        if len(calls) == 19:  # the first block's 16 shards, and two of the second's, written
            raise KeyboardInterrupt
        return copy_kept(*args)

    monkeypatch.setattr(index_format, "copy_kept", killed)
    index = tmp_path / "index"
    with pytest.raises(KeyboardInterrupt):
        add_to_index(index, crawls["tmp"] / "crawl-a", partitions=4)
    assert DedupIndex(index).manifest() is None  # nothing published
    assert len(list((index / "docs").rglob("*.parquet"))) == 18
    with pytest.raises(DedupIndexError, match="no dedup index"):
        index_summary(index)
    monkeypatch.setattr(index_format, "copy_kept", copy_kept)
    assert add_to_index(index, crawls["tmp"] / "crawl-a")["added"] is True
    assert not (index / "pending").exists() or not any((index / "pending").iterdir())
    clean = crawls["index"]
    made = sorted(p.relative_to(index) for p in index.rglob("*") if p.is_file() and "pending" not in p.parts)
    assert made == sorted(p.relative_to(clean) for p in clean.rglob("*") if p.is_file() and "pending" not in p.parts)
    assert all(filecmp.cmp(index / p, clean / p, shallow=False) for p in made)


def test_an_index_of_other_settings_is_refused(crawls, tmp_path):
    write_jsonl(tmp_path / "in" / "b.jsonl", crawls["b"][:5])
    with pytest.raises(ConfigError, match=r"^dedup.index: the dedup index was made with other settings \(ngram 5"):
        parse_config(
            {
                "run_dir": str(tmp_path / "run"),
                "sources": [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")], "id_field": "id"}],
                "lang": {"enabled": False},
                "filter": {"enabled": False},
                "dedup": {"ngram": 4, "index": str(crawls["index"])},
            }
        )
    _run(tmp_path, "other", {"b.jsonl": crawls["b"][:20]}, num_perm=64)
    with pytest.raises(DedupIndexError, match="num_perm 128 in the index, 64 in run other"):
        add_to_index(crawls["index"], tmp_path / "other")


def test_an_index_on_an_fsspec_file_system_gives_the_same_matches(crawls, tmp_path):
    remote = "memory://dedup-index-test/index"
    assert add_to_index(remote, crawls["tmp"] / "crawl-a", partitions=4)["docs"] == A_DOCS
    _run(tmp_path, "crawl-b", {"b.jsonl": crawls["b"]}, index=remote)
    here = pl.read_parquet(tmp_path / "crawl-b" / "dedup" / "index_matches.parquet")
    local = pl.read_parquet(crawls["tmp"] / "crawl-b" / "dedup" / "index_matches.parquet")
    assert here.height == EXACT + NEAR + 2 * CHAINS
    assert here.equals(local)


def test_a_run_added_to_the_index_redoes_the_dedup_stage(crawls, tmp_path):
    from pipeline.stages.rerun import plan_run

    index = tmp_path / "index"
    add_to_index(index, crawls["tmp"] / "crawl-a")
    config, stats = _run(tmp_path, "crawl-b", {"b.jsonl": crawls["b"][:40]}, index=str(index))
    assert stats["dedup"]["dedup"]["index"]["runs"] == 1
    assert {p.stage: p.action for p in plan_run(config).stages}["dedup"] == "kept"
    _run(tmp_path, "crawl-c", {"c.jsonl": [{"id": "c1", "text": crawls["b"][0]["text"]}]})
    add_to_index(index, tmp_path / "crawl-c")
    plan = {p.stage: p for p in plan_run(config).stages}["dedup"]
    assert plan.action == "reruns" and "dedup.index" in plan.why


@pytest.mark.parametrize("partitions", [3, 8])
def test_the_matches_do_not_depend_on_the_partitions_of_either_side(crawls, tmp_path, partitions):
    """Run partitions 3 against the index's 4 (units: the run's, each reading the index's
    partitions that meet it, here all four filtered) and 8 (each reads one)."""
    from pipeline.dedup.engine import find_duplicates
    from pipeline.dedup.index import IndexView
    from pipeline.dedup.indexed import match_index
    from pipeline.dedup.minhash import MinHashParams
    from pipeline.formats.manifest import stage_outputs

    index = DedupIndex(crawls["index"])
    view = IndexView.of(index, index.opened())
    inputs = stage_outputs(crawls["tmp"] / "crawl-b", "source")
    clusters = tmp_path / "clusters.parquet"
    find_duplicates(inputs, tmp_path / "work", MinHashParams(threshold=THRESHOLD), partitions, "first", clusters)
    found = match_index(tmp_path / "work", view, len(inputs), partitions, THRESHOLD, clusters, tmp_path / "m.parquet")
    assert found["partitions"] == 4 and found["removed"] == EXACT + NEAR + 2 * CHAINS
    local = pl.read_parquet(crawls["tmp"] / "crawl-b" / "dedup" / "index_matches.parquet")
    assert pl.read_parquet(tmp_path / "m.parquet").equals(local)


def test_an_index_of_exact_hashes_only_removes_the_exact_copies(crawls, tmp_path):
    _run(tmp_path, "crawl-a", {"a.jsonl": crawls["a"]}, near=False)
    add_to_index(tmp_path / "index", tmp_path / "crawl-a")
    assert index_summary(tmp_path / "index")["settings"]["near"] is False
    _run(tmp_path, "crawl-b", {"b.jsonl": crawls["b"]}, near=False, index=str(tmp_path / "index"))
    matches = pl.read_parquet(tmp_path / "crawl-b" / "dedup" / "index_matches.parquet")
    assert matches.height == EXACT and matches["exact"].all() and (matches["jaccard"] == 1.0).all()


def test_url_dedup_reaches_the_index_and_an_index_without_urls_is_refused(tmp_path):
    """With URL dedup on in both runs, a B document with the URL of a document A kept (whatever its
    text) is removed as in the index, its match recorded as a URL one; an index of a run without URL
    dedup refuses a run with it."""
    rng = random.Random(5)
    vocabulary = make_vocabulary(rng)
    a = [
        {"id": f"a{i}", "text": random_text(rng, vocabulary, 80), "url": f"https://site.example/{i}"} for i in range(20)
    ]
    b = [
        {
            "id": "b-same-url",
            "text": random_text(rng, vocabulary, 80),
            "url": "http://www.site.example/3/?utm_source=x",
        },
        {"id": "b-other-url", "text": random_text(rng, vocabulary, 80), "url": "https://site.example/99"},
        {"id": "b-no-url", "text": random_text(rng, vocabulary, 80)},
    ]

    def run(name, rows, **dedup):
        write_jsonl(tmp_path / f"{name}-in" / "in.jsonl", rows)
        source = {"name": "web", "reader": "jsonl", "paths": [str(tmp_path / f"{name}-in")], "id_field": "id"}
        config = parse_config(
            {
                "run_dir": str(tmp_path / name),
                "sources": [{**source, "url_field": "url"}],
                "lang": {"enabled": False},
                "filter": {"enabled": False},
                "tokenize": {"enabled": False},
                "dedup": {"threshold": THRESHOLD, **dedup},
            }
        )
        return curate_in_process(config)

    run("a", a, url=True)
    add_to_index(tmp_path / "index", tmp_path / "a")
    assert json.loads((tmp_path / "index" / "index.json").read_text())["keys"] == ["exact", "near", "url"]
    stats = run("b", b, url=True, index=str(tmp_path / "index"))
    assert stats["dedup"]["removed"] == {RULE_IN_INDEX: 1}
    matches = pl.read_parquet(tmp_path / "b" / "dedup" / "index_matches.parquet")
    assert matches.select("id", "matched_id", "url", "exact").rows() == [("web/b-same-url", "web/a3", True, False)]
    assert matches["jaccard"][0] < THRESHOLD  # matched by its URL alone

    run("plain", a)
    add_to_index(tmp_path / "plain-index", tmp_path / "plain")
    with pytest.raises((ConfigError, DedupIndexError), match="url False in the index, True in"):
        run("b2", b, url=True, index=str(tmp_path / "plain-index"))
