"""The `tokenize` stage: a tokenizer (given, or trained on a sample of the curated documents),
then one task per curated shard writing its documents as a token shard (pipeline.tokenize)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import gather_parts
from pipeline.core.config import RunConfig
from pipeline.core.ledger import LedgerError
from pipeline.core.manifest import record_stage
from pipeline.core.schema import RunLayout
from pipeline.io.storage import parquet_file, scan_parquet
from pipeline.io.writer import read_json, remove_temporaries, write_json
from pipeline.stages.shard import mark_work_done, reusable_work
from pipeline.tokenize import load_tokenizer, tokenizer_sha256, train_tokenizer, write_token_shard

STAGE = "tokenize"


@task(name="tokenize-shard", cache_policy=NO_CACHE, task_run_name="tokenize-{in_path.stem}")
def tokenize_task(in_path: Path, tokenizer_path: Path, out_dir: Path, batch_docs: int) -> dict:
    out = out_dir / f"{in_path.stem}.arrow"
    batches = parquet_file(in_path).iter_batches(batch_size=batch_docs, columns=["id", "text"])
    entry = write_token_shard(batches, load_tokenizer(tokenizer_path), out, group=in_path.stem)
    return {"unit": in_path.stem, **entry, "file": out.name}


def _tokenizer(config: RunConfig, inputs: list[Path], root: Path) -> Path:
    settings = config.tokenize
    if settings.tokenizer is not None:
        return Path(settings.tokenizer)
    path = root / "tokenizer.json"
    if not path.exists():
        # The sample is drawn from the ids alone; only the sampled documents' texts are read.
        ids = scan_parquet(inputs).select("id").collect()
        chosen = ids.sample(n=min(settings.sample_docs, ids.height), seed=config.seed)["id"]
        sample = (
            scan_parquet(inputs).select("id", "text").filter(pl.col("id").is_in(chosen.implode())).collect().sort("id")
        )
        train_tokenizer(sample["text"], path, kind=settings.kind, vocab_size=settings.vocab_size)
    return path


@flow(name="tokenize", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def tokenize_flow(previous: str, config: RunConfig) -> dict:
    """Tokenize the documents of ``previous``; return the stage's stats (with the shards' manifest)."""
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE).make()
    remove_temporaries(stage.root)
    inputs = sorted(layout.stage(previous).docs.glob("*.parquet"))
    shards = stage.root / "shards"
    settings = config.tokenize.model_dump(mode="json")
    if not reusable_work(stage, inputs, settings):  # other curated documents: start over
        for stale in [*shards.glob("*.arrow"), stage.root / "tokenizer.json"]:
            stale.unlink(missing_ok=True)
    tokenizer = _tokenizer(config, inputs, stage.root)
    # A shard's part record is written after its file: a shard with a record is complete.
    todo = [p for p in inputs if not (stage.parts / f"{p.stem}.json").exists()]
    for entry in gather_parts(STAGE, [tokenize_task.submit(p, tokenizer, shards, config.batch_docs) for p in todo]):
        write_json(entry, stage.parts / f"{entry['unit']}.json")
    mark_work_done(stage, inputs, settings)
    entries = [read_json(stage.parts / f"{p.stem}.json") for p in inputs]

    handed_over = read_json(layout.stage(previous).stats)["docs_out"]
    documents = sum(e["documents"] for e in entries)
    if documents != handed_over:
        raise LedgerError(
            f"stage {STAGE}: {documents} documents tokenized, but stage {previous} handed over {handed_over}"
        )
    tok = load_tokenizer(tokenizer)
    stats = {
        "stage": STAGE,
        "docs_in": handed_over,
        "docs_out": documents,
        "removed": {},
        "quarantined": {},
        "tokens": sum(e["tokens"] for e in entries),
        "shards": entries,
        "tokenizer": {
            "path": str(tokenizer),
            "sha256": tokenizer_sha256(tok),
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        },
    }
    write_json(stats, stage.stats)
    record_stage(config, STAGE, stats)
    publish_stage(STAGE, stats)
    return stats
