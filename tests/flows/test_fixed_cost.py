"""What a run costs beyond its stages: a rerun that finds every stage done starts nothing (no
Prefect, no flow run, no file written), and a new run directory's Prefect database is a copy of
a migrated template rather than migrated again (docs/cli.md, "What a run costs"), and holds the
whole run once the temporary server stops."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

from pipeline.formats.manifest import LOCK_NAME
from tests.flows.test_interrupt import servers_of, write_run
from tests.helpers import curate_environment, run_curate, shared_api_env

pytestmark = pytest.mark.flow


def files_of(run_dir):
    """Each file of the run and when it was last written (the run's lock aside: every run takes it)."""
    return {p: p.stat().st_mtime_ns for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != LOCK_NAME}


def tables(stdout: str) -> list[str]:
    """The run's summary (the tables and what follows), without the progress lines before it."""
    lines = stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if "documents through the stages" in line) :]


# Python run before `curate`: an exit handler and an object whose teardown each leave a file.
_MARKERS = """import atexit
class Marker:
    def __del__(self, open=open):
        open("{0}/torn-down", "w").close()
marker = Marker()
atexit.register(lambda: open("{0}/handlers-ran", "w").close())
"""


def test_a_rerun_that_finds_every_stage_done_starts_nothing(tmp_path, prefect_server):
    config = write_run(tmp_path, files=2, docs=60)
    run_dir = tmp_path / "run"
    first = run_curate(["run", str(config)], tmp_path, env=shared_api_env(), prelude=_MARKERS.format(tmp_path))
    assert first.returncode == 0, first.stderr
    # A finished run ends after its exit handlers, without the interpreter's teardown of its objects.
    assert (tmp_path / "handlers-ran").exists() and not (tmp_path / "torn-down").exists()
    before = files_of(run_dir)

    # No Prefect API here: a rerun that started Prefect would start its temporary server, and
    # write its database and a run log in the run directory.
    again = run_curate(["run", str(config)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "every stage is done with this config and these inputs: nothing to run" in again.stderr
    assert files_of(run_dir) == before  # nothing written, the report included
    assert tables(again.stdout) == tables(first.stdout)

    # The same from Python, which does not even import Prefect for it.
    script = (
        "import sys; from flows.api import curate; "
        f"run = curate({str(config)!r}); print(run.counts()['source']['docs_out']); "
        "assert 'prefect' not in sys.modules"
    )
    api = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=curate_environment(), capture_output=True, text=True
    )
    assert api.returncode == 0, api.stderr
    assert api.stdout.split() == ["120"] and files_of(run_dir) == before

    # A report that is gone is built again, and still nothing runs.
    (run_dir / "report" / "index.html").unlink()
    rebuilt = run_curate(["run", str(config), "--quiet"], tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (run_dir / "report" / "index.html").is_file()

    def not_report(files):  # the report and the mixtures' dataset cards it writes beside them
        return {p: t for p, t in files.items() if "report" not in p.parts and p.name != "README.md"}

    assert not_report(files_of(run_dir)) == not_report(before)

    # An input file that changed is read again: that rerun has work to do.
    with (tmp_path / "in" / "part-1.jsonl").open("a") as handle:
        handle.write(json.dumps({"text": "One more document, long enough to read. " * 20}) + "\n")
    changed = run_curate(["run", str(config)], tmp_path, env=shared_api_env())
    assert changed.returncode == 0, changed.stderr
    assert "nothing to run" not in changed.stderr
    assert json.loads((run_dir / "source" / "stats.json").read_text())["docs_in"] == 121


def flow_runs(database) -> int:
    with sqlite3.connect(database) as db:
        return db.execute("select count(*) from flow_run").fetchone()[0]


def task_run_states(database) -> dict[str, int]:
    with sqlite3.connect(database) as db:
        return dict(db.execute("select state_type, count(*) from task_run group by state_type").fetchall())


def test_a_new_run_directory_takes_its_prefect_database_from_the_template(tmp_path):
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}  # and no Prefect API: each run starts its temporary server
    ran = {}
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        config = write_run(folder, files=4, docs=60)
        done = run_curate(["run", str(config), "--quiet"], folder, env=env)
        assert done.returncode == 0, done.stderr
        # The server outlives the run until it has recorded the run's last task runs as finished.
        deadline = time.monotonic() + 15
        while servers_of(folder / "run") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert servers_of(folder / "run") == []
        ran[name] = flow_runs(folder / "run" / ".prefect" / "prefect.db")
        states = task_run_states(folder / "run" / ".prefect" / "prefect.db")
        assert list(states) == ["COMPLETED"] and states["COMPLETED"] >= 10, states
        (log,) = (folder / "run" / "logs").glob("*.log")
        assert "ERROR" not in log.read_text()
    templates = list((cache / "curate").glob("prefect-*"))
    assert [t.name for t in templates] == [f"prefect-{__import__('prefect').__version__}"]
    assert sorted(p.name for p in templates[0].iterdir()) == ["memo_store.toml", "prefect.db"]
    assert flow_runs(templates[0] / "prefect.db") == 0  # kept before any run was in it
    with sqlite3.connect(templates[0] / "prefect.db") as db:
        assert db.execute("select count(*) from alembic_version").fetchone()[0] == 1  # migrated
    assert ran["one"] == ran["two"] > 0  # each database holds its own run's flow runs only
