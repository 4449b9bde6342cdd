"""Bad input is quarantined with file, line or offset and reason; the run goes on; nothing is lost."""

from __future__ import annotations

import functools
import gzip
import io
import json
import os

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from pipeline.formats.documents import RunLayout
from pipeline.formats.ledger import Ledger, LedgerError
from pipeline.io.records import ReadLimits
from pipeline.io.warc import read_warc
from pipeline.stages.shard import check_stage_outputs
from pipeline.stages.source import drop_repeated_ids
from tests.helpers import html_page, run_units, source_config, write_jsonl, write_parquet_file, write_warc


def quarantine_of(config) -> pl.DataFrame:
    return pl.read_parquet(RunLayout(config.run_dir).stage("source").quarantine / "*.parquet")


def run_jsonl(tmp_path, lines, name="in.jsonl", compress=None, **source):
    path = write_jsonl(tmp_path / name, lines, compress)
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(path)], **source}])
    parts = run_units(config)
    check_stage_outputs("source", RunLayout(config.run_dir).stage("source"), parts)
    return config, parts[0]["ledger"], path


GOOD = {"text": "a good document"}


@pytest.mark.parametrize(
    "bad_line, reason",
    [
        ('{"text": "unterminated', "invalid_json"),
        (b'{"text": "caf\xe9 au lait"}', "invalid_utf8"),
        ('{"body": "no text field"}', "missing_text"),
        ('{"text": 42}', "text_not_string"),
        ('{"text": ["a", "list"]}', "text_not_string"),
        ('{"text": null}', "missing_text"),
        ('{"text": "   \\n\\t "}', "empty_text"),
        ('{"text": "nul \\u0000 inside"}', "nul_bytes"),
        (b'{"text": "raw \x00 byte"}', "nul_bytes"),
        ('["not", "an", "object"]', "not_an_object"),
    ],
)
def test_each_bad_record_is_quarantined_with_its_line_and_the_run_goes_on(tmp_path, bad_line, reason):
    config, ledger, path = run_jsonl(tmp_path, [GOOD, bad_line, GOOD])
    assert ledger == {"stage": "source", "docs_in": 3, "docs_out": 2, "removed": {}, "quarantined": {reason: 1}}
    record = quarantine_of(config).row(0, named=True)
    assert record["reason"] == reason and record["line"] == 2 and record["file"] == str(path)
    assert record["offset"] == len(json.dumps(GOOD)) + 1
    assert record["sample"] is not None


def test_a_50_mb_record_is_quarantined_without_reading_it_whole(tmp_path):
    huge = json.dumps({"text": "x" * (50 * 1024 * 1024)})
    config, ledger, _ = run_jsonl(tmp_path, [GOOD, huge, GOOD])
    assert ledger["quarantined"] == {"too_large": 1} and ledger["docs_out"] == 2
    record = quarantine_of(config).row(0, named=True)
    assert record["line"] == 2 and "50" not in record["sample"][:5]
    assert "more than" in record["detail"]


def test_a_record_over_the_configured_text_limit_is_quarantined(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"text": "y" * 5000}, GOOD])
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(path)]}], max_doc_bytes=4096)
    assert run_units(config)[0]["ledger"]["quarantined"] == {"too_large": 1}


@pytest.mark.parametrize("suffix", ["gz", "zst"])
def test_a_truncated_compressed_file_keeps_what_was_read_and_quarantines_the_break(tmp_path, suffix):
    # More than one zstd block (128 KiB): a truncated block yields nothing, the blocks before it do.
    lines = [json.dumps({"text": f"document {i} " + "word " * 50}) for i in range(2000)]
    raw = "\n".join(lines).encode()
    data = gzip.compress(raw, mtime=0) if suffix == "gz" else zstandard.ZstdCompressor().compress(raw)
    path = tmp_path / f"cut.jsonl.{suffix}"
    path.write_bytes(data[: len(data) // 2])
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(path)]}])
    ledger = run_units(config)[0]["ledger"]
    assert ledger["quarantined"] == {"truncated_file": 1}
    assert 0 < ledger["docs_out"] < 2000
    record = quarantine_of(config).row(0, named=True)
    assert record["line"] > ledger["docs_out"] and "EOFError" in record["detail"]


def test_a_file_that_is_not_gzip_and_a_dangling_link_are_quarantined_and_others_are_read(tmp_path):
    folder = tmp_path / "in"
    write_jsonl(folder / "good.jsonl", [GOOD, GOOD])
    (folder / "fake.jsonl.gz").write_bytes(b"this is not gzip data")
    os.symlink(folder / "missing.jsonl", folder / "gone.jsonl")
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(folder / "*.jsonl*")]}])
    parts = run_units(config)
    total = check_stage_outputs("source", RunLayout(config.run_dir).stage("source"), parts)
    assert total.docs_out == 2 and total.quarantined == {"unreadable_file": 2}
    assert sorted(quarantine_of(config)["file"].to_list()) == [
        str(folder / "fake.jsonl.gz"),
        str(folder / "gone.jsonl"),
    ]


def test_invalid_utf8_text_file_and_corrupt_parquet_are_quarantined(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ok.txt").write_text("fine")
    (notes / "bad.txt").write_bytes(b"caf\xe9")
    config = source_config(tmp_path, [{"name": "t", "reader": "text", "paths": [str(notes)]}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {"invalid_utf8": 1}
    assert quarantine_of(config)["file"].to_list() == [str(notes / "bad.txt")]

    write_parquet_file(tmp_path / "p" / "ok.parquet", {"text": ["x", "y"]})
    (tmp_path / "p" / "broken.parquet").write_bytes(b"PAR1 garbage")
    config = source_config(tmp_path / "second", [{"name": "p", "reader": "parquet", "paths": [str(tmp_path / "p")]}])
    parts = run_units(config)
    assert sum(p["ledger"]["docs_out"] for p in parts) == 2
    assert [p["ledger"]["quarantined"] for p in parts] == [{"unreadable_file": 1}, {}]


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.61, 0.9])
def test_a_truncated_warc_keeps_the_records_before_the_break(tmp_path, cut):
    """warcio reads truncated files silently: the cut may fall inside a record's payload, inside
    its headers, or between gzip members; each must show as one truncated_file record."""
    pages = [
        (f"https://site.example/{i}", "text/html", html_page(f"Page {i}", [f"Paragraph {i} " * 30])) for i in range(20)
    ]
    whole = write_warc(tmp_path / "w.warc.gz", pages).read_bytes()
    path = tmp_path / "cut" / "w.warc.gz"
    path.parent.mkdir()
    path.write_bytes(whole[: int(len(whole) * cut)])
    config = source_config(tmp_path, [{"name": "w", "reader": "warc", "paths": [str(path)]}])
    ledger = run_units(config)[0]["ledger"]
    assert 0 < ledger["docs_out"] < 20
    assert ledger["quarantined"] == {"truncated_file": 1}
    assert quarantine_of(config)["offset"][0] > 0


def test_repeated_ids_within_a_file_are_quarantined(tmp_path):
    config, ledger, _ = run_jsonl(tmp_path, [{"id": 1, "text": "a"}, {"id": 1, "text": "b"}], id_field="id")
    assert ledger["quarantined"] == {"duplicate_id": 1}


def test_the_ledger_check_fails_loudly_on_a_mismatch(tmp_path):
    with pytest.raises(LedgerError, match="10 documents in"):
        Ledger("filter", docs_in=10, docs_out=7, removed={"short": 2}).check()
    Ledger("filter", docs_in=10, docs_out=7, removed={"short": 2}, quarantined={"bad": 1}).check()

    path = write_jsonl(tmp_path / "in.jsonl", [GOOD, GOOD, GOOD])
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(path)]}])
    parts = run_units(config)
    stage = RunLayout(config.run_dir).stage("source")
    shard = stage.docs / parts[0]["shards"][0]["file"]
    pl.read_parquet(shard).head(2).write_parquet(shard)  # a shard that lost a document
    with pytest.raises(LedgerError, match="files hold 2"):
        check_stage_outputs("source", stage, parts)


def warc_rows(path) -> list[dict]:
    return [row for batch in read_warc(path) for row in batch.to_pylist()]


def _small_warc(gz: bool) -> tuple[bytes, list[int], list[int]]:
    """A WARC of warcinfo, then request + text response pairs; each record's end offset, and
    whether it is a document (1) or not (0)."""
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=gz)
    ends, docs = [], []

    def add(record, is_doc):
        writer.write_record(record)
        ends.append(buffer.tell())
        docs.append(is_doc)

    add(writer.create_warcinfo_record("w.warc", {"software": "tests"}), 0)
    for i in range(3):
        url = f"https://site.example/{i}"
        add(writer.create_warc_record(url, "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n")), 0)
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/plain")], protocol="HTTP/1.1")
        add(
            writer.create_warc_record(
                url, "response", payload=io.BytesIO(f"Page {i} text. ".encode() * 4), http_headers=headers
            ),
            1,
        )
    return buffer.getvalue(), ends, docs


@pytest.mark.parametrize("gz", [False, True])
def test_a_warc_cut_at_any_byte_keeps_the_whole_records_and_quarantines_the_cut_once(tmp_path, gz):
    """Every cut point: the records wholly before the cut are kept; one truncated_file record at
    the cut record's offset, none where the cut falls between records (the file is whole)."""
    data, ends, is_doc = _small_warc(gz)
    path = tmp_path / ("w.warc.gz" if gz else "w.warc")
    wrong = []
    near_ends = {cut for end in ends for cut in range(end - 8, end + 9)}
    for cut in sorted(near_ends | set(range(1, len(data), 5))):
        if not 0 < cut <= len(data):
            continue
        path.write_bytes(data[:cut])
        rows = warc_rows(path)
        kept = [r for r in rows if r["reason"] is None]
        bad = [(r["reason"], r["offset"]) for r in rows if r["reason"] is not None]
        whole = [end for end in ends if end <= cut]
        expected_bad = [] if cut in ends else [("truncated_file", whole[-1] if whole else 0)]
        if len(kept) != sum(d for end, d in zip(ends, is_doc) if end <= cut) or bad != expected_bad:
            wrong.append((cut, len(kept), bad))
    assert len(data) > 1000 and wrong == []


def test_a_whole_uncompressed_warc_has_no_quarantine_and_garbage_after_it_is_unreadable(tmp_path):
    data, ends, _ = _small_warc(gz=False)
    path = tmp_path / "w.warc"
    path.write_bytes(data)
    rows = warc_rows(path)
    assert [r["reason"] for r in rows] == [None, None, None]
    path.write_bytes(data + b"this is not a record\n")
    bad = [r for r in warc_rows(path) if r["reason"]]
    assert [(r["reason"], r["offset"]) for r in bad] == [("unreadable_file", len(data))]


def test_a_byte_order_mark_at_the_start_of_a_file_is_dropped(tmp_path):
    path = tmp_path / "in" / "a.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\xef\xbb\xbf" + b'{"text": "first"}\n{"text": "second"}\n')
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_bytes(b"\xef\xbb\xbfA note.")
    config = source_config(
        tmp_path,
        [
            {"name": "j", "reader": "jsonl", "paths": [str(path)]},
            {"name": "t", "reader": "text", "paths": [str(tmp_path / "notes")]},
        ],
    )
    parts = run_units(config)
    assert [p["ledger"]["docs_out"] for p in parts] == [2, 1]
    assert [p["ledger"]["quarantined"] for p in parts] == [{}, {}]
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("source").docs / "*.parquet").sort("id")
    assert docs["text"].to_list() == ["first", "second", "A note."]


def test_an_empty_or_nul_text_file_is_quarantined_under_its_own_name(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ok.txt").write_text("fine")
    (notes / "empty.txt").write_bytes(b"")
    (notes / "nul.txt").write_bytes(b"a\x00b")
    config = source_config(tmp_path, [{"name": "t", "reader": "text", "paths": [str(notes)]}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {"empty_text": 1, "nul_bytes": 1}
    bad = quarantine_of(config).sort("file")
    assert bad.select("file", "reason").rows() == [
        (str(notes / "empty.txt"), "empty_text"),
        (str(notes / "nul.txt"), "nul_bytes"),
    ]


@pytest.mark.parametrize("reader", ["text", "jsonl"])
def test_a_file_whose_name_is_not_utf8_is_quarantined_and_the_others_are_read(tmp_path, reader):
    folder = tmp_path / "in"
    folder.mkdir()
    suffix = ".txt" if reader == "text" else ".jsonl"
    body = b"A document." if reader == "text" else b'{"text": "A document."}\n'
    (folder / f"ok{suffix}").write_bytes(body)
    bad_name = os.path.join(os.fsencode(folder), b"caf\xe9" + suffix.encode())
    with open(bad_name, "wb") as handle:
        handle.write(body)
    config = source_config(tmp_path, [{"name": "s", "reader": reader, "paths": [str(folder)]}])
    parts = run_units(config)
    total = check_stage_outputs("source", RunLayout(config.run_dir).stage("source"), parts)
    assert (total.docs_in, total.docs_out, total.quarantined) == (2, 1, {"invalid_file_name": 1})
    record = quarantine_of(config).row(0, named=True)
    assert record["file"] == str(folder) + "/caf\\xe9" + suffix and "rename" in record["detail"]
    assert sorted(f["path"] for p in parts for f in p["files"]) == [
        str(folder) + "/caf\\xe9" + suffix,
        str(folder / f"ok{suffix}"),
    ]


@pytest.mark.parametrize("reader", ["jsonl", "text"])
def test_dangling_links_and_link_loops_in_a_folder_are_quarantined_under_the_link(tmp_path, reader):
    folder = tmp_path / "in"
    folder.mkdir()
    suffix = ".jsonl" if reader == "jsonl" else ".txt"
    (folder / f"ok{suffix}").write_bytes(b'{"text": "fine"}\n' if reader == "jsonl" else b"fine")
    os.symlink(folder / f"missing{suffix}", folder / f"gone{suffix}")
    os.symlink(folder / f"loop-b{suffix}", folder / f"loop-a{suffix}")
    os.symlink(folder / f"loop-a{suffix}", folder / f"loop-b{suffix}")
    config = source_config(tmp_path, [{"name": "s", "reader": reader, "paths": [str(folder)]}])
    parts = run_units(config)
    total = check_stage_outputs("source", RunLayout(config.run_dir).stage("source"), parts)
    assert (total.docs_in, total.docs_out, total.quarantined) == (4, 1, {"unreadable_file": 3})
    assert sorted(quarantine_of(config)["file"].to_list()) == [
        str(folder / f"{name}{suffix}") for name in ("gone", "loop-a", "loop-b")
    ]


def _unchecked_strings(values: list[bytes | None], large: bool = False) -> pa.Array:
    """A string array holding exactly these bytes, valid UTF-8 or not (as a careless writer makes)."""
    binary = pa.array(values, pa.large_binary() if large else pa.binary())
    return pa.Array.from_buffers(
        pa.large_string() if large else pa.string(), len(binary), binary.buffers(), null_count=binary.null_count
    )


def test_parquet_rows_with_invalid_utf8_are_quarantined_and_the_rest_is_read(tmp_path):
    ids = _unchecked_strings([b"a", b"b", b"c\xff", b"d", b"e"])
    text = _unchecked_strings([b"good one", b"caf\xe9 au lait", b"good three", b"good four", b"good five"], large=True)
    info = pa.StructArray.from_arrays([_unchecked_strings([b"u1", b"u2", b"u3", b"u4\xfe", b"u5"])], names=["url"])
    path = tmp_path / "in" / "p.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"id": ids, "text": text, "info": info}), path)
    config = source_config(
        tmp_path, [{"name": "p", "reader": "parquet", "paths": [str(path)], "id_field": "id"}], batch_docs=3
    )
    parts = run_units(config)
    total = check_stage_outputs("source", RunLayout(config.run_dir).stage("source"), parts)
    assert (total.docs_in, total.docs_out, total.quarantined) == (5, 2, {"invalid_utf8": 3})
    bad = quarantine_of(config).sort("line")
    assert bad.select("line", "detail").rows() == [
        (2, "invalid UTF-8 in column 'text'"),
        (3, "invalid UTF-8 in column 'id'"),
        (4, "invalid UTF-8 in column 'info'"),
    ]
    assert bad["sample"][0] == "caf\ufffd au lait"
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("source").docs / "*.parquet").sort("id")
    assert docs["id"].to_list() == ["p/a", "p/e"]


def test_an_id_in_two_input_files_is_kept_from_the_first_and_quarantined_in_the_others(tmp_path):
    folder = tmp_path / "two"
    write_jsonl(folder / "a.jsonl", [{"id": 1, "text": "a1"}, {"id": 2, "text": "a2"}])
    write_jsonl(folder / "b.jsonl", [{"id": 2, "text": "b2"}, {"id": 3, "text": "b3"}, {"id": 1, "text": "b1"}])
    write_jsonl(folder / "c.jsonl", [{"id": 3, "text": "c3"}, {"id": 4, "text": "c4"}])
    config = source_config(tmp_path / "x", [{"name": "s", "reader": "jsonl", "paths": [str(folder)], "id_field": "id"}])
    stage = RunLayout(config.run_dir).stage("source")
    parts = drop_repeated_ids(stage, run_units(config), config.sources)
    total = check_stage_outputs("source", stage, parts)
    assert (total.docs_in, total.docs_out, total.quarantined) == (7, 4, {"duplicate_id": 3})
    docs = pl.read_parquet(stage.docs / "*.parquet").sort("id")
    assert docs.select("id", "text").rows() == [("s/1", "a1"), ("s/2", "a2"), ("s/3", "b3"), ("s/4", "c4")]
    bad = quarantine_of(config).sort("file", "sample")
    assert bad.select("file", "sample").rows() == [
        (str(folder / "b.jsonl"), "b1"),
        (str(folder / "b.jsonl"), "b2"),
        (str(folder / "c.jsonl"), "c3"),
    ]
    assert bad["detail"][2] == f"id s/3 is kept from an earlier input file: {folder / 'b.jsonl'}"
    assert [p["ledger"]["quarantined"] for p in parts] == [{}, {"duplicate_id": 2}, {"duplicate_id": 1}]
    assert parts[1]["by_source"]["s"]["docs_out"] == 1

    # A re-run reads the units that lost documents again and comes to the same bytes.
    before = {p.name: p.read_bytes() for p in sorted(stage.root.rglob("*.parquet"))}
    again = drop_repeated_ids(stage, run_units(config), config.sources)
    assert again == parts
    assert {p.name: p.read_bytes() for p in sorted(stage.root.rglob("*.parquet"))} == before


def test_repeated_warc_record_ids_across_files_are_quarantined(tmp_path):
    data, _, _ = _small_warc(gz=True)
    folder = tmp_path / "crawl"
    folder.mkdir()
    (folder / "a.warc.gz").write_bytes(data)
    (folder / "b.warc.gz").write_bytes(data)  # the same records again
    config = source_config(tmp_path, [{"name": "w", "reader": "warc", "paths": [str(folder)]}])
    stage = RunLayout(config.run_dir).stage("source")
    parts = drop_repeated_ids(stage, run_units(config), config.sources)
    total = check_stage_outputs("source", stage, parts)
    assert (total.docs_in, total.docs_out, total.quarantined) == (6, 3, {"duplicate_id": 3})
    assert set(quarantine_of(config)["file"].to_list()) == {str(folder / "b.warc.gz")}


def test_a_pretty_printed_json_array_file_is_read_as_records(tmp_path):
    records = [
        {"id": "a", "text": "first"},
        {"id": "b", "text": "second"},
        ["not", "an", "object"],
        {"id": "c", "text": "third"},
    ]
    path = tmp_path / "in" / "data.json"
    path.parent.mkdir()
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(records, indent=2).encode())
    single = tmp_path / "in" / "one.json"
    single.write_text(json.dumps({"id": "d", "text": "a single object"}, indent=2))
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "in")]}])
    parts = run_units(config)
    total = check_stage_outputs("source", RunLayout(config.run_dir).stage("source"), parts)
    assert (total.docs_in, total.docs_out, total.quarantined) == (5, 4, {"not_an_object": 1})
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("source").docs / "*.parquet").sort("id")
    assert docs.select("id", "text").rows() == [
        ("s/data.json:1", "first"),
        ("s/data.json:2", "second"),
        ("s/data.json:4", "third"),
        ("s/one.json:1", "a single object"),
    ]
    bad = quarantine_of(config).row(0, named=True)
    assert (bad["line"], bad["sample"]) == (3, '["not","an","object"]')


def test_a_json_document_over_the_bound_or_broken_is_quarantined_once(tmp_path, monkeypatch):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "big.json").write_text(json.dumps([{"text": f"record {i}"} for i in range(200)], indent=1))
    (folder / "broken.json").write_text('[\n  {"text": "one"},\n  {"text": "two"\n')
    # A JSON-lines file whose first record is broken is still read line by line.
    (folder / "lines.jsonl").write_text('{"text": "unterminated\n{"text": "fine"}\n')
    monkeypatch.setattr(
        "pipeline.stages.source.ReadLimits", functools.partial(ReadLimits, max_json_document_bytes=1000)
    )
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(folder)]}])
    parts = run_units(config)
    assert [p["ledger"]["quarantined"] for p in parts] == [{"too_large": 1}, {"invalid_json": 1}, {"invalid_json": 1}]
    assert [p["ledger"]["docs_out"] for p in parts] == [0, 0, 1]
    bad = quarantine_of(config).sort("file")
    assert "jq -c" in bad["detail"][0] and "neither JSON lines nor one JSON document" in bad["detail"][1]


# Texts with no character but whitespace (Zs, Zl, Zp, and the controls \t\n\v\f\r\x1c-\x1f\x85)
# or control and format characters (Cc, Cf): nothing a reader sees.
BLANK_TEXTS = ["\x0b", "\x85", "\x1c\x1d\x1e\x1f", "\u200b\u2060 \u2028\u2029", "\x0c\u00a0\u3000\x7f", "\u00ad\x01"]
VISIBLE_TEXTS = ["\x0bx", "\u200b\u0301", "\x1f."]  # one character a reader sees each


@pytest.mark.parametrize("reader", ["jsonl", "parquet", "text", "wet"])
def test_a_text_of_only_whitespace_control_or_format_characters_is_empty_in_every_reader(tmp_path, reader):
    texts = BLANK_TEXTS + VISIBLE_TEXTS
    folder = tmp_path / "in"
    if reader == "jsonl":
        write_jsonl(folder / "a.jsonl", [{"text": t} for t in texts])
    elif reader == "parquet":
        write_parquet_file(folder / "a.parquet", {"text": texts})
    elif reader == "text":
        folder.mkdir()
        for i, text in enumerate(texts):
            (folder / f"{i:02d}.txt").write_text(text, newline="")
    else:
        write_warc(
            folder / "a.warc.wet.gz", [], conversions=[(f"https://e.example/{i}", t) for i, t in enumerate(texts)]
        )
    config = source_config(tmp_path, [{"name": "s", "reader": reader, "paths": [str(folder)]}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {"empty_text": len(BLANK_TEXTS)}
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("source").docs / "*.parquet")
    assert sorted(docs["text"].to_list()) == sorted(VISIBLE_TEXTS)


CONTROL_IDS = ["a\x00b", "tab\there", "line\nbreak", "esc\x1b[31m", "next\x85line", "del\x7f"]


@pytest.mark.parametrize("reader", ["jsonl", "parquet"])
def test_an_id_holding_a_nul_or_other_control_character_is_quarantined_as_invalid_id(tmp_path, reader):
    ids = ["fine", *CONTROL_IDS, "zero\u200bwidth"]  # a format character is not a control: kept
    texts = [f"document {i}" for i in range(len(ids))]
    if reader == "jsonl":
        path = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in zip(ids, texts)])
    else:
        path = write_parquet_file(tmp_path / "in.parquet", {"id": ids, "text": texts})
    config = source_config(tmp_path, [{"name": "s", "reader": reader, "paths": [str(path)], "id_field": "id"}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {"invalid_id": len(CONTROL_IDS)}
    bad = quarantine_of(config).sort("line")
    assert bad["line"].to_list() == list(range(2, 2 + len(CONTROL_IDS)))
    assert bad["detail"][0].startswith("id 's/a\\x00b' holds the control character U+0000")
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("source").docs / "*.parquet")
    assert sorted(docs["id"].to_list()) == ["s/fine", "s/zero\u200bwidth"]


def test_a_text_file_whose_name_holds_a_control_character_is_quarantined_as_invalid_id(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ok.txt").write_text("fine")
    (notes / "tab\there.txt").write_text("a note")
    (notes / "bell\x07.txt").write_text("another note")
    config = source_config(tmp_path, [{"name": "t", "reader": "text", "paths": [str(notes)]}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {"invalid_id": 2}
    assert sorted(quarantine_of(config)["file"].to_list()) == [
        str(notes / "bell\x07.txt"),
        str(notes / "tab\there.txt"),
    ]


def test_warcio_warnings_never_reach_stderr_and_are_quarantined_at_their_offset(tmp_path, capfd):
    """A record longer than its Content-Length leaves bytes where the blank line after it should
    be: warcio wrote them (kilobytes) to stderr and read on. They are one quarantine record at
    warcio's offset; every document is still read."""
    data, ends, _ = _small_warc(gz=False)
    stray = b"x" * 5000 + b"\r\n"
    path = tmp_path / "w.warc"
    at = ends[2] - 4  # the first response's block ends here, before its \r\n\r\n
    path.write_bytes(data[:at] + stray + data[at:])
    rows = warc_rows(path)
    assert capfd.readouterr().err == ""
    assert [r["reason"] for r in rows if r["reason"] is None] == [None, None, None]
    bad = [r for r in rows if r["reason"] is not None]
    assert [(r["reason"], r["offset"]) for r in bad] == [("bytes_between_records", at)]
    assert bad[0]["sample"].startswith("b'xxxx") and len(bad[0]["sample"]) <= 200


def test_a_source_past_its_quarantine_limit_fails_naming_the_share_reasons_and_a_line(tmp_path, monkeypatch):
    from pipeline.stages.source import QuarantineError, check_quarantine

    bad_lines = [b"{not json"] * 6 + [json.dumps({"title": "no text"}).encode()] * 2
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "fine"}, *bad_lines, {"text": "fine too"}])
    write_jsonl(tmp_path / "ok" / "b.jsonl", [{"text": "good"}])
    sources = [
        {"name": "ok", "reader": "jsonl", "paths": [str(tmp_path / "ok")]},
        {"name": "bad", "reader": "jsonl", "paths": [str(tmp_path / "in")]},
    ]
    config = source_config(tmp_path, sources)
    run_units(config)
    stage = RunLayout(config.run_dir).stage("source")
    own_limit = source_config(tmp_path, [sources[0], {**sources[1], "max_quarantine_fraction": 0.8}])
    turned_off = source_config(tmp_path, sources, max_quarantine_fraction=1.0)
    lower = source_config(tmp_path, sources, max_quarantine_fraction=0.1)
    monkeypatch.chdir(tmp_path)  # files are named as from where the user runs the command
    with pytest.raises(QuarantineError) as raised:
        check_quarantine(stage, config)
    assert str(raised.value) == (
        "source 'bad': 8 of its 10 records were quarantined (80.0%), more than max_quarantine_fraction = 0.5; "
        "reasons: invalid_json 6 (e.g. in/a.jsonl:2), missing_text 2 (e.g. in/a.jsonl:8); fix the inputs (or "
        "the source's reader), or raise max_quarantine_fraction in its [[sources]] table (1.0 turns the check "
        "off) and run again: the source stage is kept"
    )
    # The source's own limit lets it pass, and so does 1.0 (the check off); a lower run limit
    # does not fail the source with nothing quarantined.
    check_quarantine(stage, own_limit)
    check_quarantine(stage, turned_off)
    with pytest.raises(QuarantineError, match="source 'bad'.* more than max_quarantine_fraction = 0.1"):
        check_quarantine(stage, lower)
