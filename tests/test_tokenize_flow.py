"""The tokenize stage: every curated document in a token shard, exactly, resumable."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

from flows.curate import curate_flow
from pipeline.core.schema import RunLayout
from pipeline.tokenize import decode_documents, load_tokenizer, read_token_shard
from tests.helpers import source_config, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")

OFF = {"enabled": False}


def test_tokenize_stage_writes_every_curated_document_and_resumes(tmp_path):
    texts = [f"Story {i}: the council met by the river and voted on the budget." for i in range(60)]
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{i}", "text": t} for i, t in enumerate(texts[:35])])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{i}", "text": t} for i, t in enumerate(texts[35:])])
    config = source_config(
        tmp_path,
        [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "in")], "id_field": "id"}],
        lang=OFF,
        filter=OFF,
        dedup=OFF,
        lines=OFF,
        tokenize={"vocab_size": 300},
    )
    stats = curate_flow(config)["tokenize"]
    assert stats["docs_in"] == stats["docs_out"] == 60 and len(stats["shards"]) == 2
    stage = RunLayout(config.run_dir).stage("tokenize")
    tokenizer = load_tokenizer(stage.root / "tokenizer.json")
    decoded, total = [], 0
    for entry in stats["shards"]:
        path = stage.root / "shards" / entry["file"]
        tokens, docs = read_token_shard(path)
        assert entry["tokens"] == len(tokens) and entry["documents"] == docs.height
        total += len(tokens)
        decoded += decode_documents(path, tokenizer)
    assert sorted(decoded) == sorted(texts) and stats["tokens"] == total
    with pa.ipc.open_file(stage.root / "shards" / stats["shards"][0]["file"]) as reader:  # pyarrow alone
        assert reader.schema.metadata[b"group"] == stats["shards"][0]["group"].encode()

    before = {p.name: p.stat().st_mtime_ns for p in (stage.root / "shards").iterdir()}
    assert curate_flow(config)["tokenize"] == stats
    assert {p.name: p.stat().st_mtime_ns for p in (stage.root / "shards").iterdir()} == before


def test_a_given_tokenizer_is_used_as_it_is(tmp_path):
    from pipeline.tokenize import train_tokenizer

    shared = train_tokenizer(["a shared tokenizer for several mixtures"] * 20, tmp_path / "shared.json", vocab_size=280)
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there"}])
    config = source_config(
        tmp_path,
        [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
        lang=OFF,
        filter=OFF,
        dedup=OFF,
        lines=OFF,
        tokenize={"tokenizer": str(shared)},
    )
    stats = curate_flow(config)["tokenize"]
    assert stats["tokenizer"]["path"] == str(shared) and stats["tokenizer"]["vocab_size"] == 280
    assert not (RunLayout(config.run_dir).stage("tokenize").root / "tokenizer.json").exists()


# --- the tokenizer's sample, shard by shard -------------------------------------------------


def _shards(folder, ids: list[str], shards: int) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        mine = ids[s::shards]
        path = folder / f"docs-{s:03d}.parquet"
        pl.DataFrame({"id": mine, "text": [f"text of {i}" for i in mine]}).write_parquet(path)
        paths.append(path)
    return paths


def test_the_tokenizer_sample_is_the_smallest_keys_whatever_the_shards(tmp_path, monkeypatch):
    """The sample is the documents with the smallest seeded keys: the same ids on 1 or 7 shards,
    exactly sample_docs of them, and the same again when the first pass's bound falls short."""
    from pipeline.mix.plan import seeded_id_hash
    from pipeline.stages import tokenize as stage
    from pipeline.stages.units import in_process

    ids = [f"doc-{i:05d}" for i in range(5000)]
    keys = pl.DataFrame({"id": ids, "key": seeded_id_hash(pl.Series(ids), 3, stage._SALT)})
    expected = sorted(keys.sort("key", "id").head(300)["id"].to_list())
    for shards in (1, 7):
        sample = stage.draw_sample(_shards(tmp_path / f"s{shards}", ids, shards), 300, len(ids), 3, in_process)
        assert sample["id"].to_list() == expected
        assert sample["text"].to_list() == [f"text of {i}" for i in expected]
    # Units return a bounded share: about 300 + 10 sqrt(300) + 100 keys of 5,000, not every id.
    found = pl.concat(
        [stage.sample_candidates(p, 3, stage.sample_bound(300, len(ids))) for p in _shards(tmp_path / "b", ids, 4)]
    )
    assert 300 <= found.height < 700
    # A bound that lets too few through: the draw falls back to every key, and finds the same.
    monkeypatch.setattr(stage, "sample_bound", lambda wanted, total: 1 << 50)
    sample = stage.draw_sample(_shards(tmp_path / "short", ids, 3), 300, len(ids), 3, in_process)
    assert sample["id"].to_list() == expected
    # All of them when the sample is as large as the pool.
    assert stage.draw_sample(_shards(tmp_path / "all", ids, 3), 9000, len(ids), 3, in_process).height == 5000
