"""The one line an interrupted run prints (flows.display.interrupted_line): what this run finished
and where it stopped, whatever an earlier run of the same folder left."""

from __future__ import annotations

import io

from rich.console import Console

from flows.display import RunDisplay, interrupted_line
from pipeline.formats.documents import RunLayout
from pipeline.io.writer import write_json

STAGES = ["source", "lang", "filter", "dedup"]


def _display(label: str, completed: int, total: int) -> RunDisplay:
    display = RunDisplay(Console(file=io.StringIO()), live=False, quiet=True)
    display.start(label, total)
    display.advance(completed)
    return display


def _finished(run_dir, stages):
    for stage in stages:
        write_json({"stage": stage}, RunLayout(run_dir).stage(stage).stats)


def test_a_resumed_run_stopped_in_its_first_stage_says_no_stage_is_done(tmp_path):
    _finished(tmp_path, STAGES)  # an earlier run finished every stage
    line = interrupted_line(tmp_path, STAGES, _display("source", 1, 3))
    assert line == (
        "interrupted: no stage is done; source stopped at 1 of 3 units; run the same command again to resume"
    )


def test_a_run_stopped_in_a_later_stage_names_the_stages_before_it(tmp_path):
    _finished(tmp_path, ["source", "lang"])
    line = interrupted_line(tmp_path, STAGES, _display("filter", 2, 5))
    assert line.startswith("interrupted: source and lang are done; filter stopped at 2 of 5 units")
    _finished(tmp_path, ["filter"])
    line = interrupted_line(tmp_path, STAGES, _display("filter", 5, 5))
    assert line.startswith("interrupted: source, lang and filter are done; dedup stopped before its units")
