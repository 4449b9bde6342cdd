"""A stage reads the documents the stage before it recorded writing, and the views (report,
inspect, the Python API) read a stage's recorded files: a file a person put in a stage's folder is
never read, and stays. Runs by the stages' library calls (no Prefect)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.formats.manifest import stage_outputs
from tests.helpers import curate_in_process, near_copies_corpus, source_config
from tests.helpers import stage_outputs as output_bytes

OFF = {"enabled": False}
FILTER = {"params": {"gopher_quality": {"max_mean_word_length": 5.0}}}


def config(tmp_path: Path, run: str, **settings):
    made = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
        tokenize=OFF,
        mix=OFF,
        **settings,
    )
    return made.model_copy(update={"run_dir": tmp_path / run})


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    near_copies_corpus(root / "in")
    curate_in_process(config(root, "run", filter=FILTER))
    return root / "run"


def _mine(run: Path) -> dict[Path, bytes]:
    """A person's files in the stage folders: junk named like shards, a copy of a real shard."""
    docs = sorted((run / "filter" / "docs").glob("*.parquet"))[0]
    return {
        run / "filter" / "docs" / "notes.parquet": b"mine\n",
        run / "filter" / "docs" / "backup.parquet": docs.read_bytes(),
        run / "filter" / "removed" / "user.parquet": b"u\n",
        run / "filter" / "attributes" / "user.parquet": b"u\n",
        run / "source" / "quarantine" / "user.parquet": b"u\n",
        run / "source" / "parts" / "user.json": b"{}\n",
    }


def test_a_stage_reads_only_the_documents_the_stage_before_it_wrote(tmp_path):
    near_copies_corpus(tmp_path / "in")
    curate_in_process(config(tmp_path, "run"))
    run = tmp_path / "run"
    recorded = stage_outputs(run, "filter")
    mine = _mine(run)
    for path, data in mine.items():
        path.write_bytes(data)
    assert stage_outputs(run, "filter") == recorded  # a file put there is not the stage's output

    changed = {"threshold": 0.9}
    curate_in_process(config(tmp_path, "run", dedup=changed))  # dedup and lines rerun on filter's docs
    assert all(path.read_bytes() == data for path, data in mine.items())
    for path in mine:
        path.unlink()
    curate_in_process(config(tmp_path, "fresh", dedup=changed))
    assert output_bytes(run) == output_bytes(tmp_path / "fresh")
