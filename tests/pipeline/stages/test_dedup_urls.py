"""URL dedup (``[dedup] url = true``) end to end in the dedup stage: documents with the same
normalized URL keep one by the stage's keep rule, the others are removed as ``dedup.url`` with
their kept document; documents without a URL are never URL duplicates; the URL hashes are routed
to partitions as the band keys are."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

import pipeline.stages.dedup as stage
from pipeline.config import ConfigError
from pipeline.dedup.engine import find_duplicates
from pipeline.dedup.lsh import URL_BAND
from pipeline.dedup.urls import url_hashes
from pipeline.formats.documents import RunLayout
from pipeline.io.storage import read_parquet
from pipeline.io.writer import write_json
from report.inspect import inspect_document
from tests.helpers import run_units, source_config, write_jsonl
from tests.pipeline.dedup.test_dedup import make_vocabulary, random_text


def _corpus() -> list[dict]:
    rng = random.Random(11)
    vocabulary = make_vocabulary(rng)
    rows = [
        {"id": f"d{i}", "text": random_text(rng, vocabulary, 80), "url": f"https://www.site.com/p/{i}/?utm_source=feed"}
        for i in range(24)
    ]
    rows += [
        # Other text, the URL of d5 once normalized: a URL copy of d5.
        {"id": "u5", "text": random_text(rng, vocabulary, 80), "url": "http://site.com/p/5#comments"},
        # Longer text with the URL of d7: kept under the "longest" rule.
        {"id": "u7", "text": random_text(rng, vocabulary, 200), "url": "HTTP://SITE.COM:80/p/7"},
        # d3's text without a URL: an exact copy of d3, as without URL dedup.
        {"id": "x3", "text": rows[3]["text"], "url": None},
        # d4's text and URL: an exact copy (the text comes first).
        {"id": "x4", "text": rows[4]["text"], "url": "https://site.com/p/4"},
        # u5's text at another URL: in d5's cluster through u5, neither d5's text nor its URL.
        {"id": "c5", "text": None, "url": "http://elsewhere.org/c5"},
        # No URL, a blank one: never URL duplicates, of each other or of anything.
        {"id": "n1", "text": random_text(rng, vocabulary, 80), "url": None},
        {"id": "n2", "text": random_text(rng, vocabulary, 80), "url": "  "},
        {"id": "n3", "text": random_text(rng, vocabulary, 80), "url": ""},
    ]
    rows[-4]["text"] = rows[24]["text"]
    return rows


def _dedup_run(tmp_path, name: str, **dedup):
    rows = _corpus()
    write_jsonl(tmp_path / name / "corpus" / "a.jsonl", [{k: v for k, v in r.items() if v is not None} for r in rows])
    config = source_config(
        tmp_path / name,
        [
            {
                "name": "web",
                "reader": "jsonl",
                "paths": [str(tmp_path / name / "corpus")],
                "id_field": "id",
                "url_field": "url",
            }
        ],
        shard_docs=7,
        dedup=dedup,
    )
    layout = RunLayout(config.run_dir)
    parts = run_units(config)
    write_json(
        {"stage": "source", "docs_out": sum(p["ledger"]["docs_out"] for p in parts)}, layout.stage("source").stats
    )
    write_json({"stages": {}}, layout.manifest)
    stats = stage.run_dedup("source", config)
    root = layout.stage("dedup").root
    removed = pl.read_parquet(root / "removed" / "*.parquet")
    kept = pl.read_parquet(root / "docs" / "*.parquet")
    return config, stats, dict(zip(removed["id"], removed["rule"])), set(kept["id"]), root


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    return _dedup_run(tmp_path_factory.mktemp("urls"), "first", url=True)


def test_url_copies_keep_the_first_and_name_it(first):
    config, stats, removed, kept, root = first
    assert removed == {
        "web/u5": "dedup.url",
        "web/u7": "dedup.url",
        "web/x3": "dedup.exact_duplicate",
        "web/x4": "dedup.exact_duplicate",
        "web/c5": "dedup.near_duplicate",
    }
    assert kept == {f"web/d{i}" for i in range(24)} | {"web/n1", "web/n2", "web/n3"}
    assert stats.removed == {"dedup.url": 2, "dedup.exact_duplicate": 2, "dedup.near_duplicate": 1}
    assert stats.dedup["removed_url"] == 2 and stats.dedup["removed_exact"] == 2 and stats.dedup["removed_near"] == 1
    assert stats.docs_in == 32 and stats.docs_out == 27
    clusters = read_parquet(root / "clusters.parquet")
    five = clusters.filter(pl.col("kept_id") == "web/d5").sort("id")
    assert five["id"].to_list() == ["web/c5", "web/d5", "web/u5"] and five["cluster_size"].to_list() == [3, 3, 3]
    assert five["url"].to_list() == [False, True, True] and five["exact"].to_list() == [False, True, False]
    # The removed record of a URL copy: its Jaccard with the kept document, no threshold.
    records = pl.read_parquet(root / "removed" / "*.parquet").filter(pl.col("rule") == "dedup.url")
    assert records["threshold"].null_count() == 2 and (records["value"] < 0.5).all()


def test_inspect_names_the_kept_document_of_a_url_copy(first):
    config = first[0]
    found = inspect_document(config.run_dir, "web/u5")
    assert found["removed_by"]["rule"] == "dedup.url"
    dedup = found["dedup"]
    assert dedup["kept_id"] == "web/d5" and dedup["url"] and not dedup["exact"]
    assert (dedup["removed_url"], dedup["removed_exact"], dedup["removed_near"]) == (1, 0, 1)


def test_the_keep_rule_chooses_among_url_copies(tmp_path):
    _, stats, removed, kept, _ = _dedup_run(tmp_path, "longest", url=True, keep="longest")
    assert "web/u7" in kept and removed["web/d7"] == "dedup.url"
    assert stats.dedup["removed_url"] == 2


def test_without_url_dedup_url_copies_stay(tmp_path):
    _, stats, removed, kept, root = _dedup_run(tmp_path, "off")
    assert removed == {f"web/{i}": "dedup.exact_duplicate" for i in ("x3", "x4", "c5")}
    assert {"web/u5", "web/u7", "web/d5", "web/d7"} <= kept and "removed_url" not in stats.dedup
    assert not read_parquet(root / "clusters.parquet")["url"].any()


def test_url_dedup_needs_near(tmp_path):
    with pytest.raises(ConfigError, match="url needs near"):
        source_config(
            tmp_path, [{"name": "web", "reader": "jsonl", "paths": ["x"]}], dedup={"url": True, "near": False}
        )


def test_url_hashes_are_routed_by_key_and_the_clusters_do_not_depend_on_partitions(first, tmp_path):
    config = first[0]
    inputs = sorted((RunLayout(config.run_dir).stage("source").root / "docs").glob("*.parquet"))
    params = config.dedup.minhash_params()
    tables = {}
    for partitions in (1, 3):
        work = tmp_path / f"work-{partitions}"
        find_duplicates(inputs, work, params, partitions, "first", work / "clusters.parquet")
        tables[partitions] = read_parquet(work / "clusters.parquet")
        for p in range(partitions):
            keys = pl.read_parquet(work / "bands" / f"part-{p:04d}" / "*.parquet")
            urls = keys.filter(pl.col("band") == URL_BAND)["key"].to_numpy()
            assert (urls % np.uint64(partitions) == p).all()
            if partitions == 1:  # every document with a URL and words, once
                assert len(urls) == 28 and len(np.unique(urls)) == 25
    assert tables[1].equals(tables[3])
    assert tables[1].filter(pl.col("url") & ~pl.col("kept") & ~pl.col("exact")).height == 2
    # The stage's own hash of a normalized URL is the one in the band keys.
    assert url_hashes(["site.com/p/5"]).to_pylist()[0] in set(
        pl.read_parquet(tmp_path / "work-1" / "bands" / "part-0000" / "*.parquet")["key"].to_list()
    )
