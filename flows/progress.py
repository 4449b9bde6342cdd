"""Progress reporting from flows to whoever runs them (the CLI shows a bar; tests show nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from prefect.futures import PrefectFuture, as_completed


class Progress(Protocol):
    def start(self, stage: str, total: int) -> None: ...
    def advance(self, amount: int = 1) -> None: ...
    def finish(self) -> None: ...


class Silent:
    def start(self, stage: str, total: int) -> None:
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


def gather_parts(stage: str, futures: list[PrefectFuture]) -> list[dict]:
    """The units' part records (with progress as they finish), sorted by unit name."""
    return sorted(gather_in_order(stage, futures), key=lambda part: part["unit"])


def gather_in_order(label: str | None, futures: list[PrefectFuture]) -> list:
    """The futures' results in the order given, with progress as they finish under ``label``
    (None: no progress shown)."""
    if label is not None:
        progress = current()
        progress.start(label, len(futures))
        for _ in as_completed(futures):
            progress.advance()
        progress.finish()
    return [future.result() for future in futures]
