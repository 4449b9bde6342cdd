"""Silence what a C extension's Python wrapper prints on stderr, safely across threads."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator

# contextlib.redirect_stderr swaps the global sys.stderr: two threads doing it at once (the lang
# stage's tasks each loading the model) can restore each other's StringIO and leave sys.stderr
# swallowing everything after. One lock serializes the swaps.
_LOCK = threading.RLock()


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    with _LOCK, contextlib.redirect_stderr(io.StringIO()):
        yield
