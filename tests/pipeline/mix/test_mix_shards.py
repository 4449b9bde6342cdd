"""The mix stage computed shard by shard (pipeline.mix.shards) against the same plan computed over
the whole pool at once with pipeline.mix.plan: the groups, the validation split, the repeats of
every document, the writing order and the cut into output shards; and the same bytes whatever the
number of units, key ranges and sampling buckets."""

from __future__ import annotations

import hashlib
import random
import shutil

import numpy as np
import polars as pl
import pytest

import pipeline.mix.shards as shards
import pipeline.stages.mix as stage
from pipeline.formats.documents import RunLayout
from pipeline.formats.hashing import seeded_id_hash
from pipeline.formats.mixture import read_manifest
from pipeline.formats.tokens import read_token_shard
from pipeline.io.owner import RECORD
from pipeline.mix.plan import assign_groups, cap_epochs, group_sizes, sample_plan, split_validation, temperature_weights
from pipeline.stages.mix import run_mix
from tests.helpers import mix_config, tokenized_run, write_jsonl

WORDS = "river council budget market school harbour winter garden station bridge museum library voted".split()
MIXTURES = [
    {"name": "natural"},
    {"name": "flat", "temperature": float("inf"), "max_epochs": 3.0, "budget_tokens": 9_000},
    {"name": "small", "temperature": 2.0, "budget_tokens": 1_500},
]


def _pool(tmp_path):
    """Three sources of uneven lengths in shards of 7 documents; the smallest source is under the
    min_share and mixes as other."""
    rng = random.Random(5)
    sources = {"news": (70, 30, 120), "chat": (45, 10, 40), "wiki": (12, 20, 60)}
    specs = []
    for name, (count, shortest, longest) in sources.items():
        rows = [
            {"id": f"{name}{i}", "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(shortest, longest)))}
            for i in range(count)
        ]
        write_jsonl(tmp_path / name / "a.jsonl", rows)
        specs.append({"name": name, "reader": "jsonl", "paths": [str(tmp_path / name)], "id_field": "id"})
    config = mix_config(
        tmp_path,
        specs,
        shard_docs=7,
        mix={
            "group_by": ["source"],
            "min_share": 0.1,
            "validation_fraction": 0.2,
            "validation_max_docs": 6,
            "shard_tokens": 700,
            "mixtures": MIXTURES,
        },
    )
    return config, tokenized_run(config)


def _outputs(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "intermediate" not in p.parts and p.name not in ("inputs.json", RECORD)
    }


def _reference_order(docs: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Every copy in writing order, over the whole table at once: per group, copy 0 of every
    document, then copy 1 of those taken twice or more...; within a copy by order key, then id."""
    copies = []
    for copy in range(int(docs["repeats"].max() or 0)):
        chosen = docs.filter(pl.col("repeats") > copy)
        keys = seeded_id_hash(chosen["id"], seed, shards.SALT_ORDER + copy)
        copies.append(chosen.with_columns(copy=pl.lit(copy), key=pl.Series(keys, dtype=pl.UInt64)))
    return pl.concat(copies).sort(["group", "copy", "key", "id"])


def _reference_cut(tokens: np.ndarray, limit: int) -> list[int]:
    """Documents per output shard when a shard takes documents while it stays within ``limit``
    tokens (one document at least)."""
    sizes, start, ends = [], 0, np.cumsum(tokens)
    while start < len(tokens):
        before = ends[start - 1] if start else 0
        end = max(int(np.searchsorted(ends, before + limit, side="right")), start + 1)
        sizes.append(end - start)
        start = end
    return sizes


def _shard_ids(folder, entries) -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for entry in entries:
        _, offsets = read_token_shard(folder / entry["file"])
        found.setdefault(entry["group"], []).append(offsets["doc_id"].to_list())
    return found


def test_the_plan_shard_by_shard_is_the_plan_over_the_whole_pool(tmp_path, monkeypatch):
    config, previous = _pool(tmp_path)
    # Few buckets and small key ranges, so that a crossing bucket holds many documents and a
    # group's copies span several ranges.
    monkeypatch.setattr(shards, "BUCKET_BITS", 2)
    monkeypatch.setattr(shards, "RANGE_ROWS", 4)
    monkeypatch.setattr(stage, "JOBS_PER_BLOCK", 1)  # a unit per shard, up to mix.partitions
    monkeypatch.setattr(stage, "BLOCK_DOCS", 0)
    stats = run_mix(previous, config.model_copy(update={"mix": config.mix.model_copy(update={"partitions": 3})}))
    root = RunLayout(config.run_dir).stage("mix").root
    documents = pl.read_parquet(root / "documents.parquet")
    scan = pl.read_parquet(sorted((root / "intermediate" / "scan").glob("*.parquet")))
    assert scan.height == stats.docs_in > 100 and scan["shard"].n_unique() > 15
    assert documents["id"].equals(scan["id"])  # every document, in shard order

    # Groups: the min_share merge over the whole pool's tokens.
    groups = assign_groups(scan, ["source"], min_share=0.1, size_column="tokens")
    assert documents["group"].equals(groups) and set(groups) == {"news", "chat", "other"}
    # The validation split: the per-group cap and minimum over the whole pool.
    least = config.mix.validation_min_docs
    _, held = split_validation(documents.with_columns(groups), 0.2, 6, config.seed, min_docs=least)
    assert sorted(held) == sorted(documents.filter(pl.col("split") == "validation")["id"])
    assert documents.filter(pl.col("split") == "validation").group_by("group").len()["len"].max() == 6

    train = documents.filter(pl.col("split") == "train")
    sizes = group_sizes(train)
    partial = 0
    for mixture in config.mix.mixtures:
        folder = root / mixture.name
        plan = pl.read_parquet(folder / "plan.parquet")
        weights = temperature_weights(sizes, mixture.temperature or 1.0)
        caps = cap_epochs(weights, sizes, mixture.budget_tokens or sum(sizes.values()), mixture.max_epochs)
        expected = sample_plan(train.select("id", "group", "tokens"), caps.tokens_taken, config.seed)
        assert plan["id"].equals(train["id"]) and plan["repeats"].equals(expected["repeats"])
        partial += sum(1 for g in sizes if caps.tokens_taken[g] % sizes[g])

        # The writing order and the cut, group by group, for both splits.
        found = read_manifest(folder)
        for split, docs in (
            ("train", train.with_columns(repeats=plan["repeats"]).filter(pl.col("repeats") > 0)),
            ("validation", documents.filter(pl.col("split") == "validation").with_columns(repeats=pl.lit(1))),
        ):
            written = _shard_ids(folder, found[split])
            order = _reference_order(docs, config.seed)
            for (group,), rows in order.group_by(["group"], maintain_order=True):
                assert [i for ids in written[group] for i in ids] == rows["id"].to_list()
                assert [len(ids) for ids in written[group]] == _reference_cut(rows["tokens"].to_numpy(), 700)
            assert set(written) == set(order["group"])
    assert partial >= 3  # groups whose plan ends inside a sampling bucket


@pytest.mark.parametrize("partitions, bucket_bits, range_rows", [(1, 16, 1 << 20), (50, 1, 3)])
def test_the_mixtures_do_not_depend_on_units_buckets_or_ranges(
    tmp_path, monkeypatch, partitions, bucket_bits, range_rows
):
    config, previous = _pool(tmp_path)
    root = RunLayout(config.run_dir).stage("mix").root
    stats = run_mix(previous, config)
    before = _outputs(root)
    shutil.rmtree(root)
    monkeypatch.setattr(shards, "BUCKET_BITS", bucket_bits)
    monkeypatch.setattr(shards, "RANGE_ROWS", range_rows)
    monkeypatch.setattr(stage, "JOBS_PER_BLOCK", 1)
    monkeypatch.setattr(stage, "BLOCK_DOCS", 0)
    changed = config.model_copy(update={"mix": config.mix.model_copy(update={"partitions": partitions})})
    assert run_mix(previous, changed) == stats
    assert _outputs(root) == before
    assert len(before) > 20
