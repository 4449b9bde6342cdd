"""What `curate train`, `curate experiment` and `curate sweep` print on the terminal besides their
results: the command's own progress lines and Prefect's warnings, not Prefect's info lines
(flow and task runs begun, finished or crashed, "Stopping temporary server"), as `curate run`
does unless --verbose; and after Ctrl-C, what is done and how to continue."""

from __future__ import annotations

import io
import logging
import os

import pytest

import flows.runtime
from flows.logs import PROGRESS, TerminalHandler


def _record(name: str, level: int, message: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, message, None, None)
    record.__dict__.update(extra)
    return record


def _shown(level: int) -> str:
    out = io.StringIO()
    handler = TerminalHandler(stream=out, level=level)
    for record in (
        _record("prefect.flow_runs", logging.INFO, "Beginning flow run 'toad' for flow 'train'"),
        _record("prefect.flow_runs", logging.INFO, "Finished in state Crashed('Execution was aborted')"),
        _record("prefect", logging.INFO, "Stopping temporary server on http://127.0.0.1:8452"),
        _record("prefect.task_runs", logging.INFO, "step 2: val loss 7.6076", **PROGRESS),
        _record("prefect.task_runs", logging.WARNING, "step-000004.pt fails its checksum; skipped"),
    ):
        if record.levelno >= handler.level:  # as a logger checks its handlers' levels
            handler.handle(record)
    return out.getvalue()


@pytest.mark.parametrize(
    "settings, level, shown",
    [
        ({"progress": True}, "INFO", ["step 2", "checksum"]),  # train, experiment, sweep
        ({"quiet": True}, "WARNING", ["checksum"]),  # --quiet
        ({}, None, ["Beginning", "Crashed", "Stopping", "step 2", "checksum"]),  # --verbose
    ],
)
def test_the_terminal_shows_the_commands_progress_not_prefects_info_lines(
    tmp_path, monkeypatch, settings, level, shown
):
    """`curate train` piped printed "Flow run ... Crashed(...)" and "Stopping temporary server"
    on Ctrl-C, and `curate experiment` every flow and task run Prefect began and finished."""
    monkeypatch.setattr(os, "environ", dict(os.environ))  # configure_prefect sets the process's
    flows.runtime.configure_prefect(tmp_path, command="train", **settings)
    assert os.environ.get(flows.runtime.TERMINAL_LEVEL_ENV) == level
    printed = _shown(logging.getLevelName(level) if level else logging.NOTSET)
    every = ["Beginning", "Crashed", "Stopping", "step 2", "checksum"]
    assert [word for word in every if word in printed] == shown, printed


def test_the_trainers_progress_lines_are_marked_as_progress(monkeypatch):
    import flows.train

    logged = []

    class Logger:
        def info(self, line, **kwargs):
            logged.append(("info", line, kwargs))

        def warning(self, line, **kwargs):
            logged.append(("warning", line, kwargs))

    monkeypatch.setattr(flows.train, "get_run_logger", Logger)
    flows.train.trainer_log()("step 2: val loss 7.6")
    assert logged == [("info", "step 2: val loss 7.6", {"extra": PROGRESS})]


def test_an_interrupted_experiment_says_what_is_done_and_how_to_continue(tmp_path):
    """It said only "interrupted"."""
    from flows.cli import study_stopped

    (tmp_path / "train" / "raw" / "seed-0").mkdir(parents=True)
    (tmp_path / "train" / "raw" / "seed-0" / "summary.json").write_text("{}")
    (tmp_path / "train" / "raw" / "seed-1" / "checkpoints").mkdir(parents=True)
    line = study_stopped(tmp_path)
    assert line.startswith("interrupted: 1 pretraining run finished; ") and "\n" not in line
    assert line.endswith("run the same command again to continue") and str(tmp_path) in line
