"""``curate run`` from a folder of the user's own, as a user would run it: a config that names no
language-ID model finds lid.176 in the project's cache (or the user's), not in the current folder;
missing from both, the one error line names every place looked and the command that fetches it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, run_curate, shared_api_env, write_jsonl

SENTENCE = "The library near our house opens early on Saturdays, so I often go there to read the paper."


def _own_folder(tmp_path: Path) -> Path:
    """A user's folder: inputs and a config with relative paths and no lang.model; only the lang
    stage runs."""
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"text": f"{SENTENCE} ({i})"} for i in range(5)])
    (tmp_path / "run.toml").write_text(
        'run_dir = "runs/mine"\n'
        '[[sources]]\nname = "notes"\nreader = "jsonl"\npaths = ["data/"]\n'
        "[filter]\nenabled = false\n[dedup]\nenabled = false\n[lines]\nenabled = false\n"
        "[tokenize]\nenabled = false\n"
    )
    return tmp_path


def test_run_from_another_folder_finds_the_default_model(tmp_path, prefect_server):
    folder = _own_folder(tmp_path)
    env = {"XDG_CACHE_HOME": str(tmp_path / "empty-cache"), **shared_api_env()}
    done = run_curate(["run", "run.toml", "--quiet"], folder, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    stats = json.loads((folder / "runs" / "mine" / "lang" / "stats.json").read_text())
    assert stats["docs_in"] == 5 and stats["docs_out"] == 5


def test_a_missing_default_model_names_every_place_looked_and_the_fetch(tmp_path):
    folder = _own_folder(tmp_path)
    project = tmp_path / "checkout" / ".cache" / "models"
    cache = tmp_path / "cache"
    prelude = f"import pipeline.lang.model as m, pathlib; m.PROJECT_MODEL_DIR = pathlib.Path({str(project)!r}); "
    done = run_curate(["run", "run.toml", "--quiet"], folder, env={"XDG_CACHE_HOME": str(cache)}, prelude=prelude)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: lang.model: language-ID model lid.176.ftz not found")
    assert str(project / "lid.176.ftz") in lines[0] and str(cache / "curate" / "models" / "lid.176.ftz") in lines[0]
    fetch = f"{sys.executable} -m pipeline.lang.model"
    assert fetch in lines[0]
    # The command it names, run from this folder, is one that exists (its --help here: no download).
    shown = subprocess.run(
        [sys.executable, "-m", "pipeline.lang.model", "--help"],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)},
    )
    assert shown.returncode == 0 and str(cache / "curate" / "models") in "".join(shown.stdout.split())
    assert not (folder / "runs").exists()  # stopped before anything was written
