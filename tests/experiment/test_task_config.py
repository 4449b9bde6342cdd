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


def _items(path, rows) -> None:
    import json

    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


ITEM = {"id": "q1", "task": "mine", "context": "The sky is", "choices": [" blue", " loud"], "gold": 0}


def test_eval_tasks_are_checked_with_the_config_and_protected_from_every_pool(tmp_path):
    from experiment.heldout import protected_texts

    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    _items(good, [ITEM, {**ITEM, "id": "q2", "gold": 1}])
    _items(bad, [ITEM, {**ITEM, "id": "q2", "gold": 2}])
    data = {k: v for k, v in _config(tmp_path, "unused").items() if k != "task"}
    config = parse_experiment({**data, "eval_tasks": [{"path": str(good)}]})
    assert [spec.path for spec in config.eval_tasks] == [good]
    with pytest.raises(ConfigError) as caught:
        parse_experiment({**data, "eval_tasks": [{"path": str(bad)}]})
    message = str(caught.value)
    assert message.startswith("eval_tasks[0].path: ") and "\n" not in message
    assert f"{bad}: item 'q2' (line 2) has a gold index outside its choices" in message
    with pytest.raises(ConfigError, match="no file at"):
        parse_experiment({**data, "eval_tasks": [{"path": str(tmp_path / "none.jsonl")}]})
    # each item's context followed by its right answer joins the texts no pool may share a window with
    from pipeline.formats.choices import read_choice_items

    empty = pl.DataFrame(schema={"id": pl.String, "text": pl.String, "set": pl.String, "clean": pl.Boolean})
    task = pl.DataFrame(schema={"id": pl.String, "text": pl.String})
    protected = protected_texts(empty, task, read_choice_items(good))
    assert protected.rows() == [
        ("eval_tasks/q1", "The sky is blue", "eval_tasks"),
        ("eval_tasks/q2", "The sky is loud", "eval_tasks"),
    ]


def test_an_item_id_in_two_task_files_stops_before_any_work(tmp_path):
    from experiment.prepare import choice_task_files

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _items(first, [ITEM])
    _items(second, [{**ITEM, "context": "Grass is"}])
    data = {k: v for k, v in _config(tmp_path, "unused").items() if k != "task"}
    config = parse_experiment(
        {**data, "choice_tasks": {"builtin": False}, "eval_tasks": [{"path": str(first)}, {"path": str(second)}]}
    )
    with pytest.raises(ConfigError, match=r"the item id 'q1' is in .*a\.jsonl and in .*b\.jsonl"):
        choice_task_files(config, None, None, tmp_path / "unused.json", 256)


def test_the_curve_items_are_a_seeded_sample_of_every_task_not_its_first_rows(tmp_path):
    """A task file in label order (as a test split often is): the curve items still hold every
    label, each task gives curve_items of them, and the sample is the same run after run."""
    from experiment.prepare import curve_task_file

    path = tmp_path / "sorted.jsonl"
    labels = [" a", " b", " c"]
    _items(
        path,
        [{"id": f"q{k:03d}", "task": "sorted", "context": "x", "choices": labels, "gold": k // 40} for k in range(120)],
    )
    data = {k: v for k, v in _config(tmp_path, "unused").items() if k != "task"}
    config = parse_experiment({**data, "choice_tasks": {"builtin": False, "curve_items": 30}})
    curve = pl.read_ndjson(curve_task_file(config, [path]))
    assert curve.height == 30 and set(curve["gold"]) == {0, 1, 2}
    assert pl.read_ndjson(curve_task_file(config, [path])).equals(curve)
