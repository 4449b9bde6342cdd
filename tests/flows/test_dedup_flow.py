"""The dedup stage in a curation run: planted duplicates found across files, the rest untouched."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from flows.curate import curate_flow
from pipeline.formats.documents import RunLayout
from tests.helpers import source_config, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")

WORDS = (
    "river valley stone bridge market council winter harvest engine signal garden letter station "
    "village morning silver museum theatre doctor island forest train budget report"
).split()


def article(rng: np.random.Generator, n: int = 120) -> str:
    return " ".join(rng.choice(WORDS, n)) + "."


def edited(text: str, positions: list[int]) -> str:
    words = text.split()
    for i in positions:
        words[i] = "changed"
    return " ".join(words)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    originals = [article(rng) for _ in range(40)]
    files = [[], [], []]
    for i, text in enumerate(originals):
        files[i % 3].append({"id": f"o{i}", "text": text})
    files[1].append({"id": "copy-of-o0", "text": originals[0]})  # exact, other file
    files[2].append({"id": "copy-of-o0-again", "text": originals[0]})
    files[2].append({"id": "near-o1", "text": edited(originals[1], [60])})  # one word changed: J ~ 0.92
    files[0].append({"id": "far-o2", "text": edited(originals[2], list(range(0, 120, 6)))})  # J well below 0.8
    root = tmp_path_factory.mktemp("dedup-in")
    for n, records in enumerate(files):
        write_jsonl(root / f"part-{n}.jsonl", records)
    return root


def run(tmp_path, corpus, partitions: int):
    config = source_config(
        tmp_path,
        [{"name": "s", "reader": "jsonl", "paths": [str(corpus)], "id_field": "id"}],
        lang={"enabled": False},
        filter={"enabled": False},
        dedup={"partitions": partitions},
        lines={"enabled": False},
        tokenize={"enabled": False},
        batch_docs=7,
    )
    return config, curate_flow(config)


def test_dedup_removes_planted_duplicates_and_nothing_else(tmp_path, corpus):
    config, stats = run(tmp_path, corpus, partitions=3)
    dedup = stats["dedup"]
    assert list(stats) == ["source", "dedup"] and dedup["docs_in"] == stats["source"]["docs_out"] == 44
    assert dedup["removed"] == {"dedup.exact_duplicate": 2, "dedup.near_duplicate": 1}
    stage = RunLayout(config.run_dir).stage("dedup")
    removed = pl.read_parquet(stage.removed / "*.parquet").sort("id")
    assert removed["id"].to_list() == ["s/copy-of-o0", "s/copy-of-o0-again", "s/near-o1"]
    near = removed.filter(pl.col("id") == "s/near-o1").row(0, named=True)
    assert 0.8 <= near["value"] < 1.0 and near["threshold"] == 0.8

    clusters = pl.read_parquet(stage.root / "clusters.parquet")
    kept = dict(clusters.select("id", "kept_id").iter_rows())
    assert kept["s/copy-of-o0"] == kept["s/copy-of-o0-again"] == "s/o0"  # keep rule "first": o0 is in shard 0
    assert kept["s/near-o1"] == "s/o1" and "s/far-o2" not in kept
    assert dedup["largest_clusters"][0]["size"] == 3 and dedup["largest_clusters"][0]["kept_id"] == "s/o0"
    assert dedup["dedup"]["clusters"] == 2

    assert curate_flow(config)["dedup"] == dedup  # resumed: the same outcome from the work already done


def test_partitions_do_not_change_the_outcome(tmp_path, corpus):
    _, three = run(tmp_path / "three", corpus, partitions=3)
    config, one = run(tmp_path / "one", corpus, partitions=1)
    assert one["dedup"]["removed"] == three["dedup"]["removed"]
    assert one["dedup"]["largest_clusters"] == three["dedup"]["largest_clusters"]


def test_lines_found_in_many_documents_are_cut_from_the_sources_in_scope(tmp_path):
    rng = np.random.default_rng(1)
    footer = "Copyright 2024 Example Media. All rights reserved."
    web = [{"id": f"w{i}", "text": f"{article(rng, 30)}\n{footer}"} for i in range(5)]
    web.append({"id": "only-footer", "text": f"{footer}\n  copyright 2024 example media, all rights reserved"})
    chat = [{"id": f"c{i}", "text": f"How are you?\n{article(rng, 10)}"} for i in range(5)]
    write_jsonl(tmp_path / "in" / "web.jsonl", web)
    write_jsonl(tmp_path / "chat" / "chat.jsonl", chat)
    config = source_config(
        tmp_path,
        [
            {"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")], "id_field": "id"},
            {"name": "chat", "reader": "jsonl", "paths": [str(tmp_path / "chat")], "id_field": "id"},
        ],
        lang={"enabled": False},
        filter={"enabled": False},
        dedup={"enabled": False},
        lines={"max_docs": 3, "partitions": 2, "sources": ["web"]},
        tokenize={"enabled": False},
    )
    stats = curate_flow(config)["lines"]
    # the footer (normalized: case and punctuation fold) and the greeting; one partition's documents
    assert stats["lines"] == {"frequent_lines": 2, "partitions": 1}
    assert stats["removed"] == {"filter.empty_after_rewrite": 1}
    assert stats["counts"]["repeated_lines.lines_removed"] == 7  # 5 footers, both lines of only-footer
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("lines").docs / "*.parquet")
    texts = dict(docs.select("id", "text").iter_rows())
    assert all(footer not in texts[f"web/w{i}"] for i in range(5))
    assert all(texts[f"chat/c{i}"].startswith("How are you?\n") for i in range(5))  # out of scope
    removed = pl.read_parquet(RunLayout(config.run_dir).stage("lines").removed / "*.parquet")
    assert removed.select("id", "stage").rows() == [("web/only-footer", "lines")]


def test_keep_rule_quality_keeps_the_best_scored_document_of_each_cluster(tmp_path, corpus):
    from pipeline.filters.quality import train_quality_classifier

    rng = np.random.default_rng(2)
    model = tmp_path / "quality"
    train_quality_classifier(
        [article(rng) for _ in range(60)],
        [" ".join(rng.choice(["buy", "cheap", "click", "free", "now"], 40)) for _ in range(60)],
        model,
        seed=0,
    )
    config = source_config(
        tmp_path,
        [{"name": "s", "reader": "jsonl", "paths": [str(corpus)], "id_field": "id"}],
        lang={"enabled": False},
        lines={"enabled": False},
        filter={"filters": ["quality"], "params": {"quality": {"model": str(model), "threshold": 0.0}}},
        dedup={"keep": "quality", "partitions": 2},
    )
    stats = curate_flow(config)
    assert stats["dedup"]["removed"] == {"dedup.exact_duplicate": 2, "dedup.near_duplicate": 1}
    layout = RunLayout(config.run_dir)
    scores = dict(pl.read_parquet(layout.stage("filter").docs / "*.parquet").select("id", "quality_score").iter_rows())
    clusters = pl.read_parquet(layout.stage("dedup").root / "clusters.parquet")
    for members in clusters.partition_by("cluster"):
        kept = members.filter(pl.col("kept"))["id"].item()
        assert scores[kept] == max(scores[i] for i in members["id"])


def test_keep_rule_quality_needs_the_quality_filter(tmp_path, corpus):
    from pipeline.formats.configfile import ConfigError

    with pytest.raises(ConfigError, match='dedup.keep = "quality" needs the "quality" filter'):
        source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(corpus)]}], dedup={"keep": "quality"})
