"""`curate train` as a user meets its errors: each fault a user can cause (an impossible config
value, a model too big for the memory, a missing, truncated, corrupt or empty shard, a changed
tokenizer, a block or batch too big for the data, a resume with another config or mixture) stops
with one ``error:`` line and exit code 2 within seconds, before the Prefect flow starts (no
server, no flow run, no traceback)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO, run_curate, shared_api_env
from tests.trainer_fixtures import build_mixture, shared_mixture, toml_text, train_config_dict
from trainer.config import parse_train_config
from trainer.train import train

WIDE = {"COLUMNS": "200"}  # a terminal on which no error line wraps


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory):
    """A mixture and a 4-step run on it (checkpoints at steps 2 and 4), trained in this process."""
    mixture = shared_mixture(tmp_path_factory)
    out = tmp_path_factory.mktemp("checkpointed") / "out"
    train(parse_train_config(train_config_dict(mixture, out, max_steps=4, checkpoint_interval=2)), log=None)
    return mixture, out


class Case:
    """One fault's inputs: a config (as a dict, then TOML text with ``replace`` applied), the
    mixture it names, its out_dir and the command's extra arguments."""

    def __init__(self, tmp_path: Path, mixture: Path, trained_out: Path):
        self.tmp_path = tmp_path
        self.shared = mixture
        self.trained_out = trained_out
        self.config = train_config_dict(mixture, tmp_path / "out")
        self.replace: list[tuple[str, str]] = []
        self.args: list[str] = []

    def own_mixture(self) -> Path:
        """A copy of the mixture that this case may change, named by the config."""
        copy = shutil.copytree(self.shared, self.tmp_path / "mix" / "main")
        self.config["mixture"] = str(copy)
        return copy

    def shard(self) -> Path:
        return sorted((self.own_mixture() / "train").glob("*.arrow"))[0]

    def resumed(self) -> Path:
        """out_dir: a copy of the trained run's."""
        out = shutil.copytree(self.trained_out, self.tmp_path / "out")
        self.config = {**self.config, "max_steps": 4, "checkpoint_interval": 2}
        return out

    def toml(self) -> str:
        text = toml_text(self.config)
        for old, new in self.replace:
            assert old in text
            text = text.replace(old, new)
        return text


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _toml(section: str, key: str, text: str):
    """Set ``[section] key`` to TOML ``text`` that JSON cannot spell (inf, nan)."""

    def apply(case):
        case.config[section] = {**case.config[section], key: "RAW"}
        case.replace.append((f'{key} = "RAW"', f"{key} = {text}"))

    return apply


def _shard_missing(case):
    case.shard().unlink()


def _shard_truncated(case):
    shard = case.shard()
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def _shard_empty(case):
    case.shard().write_bytes(b"")


def _tokenizer_changed(case):
    path = case.own_mixture() / "tokenizer.json"
    path.write_text(path.read_text().replace('"<|endoftext|>"', '"<|end|>"', 1))


def _other_config(case):
    case.resumed()
    case.config["model"] = {**case.config["model"], "n_layer": 3}


def _other_mixture(case):
    case.resumed()
    case.config["mixture"] = str(build_mixture(case.tmp_path / "other" / "main", train_docs=120, seed=1))


def _no_checkpoint_loads(case):
    for checkpoint in (case.resumed() / "checkpoints").glob("step-*.pt"):
        checkpoint.write_bytes(b"")


def _other_tokenizer_eval_set(case):
    other = build_mixture(case.tmp_path / "other" / "main", train_docs=120, seed=1, vocab_size=300)
    case.config["eval_mixtures"] = {"ref": str(other)}


def _missing_eval_tasks(case):
    case.config["eval_tasks"] = [str(case.tmp_path / "no-such-items.jsonl")]


def _nothing_to_resume(case):
    case.args.append("--resume")


def _set(section: str | None, **values):
    def apply(case):
        if section is None:
            case.config.update(values)
        else:
            case.config[section] = {**case.config[section], **values}

    return apply


# (id, what the user did, what the one error line says)
FAULTS = [
    ("lr-inf", _toml("optim", "lr", "inf"), r"optim\.lr: .*finite"),
    ("lr-nan", _toml("optim", "lr", "nan"), r"optim\.lr: .*finite"),
    ("lr-zero", _set("optim", lr=0.0, min_lr=0.0), r"optim\.lr: .*greater than 0"),
    ("grad-clip-inf", _toml("optim", "grad_clip", "inf"), r"optim\.grad_clip: .*finite"),
    (
        "model-too-big",
        _set("model", n_embd=4_000_000),
        r"model: [\d,]+ parameters .* needs about 6\.1 PB to train .* more than the .* of RAM available",
    ),
    ("shard-missing", _shard_missing, r"is listed in train of .* but missing"),
    ("shard-truncated", _shard_truncated, r"(is not a token shard|does not match)"),
    ("shard-corrupt", lambda case: flip_byte(case.shard()), r"(is not a token shard|does not match its sha256)"),
    ("shard-empty", _shard_empty, r"is not a token shard"),
    ("tokenizer-changed", _tokenizer_changed, r"tokenizer\.json does not match the manifest's tokenizer sha256"),
    ("block-too-big", _set("model", block_size=100_000), r"fewer than one global micro batch.*lower block_size"),
    ("batch-too-big", _set("batch", micro_batch=100_000), r"fewer than one global micro batch.*lower block_size"),
    ("resume-other-config", _other_config, r"model\.n_layer: .* was trained with 2, this config says 3"),
    ("resume-other-mixture", _other_mixture, r"mixture: .* was trained on another mixture"),
    ("resume-nothing", _nothing_to_resume, r"out_dir: nothing to resume"),
    ("no-checkpoint-loads", _no_checkpoint_loads, r"no checkpoint in .* loads"),
    ("eval-set-other-tokenizer", _other_tokenizer_eval_set, r"eval_mixtures\.ref: .* another tokenizer"),
    ("eval-tasks-missing", _missing_eval_tasks, r"no-such-items\.jsonl"),
]


@pytest.mark.parametrize("fault, message", [(f[1], f[2]) for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_a_fault_is_one_error_line_before_the_flow_starts(fault, message, checkpointed, tmp_path):
    mixture, trained_out = checkpointed
    case = Case(tmp_path, mixture, trained_out)
    fault(case)
    config = tmp_path / "train.toml"
    config.write_text(case.toml())
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out" / "checkpoints").glob("*")}

    done = run_curate(["train", str(config), "--quiet", *case.args], REPO, env=WIDE, timeout=300)

    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(errors) == 1 and len(done.stderr.strip().splitlines()) <= 3, done.stderr[-3000:]
    assert re.search(message, errors[0]), errors[0]
    assert "Traceback" not in done.stderr and "Flow run" not in done.stderr + done.stdout
    assert not (tmp_path / "out" / ".prefect").exists()  # Prefect never started
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out" / "checkpoints").glob("*")}
    assert after == before  # no checkpoint written, none deleted
    assert done.seconds < 30, f"{done.seconds:.1f} s"


@pytest.mark.usefixtures("prefect_server")
def test_quiet_still_shows_warnings(checkpointed, tmp_path):
    """--quiet hides progress and INFO lines, never a warning: here, that the newest checkpoint
    is skipped (it fails its checksum) for the one before."""
    mixture, trained_out = checkpointed
    case = Case(tmp_path, mixture, trained_out)
    out = case.resumed()
    (out / "checkpoints" / "step-000004.pt").write_bytes(b"")
    (out / "summary.json").unlink()
    config = tmp_path / "train.toml"
    config.write_text(case.toml())

    done = run_curate(["train", str(config), "--quiet"], REPO, env={**WIDE, **shared_api_env()}, timeout=300)

    assert done.returncode == 0, done.stderr[-3000:]
    assert "warning: skipping checkpoint" in done.stderr and "step-000004.pt: empty (0 bytes)" in done.stderr
    assert "warning: using the older checkpoint step-000002.pt" in done.stderr
    assert "train loss" not in done.stderr + done.stdout  # progress stays hidden


@pytest.mark.usefixtures("prefect_server")
def test_a_diverging_flow_stops_with_the_error_line_and_keeps_the_checkpoint_before(checkpointed, tmp_path):
    mixture, _ = checkpointed
    config = tmp_path / "train.toml"
    config.write_text(
        toml_text(
            train_config_dict(
                mixture,
                tmp_path / "out",
                optim={"lr": 1e10, "min_lr": 0.0, "warmup_steps": 0},
                checkpoint_interval=1,
                max_steps=4,
            )
        )
    )

    done = run_curate(["train", str(config), "--quiet"], REPO, env={**WIDE, **shared_api_env()}, timeout=300)

    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(errors) == 1 and errors[0].startswith("error: step 2: the training loss is nan"), errors
    assert "step-000001.pt, is kept" in errors[0]
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoints").glob("step-*")) == [
        "step-000001.pt",
        "step-000001.pt.sha256",
    ]


def test_a_stopped_run_says_whether_a_rerun_continues(checkpointed, tmp_path):
    """Stopped before its first checkpoint, a run has nothing to continue from: its line says a
    rerun starts over; with a checkpoint written, that a rerun continues from it."""
    from flows.cli import training_stopped

    fresh = training_stopped(tmp_path / "out")
    assert "none was written" in fresh and "starts over" in fresh and "continue" not in fresh
    (tmp_path / "out" / "checkpoints").mkdir(parents=True)  # made at start, before any checkpoint
    assert training_stopped(tmp_path / "out") == fresh
    assert "continue from the last checkpoint" in training_stopped(checkpointed[1])
