"""Progress reporting from flows to whoever runs them (the CLI shows a bar; tests show nothing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed

from pipeline.io.storage import AnyPath
from pipeline.stages.units import RunUnits, run_block


class Progress(Protocol):
    """``start(label, total, skipped)``: a step of ``total`` units under ``label``, ``skipped`` of
    them found complete from an earlier run (they finish at once); ``advance`` as each finishes."""

    def start(self, stage: str, total: int, skipped: int = 0) -> None: ...
    def advance(self, amount: int = 1) -> None: ...
    def finish(self) -> None: ...


class Silent:
    def start(self, stage: str, total: int, skipped: int = 0) -> None:
        pass

    def advance(self, amount: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


_current: Progress = Silent()


def current() -> Progress:
    return _current


@contextmanager
def reporting(progress: Progress) -> Iterator[Progress]:
    """Make ``progress`` receive the flows' updates inside the block."""
    global _current
    previous, _current = _current, progress
    try:
        yield progress
    finally:
        _current = previous


def complete_before(parts: AnyPath, units: Iterable[str]) -> int:
    """How many of ``units`` have their part record in ``parts`` already (an earlier run's, which
    the unit will most likely find complete and skip)."""
    return sum((parts / f"{unit}.json").exists() for unit in units)


def gather_parts(stage: str, futures: list[PrefectFuture], skipped: int = 0) -> list[dict]:
    """The units' part records (with progress as they finish), sorted by unit name."""
    return sorted(gather_in_order(stage, futures, skipped), key=lambda part: part["unit"])


def gather_in_order(label: str | None, futures: list[PrefectFuture], skipped: int = 0) -> list:
    """The futures' results in the order given, with progress as they finish under ``label``
    (None: no progress shown)."""
    if label is not None:
        progress = current()
        progress.start(label, len(futures), skipped)
        for _ in as_completed(futures):
            progress.advance()
        progress.finish()
    return [future.result() for future in futures]


def units_as_tasks(tasks: dict[Callable[..., Any], tuple[str, str]]) -> RunUnits:
    """A ``pipeline.stages.units.RunUnits`` that submits each unit as a Prefect task on the
    running flow's task runner, with progress under the label it is given. ``tasks`` names each
    unit function's task and its task runs (a format of its one parameter, ``job``)."""
    tasks = {run_block: ("block", "{block.name}"), **tasks}  # pipeline.stages.units.in_blocks
    made = {
        fn: task(fn, name=name, cache_policy=NO_CACHE, task_run_name=run_name) for fn, (name, run_name) in tasks.items()
    }

    def run_units(label: str | None, fn: Callable[[Any], Any], jobs: Sequence) -> list:
        return gather_in_order(label, [made[fn].submit(job) for job in jobs])

    return run_units
