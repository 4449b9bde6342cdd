"""Prefect settings for a run; call :func:`configure_prefect` before Prefect is imported.

Without ``PREFECT_API_URL`` a flow runs on Prefect's temporary local server, fully offline, with its
database under ``<run_dir>/.prefect`` (under Prefect's own home, ``~/.prefect``, when the run
directory is not local: the database is a local SQLite file). With ``PREFECT_API_URL`` set (e.g. to a running
``prefect server start``), runs are reported there and show in its UI.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.io.storage import is_local

# Two slow cores can take a while to start the temporary server and migrate its database.
EPHEMERAL_STARTUP_TIMEOUT_S = "300"


def configure_prefect(run_dir: Path | str, quiet: bool = False) -> None:
    if not os.environ.get("PREFECT_API_URL") and is_local(run_dir):
        home = Path(run_dir).resolve() / ".prefect"
        home.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("PREFECT_HOME", str(home))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_STARTUP_TIMEOUT_S)
    os.environ.setdefault("PREFECT_SERVER_UI_ENABLED", "false")
    if quiet:
        os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
