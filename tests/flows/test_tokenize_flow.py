"""The tokenize stage: every curated document in a token shard, exactly, resumable."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flows.curate import curate_flow
from pipeline.formats.documents import RunLayout
from pipeline.formats.tokens import decode_documents, load_tokenizer, read_token_shard
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
    from pipeline.tokenizer import train_tokenizer

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
