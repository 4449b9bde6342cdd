import os

import pytest
from hypothesis import HealthCheck, settings

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
    from prefect.testing.utilities import prefect_test_harness

    # Two slow CI cores may need long to start the server and migrate its database.
    with prefect_test_harness(server_startup_timeout=300):
        yield


def pytest_collection_modifyitems(config, items):
    """Mark the tests that run flows under the Prefect server (``make test-fast`` leaves them out)."""
    for item in items:
        if "prefect_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.flow)
