"""What a curation run shows on the terminal while it runs: one live display (rich's Progress) from
its first second to its end, a row for what it is doing first (importing Prefect, starting its
temporary server), then a row per step of units (flows.progress) with the units done, skipped
(found complete from an earlier run) and left. Log lines (warnings; Prefect's info lines with
``--verbose``) print above the display, never across it (flows.logs.printing_to). Without a
terminal (a pipe, CI) there is no live display: a line for each step as it ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from report.console import printable, say


class RunDisplay:
    """A :class:`flows.progress.Progress` on ``console``; ``live``: a live display (a terminal),
    else a line per finished step; ``quiet``: nothing shown (what is under way is still known, for
    an interruption's line). Use it as a context manager around the run."""

    def __init__(self, console: Console, live: bool = True, quiet: bool = False) -> None:
        self.live = live and not quiet
        self.lines = not live and not quiet  # a line per finished step
        self._bar = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}", markup=False),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            auto_refresh=self.live,
            disable=not self.live,
        )
        self.console = console
        self._task = None
        self._started = 0.0
        self.label: str | None = None  # the step of units under way (or last finished)
        self.completed = self.total = self.skipped = 0
        self.finished = False  # whether that step's units are all done
        self.doing: str | None = None  # what a step() under way says it does

    def __enter__(self) -> RunDisplay:
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """End the live display (it stays on the terminal as it was last drawn)."""
        self._bar.stop()

    @contextmanager
    def step(self, text: str) -> Iterator[None]:
        """A row saying ``text...`` while the block runs, then how long it took."""
        began = time.monotonic()
        task = self._bar.add_task(f"{text}...", total=None, note="")
        self.doing = text
        yield
        self.doing = None
        took = f"{text}: {time.monotonic() - began:.0f} s"
        self._bar.update(task, description=took, total=1, completed=1)
        if self.lines:
            say(self.console, took)

    def start(self, stage: str, total: int, skipped: int = 0) -> None:
        self.label, self.total, self.skipped, self.completed, self.finished = stage, total, skipped, 0, False
        self._started = time.monotonic()
        note = f"{skipped} skipped (done before)" if skipped else ""
        self._task = self._bar.add_task(printable(f"{stage}: units"), total=total, note=note)

    def advance(self, amount: int = 1) -> None:
        self.completed += amount
        if self._task is not None:
            self._bar.advance(self._task, amount)

    def finish(self) -> None:
        self.finished = True
        if self.lines and self.label is not None:
            skipped = f", {self.skipped} skipped (done before)" if self.skipped else ""
            took = time.monotonic() - self._started
            say(self.console, f"{self.label}: {self.completed} of {self.total} units{skipped} in {took:.1f} s")


def listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def interrupted_line(run_dir, stages: list[str], display: RunDisplay) -> str:
    """What an interrupted run finished and what a rerun resumes, in one line: the ``stages``
    whose stats.json is written are done; the first other one stopped (at the units ``display``
    last counted for it)."""
    from pipeline.formats.documents import RunLayout

    layout = RunLayout(run_dir)
    try:
        done = [stage for stage in stages if layout.stage(stage).stats.exists()]
    except OSError:
        done = []
    current = display.label.split()[0] if display.label else None
    if current in stages:  # the stages run in order: those after the one at work are not done yet,
        # whatever stats.json an earlier run of them left
        done = [stage for stage in stages[: stages.index(current) + 1] if stage in done]
        if current in done and display.completed < display.total:
            done.remove(current)
    left = [stage for stage in stages if stage not in done]
    parts = [f"{listed(done)} {'is' if len(done) == 1 else 'are'} done" if done else "no stage is done"]
    label = display.label
    if display.doing is not None:
        parts.append(f"stopped while {display.doing}")
    elif left and label is not None and label.split()[0] == left[0]:
        step = "" if label == left[0] else f" in {label[len(left[0]) + 1 :]}"
        parts.append(f"{left[0]} stopped{step} at {display.completed} of {display.total} units")
    elif left:
        parts.append(f"{left[0]} stopped before its units")
    parts.append("run the same command again to resume")
    return "interrupted: " + "; ".join(parts)
