"""The `source` flow: one Prefect task per input file (or group of text files)."""

from __future__ import annotations

import os
from collections import Counter

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import gather_parts
from pipeline.config import RunConfig, SourceConfig
from pipeline.formats.documents import RunLayout, StageDir
from pipeline.formats.manifest import record_stage
from pipeline.io.writer import remove_temporaries, write_json
from pipeline.stages.rerun import open_run
from pipeline.stages.shard import check_stage_outputs, merge_groups, remove_unlisted
from pipeline.stages.source import STAGE, Unit, drop_repeated_ids, plan_units, source_unit


@task(name="source-unit", cache_policy=NO_CACHE, task_run_name="source-{unit.name}")
def source_unit_task(unit: Unit, source: SourceConfig, config: RunConfig, stage: StageDir) -> dict:
    return source_unit(unit, source, config, stage)


def per_source_counts(parts: list[dict]) -> dict[str, dict]:
    """Each source's ledger, and how many input files it read."""
    files = Counter(part["source"] for part in parts for _ in part["files"])
    return {name: {**counts, "files": files[name]} for name, counts in merge_groups(parts, "by_source", STAGE).items()}


# One unit per core at a time: each holds up to a shard of documents in memory.
@flow(name="source", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def source_flow(config: RunConfig) -> dict:
    """Read every configured source into ``<run_dir>/source``; return the stage's stats."""
    open_run(config)
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE).make()
    remove_temporaries(stage.root)
    work = [(unit, source) for source in config.sources for unit in plan_units(source)]

    parts = gather_parts(STAGE, [source_unit_task.submit(unit, source, config, stage) for unit, source in work])
    parts = drop_repeated_ids(stage, parts, config.sources)

    remove_unlisted(stage, parts)
    ledger = check_stage_outputs(STAGE, stage, parts)
    stats = {
        **ledger.to_dict(),
        "units": len(parts),
        "sources": per_source_counts(parts),
        "licences": merge_groups(parts, "by_licence", STAGE),
    }
    write_json(stats, stage.stats)
    record_stage(config, STAGE, stats, inputs=[f for part in parts for f in part["files"]])
    publish_stage(STAGE, stats)
    return stats
