"""The source stage re-reads a unit whose input changed: it deletes that unit's earlier outputs,
and only those it recorded writing, not a person's file whose name begins with the unit's."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import curate_in_process, near_copies_corpus, source_config

OFF = {"enabled": False}


def config(tmp_path: Path):
    return source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
        lang=OFF,
        filter=OFF,
        dedup=OFF,
        lines=OFF,
        tokenize=OFF,
        mix=OFF,
    )


def test_a_rerun_of_a_changed_unit_keeps_a_persons_files_named_like_its_outputs(tmp_path):
    corpus = near_copies_corpus(tmp_path / "in") / "a.jsonl"
    curate_in_process(config(tmp_path))
    docs = tmp_path / "run" / "source" / "docs"
    (shard,) = sorted(docs.glob("*.parquet"))
    unit = shard.name.rsplit("-", 1)[0]
    mine = [docs / f"{unit}-backup.parquet", docs.parent / "quarantine" / f"{unit}.parquet"]
    mine[1].parent.mkdir(exist_ok=True)
    for path in mine:
        shutil.copyfile(shard, path)
    backup = shard.read_bytes()
    corpus.write_text(corpus.read_text() + '{"text": "One more document, long enough to be read."}\n')
    curate_in_process(config(tmp_path))  # the unit is read again
    assert [path.read_bytes() for path in mine] == [backup, backup]
