"""Shard stages as Prefect flows: one task per input shard of the previous stage."""

from __future__ import annotations

import os

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import complete_before, gather_parts
from pipeline.config import RunConfig
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import stage_outputs
from pipeline.io.writer import remove_temporaries
from pipeline.stages.shard import ShardJob, finish_stage, stage_unit


@task(name="shard-unit", cache_policy=NO_CACHE, task_run_name="{job.stage_name}-{job.in_path.stem}")
def shard_task(job: ShardJob) -> dict:
    return stage_unit(job)


@flow(
    name="shard-stage",
    flow_run_name="{stage_name}",
    validate_parameters=False,
    task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()),
)
def shard_stage_flow(stage_name: str, previous: str, config: RunConfig) -> dict:
    """Run ``stage_name`` over the document shards of ``previous``; return the stage's stats."""
    layout = RunLayout(config.run_dir)
    stage = layout.stage(stage_name).make()
    remove_temporaries(stage.root)
    inputs = stage_outputs(config.run_dir, previous)  # what it wrote, never a file put beside them

    skipped = complete_before(stage.parts, [path.stem for path in inputs])
    futures = [
        shard_task.submit(ShardJob(stage_name=stage_name, in_path=path, stage=stage, config=config)) for path in inputs
    ]
    parts = gather_parts(stage_name, futures, skipped)

    return publish_stage(stage_name, finish_stage(stage_name, previous, config, parts))
