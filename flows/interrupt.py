"""Ctrl-C in a run. The first stops it: a KeyboardInterrupt in the main thread, which Prefect's
engine reports (the flow runs end Crashed) and the run unwinds from, its temporary server stopped
last; if that takes more than GRACE_S, or at a second Ctrl-C, the process ends at once (its
servers killed). Either way the terminal gets one line saying what finished and what a rerun
resumes, and the exit code is 130. No work is lost: every output is written to a temporary file
and renamed, and a rerun skips the units that are complete.

A terminal's Ctrl-C signals its whole foreground process group; Prefect's temporary server is in a
session of its own (flows.runtime), so it stays up while the run reports its last states."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

GRACE_S = 5.0  # after the first Ctrl-C, the run's time to unwind before the process ends at once
EXIT_CODE = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_signals = 0  # the Ctrl-Cs the running block (interruptible) has had


class Interrupted(BaseException):
    """The run was interrupted and has said so; exit with ``code`` (128 + the signal's number).
    (A BaseException, as KeyboardInterrupt is: no handler of errors on the way out reports it as
    a failure.)"""

    def __init__(self, code: int = EXIT_CODE) -> None:
        super().__init__(code)
        self.code = code


def interrupted() -> bool:
    """Whether the running block has had a Ctrl-C (an exception on the way out may be Prefect's
    rendering of it, not a KeyboardInterrupt)."""
    return _signals > 0


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt when the run had a Ctrl-C: an error raised after it is the
    interrupt's doing (a task runner shut down under a flow), not a failure to report."""
    if _signals:
        raise KeyboardInterrupt


@contextmanager
def interruptible(say_stopped: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C (SIGINT; SIGTERM and SIGHUP alike) in the block as the module says; ``say_stopped``
    prints the one line (it is called once, from the main thread or, when the process ends at
    once, from any thread). A signal that ends the block raises :class:`Interrupted` after it."""
    global _signals
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    said = threading.Lock()

    def say_once() -> None:
        if not said.acquire(blocking=False):
            return
        try:
            say_stopped()
        except Exception:  # a terminal gone (a hang-up): nothing to tell
            pass

    code = [EXIT_CODE]

    def stop_now() -> None:
        from flows.runtime import kill_children, kill_servers

        say_once()
        kill_servers()
        kill_children()
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:
                pass
        os._exit(code[0])

    def on_signal(signum, frame) -> None:
        global _signals
        _signals += 1
        if _signals > 1:
            stop_now()
        code[0] = 128 + signum
        timer = threading.Timer(GRACE_S, stop_now)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    _signals = 0
    # SIGTERM (kill) and SIGHUP (the terminal closed) too: the server, in a session of its own,
    # would outlive a process they ended at once.
    previous = {number: signal.signal(number, on_signal) for number in STOPPING}
    try:
        yield
    except BaseException:
        if not _signals:
            raise
        # KeyboardInterrupt, or what Prefect made of it on the way out: the run was interrupted.
        say_once()
        raise Interrupted(code[0]) from None
    finally:
        # Once interrupted, the handlers and the timer stay: a second Ctrl-C ends the process at
        # once, and the timer also ends one whose exit would wait for a unit still running.
        if not _signals:
            for number, handler in previous.items():
                signal.signal(number, handler)
