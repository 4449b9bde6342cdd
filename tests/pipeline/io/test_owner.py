"""pipeline.io.owner: a command writes only into a folder it made, was given empty or wrote
before, and deletes only the files it recorded writing."""

from __future__ import annotations

import pytest

from pipeline.io.owner import RECORD, ForeignFolderError, claim, remove_written, written_files
from pipeline.io.writer import write_text


def test_a_claimed_folder_records_what_the_writers_finish_and_deletes_only_that(tmp_path):
    out = claim(tmp_path / "out", "export")
    write_text("a", out / "a.txt")
    write_text("b", out / "deep" / "b.txt")
    (out / "mine.txt").write_text("a person's file")  # not through this project's writers
    (out / "deep" / "notes").mkdir()
    (out / "deep" / "notes" / "n.txt").write_text("also theirs")
    assert written_files(out) == {"a.txt", "deep/b.txt"}
    assert remove_written(out, keep=["a.txt"]) == ["deep/b.txt"]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        RECORD,
        "a.txt",
        "deep/notes/n.txt",
        "mine.txt",
    ]
    assert written_files(out) == {"a.txt"}
    claim(out, "export")  # its own folder again: taken, the other files left alone


def test_a_folder_of_other_files_or_a_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "README.md").write_text("mine")
    with pytest.raises(
        ForeignFolderError, match=r"holds files curate did not write \(README.md\); give a new or empty"
    ):
        claim(tmp_path / "x", "export")
    assert not (tmp_path / "x" / RECORD).exists()
    (tmp_path / "f").write_text("a file")
    with pytest.raises(ForeignFolderError, match="is a file, not a folder"):
        claim(tmp_path / "f", "export")
    claim(tmp_path / "empty", "export")  # new
    (tmp_path / "given").mkdir()
    claim(tmp_path / "given", "export")  # empty


def test_a_line_cut_by_a_killed_writer_names_nothing(tmp_path):
    out = claim(tmp_path / "out", "export")
    write_text("a", out / "a.txt")
    with open(out / RECORD, "a") as record:
        record.write('"half')
    assert written_files(out) == {"a.txt"}
