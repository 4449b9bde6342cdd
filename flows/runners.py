"""Where a run's tasks execute: threads or processes on this machine, or a Dask or Ray cluster.

Every stage is a flow whose tasks are units of work (a shard, a partition), so a stage runs
unchanged on any Prefect task runner; only the runner is chosen here:

    local       threads on this machine (the default: nothing to start; most heavy work is in
                Arrow, polars and numpy, which release the GIL). A stage whose work holds the
                GIL (:func:`holds_gil`: the source stage's HTML extraction) runs on a process
                pool instead where ``gil_on_processes`` says so, as ``curate run`` does
    processes   a process pool on this machine
    dask        a Dask cluster: the one at ``address``, or a ``LocalCluster`` of ``workers``
                single-threaded worker processes started for the run (prefect-dask)
    ray         a Ray cluster: the one at ``address`` (``auto``, ``ray://host:10001``), or a
                local Ray instance of ``workers`` CPUs started for the run (prefect-ray, an
                optional extra: ``pip install -e '.[ray]'``)

Task runs in other processes report to the same Prefect API as the flow: without
``PREFECT_API_URL``, :func:`running_on` starts one temporary server for the run and points the
settings (which travel with every task) and the environment (which worker processes inherit) at it,
instead of letting each process start a server of its own.

Worker processes are spawned, so a script that calls :func:`running_on` must guard its entry
point with ``if __name__ == "__main__":`` (the ``curate`` command does).
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

from pipeline.formats.configfile import did_you_mean

RUNNERS = ("local", "processes", "dask", "ray")
CLUSTERS = ("dask", "ray")  # the runners that take an --address
RAY_MISSING = "--runner ray needs Ray and prefect-ray, an optional extra: pip install -e '.[ray]'"
SCHEDULER_TIMEOUT_S = 10  # to connect to a Dask scheduler given by address


class RunnerError(ValueError):
    """A runner the user asked for that cannot work (bad name, bad address, wrong storage)."""


@dataclass(frozen=True)
class Runner:
    """A choice of task runner: ``kind`` one of RUNNERS; ``address`` of a running Dask scheduler
    or Ray cluster; ``workers``: threads or processes on this machine, the workers of a started
    LocalCluster, or the CPUs of a started local Ray instance."""

    kind: str = "local"
    address: str | None = None
    workers: int | None = None
    # local: run a stage that holds the GIL (holds_gil) on a process pool of ``workers``. Its
    # processes are spawned, so the script that runs must guard its entry point (module docstring).
    gil_on_processes: bool = False

    def __post_init__(self) -> None:
        if self.kind not in RUNNERS:
            hint = did_you_mean(self.kind, RUNNERS).strip()
            raise RunnerError(
                f"--runner {self.kind!r}: choose one of {', '.join(RUNNERS)}" + (f"; {hint}" if hint else "")
            )
        if self.address and self.kind not in CLUSTERS:
            raise RunnerError("--address names a Dask scheduler or a Ray cluster; use it with --runner dask or ray")
        if self.address and self.workers:
            raise RunnerError("--workers starts a LocalCluster; with --address the cluster has its own workers")
        if self.workers is not None and self.workers < 1:
            raise RunnerError(f"--workers {self.workers}: give at least 1")
        if self.kind == "ray" and importlib.util.find_spec("prefect_ray") is None:
            raise RunnerError(RAY_MISSING)

    @property
    def in_process(self) -> bool:
        """Whether tasks run in the flow's own process (and so see its memory file systems)."""
        return self.kind == "local"

    def task_runner(self):
        """A fresh Prefect task runner of this kind (each stage's flow enters its own)."""
        workers = self.workers or os.cpu_count()
        if self.kind == "local":
            from prefect.task_runners import ThreadPoolTaskRunner

            return ThreadPoolTaskRunner(max_workers=workers)
        if self.kind == "processes":
            from flows.runtime import process_pool_task_runner

            pool = _run_pool.get()  # the run's own (running_on), else one for this stage
            return _shared_pool_runner()(pool) if pool is not None else process_pool_task_runner(workers)
        if self.kind == "ray":
            # running_on() connected this process to the cluster; the runner uses that connection.
            return _ray_task_runner()()
        if self.address is None:
            raise RunnerError("a dask runner needs a scheduler address; start one with running_on()")
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=self.address)

    def stage_task_runner(self, stage: str, config) -> object:
        """The task runner for ``stage`` of ``config``: :meth:`task_runner`, or on local threads
        with ``gil_on_processes`` a process pool for a stage that :func:`holds_gil` (where the
        run directory is one other processes can see and a Prefect API is there to share); None
        where it is each stage flow's own (local threads, one per core)."""
        workers = self.workers or os.cpu_count() or 1
        if (
            self.kind == "local"
            and self.gil_on_processes
            and workers > 1
            and not str(config.run_dir).startswith("memory://")
            and holds_gil(stage, config)
            and _api_url()
        ):
            from flows.runtime import start_worker

            return _gil_pool_runner()(max_workers=min(workers, holds_gil(stage, config)), initializer=start_worker)
        return None if self.kind == "local" and self.workers is None else self.task_runner()


LOCAL = Runner()
# The source stage's WARC pages are mostly resiliparse's HTML extraction, which holds the GIL: on
# threads the stage had one core whatever the workers (3,000 demo pages took the same wall time on
# one thread or two). A pool's processes each start Python, Prefect and the readers first: on the
# 100,000-document demo corpus (96 MB of WARC in 6 files) the stage took 23.0 CPU s on a pool of 2
# against 12.5 on threads, so a pool pays only where there is more extraction than that to share:
# at least GIL_UNITS units and GIL_MIN_BYTES of WARC input.
GIL_UNITS = 2
GIL_MIN_BYTES = 256 << 20
GIL_READERS = ("warc",)


def holds_gil(stage: str, config) -> int:
    """The units of ``stage`` of ``config`` that hold the GIL for most of their time (the source
    stage's WARC files, whose HTML is extracted) where there are enough of them to share between
    processes (:data:`GIL_UNITS`, :data:`GIL_MIN_BYTES`); else 0."""
    if stage != "source":
        return 0
    from pipeline.stages.source import plan_units

    units = [unit for source in config.sources if source.reader in GIL_READERS for unit in plan_units(source)]
    size = sum(os.path.getsize(path) for unit in units for path in unit.files if os.path.isfile(path))
    return len(units) if len(units) >= GIL_UNITS and size >= GIL_MIN_BYTES else 0


def _api_url() -> str | None:
    """The Prefect API this process reports to, for pool processes to report to as well: the
    configured one or the temporary server started in this process (else None: each process
    would start a server of its own)."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL

    server = SubprocessASGIServer()
    return os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value() or (server.running and server.api_url) or None


@functools.cache
def _gil_pool_runner() -> type:
    """The process pool task runner of ``flows.runtime`` that, while entered, puts this process's
    Prefect API in the environment its processes start with."""
    from flows.runtime import process_pool_task_runner

    class _Pool(type(process_pool_task_runner(1))):
        def __enter__(self):
            self._api_before = os.environ.get("PREFECT_API_URL")
            os.environ["PREFECT_API_URL"] = _api_url()
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            finally:
                _restore_env("PREFECT_API_URL", self._api_before)

    return _Pool


def _ray_task_runner():
    try:
        from prefect_ray import RayTaskRunner
    except ImportError:
        raise RunnerError(RAY_MISSING) from None
    return RayTaskRunner


@contextmanager
def shared_api() -> Iterator[str]:
    """The Prefect API every process of the run reports to: the configured one (PREFECT_API_URL),
    else a temporary server started here and stopped on leaving. Its address is also put in the
    environment, for worker processes started inside the block."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with ExitStack() as stack:
        url = PREFECT_API_URL.value()
        if not url:
            from flows.runtime import send_logs, start_server

            server = start_server()
            stack.callback(server.stop)
            stack.callback(send_logs)  # before the server stops
            url = server.api_url
            stack.enter_context(temporary_settings(updates={PREFECT_API_URL: url}))
        previous = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = url
        stack.callback(_restore_env, "PREFECT_API_URL", previous)
        yield url


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextmanager
def running_on(runner: Runner) -> Iterator[Runner]:
    """Set up what ``runner`` needs for the length of a run and yield it ready for
    :meth:`Runner.task_runner`: one shared Prefect API for runners with other processes, and
    for ``dask`` without an address a LocalCluster (its workers single-threaded processes)."""
    if runner.in_process:
        yield runner
        return
    with ExitStack() as stack:
        stack.enter_context(shared_api())
        if runner.kind == "dask" and runner.address is None:
            from distributed import LocalCluster

            logging.getLogger("distributed").setLevel(logging.WARNING)  # its scheduler runs in this process
            from flows.runtime import interrupts_ignored

            with interrupts_ignored():  # its worker processes leave Ctrl-C to this one (flows.interrupt)
                cluster = LocalCluster(
                    n_workers=runner.workers or os.cpu_count(),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # The scheduler serves its HTTP routes even without a dashboard, on 8787 unless
                    # told: a free port, so another cluster on 8787 brings no "Port in use" warning.
                    scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.WARNING,
                )
            cluster = stack.enter_context(cluster)
            stack.enter_context(_workers_first_on_interrupt(cluster))
            runner = replace(runner, address=cluster.scheduler_address, workers=None)
        elif runner.kind == "processes":
            stack.enter_context(_one_pool_for_the_run(runner.workers or os.cpu_count() or 1))
        elif runner.kind == "dask":
            _check_scheduler(runner.address)
        elif runner.kind == "ray":
            stack.enter_context(_ray_connection(runner))
        yield runner


# The process pool of the run on ``--runner processes`` (set by running_on): every stage's tasks go
# to its processes, which import the project once. A pool per stage cost each stage the start of
# its processes (about 4 CPU s each here, fastText's model loaded again by lang): at 100,000 demo
# documents the run took twice the CPU time of local threads.
_run_pool: contextvars.ContextVar = contextvars.ContextVar("run_pool", default=None)


@contextmanager
def _one_pool_for_the_run(workers: int) -> Iterator[None]:
    from flows.runtime import process_pool_task_runner

    with process_pool_task_runner(workers) as pool:
        token = _run_pool.set(pool)
        try:
            yield
        finally:
            _run_pool.reset(token)


@functools.cache
def _shared_pool_runner() -> type:
    """A process pool task runner over the processes of another, entered one (the run's pool): a
    stage's flow enters and leaves it without starting or stopping them."""
    from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner

    class _Shared(ProcessPoolTaskRunner):
        def __init__(self, pool: ProcessPoolTaskRunner | None, max_workers: int | None = None):
            super().__init__(max_workers=pool._max_workers if pool is not None else max_workers)
            self._pool = pool

        def duplicate(self):
            return type(self)(self._pool, self._max_workers)

        def __getstate__(self):  # pickled with a flow's context: the pool stays in this process
            return {**self.__dict__, "_pool": None}

        def __enter__(self):
            from concurrent.futures import ThreadPoolExecutor

            if self._pool is None:  # a copy in a task's process (its flow's context): as Prefect's
                return super().__enter__()
            TaskRunner.__enter__(self)
            self._executor = self._pool._executor  # its processes forward their logs to the pool's queue
            self._resolver_executor = ThreadPoolExecutor(max_workers=self._max_workers)
            return self

        def __exit__(self, *exc):
            if self._pool is not None:
                self._executor = None  # the pool's, stopped when the run ends
            super().__exit__(*exc)

    return _Shared


@contextmanager
def _workers_first_on_interrupt(cluster) -> Iterator[None]:
    """On Ctrl-C, a LocalCluster's worker processes killed and its logging silenced before the
    cluster closes: a worker that outlives its scheduler logs the failed heartbeat as an ERROR on
    the terminal, where a stopped run prints one line (flows.interrupt)."""
    try:
        yield
    except BaseException:
        import psutil

        from flows.interrupt import interrupted

        if not interrupted():
            raise
        logging.getLogger("distributed").setLevel(logging.CRITICAL)  # its scheduler and nannies, here
        for nanny in list(getattr(cluster, "workers", {}).values()):
            pid = getattr(getattr(nanny, "process", None), "pid", None)
            try:
                if pid:
                    psutil.Process(pid).kill()
            except psutil.Error:
                pass
        raise


@contextmanager
def _ray_connection(runner: Runner) -> Iterator[None]:
    """This process connected to the Ray cluster at ``runner.address``, or to a local Ray
    instance of ``runner.workers`` CPUs started here (stopped on leaving), for every stage's
    task runner to use. Ray's workers get the Prefect API's address from the environment."""
    _ray_task_runner()  # a clear error when the extra is not installed
    import ray

    env = {"PREFECT_API_URL": os.environ["PREFECT_API_URL"]}
    if runner.address is None:
        ray.init(
            num_cpus=runner.workers or os.cpu_count(),
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    else:
        try:
            ray.init(address=runner.address, log_to_driver=False, runtime_env={"env_vars": env})
        except (ConnectionError, RuntimeError) as error:
            raise RunnerError(
                f"--address {runner.address}: no Ray cluster answers there ({type(error).__name__}); "
                "start one with `ray start --head` or leave out --address to start a local one"
            ) from error
    try:
        yield
    finally:
        ray.shutdown()


def _check_scheduler(address: str) -> None:
    """Stop early, in one line, when no Dask scheduler answers at ``address``."""
    from distributed import Client

    try:
        with Client(address, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False) as client:
            if not client.scheduler_info().get("workers"):
                raise RunnerError(
                    f"--address {address}: the Dask scheduler has no workers; start some with `dask worker {address}`"
                )
    except (OSError, TimeoutError) as error:
        raise RunnerError(
            f"--address {address}: no Dask scheduler answers there ({type(error).__name__}); "
            "start one with `dask scheduler` or leave out --address to start a LocalCluster"
        ) from error


def check_storage(runner: Runner, run_dir) -> None:
    """A run directory in fsspec's memory file system lives in one process: only the local runner
    sees it."""
    if str(run_dir).startswith("memory://") and not runner.in_process:
        raise RunnerError(
            f"run_dir {run_dir}: a memory:// file system is private to this process; "
            f"use --runner local, or a run_dir every worker can reach"
        )
