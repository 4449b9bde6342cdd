"""Each reader on real files the tests write, through the source stage's units."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.formats.documents import DOC_SCHEMA, RunLayout
from tests.helpers import html_page, run_units, source_config, write_jsonl, write_parquet_file, write_warc


def docs_of(config) -> pl.DataFrame:
    stage = RunLayout(config.run_dir).stage("source")
    return pl.read_parquet(stage.docs / "*.parquet").sort("id")


def quarantine_of(config) -> pl.DataFrame:
    stage = RunLayout(config.run_dir).stage("source")
    files = list(stage.quarantine.glob("*.parquet"))
    return pl.read_parquet(files).sort("file", "line", "offset") if files else pl.DataFrame()


@pytest.mark.parametrize("compress", [None, "gz", "zst"])
def test_jsonl_reader_keeps_text_id_url_and_meta(tmp_path, compress):
    suffix = {None: "", "gz": ".gz", "zst": ".zst"}[compress]
    records = [
        {"id": f"doc-{i}", "text": f"Document number {i}.", "metadata": {"url": f"https://e.com/{i}"}, "lang": "en"}
        for i in range(10)
    ]
    write_jsonl(tmp_path / "in" / f"part.jsonl{suffix}", records, compress)
    config = source_config(
        tmp_path,
        [
            {
                "name": "web",
                "reader": "jsonl",
                "paths": [str(tmp_path / "in")],
                "id_field": "id",
                "url_field": "metadata.url",
            }
        ],
    )
    parts = run_units(config)
    docs = docs_of(config)
    assert docs.schema == pl.Schema(DOC_SCHEMA)
    assert docs.height == 10 and parts[0]["ledger"]["docs_in"] == 10
    first = docs.row(0, named=True)
    assert first["id"] == "web/doc-0" and first["text"] == "Document number 0."
    assert first["source"] == "web" and first["url"] == "https://e.com/0"
    assert json.loads(first["meta"]) == {"metadata": {"url": "https://e.com/0"}, "lang": "en"}


def test_jsonl_without_ids_derives_them_from_file_and_line(tmp_path):
    write_jsonl(tmp_path / "a" / "x.jsonl", [{"text": "one"}, {"text": "two"}])
    write_jsonl(tmp_path / "b" / "x.jsonl", [{"text": "three"}])
    config = source_config(
        tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "a"), str(tmp_path / "b")]}]
    )
    run_units(config)
    assert docs_of(config)["id"].to_list() == ["s/a/x.jsonl:1", "s/a/x.jsonl:2", "s/b/x.jsonl:1"]


def test_parquet_reader_maps_columns_and_nested_fields(tmp_path):
    write_parquet_file(
        tmp_path / "in" / "p.parquet",
        {
            "doc_id": [7, 8, 9],
            "content": ["alpha text", "beta text", "gamma text"],
            "info": [{"url": "u1", "lang": "en"}, {"url": "u2", "lang": "de"}, {"url": None, "lang": "fr"}],
            "score": [0.5, 0.25, 1.0],
        },
    )
    config = source_config(
        tmp_path,
        [
            {
                "name": "pq",
                "reader": "parquet",
                "paths": [str(tmp_path / "in")],
                "text_field": "content",
                "id_field": "doc_id",
                "url_field": "info.url",
            }
        ],
    )
    run_units(config)
    docs = docs_of(config)
    assert docs["id"].to_list() == ["pq/7", "pq/8", "pq/9"]
    assert docs["url"].to_list() == ["u1", "u2", None]
    assert json.loads(docs["meta"][1]) == {"info": {"url": "u2", "lang": "de"}, "score": 0.25}


def test_parquet_reader_quarantines_a_text_column_that_is_not_string(tmp_path):
    write_parquet_file(tmp_path / "p.parquet", {"text": [1, 2, 3]})
    config = source_config(tmp_path, [{"name": "pq", "reader": "parquet", "paths": [str(tmp_path / "p.parquet")]}])
    parts = run_units(config)
    assert parts[0]["ledger"]["quarantined"] == {"text_not_string": 3}
    assert quarantine_of(config)["line"].to_list() == [1, 2, 3]


def test_warc_reader_extracts_main_text_and_accounts_for_every_content_record(tmp_path):
    article = [
        "The river flooded the valley after three days of heavy rain, officials said on Monday.",
        "Residents were moved to higher ground while engineers inspected the old stone bridge.",
    ]
    warc = write_warc(
        tmp_path / "crawl.warc.gz",
        responses=[
            ("https://news.example/flood", "text/html; charset=utf-8", html_page("Valley flood", article)),
            ("https://news.example/logo.png", "image/png", b"\x89PNG\r\n\x1a\n...."),
        ],
        conversions=[("https://news.example/wet", "Plain text of a WET conversion record.")],
    )
    config = source_config(tmp_path, [{"name": "cc", "reader": "warc", "paths": [str(warc)]}])
    parts = run_units(config)
    assert parts[0]["ledger"] == {
        "stage": "source",
        "docs_in": 3,
        "docs_out": 2,
        "removed": {},
        "quarantined": {"unsupported_content_type": 1},
    }
    docs = docs_of(config).sort("url")
    page = docs.filter(pl.col("url") == "https://news.example/flood").row(0, named=True)
    assert article[0] in page["text"] and article[1] in page["text"]
    assert "All rights reserved" not in page["text"] and "color: red" not in page["text"]
    assert page["id"].startswith("cc/urn:uuid:")
    assert json.loads(page["meta"])["http_status"] == 200
    wet = docs.filter(pl.col("url") == "https://news.example/wet").row(0, named=True)
    assert wet["text"] == "Plain text of a WET conversion record."
    bad = quarantine_of(config).row(0, named=True)
    assert bad["reason"] == "unsupported_content_type" and bad["offset"] > 0 and bad["file"] == str(warc)


def test_text_folder_reader_reads_one_document_per_file(tmp_path):
    root = tmp_path / "notes"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("First note.\nSecond line.")
    (root / "sub" / "b.txt").write_text("Nested note.")
    (root / "ignored.md").write_text("not a txt file")
    config = source_config(tmp_path, [{"name": "notes", "reader": "text", "paths": [str(root)]}])
    run_units(config)
    docs = docs_of(config)
    assert docs["id"].to_list() == ["notes/a.txt", "notes/sub/b.txt"]
    assert docs["text"].to_list() == ["First note.\nSecond line.", "Nested note."]


def test_large_input_is_cut_into_bounded_shards(tmp_path):
    write_jsonl(tmp_path / "big.jsonl", [{"text": f"doc {i}"} for i in range(2500)])
    config = source_config(
        tmp_path,
        [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "big.jsonl")]}],
        batch_docs=300,
        shard_docs=1000,
    )
    parts = run_units(config)
    assert [s["rows"] for s in parts[0]["shards"]] == [1000, 1000, 500]
    assert docs_of(config).height == 2500


CRLF_TEXT = "First line.\r\nSecond line.\r\n\r\nNew paragraph.\rOld Mac line.\n"
LF_TEXT = "First line.\nSecond line.\n\nNew paragraph.\nOld Mac line.\n"


@pytest.mark.parametrize("reader", ["jsonl", "parquet", "text", "wet"])
def test_every_reader_turns_windows_and_old_mac_line_ends_into_newlines(tmp_path, reader):
    folder = tmp_path / "in"
    if reader == "jsonl":
        write_jsonl(folder / "a.jsonl", [{"text": CRLF_TEXT}])
    elif reader == "parquet":
        write_parquet_file(folder / "a.parquet", {"text": [CRLF_TEXT]})
    elif reader == "text":
        folder.mkdir()
        (folder / "a.txt").write_bytes(CRLF_TEXT.encode())
    else:
        write_warc(folder / "a.warc.wet.gz", [], conversions=[("https://e.example/", CRLF_TEXT)])
    config = source_config(tmp_path, [{"name": "s", "reader": reader, "paths": [str(folder)]}])
    run_units(config)
    assert docs_of(config)["text"].to_list() == [LF_TEXT]


@pytest.mark.parametrize(
    "layout",
    [
        lambda values: pa.array(values).dictionary_encode(),  # as pandas categoricals are written
        lambda values: pa.array(values, pa.large_string()),
        lambda values: pa.array(values, pa.string_view()),
    ],
    ids=["dictionary", "large_string", "string_view"],
)
def test_parquet_text_and_id_columns_in_any_string_layout_are_read_as_text(tmp_path, layout):
    path = tmp_path / "p.parquet"
    texts = ["first text", "second text", "first text"]
    pq.write_table(
        pa.table({"id": layout(["a", "b", "c"]), "text": layout(texts), "tag": layout(["x", "y", "x"])}), path
    )
    assert pq.read_schema(path).field("text").type == layout(texts).type  # read back in that layout
    config = source_config(tmp_path, [{"name": "pq", "reader": "parquet", "paths": [str(path)], "id_field": "id"}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {}
    docs = docs_of(config)
    assert docs["id"].to_list() == ["pq/a", "pq/b", "pq/c"] and docs["text"].to_list() == texts
    assert [json.loads(m) for m in docs["meta"]] == [{"tag": "x"}, {"tag": "y"}, {"tag": "x"}]


def test_parquet_dictionary_text_with_invalid_utf8_quarantines_only_its_rows(tmp_path):
    values = pa.array([b"good text", b"caf\xe9 au lait"], pa.binary())
    dictionary = pa.Array.from_buffers(pa.string(), len(values), values.buffers())  # unchecked UTF-8
    text = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 0], pa.int32()), dictionary)
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": text}), path)
    config = source_config(tmp_path, [{"name": "pq", "reader": "parquet", "paths": [str(path)]}])
    assert run_units(config)[0]["ledger"]["quarantined"] == {"invalid_utf8": 1}
    assert quarantine_of(config)["line"].to_list() == [2] and docs_of(config).height == 3
