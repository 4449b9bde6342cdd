"""Re-hydration in the mix stage (``[mix.rehydrate]``, FineWeb-2's upsampling by duplicate count):
each kept training document counts as copies of itself by the size of the duplicate cluster it
stood for (dedup/clusters.parquet), by bins and under a cap; the plan, the shards and the stats
say how many copies each document got."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from pipeline.config import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import read_manifest
from pipeline.io.writer import write_json
from pipeline.mix.rehydrate import FINEWEB2_BINS, copies_by_cluster_size
from pipeline.stages.dedup import run_dedup
from pipeline.stages.mix import run_mix
from pipeline.stages.tokenize import run_tokenize
from tests.helpers import mix_config, run_units, write_jsonl

WORDS = "river council budget market school harbour winter garden station bridge museum library voted".split()
# Original -> exact copies of it under ids of their own (cluster size = copies + 1).
COPIES = {"o0": 9, "o1": 3, "o2": 2, "o3": 1, "o5": 119}


def test_copies_by_bin_and_cap():
    sizes = np.array([1, 2, 3, 4, 5, 99, 100, 999, 1000, 5000])
    assert copies_by_cluster_size(sizes, FINEWEB2_BINS, 8).tolist() == [1, 2, 3, 3, 5, 5, 8, 8, 1, 1]
    assert copies_by_cluster_size(sizes, FINEWEB2_BINS, 4).tolist() == [1, 2, 3, 3, 4, 4, 4, 4, 1, 1]
    assert copies_by_cluster_size(sizes, None, 6).tolist() == [1, 2, 3, 4, 5, 6, 6, 6, 6, 6]
    assert copies_by_cluster_size(sizes, {3: 2}, 8).tolist() == [1, 1, 2, 2, 2, 2, 2, 2, 2, 2]  # under every bin: 1


def _mixed(tmp_path, rehydrate: dict | None, **mixture):
    rng = random.Random(5)
    rows = []
    for i in range(20):
        text = " ".join(rng.choice(WORDS) for _ in range(60))
        rows.append({"id": f"o{i}", "text": text})
        rows += [{"id": f"o{i}-copy{k}", "text": text} for k in range(COPIES.get(f"o{i}", 0))]
    write_jsonl(tmp_path / "news" / "a.jsonl", rows)
    mix = {
        "validation_fraction": 0.0,
        "validation_min_docs": 0,
        "decontaminate": False,
        "mixtures": [{"name": "all"}, {"name": "half", **mixture}],
    }
    if rehydrate is not None:
        mix["rehydrate"] = rehydrate
    config = mix_config(
        tmp_path,
        [{"name": "news", "reader": "jsonl", "paths": [str(tmp_path / "news")], "id_field": "id"}],
        mix=mix,
        dedup={"enabled": True},
        shard_docs=25,
    )
    layout = RunLayout(config.run_dir)
    parts = run_units(config)
    write_json(
        {"stage": "source", "docs_out": sum(p["ledger"]["docs_out"] for p in parts)}, layout.stage("source").stats
    )
    write_json({"stages": {}}, layout.manifest)
    run_dedup("source", config)
    run_tokenize("dedup", config)
    stats = run_mix("dedup", config)
    return config, stats, layout.stage("mix").root


@pytest.fixture(scope="module")
def fineweb2(tmp_path_factory):
    rehydrate = {"bins": {str(k): v for k, v in FINEWEB2_BINS.items()}, "max_copies": 6}
    return _mixed(tmp_path_factory.mktemp("fineweb2"), rehydrate, budget_tokens=3_000)


def test_each_document_is_repeated_by_its_clusters_bin_under_the_cap(fineweb2):
    _, stats, root = fineweb2
    plan = pl.read_parquet(root / "all" / "plan.parquet")
    repeats = dict(zip(plan["id"], plan["repeats"]))
    # Sizes 10, 4, 3, 2 and 120: bins 5, 3, 3, 2 and 8, the last capped at 6; the others are unique.
    expected = {f"news/o{i}": 1 for i in range(20)} | {
        "news/o0": 5,
        "news/o1": 3,
        "news/o2": 3,
        "news/o3": 2,
        "news/o5": 6,
    }
    assert repeats == expected
    tokens = dict(zip(plan["id"], plan["tokens"]))
    rehydrated = sum(tokens[i] * n for i, n in expected.items())
    found = read_manifest(root / "all")
    assert found["tokens_taken"] == rehydrated == sum(e["tokens"] for e in found["train"])
    assert sum(e["documents"] for e in found["train"]) == sum(expected.values()) == 34
    assert stats.extra["rehydration"] == {
        "bins": {"1": 1, "2": 2, "3": 3, "5": 5, "100": 8, "1000": 1},
        "max_copies": 6,
        "documents_by_copies": {"1": 15, "2": 1, "3": 2, "5": 1, "6": 1},
        "tokens": sum(tokens.values()),
        "rehydrated_tokens": rehydrated,
    }
    assert stats.mixtures["all"]["groups"]["news"]["tokens_available"] == rehydrated


def test_a_budget_takes_whole_documents_with_all_their_copies(fineweb2):
    _, stats, root = fineweb2
    plan = pl.read_parquet(root / "half" / "plan.parquet")
    everything = pl.read_parquet(root / "all" / "plan.parquet").select("id", copies="repeats")
    both = plan.join(everything, on="id")
    assert ((both["repeats"] == 0) | (both["repeats"] == both["copies"])).all()
    taken = int((plan["tokens"] * plan["repeats"]).sum())
    assert taken == stats.mixtures["half"]["tokens_taken"] == read_manifest(root / "half")["tokens_taken"]
    assert 3_000 - plan["tokens"].max() * 6 <= taken <= 3_000 + plan["tokens"].max() * 6


def test_copies_as_the_cluster_size_up_to_the_cap(tmp_path):
    _, stats, root = _mixed(tmp_path, {"max_copies": 3}, max_epochs=2.0, budget_tokens=10**6)
    plan = pl.read_parquet(root / "all" / "plan.parquet")
    repeats = dict(zip(plan["id"], plan["repeats"]))
    assert [repeats[f"news/o{i}"] for i in (0, 1, 2, 3, 4, 5)] == [3, 3, 3, 2, 1, 3]
    assert stats.extra["rehydration"]["documents_by_copies"] == {"1": 15, "2": 1, "3": 4}
    # Two epochs of the re-hydrated pool at most: each document twice its copies.
    half = pl.read_parquet(root / "half" / "plan.parquet")
    assert dict(zip(half["id"], half["repeats"])) == {i: 2 * n for i, n in repeats.items()}


def test_without_rehydration_every_document_once(tmp_path):
    _, stats, root = _mixed(tmp_path, None)
    plan = pl.read_parquet(root / "all" / "plan.parquet")
    assert plan["repeats"].to_list() == [1] * 20 and "rehydration" not in stats.extra


def test_rehydration_needs_dedup(tmp_path):
    with pytest.raises(ConfigError, match="enable dedup"):
        mix_config(tmp_path, [{"name": "news", "reader": "jsonl", "paths": ["x"]}], mix={"rehydrate": {}})


def test_the_report_shows_the_copies(fineweb2):
    from pipeline.stages.run import RunFiles
    from report.build import _rehydration_line

    config, stats, _ = fineweb2
    line = _rehydration_line(RunFiles(RunLayout(config.run_dir).root).stats["mix"])
    assert 'data-stat="mix.rehydration.documents_by_copies.6"' in line and "at most 6 copies" in line
    assert _rehydration_line(stats.__class__("mix", 0, 0)) == ""
