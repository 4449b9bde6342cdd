"""How a stage hands its units of work to whoever runs them.

A stage in the library (``pipeline.stages.mix.run_mix``, ``pipeline.stages.dedup.run_dedup``) calls
``run_units(label, fn, jobs)`` for each list of units it can run side by side: each unit is
``fn(job)``, its one argument a typed job (a frozen dataclass defined beside ``fn``, which pickles
for the process and Dask runners). :func:`in_process` runs them one after the other here; the
Prefect flows (``flows``) submit each as a task on the flow's task runner, named from the job's
fields. Either way the stage runs the same code and writes the same files, so it is tested without
Prefect and run with it.

A step whose units are short (a few tenths of a second per shard) hands them over in blocks
(:func:`in_blocks`): each block is one unit that runs its jobs one after another, so a cluster's
fixed cost per task is paid once per block while memory stays that of one job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class RunUnits(Protocol):
    """Runs ``fn(job)`` for every job of ``jobs`` and returns the results in the jobs' order;
    ``label`` names the units for a progress display (None: show none)."""

    def __call__(self, label: str | None, fn: Callable[[Any], Any], jobs: Sequence) -> list: ...


def in_process(label: str | None, fn: Callable[[Any], Any], jobs: Sequence) -> list:
    """:class:`RunUnits` one after the other in this process."""
    return [fn(job) for job in jobs]


# Jobs per block of a step of short units. On a 2-worker Dask LocalCluster each task costs about
# 0.15 s of worker time beyond its work (the Prefect task run, its state changes, the result sent
# back): a round of 110 shard units of a few hundredths of a second each took 15 to 20 s there
# against 1 to 5 s on local threads (the million-document benchmark, benchmarks/scale_out.py).
JOBS_PER_BLOCK = 16
# Documents a block of short units carries at least. On a process pool or a Dask worker a task
# costs 0.1 to 0.15 CPU s beyond its work whatever it does (Prefect rebuilds the run's settings
# and context for each), and after dedup the demo's shards hold about 680 documents each at a
# million: 16 of them were a few hundredths of a second of work per step in mix, and its tasks'
# cost was most of the stage's CPU time (benchmarks/scale_out.py).
BLOCK_DOCS = 50_000


def jobs_per_block(docs: int, jobs: int) -> int:
    """Jobs per block of a step of short units over ``jobs`` shards of ``docs`` documents in all:
    :data:`JOBS_PER_BLOCK`, or as many shards as hold :data:`BLOCK_DOCS` documents where that is
    more."""
    if jobs < 1 or docs < 1:
        return JOBS_PER_BLOCK
    return max(JOBS_PER_BLOCK, -(-BLOCK_DOCS * jobs // docs))


def blocks(items: int, units: int) -> list[range]:
    """``0..items-1`` in ``min(units, items)`` consecutive blocks of near-equal size (none when
    ``items`` is 0), so that results concatenated block by block are in item order."""
    units = max(1, min(units, items))
    edges = [items * u // units for u in range(units + 1)]
    return [range(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]


@dataclass(frozen=True)
class Block:
    """Jobs ``first``, ``first + 1``, ... of a step (``jobs``), each run by ``fn``."""

    fn: Callable[[Any], Any]
    jobs: list
    first: int

    @property
    def name(self) -> str:
        """The block's task-run name: ``tokenize_shard-block-16``."""
        return f"{self.fn.__name__}-block-{self.first}"


def run_block(block: Block) -> list:
    """One block of :func:`in_blocks`: ``fn(job)`` for each of its jobs, in order."""
    return [block.fn(job) for job in block.jobs]


def in_blocks(
    run_units: RunUnits,
    label: str | None,
    fn: Callable[[Any], Any],
    jobs: Sequence,
    per_block: int = JOBS_PER_BLOCK,
) -> list:
    """``run_units(label, fn, jobs)`` for a step of short units: the jobs in consecutive blocks of
    at most ``per_block``, each block one unit (:func:`run_block`). Results in the jobs' order."""
    spans = blocks(len(jobs), -(-len(jobs) // per_block))
    done = run_units(label, run_block, [Block(fn, [jobs[i] for i in span], span.start) for span in spans])
    return [result for block in done for result in block]
