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
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import check_run_dir, run_lock
from pipeline.stages.registry import REGISTRY, enabled_stages, input_stage
from pipeline.stages.source import quarantine_problem


@flow(name="curate", validate_parameters=False)
def curate_flow(config: RunConfig, runner: Runner = LOCAL) -> dict[str, dict]:
    """Run every stage of ``config`` with its tasks on ``runner`` (ready: see flows.runners.running_on);
    return each stage's stats by stage name. A source past its quarantine limit stops the run after
    the source stage (pipeline.stages.source.check_quarantine then raises with its line)."""
    check_storage(runner, config.run_dir)
    check_run_dir(config.run_dir)  # a folder that is not a run is refused before the lock is made in it
    with run_lock(config.run_dir):  # a second run on this run_dir stops here (the CLI holds it already)
        return _stages(config, runner)


# The flow of each stage after source (pipeline.stages.registry.REGISTRY says what kind each is). A shard
# stage's flow is generic and takes the stage's name; each of the others is its stage's own.
FLOWS = {
    "lang": shard_stage_flow,
    "filter": shard_stage_flow,
    "dedup": dedup_flow,
    "lines": lines_flow,
    "tokenize": tokenize_flow,
    "mix": mix_flow,
}


def stage_flow(stage: str, config: RunConfig, runner: Runner = LOCAL) -> dict:
    """Run one stage of ``config`` (its flow, with its tasks on ``runner``) on the documents of the
    stage before it (:func:`pipeline.stages.registry.input_stage`); return the stage's stats."""
    chosen = source_flow if stage == "source" else FLOWS[stage]
    task_runner = runner.stage_task_runner(stage, config)
    if task_runner is not None:  # else each flow's own runner (with_options costs a tenth of a second a flow)
        chosen = chosen.with_options(task_runner=task_runner)
    if stage == "source":
        return chosen(config)
    named = (stage,) if REGISTRY[stage].kind == "shard" else ()
    return chosen(*named, input_stage(stage, config), config)


def _stages(config: RunConfig, runner: Runner) -> dict[str, dict]:
    stats = {"source": stage_flow("source", config, runner)}
    # A source past its max_quarantine_fraction: the run stops here, the source stage complete and
    # kept (the caller says why: pipeline.stages.source.check_quarantine).
    if quarantine_problem(RunLayout(config.run_dir).stage("source"), config) is not None:
        return stats
    for stage in enabled_stages(config):
        stats[stage] = stage_flow(stage, config, runner)
    return stats
