"""Paths and names in a config, as a user meets them with `curate run`: ``~`` and environment
variables expanded once, a run folder apart from its inputs, names that fit a file name, strict
numbers. Each refusal is one line, exit code 2, and nothing written in the home folder, the
current folder or the inputs."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import parse_config
from pipeline.formats.configfile import ConfigError
from tests.helpers import run_curate, shared_api_env

OFF = "[lang]\nenabled = false\n"


def tree(folder: Path) -> list[tuple[str, bytes]]:
    """Every file under ``folder`` with its bytes (folders too, as empty entries)."""
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else b"") for p in folder.rglob("*"))


@pytest.fixture()
def user(tmp_path):
    """A user's home folder with a file in it, a folder to run in, and a folder of Parquet input."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("keep me")
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"text": [f"document {i} of the crawl" for i in range(30)]}).write_parquet(data / "a.parquet")
    return home, work, data


def curate_run(config: str, user, **env) -> subprocess.CompletedProcess:
    """`curate run` on ``config`` as the user: HOME their home, in their work folder."""
    home, work, data = user
    path = work / "run.toml"
    path.write_text(config.replace("DATA", str(data)))
    return run_curate(["run", str(path), "--quiet"], work, env={"HOME": str(home), **env}, timeout=300)


def source(name: str = "web", paths: str = '["DATA"]') -> str:
    return f'[[sources]]\nname = "{name}"\nreader = "parquet"\npaths = {paths}\n'


def refused(result: subprocess.CompletedProcess, user, message: str) -> None:
    """Exit code 2, one ``error:`` line with ``message``, and nothing written anywhere."""
    home, work, data = user
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    assert tree(home) == [("notes.txt", b"keep me")]
    assert [name for name, _ in tree(work)] == ["run.toml"]
    assert [name for name, _ in tree(data)] == ["a.parquet"]


def test_run_dir_tilde_is_the_home_folder_for_every_check_and_a_home_of_files_is_refused(user):
    """It used to pass the folder check as a literal '~', then write into $HOME/source/docs beside
    the user's files, make ./~ in the current folder and end in a traceback."""
    home, _, _ = user
    result = curate_run('run_dir = "~"\n' + source() + OFF, user)
    refused(result, user, f"run_dir: '{home}' is a folder of other files (notes.txt), not a run")


def test_tilde_and_variables_are_expanded_in_every_path_of_the_run_config(user, monkeypatch):
    home, work, data = user
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DATA_DIR", str(data))
    (home / "texts.jsonl").write_text('{"text": "a held-out text"}\n')
    config = parse_config(
        {
            "run_dir": "~/runs/crawl",
            "sources": [{"name": "web", "reader": "parquet", "paths": ["$DATA_DIR/*.parquet"]}],
            "lang": {"enabled": False},
            "mix": {"exclude": ["~/texts.jsonl"]},
        }
    )
    assert config.run_dir == home / "runs" / "crawl"
    assert config.sources[0].paths == [f"{data}/*.parquet"]
    assert config.sources[0].input_files() == [data / "a.parquet"]
    assert config.mix.exclude == [home / "texts.jsonl"]


def test_an_unset_variable_in_a_path_is_one_line_before_any_work(user):
    result = curate_run('run_dir = "$NO_SUCH_FOLDER/run"\n' + source() + OFF, user)
    refused(result, user, "run_dir: the environment variable $NO_SUCH_FOLDER in '$NO_SUCH_FOLDER/run' is not set")


@pytest.mark.parametrize(
    "run_dir, paths",
    [
        ("DATA/run", '["DATA"]'),  # a folder source reads every Parquet file below it
        ("DATA/run", '["DATA/**/*.parquet"]'),
        ("DATA", '["DATA/*.parquet"]'),
    ],
)
def test_a_run_dir_inside_a_folder_its_source_reads_is_refused(user, run_dir, paths):
    """It used to run, exit 0, and on the second run read its own output: a Parquet source of 30
    documents went to 60."""
    _, _, data = user
    result = curate_run(f'run_dir = "{run_dir}"\n' + source(paths=paths) + OFF, user)
    refused(result, user, f"run_dir: '{data / 'run' if run_dir.endswith('run') else data}' is inside '{data}'")
    assert "reads, so a run would read its own output as input; give a run_dir outside that folder" in result.stderr


def test_an_input_inside_the_run_folder_is_refused(user):
    _, _, data = user
    result = curate_run(f'run_dir = "{data.parent}"\n' + source(paths='["DATA/a.parquet"]') + OFF, user)
    refused(
        result, user, f"sources[web].paths: '{data / 'a.parquet'}' is inside run_dir '{data.parent}', where the run"
    )


def test_a_run_dir_beside_its_inputs_is_taken(user):
    _, work, data = user
    config = parse_config(
        {
            "run_dir": str(data.parent / "run"),
            "sources": [{"name": "web", "reader": "parquet", "paths": [f"{data}/*.parquet"]}],
            "lang": {"enabled": False},
        }
    )
    assert config.sources[0].input_files() == [data / "a.parquet"]


@pytest.mark.parametrize(
    "config, message",
    [
        # Used to die with OSError: File name too long in the source stage ...
        (source("w" * 300), "sources[0].name: the source name 'wwwwwwwwwwwwwwwwwwww...wwwwwwwwww' is 300 bytes"),
        # ... and, for a mixture, only after every other stage had run.
        (
            source() + '[[mix.mixtures]]\nname = "' + "m" * 300 + '"\n',
            "mix.mixtures[0].name: the mixture name 'mmmmmmmmmmmmmmmmmmmm...mmmmmmmmmm' is 300 bytes",
        ),
        (
            source("w" * 200) + '[[mix.mixtures]]\nname = "' + "m" * 21 + '"\n',
            "with the group 'wwwwwwwwwwwwwwwwwwww...wwwwwwwwww' run to 256, past the file system's 255; "
            "shorten the two by 1 bytes in all",
        ),
        # Used to pass the config and stop in the mix stage after two Prefect tracebacks.
        (
            source() + source("news") + '[mix]\nmerge = {web = "a b", news = "a+b"}\n',
            "mix.merge: the groups 'a b' and 'a+b' would share the file name 'a+b'; rename one in mix.merge",
        ),
        (
            source() + '[mix]\nmerge = {web = "' + "x" * 300 + '"}\n',
            "mix.merge: the new name of 'web' 'xxxxxxxxxxxxxxxxxxxx...xxxxxxxxxx' is 300 bytes",
        ),
        ('batch_docs = "4096"\n' + source(), "batch_docs: Input should be a valid integer (got '4096')"),
        (
            source() + "[filter.params.gopher_quality]\nmin_words = -5\n",
            "filter.params.gopher_quality.min_words: input should be greater than or equal to 0, got -5; "
            "give a threshold within those bounds",
        ),
    ],
)
def test_a_name_or_number_the_run_cannot_use_stops_curate_run_with_one_line(user, config, message):
    result = curate_run('run_dir = "run"\n' + config + OFF, user)
    refused(result, user, message)


@pytest.mark.parametrize(
    "top, section, message",
    [
        ("", "[filter.params.gopher_quality]\nmax_bullet_lines_ratio = 1.5\n", "less than or equal to 1, got 1.5"),
        ("", "[filter.params.fineweb_quality]\nshort_line_length = -1\n", "greater than or equal to 0, got -1"),
        ("", "[filter.params.c4_quality]\nmin_sentences = -1\n", "greater than or equal to 0, got -1"),
        ("", "[filter.params.gopher_repetition]\ndup_line_frac = 2.0\n", "less than or equal to 1, got 2.0"),
        ("", "[dedup]\nseed = -1\n", "dedup.seed: Input should be greater than or equal to 0"),
        ("seed = -1\n", "", "seed: Input should be greater than or equal to 0"),
        ("", "[dedup]\nexact = 1\n", "dedup.exact: Input should be a valid boolean"),
        ("", "[[mix.mixtures]]\nweights = {web = -1.0}\n", "mix.mixtures[0].weights.web: Input should be greater"),
    ],
)
def test_numbers_out_of_their_bounds_are_refused_by_the_config(user, top, section, message):
    _, work, data = user
    text = f'run_dir = "{work / "run"}"\n{top}' + source() + "[lang]\nenabled = false\n" + section
    with pytest.raises(ConfigError) as error:
        parse_config(tomllib.loads(text.replace("DATA", str(data))))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_trainer_and_experiment_configs_expand_their_paths(tmp_path, monkeypatch):
    from experiment.config import parse_experiment
    from trainer.config import parse_train_config

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    train = parse_train_config({"mixture": "~/mix/main", "out_dir": "$RUNS/train", "max_steps": 1})
    assert (train.mixture, train.out_dir) == (tmp_path / "mix" / "main", tmp_path / "runs" / "train")
    experiment = parse_experiment(
        {"out_dir": "~/exp", "demo": True, "budget_tokens": 1000, "variants": [{"name": "raw"}]}
    )
    assert experiment.out_dir == tmp_path / "exp"
    with pytest.raises(ConfigError, match=r"^seed: Input should be greater than or equal to 0"):
        parse_train_config({"mixture": "m", "out_dir": "o", "max_steps": 1, "seed": -1})
    with pytest.raises(ConfigError, match=r"^variants\[0\]\.weights\.web: Input should be greater than or equal to 0"):
        parse_experiment(
            {"out_dir": "o", "demo": True, "budget_tokens": 1, "variants": [{"name": "a", "weights": {"web": -1}}]}
        )


def test_the_trainer_and_experiment_configs_read_file_urls_and_refuse_other_urls(tmp_path, monkeypatch):
    """``file://localhost/x`` used to become the local folder ./file:/localhost/x (trained into,
    or looked in for the mixture), and an experiment's ``out_dir = "memory://b/exp"`` the folder
    ./memory:/b/exp and an internal error; out_dir's refusal spoke of the mixture."""
    from experiment.config import parse_experiment
    from trainer.config import parse_train_config

    monkeypatch.chdir(tmp_path)
    train = parse_train_config(
        {
            "mixture": f"file://localhost{tmp_path}/mix/main",
            "out_dir": f"file://{tmp_path}/out",
            "eval_mixtures": {"ref": f"file://localhost{tmp_path}/ref"},
            "eval_tasks": [f"file://localhost{tmp_path}/items.jsonl"],
            "max_steps": 1,
        }
    )
    assert (train.mixture, train.out_dir) == (tmp_path / "mix" / "main", tmp_path / "out")
    assert (train.eval_mixtures["ref"], train.eval_tasks) == (tmp_path / "ref", [tmp_path / "items.jsonl"])
    for key, value, says in (
        ("out_dir", "memory://b/out", "the trainer writes its checkpoints to a local folder"),
        ("mixture", "memory://b/mix", "the trainer memory-maps a local mixture folder"),
        ("eval_tasks", ["memory://b/items.jsonl"], "names a file on this machine"),
    ):
        settings = {"mixture": "mix", "out_dir": "out", "max_steps": 1, key: value}
        with pytest.raises(ConfigError) as error:
            parse_train_config(settings)
        line = str(error.value)
        assert line.startswith(f"{key}") and "is a URL" in line and says in line and "\n" not in line, line
        assert key == "mixture" or "mixture" not in line, line
    demo = {"demo": True, "budget_tokens": 1000, "variants": [{"name": "raw"}]}
    experiment = parse_experiment(
        {**demo, "out_dir": f"file://localhost{tmp_path}/exp", "corpus_dir": f"file://{tmp_path}/corpus"}
    )
    assert (experiment.out_dir, experiment.corpus_dir) == (tmp_path / "exp", tmp_path / "corpus")
    for key in ("out_dir", "corpus_dir", "quality_model"):
        with pytest.raises(ConfigError, match=rf"^{key}: memory://b/x is a URL; this setting names a"):
            parse_experiment({"out_dir": "exp", **demo, key: "memory://b/x"})
    assert list(tmp_path.iterdir()) == []  # no ./memory: or ./file: folder


def test_names_at_the_longest_the_config_takes_make_a_whole_run(user, prefect_server):
    """The config's limits hold for the file names the run really makes: a source name and a
    mixture name whose part records are exactly 255 bytes run through every stage."""
    _, work, data = user
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    texts = [" ".join(words[(i + j) % len(words)] for j in range(40)) + f" number {i}." for i in range(60)]
    pl.DataFrame({"text": texts}).write_parquet(data / "a.parquet")
    name, mixture = "w" * 200, "m" * 20
    off = "enabled = false\n"
    config = (
        'run_dir = "run"\n'
        + source(name)
        + f"[lang]\n{off}[filter]\n{off}[dedup]\n{off}[lines]\n{off}[tokenize]\nvocab_size = 300\n"
        + f'[mix]\nvalidation_fraction = 0.2\n[[mix.mixtures]]\nname = "{mixture}"\n'
    )
    result = curate_run(config, user, **shared_api_env())  # the test session's server
    assert result.returncode == 0, result.stderr[-2000:]
    parts = sorted(p.name for p in (work / "run" / "mix" / "parts").glob("*.json"))
    assert max(len(p.encode()) + len(".tmp-") + 1 + 7 for p in parts) == 255  # its temporary at the widest pid
    assert (work / "run" / "mix" / mixture / "train" / f"{name}-0000.arrow").is_file()
