"""Links and folders a person puts in a run's stage folders: a rerun that redoes the stages neither
follows nor removes them, and reads no input from them."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import curate_in_process, near_copies_corpus, source_config, stage_outputs


def config(tmp_path: Path, run: str, **settings):
    made = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
        dedup={"enabled": False},
        tokenize={"vocab_size": 300},
        mix={"validation_fraction": 0.1},
        **settings,
    )
    return made.model_copy(update={"run_dir": tmp_path / run})


def test_links_in_stage_folders_survive_a_rerun_that_redoes_those_stages(tmp_path):
    near_copies_corpus(tmp_path / "in")
    curate_in_process(config(tmp_path, "run"))
    run = tmp_path / "run"
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / "plan.parquet").write_text("a person's file")  # what a mixture folder holds, too
    links = {
        run / "filter" / "docs" / "x": empty,
        run / "filter" / "removed" / "x": empty,
        run / "filter" / "x": empty,
        run / "filter" / "docs" / "linked.parquet": empty,
        run / "filter" / "docs" / "full": full,
        run / "lines" / "notes.txt": full / "plan.parquet",
        run / "mix" / "backup": full,
    }
    for link, target in links.items():
        os.symlink(target, link)
    (run / "filter" / "docs" / "folder.parquet").mkdir()
    (run / "filter" / "docs" / "folder.parquet" / "notes.txt").write_text("a person's file")

    threshold = {"params": {"gopher_quality": {"max_mean_word_length": 3.0}}}
    changed = curate_in_process(config(tmp_path, "run", filter=threshold))  # filter and after redone

    assert {link: Path(os.readlink(link)) for link in links} == links
    assert sorted(p.name for p in full.iterdir()) == ["plan.parquet"]
    assert (full / "plan.parquet").read_text() == "a person's file"
    assert not any(empty.iterdir())
    for link in links:
        link.unlink()
    assert (run / "filter" / "docs" / "folder.parquet" / "notes.txt").read_text() == "a person's file"
    (run / "filter" / "docs" / "folder.parquet" / "notes.txt").unlink()
    (run / "filter" / "docs" / "folder.parquet").rmdir()
    fresh = curate_in_process(config(tmp_path, "fresh", filter=threshold))
    assert str(changed).replace("/run/", "/fresh/") == str(fresh)
    assert stage_outputs(run) == stage_outputs(tmp_path / "fresh")
