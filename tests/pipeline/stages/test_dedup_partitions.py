"""The dedup stage's band-key partitions follow the corpus (pipeline.dedup.engine.partitions_for):
one per BAND_ROWS_PER_UNIT rows up to dedup.partitions, more when a partition would hold more than
BAND_ROWS_PER_PARTITION rows; the stage's outputs are the same bytes either way, and the steps
after the candidates still take up to dedup.partitions units when a small corpus has one
partition."""

from __future__ import annotations

import hashlib
import random

import pipeline.dedup.engine as engine
import pipeline.dedup.lines as lines
import pipeline.stages.dedup as stage
from pipeline.dedup.minhash import MinHashParams
from pipeline.formats.documents import RunLayout
from pipeline.io.writer import read_json, write_json
from pipeline.stages.units import in_process
from tests.helpers import run_units, source_config, write_jsonl
from tests.pipeline.dedup.test_dedup import edit_words, make_vocabulary, random_text, write_docs


def test_partitions_grow_past_the_configured_ones_only_for_a_large_corpus():
    near = MinHashParams()  # 21 bands: 22 rows per document with the exact hash
    bands = near.lsh[0]
    assert engine.partitions_for(0, near, 8) == 1
    assert engine.partitions_for(20_000, near, 8) == 1  # 440,000 rows: one unit's worth
    assert engine.partitions_for(100_000, near, 8) == 3  # 2.2M rows
    assert engine.partitions_for(100_000, near, 2) == 2  # dedup.partitions caps the units by work
    assert engine.partitions_for(1_000_000, near, 8) == 8  # 22M rows: 22 units' worth, 4 partitions' at most
    rows = 666_000_000 * (bands + 1)
    assert engine.partitions_for(666_000_000, near, 8) == -(-rows // engine.BAND_ROWS_PER_PARTITION)
    assert engine.partitions_for(666_000_000, near, 8) > 2_000
    assert engine.partitions_for(10**9, MinHashParams(near=False), 8) == 154  # the exact hash alone


def _sourced(tmp_path, name: str, rows: list[dict]):
    """A run of ``rows`` in shards of 20 documents, its source stage done: its config and layout."""
    write_jsonl(tmp_path / "corpus" / "a.jsonl", rows)
    config = source_config(
        tmp_path / name,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "corpus")], "id_field": "id"}],
        shard_docs=20,
    )
    layout = RunLayout(config.run_dir)
    parts = run_units(config)
    write_json(
        {"stage": "source", "docs_out": sum(p["ledger"]["docs_out"] for p in parts)}, layout.stage("source").stats
    )
    write_json({"stages": {}}, layout.manifest)
    return config, layout


def _digests(root, paths) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(paths)}


def _deduplicated(tmp_path, name: str) -> dict:
    rng = random.Random(7)
    vocabulary = make_vocabulary(rng)
    rows = []
    for i in range(60):
        text = random_text(rng, vocabulary, 120)
        rows.append({"id": f"d{i}", "text": text})
        if i % 3 == 0:
            rows.append({"id": f"d{i}-near", "text": edit_words(rng, text, 2)})
    config, layout = _sourced(tmp_path, name, rows)
    steps = []

    def recorded(label, fn, jobs):
        steps.append(label)
        return in_process(label, fn, jobs)

    stats = stage.run_dedup("source", config, recorded)
    assert stats.docs_in == len(rows) and stats.dedup["clusters"] == 20
    root = layout.stage("dedup").root
    files = _digests(
        root, [root / "clusters.parquet", *(root / "docs").glob("*.parquet"), *(root / "removed").glob("*")]
    )
    return {"partitions": stats.dedup["partitions"], "files": files, "steps": steps}


def test_more_partitions_for_a_larger_corpus_write_the_same_bytes(tmp_path, monkeypatch):
    default = _deduplicated(tmp_path, "default")  # 80 documents x 22 rows: one partition
    monkeypatch.setattr(engine, "BAND_ROWS_PER_UNIT", 300)  # 6 units' worth, under dedup.partitions (8)
    by_work = _deduplicated(tmp_path, "by-work")
    monkeypatch.setattr(engine, "BAND_ROWS_PER_PARTITION", 100)  # 18 partitions, past dedup.partitions
    more = _deduplicated(tmp_path, "more")
    assert (default["partitions"], by_work["partitions"], more["partitions"]) == (1, 6, 18)
    assert more["files"] == by_work["files"] == default["files"] and len(default["files"]) >= 5
    # One partition, one group, one block of shards: every step of the finding in one unit.
    assert default["steps"][0] == "dedup find" and "dedup signatures" in by_work["steps"]


def test_one_partition_leaves_the_later_steps_their_units(tmp_path, monkeypatch):
    """A corpus of one partition's band rows still runs the steps after the candidates as up to
    dedup.partitions units when their work asks for them (here the keep rule's homes)."""
    paths = []
    rng = random.Random(3)
    vocabulary = make_vocabulary(rng)
    for s in range(4):
        rows = []
        for i in range(10):
            text = random_text(rng, vocabulary, 80)
            rows += [(f"s{s}-{i}", text), (f"s{s}-{i}-near", edit_words(rng, text, 1))]
        paths.append(write_docs(tmp_path / "docs" / f"d{s}.parquet", rows))
    monkeypatch.setattr(engine, "EDGES_PER_HOME", 5)  # 40 edges: 8 homes' worth
    homes = {}
    for name, most in (("one", None), ("eight", 8)):
        work = tmp_path / name
        engine.find_duplicates(paths, work, MinHashParams(), 1, "first", work / "clusters.parquet", most_units=most)
        homes[name] = len(list((work / "components" / "home").glob("home-*")))
    assert homes == {"one": 1, "eight": 8}


def test_the_keep_rule_reads_the_signature_files_once_whatever_its_homes(tmp_path, monkeypatch):
    """Each group of shards reads its own signature rows for its labelled documents and sends them
    to the homes, so eight homes read what one does (a home that read the signature files itself
    read each row group once per home with a member in it) and write the same clusters table."""
    paths = []
    rng = random.Random(5)
    vocabulary = make_vocabulary(rng)
    texts = [random_text(rng, vocabulary, 80) for _ in range(40)]
    for s in range(4):  # every component has a member in each shard: every row group holds every home's
        rows = [(f"s{s}-{i}", edit_words(rng, text, 1) if s else text) for i, text in enumerate(texts)]
        paths.append(write_docs(tmp_path / "docs" / f"d{s}.parquet", rows))
    found, tables = {}, {}
    for name, per_home in (("one", 10**9), ("eight", 5)):
        monkeypatch.setattr(engine, "EDGES_PER_HOME", per_home)
        work = tmp_path / name
        found[name] = engine.find_duplicates(
            paths, work, MinHashParams(), 1, "first", work / "clusters.parquet", most_units=8
        )
        homes = len(list((work / "components" / "home").glob("home-*")))
        assert homes == {"one": 1, "eight": 8}[name]
        tables[name] = (work / "clusters.parquet").read_bytes()
    assert tables["one"] == tables["eight"] and found["one"]["docs_in_clusters"] > 120
    one, eight = found["one"]["bytes_read"]["clusters"], found["eight"]["bytes_read"]["clusters"]
    # eight homes' files are more and smaller (4 x 8 here, a page of overhead each), so a little more
    # to read; when each home read the signature rows itself, eight read 7.3 times what one did
    assert eight < 2 * one


def test_work_of_another_layout_is_redone_not_reused(tmp_path):
    """A run folder whose dedup work was made under the former layout (32-bit shingle sets, whose
    collisions joined unrelated short documents; its inputs.json has no work format) is redone on
    resume, and the same clusters come out; work of this layout is reused."""
    first = _deduplicated(tmp_path, "run")
    work = RunLayout(tmp_path / "run" / "run").stage("dedup").root / "intermediate"
    finding = work / "finding.json"
    made = read_json(work / "inputs.json")
    made["settings"].pop("work_format")
    write_json(made, work / "inputs.json")
    before = finding.stat().st_mtime_ns
    again = _deduplicated(tmp_path, "run")
    assert finding.stat().st_mtime_ns != before and again == first
    before = finding.stat().st_mtime_ns
    reused = _deduplicated(tmp_path, "run")
    assert reused["files"] == first["files"] and reused["steps"] == ["dedup"]  # no step of the finding ran
    assert finding.stat().st_mtime_ns == before


def test_line_partitions_follow_the_documents():
    assert lines.line_partitions_for(0, 8) == 1
    assert lines.line_partitions_for(lines.DOCS_PER_PARTITION, 8) == 1
    assert lines.line_partitions_for(lines.DOCS_PER_PARTITION + 1, 8) == 2
    assert lines.line_partitions_for(10**9, 8) == 8  # lines.partitions caps them
    assert lines.line_partitions_for(10**9, 64) == 64


def _lines_cut(tmp_path, name: str) -> dict:
    rng = random.Random(5)
    vocabulary = make_vocabulary(rng)
    boilerplate = [random_text(rng, vocabulary, 8) for _ in range(3)]
    rows = [
        {"id": f"d{i}", "text": "\n".join([random_text(rng, vocabulary, 30), *boilerplate[: 1 + i % 3]])}
        for i in range(60)
    ]
    config, layout = _sourced(tmp_path, name, rows)
    found = stage.run_lines("source", config).lines
    root = layout.stage("lines").root
    files = _digests(root, [*(root / "docs").glob("*.parquet"), *root.glob("intermediate/frequent.parquet")])
    return {"found": found, "files": files}


def test_more_line_partitions_write_the_same_bytes(tmp_path, monkeypatch):
    one = _lines_cut(tmp_path, "one")  # 60 documents: one partition
    monkeypatch.setattr(lines, "DOCS_PER_PARTITION", 20)
    three = _lines_cut(tmp_path, "three")
    assert one["found"] == {"frequent_lines": 3, "partitions": 1}
    assert three["found"] == {"frequent_lines": 3, "partitions": 3}
    assert one["files"] == three["files"] and len(one["files"]) == 4
