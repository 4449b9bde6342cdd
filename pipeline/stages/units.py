"""How a stage hands its units of work to whoever runs them.

A stage in the library (``pipeline.mix.stage.run_mix``, ``pipeline.dedup.stage.run_dedup``) calls
``run_units(label, fn, jobs)`` for each list of units it can run side by side. :func:`in_process`
runs them one after the other here; the Prefect flows (``flows``) submit each as a task on the
flow's task runner. Either way the stage runs the same code and writes the same files, so it is
tested without Prefect and run with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol


class RunUnits(Protocol):
    """Runs ``fn(*args)`` for every ``args`` of ``jobs`` and returns the results in the jobs'
    order; ``label`` names the units for a progress display (None: show none)."""

    def __call__(self, label: str | None, fn: Callable[..., Any], jobs: Sequence[tuple]) -> list: ...


def in_process(label: str | None, fn: Callable[..., Any], jobs: Sequence[tuple]) -> list:
    """:class:`RunUnits` one after the other in this process."""
    return [fn(*args) for args in jobs]
