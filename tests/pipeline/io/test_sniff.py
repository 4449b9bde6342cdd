"""Telling input files apart by their first bytes, and stopping a source whose reader does not fit
its files before any work (pipeline.io.sniff, pipeline.stages.source.check_readers)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import time
import zipfile
from pathlib import Path

import pytest
import zstandard
from warcio.warcwriter import WARCWriter

from pipeline.formats.configfile import ConfigError
from pipeline.io.sniff import reader_mismatch, sniff
from pipeline.stages.source import check_readers, sniffed_files
from tests.helpers import html_page, source_config, write_jsonl, write_parquet_file, write_warc

READERS = ("jsonl", "parquet", "warc", "wet", "text")
RECORDS = [{"text": f"Document {i} says something.", "id": i} for i in range(20)]


def _plain_warc(path: Path) -> Path:
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=False)
    writer.write_record(writer.create_warcinfo_record(path.name, {"software": "tests"}))
    path.write_bytes(buffer.getvalue())
    return path


def _zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.jsonl", json.dumps(RECORDS[0]))
    return path


# name -> (how to write it, its kind and compression, the readers that take it)
FILES = {
    "crawl.warc.gz": (
        lambda p: write_warc(p, [("https://e.example/", "text/html", html_page("T", ["A page."]))]),
        ("warc", "gzip"),
        {"warc", "wet"},
    ),
    "crawl.warc": (_plain_warc, ("warc", None), {"warc", "wet"}),
    "old.arc": (
        lambda p: p.write_bytes(b"filedesc://old.arc 0.0.0.0 20240101000000 text/plain 10\n"),
        ("arc", None),
        {"warc", "wet"},
    ),
    "crawl.warc.zst": (
        lambda p: p.write_bytes(zstandard.ZstdCompressor().compress(_plain_warc(p).read_bytes())),
        ("warc", "zstd"),
        set(),
    ),
    "docs.jsonl": (lambda p: write_jsonl(p, RECORDS), ("jsonl", None), {"jsonl"}),
    "docs.jsonl.gz": (lambda p: write_jsonl(p, RECORDS, "gz"), ("jsonl", "gzip"), {"jsonl"}),
    "docs.jsonl.zst": (lambda p: write_jsonl(p, RECORDS, "zst"), ("jsonl", "zstd"), {"jsonl"}),
    "bom.jsonl": (
        lambda p: p.write_bytes(b"\xef\xbb\xbf\n\n" + json.dumps(RECORDS[0]).encode()),
        ("jsonl", None),
        {"jsonl"},
    ),
    "array.json": (lambda p: p.write_text(json.dumps(RECORDS, indent=2)), ("jsonl", None), {"jsonl"}),
    # A long first record, cut by the head: still JSON lines, and prose to the text reader.
    "long.jsonl": (lambda p: write_jsonl(p, [{"text": "word " * 5000}]), ("jsonl", None), {"jsonl", "text"}),
    "docs.parquet": (lambda p: write_parquet_file(p, {"text": ["a", "b"]}), ("parquet", None), {"parquet"}),
    "cut.parquet": (
        lambda p: p.write_bytes(write_parquet_file(p, {"text": ["a", "b"]}).read_bytes()[:-10]),
        ("parquet", None),
        {"parquet"},
    ),
    "docs.parquet.gz": (
        lambda p: p.write_bytes(gzip.compress(write_parquet_file(p, {"text": ["a"]}).read_bytes())),
        ("parquet", "gzip"),
        set(),
    ),
    "note.txt": (lambda p: p.write_text("Dear reader,\n[1] this is prose.\n"), ("text", None), {"text"}),
    "brace.txt": (lambda p: p.write_text("{not json} but a note in braces\n"), ("jsonl", None), {"jsonl", "text"}),
    "latin1.txt": (lambda p: p.write_bytes("Caf\xe9 cr\xe8me\n".encode("latin-1")), ("binary", None), {"text"}),
    "archive.zip": (_zip, ("binary", None), {"text"}),
    "docs.jsonl.bz2": (
        lambda p: p.write_bytes(bz2.compress(write_jsonl(p, RECORDS).read_bytes())),
        ("jsonl", "bz2"),
        set(),
    ),
    "empty.jsonl": (lambda p: p.write_bytes(b""), (None, None), set(READERS)),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sniff")
    written = {}
    for name, (write, _, _) in FILES.items():
        write(root / name)
        written[name] = root / name
    return written


@pytest.mark.parametrize("name", list(FILES))
def test_a_file_is_told_by_its_head_and_fits_only_the_readers_that_read_it(files, name):
    _, (kind, compression), fits = FILES[name]
    found = sniff(files[name])
    assert (found.kind, found.compression) == (kind, compression)
    misfits = {reader: reader_mismatch(reader, found, name) for reader in READERS}
    assert {reader for reader, problem in misfits.items() if problem is None} == fits, misfits


@pytest.mark.parametrize(
    "name, reader, message",
    [
        ("crawl.warc.gz", "jsonl", 'is a WARC file, not JSON lines; set reader = "warc"'),
        ("docs.jsonl.gz", "parquet", 'is JSON lines, not a Parquet file; set reader = "jsonl"'),
        ("docs.jsonl", "warc", 'is JSON lines, not a WARC file; set reader = "jsonl"'),
        ("docs.parquet", "jsonl", 'is a Parquet file, not JSON lines; set reader = "parquet"'),
        ("note.txt", "jsonl", 'is plain text, not JSON lines; set reader = "text"'),
        ("docs.jsonl", "text", 'is JSON lines, not plain text; set reader = "jsonl"'),
        ("archive.zip", "jsonl", "is binary data (it starts with bytes 50 4b 03 04"),
        ("crawl.warc.zst", "warc", "is a zstd-compressed WARC file, which warcio cannot read"),
        ("docs.jsonl.bz2", "jsonl", "is bz2-compressed, which no reader reads"),
        ("docs.parquet.gz", "parquet", "decompress it (gzip -d)"),
    ],
)
def test_a_misfit_names_what_the_file_is_and_the_fix(files, name, reader, message):
    assert message in reader_mismatch(reader, sniff(files[name]), name)


def test_json_lines_reader_needs_the_suffix_that_says_how_the_file_is_compressed(tmp_path):
    # The reader decompresses by the name: gzip bytes in a .jsonl would be read as garbage lines.
    packed = write_jsonl(tmp_path / "docs.jsonl", RECORDS, "gz")
    assert "rename it to end in .gz" in reader_mismatch("jsonl", sniff(packed), packed.name)
    plain = write_jsonl(tmp_path / "docs.jsonl.gz", RECORDS)
    assert "is not gzip-compressed, though its name ends in .gz" in reader_mismatch("jsonl", sniff(plain), plain.name)


def test_the_wrong_reader_stops_the_source_with_one_line_naming_the_file_and_the_reader(tmp_path, monkeypatch):
    for i in range(3):
        write_warc(
            tmp_path / "crawl" / f"{i}.warc.gz", [("https://e.example/", "text/html", html_page("T", ["Text."]))]
        )
    write_jsonl(tmp_path / "news" / "a.jsonl", RECORDS)
    config = source_config(
        tmp_path,
        [
            {"name": "news", "reader": "jsonl", "paths": [str(tmp_path / "news")]},
            {"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "crawl" / "*.warc.gz")]},
        ],
    )
    monkeypatch.chdir(tmp_path)  # the file is named as from where the user runs the command
    with pytest.raises(ConfigError) as raised:
        check_readers(config.sources)
    assert str(raised.value) == (
        "source 'web': crawl/0.warc.gz is a WARC file, not JSON lines; set reader = \"warc\" "
        "(3 of the 3 files checked do not fit)"
    )
    assert not (tmp_path / "run").exists()  # nothing written
    check_readers(config.sources[:1])  # the source whose reader fits passes


def test_the_check_reads_a_few_kilobytes_of_up_to_a_thousand_files(tmp_path):
    files = [write_jsonl(tmp_path / "in" / f"{i:04d}.jsonl", [{"text": "x " * 10_000}]) for i in range(1200)]
    chosen = sniffed_files(sorted(files))
    assert len(chosen) == 1000 and chosen[0] == files[0] and chosen[-1] == files[-1]
    assert len(set(chosen)) == 1000
    config = source_config(tmp_path, [{"name": "big", "reader": "jsonl", "paths": [str(tmp_path / "in")]}])
    start = time.perf_counter()
    check_readers(config.sources)
    assert time.perf_counter() - start < 5  # 1,000 heads of 8 KB, not 24 MB of text
