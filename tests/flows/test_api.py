"""Curation from Python (flows.api): the whole run from a dict, one stage at a time, and the
README's example, run as written on a small corpus."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import polars as pl
import pytest

import flows.api as api
import pipeline.api
from flows.api import ConfigError, curate, filter_documents, load_config, read_run, run_stage
from pipeline.formats.documents import RunLayout
from tests.helpers import write_jsonl
from tests.report.test_report import _article

pytestmark = pytest.mark.usefixtures("prefect_server")

ROOT = Path(__file__).resolve().parents[2]


def write_books(folder: Path) -> None:
    """Twenty articles, two copies of them (one in capitals), and three pages of junk, in JSON lines."""
    rng = random.Random(5)
    records = [{"text": _article(rng)} for _ in range(20)]
    records += [{"text": records[3]["text"]}, {"text": records[4]["text"].upper()}]
    records += [{"text": "Buy now! Buy now!"}, {"text": "Click here"}, {"text": "Sale sale sale sale."}]
    write_jsonl(folder / "a.jsonl", records)


def _config(tmp_path: Path, **stages) -> dict:
    return {"run_dir": str(tmp_path / "run"), "sources": [{"name": "books", "reader": "jsonl",
            "paths": [str(tmp_path / "books")]}], "tokenize": {"enabled": False}, **stages}  # fmt: skip


def test_the_flows_api_lists_the_library_api_and_its_own_entry_points():
    assert set(api.__all__) == {*pipeline.api.__all__, "curate", "run_stage", "mixsearch"}
    for name in ("curate", "run_stage", "mixsearch"):
        assert "Example::" in getattr(api, name).__doc__


def test_curate_runs_every_stage_of_a_dict_config_and_reads_its_results(tmp_path):
    write_books(tmp_path / "books")
    run = curate(_config(tmp_path))
    assert run.stages == ["source", "lang", "filter", "dedup", "lines"] and run.curated_stage == "lines"
    counts = run.counts()
    for stage, ledger in counts.items():
        assert ledger["docs_in"] == ledger["docs_out"] + sum(ledger["removed"].values()) + sum(
            ledger["quarantined"].values()
        ), stage
    assert counts["source"]["docs_out"] == 25 and counts["dedup"]["removed"] == {"dedup.exact_duplicate": 2}
    removed = run.removed()
    assert removed.filter(pl.col("stage") == "dedup").height == 2
    for stage in ("lang", "filter"):
        assert sum(counts[stage]["removed"].values()) == removed.filter(pl.col("stage") == stage).height
    assert removed.filter(pl.col("stage").is_in(["lang", "filter"])).height == 3  # the junk
    assert run.curated().height == counts["lines"]["docs_out"] == 20
    # The frame API applies the same rules as the run's filter stage.
    lang_out = pl.read_parquet(RunLayout(run.run_dir).stage("lang").docs / "*.parquet")
    kept, by_frame = filter_documents(lang_out, load_config(_config(tmp_path)))
    assert by_frame.sort("id").equals(run.removed("filter").sort("id"))
    assert kept.height == counts["filter"]["docs_out"]
    assert curate(_config(tmp_path)).counts() == counts  # a second call resumes and changes nothing


def test_run_stage_runs_one_stage_on_the_one_before_it(tmp_path):
    write_books(tmp_path / "books")
    config = load_config(_config(tmp_path, lang={"enabled": False}, lines={"enabled": False}))
    with pytest.raises(ConfigError, match=r"^filter reads the documents of source, which has not run in .*; "
                                          r"run_stage\('source', config\) first, or curate\(config\)$"):  # fmt: skip
        run_stage("filter", config)
    assert run_stage("source", config)["docs_out"] == 25
    stats = run_stage("filter", config)
    assert stats["docs_in"] == 25 and sum(stats["removed"].values()) == 3  # the junk
    assert stats == json.loads((RunLayout(config.run_dir).stage("filter").stats).read_text())
    assert run_stage("dedup", config)["docs_in"] == 22  # dedup reads what the filter kept
    assert read_run(config.run_dir).stages == ["source", "filter", "dedup"]
    with pytest.raises(ConfigError, match=r"^lang: the stage is off in this config; set lang.enabled = true"):
        run_stage("lang", config)
    with pytest.raises(ValueError, match="^unknown stage 'dedupe'; the stages are source, lang, filter, dedup"):
        run_stage("dedupe", config)


def test_run_stage_warns_of_stored_measurements_it_measured_again(tmp_path):
    write_books(tmp_path / "books")
    config = load_config(_config(tmp_path, lang={"enabled": False}, lines={"enabled": False}))
    run_stage("source", config)
    run_stage("filter", config)
    (checksum,) = (RunLayout(config.run_dir).stage("filter").root / "attributes").glob("*.sha256")
    checksum.unlink()
    changed = _config(tmp_path, lang={"enabled": False}, lines={"enabled": False})
    changed["filter"] = {"params": {"gopher_quality": {"min_words": 40}}}
    with pytest.warns(api.StageWarning, match=r"^filter: the stored measurements .* have no checksum; measuring"):
        stats = run_stage("filter", changed)
    assert len(stats["warnings"]) == 1


def readme_python() -> str:
    """The README's Python example."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(blocks) == 1, "the README has one Python example"
    return blocks[0]


def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    code = readme_python()
    assert len(code.strip().splitlines()) <= 12
    write_books(tmp_path / "data" / "books")
    (tmp_path / ".cache").symlink_to(ROOT / ".cache")  # the language-ID model, where `make setup` puts it
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["curated"].height == read_run("runs/my-corpus").counts()["lines"]["docs_out"] == 20
    assert namespace["removed"]["rule"].to_list() == ["c4_quality.min_sentences"]
    printed = capsys.readouterr().out
    assert "'docs_in': 25" in printed and "dedup.exact_duplicate" in printed
