"""Checkpoints that went bad: a run resumes from the newest one that passes its checksum and
loads, says which it skipped, and stops with one line when none does; the temporaries of killed
checkpoint writes are removed at start, and nothing else."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from pipeline.formats.configfile import ConfigError
from tests.trainer_fixtures import toml_text, train_config_dict
from trainer.checkpoints import load_checkpoint, save_checkpoint
from trainer.config import parse_train_config
from trainer.generate import load_model
from trainer.metrics import read_metrics
from trainer.train import main, train


def config(mixture: Path, out_dir: Path, **overrides):
    return parse_train_config(train_config_dict(mixture, out_dir, model={"dropout": 0.1}, **overrides))


@pytest.fixture(scope="module")
def straight(mixture_dir, tmp_path_factory):
    """One 8-step run that never stopped (checkpoints at steps 4 and 8; dropout on, so that a
    resume must restore the RNG states too)."""
    out = tmp_path_factory.mktemp("straight") / "out"
    train(config(mixture_dir, out), log=None)
    return out


def interrupted_copy(straight: Path, target: Path) -> Path:
    """The straight run as left by one that wrote its step-8 checkpoint but not its summary."""
    shutil.copytree(straight, target)
    (target / "summary.json").unlink()
    return target


def flip_a_weight_byte(path: Path) -> int:
    """Flip one byte inside the stored token embedding (where torch.load does not notice); return
    its offset."""
    data = bytearray(path.read_bytes())
    weights = torch.load(path, weights_only=True)["model"]["wte.weight"]
    offset = bytes(data).find(weights.numpy().tobytes()[:64]) + 32
    assert offset > 32
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return offset


def corrupt(path: Path, how: str) -> None:
    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        flip_a_weight_byte(path)


@pytest.mark.parametrize(
    "how, reason",
    [
        ("empty", r"empty \(0 bytes\)"),
        ("truncated", "sha256 [0-9a-f]{12} does not match"),
        ("flipped", "sha256 [0-9a-f]{12} does not match"),
    ],
)
def test_a_bad_latest_checkpoint_falls_back_to_the_older_one(straight, mixture_dir, tmp_path, how, reason):
    """The latest checkpoint (step 8) is empty, cut in half, or has one flipped byte; the run says
    so, resumes from step 4 and repeats the straight run bit for bit from there."""
    out = interrupted_copy(straight, tmp_path / "out")
    corrupt(out / "checkpoints" / "step-000008.pt", how)
    lines: list[str] = []
    train(config(mixture_dir, out), log=lines.append)
    bad, old = out / "checkpoints" / "step-000008.pt", out / "checkpoints" / "step-000004.pt"
    assert any(line.startswith(f"warning: skipping checkpoint {bad}: ") for line in lines), lines
    assert any(
        line.startswith("warning: using the older checkpoint step-000004.pt, not step-000008.pt") for line in lines
    ), lines
    assert f"resuming from {old} (step 4)" in lines
    assert any(re.search(reason, line) for line in lines), lines
    assert read_metrics(out) == [
        {**row, "tokens_per_s": resumed["tokens_per_s"]}
        for row, resumed in zip(read_metrics(straight), read_metrics(out))
    ]
    assert len(read_metrics(out)) == 8
    one = load_checkpoint(straight / "checkpoints" / "step-000008.pt")
    two = load_checkpoint(out / "checkpoints" / "step-000008.pt")  # rewritten: it passes again
    for key, tensor in one["model"].items():
        assert torch.equal(tensor, two["model"][key]), key
    assert one["loader"] == two["loader"]


def test_a_flipped_byte_loads_silently_without_the_checksum(straight, tmp_path):
    path = tmp_path / "step-000008.pt"
    shutil.copyfile(straight / "checkpoints" / "step-000008.pt", path)
    shutil.copyfile(straight / "checkpoints" / "step-000008.pt.sha256", tmp_path / "step-000008.pt.sha256")
    flip_a_weight_byte(path)
    before = torch.load(straight / "checkpoints" / "step-000008.pt", weights_only=True)["model"]["wte.weight"]
    after = torch.load(path, weights_only=True)["model"]["wte.weight"]  # torch alone: no error
    assert (before != after).sum().item() == 1
    with pytest.raises(
        ConfigError,
        match=r"step-000008\.pt: sha256 [0-9a-f]{12} does not match [0-9a-f]{12} in "
        r"step-000008\.pt\.sha256",
    ):
        load_checkpoint(path)


def test_no_checkpoint_loads_is_one_line(straight, mixture_dir, tmp_path, capsys):
    out = interrupted_copy(straight, tmp_path / "out")
    corrupt(out / "checkpoints" / "step-000008.pt", "truncated")
    corrupt(out / "checkpoints" / "step-000004.pt", "empty")
    with pytest.raises(
        ConfigError,
        match=r"^no checkpoint in .*checkpoints loads \(step-000008\.pt: sha256 .*; "
        r"step-000004\.pt: empty \(0 bytes\)\); delete the bad files",
    ) as error:
        train(config(mixture_dir, out), log=None)
    assert "\n" not in str(error.value)
    path = tmp_path / "train.toml"
    path.write_text(toml_text(train_config_dict(mixture_dir, out, model={"dropout": 0.1})))
    capsys.readouterr()
    assert main([str(path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: no checkpoint in ") and "\n" not in err
    assert "Traceback" not in captured.err + captured.out and "Aborted" not in captured.err + captured.out


def test_latest_naming_a_missing_checkpoint_falls_back(straight, mixture_dir, tmp_path):
    out = interrupted_copy(straight, tmp_path / "out")
    (out / "checkpoints" / "step-000008.pt").unlink()
    lines: list[str] = []
    summary = train(config(mixture_dir, out), resume=True, log=lines.append)
    assert f"warning: skipping checkpoint {out / 'checkpoints' / 'step-000008.pt'}: missing" in lines
    assert f"resuming from {out / 'checkpoints' / 'step-000004.pt'} (step 4)" in lines
    assert summary["steps"] == 8


def test_stale_temporaries_are_removed_at_start_and_nothing_else(straight, mixture_dir, tmp_path):
    out = interrupted_copy(straight, tmp_path / "out")
    folder = out / "checkpoints"
    stale = [".step-000012.pt.tmp-4242", ".step-000012.pt.sha256.tmp-4242", ".latest.tmp-17"]
    kept = [
        "notes.txt",
        ".notes.tmp-1",
        "step-000012.pt.tmp-4242",
        ".step-000012.pt.tmp-x",
        ".step-1.pt.bak",
        "my.latest.tmp-3",
    ]
    for name in stale + kept:
        (folder / name).write_bytes(b"x" * 1000)
    (out / ".metrics.csv.tmp-9").write_bytes(b"outside the checkpoint folder")
    lines: list[str] = []
    summary = train(config(mixture_dir, out), log=lines.append)  # finished: it only evaluates
    assert summary["steps"] == 8
    names = {p.name for p in folder.iterdir()}
    assert not names & set(stale)
    assert set(kept) <= names
    assert (out / ".metrics.csv.tmp-9").is_file()
    removed = sorted(line for line in lines if line.startswith("removed "))
    assert removed == sorted(f"removed {folder / name}, left by a checkpoint write that was killed" for name in stale)


def test_a_checkpoint_without_checksum_is_checked_by_its_zip_records(straight, tmp_path):
    """Checkpoints written before checksums: each zip record's CRC-32 catches a flipped byte."""
    path = tmp_path / "step-000008.pt"
    shutil.copyfile(straight / "checkpoints" / "step-000008.pt", path)
    assert load_checkpoint(path)["step"] == 8
    flip_a_weight_byte(path)
    with pytest.raises(ConfigError, match=r"step-000008\.pt: record .* fails its CRC-32 check"):
        load_checkpoint(path)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ConfigError, match=r"step-000008\.pt: not a whole checkpoint archive"):
        load_checkpoint(path)


def test_saving_deletes_the_checkpoints_it_superseded(tmp_path):
    """A run resumed from step 4 past a bad step 8 saves step 6 (its checkpoint interval changed)
    with one checkpoint kept: step 6 stays (latest names it), the bad step 8 and step 4 go."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    save_checkpoint(tmp_path, {"format": "curate.checkpoint/1", "step": 4}, keep_last=5)
    (folder / "step-000008.pt").write_bytes(b"")
    save_checkpoint(tmp_path, {"format": "curate.checkpoint/1", "step": 6}, keep_last=1)
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "step-000006.pt", "step-000006.pt.sha256"]
    assert (folder / "latest").read_text() == "step-000006.pt\n"
    assert load_checkpoint(folder / "step-000006.pt")["step"] == 6


def test_generate_uses_the_newest_checkpoint_that_loads(straight, tmp_path, capsys):
    out = interrupted_copy(straight, tmp_path / "out")
    corrupt(out / "checkpoints" / "step-000008.pt", "flipped")
    _, _, info = load_model(out)
    assert info["step"] == 4
    assert "using the older checkpoint step-000004.pt" in capsys.readouterr().err


def test_another_tool_s_checkpoint_is_not_a_curate_checkpoint_and_is_not_to_delete(straight, tmp_path):
    """A nanoGPT checkpoint, or a file that is no checkpoint at all, given to eval or generate is
    named for what it is; "delete it" stays the advice for a damaged checkpoint of this project's."""
    from typer.testing import CliRunner

    from flows.cli import app

    nanogpt = tmp_path / "ckpt.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "model_args": {"n_layer": 1}, "iter_num": 5, "config": {}}, nanogpt)
    other = tmp_path / "model.safetensors"
    other.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    for path, found in [(nanogpt, "a dict of config, iter_num, model, model_args"), (other, "not a PyTorch zip")]:
        with pytest.raises(ConfigError) as error:
            load_model(path)
        message = str(error.value)
        assert message.startswith(f"{path}: not a curate checkpoint ({found}") and "delete" not in message
        assert "curate.checkpoint/1" in message and "\n" not in message
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "task": "t", "context": "x", "choices": ["a", "b"], "gold": 0}\n')
    result = CliRunner().invoke(app, ["eval", str(nanogpt), "--tasks", str(items)])
    assert result.exit_code == 2 and "not a curate checkpoint" in result.output and "delete" not in result.output
    damaged = interrupted_copy(straight, tmp_path / "out") / "checkpoints" / "step-000008.pt"
    corrupt(damaged, "flipped")
    with pytest.raises(ConfigError, match=r"sha256 .* does not match .*; delete it, or use another checkpoint"):
        load_model(damaged)
