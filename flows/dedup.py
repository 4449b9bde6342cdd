"""The `dedup` and `lines` stages as Prefect flows: :func:`pipeline.stages.dedup.run_dedup` and
:func:`pipeline.stages.dedup.run_lines` with each of their units (per shard, per partition, or
once) run as a task on the flow's task runner. The stages, their units and their files are
described in ``pipeline.stages.dedup``."""

from __future__ import annotations

import os

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import units_as_tasks
from pipeline.config import RunConfig
from pipeline.stages import dedup as units

_run_units = units_as_tasks(
    {
        units.sign_block: ("dedup-signatures", "signatures-block-{first}"),
        units.find_candidates: ("dedup-candidates", "candidates-{partition}"),
        units.measure_first: ("dedup-measure-first", "{step}-first-{group}"),
        units.measure_second: ("dedup-measure-second", "{step}-second-{group}"),
        units.seed_components: ("dedup-components-seed", "components-seed-{group}"),
        units.large_stars: ("dedup-large-star", "large-star-{round_}-{part}"),
        units.small_stars: ("dedup-small-star", "small-star-{round_}-{part}"),
        units.label_components: ("dedup-components", "components-{part}"),
        units.home_members: ("dedup-members", "members-{group}"),
        units.cluster_edges: ("dedup-clusters", "clusters-{home}"),
        units.assemble: ("dedup-assemble", "assemble"),
        units.remove_duplicates: ("dedup-remove", "remove-{shard}"),
        units.count_lines: ("lines-count", "count-{in_path.stem}"),
        units.find_frequent: ("lines-frequent", "frequent-{partition}"),
        units.cut_lines: ("lines-cut", "cut-{in_path.stem}"),
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
