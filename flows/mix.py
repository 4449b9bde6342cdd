"""The `mix` stage as a Prefect flow: :func:`pipeline.stages.mix.run_mix` with each of its units (a
scan, split, match, sides or routing step per block of curated shards, an ordering per group, a
write per output shard) run as a task."""

from __future__ import annotations

import os

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import units_as_tasks
from pipeline.config import RunConfig
from pipeline.mix.contamination import block_matches, block_windows
from pipeline.mix.routing import write_shard
from pipeline.mix.scan import scan_block
from pipeline.mix.shards import (
    block_texts,
    bucket_documents,
    concat_files,
    cut_ranges,
    route_copies,
    shard_sides,
    split_candidates,
)
from pipeline.stages.mix import STAGE, run_mix

_run_units = units_as_tasks(
    {
        scan_block: ("mix-scan", "{job.unit}"),
        block_matches: ("mix-matches", "{job.unit}"),
        block_windows: ("mix-windows", "{job.unit}"),
        split_candidates: ("mix-split", "{job.unit}"),
        block_texts: ("mix-texts", "{job.unit}"),
        shard_sides: ("mix-sides", "{job.unit}"),
        bucket_documents: ("mix-bucket", "{job.unit}"),
        route_copies: ("mix-route", "{job.unit}"),
        concat_files: ("mix-concat", "{job.unit}"),
        cut_ranges: ("mix-order", "{job.unit}"),
        write_shard: ("mix-write", "write-{job.unit}"),
    }
)


@flow(name="mix", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def mix_flow(previous: str, config: RunConfig) -> dict:
    """Split, decontaminate and mix the documents of ``previous`` (tokenized by the tokenize stage);
    return the stage's stats."""
    return publish_stage(STAGE, run_mix(previous, config, _run_units))
