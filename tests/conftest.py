import os
from contextlib import contextmanager

# One BLAS and one OpenMP thread per test process, set before numpy or torch is imported: the tests'
# arrays and models are small, and on a busy machine (CI's two cores, other work beside) the
# threads' spinning for work made single tests 8 to 12 times slower (a scaling-law bootstrap
# 19 s -> 264 s, a memorization test 13 s -> 111 s, measured side by side under load).
for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Property-based tests are reproducible: the same examples on every machine and every run (no
# example database, no clock deadline on shared, noisy cores).
settings.register_profile(
    "curate", derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("curate")

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def prefect_server():
    """One temporary Prefect server (own database) for the whole test session."""
    from prefect.settings import temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    # Two slow CI cores may need long to start the server and migrate its database. No flow-run
    # heartbeats in this process: a flow run's end waits for its heartbeat thread, which sleeps in
    # steps of a second, about 0.6 s per flow run (a curation is eight), a quarter of a tiny
    # sweep's time; nothing here waits long enough for a heartbeat to matter. A `curate` process
    # a test starts keeps Prefect's default, as a user's does.
    with prefect_test_harness(server_startup_timeout=300), temporary_settings({"flows.heartbeat_frequency": None}):
        yield


@pytest.fixture
def memory_root():
    """A fresh ``memory://<unique>`` folder, removed with everything in it after the test."""
    import uuid

    import fsspec

    name = uuid.uuid4().hex
    yield f"memory://{name}"
    memory = fsspec.filesystem("memory")
    if memory.exists(f"/{name}"):
        memory.rm(f"/{name}", recursive=True)


def pytest_collection_modifyitems(config, items):
    """Mark the tests that run flows under the Prefect server (``make test-fast`` leaves them out)."""
    for item in items:
        if "prefect_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.flow)


@contextmanager
def environment_kept():
    """``os.environ`` as it was before the block: a `curate` command run in this process sets the
    variables of its run (Prefect's home, its logging settings, the run log's path), which later
    tests and the processes they start would otherwise inherit."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _environment_restored():
    """Every test leaves the environment as it found it (see environment_kept)."""
    with environment_kept():
        yield


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, prefect_server):
    """``curate demo`` once for the session, as ``make demo`` runs it but on 1,500 documents: seed 0
    (the demo's own, so the ids the docs show are in it), the run in ``<root>/runs/demo``. The ids
    of the demo corpus are drawn per document, so a smaller corpus has many of the full one's.
    Returns (root, corpus, run, what the command printed)."""
    from typer.testing import CliRunner

    from flows.cli import app

    root = tmp_path_factory.mktemp("demo")
    corpus, run = root / ".cache" / "demo-corpus", root / "runs" / "demo"
    with environment_kept(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("PREFECT_HOME", str(root / "prefect-home"))
        result = CliRunner().invoke(
            app, ["demo", "--docs", "1500", "--corpus-dir", str(corpus), "--run-dir", str(run), "--quiet"]
        )
    assert result.exit_code == 0, result.output
    return root, corpus, run, result.output
