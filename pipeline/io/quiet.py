"""Silence what a C extension's Python wrapper prints on stderr, or capture what a library module
writes there, safely across threads."""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import types
from collections.abc import Iterator

# contextlib.redirect_stderr swaps the global sys.stderr: two threads doing it at once (the lang
# stage's tasks each loading the model) can restore each other's StringIO and leave sys.stderr
# swallowing everything after. One lock serializes the swaps.
_LOCK = threading.RLock()


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    with _LOCK, contextlib.redirect_stderr(io.StringIO()):
        yield


class _ThreadStderr:
    """Stands in for ``sys.stderr`` inside a library module: what a thread writes while it holds a
    capture (:func:`captured_writes`) goes to that capture, anything else to the real stderr."""

    def __init__(self) -> None:
        self._local = threading.local()

    def write(self, text: str) -> int:
        capture = getattr(self._local, "capture", None)
        if capture is None:
            return sys.stderr.write(text)
        capture.append(text)
        return len(text)

    def flush(self) -> None:
        if getattr(self._local, "capture", None) is None:
            sys.stderr.flush()


class _SysWithStderr:
    """The ``sys`` module as a library module sees it, with ``stderr`` replaced."""

    def __init__(self, stderr: _ThreadStderr) -> None:
        self.stderr = stderr

    def __getattr__(self, name: str):
        return getattr(sys, name)


_ROUTED = _ThreadStderr()


def route_stderr(*modules: types.ModuleType) -> None:
    """Make ``modules`` (which write warnings with ``sys.stderr.write``) write through a stand-in
    that :func:`captured_writes` can capture per thread; other threads' writes go on as before."""
    for module in modules:
        if not isinstance(module.sys, _SysWithStderr):
            module.sys = _SysWithStderr(_ROUTED)


@contextlib.contextmanager
def captured_writes() -> Iterator[list[str]]:
    """Collect, in a list, what the routed modules (:func:`route_stderr`) write in this thread."""
    local = _ROUTED._local
    outer = getattr(local, "capture", None)
    local.capture = []
    try:
        yield local.capture
    finally:
        local.capture = outer
