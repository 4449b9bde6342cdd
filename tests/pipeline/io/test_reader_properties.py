"""Properties of the readers on random input (hypothesis), through the source stage's units: random
bytes, random Unicode of every whitespace, control and format class, random JSON nesting, in JSON
lines, text folders and Parquet files.

- nothing raises;
- every record is accounted for: documents + quarantined = the records in the file;
- what is kept is usable: a text with a character a reader sees, no NUL, an id without a control
  character (checked against Python's own Unicode tables, not the pattern the code uses);
- a record quarantined as empty is blank by those tables;
- the same input gives the same bytes out.
"""

from __future__ import annotations

import json
import os
import tempfile
import unicodedata
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.documents import RunLayout
from tests.helpers import run_units, source_config

# Characters a reader does not see (Unicode Zs, Zl, Zp, Cc, Cf), and the ones near them that it does.
INVISIBLE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u3000\x00\x01\x1b\x7f\x9f"
INVISIBLE += "\u00ad\u200b\u200c\u200d\u200e\u2060\u2066\ufeff"
NEAR = "a.\u0301\u00e9\u4e2d\U0001f600\ufffd"
CHARS = st.one_of(
    st.sampled_from(INVISIBLE),
    st.sampled_from(NEAR),
    st.characters(blacklist_categories=("Cs",)),  # any character a UTF-8 file can hold
)
TEXTS = st.text(CHARS, max_size=12)
INVISIBLE_TEXTS = st.text(st.sampled_from(INVISIBLE), min_size=1, max_size=4)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
)
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "text": st.one_of(TEXTS, INVISIBLE_TEXTS, JSON_VALUES),
        "id": st.one_of(TEXTS, st.integers(), JSON_VALUES),
        "url": JSON_VALUES,
        "more": JSON_VALUES,
    },
)


def _blank(text: str) -> bool:
    return all(unicodedata.category(c) in ("Zs", "Zl", "Zp", "Cc", "Cf") for c in text)


def _run(folder: Path, reader: str, run_dir: Path, **source) -> tuple[dict, dict[str, bytes]]:
    """The source stage's units over ``folder``: the summed ledger, and every file written."""
    config = source_config(run_dir, [{"name": "s", "reader": reader, "paths": [str(folder)], **source}])
    parts = run_units(config)
    ledger = {"in": 0, "out": 0, "quarantined": 0}
    for part in parts:
        ledger["in"] += part["ledger"]["docs_in"]
        ledger["out"] += part["ledger"]["docs_out"]
        ledger["quarantined"] += sum(part["ledger"]["quarantined"].values())
    stage = RunLayout(config.run_dir).stage("source")
    written = {
        str(p.relative_to(stage.root)): p.read_bytes()
        for folder in (stage.docs, stage.quarantine)
        for p in sorted(folder.glob("*.parquet"))
    }
    return ledger, written


def _frames(written: dict[str, bytes]) -> tuple[pl.DataFrame, pl.DataFrame]:
    def read(prefix: str) -> pl.DataFrame:
        frames = [pl.read_parquet(data) for name, data in written.items() if name.startswith(prefix)]
        return pl.concat(frames) if frames else pl.DataFrame({"id": [], "text": [], "reason": [], "line": []})

    return read("docs/"), read("quarantine/")


def _check(folder: Path, reader: str, records: int, **source) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run twice; check the ledger, what is kept, and that both runs wrote the same bytes."""
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        ledger, written = _run(folder, reader, Path(one), **source)
        again = _run(folder, reader, Path(two), **source)
    assert ledger == {"in": records, "out": ledger["out"], "quarantined": records - ledger["out"]}
    assert again == (ledger, written)
    docs, quarantine = _frames(written)
    assert docs.height == ledger["out"] and quarantine.height == ledger["quarantined"]
    for doc_id, text in docs.select("id", "text").iter_rows():
        assert not _blank(text) and "\x00" not in text, text
        assert not any(unicodedata.category(c) == "Cc" for c in doc_id), doc_id
    return docs, quarantine


def _line(value: dict, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode()


JSONL_LINES = st.lists(
    st.one_of(
        st.tuples(RECORDS, st.booleans()).map(lambda r: _line(*r)),  # a JSON object, \\u-escaped or raw
        st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),  # random bytes
        TEXTS.map(lambda t: t.replace("\n", "").encode()),  # random Unicode
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),  # a JSON value, not an object
    ),
    max_size=12,
)


@settings(max_examples=25)
@given(first=RECORDS, lines=JSONL_LINES, with_id=st.booleans())
def test_jsonl_of_random_lines_accounts_for_every_record_and_keeps_only_usable_ones(first, lines, with_id):
    # The first line is a JSON object, so the file is read as JSON lines (not one JSON document).
    lines = [_line(first, True), *lines]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        (folder / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        records = sum(1 for line in lines if line.strip())
        _, quarantine = _check(folder, "jsonl", records, **({"id_field": "id"} if with_id else {}))
    originals = {i: line for i, line in enumerate(lines, 1)}
    for line_no in quarantine.filter(pl.col("reason") == "empty_text")["line"]:
        assert _blank(json.loads(originals[line_no])["text"])


@settings(max_examples=30)
@given(
    files=st.lists(st.one_of(st.binary(max_size=24), TEXTS.map(str.encode)), min_size=1, max_size=8),
    names=st.lists(st.text(CHARS.filter(lambda c: c not in "/\x00"), max_size=4), min_size=8, max_size=8),
    bad_name=st.booleans(),
)
def test_a_text_folder_of_random_files_accounts_for_every_file(files, names, bad_name):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        for i, data in enumerate(files):
            (folder / f"{i:02d}{names[i]}.txt").write_bytes(data)
        if bad_name:  # a name that is not UTF-8
            with open(os.path.join(os.fsencode(folder), b"\xff\xfe.txt"), "wb") as handle:
                handle.write(b"text")
        _check(folder, "text", len(files) + bad_name)


def _unchecked(values: list[bytes | None]) -> pa.Array:
    """A string array of any bytes (Parquet writers do not check UTF-8)."""
    binary = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(binary), binary.buffers(), binary.null_count)


LAYOUTS = {
    "string": lambda a: a,
    "large_string": lambda a: a.cast(pa.large_string()),
    "string_view": lambda a: a.cast(pa.string_view()),
    "dictionary": lambda a: a.dictionary_encode(),
}
CELLS = st.one_of(st.none(), TEXTS.map(str.encode), st.binary(max_size=12))


@settings(max_examples=30)
@given(
    rows=st.lists(st.tuples(CELLS, CELLS), min_size=1, max_size=10),
    text_layout=st.sampled_from(sorted(LAYOUTS)),
    id_layout=st.sampled_from(sorted(LAYOUTS)),
    with_id=st.booleans(),
)
def test_parquet_of_random_strings_in_any_layout_accounts_for_every_row(rows, text_layout, id_layout, with_id):
    texts, ids = [r[0] for r in rows], [r[1] for r in rows]
    table = pa.table({"text": LAYOUTS[text_layout](_unchecked(texts)), "id": LAYOUTS[id_layout](_unchecked(ids))})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        pq.write_table(table, folder / "a.parquet")
        _, quarantine = _check(folder, "parquet", len(rows), **({"id_field": "id"} if with_id else {}))
    for line_no in quarantine.filter(pl.col("reason") == "empty_text")["line"]:
        assert _blank(texts[line_no - 1].decode())
