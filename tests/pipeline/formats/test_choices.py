"""pipeline.formats.choices: multiple-choice items read and checked, one line per problem."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.formats.choices import ChoiceItemsError, read_choice_items, write_choice_items

GOOD = [
    {"id": "a", "task": "capitals", "context": "The capital of France is", "choices": [" Paris", " Rome"], "gold": 0},
    {"id": "b", "task": "capitals", "context": "", "choices": ["x", "y", "z"], "gold": 2, "lang": "en"},
]


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_items_read_back_from_json_lines_and_parquet(tmp_path):
    items = read_choice_items(_jsonl(tmp_path / "items.jsonl", GOOD))
    assert items.columns == ["id", "task", "context", "choices", "gold", "group", "lang"]
    assert items["choices"].to_list() == [[" Paris", " Rome"], ["x", "y", "z"]]
    assert items["group"].to_list() == [None, None] and items["lang"].to_list() == [None, "en"]
    again = read_choice_items(write_choice_items(items, tmp_path / "items.parquet"))
    assert again.equals(items)
    assert read_choice_items(write_choice_items(items, tmp_path / "copy.jsonl")).equals(items)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gold": 2}, r"item 'a' \(line 1\) has a gold index outside its choices \(gold 2, 2 choices\)"),
        ({"gold": -1}, r"item 'a' \(line 1\) has a gold index outside its choices"),
        ({"choices": [" Paris"]}, r"item 'a' \(line 1\) has fewer than 2 choices"),
        ({"choices": []}, r"item 'a' \(line 1\) has fewer than 2 choices"),
        ({"choices": [" Paris", ""]}, r"item 'a' \(line 1\) has an empty choice"),
        ({"id": "b"}, r"repeats an id of another item"),
        ({"task": ""}, r"item 'a' \(line 1\) names no task"),
        ({"context": None}, r"item 'a' \(line 1\) has no context"),
        ({"gold": "first"}, r"column 'gold' must hold Int64"),
    ],
)
def test_an_item_that_cannot_be_scored_is_named_in_one_line(tmp_path, change, message):
    path = _jsonl(tmp_path / "items.jsonl", [{**GOOD[0], **change}, GOOD[1]])
    with pytest.raises(ChoiceItemsError, match=message) as caught:
        read_choice_items(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_column_an_empty_file_and_another_format_are_one_line_each(tmp_path):
    rows = [{k: v for k, v in row.items() if k != "gold"} for row in GOOD]
    with pytest.raises(ChoiceItemsError, match=r"lack the column\(s\) gold"):
        read_choice_items(_jsonl(tmp_path / "items.jsonl", rows))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ChoiceItemsError, match="holds no items|cannot be read"):
        read_choice_items(tmp_path / "empty.jsonl")
    (tmp_path / "items.csv").write_text("id,task\n")
    with pytest.raises(ChoiceItemsError, match="JSON lines .* or Parquet"):
        read_choice_items(tmp_path / "items.csv")
    with pytest.raises(ChoiceItemsError, match="no such file"):
        read_choice_items(tmp_path / "missing.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"id": "a", "task": \n')
    with pytest.raises(ChoiceItemsError, match="cannot be read as JSON lines"):
        read_choice_items(tmp_path / "broken.jsonl")
    pl.DataFrame({"id": ["a"]}).write_parquet(tmp_path / "few.parquet")
    with pytest.raises(ChoiceItemsError, match="lack the column"):
        read_choice_items(tmp_path / "few.parquet")
