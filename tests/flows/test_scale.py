"""The curation run on other task runners: a 2-worker Dask LocalCluster writes the same bytes as
local threads, also when a worker is killed in the middle of a stage; so does a local Ray instance
(where Ray is installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import threading
from pathlib import Path

import cloudpickle
import pytest
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin

from demo.config import demo_config
from demo.corpus import build_demo_corpus
from flows.curate import curate_flow
from flows.runners import Runner, RunnerError, check_storage, running_on
from pipeline.config import parse_config
from pipeline.formats.manifest import LOCK_NAME

pytestmark = pytest.mark.usefixtures("prefect_server")

# Workers unpickle the plugin below; they cannot import this test module by name.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scale") / "corpus"
    build_demo_corpus(folder, docs=400, seed=0)
    return folder


@pytest.fixture(scope="module")
def local_run(corpus) -> tuple[Path, dict]:
    run_dir = corpus.parent / "run-local"
    return run_dir, curate_flow(parse_config(demo_config(corpus, run_dir)))


def run_files(run_dir: Path) -> dict[str, bytes]:
    """Every file a run wrote (Prefect's own database and the run lock, which names its holder,
    aside), by path in the run directory, with the run directory's name (recorded in manifests and
    parts) made neutral."""
    return {
        str(path.relative_to(run_dir)): path.read_bytes().replace(str(run_dir).encode(), b"<run>")
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and ".prefect" not in path.parts and path.name != LOCK_NAME
    }


def assert_same_files(expected: Path, found: Path, stages: tuple[str, ...] | None = None) -> None:
    """The two runs wrote the same files with the same bytes (only those of ``stages``, if given)."""

    def kept(files: dict[str, bytes]) -> dict[str, bytes]:
        return {k: v for k, v in files.items() if stages is None or k.split("/")[0] in stages}

    want, got = kept(run_files(expected)), kept(run_files(found))
    assert sorted(got) == sorted(want)
    differ = [name for name in want if want[name] != got[name]]
    assert not differ, f"{len(differ)} files differ, e.g. {differ[:5]}"


def test_a_dask_local_cluster_writes_the_same_bytes_as_local_threads(corpus, local_run):
    local_dir, local_stats = local_run
    run_dir = corpus.parent / "run-dask"
    with running_on(Runner("dask", workers=2)) as ready:
        assert ready.address.startswith("tcp://")
        with Client(ready.address, set_as_default=False) as client:
            assert len(client.scheduler_info()["workers"]) == 2
        state = curate_flow(parse_config(demo_config(corpus, run_dir)), ready, return_state=True)
    stats = state.result()

    # Every unit ran in a worker process and reported to the flow's own Prefect API.
    task_runs = task_runs_of(state.state_details.flow_run_id)
    assert len(task_runs) >= 4 * 7 and {run.state_name for run in task_runs} == {"Completed"}
    assert stats["mix"]["train_documents"] == local_stats["mix"]["train_documents"] > 0
    assert {s: v["docs_out"] for s, v in stats.items()} == {s: v["docs_out"] for s, v in local_stats.items()}
    assert_same_files(local_dir, run_dir)


def test_a_local_ray_instance_writes_the_same_bytes_as_local_threads(corpus, local_run):
    pytest.importorskip("prefect_ray", reason="Ray is an optional extra: pip install -e '.[ray]' to run this test")
    local_dir, _ = local_run
    run_dir = corpus.parent / "run-ray"
    with running_on(Runner("ray", workers=2)) as ready:
        state = curate_flow(parse_config(demo_config(corpus, run_dir)), ready, return_state=True)
    task_runs = task_runs_of(state.state_details.flow_run_id)
    assert len(task_runs) >= 4 * 7 and {run.state_name for run in task_runs} == {"Completed"}
    assert_same_files(local_dir, run_dir)


def task_runs_of(flow_run_id) -> list:
    """The task runs of a flow run's subflows (the stages), as the Prefect API recorded them."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        stages = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
        return client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[s.id for s in stages])), limit=200
        )


def test_a_local_process_pool_writes_the_same_bytes_as_local_threads(corpus, local_run):
    local_dir, _ = local_run
    run_dir = corpus.parent / "run-processes"
    settings = {
        **demo_config(corpus, run_dir),
        "dedup": {"enabled": False},
        "lines": {"enabled": False},
        "tokenize": {"enabled": False},
    }
    settings.pop("mix")
    with running_on(Runner("processes", workers=2)) as ready:
        stats = curate_flow(parse_config(settings), ready)
    assert list(stats) == ["source", "lang", "filter"]
    assert_same_files(local_dir, run_dir, stages=("source", "lang", "filter"))


class KillOnce(WorkerPlugin):
    """Kill the worker process (SIGKILL) shortly after it starts the first task whose key holds
    ``needle``; record every start of such a task as 'pid key' lines in ``log``."""

    def __init__(self, needle: str, log: str, delay_s: float = 0.05):
        self.needle, self.log, self.delay_s = needle, log, delay_s

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or self.needle not in str(key):
            return
        first = not os.path.exists(self.log)
        with open(self.log, "a") as out:
            out.write(f"{os.getpid()} {key}\n")
        if first:
            threading.Timer(self.delay_s, os.kill, (os.getpid(), signal.SIGKILL)).start()


def test_a_worker_killed_mid_stage_is_replaced_and_its_unit_redone_to_the_same_output(corpus, local_run):
    local_dir, _ = local_run
    run_dir = corpus.parent / "run-killed"
    log = corpus.parent / "killed.log"
    with running_on(Runner("dask", workers=2)) as ready:
        with Client(ready.address, set_as_default=False) as client:
            client.register_plugin(KillOnce("find_in_one_unit", str(log)), name="kill-once")
            curate_flow(parse_config(demo_config(corpus, run_dir)), ready)

    starts = [line.split() for line in log.read_text().splitlines()]
    killed_pid, killed_key = starts[0]
    again = [pid for pid, key in starts[1:] if key == killed_key]
    assert again and killed_pid not in again  # the unit ran again, in another process
    assert_same_files(local_dir, run_dir)


def test_a_local_cluster_starts_without_a_word_while_another_holds_port_8787():
    import socket
    import warnings

    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 8787))  # else another cluster holds it already: the same case
    except OSError:
        pass
    with held, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with running_on(Runner("dask", workers=1)) as ready:
            assert ready.address.startswith("tcp://127.0.0.1:")
    assert not [str(w.message) for w in caught if "already in use" in str(w.message)]


def test_runner_choices_fail_early_in_one_line(monkeypatch):
    with pytest.raises(RunnerError, match="choose one of local, processes, dask, ray"):
        Runner("spark")
    with pytest.raises(
        RunnerError, match=r"^--runner 'rey': choose one of local, processes, dask, ray; did you mean 'ray'\?$"
    ):
        Runner("rey")
    if importlib.util.find_spec("prefect_ray") is None:
        with pytest.raises(RunnerError, match=r"optional extra: pip install -e '\.\[ray\]'"):
            Runner("ray")
    with pytest.raises(RunnerError, match="use it with --runner dask or ray"):
        Runner("local", address="tcp://127.0.0.1:8786")
    with pytest.raises(RunnerError, match="with --address the cluster has its own workers"):
        Runner("dask", address="tcp://127.0.0.1:8786", workers=2)
    with pytest.raises(RunnerError, match="private to this process"):
        check_storage(Runner("dask"), "memory://runs/a")
    check_storage(Runner("local"), "memory://runs/a")
    monkeypatch.setattr("flows.runners.SCHEDULER_TIMEOUT_S", 1)
    with pytest.raises(RunnerError, match="no Dask scheduler answers there"):
        with running_on(Runner("dask", address="tcp://127.0.0.1:9")):
            pass


def test_the_command_line_names_a_bad_runner_before_it_reads_the_config(tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["run", str(tmp_path / "missing.toml"), "--runner", "spark"])
    assert result.exit_code == 2 and "--runner 'spark': choose one of local, processes, dask, ray" in result.output
    result = CliRunner().invoke(app, ["run", str(tmp_path / "missing.toml"), "--workers", "0"])
    assert result.exit_code == 2 and "--workers 0: give at least 1" in result.output


def test_curate_run_on_a_dask_local_cluster_from_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app
    from tests.helpers import write_jsonl

    texts = [f"Report number {i} from the committee on the budget of the coming year, in full." for i in range(40)]
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "{tmp_path / "run"}"\n'
        f'[[sources]]\nname = "notes"\nreader = "jsonl"\npaths = ["{tmp_path / "in"}"]\nid_field = "id"\n'
        "[lang]\nenabled = false\n[filter]\nenabled = false\n[dedup]\nenabled = true\n"
        "[lines]\nenabled = false\n[tokenize]\nenabled = false\n"
    )
    result = CliRunner().invoke(app, ["run", str(config), "--runner", "dask", "--workers", "2", "--quiet"])
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "run" / "dedup" / "stats.json").read_text())
    assert stats["docs_in"] == 40 and stats["docs_out"] + sum(stats["removed"].values()) == 40
    assert f"run directory: {tmp_path / 'run'}" in result.output


def test_local_threads_put_warc_extraction_on_a_process_pool_and_write_the_same_bytes(corpus, local_run, monkeypatch):
    from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

    from flows.curate import stage_flow

    local_dir, _ = local_run
    config = parse_config(demo_config(corpus, corpus.parent / "run-gil"))
    threads, pooled = Runner("local", workers=2), Runner("local", workers=2, gil_on_processes=True)
    assert isinstance(threads.stage_task_runner("source", config), ThreadPoolTaskRunner)
    # The demo's 400 documents come in one small WARC file: too little to pay for a pool's start.
    assert isinstance(pooled.stage_task_runner("source", config), ThreadPoolTaskRunner)
    monkeypatch.setattr("flows.runners.GIL_UNITS", 1)
    assert isinstance(pooled.stage_task_runner("source", config), ThreadPoolTaskRunner)
    monkeypatch.setattr("flows.runners.GIL_MIN_BYTES", 1)
    chosen = pooled.stage_task_runner("source", config)
    assert isinstance(chosen, ProcessPoolTaskRunner) and chosen._max_workers == 1
    for stage in ("lang", "filter", "dedup", "tokenize", "mix"):  # their work releases the GIL
        assert isinstance(pooled.stage_task_runner(stage, config), ThreadPoolTaskRunner)
    in_memory = parse_config(demo_config(corpus, "memory://runs/gil"))
    assert isinstance(pooled.stage_task_runner("source", in_memory), ThreadPoolTaskRunner)

    stats = stage_flow("source", config, pooled)
    assert stats["docs_out"] > 0
    assert_same_files(local_dir, config.run_dir, stages=("source",))


def test_a_process_pool_run_keeps_its_processes_from_stage_to_stage():
    from prefect import flow, task

    @task
    def where() -> int:
        return os.getpid()

    @flow
    def stage() -> set[int]:
        return {future.result() for future in [where.submit() for _ in range(4)]}

    with running_on(Runner("processes", workers=1)) as ready:
        first = stage.with_options(task_runner=ready.task_runner())()
        second = stage.with_options(task_runner=ready.task_runner())()
    # One process did every task of both stages: it started (and imported the project) once.
    assert len(first) == 1 and first == second and os.getpid() not in first


def test_a_process_pool_forwards_its_workers_events_to_the_run_s_api(monkeypatch):
    """The pool's thread that forwards its workers' events and logs sees the API the run set in
    Prefect's settings (a context variable): where it saw none, Prefect started a server of its
    own in it and recorded every task run there."""
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.task_runners import ProcessPoolTaskRunner

    from flows.runtime import process_pool_task_runner

    seen = []
    monkeypatch.setattr(
        ProcessPoolTaskRunner, "_forward_subprocess_messages", lambda self: seen.append(PREFECT_API_URL.value())
    )
    url = "http://127.0.0.1:9/api"
    with temporary_settings(updates={PREFECT_API_URL: url}), process_pool_task_runner(1) as runner:
        runner._message_forwarding_thread.join(timeout=10)
    assert seen == [url]


def test_a_process_pool_worker_keeps_one_prefect_client_for_its_tasks():
    """Prefect made a client for each task run in a worker, each loading the CA bundle: most of a
    task's cost beyond its work. A worker of the run's pool keeps one for every task it runs."""
    from prefect import flow, task

    @task
    def clients_seen() -> int:
        import prefect.context
        from prefect.client.orchestration import get_client

        seen = prefect.context.__dict__.setdefault("_clients_seen_by_test", [])
        client = get_client(sync_client=True)
        if all(client is not other for other in seen):
            seen.append(client)
        return len(seen)

    @flow
    def stage() -> list[int]:
        return [future.result() for future in [clients_seen.submit() for _ in range(3)]]

    with running_on(Runner("processes", workers=1)) as ready:
        assert stage.with_options(task_runner=ready.task_runner())() == [1, 1, 1]
