"""Config errors stop the run before any work, with one line: the key, the problem, the fix."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from demo.config import demo_config
from flows.cli import app
from pipeline.config import load_config
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import StageDir
from pipeline.formats.manifest import LOCK_NAME, RunDirInUse, check_run_dir, run_lock
from pipeline.stages.shard import remove_unlisted

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize(
    "text, message",
    [
        (
            GOOD.replace('reader = "jsonl"', 'reader = "jsonl"\ntxt_field = "body"'),
            "sources[0].txt_field: unknown key; did you mean 'text_field'?",
        ),
        ("shard_dcos = 5\n" + GOOD, "shard_dcos: unknown key; did you mean 'shard_docs'?"),
        (
            GOOD.replace('"jsonl"', '"csv"'),
            "sources[0].reader: Input should be 'jsonl', 'parquet', 'warc', 'wet' or 'text'",
        ),
        (
            GOOD.replace('paths = ["IN"]', 'paths = ["nowhere/*.jsonl"]'),
            "sources[web].paths: 'nowhere/*.jsonl' matches no file; fix the path or glob",
        ),
        (GOOD.replace('run_dir = "RUN"\n', ""), "run_dir: required key is missing"),
        (GOOD.replace('name = "web"', 'name = "web site"'), "sources[0].name: String should match pattern"),
        ('run_dir = "RUN"\nshard_docs = 0\n' + GOOD.split("\n", 1)[1], "shard_docs: Input should be greater than 0"),
        (GOOD + GOOD.split("\n", 1)[1], "source names must be unique; rename the repeated ['web']"),
        ('run_dir = "RUN\n', "is not valid TOML"),
        (
            GOOD + '[filter]\nfilters = ["gopher_qualty"]\n',
            "unknown filter 'gopher_qualty'; did you mean 'gopher_quality'?",
        ),
        (
            GOOD + "[filter.params.c4_quality]\nmin_word_per_line = 3\n",
            "filter.params.c4_quality.min_word_per_line: unknown parameter; did you mean 'min_words_per_line'? "
            "(allowed: ",
        ),
        (
            GOOD + "[filter.params.gopher_quality]\nmin_word = 3\n",
            "filter.params.gopher_quality.min_word: unknown parameter; did you mean 'min_words'? (allowed: ",
        ),
        (
            GOOD + '[filter]\nsources = ["webb"]\n',
            "filter.sources names no configured source: ['webb']; did you mean 'web'? (sources: web)",
        ),
        (
            GOOD.replace('"jsonl"', '"jsonll"'),
            "sources[0].reader: Input should be 'jsonl', 'parquet', 'warc', 'wet' or 'text' (got 'jsonll'); "
            "did you mean 'jsonl'?",
        ),
        (
            GOOD + '[dedup]\nkeep = "longst"\n',
            "dedup.keep: Input should be 'first', 'longest' or 'quality' (got 'longst'); did you mean 'longest'?",
        ),
        (
            GOOD.replace('"jsonl"', '"jsonl"\nlicense_field = "x"\nlicence_field = "y"'),
            "sources[0]: license_field and licence_field are one key spelt two ways; keep one",
        ),
        (
            GOOD.replace('"jsonl"', '"jsonl"\nlicence_feild = "x"'),
            "sources[0].licence_feild: unknown key; did you mean 'licence_field'?",
        ),
        (GOOD + "[lang]\nmin_score = 1.5\n", "lang.min_score: Input should be less than or equal to 1"),
        (
            GOOD + '[lang]\nmodel = "nowhere.ftz"\n',
            "lang.model: no file at 'nowhere.ftz'; point lang.model at a fastText LID model",
        ),
        (
            GOOD + '[tokenize]\ntokenizer = "nowhere.json"\n',
            "tokenize.tokenizer: no file at 'nowhere.json'; point tokenize.tokenizer at a tokenizer.json",
        ),
        # Errors that used to pass validation and stop the run after stages had written output:
        (
            GOOD + "[lang]\nmin_score_by_lang = {en = 1.5}\n",
            "lang.min_score_by_lang: the minimum score of 'en' is 1.5; a language-ID score is between 0 and 1",
        ),
        (
            GOOD + '[filter.params.gopher_quality]\nmax_symbol_word_ratio = "0.1"\n',
            "filter.params.gopher_quality.max_symbol_word_ratio: input should be a valid number, got '0.1'",
        ),
        (
            GOOD + "[filter.params.c4_quality]\nmin_words_per_line = 2.5\n",
            "filter.params.c4_quality.min_words_per_line: input should be a valid integer, got 2.5",
        ),
        (GOOD.replace('run_dir = "RUN"', 'run_dir = ""'), "run_dir: is empty; give the folder the run writes to"),
        (GOOD.replace('run_dir = "RUN"', 'run_dir = "IN"'), "in.jsonl' is a file, not a folder"),
        (
            GOOD.replace('run_dir = "RUN"', 'run_dir = "IN/runs/a"'),
            "in.jsonl' is a file, so no folder can be made under it",
        ),
        (GOOD + '[lang]\nmodel = "IN"\n', "in.jsonl' is not a fastText language-ID model ("),
        (GOOD + '[tokenize]\ntokenizer = "IN"\n', "in.jsonl' is not a tokenizer.json ("),
        (
            GOOD + '[filter]\nfilters = ["quality"]\n[filter.params.quality]\nmodel = "IN"\n',
            "filter.params.quality: the quality filter cannot be built (",
        ),
        (GOOD + '[mix]\nexclude = ["RUN.toml"]\n', "run.toml' is neither Parquet nor JSON lines"),
        (
            GOOD + '[[mix.mixtures]]\nname = ".."\n',
            "mix.mixtures[0].name: the mixture name '..' is not a plain folder name",
        ),
        (
            GOOD + '[[mix.mixtures]]\nname = "."\n',
            "mix.mixtures[0].name: the mixture name '.' is not a plain folder name",
        ),
        (GOOD + '[[mix.mixtures]]\nname = "../x"\n', "mix.mixtures[0].name: String should match pattern"),
        (
            GOOD.replace('name = "web"', 'name = ".."'),
            "sources[0].name: the source name '..' is not a plain folder name",
        ),
    ],
)
def test_config_errors_are_one_line_naming_key_problem_and_fix(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "\n" not in str(error.value)
    assert message in str(error.value)


WEIGHTS = GOOD + GOOD.replace('run_dir = "RUN"\n', "").replace('"web"', '"warc"') + "[mix]\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            WEIGHTS + "[[mix.mixtures]]\nweights = { web = 1, wrac = 2 }\n",
            "mix.mixtures[0].weights: unknown group 'wrac'; did you mean 'warc'? (the groups: web, warc)",
        ),
        (
            WEIGHTS + 'merge = { web = "news" }\n[[mix.mixtures]]\nweights = { web = 1 }\n',
            "mix.mixtures[0].weights: unknown group 'web' (mix.merge renames it 'news'); the groups are news, warc",
        ),
        (
            WEIGHTS + '[[mix.mixtures]]\nname = "a"\n[[mix.mixtures]]\nname = "b"\nweights = { zzz = 1 }\n',
            "mix.mixtures[1].weights: unknown group 'zzz'; the groups are web, warc",
        ),
    ],
)
def test_mix_weights_naming_no_source_group_stop_the_run_before_any_work(tmp_path, text, message):
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, text))
    assert str(error.value) == message


@pytest.mark.parametrize(
    "mix",
    [
        "[[mix.mixtures]]\nweights = { web = 1, warc = 0 }\n",
        'merge = { web = "news" }\n[[mix.mixtures]]\nweights = { news = 1 }\n',
        "min_share = 0.1\n[[mix.mixtures]]\nweights = { other = 1, warc = 1 }\n",
        # a language's groups are known once the documents are read: the mix stage checks them
        'group_by = ["source", "lang"]\n[[mix.mixtures]]\nweights = { "web/en" = 1, "web/xx" = 1 }\n',
    ],
)
def test_mix_weights_that_may_name_a_group_are_taken(tmp_path, mix):
    load_config(write(tmp_path, WEIGHTS + mix))


def test_license_spelt_as_datatrove_hf_and_spdx_spell_it_is_the_licence_key(tmp_path):
    text = GOOD.replace('"jsonl"', '"jsonl"\nlicense_field = "meta.license"\nlicense = "MIT"')
    text += '[filter]\nlicenses = ["MIT"]\nexclude_licenses = ["GPL-*"]\n'
    config = load_config(write(tmp_path, text))
    assert config.sources[0].licence_field == "meta.license" and config.sources[0].licence == "MIT"
    assert config.filter.licences == ["MIT"] and config.filter.exclude_licences == ["GPL-*"]
    british = text.replace("license", "licence").replace("meta.licence", "meta.license")
    assert load_config(write(tmp_path, british)) == config


def test_a_misspelt_stage_of_an_experiment_variant_has_a_suggestion(tmp_path):
    from experiment.config import VariantConfig
    from pipeline.formats.configfile import validate_model

    with pytest.raises(ConfigError, match=r"^stages\[1\]: Input should be .*\(got 'dedupe'\); did you mean 'dedup'\?$"):
        validate_model(VariantConfig, {"name": "v", "stages": ["lang", "dedupe"]})


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


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("texts.jsonl", '{"question": "q"}\n', "has no 'text' column (columns: question)"),
        ("texts.jsonl", "not json at all\n", "cannot be read as jsonl ("),
        ("texts.parquet", "PAR1 not parquet", "cannot be read as parquet ("),
    ],
)
def test_an_exclude_file_is_opened_when_the_config_is_checked(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, GOOD + f'[mix]\nexclude = ["{tmp_path / name}"]\n'))
    assert str(error.value).startswith(f"mix.exclude: '{tmp_path / name}'")
    assert message in str(error.value) and "\n" not in str(error.value)


# A run never deletes a user's files: run_dir must be new, empty, or a run of this project.


def user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    (folder / "source" / "docs").mkdir(parents=True)
    (folder / "source" / "docs" / "thesis.parquet").write_bytes(b"my work")
    (folder / "notes.txt").write_text("keep me")
    return folder


def test_a_folder_that_is_not_a_run_is_refused_and_a_run_or_empty_one_is_taken(tmp_path):
    with pytest.raises(ConfigError) as error:
        check_run_dir(user_folder(tmp_path))
    assert str(error.value) == (
        f"run_dir: '{tmp_path / 'mine'}' is a folder of other files (notes.txt, source), "
        "not a run; give a new or empty folder (a run replaces files in the folders it writes)"
    )
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text('{"format": "curate.mixture/1"}')
    with pytest.raises(ConfigError, match="holds a manifest.json that is not a curate run's"):
        check_run_dir(tmp_path / "other")
    (tmp_path / "empty").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text('{"config": {}, "stages": {}}')
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / LOCK_NAME).write_text("")
    for fine in ("new", "empty", "run", "locked"):
        check_run_dir(tmp_path / fine)


def test_curate_run_refuses_a_folder_of_other_files_and_writes_nothing(tmp_path):
    folder = user_folder(tmp_path)
    before = sorted((p.relative_to(folder), p.read_bytes()) for p in folder.rglob("*") if p.is_file())
    result = CliRunner().invoke(app, ["run", str(write(tmp_path, GOOD.replace("RUN", str(folder)))), "--quiet"])
    assert result.exit_code == 2
    assert "is a folder of other files (notes.txt, source), not a run" in result.output
    assert len(result.output.strip().splitlines()) == 1
    after = sorted((p.relative_to(folder), p.read_bytes()) for p in folder.rglob("*") if p.is_file())
    assert after == before  # no manifest, no lock, nothing deleted


@pytest.mark.parametrize("name", ["..", "."])
def test_a_mixture_named_dot_or_dot_dot_stops_the_cli_before_anything_is_written(tmp_path, name):
    path = write(tmp_path, GOOD + f'[[mix.mixtures]]\nname = "{name}"\n')
    result = CliRunner().invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 2
    assert f"mix.mixtures[0].name: the mixture name '{name}' is not a plain folder name" in result.output
    assert not (tmp_path / "run").exists()


def test_a_stage_removes_only_stale_files_of_its_own_kinds(tmp_path):
    from pipeline.io.writer import write_bytes, write_text

    stage = StageDir(tmp_path / "filter").make()
    write_bytes(b"a shard of a unit whose input is gone", stage.docs / "gone-00000.parquet")  # as the stage writes
    write_text("{}", stage.parts / "gone.json")
    (stage.docs / "README.md").write_text("a person's note")
    (stage.parts / "notes.txt").write_text("another")
    (stage.docs / "mine-00000.parquet").write_bytes(b"named as a shard, put there by a person")
    removed = remove_unlisted(stage, [])
    assert sorted(p.name for p in removed) == ["gone-00000.parquet", "gone.json"]
    assert (stage.docs / "README.md").exists() and (stage.parts / "notes.txt").exists()
    assert (stage.docs / "mine-00000.parquet").exists()


# Two runs on one run_dir: the second stops with one line.

HOLDER = """
import fcntl, json, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"pid": os.getpid(), "host": "h1", "started": "now"}).encode())
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture()
def held_run_dir(tmp_path):
    """A run_dir whose lock another process holds (until the test ends)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir / LOCK_NAME)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    yield run_dir, holder.pid
    holder.stdin.close()
    holder.wait(timeout=30)


def test_a_run_dir_locked_by_a_live_process_is_refused_and_a_dead_ones_lock_is_taken_over(held_run_dir):
    run_dir, pid = held_run_dir
    with pytest.raises(RunDirInUse) as error:
        with run_lock(run_dir):
            pass
    assert str(error.value) == (
        f"run_dir: '{run_dir}' is in use by another run (pid {pid} on h1, since now); "
        "wait for it to finish, or give another run_dir"
    )


def test_a_lock_left_by_a_killed_run_is_taken_over_and_holds_nest(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK_NAME).write_text(json.dumps({"pid": 999_999_999, "host": "h1", "started": "then"}))
    with run_lock(run_dir):
        record = json.loads((run_dir / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid()
        with run_lock(run_dir):  # the CLI holds it, then the curate flow again: one process nests
            pass
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                HOLDER.replace("fcntl.LOCK_EX)", "fcntl.LOCK_EX | fcntl.LOCK_NB)"),
                str(run_dir / LOCK_NAME),
            ],
            input="",
            capture_output=True,
            text=True,
        )
        assert child.returncode == 1 and "BlockingIOError" in child.stderr  # still held after the nested hold
    with run_lock(run_dir):  # let go: taken again
        pass


def test_curate_run_on_a_run_dir_in_use_stops_with_one_line(held_run_dir, tmp_path):
    run_dir, pid = held_run_dir
    result = CliRunner().invoke(app, ["run", str(write(tmp_path, GOOD)), "--quiet"])
    assert result.exit_code == 2
    assert f"is in use by another run (pid {pid} on h1, since now)" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (run_dir / "manifest.json").exists()


# A full disk is one line naming the path and the fix, not a traceback.


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/data/run/manifest.json"),
        OSError(f"[Errno 28] Error writing bytes to file. Detail: {os.strerror(errno.ENOSPC)}"),  # as Arrow says it
    ],
)
def test_a_full_disk_is_one_line_naming_the_path_and_the_fix(tmp_path, monkeypatch, error):
    import pipeline.formats.manifest
    import pipeline.stages.rerun

    def full(*args, **kwargs):
        raise error

    # The manifest's first write, when the run opens (before Prefect starts), fails.
    monkeypatch.setattr(pipeline.formats.manifest, "write_json", full)
    monkeypatch.setattr(pipeline.stages.rerun, "write_json", full)
    result = CliRunner().invoke(app, ["run", str(write(tmp_path, GOOD)), "--quiet"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    where = error.filename or str(tmp_path / "run")
    what = "the disk quota is exceeded" if error.errno == errno.EDQUOT else "no space left on the device"
    assert f"error: {what} while writing '{where}'; free space there" in result.output
    assert "Traceback" not in result.output


def test_a_full_disk_while_prefect_is_set_up_is_one_line(tmp_path, monkeypatch):
    """The disk fills after the manifest is written, as Prefect's folder is made: one line too."""
    import flows.runtime

    where = str(tmp_path / "run" / ".prefect")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), where)

    monkeypatch.setattr(flows.runtime, "configure_prefect", full)
    result = CliRunner().invoke(app, ["run", str(write(tmp_path, GOOD)), "--quiet"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: no space left on the device while writing '{where}'; free space there (or write elsewhere) "
        "and run again: finished work is kept and not redone"
    )


def test_every_shipped_experiment_config_is_valid():
    """The experiment configs in configs/ parse, with their trainer sections, as a user runs them."""
    from pathlib import Path

    from experiment.config import load_experiment
    from trainer.config import parse_train_config

    configs = sorted((Path(__file__).parents[2] / "configs").glob("experiment*.toml"))
    assert len(configs) >= 5
    for path in configs:
        config = load_experiment(path)
        parse_train_config(
            {**config.train, "mixture": ".", "out_dir": "out", "seed": 0, "max_tokens": config.budget_tokens}
        )
        assert config.all_variants()
