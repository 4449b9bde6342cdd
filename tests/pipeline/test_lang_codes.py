"""Language codes in the config: checked as the config is read against the codes the language-ID
model gives, aliases resolved to one language, each mistake one line naming the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.api import load_config as api_load_config
from pipeline.config import parse_config
from pipeline.formats.configfile import ConfigError


def config(tmp_path: Path, **sections) -> dict:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "hello"}\n')
    return {
        "run_dir": str(tmp_path / "run"),
        "sources": [{"name": "web", "reader": "jsonl", "paths": [str(source)]}],
        **sections,
    }


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_an_unknown_key_in_a_by_lang_table_is_one_line_with_a_suggestion(tmp_path):
    data = config(tmp_path, filter={"by_lang": {"en": {"filterz": ["c4_quality"]}}})
    assert (
        error_of(data) == "filter.by_lang.en.filterz: unknown key; did you mean 'filters'? (allowed: filters, params)"
    )
    with pytest.raises(ConfigError, match="filter.by_lang.en.filterz: unknown key"):
        api_load_config(data)  # the Python API raises the same ConfigError, not a KeyError
