"""The mixture folder format's one owner (pipeline.formats.mixture): file names and the manifest's checks."""

from __future__ import annotations

import json
import re

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


_TOKENIZER = {"file": "tokenizer.json", "sha256": "0" * 64, "vocab_size": 300, "eod_id": 0, "pad_id": 1}
_TOKENIZER.update(mask_id=2, cls_id=3)
_SHARD = shard_entry("train/a-0000.arrow", "a", 2, 10, 40, "0" * 64)
_COMPLETE = {"format": MIXTURE_FORMAT, "tokenizer": _TOKENIZER, "groups": {"a": {}}, "train": [_SHARD]}
_COMPLETE["validation"] = []


def test_read_manifest_accepts_a_complete_one(tmp_path):
    entry = shard_entry("train/a-0000.arrow", "a", 2, 10, 40, "0" * 64)
    found = manifest("main", 0, {**_TOKENIZER, "file": "tok.json"}, {"a": {}}, [entry], [], budget_tokens=10)
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
        ({**_COMPLETE, "tokenizer": {**_TOKENIZER, "file": "tok.json"}}, "no tokenizer at"),
    ],
)
def test_read_manifest_names_what_is_wrong(tmp_path, content, message):
    if content is not None:
        _folder(tmp_path, content)
    with pytest.raises(MixtureError, match=message) as error:
        read_manifest(tmp_path)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"train": {"file": "train/a-0000.arrow"}}, "'train' is {'file': 'train/a-0000.arrow'}, not a list"),
        ({"validation": "validation/a-0000.arrow"}, "'validation' is 'validation/a-0000.arrow', not a list"),
        ({"train": [7]}, "train[0] is 7, not an object"),
        ({"train": [{k: v for k, v in _SHARD.items() if k != "sha256"}]}, "train[0].sha256 is missing"),
        ({"train": [{**_SHARD, "tokens": "10"}]}, "train[0].tokens is '10', not a whole number"),
        ({"train": [{**_SHARD, "documents": True}]}, "train[0].documents is True, not a whole number"),
        ({"train": [{**_SHARD, "bytes": -1}]}, "train[0].bytes is -1, not a whole number"),
        ({"groups": ["a"]}, "'groups' is ['a'], not an object"),
        ({"groups": {"a": 3}}, "groups.a is 3, not an object"),
        ({"tokenizer": {k: v for k, v in _TOKENIZER.items() if k != "eod_id"}}, "tokenizer.eod_id is missing"),
        ({"tokenizer": "tokenizer.json"}, "'tokenizer' is 'tokenizer.json', not an object"),
        ({"tokenizer": {**_TOKENIZER, "vocab_size": 3.5}}, "tokenizer.vocab_size is 3.5, not a whole number"),
        ({"train": [{**_SHARD, "file": "../../etc/hostname"}]}, "train[0].file is '../../etc/hostname', a path"),
        ({"validation": [{**_SHARD, "file": "/etc/hostname"}]}, "validation[0].file is '/etc/hostname', a path"),
        ({"train": [{**_SHARD, "file": "train/../../x"}]}, "a path outside the mixture folder"),
        ({"train": [{**_SHARD, "file": ""}]}, "a path outside the mixture folder"),
        ({"tokenizer": {**_TOKENIZER, "file": "../tokenizer.json"}}, "tokenizer.file is '../tokenizer.json', a path"),
    ],
)
def test_read_manifest_refuses_a_hostile_one_in_one_line(tmp_path, change, message):
    (tmp_path / "tokenizer.json").write_text("{}")
    _folder(tmp_path, {**_COMPLETE, **change})
    with pytest.raises(MixtureError, match=re.escape(message)) as error:
        read_manifest(tmp_path)
    assert "\n" not in str(error.value) and str(error.value).endswith("re-run the mix stage")
