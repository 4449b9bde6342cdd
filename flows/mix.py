"""The `mix` stage as a Prefect flow: :func:`pipeline.mix.stage.run_mix` with each of its units (a
scan, a match or a window search per curated shard, a write per output shard) run as a task."""

from __future__ import annotations

import os

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import units_as_tasks
from pipeline.core.config import RunConfig
from pipeline.mix.stage import STAGE, run_mix, scan_shard, shard_matches, shard_windows, write_shard

_run_units = units_as_tasks(
    {
        scan_shard: ("mix-scan", "scan-{docs_path.stem}"),
        shard_matches: ("mix-matches", "matches-{docs_path.stem}"),
        shard_windows: ("mix-windows", "windows-{token_path.stem}"),
        write_shard: ("mix-write", "write-{unit}"),
    }
)


@flow(name="mix", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def mix_flow(previous: str, config: RunConfig) -> dict:
    """Split, decontaminate and mix the documents of ``previous`` (tokenized by the tokenize stage);
    return the stage's stats."""
    return publish_stage(STAGE, run_mix(previous, config, _run_units))
