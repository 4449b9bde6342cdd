"""The model-based rules (an external classifier and KenLM perplexity, each with a model for
English only) in the views of a run: the per-language ledger, ``curate inspect``, the report and
the Python API, from the run's stored measurements. Runs by the stages' library calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from pipeline.api import read_run
from pipeline.config import parse_config
from report.build import build_report
from report.inspect import inspect_document
from tests.helpers import curate_in_process, write_jsonl
from tests.pipeline.filters.test_classifier import GOOD, SPAM, probability, train_dclm_like
from tests.pipeline.filters.test_perplexity import ARPA, write_arpa
from tests.report.test_by_lang_views import GERMAN

pytest.importorskip("kenlm")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("model-rules")
    model, arpa = train_dclm_like(root / "models", GOOD, SPAM), write_arpa(root / "lm", ARPA)
    records = [{"id": f"good{i}", "text": t} for i, t in enumerate(GOOD)]
    records += [{"id": f"spam{i}", "text": t} for i, t in enumerate(SPAM)]
    records += [{"id": f"de{i}", "text": t} for i, t in enumerate(GERMAN)]
    write_jsonl(root / "in" / "a.jsonl", records)
    params = {
        "classifier": {"models": {"en": str(model)}},
        "perplexity": {"models": {"en": str(arpa)}, "max_perplexity": 1000.0},
    }
    config = parse_config(
        {
            "run_dir": str(root / "run"),
            "sources": [{"name": "web", "reader": "jsonl", "paths": [str(root / "in")], "id_field": "id"}],
            "filter": {"filters": ["classifier", "perplexity"], "params": params},
            "dedup": {"enabled": False},
            "lines": {"enabled": False},
            "tokenize": {"enabled": False},
        }
    )
    curate_in_process(config)
    return Path(config.run_dir)


def test_the_ledger_per_language_counts_the_rules_where_a_model_scored(run_dir):
    languages = read_run(run_dir).files.stats["filter"].languages
    assert languages["en"].removed == {"classifier.score_min": 3}
    assert languages["de"].docs_out == 2 and not languages["de"].removed  # no German model: passes


def test_inspect_shows_the_stored_score_and_perplexity_and_none_without_a_model(run_dir, tmp_path):
    spam = inspect_document(run_dir, "web/spam0")["filter"]
    assert spam["measured"] == "stored" and spam["first_rule"] == "classifier.score_min"
    rules = {r["rule"]: r for r in spam["rules"]}
    model = run_dir.parent / "models" / "dclm.bin"
    assert rules["classifier.score_min"]["value"] == pytest.approx(probability(model, SPAM[0]), abs=1e-6)
    assert rules["classifier.score_min"]["fires"] and not rules["perplexity.max"]["fires"]
    assert rules["perplexity.max"]["value"] > 1.0
    german = {r["rule"]: r for r in inspect_document(run_dir, "web/de0")["filter"]["rules"]}
    assert german["classifier.score_min"]["value"] is None and german["perplexity.max"]["value"] is None
    shown = CliRunner().invoke(app, ["inspect", str(run_dir), "web/de0"])
    assert shown.exit_code == 0, shown.output
    assert "score < 0.5" in shown.output and "perplexity > 1,000" in shown.output and "fires" not in shown.output


def test_the_report_and_the_api_name_the_rules(run_dir):
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert "score &lt; 0.5" in page and "perplexity &gt; 1,000" in page
    assert read_run(run_dir).removed(rule="classifier.score_min")["id"].sort().to_list() == [
        f"web/spam{i}" for i in range(3)
    ]
    listed = CliRunner().invoke(app, ["inspect", str(run_dir), "--rule", "classifier.score_min"])
    assert "classifier.score_min (filter stage): 3 documents removed" in listed.output
