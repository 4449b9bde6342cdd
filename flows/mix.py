"""The `mix` stage as a Prefect flow: :func:`pipeline.mix.stage.run_mix` with each of its units (a
scan, a match or a window search per curated shard, a write per output shard) run as a task."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import gather_in_order
from pipeline.core.config import RunConfig
from pipeline.mix.stage import STAGE, run_mix, scan_shard, shard_matches, shard_windows, write_shard

_TASKS = {
    scan_shard: task(scan_shard, name="mix-scan", cache_policy=NO_CACHE, task_run_name="scan-{docs_path.stem}"),
    shard_matches: task(
        shard_matches, name="mix-matches", cache_policy=NO_CACHE, task_run_name="matches-{docs_path.stem}"
    ),
    shard_windows: task(
        shard_windows, name="mix-windows", cache_policy=NO_CACHE, task_run_name="windows-{token_path.stem}"
    ),
    write_shard: task(write_shard, name="mix-write", cache_policy=NO_CACHE, task_run_name="write-{unit}"),
}


def _as_tasks(label: str | None, fn: Callable[..., Any], jobs: Sequence[tuple]) -> list:
    """pipeline.mix.stage.RunUnits as Prefect tasks on the flow's task runner."""
    return gather_in_order(label, [_TASKS[fn].submit(*args) for args in jobs])


@flow(name="mix", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def mix_flow(previous: str, config: RunConfig) -> dict:
    """Split, decontaminate and mix the documents of ``previous`` (tokenized by the tokenize stage);
    return the stage's stats."""
    return publish_stage(STAGE, run_mix(previous, config, _as_tasks))
