"""Every parameter of every filter is set from a TOML config in the form docs/config.md gives it,
reaches the filter, and a value of the wrong form is one line that says the right one."""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from pipeline.config import _parameter_hints, load_config
from pipeline.filters import classifier, perplexity, quality
from pipeline.filters.heuristics import DUP_NGRAM_CHAR_FRAC, TOP_NGRAM_CHAR_FRAC, GopherRepetition
from pipeline.filters.registry import FILTERS, build_filters, filter_parameters
from pipeline.formats.configfile import ConfigError
from pipeline.stages.attributes import measuring_settings

DOCS = (Path(__file__).parents[3] / "docs" / "config.md").read_text()

GOOD = """run_dir = "RUN"
[[sources]]
name = "web"
reader = "jsonl"
paths = ["IN"]
"""


def _config(tmp_path: Path, text: str):
    (tmp_path / "in.jsonl").write_text('{"text": "hello"}\n')
    path = tmp_path / "run.toml"
    path.write_text(GOOD.replace("IN", str(tmp_path / "in.jsonl")).replace("RUN", str(tmp_path / "run")) + text)
    return load_config(path)


def _kind(hint) -> str:
    """The form of a parameter's value, by its type: one of the forms docs/config.md lists."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    if Path in options:
        return "paths by language" if any(typing.get_origin(o) is Mapping for o in options) else "path"
    base = options[0]
    if typing.get_origin(base) is typing.Annotated:
        base = typing.get_args(base)[0]
    origin = typing.get_origin(base) or base
    if origin is typing.Literal:
        return "choice"
    if origin in (Mapping, dict):
        if Path in typing.get_args(typing.get_args(base)[1]):
            return "paths by language"
        entry = typing.get_args(base)[1]
        if typing.get_origin(entry) is Sequence and typing.get_args(entry)[0] is not str:
            return "numbers by language"
        return "table by size" if typing.get_args(base)[0] is not str else "table by language"
    if origin is Sequence:
        return "list"
    return {bool: "boolean", int: "count", float: "number", str: "string"}[origin]


# Each form: the TOML line docs/config.md shows for it (KEY the parameter) and what the filter holds.
FORMS = {
    "count": ("KEY = 7", lambda held: held == 7),
    "number": ("KEY = 0.37", lambda held: held == 0.37),
    "boolean": ("KEY = NOT", None),
    "list": ('KEY = ["§", "¶"]', lambda held: list(held) == ["§", "¶"]),
    "table by size": ("KEY = { 7 = 0.37 }", lambda held: held[7] == 0.37 and len(held) > 1),
    "table by language": ('KEY = { de = ["der", "die"] }', lambda held: list(held["de"]) == ["der", "die"]),
    "string": ('KEY = "hq"', lambda held: held == "hq"),
    "path": ('KEY = "MODEL"', lambda held: Path(held).name == "model.bin"),
    "paths by language": ('KEY = { de = "MODEL" }', lambda held: Path(held["de"]).name == "model.bin"),
    "numbers by language": ("KEY = { de = [3.0, 7.0] }", lambda held: held["de"] == (3.0, 7.0)),
    "choice": ('KEY = "CHOICE"', None),  # the last of the choices
    "language code": ('KEY = "de"', lambda held: held == "de"),
}

PARAMETERS = [(name, key) for name in FILTERS for key in filter_parameters(name)]


@pytest.mark.parametrize(("name", "key"), PARAMETERS, ids=[f"{n}.{k}" for n, k in PARAMETERS])
def test_every_filter_parameter_is_set_from_toml_as_the_docs_show_and_reaches_the_filter(
    tmp_path, monkeypatch, name, key
):
    kind = _kind(_parameter_hints(name)[key])
    if kind == "string" and key.endswith("lang"):  # a string that names a language
        kind = "language code"
    line, holds = FORMS[kind]
    if kind == "choice":
        hint = _parameter_hints(name)[key]
        options = [hint] if typing.get_origin(hint) is typing.Literal else typing.get_args(hint)
        (choices,) = [typing.get_args(a) for a in options if a is not type(None)]
        line, holds = line.replace("CHOICE", choices[-1]), lambda held: held == choices[-1]
    default = inspect.signature(FILTERS[name]).parameters[key].default
    model = tmp_path / "model.bin"
    model.write_bytes(b"model")
    quantiles = {"levels": [0, 1], "global": [0, 1], "by_lang": {}}
    (tmp_path / "quality.json").write_text(json.dumps({"quantiles": quantiles}))
    monkeypatch.setattr(quality, "load_quality_model", lambda path: None)
    numbered = (name, key) == ("classifier", "score")  # score = "expected" weighs numbered labels
    monkeypatch.setattr(classifier, "model_labels", lambda path: ("__label__1",) if numbered else ("__label__hq",))
    monkeypatch.setattr(classifier, "_cached_cuts", lambda *args: {None: 0.5})
    monkeypatch.setattr(perplexity, "check_kenlm_file", lambda path, what: None)
    monkeypatch.setattr(perplexity, "_kenlm", lambda: None)
    monkeypatch.setattr(perplexity.KenLMPerplexity, "_pool_cutoffs", lambda self: {"en": (1.0, 2.0)})
    table = [f'[filter]\nfilters = ["{name}"]', f"[filter.params.{name}]"]
    if name in ("quality", "classifier") and key not in ("model", "models"):
        table.append(f'model = "{model}"')
    if name == "classifier" and key == "top_fraction":
        table.append(f'pool = "{model}"')
    if name == "perplexity" and key not in ("model", "models"):
        table.append(f'model = "{model}"')
    if name == "perplexity" and key == "max_bucket":
        table.append("cutoffs = { en = [1.0, 2.0] }")
    if name == "perplexity" and key == "tail_percentile":  # above the head's
        table.append("head_percentile = 0.1")
    if name == "c4_badwords" and key != "lists":
        table.append(f'lists = {{ en = "{model}" }}')
    table.append(line.replace("KEY", key).replace("NOT", str(not default).lower()).replace("MODEL", str(model)))
    config = _config(tmp_path, "\n".join(table) + "\n")
    (built,) = build_filters(config.filter.filters, config.filter.params)
    held = getattr(built, "model_path" if (name, key) == ("quality", "model") else key)
    assert held == (not default) if holds is None else holds(held), (key, held)


def test_the_config_reference_shows_each_form_of_a_parameter():
    examples = ["min_words = 50", "filter_javascript = false", 'bullets = ["•", "-"]', 'model = "']
    examples += ["dup_ngram_char_frac = { 5 = 0.15", "dup_5gram_char_frac = 0.15", 'stop_words = { en = ["']
    examples += ['models = { en = "']
    examples += ['lists = { en = "', 'default_lang = "en"']
    for example in examples:
        assert example in DOCS, example


@pytest.mark.parametrize(
    ("line", "sizes"),
    [
        ("dup_ngram_char_frac = { 5 = 0.2 }", {"dup": {5: 0.2}}),
        ("dup_5gram_char_frac = 0.2", {"dup": {5: 0.2}}),
        (
            "dup_ngram_char_frac = { 6 = 0.3, 11 = 0.1 }\ntop_2gram_char_frac = 0.25",
            {"dup": {6: 0.3, 11: 0.1}, "top": {2: 0.25}},
        ),
    ],
)
def test_ngram_thresholds_are_set_per_size_over_the_defaults(tmp_path, line, sizes):
    config = _config(tmp_path, f"[filter.params.gopher_repetition]\n{line}\n")
    (built,) = build_filters(["gopher_repetition"], config.filter.params)
    assert built.dup_ngram_char_frac == {**DUP_NGRAM_CHAR_FRAC, **sizes.get("dup", {})}
    assert built.top_ngram_char_frac == {**TOP_NGRAM_CHAR_FRAC, **sizes.get("top", {})}
    rules = {rule.name: rule.threshold for rule in built.rules()}
    for kind, given in sizes.items():
        for n, threshold in given.items():
            assert rules[f"gopher_repetition.{kind}_{n}gram_char_frac"] == threshold


def test_a_languages_ngram_thresholds_go_over_the_stages_size_by_size(tmp_path):
    config = _config(
        tmp_path,
        "[filter.params.gopher_repetition]\ndup_ngram_char_frac = { 6 = 0.3 }\n"
        "[filter.by_lang.de.params.gopher_repetition]\ndup_5gram_char_frac = 0.2\n",
    )
    built = build_filters(*config.filter.for_lang("de"))
    (repetition,) = [f for f in built if isinstance(f, GopherRepetition)]
    assert repetition.dup_ngram_char_frac == {**DUP_NGRAM_CHAR_FRAC, 5: 0.2, 6: 0.3}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "dup_ngram_char_frac = 0.2",
            "filter.params.gopher_repetition.dup_ngram_char_frac: input should be a valid dictionary, got 0.2; "
            "write it as a table of thresholds by n-gram size, 2 words or more ({ 5 = 0.15, 6 = 0.14 })",
        ),
        (
            'dup_ngram_char_frac = { 5 = "0.2" }',
            "filter.params.gopher_repetition.dup_ngram_char_frac.5: input should be a valid number, got '0.2'; "
            "write it as a number without quotes (0.15)",
        ),
        (  # the key as written, not the table entry it sets
            'dup_5gram_char_frac = "0.2"',
            "filter.params.gopher_repetition.dup_5gram_char_frac: input should be a valid number, got '0.2'; "
            "write it as a number without quotes (0.15)",
        ),
        (
            "dup_5gram_char_frac = 1.5",
            "filter.params.gopher_repetition.dup_5gram_char_frac: input should be less than or equal to 1, "
            "got 1.5; give a threshold within those bounds",
        ),
        (  # the example is of the parameter's own sizes (top: 2-4)
            "top_ngram_char_frac = 0.2",
            "filter.params.gopher_repetition.top_ngram_char_frac: input should be a valid dictionary, got 0.2; "
            "write it as a table of thresholds by n-gram size, 2 words or more ({ 2 = 0.2, 3 = 0.18 })",
        ),
        (
            "top_ngram_char_frac = { two = 0.2 }",
            "top_ngram_char_frac.two: input should be a valid integer, got 'two'; key each entry as in a table "
            "of thresholds by n-gram size, 2 words or more ({ 2 = 0.2, 3 = 0.18 })",
        ),
        (
            "dup_ngram_char_frac = { 5 = 1.5 }",
            "filter.params.gopher_repetition.dup_ngram_char_frac.5: input should be less than or equal to 1, "
            "got 1.5; give a threshold within those bounds",
        ),
        (
            "dup_ngram_char_frac = { five = 0.2 }",
            "filter.params.gopher_repetition.dup_ngram_char_frac.five: input should be a valid integer, got 'five'",
        ),
        (
            "dup_1gram_char_frac = 0.2",
            "filter.params.gopher_repetition.dup_1gram_char_frac: the size should be greater than or equal to 2, "
            "got 1; give a size within those bounds",
        ),
        (
            "dup_5gram_char_frac = 0.2\ndup_ngram_char_frac = { 5 = 0.3 }",
            "filter.params.gopher_repetition.dup_5gram_char_frac: dup_ngram_char_frac also sets size 5; set it once",
        ),
        ("dup_ngram_frac = 0.2", "dup_ngram_frac: unknown parameter; did you mean 'dup_ngram_char_frac'?"),
    ],
)
def test_a_wrong_ngram_threshold_is_one_line_that_says_the_form(tmp_path, line, message):
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, f"[filter.params.gopher_repetition]\n{line}\n")
    assert "\n" not in str(error.value)
    assert message in str(error.value)


def test_an_ngram_threshold_changed_re_decides_and_a_size_added_measures_again():
    def settings(sizes: dict | None) -> dict:
        params = {} if sizes is None else {"gopher_repetition": {"dup_ngram_char_frac": sizes}}
        return measuring_settings({"filter": {"params": params}, "batch_docs": 10})

    assert settings({"5": 0.2, "6": 0.3}) == settings(None)
    assert settings({"11": 0.1}) != settings(None)


def test_a_calibrated_fragment_keeps_a_languages_ngram_table_as_toml():
    import tomllib

    from pipeline.stages.calibrate import _toml_value

    assert tomllib.loads(f"x = {_toml_value({5: 0.2, 6: 0.1})}") == {"x": {"5": 0.2, "6": 0.1}}
