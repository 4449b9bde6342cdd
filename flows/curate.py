"""The curation run: `source`, then each enabled stage in order (lang, filter, dedup, lines, tokenize,
mix); the `docs/` of the last document stage are the curated documents, `tokenize/shards/` their
tokens, and `mix/<mixture>/` the training mixtures with their validation shards."""

from __future__ import annotations

from prefect import flow

from flows.dedup import dedup_flow, lines_flow
from flows.mix import mix_flow
from flows.source import source_flow
from flows.tokenize import tokenize_flow
from flows.stages import shard_stage_flow
from pipeline.config import RunConfig
from pipeline.steps import enabled_stages


@flow(name="curate", validate_parameters=False)
def curate_flow(config: RunConfig) -> dict[str, dict]:
    """Run every stage of ``config``; return each stage's stats by stage name."""
    stats = {"source": source_flow(config)}
    previous = "source"
    for stage in enabled_stages(config):
        if stage == "dedup":
            stats[stage] = dedup_flow(previous, config)
        elif stage == "lines":
            stats[stage] = lines_flow(previous, config)
        elif stage == "tokenize":
            stats[stage] = tokenize_flow(previous, config)
            continue  # token shards, not documents: stages after it read the documents
        elif stage == "mix":
            stats[stage] = mix_flow(previous, config)
            continue
        else:
            stats[stage] = shard_stage_flow(stage, previous, config)
        previous = stage
    return stats
