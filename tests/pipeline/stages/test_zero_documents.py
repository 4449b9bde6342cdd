"""Every stage accepts zero documents: a run whose input is all quarantined (no shard at all) or all
filtered out (shards of zero rows) completes, each stage saying 0 in its counts."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pipeline.formats.documents import DOC_SCHEMA, RunLayout
from pipeline.stages.registry import REGISTRY
from pipeline.stages.shard import ShardJob, stage_unit
from tests.helpers import curate_in_process, source_config, write_jsonl

SHORT = "The cat sat on the mat. It was happy there."  # too short for C4's and Gopher's rules


def _run(tmp_path, records: list) -> dict[str, dict]:
    write_jsonl(tmp_path / "in" / "a.jsonl", records)
    # Texts to exclude from the mixtures: the mix stage's window check runs, over no token shard.
    excluded = write_jsonl(tmp_path / "exclude.jsonl", [{"id": "t1", "text": "a task text to keep out of training"}])
    mixtures = [{"name": "natural"}, {"name": "flat", "temperature": 3.0, "budget_tokens": 1000}]
    config = source_config(
        tmp_path,
        [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
        tokenize={"vocab_size": 300},
        mix={"exclude": [str(excluded)], "group_by": ["source", "lang"], "mixtures": mixtures},
    )
    return curate_in_process(config)


def _zero_after(stats: dict[str, dict], first_empty: str) -> None:
    order = list(REGISTRY)
    assert list(stats) == order
    for name in order[order.index(first_empty) + 1 :]:
        assert (stats[name]["docs_in"], stats[name]["docs_out"]) == (0, 0), name
        assert stats[name]["removed"] == {} and stats[name]["quarantined"] == {}, name
    assert stats["tokenize"]["tokens"] == 0


def test_a_run_of_no_shards_completes_with_zero_counts(tmp_path):
    stats = _run(tmp_path, [{"title": "no text"}, {"title": "none here either"}])
    assert stats["source"]["quarantined"] == {"missing_text": 2} and stats["source"]["docs_out"] == 0
    assert not list(RunLayout(tmp_path / "run").stage("source").docs.glob("*.parquet"))
    _zero_after(stats, "source")
    assert stats["dedup"]["dedup"]["clusters"] == 0 and stats["dedup"]["largest_clusters"] == []


def test_a_run_of_shards_of_zero_rows_completes_with_zero_counts(tmp_path):
    stats = _run(tmp_path, [{"text": f"{SHORT} {i}"} for i in range(5)])
    assert stats["filter"]["docs_in"] == 5 and stats["filter"]["docs_out"] == 0
    layout = RunLayout(tmp_path / "run")
    for name in ("filter", "dedup", "lines"):  # each wrote its shard, of zero rows
        (shard,) = layout.stage(name).docs.glob("*.parquet")
        assert pq.read_metadata(shard).num_rows == 0, name
    _zero_after(stats, "filter")


@pytest.mark.parametrize("stage_name", ["lang", "filter"])
def test_a_shard_stage_unit_on_a_shard_of_zero_rows_writes_a_shard_of_zero_rows(tmp_path, stage_name):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": SHORT}])  # (the config wants an input to exist)
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "in")]}])
    shard = tmp_path / "source-00000-0000.parquet"
    pq.write_table(DOC_SCHEMA.empty_table(), shard)
    stage = RunLayout(config.run_dir).stage(stage_name).make()
    part = stage_unit(ShardJob(stage_name=stage_name, in_path=shard, stage=stage, config=config))
    assert part["ledger"]["docs_in"] == 0 and part["ledger"]["docs_out"] == 0 and part["removed"] is None
    assert pq.read_metadata(stage.docs / shard.name).num_rows == 0
