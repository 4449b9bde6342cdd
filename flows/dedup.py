"""The `dedup` and `lines` stages as Prefect flows: :func:`pipeline.stages.dedup.run_dedup` and
:func:`pipeline.stages.dedup.run_lines` with each of their units (per shard, per partition, or
once) run as a task on the flow's task runner. The units are described in ``pipeline.dedup.jobs``
and ``pipeline.stages.dedup``."""

from __future__ import annotations

import os

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import units_as_tasks
from pipeline.config import RunConfig
from pipeline.dedup import jobs
from pipeline.stages import dedup as units

_run_units = units_as_tasks(
    {
        jobs.sign_block: ("dedup-signatures", "signatures-block-{job.first}"),
        jobs.find_candidates: ("dedup-candidates", "candidates-{job.partition}"),
        jobs.measure_first: ("dedup-measure-first", "{job.pass_name}-first-{job.group}"),
        jobs.measure_second: ("dedup-measure-second", "{job.pass_name}-second-{job.group}"),
        jobs.seed_components: ("dedup-components-seed", "components-seed-{job.group}"),
        jobs.large_stars: ("dedup-large-star", "large-star-{job.round_}-{job.unit}"),
        jobs.small_stars: ("dedup-small-star", "small-star-{job.round_}-{job.unit}"),
        jobs.label_components: ("dedup-components", "components-{job.stars.unit}"),
        jobs.home_members: ("dedup-members", "members-{job.group}"),
        jobs.keep_in_home: ("dedup-clusters", "clusters-{job.home}"),
        jobs.assemble: ("dedup-assemble", "assemble"),
        units.find_in_one_unit: ("dedup-find", "find-duplicates"),
        units.remove_duplicates: ("dedup-remove", "remove-{job.shard}"),
        units.count_lines: ("lines-count", "count-{job.in_path.stem}"),
        units.find_frequent: ("lines-frequent", "frequent-{job.partition}"),
        units.cut_lines: ("lines-cut", "cut-{job.in_path.stem}"),
    }
)


@flow(name="dedup", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def dedup_flow(previous: str, config: RunConfig) -> dict:
    """Remove exact and near duplicates from the shards of ``previous``; return the stage's stats."""
    return publish_stage(units.STAGE, units.run_dedup(previous, config, _run_units))


@flow(name="lines", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def lines_flow(previous: str, config: RunConfig) -> dict:
    """Cut lines found in more than ``lines.max_docs`` documents from the shards of ``previous``."""
    return publish_stage(units.LINES_STAGE, units.run_lines(previous, config, _run_units))
