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
        ({"gold": "first"}, r'line 1: gold is "first"; it must be the 0-based index of the right choice, an integer'),
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


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"gold": 1.7}, "gold is 1.7; it must be the 0-based index of the right choice, an integer"),
        ({"gold": 1.0}, "gold is 1.0; it must be the 0-based index"),
        ({"gold": "1"}, 'gold is "1"; it must be the 0-based index'),
        ({"gold": True}, "gold is true; it must be the 0-based index"),
        ({"context": 5}, "context is 5; it must be a string"),
        ({"choices": ["x", 5]}, r'choices is \["x", 5\]; it must be a list of strings'),
        ({"choices": "x y"}, 'choices is "x y"; it must be a list of strings'),
        ({"id": 7}, "id is 7; it must be a string"),
    ],
)
def test_a_value_of_another_type_is_refused_where_it_is_never_cast(tmp_path, change, shown):
    """1.7, "1" or true as a gold index and 5 as a context were cast (to 1, 1, 1 and "5"); each is
    refused, naming the file, the line (the second here) and the field."""
    path = _jsonl(tmp_path / "items.jsonl", [GOOD[1], {**GOOD[0], **change}])
    with pytest.raises(ChoiceItemsError, match=f"line 2: {shown}") as caught:
        read_choice_items(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)
    frame = pl.DataFrame({"gold": [0.0, 1.7], "choices": [["a", "b"], ["a", "b"]]})
    frame.write_parquet(tmp_path / "items.parquet")
    with pytest.raises(ChoiceItemsError, match="row 1: gold is 0.0; it must be the 0-based index"):
        read_choice_items(tmp_path / "items.parquet")
