"""The mixture folder format's one owner (pipeline.formats.mixture): file names and the manifest's checks."""

from __future__ import annotations

import json

import pytest

from pipeline.formats.mixture import (
    MIXTURE_FORMAT,
    MixtureError,
    group_file_stem,
    manifest,
    read_manifest,
    shard_entry,
    shard_file,
    tokenizer_path,
)


def test_group_names_become_file_names():
    assert group_file_stem("news/en") == "news+en"
    assert group_file_stem("web pages/zh-Hans") == "web+pages+zh-Hans"
    assert group_file_stem("a.b_c-d") == "a.b_c-d"
    assert shard_file("train", "news/en", 3) == "train/news+en-0003.arrow"
    assert shard_file("validation", "heldout/news", 0) == "validation/heldout+news-0000.arrow"
    with pytest.raises(ValueError, match="split"):
        shard_file("test", "news", 0)


def _folder(tmp_path, content) -> None:
    (tmp_path / "manifest.json").write_text(content if isinstance(content, str) else json.dumps(content))


def test_read_manifest_accepts_a_complete_one(tmp_path):
    entry = shard_entry("train/a-0000.arrow", "a", 2, 10, 40, "0" * 64)
    found = manifest("main", 0, {"file": "tok.json"}, {"a": {}}, [entry], [], budget_tokens=10)
    assert found["format"] == MIXTURE_FORMAT and found["budget_tokens"] == 10
    _folder(tmp_path, found)
    (tmp_path / "tok.json").write_text("{}")
    assert read_manifest(tmp_path) == found
    assert tokenizer_path(tmp_path, found) == tmp_path / "tok.json"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no manifest.json in"),
        ("{not json", "is not valid JSON"),
        ({"format": "curate.mixture/0"}, "format 'curate.mixture/0', not 'curate.mixture/1'"),
        ([1, 2], "format None"),
        ({"format": MIXTURE_FORMAT, "tokenizer": {}, "groups": {}, "train": []}, "lacks 'validation'"),
        ({"format": MIXTURE_FORMAT, "tokenizer": {}, "groups": {}, "train": [], "validation": []}, "no tokenizer at"),
    ],
)
def test_read_manifest_names_what_is_wrong(tmp_path, content, message):
    if content is not None:
        _folder(tmp_path, content)
    with pytest.raises(MixtureError, match=message) as error:
        read_manifest(tmp_path)
    assert "\n" not in str(error.value)
