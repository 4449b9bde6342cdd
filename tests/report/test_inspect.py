"""`curate inspect`: a document's way through the stages, from the run's files: one a filter
removed, one dedup removed, one that made it into the mixtures, a quarantined record, and ids that
are not in the run."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from report.inspect import UnknownDocument, inspect_document
from tests.report.test_report import NEWSLETTER, curated_run

pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, prefect_server):
    return curated_run(tmp_path_factory)[0]


def test_a_document_a_filter_removed_shows_every_rule_measured_again(run_dir):
    removed = pl.read_parquet(run_dir / "filter" / "removed" / "*.parquet").row(0, named=True)
    found = inspect_document(run_dir, removed["id"])
    assert found["removed_by"] == {
        "stage": "filter",
        "rule": removed["rule"],
        "value": removed["value"],
        "threshold": removed["threshold"],
    }
    assert found["fate"].startswith("removed by the filter stage: " + removed["rule"])
    statuses = {entry["stage"]: entry["status"] for entry in found["stages"]}
    assert statuses == {
        "source": "kept",
        "lang": "kept",
        "filter": "removed",
        "dedup": "not reached",
        "lines": "not reached",
    }
    rules = {rule["rule"]: rule for rule in found["filter"]["rules"]}
    assert len(rules) > 20 and found["filter"]["first_rule"] == removed["rule"]
    fired = rules[removed["rule"]]
    assert fired["fires"] and fired["value"] == pytest.approx(removed["value"])
    assert fired["threshold"] == removed["threshold"]
    # Rules before the first one that fired all passed.
    order = list(rules)
    assert not any(rules[name]["fires"] for name in order[: order.index(removed["rule"])])
    assert found["lang"]["lang"] == removed["lang"] and found["lang"]["threshold"] == 0.5
    assert found["source"]["own_id"] == removed["id"].removeprefix("news/") and found["source"]["url"]
    assert found["source"]["path"].endswith("a.jsonl") and found["tokens"] is None and found["mix"] is None
    json.dumps(found)  # a plain dict


def test_a_duplicate_names_its_cluster_and_the_kept_document(run_dir):
    found = inspect_document(run_dir, "news/n0-copy2")
    assert found["removed_by"]["stage"] == "dedup" and found["removed_by"]["rule"] == "dedup.exact_duplicate"
    dedup = found["dedup"]
    assert dedup["in_cluster"] and not dedup["kept"] and dedup["exact"] and dedup["kept_id"] == "news/n0"
    assert dedup["cluster_size"] == 5 and dedup["removed_exact"] == 4 and dedup["jaccard"] == 1.0
    assert found["filter"]["first_rule"] is None and found["lang"]["rule"] is None
    near = inspect_document(run_dir, "news/n1-near2")
    assert near["removed_by"]["rule"] == "dedup.near_duplicate" and 0.8 <= near["dedup"]["jaccard"] < 1.0
    assert near["dedup"]["kept_id"] == "news/n1"
    kept = inspect_document(run_dir, "news/n0")
    assert kept["dedup"]["kept"] and kept["dedup"]["kept_id"] == "news/n0" and kept["removed_by"] is None


def test_a_kept_document_shows_its_lines_tokens_group_side_and_repeats(run_dir):
    documents = pl.read_parquet(run_dir / "mix" / "documents.parquet")
    row = documents.filter(pl.col("id") == "news/n12").row(0, named=True)
    found = inspect_document(run_dir, "news/n12")
    assert found["removed_by"] is None and found["fate"].startswith("curated")
    assert [e["stage"] for e in found["stages"]] == ["source", "lang", "filter", "dedup", "lines", "tokenize", "mix"]
    assert found["lines"]["lines_cut"] == 1 and found["lines"]["cut"] == [NEWSLETTER]
    assert found["tokens"] == row["tokens"] and found["mix"]["group"] == "news" == row["group"]
    assert found["mix"]["side"] == row["split"]
    for name in ("main", "flat"):
        plan = pl.read_parquet(run_dir / "mix" / name / "plan.parquet").filter(pl.col("id") == "news/n12")
        expected = int(plan["repeats"][0]) if plan.height else None
        assert found["mix"]["mixtures"][name]["repeats"] == expected
    held = documents.filter(pl.col("split") == "validation")["id"][0]
    validation = inspect_document(run_dir, held)
    assert validation["mix"]["side"] == "validation"
    assert all(m["repeats"] is None for m in validation["mix"]["mixtures"].values())
    web = inspect_document(run_dir, "web/a.jsonl:3")
    assert web["source"]["file"] == "a.jsonl" and web["source"]["line"] == 3


def test_quarantined_records_and_unknown_ids(run_dir):
    found = inspect_document(run_dir, "news/a.jsonl:31")
    assert found["removed_by"] == {"stage": "source", "rule": "invalid_json", "value": None, "threshold": None}
    assert found["quarantine"]["line"] == 31
    with pytest.raises(UnknownDocument) as error:
        inspect_document(run_dir, "news/nn4")
    assert "news/n4" in error.value.suggestions and "did you mean" in str(error.value)
    with pytest.raises(UnknownDocument) as error:
        inspect_document(run_dir, "news/n1-near")
    assert error.value.suggestions[0].startswith("news/n1-near")


def test_curate_inspect_prints_the_path(run_dir):
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "news/n1-near1"])
    assert result.exit_code == 0, result.output
    for expected in (
        "fate: removed by the dedup stage: dedup.near_duplicate",
        "news/n1",
        "filter rules",
        "gopher_quality.word_count_min",
        "not reached",
    ):
        assert expected in result.output
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "news/n12"])
    assert result.exit_code == 0 and "mixture main: taken" in result.output and NEWSLETTER[:40] in result.output
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "news/n12", "--json"])
    assert json.loads(result.output)["mix"]["group"] == "news"
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "news/nn4"])
    assert result.exit_code == 2 and "did you mean 'news/n4'" in result.output


# Ids, texts and reasons come from the data: rich markup in them is printed as written, and
# control characters (ANSI escapes) never reach the terminal.
HOSTILE = "web/[/red][bold]x\x1b[2J\x1b]0;title\x07\x9b31m\u202eevil"


def hostile_lookup() -> dict:
    return {
        "id": HOSTILE,
        "fate": "removed by the dedup stage: dedup.exact_duplicate [/]",
        "source": {
            "source": "web",
            "path": f"in/{HOSTILE}.jsonl",
            "line": 3,
            "own_id": HOSTILE,
            "id_field": "id",
            "shard": "docs/web-00000.parquet",
            "row": 0,
            "chars": 5,
            "bytes": 5,
            "meta": {"k": HOSTILE},
        },
        "stages": [
            {"stage": "source", "status": "kept", "detail": HOSTILE},
            {"stage": "dedup", "status": "removed", "detail": "[/red]"},
        ],
        "filter": {
            "in_scope": True,
            "rules": [{"rule": "r[/x]", "value": 1.0, "measure": HOSTILE, "op": "<", "threshold": 2.0, "fires": False}],
            "errors": [HOSTILE],
            "first_rule": None,
        },
        "dedup": {
            "in_cluster": True,
            "kept": False,
            "exact": True,
            "kept_id": HOSTILE,
            "jaccard": 1.0,
            "cluster": HOSTILE,
            "cluster_size": 2,
            "removed_exact": 1,
            "removed_near": 0,
        },
        "lines": {"in_scope": True, "lines_cut": 1, "chars_cut": 3, "cut": [HOSTILE]},
        "mix": {
            "group": HOSTILE,
            "side": "excluded",
            "rule": "reference_id",
            "near_id": HOSTILE,
            "cause": f"same id as excluded text {HOSTILE}",
            "mixtures": {"main": {"repeats": 1}},
        },
    }


@pytest.mark.parametrize("as_json", [False, True])
def test_inspect_prints_markup_as_written_and_escapes_control_characters(monkeypatch, tmp_path, as_json):
    import report.inspect as report

    monkeypatch.setattr(report, "inspect_document", lambda run_dir, doc_id: hostile_lookup())
    result = CliRunner().invoke(app, ["inspect", str(tmp_path), HOSTILE] + (["--json"] if as_json else []))
    assert result.exit_code == 0, result.output
    for control in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert control not in result.output
    if as_json:
        assert json.loads(result.output)["id"] == HOSTILE  # escaped, yet the same string when parsed
    else:
        assert "web/[/red][bold]x\\x1b[2J\\x1b]0;title\\x07\\x9b31m\\u202eevil" in result.output
        assert result.output.count("[/red]") >= 6


def test_an_unknown_id_with_markup_and_escapes_is_one_plain_line(monkeypatch, tmp_path):
    import report.inspect as report

    def unknown(run_dir, doc_id):
        raise UnknownDocument(doc_id, [HOSTILE])

    monkeypatch.setattr(report, "inspect_document", unknown)
    result = CliRunner().invoke(app, ["inspect", str(tmp_path), HOSTILE])
    assert result.exit_code == 2
    assert result.output.startswith("error: no document 'web/[/red][bold]x\\x1b[2J")
    assert "\x1b" not in result.output and "\x9b" not in result.output
