"""The handlers of ``flows/logging.yml`` (set up by flows.runtime.configure_prefect): the run
log, which has every record of a run with its traceback, and the terminal, which keeps the
progress lines and the warnings, never a traceback."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prefect.logging.handlers import PrefectConsoleHandler
from rich.text import Text

# A record a handler cannot write (to a full disk, to a stopped server) is not reported on the
# terminal by the logging module (nor by Prefect's log worker, which follows this flag): the run's
# one error line says what went wrong.
logging.raiseExceptions = False

# Loggers whose errors the CLI reports itself, in one line: a task's or flow's failure, the
# temporary server's (a full database, say); their records stay in the run log.
REPORTED_BY_THE_CLI = ("prefect.flow_runs", "prefect.task_runs", "prefect.server", "uvicorn", "fastapi")
# The ``extra`` of a record that is a command's own progress line (the trainer's steps): the one
# kind of info line the terminal shows at level INFO, where Prefect's own (flow and task runs
# begun and finished, "Stopping temporary server") are left to the run log and --verbose.
PROGRESS = {"progress": True}


class RunLogHandler(logging.FileHandler):
    """The run's log file, opened on the first record and appended to by every process of the run.
    A record it cannot write (the disk is full) is dropped without a word: the run's own error
    says what happened, and Python's "--- Logging error ---" report would bury it."""

    def __init__(self, filename: str = "") -> None:
        self.failed = False
        try:
            if filename:
                Path(filename).parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # a full disk: the run goes on without its log (and its error says why)
            filename = ""
        if not filename:  # no run log in this process: a handler that writes nothing
            logging.Handler.__init__(self)
            self.baseFilename = ""
            self.stream = None
            self.mode, self.encoding, self.delay, self.errors = "a", "utf-8", True, None
            return
        super().__init__(filename, mode="a", encoding="utf-8", delay=True)

    def emit(self, record: logging.LogRecord) -> None:
        if self.baseFilename:
            super().emit(record)

    def flush(self) -> None:
        try:
            super().flush()
        except OSError:
            self.failed = True

    def handleError(self, record: logging.LogRecord) -> None:
        self.failed = True


class TerminalHandler(PrefectConsoleHandler):
    """Prefect's console handler, less what the CLI reports itself: no traceback, no task, flow
    or server error (a failure is one line from the CLI), and of other libraries only warnings.
    At level INFO, of the info lines only the command's progress (:data:`PROGRESS`)."""

    def filter(self, record: logging.LogRecord):
        if getattr(record, "terminal", True) is False:
            return False
        if record.levelno >= logging.ERROR and record.name.startswith(REPORTED_BY_THE_CLI):
            return False
        if record.levelno < logging.WARNING and not record.name.startswith("prefect"):
            return False
        if record.levelno < logging.WARNING and self.level >= logging.INFO and not getattr(record, "progress", False):
            return False
        return super().filter(record)

    def emit(self, record: logging.LogRecord) -> None:
        live = _live
        if live is None:
            super().emit(record)
            return
        try:  # styled by this handler's console, printed by the live display's
            with self.console.capture() as captured:
                self.console.print(self.format(record), soft_wrap=True)
            live.print(Text.from_ansi(captured.get().rstrip("\n")), soft_wrap=True)
        except Exception:
            self.handleError(record)

    def format(self, record: logging.LogRecord) -> str:
        bare = copy.copy(record)  # the run log's handler formats the same record, traceback and all
        bare.exc_info = bare.exc_text = bare.stack_info = None
        bare.msg, bare.args = bare.getMessage().split("\nTraceback (most recent call last)", 1)[0], None
        return super().format(bare)


_live = None  # the rich Console of a live display on the terminal, when one is up (see printing_to)


@contextmanager
def printing_to(console) -> Iterator[None]:
    """Inside the block, the terminal's log lines are printed through ``console`` (a rich Console
    showing a live display: its progress), above the display, instead of across it."""
    global _live
    previous, _live = _live, console
    try:
        yield
    finally:
        _live = previous
