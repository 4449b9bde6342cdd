"""The mix stage as a library call (pipeline.stages.mix.run_mix), without Prefect: its ledger, its
mixtures, the units it hands to its runner, and a resume after a kill that writes the same bytes."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import polars as pl
from rich.console import Console

from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import read_manifest
from pipeline.io.owner import RECORD
from pipeline.stages.mix import run_mix
from pipeline.stages.units import in_process, run_block
from report.console import print_mixtures
from tests.helpers import mix_config, tokenized_run, write_jsonl

WORDS = "river council budget market school harbour winter garden station bridge museum library voted".split()


def _run(tmp_path):
    rng = random.Random(3)
    news = {f"n{i}": " ".join(rng.choice(WORDS) for _ in range(80)) for i in range(40)}
    for i in range(8):  # near copies under ids of their own
        words = news[f"n{i}"].split()
        words[40] = "changed"
        news[f"n{i}-copy"] = " ".join(words)
    chat = {f"c{i}": " ".join(rng.choice(WORDS) for _ in range(10)) for i in range(30)}
    write_jsonl(tmp_path / "news" / "a.jsonl", [{"id": k, "text": v} for k, v in news.items()])
    write_jsonl(tmp_path / "chat" / "a.jsonl", [{"id": k, "text": v} for k, v in chat.items()])
    config = mix_config(
        tmp_path,
        [
            {"name": "news", "reader": "jsonl", "paths": [str(tmp_path / "news")], "id_field": "id"},
            {"name": "chat", "reader": "jsonl", "paths": [str(tmp_path / "chat")], "id_field": "id"},
        ],
        mix={
            "group_by": ["source"],
            "validation_fraction": 0.3,
            "shard_tokens": 2_000,
            "mixtures": [
                {"name": "natural"},
                {"name": "flat", "temperature": float("inf"), "max_epochs": 3.0, "budget_tokens": 6_000},
            ],
        },
    )
    return config, tokenized_run(config), len(news) + len(chat)


def _digest(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("inputs.json", RECORD)  # the record of what was written grows
    }


def test_run_mix_in_process_accounts_for_every_document_and_resumes_to_the_same_bytes(tmp_path):
    config, previous, total = _run(tmp_path)
    calls: Counter = Counter()  # jobs run, by unit function
    tasks: Counter = Counter()  # units handed to the runner (a task each in a flow), by unit function
    steps: list[set[str]] = []  # the unit functions of each step (each waits for the one before)

    def recording(label, fn, jobs):
        inner = [(block.fn, block.jobs) for block in jobs] if fn is run_block else [(fn, [job]) for job in jobs]
        for unit, block in inner:
            calls[unit.__name__] += len(block)
            tasks[unit.__name__] += 1
        steps.append({unit.__name__ for unit, _ in inner})
        return in_process(label, fn, jobs)

    stats = run_mix(previous, config, recording)
    root = RunLayout(config.run_dir).stage("mix").root
    documents = pl.read_parquet(root / "documents.parquet")
    assert stats.docs_in == total == documents.height
    assert stats.train_documents + stats.validation_documents + sum(stats.removed.values()) == total
    assert stats.removed.get("validation_near_duplicate", 0) == (documents["split"] == "contaminated").sum()
    shards = len(list(RunLayout(config.run_dir).stage("source").docs.glob("*.parquet")))
    written = sum(
        len(read_manifest(root / m)["train"]) + len(read_manifest(root / m)["validation"]) for m in stats.mixtures
    )
    # a scan, split, near-duplicate search, sides and routing unit per block of shards, one file of
    # documents and one plan per mixture, one write per output shard
    per_block = ("scan_block", "split_candidates", "block_matches", "shard_sides", "route_copies")
    assert {k: calls[k] for k in per_block} == dict.fromkeys(per_block, -(-shards // 16))  # a unit per 16 shards
    assert (calls["concat_files"], calls["write_shard"]) == (3, written)
    assert written > 1 and tasks["write_shard"] == -(-written // 16)  # the writes handed over 16 at a time
    # the files of documents and plans beside the writing order; both mixtures' shards in one step
    assert {"concat_files", "cut_ranges"} in steps and sum("write_shard" in step for step in steps) == 1
    for name, summary in stats.mixtures.items():
        found = read_manifest(root / name)
        assert found["tokens_taken"] == summary["tokens_taken"] == sum(e["tokens"] for e in found["train"])
        assert sum(e["documents"] for e in found["validation"]) == stats.validation_documents
    # the budget, each group within half of one document (sample_plan takes whole documents)
    assert stats.mixtures["flat"]["tokens_taken"] <= 6_000 + documents["tokens"].max()
    before = _digest(root)

    # Killed midway through writing: one shard's file and record gone, the other mixture's manifest
    # not yet written. The next run writes only what is missing, byte for byte as before.
    flat = read_manifest(root / "flat")
    (root / "flat" / flat["train"][0]["file"]).unlink()
    (root / "parts" / f"flat.{flat['train'][0]['file'].replace('/', '.').removesuffix('.arrow')}.json").unlink()
    (root / "natural" / "manifest.json").unlink()
    calls.clear()
    assert run_mix(previous, config, recording) == stats
    assert calls["write_shard"] == 1
    assert _digest(root) == before


def test_a_pool_held_out_whole_gives_empty_mixtures_that_say_so(tmp_path):
    """Every document in validation (fraction 0.999, no cap): each mixture has no training shard,
    an empty plan and a report of nothing taken; the ledger still accounts for every document."""
    config, previous, total = _run(tmp_path)
    mix = config.mix.model_copy(update={"validation_fraction": 0.999, "validation_max_docs": None})
    stats = run_mix(previous, config.model_copy(update={"mix": mix}))
    root = RunLayout(config.run_dir).stage("mix").root
    documents = pl.read_parquet(root / "documents.parquet")
    assert documents.height == total and stats.train_documents == 0
    assert stats.validation_documents + sum(stats.removed.values()) == total
    for name in ("natural", "flat"):
        found = read_manifest(root / name)
        assert found["train"] == [] and found["tokens_taken"] == 0
        assert sum(e["documents"] for e in found["validation"]) == stats.validation_documents
        assert pl.read_parquet(root / name / "plan.parquet").height == 0


def test_a_small_group_holds_out_its_minimum_and_a_thin_split_warns(tmp_path):
    """At a fraction of 1%, the 30 documents of chat would hold out none: the minimum holds out 7
    (a quarter, under validation_min_docs 10); the split, too small to measure, says so in the
    stage's stats and under the run's mixture table."""
    config, previous, _ = _run(tmp_path)
    mix = config.mix.model_copy(update={"validation_fraction": 0.01, "decontaminate": False})
    stats = run_mix(previous, config.model_copy(update={"mix": mix}))
    documents = pl.read_parquet(RunLayout(config.run_dir).stage("mix").root / "documents.parquet")
    held = dict(documents.filter(pl.col("split") == "validation").group_by("group").len().iter_rows())
    assert held == {"chat": 7, "news": 10}
    tokens = sum(g["validation_tokens"] for g in stats.mixtures["natural"]["groups"].values())
    assert stats.warnings == [
        f"mix: the validation split is too small to measure: 17 documents and {tokens:,} tokens in all "
        "(under 10,000); under 10 held-out documents in chat (7 of 30); raise mix.validation_fraction or "
        "mix.validation_min_docs, or add documents"
    ]
    out = Console(record=True, width=300)
    print_mixtures(out, stats)
    assert f"warning: {stats.warnings[0]}" in out.export_text()
    # A split the config turns off (fraction 0) holds out nothing and warns of nothing.
    mix = config.mix.model_copy(update={"validation_fraction": 0.0})
    stats = run_mix(previous, config.model_copy(update={"mix": mix}))
    assert stats.validation_documents == 0 and stats.warnings == []
