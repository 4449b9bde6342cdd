"""A downstream task file is read and checked with the experiment's config, before any work: a
bad file is one line naming it, never a traceback 20 minutes in."""

from __future__ import annotations

import polars as pl
import pytest

from experiment.config import parse_experiment
from pipeline.formats.configfile import ConfigError


def _task(labels: list[str], split: list[str] | None = None) -> pl.DataFrame:
    n = len(labels)
    return pl.DataFrame(
        {
            "id": [f"t{i}" for i in range(n)],
            "text": [f"text number {i}" for i in range(n)],
            "label": labels,
            "split": split or ["train" if i < n // 2 else "test" for i in range(n)],
        }
    )


def _config(tmp_path, task_path) -> dict:
    return {
        "out_dir": str(tmp_path / "experiment"),
        "demo": True,
        "budget_tokens": 6000,
        "variants": [{"name": "raw"}],
        "task": {"path": str(task_path)},
    }


def test_a_good_task_file_passes(tmp_path):
    path = tmp_path / "task.parquet"
    _task(["a", "b"] * 4).write_parquet(path)
    assert parse_experiment(_config(tmp_path, path)).task.path == path


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (_task(["sport"] * 8), r"the train split has 1 class \('sport'\); a classification task needs at least 2"),
        (_task(["a", "b"] * 4, split=["train"] * 8), r"split values must be"),
        (_task(["a", "b"] * 4).drop("label"), r"the task lacks columns \['label'\]"),
        (_task(["a", "b", None, "b", "a", "b"]), r"1 rows have no label \(first: 't2'\)"),
        (_task(["a", "b", "a", "b", "c", "b"]), r"test labels \['c'\] never occur in the train split"),
    ],
)
def test_a_bad_task_file_stops_the_config_in_one_line(tmp_path, frame, message):
    path = tmp_path / "task.parquet"
    frame.write_parquet(path)
    with pytest.raises(ConfigError, match=message) as caught:
        parse_experiment(_config(tmp_path, path))
    assert str(caught.value).startswith("task.path: ") and "\n" not in str(caught.value)
    assert str(caught.value).count(str(path)) == 1  # the file named once


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    path = tmp_path / "task.parquet"
    path.write_text("id,text,label,split\n")
    with pytest.raises(ConfigError, match=r"not a Parquet file of id, text, label, split columns"):
        parse_experiment(_config(tmp_path, path))
