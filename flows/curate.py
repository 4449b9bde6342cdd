"""The curation run: `source`, then each enabled stage in order (lang, filter, dedup); the last
stage's `docs/` are the curated documents."""

from __future__ import annotations

from prefect import flow

from flows.dedup import dedup_flow
from flows.source import source_flow
from flows.stages import shard_stage_flow
from pipeline.config import RunConfig
from pipeline.steps import enabled_stages


@flow(name="curate", validate_parameters=False)
def curate_flow(config: RunConfig) -> dict[str, dict]:
    """Run every stage of ``config``; return each stage's stats by stage name."""
    stats = {"source": source_flow(config)}
    previous = "source"
    for stage in enabled_stages(config):
        stats[stage] = dedup_flow(previous, config) if stage == "dedup" else shard_stage_flow(stage, previous, config)
        previous = stage
    return stats
