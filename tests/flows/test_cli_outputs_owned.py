"""Outputs of train-quality, train-tokenizer, calibrate and eval: a folder is written only when it
is new, empty or one the same command wrote before (pipeline.io.owner.claim); a named file that
exists is replaced only with --force. A user's file is never overwritten."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run with a lang and a filter stage of 80 English documents of two sources."""
    root = tmp_path_factory.mktemp("owned") / "run"
    news = [f"The minister said the budget would rise by {i} percent next year, after long talks." for i in range(40)]
    spam = [f"cheap pills buy now best price {i} cheap pills click here free free free" for i in range(40)]
    frame = pl.DataFrame(
        {"id": [f"d{i:02d}" for i in range(80)], "text": news + spam, "source": ["news"] * 40 + ["web"] * 40}
    ).with_columns(lang=pl.lit("en"))
    for stage in ("lang", "filter"):
        (root / stage / "docs").mkdir(parents=True)
        frame.write_parquet(root / stage / "docs" / "a.parquet")
    (root / "manifest.json").write_text(json.dumps({"stages": {"source": {}, "lang": {}, "filter": {}}}))
    return root


def curate(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def refused(result, says: str) -> None:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.output


def train_quality(run, out):
    return curate("train-quality", out, "--run-dir", run, "--positive", "news", "--negative", "web")


def test_train_quality_refuses_a_folder_of_a_users_files_and_reruns_into_its_own(run, tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "quality.json").write_text("mine")
    refused(train_quality(run, out), "holds files curate did not write (quality.json)")
    assert (out / "quality.json").read_text() == "mine" and sorted(p.name for p in out.iterdir()) == ["quality.json"]

    mine = tmp_path / "mine"
    for _ in range(2):  # a rerun into the folder the first run wrote
        result = train_quality(run, mine)
        assert result.exit_code == 0, result.output
    assert json.loads((mine / "quality.json").read_text())["counts"]["positives"] == 40
    (mine / "quality.ftz").write_text("mine")  # the other model file's name, put there since
    assert train_quality(run, mine).exit_code == 0
    assert (mine / "quality.ftz").read_text() == "mine"


def test_train_tokenizer_refuses_a_users_folder_or_file_and_reruns_into_its_own(run, tmp_path):
    out = tmp_path / "tok"
    out.mkdir()
    (out / "tokenizer.json").write_text("mine")
    refused(
        curate("train-tokenizer", run, out, "--vocab-size", 300), "holds files curate did not write (tokenizer.json)"
    )
    assert (out / "tokenizer.json").read_text() == "mine"

    mine = tmp_path / "mine"
    for _ in range(2):
        result = curate("train-tokenizer", run, mine, "--vocab-size", 300)
        assert result.exit_code == 0, result.output

    named = tmp_path / "named.json"
    named.write_text("mine")
    refused(curate("train-tokenizer", run, named, "--vocab-size", 300), "named.json exists; pass --force")
    assert named.read_text() == "mine"
    result = curate("train-tokenizer", run, named, "--vocab-size", 300, "--force")
    assert result.exit_code == 0, result.output
    assert json.loads(named.read_text())["model"]["type"] == "BPE"


def test_train_tokenizer_and_train_quality_never_write_into_the_run_they_read(run, tmp_path):
    """`train-tokenizer RUN RUN/tokenize/tokenizer.json --force` replaced the run's own tokenizer
    (its mixtures then refused to export or train), and a new folder inside a stage folder was
    written into; train-quality likewise wrote into the run it read."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "tokenize").mkdir()
    (copy / "tokenize" / "tokenizer.json").write_text("the run's")
    (tmp_path / "link").symlink_to(copy / "filter")
    before = sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in copy.rglob("*"))
    for out in (copy / "tokenize" / "tokenizer.json", copy / "tokenize" / "new", copy, tmp_path / "link" / "tok"):
        result = curate("train-tokenizer", copy, out, "--vocab-size", 300, "--force")
        refused(result, f"is inside the run it reads ('{copy}'); write the tokenizer outside it")
    refused(train_quality(copy, copy / "quality"), "is inside the run it reads")
    assert sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in copy.rglob("*")) == before


def test_eval_json_refuses_an_existing_file_before_scoring_unless_forced(tmp_path):
    results = tmp_path / "results.json"
    results.write_text("mine")
    # Neither the checkpoint nor the items exist: --json is checked first.
    refused(curate("eval", tmp_path / "no-train", "--tasks", tmp_path / "no.jsonl", "--json", results), "--force")
    forced = curate("eval", tmp_path / "no-train", "--tasks", tmp_path / "no.jsonl", "--json", results, "--force")
    assert forced.exit_code == 2 and "--json" not in forced.output, forced.output
    assert results.read_text() == "mine"


def test_stage_listings_read_only_parquet_files_not_a_folder_or_link_so_named(run, tmp_path):
    from types import SimpleNamespace

    from experiment.prepare import final_documents

    copy = tmp_path / "run"
    for stage in ("lang", "filter"):
        (copy / stage / "docs").mkdir(parents=True)
        (copy / stage / "docs" / "a.parquet").symlink_to(run / stage / "docs" / "a.parquet")
        (copy / stage / "docs" / "notes.parquet").mkdir()  # a user's folder, with a backup in it
        (copy / stage / "docs" / "notes.parquet" / "backup.parquet").symlink_to(run / stage / "docs" / "a.parquet")
        (copy / stage / "docs" / "more.parquet").symlink_to(copy / stage / "docs" / "notes.parquet")
    (copy / "manifest.json").write_text((run / "manifest.json").read_text())
    result = curate("train-tokenizer", copy, tmp_path / "tok", "--vocab-size", 300)
    assert result.exit_code == 0 and "trained on 80 documents" in result.output, result.output
    result = train_quality(copy, tmp_path / "model")
    assert result.exit_code == 0, result.output
    assert final_documents(SimpleNamespace(run_dir=copy)).height == 80


@pytest.mark.parametrize("command", [["inspect"], ["report"], ["calibrate"], ["export", "{tmp}/out"]])
@pytest.mark.parametrize("where", ["zip://a::memory://missing.zip", "zip://a::{tmp}/not-a.zip"])
def test_a_location_that_cannot_be_opened_is_one_line(tmp_path, command, where):
    (tmp_path / "not-a.zip").write_text("no archive")
    where = where.format(tmp=tmp_path)
    result = curate(command[0], where, *[arg.format(tmp=tmp_path) for arg in command[1:]])
    shown = where.replace("memory://", "memory:///")  # as the file system names it
    refused(result, f"{shown} cannot be opened (")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["inspect"], ["report"]])
def test_an_archive_url_without_its_archive_says_how_to_name_one(command):
    """`curate inspect zip://x.zip` said only that the current folder is a directory."""
    refused(curate(command[0], "zip://x.zip"), "an archive's URL names the archive after '::', as zip://run::")


@pytest.mark.parametrize("damaged", ["lang/docs/a.parquet", "filter/docs/a.parquet", "manifest.json"])
def test_calibrate_and_training_on_a_damaged_run_say_which_file_in_one_line(run, tmp_path, damaged):
    """A truncated shard or manifest.json was a traceback (83 lines from calibrate, 55 from
    train-tokenizer), where report and inspect give one line naming the file and the fix."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    path = copy / damaged
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    config = tmp_path / "run.toml"
    config.write_text(f'run_dir = "{tmp_path / "other"}"\n[[sources]]\nname = "news"\npaths = ["{tmp_path}"]\n')
    stage = damaged.split("/")[0] if "/" in damaged else "filter"  # the stage read (a manifest: every one)
    commands = [
        ["calibrate", copy, "--config", config, "--min-docs", 1, "--stage", stage],
        ["train-tokenizer", copy, tmp_path / "tok", "--vocab-size", 300, "--stage", stage],
    ]
    if "/" in damaged:  # train-quality reads a stage's documents, not the manifest
        commands.append(
            ["train-quality", tmp_path / "model", "--run-dir", copy, "--stage", stage, "--positive", "news",
             "--negative", "web"]
        )  # fmt: skip
    for args in commands:
        refused(curate(*args), f"{damaged} is damaged or truncated (")
    assert not (tmp_path / "tok").exists() and not (tmp_path / "model").exists()


def test_force_never_replaces_a_file_of_a_run_or_of_a_claimed_output_folder(run, tmp_path):
    """`eval --json RUN/manifest.json --force` wiped the run's record, and `calibrate --out
    RUN/filter/stats.json --force` its stats: --force replaces a user's file, never a run's."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    for target in (copy / "manifest.json", copy / "filter" / "stats.json", copy / "new.json"):
        refused(
            curate("eval", tmp_path / "no-train", "--tasks", tmp_path / "no.jsonl", "--json", target, "--force"),
            "a run or output folder curate writes",
        )
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    claimed = tmp_path / "tok"
    assert curate("train-tokenizer", run, claimed, "--vocab-size", 300).exit_code == 0
    refused(
        curate("train-tokenizer", run, claimed / "tokenizer.json", "--vocab-size", 300, "--force"),
        "a run or output folder curate writes",
    )
