"""Config errors stop the run before any work, with one line: the key, the problem, the fix."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.demo import demo_config
from pipeline.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "in.jsonl").write_text('{"text": "hello"}\n')
    path = tmp_path / "run.toml"
    path.write_text(text.replace("IN", str(tmp_path / "in.jsonl")).replace("RUN", str(tmp_path / "run")))
    return path


GOOD = """run_dir = "RUN"
[[sources]]
name = "web"
reader = "jsonl"
paths = ["IN"]
"""


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('reader = "jsonl"', 'reader = "jsonl"\ntxt_field = "body"'),
     "sources[0].txt_field: unknown key; did you mean 'text_field'?"),
    ("shard_dcos = 5\n" + GOOD, "shard_dcos: unknown key; did you mean 'shard_docs'?"),
    (GOOD.replace('"jsonl"', '"csv"'), "sources[0].reader: Input should be 'jsonl', 'parquet', 'warc', 'wet' or 'text'"),
    (GOOD.replace('paths = ["IN"]', 'paths = ["nowhere/*.jsonl"]'),
     "sources[web].paths: 'nowhere/*.jsonl' matches no file; fix the path or glob"),
    (GOOD.replace('run_dir = "RUN"\n', ""), "run_dir: required key is missing"),
    (GOOD.replace('name = "web"', 'name = "web site"'), "sources[0].name: String should match pattern"),
    ('run_dir = "RUN"\nshard_docs = 0\n' + GOOD.split("\n", 1)[1], "shard_docs: Input should be greater than 0"),
    (GOOD + GOOD.split("\n", 1)[1], "source names must be unique; rename the repeated ['web']"),
    ('run_dir = "RUN\n', "is not valid TOML"),
    (GOOD + '[filter]\nfilters = ["gopher_qualty"]\n', "unknown filter 'gopher_qualty'; did you mean 'gopher_quality'?"),
    (GOOD + '[filter.params.c4_quality]\nmin_word_per_line = 3\n',
     "params.c4_quality.min_word_per_line: unknown parameter (allowed: "),
    (GOOD + '[filter]\nsources = ["webb"]\n', "filter.sources names no configured source: ['webb']"),
    (GOOD + '[lang]\nmin_score = 1.5\n', "lang.min_score: Input should be less than or equal to 1"),
    (GOOD + '[lang]\nmodel = "nowhere.ftz"\n',
     "lang.model: no file at 'nowhere.ftz'; point lang.model at a fastText LID model"),
    (GOOD + '[tokenize]\ntokenizer = "nowhere.json"\n',
     "tokenize.tokenizer: no file at 'nowhere.json'; point tokenize.tokenizer at a tokenizer.json"),
])
def test_config_errors_are_one_line_naming_key_problem_and_fix(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "\n" not in str(error.value)
    assert message in str(error.value)


def test_a_good_config_parses_and_a_missing_config_file_is_named(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.sources[0].input_files() == [tmp_path / "in.jsonl"]
    with pytest.raises(ConfigError, match="is not a file"):
        load_config(tmp_path / "absent.toml")


def test_cli_stops_before_any_work_with_exit_code_2(tmp_path):
    path = write(tmp_path, GOOD.replace('"jsonl"', '"csv"'))
    result = CliRunner().invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 2
    assert "sources[0].reader" in result.output
    assert not (tmp_path / "run").exists()


def test_configs_demo_toml_is_the_config_curate_demo_runs():
    with open(REPO / "configs" / "demo.toml", "rb") as handle:
        assert tomllib.load(handle) == demo_config()
