"""The `source` flow: one Prefect task per input file (or group of text files)."""

from __future__ import annotations

import os

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import complete_before, gather_parts
from pipeline.config import RunConfig
from pipeline.formats.documents import RunLayout
from pipeline.io.writer import remove_temporaries
from pipeline.stages.rerun import open_run
from pipeline.stages.source import STAGE, SourceJob, finish_source, source_jobs, source_unit


@task(name="source-unit", cache_policy=NO_CACHE, task_run_name="source-{job.unit.name}")
def source_unit_task(job: SourceJob) -> dict:
    return source_unit(job)


# One unit per core at a time: each holds up to a shard of documents in memory.
@flow(name="source", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def source_flow(config: RunConfig) -> dict:
    """Read every configured source into ``<run_dir>/source``; return the stage's stats."""
    open_run(config)
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE).make()
    remove_temporaries(stage.root)
    jobs = source_jobs(config, stage)

    skipped = complete_before(stage.parts, [job.unit.name for job in jobs])
    futures = [source_unit_task.submit(job) for job in jobs]
    parts = gather_parts(STAGE, futures, skipped)
    return publish_stage(STAGE, finish_source(config, stage, parts))
