"""The licence tables of a run with many licences (a crawl names a hundred or more, most on one
or two documents): the table printed after every run and the report show the licences with the
most documents, sum the others in one row, and keep every licence a step away."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from flows.cli import app
from report.build import build_report
from report.console import print_licences
from report.inspect import TOP_LICENCES, licence_table, top_licences
from tests.helpers import source_config, source_run, write_jsonl
from tests.report.test_report import check_numbers

LICENCES = 120


@pytest.fixture(scope="module")
def many_licences(tmp_path_factory) -> tuple[dict, str]:
    """A source-only run of 247 documents under 120 licences: MIT on 40, CC-BY-4.0 on 30, and
    118 others on one or two documents each. Returns the source stage's stats and the run dir."""
    tmp_path = tmp_path_factory.mktemp("licences")
    names = ["MIT"] * 40 + ["CC-BY-4.0"] * 30
    names += [f"LicenseRef-site-{i:03d}" for i in range(118) for _ in range(1 + i % 2)]
    records = [{"id": f"d{i}", "text": f"Document {i} says something.", "licence": n} for i, n in enumerate(names)]
    write_jsonl(tmp_path / "crawl" / "a.jsonl", records)
    off = {"enabled": False}
    config = source_config(
        tmp_path,
        [{"name": "crawl", "reader": "jsonl", "paths": [str(tmp_path / "crawl")], "licence_field": "licence"}],
        lang=off, filter=off, dedup=off, lines=off, tokenize=off,
    )  # fmt: skip
    stats = source_run(config)
    assert len(stats.licences) == LICENCES and stats.docs_out == len(names)
    return {"source": stats}, str(config.run_dir)


def test_the_top_licences_and_one_row_summing_the_others(many_licences):
    stats, _ = many_licences
    found = licence_table(stats)
    assert len(found["licences"]) == LICENCES  # every licence stays in the table (and in stats.json)
    top, other = top_licences(found["licences"])
    assert list(top)[:2] == ["MIT", "CC-BY-4.0"] and len(top) == TOP_LICENCES
    # The odd-numbered LicenseRefs hold two documents: the eight that follow come first.
    assert list(top)[2:] == [f"LicenseRef-site-{i:03d}" for i in (1, 3, 5, 7, 9, 11, 13, 15)]
    read = stats["source"].docs_out - sum(row["read"] for row in top.values())
    assert other == {
        "licences": 110,
        "read": read,
        "removed_by_rule": 0,
        "curated": read,
        "tokens": None,
        "mixtures": {},
    }
    assert top_licences(found["licences"], None) == (found["licences"], None)
    assert top_licences(dict(list(found["licences"].items())[:10])) == (
        dict(list(found["licences"].items())[:10]),
        None,
    )


def test_the_printed_licence_table_is_ten_rows_and_other(many_licences):
    stats, _ = many_licences
    out = Console(file=io.StringIO(), width=120)
    print_licences(out, licence_table(stats))
    printed = out.file.getvalue()
    rows = [line for line in printed.splitlines() if line.startswith("│")]
    assert len(rows) == TOP_LICENCES + 1, printed  # ten licences and other
    assert re.search(r"│ other \(110 licences\)\s+│\s+161 │\s+0 │\s+161 │", printed), printed
    words = " ".join(printed.split())  # the title and caption wrap
    assert "LicenseRef-site-017" not in printed and "the top 10 of 120 by documents read" in words
    assert "every licence: curate inspect RUN_DIR (--json)" in words


def test_curate_inspect_of_a_run_prints_every_licence(many_licences):
    _, run_dir = many_licences
    printed = CliRunner().invoke(app, ["inspect", run_dir]).output
    assert all(f"LicenseRef-site-{i:03d}" in printed for i in range(118)) and "other (" not in printed


def test_the_report_shows_the_top_licences_and_the_others_folded(many_licences):
    _, run_dir = many_licences
    page = build_report(run_dir).read_text()
    section = page.split('<section id="licences">', 1)[1].split("</section>", 1)[0]
    top, rest = section.split("<details>", 1)
    assert top.count("<tr>") == TOP_LICENCES + 1  # the header and ten licences
    assert "<summary>the other 110 licences (161 documents read, 161 curated)</summary>" in rest
    assert rest.count("<tr>") == 110 + 1 and "LicenseRef-site-017" in rest and "LicenseRef-site-017" not in top
    check_numbers(__import__("pathlib").Path(run_dir), page)  # every licence's numbers are the stats'
