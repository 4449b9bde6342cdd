"""A failure a user can cause is one ``error:`` line on the terminal and exit code 2, from inside a
flow as from the CLI; a bug is one line naming the run log that holds its traceback, and exit
code 1. Prefect's tracebacks never reach the terminal: they are in the run log
(``<run_dir>/logs/<command>-<time>-<pid>.log``).

Each case runs ``curate`` in a process of its own, as a user would. A full disk is a real one: a
tmpfs of a few hundred KiB mounted over the folder, in a user and mount namespace of the test's
own (``unshare -Urm``, no root needed where user namespaces are allowed; skipped elsewhere).
``RLIMIT_FSIZE`` was tried first and is not the same failure: writes past the limit fail with
EFBIG, which SQLite reports as a disk I/O error, not as a full database.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO, run_curate, shared_api_env
from tests.trainer_fixtures import build_mixture, toml_text, train_config_dict

MAX_LINES = 5


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp && touch /tmp/x"], capture_output=True
    )
    return probe.returncode == 0


TMPFS = _can_mount_tmpfs()
needs_tmpfs = pytest.mark.skipif(not TMPFS, reason="no user namespaces here to mount a small tmpfs in")


def curate(
    args: list[str], tmp_path: Path, full: tuple[Path, str] | None = None, env: dict | None = None, prelude: str = ""
):
    """Run ``curate ARGS`` without a terminal (after the Python of ``prelude``, in the same process);
    with ``full`` = (folder, size), the folder is a tmpfs of that size for the run (its logs/ copied to
    tmp_path/kept-logs before it goes)."""
    wrapper = []
    if full is not None:
        folder, size = full
        folder.mkdir(parents=True, exist_ok=True)
        script = (
            f'mount -t tmpfs -o size={size} tmpfs "$0" && "$@"; rc=$?; '
            f'cp -r "$0/logs" "{tmp_path / "kept-logs"}" 2>/dev/null; exit $rc'
        )
        wrapper = ["unshare", "-Urm", "sh", "-c", script, str(folder)]
    return run_curate(args, REPO, env=env, prelude=prelude, timeout=900, wrapper=wrapper)


def run_config(tmp_path: Path, source: Path, extra: str = "") -> Path:
    path = tmp_path / "run.toml"
    path.write_text(
        f'run_dir = "{tmp_path / "run"}"\n{extra}\n'
        f'[[sources]]\nname = "web"\nreader = "{source.suffix[1:]}"\npaths = ["{source}"]\n'
    )
    return path


WORDS = (
    "the of and to in is that it was for on are with as his they be at one have this from or had by "
    "word but what some we can out other were all there when up use your how said an each she which do "
    "their time if will way about many then them write would like so these her long make thing see him "
    "two has look more day could go come did number sound no most people my over know water than call "
    "first who may down side been now find any new work part take get place made live where after back"
).split()


def small_input(tmp_path: Path, docs: int = 60, words: int = 120) -> Path:
    """English-looking documents (common words in a seeded random order) that every stage keeps."""
    rng = random.Random(0)
    path = tmp_path / "in.jsonl"
    with path.open("w") as handle:
        for _ in range(docs):
            sentences = [" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "." for _ in range(words // 12)]
            handle.write(json.dumps({"text": " ".join(sentences)}) + "\n")
    return path


def unknown_mix_group(tmp_path):
    # "other" is a group only where min_share makes one: known once the documents are counted
    mix = '[mix]\nmin_share = 0.5\n[[mix.mixtures]]\nname = "main"\nweights = {other = 1.0}\n'
    return ["run", str(run_config(tmp_path, small_input(tmp_path), mix)), "--quiet"], {}


# A bug, planted: the dedup stage's entry point raises what no user can cause.
PLANTED_BUG = (
    "import pipeline.stages.dedup as units\n"
    "def planted(*args, **kwargs):\n"
    "    raise KeyError('a bug the test planted')\n"
    "units.run_dedup = planted\n"
)


def bug_in_a_stage(tmp_path):
    return ["run", str(run_config(tmp_path, small_input(tmp_path))), "--quiet"], {"prelude": PLANTED_BUG}


def prefect_database_full(tmp_path):
    return ["run", str(run_config(tmp_path, small_input(tmp_path))), "--quiet"], {"full": (tmp_path / "run", "1m")}


def outputs_full(tmp_path):
    config = run_config(tmp_path, small_input(tmp_path, docs=600, words=600))
    return ["run", str(config), "--quiet"], {
        "full": (tmp_path / "run", "1m"),
        "env": {"PREFECT_HOME": str(tmp_path / "prefect-home")},
    }


def _train_config(tmp_path, **overrides) -> Path:
    mixture = build_mixture(tmp_path / "mix" / "main")
    path = tmp_path / "train.toml"
    path.write_text(toml_text(train_config_dict(mixture, tmp_path / "out", **overrides)))
    return path


def corrupt_checkpoint(tmp_path):
    config = _train_config(tmp_path)
    (tmp_path / "out" / "checkpoints").mkdir(parents=True)
    (tmp_path / "out" / "checkpoints" / "step-000004.pt").write_bytes(b"not a checkpoint")
    return ["train", str(config), "--quiet"], {}


def checkpoint_disk_full(tmp_path):
    """The out_dir fills while the first checkpoint is written (the model's weights and optimizer
    state are larger than the tmpfs; the metrics and the log fit)."""
    config = _train_config(tmp_path, max_steps=4, checkpoint_interval=2)
    return ["train", str(config), "--quiet"], {
        "full": (tmp_path / "out", "256k"),
        "env": {"PREFECT_HOME": str(tmp_path / "prefect-home")},
    }


# (case, exit code, what the error line says (a regex), whether it names the run log)
CASES = [
    pytest.param(
        unknown_mix_group, 2, r"mix\.mixtures\[main\]: mix weights: unknown group 'other'", True, id="mix-weights"
    ),
    pytest.param(
        bug_in_a_stage,
        1,
        r"internal error: KeyError: 'a bug the test planted'; the traceback is in ",
        True,
        id="bug-in-a-stage",
    ),
    pytest.param(
        prefect_database_full,
        2,
        r"no space left on the device while writing '.*/run/\.prefect/prefect\.db'; free space there",
        False,
        id="prefect-database-full",
        marks=needs_tmpfs,
    ),
    pytest.param(
        outputs_full,
        2,
        r"no space left on the device while writing '.*/run/\w+/docs/web-\d+-\d+\.parquet'; free space there",
        None,
        id="outputs-full",
        marks=needs_tmpfs,
    ),
    pytest.param(
        checkpoint_disk_full,
        2,
        r"no space left on the device while writing '.*/out/checkpoints/step-000002\.pt'; free space there",
        None,
        id="train-checkpoint-disk-full",
        marks=needs_tmpfs,
    ),
    pytest.param(corrupt_checkpoint, 2, r"checkpoint .*step-000004\.pt: ", None, id="train-corrupt-checkpoint"),
]


@pytest.mark.parametrize("case, code, message, names_log", CASES)
def test_a_failure_in_a_flow_is_one_line_and_its_traceback_is_in_the_run_log(
    tmp_path, prefect_server, case, code, message, names_log
):
    args, how = case(tmp_path)
    if case is not prefect_database_full:  # that one fills its own server's database
        how = {**how, "env": {**shared_api_env(), **how.get("env", {})}}
    result = curate(args, tmp_path, **how)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert result.returncode == code, result.stderr[-3000:]
    assert len(errors) == 1 and re.search(message, errors[0]), result.stderr[-3000:]
    assert len(lines) <= MAX_LINES, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "Error logging" not in result.stderr
    named = re.search(r"(?:details in|the traceback is in) (\S+\.log)\)?$", errors[0])
    if names_log is not None:
        assert bool(named) == names_log, errors[0]
    if named:
        log = Path(named.group(1))
        log = log if log.exists() else tmp_path / "kept-logs" / log.name  # a tmpfs's, copied out
        assert "Traceback (most recent call last)" in log.read_text()


def test_a_good_run_prints_no_traceback_and_no_banner_quiet_or_not(tmp_path, prefect_server):
    source = small_input(tmp_path)
    config = run_config(tmp_path, source)
    quiet = curate(["run", str(config), "--quiet"], tmp_path, env=shared_api_env())  # the session's server
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stderr == ""
    # Each rerun with a changed threshold: one that found every stage done would start nothing.
    plain = curate(["run", str(run_config(tmp_path, source, "[dedup]\nthreshold = 0.85"))], tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert re.search(r"^starting Prefect's temporary server, loading the compiled loops: \d+ s$", plain.stderr, re.M), (
        plain.stderr
    )
    assert re.search(r"^lang: 1 of 1 units, 1 skipped \(done before\) in [\d.]+ s$", plain.stderr, re.M)
    assert " | INFO " not in plain.stderr  # Prefect's info lines: with --verbose
    loud = curate(["run", str(run_config(tmp_path, source, "[dedup]\nthreshold = 0.9")), "--verbose"], tmp_path)
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert "Finished in state Completed()" in loud.stderr  # Prefect's progress lines
    for noise in ("Traceback", "Starting temporary server", "prefect.io/docs", "View at", "error"):
        assert noise not in loud.stderr and noise not in plain.stderr
    logs = sorted((tmp_path / "run" / "logs").glob("curate-*.log"))
    assert len(logs) == 3 and all("Beginning flow run" in log.read_text() for log in logs)
