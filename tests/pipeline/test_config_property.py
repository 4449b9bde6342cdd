"""Any TOML-able value given to a config parser either parses or stops with the project's
ConfigError of one line, never another exception (a TypeError, a KeyError, a traceback)."""

from __future__ import annotations

import datetime
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from experiment.config import ExperimentConfig, parse_experiment
from pipeline.config import RunConfig, parse_config
from pipeline.formats.configfile import ConfigError
from trainer.config import TrainConfig, parse_train_config


def _field_names(model: type[BaseModel], seen: set) -> set[str]:
    """Every key a model and the models inside it take: the strategy reaches past the first check."""
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for field in model.model_fields.values():
        for inner in [field.annotation, *getattr(field.annotation, "__args__", ())]:
            for candidate in [inner, *getattr(inner, "__args__", ())]:
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    names |= _field_names(candidate, seen)
    return names


KEYS = sorted(_field_names(RunConfig, set()) | _field_names(ExperimentConfig, set()) | _field_names(TrainConfig, set()))
# Strings stay inside the empty folder the test runs in: no '/', so no path or glob leaves it.
WORDS = st.sampled_from(["jsonl", "parquet", "text", "web", "main", "source", "lang", "~", "$HOME", "..", "", "4096"])
SCALARS = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | WORDS
    | st.text(alphabet="ab.-_~$ \x00é", max_size=8)
    | st.dates()
    | st.datetimes(timezones=st.none() | st.just(datetime.UTC))
)
KEY = st.sampled_from(KEYS) | st.text(alphabet="abz_", min_size=1, max_size=5)
TOML = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=4),
    max_leaves=12,
)
CONFIGS = st.dictionaries(KEY, TOML, max_size=6)


@contextmanager
def inside_an_empty_folder():
    """The current folder and HOME an empty temporary folder, for the duration."""
    before, home = os.getcwd(), os.environ.get("HOME")
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        os.environ["HOME"] = folder
        try:
            yield Path(folder)
        finally:
            os.chdir(before)
            if home is None:
                del os.environ["HOME"]
            else:
                os.environ["HOME"] = home


@pytest.mark.parametrize("parse", [parse_config, parse_train_config, parse_experiment])
@settings(max_examples=150)
@given(data=CONFIGS)
def test_any_toml_value_parses_or_is_one_config_error_line(parse, data):
    with inside_an_empty_folder() as folder:
        try:
            parse(data)
        except ConfigError as error:
            assert str(error) and "\n" not in str(error)
        assert list(folder.iterdir()) == []  # checking a config writes nothing


# A config that parses, with one key (of a section, or at the top) given any TOML value: the
# checks past the first ones are reached.
GOOD = {
    "run_dir": "run",
    "sources": [{"name": "web", "reader": "jsonl", "paths": ["in.jsonl"]}],
    "lang": {"enabled": False},
    "filter": {"filters": ["gopher_quality"], "params": {"gopher_quality": {"min_words": 5}}},
    "dedup": {"threshold": 0.8},
    "lines": {},
    "tokenize": {"vocab_size": 300},
    "mix": {"merge": {"web": "all"}, "mixtures": [{"name": "main", "temperature": 1.0}]},
}


@st.composite
def mutated(draw) -> dict:
    config = {key: value for key, value in GOOD.items()}
    section = draw(st.sampled_from([*GOOD, "sources.0", "filter.params.gopher_quality", "mix.mixtures.0", None]))
    value = draw(TOML)
    if section is None:
        config[draw(KEY)] = value
        return config
    path = section.split(".")
    holder = config
    for part in path[:-1]:  # copy down the path, so GOOD stays as it is
        holder[part] = [dict(x) for x in holder[part]] if isinstance(holder[part], list) else dict(holder[part])
        holder = holder[part]
    last = int(path[-1]) if path[-1].isdigit() else path[-1]
    target = holder[last]
    if isinstance(target, dict) and draw(st.booleans()):
        holder[last] = {**target, draw(KEY): value}
    else:
        holder[last] = value
    return config


@settings(max_examples=200)
@given(data=mutated())
def test_a_good_run_config_with_any_key_changed_parses_or_is_one_config_error_line(data):
    with inside_an_empty_folder() as folder:
        (folder / "in.jsonl").write_text('{"text": "hello"}\n')
        try:
            parse_config(data)
        except ConfigError as error:
            assert str(error) and "\n" not in str(error)
        assert [p.name for p in folder.iterdir()] == ["in.jsonl"]
