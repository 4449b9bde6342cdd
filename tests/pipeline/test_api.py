"""The library's Python API (pipeline.api), called as a user calls it: a config from a TOML file or
a dict, the filter and dedup stages on a polars frame, and a run directory's results."""

from __future__ import annotations

import polars as pl
import pytest

import pipeline.api as api
from pipeline.api import ConfigError, dedup_documents, filter_documents, load_config, read_run
from tests.helpers import source_run, write_jsonl

HARBOUR = (
    "The old harbour town sits at the mouth of a wide river, and its narrow streets climb the hill from the "
    "water. Fishing boats still leave before dawn, and the market opens when they return with the morning "
    "catch. Visitors come in the summer to walk along the cliffs, to eat in the small restaurants, and to "
    "watch the sun set over the bay. In the winter the town is quiet, and the people who live there all year "
    "know each other by name."
)
LIBRARY = (
    "Our library has moved to a new building on the main square, next to the town hall and the post office. "
    "The reading room is larger than before, with tall windows that let in the light for most of the day. "
    "Children have their own floor with books, games and a corner for stories on Saturday mornings. The old "
    "building will become a museum of local history, and it is expected to open in the spring of next year."
)


def test_every_public_name_is_listed_and_documented_with_an_example():
    assert sorted(api.__all__) == sorted(
        ["ConfigError", "Outcome", "RunConfig", "RunResults", "dedup_documents", "filter_documents", "load_config",
         "read_run", "repair_documents"]
    )  # fmt: skip
    for name in ["dedup_documents", "filter_documents", "load_config", "read_run", "repair_documents", "Outcome",
                 "RunResults"]:  # fmt: skip
        assert "Example::" in getattr(api, name).__doc__, name


def test_a_config_loads_from_a_toml_file_or_a_dict_the_same(tmp_path):
    write_jsonl(tmp_path / "books" / "a.jsonl", [{"text": HARBOUR}])
    keys = {"run_dir": str(tmp_path / "run"), "sources": [{"name": "books", "reader": "jsonl",
            "paths": [str(tmp_path / "books")]}], "dedup": {"threshold": 0.7}}  # fmt: skip
    (tmp_path / "run.toml").write_text(
        f'run_dir = "{tmp_path / "run"}"\n[[sources]]\nname = "books"\nreader = "jsonl"\n'
        f'paths = ["{tmp_path / "books"}"]\n[dedup]\nthreshold = 0.7\n'
    )
    from_dict, from_file = load_config(keys), load_config(tmp_path / "run.toml")
    assert from_dict == from_file == load_config(str(tmp_path / "run.toml")) and from_dict.dedup.threshold == 0.7
    assert load_config(from_dict) is from_dict
    with pytest.raises(ConfigError, match=r"^dedup.threshhold: unknown key; did you mean 'threshold'\?"):
        load_config({**keys, "dedup": {"threshhold": 0.7}})
    with pytest.raises(ConfigError, match="is not a file; pass the path of a .toml config"):
        load_config(tmp_path / "missing.toml")


def test_filter_documents_keeps_prose_and_removes_the_rest_with_its_rule():
    docs = pl.DataFrame({"id": ["harbour", "library", "spam"], "text": [HARBOUR, LIBRARY, "Buy now! Buy now!"],
                         "extra": [1, 2, 3]})  # fmt: skip
    kept, removed = filter_documents(docs)
    assert kept["id"].to_list() == ["harbour", "library"] and kept["extra"].to_list() == [1, 2]
    assert kept["text"].to_list() == [HARBOUR, LIBRARY] and "source" not in kept.columns  # no column of its own
    assert removed.select("id", "stage", "rule", "value", "threshold").rows() == [
        ("spam", "filter", "c4_quality.min_sentences", 0.0, 3.0)
    ]
    assert filter_documents(docs).reasons() == {"c4_quality.min_sentences": 1}


def test_filter_documents_takes_the_filter_table_of_a_config():
    docs = pl.DataFrame({"id": ["a", "b", "c"], "text": [HARBOUR, LIBRARY + " Write to desk@example.org.",
                                  "The cat sat on the mat and looked at the door."],
                         "licence": ["CC-BY-4.0", "CC-BY-NC-4.0", "MIT"]})  # fmt: skip
    kept, removed = filter_documents(
        docs,
        {
            "filters": ["gopher_quality", "pii"],
            "params": {"gopher_quality": {"min_words": 1}},
            "exclude_licences": ["CC-BY-NC-*"],
        },  # fmt: skip
    )
    assert kept["id"].to_list() == ["a", "c"] and kept["licence"].to_list() == ["CC-BY-4.0", "MIT"]
    assert removed.select("id", "rule", "licence").rows() == [("b", "licence.excluded", "CC-BY-NC-4.0")]
    kept, removed = filter_documents(docs.head(2), {"filters": ["pii"]})  # a rewrite: PII replaced
    assert kept["text"][1].endswith("Write to <EMAIL>.") and removed.height == 0
    kept, removed = filter_documents(docs, {"enabled": False})
    assert kept.equals(docs) and removed.height == 0 and "rule" in removed.columns
    with pytest.raises(ConfigError, match=r"^filter: unknown filter 'gopher'; did you mean 'gopher_quality'\?"):
        filter_documents(docs, {"filters": ["gopher"]})


def test_documents_without_text_or_with_repeated_ids_stop_with_one_line():
    with pytest.raises(ValueError, match="^the documents have no text column; name them id and text$"):
        filter_documents(pl.DataFrame({"id": ["a"], "body": ["x"]}))
    with pytest.raises(ValueError, match="^document ids repeat; give each document its own id"):
        dedup_documents(pl.DataFrame({"id": ["a", "a"], "text": ["x", "y"]}))
    with pytest.raises(TypeError, match="polars DataFrame, got dict"):
        filter_documents({"id": ["a"], "text": ["x"]})


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        (
            "text",
            [["one line.", "another line."]],
            r"^the documents' text column is List\(String\), not a string; give each document's text as one "
            r"string \(a list of lines: join them",
        ),
        ("text", [{"body": HARBOUR}], r"^the documents' text column is Struct\(\{'body': String\}\), not a string"),
        ("text", [5], r"^the documents' text column is Int64, not a string"),
        ("id", [{"name": "a"}], r"^the documents' id column is Struct\(\{'name': String\}\); give each document "),
        ("id", [1.5], r"^the documents' id column is Float64; give each document an id that is a string or"),
    ],
)
def test_a_text_or_id_column_of_another_type_is_refused_naming_it_not_cast(column, values, message):
    docs = pl.DataFrame({"id": ["a"], "text": [HARBOUR], column: values})
    for stage in (filter_documents, dedup_documents):
        with pytest.raises(ValueError, match=message):
            stage(docs)


def test_an_integer_id_is_read_as_its_digits():
    kept, _ = filter_documents(pl.DataFrame({"id": [7], "text": [HARBOUR]}), {"filters": []})
    assert kept["id"].to_list() == ["7"]


def test_dedup_documents_removes_exact_and_near_copies_naming_the_kept_one(tmp_path):
    near = HARBOUR.replace("wide river", "broad river")  # one word of about 80 changed
    docs = pl.DataFrame({"id": ["a", "b", "c", "d"], "text": [HARBOUR, LIBRARY, HARBOUR.upper(), near]})
    kept, removed = dedup_documents(docs)
    assert kept["id"].to_list() == ["a", "b"]
    rows = {row["id"]: row for row in removed.iter_rows(named=True)}
    assert rows["c"]["rule"] == "dedup.exact_duplicate" and rows["c"]["kept_id"] == "a"  # normalized text
    assert rows["d"]["rule"] == "dedup.near_duplicate" and rows["d"]["kept_id"] == "a"
    assert 0.8 <= rows["d"]["value"] < 1.0 and rows["d"]["threshold"] == 0.8
    # Stricter than the copy's Jaccard: it stays. The stage's files go to work_dir when given.
    kept, removed = dedup_documents(docs, {"threshold": 0.99}, work_dir=tmp_path / "work")
    assert kept["id"].to_list() == ["a", "b", "d"] and removed["id"].to_list() == ["c"]
    assert (tmp_path / "work" / "intermediate" / "clusters.parquet").is_file()
    kept, _ = dedup_documents(docs, {"keep": "longest"})
    assert kept["id"].to_list() == ["b", "d"]  # "broad" is one letter longer than "wide"


def test_dedup_documents_writes_only_into_a_work_dir_of_its_own(tmp_path):
    docs = pl.DataFrame({"id": ["a", "b"], "text": [HARBOUR, HARBOUR]})
    work = tmp_path / "work"
    work.mkdir()
    (work / "documents.parquet").write_bytes(b"a person's file")
    with pytest.raises(
        ValueError, match=r"holds files curate did not write \(documents.parquet\); give a new or empty"
    ):
        dedup_documents(docs, work_dir=work)
    assert (work / "documents.parquet").read_bytes() == b"a person's file"
    assert sorted(p.name for p in work.iterdir()) == ["documents.parquet"]

    again = tmp_path / "again"  # a work_dir of an earlier call is used again
    for _ in range(2):
        kept, _ = dedup_documents(docs, work_dir=again)
        assert kept["id"].to_list() == ["a"]
    (again / "notes.txt").write_text("mine")
    dedup_documents(docs, work_dir=again)
    assert (again / "notes.txt").read_text() == "mine"


def test_dedup_documents_refuses_a_url_work_dir_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where memory://b/w taken for a local path would land
    docs = pl.DataFrame({"id": ["a", "b"], "text": [HARBOUR, HARBOUR]})
    with pytest.raises(ValueError, match=r"^memory://b/w is a URL; dedup_documents keeps its work files on this"):
        dedup_documents(docs, work_dir="memory://b/w")
    assert list(tmp_path.iterdir()) == []
    kept, _ = dedup_documents(docs, work_dir=f"file://{tmp_path}/w")  # a file URL is this machine's folder
    assert kept["id"].to_list() == ["a"] and (tmp_path / "w" / "documents.parquet").is_file()


def test_read_run_gives_counts_quarantine_and_curated_documents(tmp_path):
    records = [{"id": f"n{i}", "text": f"{HARBOUR} Number {i}."} for i in range(5)]
    write_jsonl(tmp_path / "books" / "a.jsonl", [*records, '{"broken'])
    off = {"enabled": False}
    config = load_config(
        {
            "run_dir": str(tmp_path / "run"),
            "sources": [{"name": "books", "reader": "jsonl", "paths": [str(tmp_path / "books")], "id_field": "id"}],
            "lang": off,
            "filter": off,
            "dedup": off,
            "lines": off,
            "tokenize": off,
        }  # fmt: skip
    )
    source_run(config)
    run = read_run(config.run_dir)
    assert run.stages == ["source"] and run.curated_stage == "source"
    assert run.counts() == {"source": {"docs_in": 6, "docs_out": 5, "removed": {}, "quarantined": {"invalid_json": 1}}}
    curated = run.curated()
    assert curated["id"].to_list() == [f"books/n{i}" for i in range(5)] and curated["source"].unique().to_list() == [
        "books"
    ]
    assert run.curated(["id"]).columns == ["id"]
    assert run.removed().height == 0 and "rule" in run.removed().columns
    quarantined = run.quarantined()
    assert quarantined.select("reason", "line").rows() == [("invalid_json", 6)]
    assert quarantined["file"][0].endswith("a.jsonl")
    with pytest.raises(ValueError, match="stage 'filter' did not run"):
        run.removed("filter")
    with pytest.raises(FileNotFoundError, match="holds no manifest.json; pass the run directory"):
        read_run(tmp_path / "books")
