"""Prefect settings for a run; call :func:`configure_prefect` before Prefect is imported.

Without ``PREFECT_API_URL`` a flow runs on Prefect's temporary local server, fully offline, with its
database under ``<run_dir>/.prefect`` (under Prefect's own home, ``~/.prefect``, when the run
directory is not local: the database is a local SQLite file). The server starts before Prefect is
imported (:func:`begin_server`), and a new database is a copy of a migrated template
(:func:`_database_template`). With ``PREFECT_API_URL`` set (e.g. to a running
``prefect server start``), runs are reported there and show in its UI.

Every record logged in a run, Prefect's tracebacks included, goes to the run log,
``<run_dir>/logs/<command>-<time>-<pid>.log`` (flows/logging.yml, flows.logs); the terminal gets the
progress lines and warnings, and a failure is one line from the CLI that names the log.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import importlib
import multiprocessing.context
import multiprocessing.resource_tracker
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.io.storage import is_local

# Two slow cores can take a while to start the temporary server and migrate its database.
EPHEMERAL_STARTUP_TIMEOUT_S = "300"
LOGGING_YML = Path(__file__).with_name("logging.yml")
LOG_FILE_ENV = "PREFECT_LOGGING_HANDLERS_RUN_LOG_FILENAME"
TERMINAL_LEVEL_ENV = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"
LOGS_DIR = "logs"  # the run logs' folder in a run directory or an out_dir
DATABASE_FULL = "database or disk is full"  # SQLite's words for SQLITE_FULL
MIN_FREE_BYTES = 1 << 20  # less than this free beside the database: the disk is full for it


class ServerStartError(RuntimeError):
    """Prefect's temporary server stopped before it answered."""


def configure_prefect(
    run_dir: Path | str, quiet: bool = False, command: str = "curate", progress: bool = False
) -> Path:
    """Set Prefect up for a run in ``run_dir`` (its database, its logging, no telemetry); return the
    run log's path. ``quiet``: the terminal gets Prefect's warnings only, not its info lines;
    ``progress``: the warnings and the command's own progress lines (flows.logs.PROGRESS), not
    Prefect's info lines (flow and task runs, its server)."""
    if not os.environ.get("PREFECT_API_URL") and is_local(run_dir):
        home = Path(run_dir).resolve() / ".prefect"
        home.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("PREFECT_HOME", str(home))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")  # the client's telemetry, and its banner on a terminal
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_STARTUP_TIMEOUT_S)
    os.environ.setdefault("PREFECT_SERVER_UI_ENABLED", "false")
    logs = Path(run_dir).resolve() / LOGS_DIR if is_local(run_dir) else prefect_home() / LOGS_DIR
    path = logs / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    os.environ["PREFECT_LOGGING_SETTINGS_PATH"] = str(LOGGING_YML)
    os.environ[LOG_FILE_ENV] = str(path)
    if quiet or progress:  # flows.logs.TerminalHandler: at INFO, only lines marked PROGRESS
        os.environ[TERMINAL_LEVEL_ENV] = "WARNING" if quiet else "INFO"
    else:
        os.environ.pop(TERMINAL_LEVEL_ENV, None)
    return path


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()


def _run_log_handler():
    logs = sys.modules.get("flows.logs")  # loaded by Prefect's logging when flows/logging.yml is in use
    if logs is None:
        return None
    import logging

    for handler in logging.getLogger().handlers:
        if isinstance(handler, logs.RunLogHandler) and handler.baseFilename:
            return handler
    return None


def run_log() -> Path | None:
    """The run log this process writes (None where Prefect's logging is not the run's)."""
    handler = _run_log_handler()
    return None if handler is None else Path(handler.baseFilename)


def log_traceback(error: BaseException, what: str) -> Path | None:
    """Put ``what`` and ``error``'s traceback in the run log only, not on the terminal; return the
    log's path, or None when there is no run log or it could not be written (a full disk)."""
    import logging

    handler = _run_log_handler()
    if handler is None:
        return None
    logging.getLogger("flows.cli").error(what, exc_info=error, extra={"terminal": False})
    handler.flush()
    return None if handler.failed else Path(handler.baseFilename)


def full_database() -> Path | None:
    """Prefect's SQLite database when it is the one whose disk is full (after a failure): too little
    space is left beside it, or the run log says SQLite found it full. None otherwise."""
    if os.environ.get("PREFECT_API_URL") and os.environ.get("PREFECT_API_URL") != _started_url:
        return None  # a server of the user's, with a database of its own
    database = prefect_home() / "prefect.db"
    try:
        stats = os.statvfs(database.parent)
        if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES:
            return database
    except OSError:
        pass
    log = run_log()
    try:
        if log is not None and DATABASE_FULL in log.read_text(errors="replace"):
            return database
    except OSError:
        pass
    return None


_started_url: str | None = None  # the API of the temporary server this process started

# What the step of a run that waits for its temporary server adds while it runs load_for.
LOADING = ", loading the compiled loops"
# The report's modules (its charts' matplotlib), which `curate run` imports later anyway.
REPORT_MODULES = ("report.build", "matplotlib.figure", "matplotlib.backends.backend_agg")
# What Prefect imports on a run's first flow run: its parameters' encoder (FastAPI's, the most of
# it) and the flow graph's (docs/cli.md, "What a run costs").
FLOW_MODULES = ("fastapi.encoders", "prefect.utilities.visualization", "anyio._backends._asyncio")
_SAMPLE = "A short sentence of plain text, enough for every rule to measure it. " * 4


def load_for(config, modules: tuple[str, ...] = ()) -> None:
    """What a run of ``config`` loads on first use anyway, loaded now: Prefect's modules for a
    flow run and ``modules`` imported, and the
    filter and dedup stages' compiled loops (numba's cache read, or compiled on a new machine) by
    running each stage the config turns on over two documents. Meant for while the temporary
    server starts, when the run's process would only wait (:func:`temporary_server`)."""
    for name in (*FLOW_MODULES, *modules):
        importlib.import_module(name)
    import polars as pl

    from pipeline.api import dedup_documents, filter_documents
    from pipeline.stages.registry import enabled_stages

    docs = pl.DataFrame({"id": ["a", "b"], "text": [_SAMPLE, _SAMPLE + "And one more."]})
    stages = enabled_stages(config)
    if "filter" in stages:
        filter_documents(docs)
    if "dedup" in stages or "mix" in stages:  # the mix stage's check of the validation split too
        dedup_documents(docs)


def _api_configured() -> bool:
    """Whether a Prefect API is set for this process: PREFECT_API_URL in the environment, or (once
    Prefect is imported) in its settings, or a server Prefect's own client started here."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    if "prefect.settings" not in sys.modules:
        return False
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return True
    server = sys.modules.get("prefect.server.api.server")
    return server is not None and any(s.running for s in server.SubprocessASGIServer._instances.values())


def begin_server() -> TemporaryServer | None:
    """Start Prefect's temporary server without waiting for it, where this process will need one:
    no API is set and no Prefect profile could set one (checked without importing Prefect). The
    server then starts while the run imports Prefect and opens its first flow
    (:func:`temporary_server` waits for it). None where that cannot be known yet."""
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH") or prefect_home() / "profiles.toml").expanduser()
    if _api_configured() or ("prefect.settings" not in sys.modules and profiles.exists()):
        return None
    return start_server(wait=False)


@contextmanager
def temporary_server(
    begun: TemporaryServer | None = None, meanwhile: Callable[[], None] | None = None, stop_later: bool = False
) -> Iterator[None]:
    """Prefect's temporary server for the block (``begun`` by :func:`begin_server`, or started
    here), when no Prefect API is set (PREFECT_API_URL, in the environment or in Prefect's
    settings) and none runs in this process; its address in the environment (for worker
    processes) and in Prefect's settings for the block. A server this block did not start is not
    its to stop (a test harness's, a caller's). ``meanwhile`` runs while a ``begun`` server
    starts (:func:`load_for`). After a block that ends normally, the server stops once it has
    recorded the run (:meth:`TemporaryServer.stop_when_settled`); ``stop_later``: the caller goes
    on meanwhile. Flow runs
    send no heartbeats to it: they only tell a server with automations that a run died, and each
    flow run's end waits up to a second for its heartbeat thread."""
    global _started_url
    if begun is None and _api_configured():
        yield
        return
    if begun is not None and _api_configured():
        begun.stop()
        yield
        return
    server = begun or start_server(wait=False)
    previous = os.environ.get("PREFECT_API_URL")
    try:
        if begun is not None and meanwhile is not None:  # while this process would only wait
            meanwhile()
        server.wait()
        from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

        _started_url = os.environ["PREFECT_API_URL"] = server.api_url
        # No UI URL: the temporary server serves no UI, so flow runs print no "View at" link to it.
        since = _utc_now()
        with temporary_settings(updates={PREFECT_API_URL: server.api_url, PREFECT_UI_URL: ""}):
            with temporary_settings({"flows.heartbeat_frequency": None}):
                try:
                    yield
                finally:
                    send_logs()  # before the server stops
                send_events()
        server.stop_when_settled(since, wait=not stop_later)
    finally:
        _started_url = None
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        server.stop()


def _utc_now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()


# Task-run states the server has not recorded as final yet (a run's last events on their way).
_UNSETTLED = ["SCHEDULED", "PENDING", "RUNNING"]
SETTLE_TIMEOUT_S = 5.0


def send_events(timeout: float = SETTLE_TIMEOUT_S) -> None:
    """Send the run's events still queued for the API (task runs' states travel as events)."""
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=timeout, at_exit=False)


def send_logs() -> None:
    """Send the run's logs still queued for the API (they would fail once the server is gone)."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=30, at_exit=False)


# The temporary server's program: ``python -m uvicorn ARGS`` with a thread that ends the server
# once the process that started it (argv[1]) is gone, even killed outright, with nothing unwound.
# A watch of the parent's pid, not Linux's PR_SET_PDEATHSIG: that fires when the starting
# *thread* ends, and works on Linux only. A run that ended normally writes ``settle SINCE`` on the
# server's stdin (TemporaryServer.stop_when_settled): the server then stops itself once its API
# (argv[2]) counts no unfinished task run made since SINCE, SETTLE_S at most. Stopped sooner, its
# recorder (writing in batches, each second at most: _SERVER_DEFAULTS) would be cancelled
# mid-write, and the run's database would keep task runs as running, or miss them.
_WITH_PARENT = """\
import json, os, runpy, signal, sys, threading, time, urllib.request
parent, api = int(sys.argv.pop(1)), sys.argv.pop(1)
asked = []
def listen():
    for line in sys.stdin:
        asked.append(line.split(maxsplit=1)[1].strip())
def settled(since):
    query = {"task_runs": {"expected_start_time": {"after_": since}, "state": {"type": {"any_": UNSETTLED}}}}
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(api + "/task_runs/count", json.dumps(query).encode(), headers)
    with urllib.request.urlopen(request, timeout=SETTLE_S) as answer:
        return json.load(answer) == 0
def watch():
    listening = threading.Thread(target=listen, daemon=True)
    listening.start()
    while os.getppid() == parent and not asked:
        time.sleep(0.05)
    listening.join(0 if asked else 0.5)
    deadline = time.monotonic() + SETTLE_S
    try:
        while asked and time.monotonic() < deadline and not settled(asked[-1]):
            time.sleep(0.05)
    except Exception:
        pass
    os.kill(os.getpid(), signal.SIGTERM)  # a graceful stop, as the run's own would be
    time.sleep(SETTLE_S)
    os._exit(0)
threading.Thread(target=watch, name="parent-watch", daemon=True).start()
sys.argv[0] = "uvicorn"
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
"""


class TemporaryServer:
    """Prefect's temporary server: its process (in a session of its own, see
    :func:`_server_process`) and its address; ``wait`` until it answers, ``stop`` it."""

    def __init__(self, port: int, process, fresh: bool) -> None:
        self.port, self.process, self.fresh = port, process, fresh
        self.api_url = f"http://127.0.0.1:{port}/api"
        self.ready = False
        self.released = False

    def wait(self, timeout: float | None = None) -> None:
        """Until the server answers (then, for a database it made, keep it as the template: see
        :func:`_database_template`). Raises ServerStartError as soon as its process ends (where
        Prefect would start it again and again until its timeout: minutes, on a full disk)."""
        if self.ready:
            return
        import httpx

        if timeout is None:
            timeout = float(
                os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_STARTUP_TIMEOUT_S)
            )
        deadline = time.monotonic() + timeout
        try:
            with httpx.Client() as client:
                while time.monotonic() < deadline:
                    if self.process.poll() is not None:
                        raise ServerStartError(f"Prefect's temporary server exited with code {self.process.returncode}")
                    try:
                        if client.get(f"{self.api_url}/health").status_code == 200:
                            self.ready = True
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.05)
            if not self.ready:
                raise ServerStartError(f"Prefect's temporary server did not answer in {timeout:.0f} s")
        except BaseException:  # a Ctrl-C while it starts, too: the server is in a session of its own
            self.stop()
            raise
        if self.fresh:
            _keep_template(prefect_home())

    def stop_when_settled(self, since: str, wait: bool = True) -> None:
        """Have the server stop itself once it has recorded the run's task runs made since
        ``since`` (:data:`_WITH_PARENT`); ``wait``: for that, else the caller goes on and may exit
        meanwhile (the server is then not this process's to kill at its exit)."""
        try:
            self.process.stdin.write(f"settle {since}\n".encode())
            self.process.stdin.close()
        except OSError:  # it ended already
            self.stop()
            return
        if wait:
            try:
                self.process.wait(timeout=2 * SETTLE_TIMEOUT_S)
            except Exception:
                self.stop()
            _processes.discard(self.process)
            return
        self.released = True
        _processes.discard(self.process)

    def stop(self) -> None:
        """Stop the server now (unless :meth:`stop_when_settled` left it to stop itself)."""
        if self.released:
            return
        process = self.process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except Exception:
                process.kill()
                process.wait()
        _processes.discard(process)


def start_server(wait: bool = True) -> TemporaryServer:
    """Start Prefect's temporary server, its log records in the run log, its database made from
    the template where this home has none yet (:func:`_database_template`); return it (``wait``:
    once it answers). Raises ServerStartError as soon as the server's process ends."""
    import socket

    with socket.socket() as probe:  # a free port, chosen by the system
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fresh = not _from_template(prefect_home())
    process = _server_process(port)
    _processes.add(process)
    server = TemporaryServer(port, process, fresh)
    if wait:
        server.wait()
    return server


def _database_template() -> Path:
    """Where a migrated, empty database of this Prefect version is kept for new run directories:
    migrating a new database takes the temporary server several seconds (docs/cli.md, "What a run
    costs"); a copy takes milliseconds. Under the user's cache (XDG_CACHE_HOME)."""
    from importlib.metadata import version

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache / "curate" / f"prefect-{version('prefect')}"


# The files a migrated database is: the database and Prefect's record that its block types are registered.
_TEMPLATE_FILES = ("prefect.db", "memo_store.toml")


def _from_template(home: Path) -> bool:
    """Give ``home`` a copy of the template database where it has no database; return whether it
    has one now (False: the server makes and migrates a new one)."""
    import shutil

    if (home / "prefect.db").exists():
        return True
    template = _database_template()
    if not all((template / name).is_file() for name in _TEMPLATE_FILES):
        return False
    try:
        home.mkdir(parents=True, exist_ok=True)
        for name in _TEMPLATE_FILES:
            shutil.copyfile(template / name, home / f".{name}.part")
        for name in _TEMPLATE_FILES:
            os.replace(home / f".{name}.part", home / name)
    except OSError:
        return False
    return True


def _keep_template(home: Path) -> None:
    """Keep the database a server just made and migrated in ``home`` as the template (a consistent
    copy by SQLite's backup, before any run is in it); nothing where it cannot be written."""
    import shutil
    import sqlite3

    template = _database_template()
    if all((template / name).is_file() for name in _TEMPLATE_FILES) or not (home / "memo_store.toml").is_file():
        return
    part = template.with_name(f".{template.name}.{os.getpid()}")
    try:
        part.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(home / "prefect.db") as source, sqlite3.connect(part / "prefect.db") as copy:
            source.backup(copy)
        copy.close()
        shutil.copyfile(home / "memo_store.toml", part / "memo_store.toml")
        os.replace(part, template)
    except (OSError, sqlite3.Error):
        shutil.rmtree(part, ignore_errors=True)


# The temporary server's own defaults, each overridable from the environment: its task-run
# recorder writes events in batches flushed each second, not one transaction per event (most of
# the server's time recording a run: docs/cli.md, "What a run costs"); it has no automations to
# trigger and no UI or other subscriber to stream events and logs to.
_SERVER_DEFAULTS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
    "PREFECT_SERVER_EVENTS_STREAM_OUT_ENABLED": "false",
    "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "false",
}


def _server_process(port: int):
    """Prefect's temporary server process (``SubprocessASGIServer._run_uvicorn_command``'s command
    and environment), in a session of its own: a Ctrl-C at the terminal signals the terminal's
    foreground process group, and the server must outlive it until the run has stopped and sent
    its last states and logs; the run stops it (:func:`temporary_server`). A run killed outright
    (SIGKILL) stops nothing: the server ends itself (:data:`_WITH_PARENT`). Prefect is not
    imported here (the server starts while the run imports it): the server reads the settings
    from the environment, as this process would, and those set in this process where Prefect
    is imported already."""
    import importlib.util
    import subprocess

    package = Path(importlib.util.find_spec("prefect").origin).parent
    program = _WITH_PARENT.replace("UNSETTLED", repr(_UNSETTLED)).replace("SETTLE_S", repr(SETTLE_TIMEOUT_S))
    command = [sys.executable, "-c", program, str(os.getpid()), f"http://127.0.0.1:{port}/api"]
    command += ["--app-dir", str(package.parent), "--factory"]
    command += ["prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "error", "--lifespan", "on"]
    settings = {}
    if "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        settings = get_current_settings().to_environment_variables(exclude_unset=True)
    env = {
        **_SERVER_DEFAULTS,
        **os.environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        **settings,
    }
    env.pop("PREFECT_API_URL", None)  # the server's own settings; the client's address is no concern of it
    # Not the run's stdout and stderr: a server that outlives the run by its last second
    # (TemporaryServer.stop_when_settled) would hold a pipe the run's output goes to open. What the
    # server writes before its logging is set up goes to the run log.
    log = os.environ.get(LOG_FILE_ENV)
    if log:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") if log else open(os.devnull, "wb") as stderr:
        return subprocess.Popen(
            command, env=env, start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr
        )


_processes: set = set()  # the temporary servers' processes this process started


def kill_servers() -> None:
    """Kill the temporary servers this process started, at once (a run stopped without unwinding:
    they are in sessions of their own, and would outlive it)."""
    for process in list(_processes):
        if process.poll() is None:
            process.kill()


def kill_children() -> None:
    """Kill every process this one started, and theirs, at once: the worker processes of a process
    pool or of a Dask LocalCluster (a run stopped without unwinding would leave them running their
    units with no one to hand them to), and whatever is left of the temporary servers."""
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass


def ignore_interrupts() -> None:
    """In a worker process: leave Ctrl-C to the run's main process. A terminal signals its whole
    process group, workers included; the main process stops the run and its workers, and a
    worker's own KeyboardInterrupt would only print tracebacks. A worker of
    :func:`process_pool_task_runner` starts with Ctrl-C blocked; ignored now, it is unblocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class _BlockedSpawnProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that starts with Ctrl-C blocked: the spawning thread blocks SIGINT while
    it starts the process, which inherits the mask (exec keeps it), then restores its own; any
    other thread of this process still takes a Ctrl-C meanwhile. So a Ctrl-C that comes while the
    new interpreter imports its modules, before any initializer of its own can run, stays pending
    instead of raising KeyboardInterrupt there and printing a traceback. (The standard library
    starts its resource tracker the same way and unblocks SIGINT after, so the tracker is started
    first.)"""

    def start(self) -> None:
        # The resource tracker first: starting it unblocks SIGINT in this thread, whatever the mask.
        multiprocessing.resource_tracker.ensure_running()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class BlockedSpawnContext(multiprocessing.context.SpawnContext):
    """The spawn start method, with each process started as :class:`_BlockedSpawnProcess`."""

    Process = _BlockedSpawnProcess


def start_worker() -> None:
    """A process pool's worker, started: Ctrl-C left to the run's main process
    (:func:`ignore_interrupts`), and one Prefect client for every task it runs. Prefect makes a
    client for each task run otherwise, twice, each loading the CA bundle (18 ms of CPU each)."""
    ignore_interrupts()
    from prefect.context import SyncClientContext
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():  # else each task would start a server of its own (running_on sets one)
        SyncClientContext().__enter__()  # for the life of the process: its tasks run in this thread


def process_pool_task_runner(max_workers: int):
    """Prefect's process pool task runner, its workers started with Ctrl-C blocked
    (:class:`BlockedSpawnContext`) and then ignoring it (:func:`ignore_interrupts`). The pool
    starts a worker when a task is submitted, from whichever thread submits it, so the context
    goes on the pool itself (Prefect fixes the spawn start method when it makes the pool)."""
    return _blocked_spawn_runner()(max_workers=max_workers, initializer=start_worker)


@functools.cache
def _blocked_spawn_runner() -> type:
    """The runner class of :func:`process_pool_task_runner`, made on first use (Prefect is
    imported only by the runs that use it)."""
    from prefect.task_runners import ProcessPoolTaskRunner

    class _Runner(ProcessPoolTaskRunner):
        def __enter__(self):
            # Prefect's thread that forwards the workers' events and logs starts without this
            # context, where the run's API address is set (temporary_settings): in it, Prefect
            # found no API and started a server of its own, which recorded every task run.
            context, forward = contextvars.copy_context(), self._forward_subprocess_messages
            self._forward_subprocess_messages = lambda: context.run(forward)
            try:
                super().__enter__()
            finally:
                del self._forward_subprocess_messages
            self._executor._mp_context = BlockedSpawnContext()
            return self

    return _Runner


@contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ctrl-C ignored while the block starts processes, which inherit that (a Python process
    started with SIGINT ignored never raises KeyboardInterrupt); then as it was."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


atexit.register(kill_servers)  # one left by an exit that did not unwind (Prefect registers its own too)
