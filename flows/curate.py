"""The curation run: `source`, then each enabled stage in order (lang, filter, dedup, lines, tokenize,
mix); the `docs/` of the last document stage are the curated documents, `tokenize/shards/` their
tokens, and `mix/<mixture>/` the training mixtures with their validation shards.

Each stage is a flow of its own whose tasks run on the runner given (flows.runners): threads by
default, or processes, or a Dask cluster; the outputs are the same bytes on every runner."""

from __future__ import annotations

from prefect import flow

from flows.dedup import dedup_flow, lines_flow
from flows.mix import mix_flow
from flows.runners import LOCAL, Runner, check_storage
from flows.source import source_flow
from flows.stages import shard_stage_flow
from flows.tokenize import tokenize_flow
from pipeline.config import RunConfig
from pipeline.manifest import check_run_dir, run_lock
from pipeline.steps import enabled_stages


@flow(name="curate", validate_parameters=False)
def curate_flow(config: RunConfig, runner: Runner = LOCAL) -> dict[str, dict]:
    """Run every stage of ``config`` with its tasks on ``runner`` (ready: see flows.runners.running_on);
    return each stage's stats by stage name."""
    check_storage(runner, config.run_dir)
    check_run_dir(config.run_dir)  # a folder that is not a run is refused before the lock is made in it
    with run_lock(config.run_dir):  # a second run on this run_dir stops here (the CLI holds it already)
        return _stages(config, runner)


def _stages(config: RunConfig, runner: Runner) -> dict[str, dict]:
    def on_runner(stage_flow):
        return stage_flow.with_options(task_runner=runner.task_runner())

    stats = {"source": on_runner(source_flow)(config)}
    previous = "source"
    for stage in enabled_stages(config):
        if stage == "dedup":
            stats[stage] = on_runner(dedup_flow)(previous, config)
        elif stage == "lines":
            stats[stage] = on_runner(lines_flow)(previous, config)
        elif stage == "tokenize":
            stats[stage] = on_runner(tokenize_flow)(previous, config)
            continue  # token shards, not documents: stages after it read the documents
        elif stage == "mix":
            stats[stage] = on_runner(mix_flow)(previous, config)
            continue
        else:
            stats[stage] = on_runner(shard_stage_flow)(stage, previous, config)
        previous = stage
    return stats
