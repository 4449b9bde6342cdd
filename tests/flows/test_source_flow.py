"""The `source` flow under a real (temporary) Prefect server: counts, manifest, determinism, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import pipeline.io.writer as writer
from flows.cli import app
from flows.source import source_flow
from pipeline.formats.documents import UNKNOWN, RunLayout
from pipeline.io.writer import TMP_MARK
from pipeline.stages.rerun import open_run
from tests.helpers import check_card, html_page, run_units, source_config, write_jsonl, write_parquet_file, write_warc

pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """A small corpus in every format, with some bad records."""
    root = tmp_path_factory.mktemp("inputs")
    for shard in range(3):
        records = [
            {"id": f"n{shard}-{i}", "text": f"News story {shard}-{i}. " * 20, "url": f"https://n.example/{i}"}
            for i in range(400)
        ]
        records[7] = '{"id": "broken'
        write_jsonl(root / "news" / f"part-{shard}.jsonl.gz", records, "gz")
    write_parquet_file(
        root / "dialogues" / "d.parquet",
        {"id": [f"d{i}" for i in range(300)], "text": [f"Hello {i}\nHi there" for i in range(300)]},
    )
    write_warc(
        root / "web" / "crawl.warc.gz",
        [
            (f"https://w.example/{i}", "text/html", html_page(f"T{i}", [f"Paragraph number {i} " * 20]))
            for i in range(50)
        ],
    )
    for i in range(30):
        (root / "notes" / f"n{i:02d}.txt").parent.mkdir(parents=True, exist_ok=True)
        (root / "notes" / f"n{i:02d}.txt").write_text(f"Note {i}" if i % 10 else "  ")
    return root


def sources(root: Path) -> list[dict]:
    return [
        {"name": "news", "reader": "jsonl", "paths": [str(root / "news")], "id_field": "id", "url_field": "url"},
        {"name": "dialogues", "reader": "parquet", "paths": [str(root / "dialogues")], "id_field": "id"},
        {"name": "web", "reader": "warc", "paths": [str(root / "web")]},
        {"name": "notes", "reader": "text", "paths": [str(root / "notes")]},
    ]


def outputs(run_dir: Path) -> dict[str, bytes]:
    """Every file the run wrote (but Prefect's own folder), by relative path."""
    return {
        str(p.relative_to(run_dir)): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and ".prefect" not in p.parts and p.name != "manifest.json"
    }


def test_source_flow_counts_every_document_and_writes_the_manifest(tmp_path, inputs):
    config = source_config(tmp_path, sources(inputs), shard_docs=500)
    stats = source_flow(config)
    assert stats["docs_in"] == 1200 + 300 + 50 + 30
    assert stats["quarantined"] == {"invalid_json": 3, "empty_text": 3}
    assert stats["docs_out"] == 1200 + 300 + 50 + 30 - 6
    assert stats["sources"]["news"]["files"] == 3 and stats["units"] == 6

    layout = RunLayout(config.run_dir)
    docs = pl.read_parquet(layout.stage("source").docs / "*.parquet")
    assert docs.height == stats["docs_out"] and docs["id"].is_unique().all()
    assert docs.group_by("source").len().sort("source").rows() == [
        ("dialogues", 300),
        ("news", 1197),
        ("notes", 27),
        ("web", 50),
    ]
    manifest = json.loads(layout.manifest.read_text())
    assert manifest["stages"]["source"]["docs_out"] == stats["docs_out"]
    assert manifest["config"]["sources"][0]["name"] == "news"
    assert manifest["versions"]["pyarrow"] and manifest["versions"]["prefect"]
    assert len(manifest["inputs"]) == 3 + 1 + 1 + 30
    assert all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in manifest["inputs"])
    assert json.loads((layout.root / "source" / "stats.json").read_text()) == stats


def test_same_config_gives_the_same_bytes(tmp_path, inputs):
    first = source_config(tmp_path / "a", sources(inputs), shard_docs=500)
    second = source_config(tmp_path / "b", sources(inputs), shard_docs=500)
    source_flow(first)
    source_flow(second)
    assert outputs(first.run_dir) == outputs(second.run_dir)


def test_a_run_killed_midway_resumes_to_the_same_bytes(tmp_path, inputs, monkeypatch):
    clean = source_config(tmp_path / "clean", sources(inputs), shard_docs=150, batch_docs=100)
    source_flow(clean)

    crashed = source_config(tmp_path / "crashed", sources(inputs), shard_docs=150, batch_docs=100)
    real_write, calls = writer.write_parquet, []

    def dies_on_the_fifth_shard(table, path):
        calls.append(path)
        if len(calls) == 5:
            tmp = path.with_name(f".{path.name}{TMP_MARK}999")
            tmp.write_bytes(b"half a shard")  # what a kill leaves behind
            raise KeyboardInterrupt("killed")
        real_write(table, path)

    monkeypatch.setattr(writer, "write_parquet", dies_on_the_fifth_shard)
    open_run(crashed)  # as every run does before a stage writes: the folder is a run
    with pytest.raises(KeyboardInterrupt):
        run_units(crashed)
    monkeypatch.setattr(writer, "write_parquet", real_write)
    stage = RunLayout(crashed.run_dir).stage("source")
    finished_before = {p.name: p.stat().st_mtime_ns for p in stage.parts.glob("*.json")}
    assert len(finished_before) == 1  # news-00000 finished; news-00001 died in its second shard

    source_flow(crashed)
    assert outputs(crashed.run_dir) == outputs(clean.run_dir)
    assert {
        p.name: p.stat().st_mtime_ns for p in stage.parts.glob("*.json") if p.name in finished_before
    } == finished_before  # complete units were skipped
    assert not list(stage.root.rglob(f"*{TMP_MARK}*"))


def test_changed_or_removed_inputs_leave_no_stale_outputs(tmp_path):
    folder = tmp_path / "in"
    write_jsonl(folder / "a.jsonl", [{"text": f"a{i}"} for i in range(5)])
    write_jsonl(folder / "b.jsonl", [{"text": "b"}, '{"broken'])
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(folder)]}], shard_docs=2)
    assert source_flow(config)["docs_out"] == 6
    write_jsonl(folder / "a.jsonl", [{"text": "a, shorter now"}])
    (folder / "b.jsonl").unlink()
    stats = source_flow(config)
    assert stats["docs_out"] == 1 and stats["quarantined"] == {}
    stage = RunLayout(config.run_dir).stage("source")
    assert pl.read_parquet(stage.docs / "*.parquet")["text"].to_list() == ["a, shorter now"]
    assert [p.name for p in stage.parts.iterdir()] == ["s-00000.json"]
    assert not list(stage.quarantine.iterdir())


def test_curate_run_prints_counts_per_source_and_the_run_directory(tmp_path, inputs, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    config = tmp_path / "run.toml"
    lines = [f'run_dir = "{tmp_path / "run"}"']
    for source in sources(inputs):
        lines.append("[[sources]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in source.items()]
    config.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["run", str(config), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "run directory: " + str(tmp_path / "run") in result.output
    for name, count in [("news", "1197"), ("dialogues", "300"), ("web", "50"), ("notes", "27")]:
        assert any(name in line and count in line for line in result.output.splitlines())

    other = tmp_path / "other.toml"
    other.write_text(config.read_text().replace('"jsonl"', '"jsonl"\nmeta_fields = []', 1))
    result = CliRunner().invoke(app, ["run", str(other), "--quiet"])  # a rerun: source changed, so all stages redo
    assert result.exit_code == 0, result.output
    assert "changed: sources[0].meta_fields: null -> [] (read by source)" in result.output
    assert "source: reruns (sources[0].meta_fields: null -> [])" in result.output


def test_curate_demo_accounts_for_every_labelled_document(demo_run):
    """The demo end to end: per source, the stage's ledger agrees with the corpus's labels."""
    _, corpus, run, output = demo_run
    assert f"run directory: {run}" in output
    assert "licences (curated: the output of lines)" in output and "BSD-3-Clause AND MIT" in output
    labels = pl.read_parquet(corpus / "labels.parquet")
    stats = json.loads((run / "source" / "stats.json").read_text())
    assert stats["docs_in"] == labels.height
    unreadable = pl.col("kind").is_in(["malformed", "non_html"])
    for source, counts in stats["sources"].items():
        mine = labels.filter(pl.col("source") == source)
        assert counts["docs_in"] == mine.height
        assert sum(counts["quarantined"].values()) == mine.filter(unreadable).height
        assert counts["docs_out"] == mine.filter(~unreadable).height
    # Every document the labels call readable is there, under the id the labels predict.
    readable = labels.filter(~unreadable)
    docs = pl.read_parquet(run / "source" / "docs" / "*.parquet")
    expected = (readable["source"] + "/" + readable["key"]).sort().to_list()
    assert docs["id"].sort().to_list() == expected
    # Each document's licence is the one its package ships its text under (the labels' licence),
    # read from the record (news, dialogues) or the page's rel="license" links (web); generated
    # text and the notes folder name none.
    truth = readable.select(
        id=pl.col("source") + "/" + pl.col("key"),
        truth=pl.when(pl.col("source") == "notes")
        .then(pl.lit(UNKNOWN))
        .otherwise(pl.col("licence").fill_null(UNKNOWN)),
    )
    found = docs.join(truth, on="id")
    assert found.height == docs.height and (found["licence"] == found["truth"]).all()
    assert set(found["licence"]) == {"MIT", "BSD-3-Clause", "BSD-3-Clause AND MIT", UNKNOWN}
    # Every mixture has a dataset card that agrees with its manifest.
    mixtures = json.loads((run / "mix" / "stats.json").read_text())["mixtures"]
    assert set(mixtures) == {"main", "tempered"}
    for name in mixtures:
        check_card(run / "mix" / name)


def test_bad_names_and_ids_repeated_across_files_do_not_stop_the_flow(tmp_path):
    folder = tmp_path / "in"
    write_jsonl(folder / "a.jsonl", [{"id": 1, "text": "first\r\ncopy"}, {"id": 2, "text": "two"}])
    write_jsonl(folder / "b.jsonl", [{"id": 1, "text": "second copy"}, {"id": 3, "text": "three"}])
    with open(os.path.join(os.fsencode(folder), b"c\xff.jsonl"), "wb") as handle:
        handle.write(b'{"id": 4, "text": "four"}\n')
    config = source_config(tmp_path, [{"name": "s", "reader": "jsonl", "paths": [str(folder)], "id_field": "id"}])
    stats = source_flow(config)
    assert (stats["docs_in"], stats["docs_out"]) == (5, 3)
    assert stats["quarantined"] == {"duplicate_id": 1, "invalid_file_name": 1}
    stage = RunLayout(config.run_dir).stage("source")
    docs = pl.read_parquet(stage.docs / "*.parquet").sort("id")
    assert docs.select("id", "text").rows() == [("s/1", "first\ncopy"), ("s/2", "two"), ("s/3", "three")]
    manifest = json.loads(RunLayout(config.run_dir).manifest.read_text())
    names = ("a.jsonl", "b.jsonl", "c\\xff.jsonl")
    assert sorted(f["path"] for f in manifest["inputs"]) == [str(folder / n) for n in names]
    first = outputs(config.run_dir)
    assert source_flow(config) == stats and outputs(config.run_dir) == first
