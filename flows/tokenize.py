"""The `tokenize` stage as a Prefect flow: :func:`pipeline.stages.tokenize.run_tokenize` with each
of its units (the tokenizer sample's two passes, the tokenizer's training and a token shard, per
curated shard) run as a task."""

from __future__ import annotations

import os

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import units_as_tasks
from pipeline.config import RunConfig
from pipeline.stages import tokenize as units

_run_units = units_as_tasks(
    {
        units.sample_candidates: ("tokenize-sample-keys", "sample-keys-{job.in_path.stem}"),
        units.sample_texts: ("tokenize-sample-texts", "sample-texts-{job.in_path.stem}"),
        units.train_on_sample: ("tokenize-train", "train-tokenizer"),
        units.tokenize_shard: ("tokenize-shard", "tokenize-{job.in_path.stem}"),
    }
)


@flow(name="tokenize", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def tokenize_flow(previous: str, config: RunConfig) -> dict:
    """Tokenize the documents of ``previous``; return the stage's stats (with the shards' manifest)."""
    return publish_stage(units.STAGE, units.run_tokenize(previous, config, _run_units))
