"""Training runs end to end on a tiny mixture: learning, exact resume, DDP, checkpoints, config
errors, evaluation in bits per byte, generation."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.formats.configfile import ConfigError
from pipeline.formats.tokens import read_token_shard
from tests.trainer_fixtures import toml_text, train_config_dict
from trainer.checkpoints import load_checkpoint
from trainer.config import TrainConfig, load_train_config, parse_train_config
from trainer.data import open_mixture
from trainer.evaluation import evaluate
from trainer.generate import generate_text, load_model
from trainer.metrics import read_metrics
from trainer.train import learning_rate, main, train

REPO = Path(__file__).resolve().parents[2]


def config(mixture: Path, out_dir: Path, **overrides) -> TrainConfig:
    return parse_train_config(train_config_dict(mixture, out_dir, **overrides))


@pytest.fixture(scope="module")
def trained(mixture_dir, tmp_path_factory):
    """One 8-step run (dropout on, so that resuming must restore the RNG too)."""
    out = tmp_path_factory.mktemp("run") / "out"
    summary = train(config(mixture_dir, out, model={"dropout": 0.1}), log=None)
    return out, summary


def test_outputs_of_a_run(trained, mixture_dir):
    out, summary = trained
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoints",
        "metrics.csv",
        "summary.json",
        "tb",
        "tokenizer.json",
    ]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "latest",
        "step-000004.pt",
        "step-000004.pt.sha256",
        "step-000008.pt",
        "step-000008.pt.sha256",
    ]
    checkpoint = out / "checkpoints" / "step-000008.pt"
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert (out / "checkpoints" / "step-000008.pt.sha256").read_text() == f"{digest}  step-000008.pt\n"
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-000008.pt"
    assert any(p.name.startswith("events.out.tfevents") for p in (out / "tb").iterdir())
    assert (out / "tokenizer.json").read_bytes() == (mixture_dir / "tokenizer.json").read_bytes()
    written = json.loads((out / "summary.json").read_text())
    assert written["steps"] == 8 and written["tokens"] == 8 * 4 * 32
    assert written["mixture_manifest_sha256"] == open_mixture(mixture_dir).manifest_sha256
    assert set(written["final"]["groups"]) == {"chat", "en/news"}
    assert written["parameters"] == summary["parameters"] > 0
    rows = read_metrics(out)
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert [r["step"] for r in rows if r["val_loss"] is not None] == [4, 8]
    assert rows[-1]["val_bpb/en/news"] == pytest.approx(written["final"]["groups"]["en/news"]["bpb"])


def test_checkpoint_loads_with_weights_only(trained):
    out, _ = trained
    checkpoint = torch.load(out / "checkpoints" / "step-000004.pt", weights_only=True)
    assert checkpoint["step"] == 4 and checkpoint["loader"] == {"epoch": 0, "position": 16}
    assert checkpoint["config"]["model"]["dropout"] == 0.1
    assert set(checkpoint["rng"][0]) == {"torch", "cuda", "python"}
    assert checkpoint["model"]["wte.weight"].shape == (320, 32)


def test_resume_continues_exactly(trained, tmp_path, mixture_dir):
    """Stop after step 4 (as if killed after its checkpoint, leaving rows of steps 5-8 behind) and
    resume: losses and final weights are bit-equal to the run that never stopped."""
    straight, _ = trained
    out = tmp_path / "out"
    shutil.copytree(straight, out)
    (out / "checkpoints" / "step-000008.pt").unlink()
    (out / "checkpoints" / "latest").write_text("step-000004.pt\n")
    (out / "summary.json").unlink()
    train(config(mixture_dir, out, model={"dropout": 0.1}), log=None)
    assert read_metrics(out) == [
        {**row, "tokens_per_s": resumed["tokens_per_s"]}
        for row, resumed in zip(read_metrics(straight), read_metrics(out))
    ]
    one = load_checkpoint(straight / "checkpoints" / "step-000008.pt")
    two = load_checkpoint(out / "checkpoints" / "step-000008.pt")
    for key, tensor in one["model"].items():
        assert torch.equal(tensor, two["model"][key]), key
    for index, state in one["optimizer"]["state"].items():
        assert all(torch.equal(state[k], two["optimizer"]["state"][index][k]) for k in state)
    assert one["loader"] == two["loader"]


def test_resume_refuses_another_config(trained, tmp_path, mixture_dir):
    out = tmp_path / "out"
    shutil.copytree(trained[0], out)
    with pytest.raises(ConfigError, match=r"^optim\.lr: .* was trained with 0\.003, this config says 0\.001;"):
        train(config(mixture_dir, out, model={"dropout": 0.1}, optim={"lr": 1e-3}), log=None)
    with pytest.raises(ConfigError, match="nothing to resume"):
        train(config(mixture_dir, tmp_path / "empty"), resume=True, log=None)


def test_a_finished_run_resumed_only_evaluates(trained, tmp_path, mixture_dir):
    out = tmp_path / "out"
    shutil.copytree(trained[0], out)
    summary = train(config(mixture_dir, out, model={"dropout": 0.1}, log_interval=2), resume=True, log=None)
    assert summary["steps"] == 8 and summary["final"]["loss"] == pytest.approx(trained[1]["final"]["loss"])
    assert len(read_metrics(out)) == 8


def test_loss_decreases(mixture_dir, tmp_path):
    summary = train(
        config(mixture_dir, tmp_path / "out", max_steps=40, eval_interval=40, log_interval=5, checkpoint_interval=40),
        log=None,
    )
    rows = read_metrics(tmp_path / "out")
    assert rows[-1]["train_loss"] < rows[0]["train_loss"] - 1.0
    assert summary["final"]["loss"] < math.log(320) - 1.0


def test_masked_objective_trains(mixture_dir, tmp_path):
    summary = train(
        config(
            mixture_dir,
            tmp_path / "out",
            model={"objective": "masked", "positions": "learned"},
            max_steps=6,
            eval_interval=6,
        ),
        log=None,
    )
    assert math.isfinite(summary["final"]["loss"]) and summary["final"]["tokens"] > 0


def test_evaluation_is_bits_per_byte_of_the_manifest(trained, mixture_dir):
    """Per group: mean nats over the first eval_tokens // block_size windows, computed here by hand
    from the shard files, then / ln 2 * tokens / bytes of the manifest's validation entries."""
    out, _ = trained
    model, _, info = load_model(out)
    cfg = config(mixture_dir, out, model={"dropout": 0.1})
    result = evaluate(model, open_mixture(mixture_dir), cfg, torch.device("cpu"))
    manifest = json.loads((mixture_dir / "manifest.json").read_text())
    for group in ("chat", "en/news"):
        entry = next(e for e in manifest["validation"] if e["group"] == group)
        tokens = torch.from_numpy(read_token_shard(mixture_dir / entry["file"])[0].astype(np.int64))
        windows = torch.stack([tokens[i * 32 : i * 32 + 33] for i in range(256 // 32)])
        with torch.no_grad():
            logits, _ = model(windows[:, :-1])
        nats = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()
        assert result["groups"][group]["tokens"] == 256
        assert result["groups"][group]["loss"] == pytest.approx(nats, rel=1e-5)
        bpb = nats / math.log(2) * entry["tokens"] / entry["bytes"]
        assert result["groups"][group]["bpb"] == pytest.approx(bpb, rel=1e-5)
    mean = sum(result["groups"][g]["bpb"] for g in ("chat", "en/news")) / 2  # equal token counts
    assert result["bpb"] == pytest.approx(mean)


def test_ddp_matches_one_process(mixture_dir, tmp_path):
    """Two gloo processes with micro_batch 2 see the same global batch as one process with
    micro_batch 4 (the loader gives rank r slice r of it), so the runs compute the same function.
    They differ only in floating-point summation order: each rank averages over its own 2 windows
    and DDP averages the two gradients, where one process averages over 4 windows at once, and
    each process uses one thread, not two, inside the matmuls. Those are float32 rounding
    differences (relative 1e-7 per operation) that AdamW steps carry forward; measured over 30
    steps they stayed below 3e-7 relative (most steps bit-equal), so 1e-5 leaves a 30-fold
    margin for other CPUs, while a wrong batch split or a missed gradient sync moves the loss at
    the 1e-2 level from the second step."""
    settings = {"batch": {"micro_batch": 2, "grad_accum": 2}, "eval_tokens": 128}
    distributed = tmp_path / "ddp"
    path = tmp_path / "ddp.toml"
    data = train_config_dict(mixture_dir, distributed, **settings)
    path.write_text(toml_text(data))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "trainer.train",
            str(path),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    single = train(
        config(mixture_dir, tmp_path / "one", batch={"micro_batch": 4, "grad_accum": 2}, eval_tokens=128), log=None
    )
    one, two = read_metrics(tmp_path / "one"), read_metrics(distributed)
    assert [r["step"] for r in one] == [r["step"] for r in two] == list(range(1, 9))
    for a, b in zip(one, two):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5, abs=0)
        assert b["tokens_seen"] == a["tokens_seen"] == a["step"] * 8 * 32
    assert two[-1]["val_loss"] == pytest.approx(one[-1]["val_loss"], rel=1e-5, abs=0)
    summary = json.loads((distributed / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["tokens"] == single["tokens"]
    checkpoint = torch.load(distributed / "checkpoints" / "step-000008.pt", weights_only=True)
    assert len(checkpoint["rng"]) == 2


def test_config_errors_are_one_line(tmp_path, mixture_dir):
    cases = [
        ({"optim": {"lrr": 1e-3}}, r"^optim\.lrr: unknown key; did you mean 'lr'\?"),
        ({"optim": {"lr": "1e-3"}}, r"^optim\.lr: Input should be a valid number"),
        ({"compile": 1}, r"^compile: Input should be a valid boolean"),
        ({"model": {"n_embd": 30, "n_head": 4}}, r"^model: .*n_embd 30 is not a multiple of n_head 4"),
        ({"max_steps": None}, r"^max_steps: required key is missing; give max_steps .* or max_tokens"),
        ({"device": "tpu"}, r"^device: Input should be 'auto', 'cpu' or 'cuda'"),
    ]
    for overrides, message in cases:
        data = train_config_dict(mixture_dir, tmp_path / "out", **overrides)
        if overrides.get("max_steps", 0) is None:
            del data["max_steps"]
        with pytest.raises(ConfigError, match=message) as error:
            parse_train_config(data)
        assert "\n" not in str(error.value)
    data = train_config_dict(mixture_dir, tmp_path / "out")
    del data["mixture"]
    with pytest.raises(ConfigError, match="^mixture: required key is missing"):
        parse_train_config(data)


def test_config_file_and_command_line(tmp_path, mixture_dir, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.toml"
    data = train_config_dict("mix", "out")  # relative paths: resolved from the current folder
    path.write_text(toml_text(data))
    loaded = load_train_config(path)
    assert loaded.mixture == tmp_path / "mix" and loaded.out_dir == tmp_path / "out"
    assert loaded.total_steps() == 8
    by_tokens = parse_train_config({**data, "max_steps": None, "max_tokens": 1000})
    assert by_tokens.total_steps() == 8 and by_tokens.total_steps(world_size=2) == 4  # ceil(1000 / 128)
    both = parse_train_config({**data, "max_steps": 3, "max_tokens": 10**6})
    assert both.total_steps() == 3  # max_steps wins
    path.write_text(toml_text({**data, "optim": {"lr": 1e-3, "beta3": 0.5}}))
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: optim.beta3: unknown key") and "\n" not in err
    path.write_text(toml_text(data))
    assert main([str(path)]) == 2  # the mixture folder does not exist
    err = capsys.readouterr().err.strip()
    assert "no manifest.json" in err and "\n" not in err


def test_learning_rate_schedules():
    optim = parse_train_config(
        {"mixture": "m", "out_dir": "o", "max_steps": 100, "optim": {"lr": 1.0, "min_lr": 0.1, "warmup_steps": 10}}
    ).optim
    lrs = [learning_rate(s, 100, optim) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0) and lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    assert lrs[10 + 89 // 2] == pytest.approx(0.55, abs=0.02)  # half way down the cosine
    wsd = optim.model_copy(update={"schedule": "wsd", "decay_fraction": 0.2})
    lrs = [learning_rate(s, 100, wsd) for s in range(100)]
    assert lrs[10:80] == [1.0] * 70
    assert lrs[80] == pytest.approx(1.0 - 0.9 / 20) and lrs[-1] == pytest.approx(0.1)


def test_generate_text_is_seeded(trained):
    out, _ = trained
    one = generate_text(out, "The council", max_tokens=20, seed=1)
    assert isinstance(one, str) and one
    assert generate_text(out, "The council", max_tokens=20, seed=1) == one
    checkpoint = out / "checkpoints" / "step-000004.pt"
    assert generate_text(checkpoint, "", max_tokens=10, temperature=0) == generate_text(
        checkpoint, "", max_tokens=10, temperature=0
    )
    with pytest.raises(FileNotFoundError):
        generate_text(out / "missing", "x")


def test_extra_eval_sets_are_evaluated_and_logged(mixture_dir, tmp_path):
    """A second folder in the mixture format (here a copy of the mixture) is evaluated at every
    evaluation beside the mixture's own validation, with the same numbers for the same data."""
    reference = tmp_path / "reference"
    shutil.copytree(mixture_dir, reference)
    summary = train(config(mixture_dir, tmp_path / "out", eval_mixtures={"reference": str(reference)}), log=None)
    assert summary["final_eval"]["reference"]["bpb"] == pytest.approx(summary["final"]["bpb"], rel=1e-9)
    rows = read_metrics(tmp_path / "out")
    evaluated = [row for row in rows if row.get("val_bpb")]
    assert evaluated and all(row["reference_bpb"] == row["val_bpb"] for row in evaluated)


def test_eval_tasks_are_scored_at_every_evaluation_without_changing_the_training(mixture_dir, tmp_path):
    """Items files scored at every evaluation: logged per task and in aggregate, equal to scoring
    the final checkpoint, and the training itself (dropout on) the same as without them."""
    from pipeline.formats.choices import write_choice_items
    from tests.trainer.test_likelihood import _items
    from trainer.likelihood import evaluate_checkpoint

    items = write_choice_items(
        _items(
            [
                {"id": "a", "task": "t1", "context": "the", "choices": [" cat", " dog", " of"], "gold": 2},
                {"id": "b", "task": "t2", "context": "", "choices": ["hello there", "there hello"], "gold": 0},
            ]
        ),
        tmp_path / "items.jsonl",
    )
    plain = train(config(mixture_dir, tmp_path / "plain", model={"dropout": 0.1}), log=None)
    scored = train(config(mixture_dir, tmp_path / "scored", model={"dropout": 0.1}, eval_tasks=[str(items)]), log=None)
    assert scored["final"]["loss"] == plain["final"]["loss"]
    rows = [row for row in read_metrics(tmp_path / "scored") if row.get("val_bpb") is not None]
    assert len(rows) >= 2 and all(row["tasks_core"] is not None and row["task_gold_bpb/t2"] > 0 for row in rows)
    final = evaluate_checkpoint(tmp_path / "scored", [items])
    assert rows[-1]["task_gold_bpb/t1"] == pytest.approx(final["tasks"]["t1"]["gold_bpb"], rel=1e-9)
    assert rows[-1]["tasks_core"] == pytest.approx(final["aggregate"]["core"], rel=1e-9)
    assert scored["final_tasks"]["tasks_core"] == rows[-1]["tasks_core"] and "final_tasks" not in plain
