"""The views of a run with ``[filter.by_lang]`` (``curate inspect``, the report, the Python API)
show each document's filter verdict as the run decided it: with the rules and thresholds of its
language, from the run's stored measurements, agreeing with the run's ``removed/`` files for every
document. Runs by the stages' library calls (no Prefect)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from pipeline.api import read_run
from pipeline.config import parse_config
from report.build import build_report
from report.inspect import inspect_document
from tests.helpers import curate_in_process, write_jsonl

GERMAN = [
    "Der kleine Garten hinter dem alten Haus wurde im Frühling von der ganzen Familie mit viel Liebe neu bepflanzt.",
    "Am Abend saßen die Nachbarn gemeinsam auf der Terrasse und sprachen lange über das Wetter und die Ernte.",
]
SPANISH = [
    "El pequeño jardín detrás de la casa antigua fue plantado de nuevo en primavera por toda la familia.",
    "Por la tarde los vecinos se sentaron juntos en la terraza y hablaron mucho del tiempo y de la cosecha.",
    "Al final del verano recogieron tomates, pimientos y calabazas, y compartieron todo con el barrio entero.",
]
ENGLISH = [
    "The small garden behind the old house was planted again in spring by the whole family with much care.",
    "In the evening the neighbours sat together on the terrace and talked for a long time about the weather.",
    "At the end of the summer they picked tomatoes, peppers and pumpkins, and shared them with the street.",
]

SHORT = "Read more"  # a line C4 drops (under 5 words, no end mark): the filter stage rewrites the text


def _corpus(folder: Path) -> None:
    records = []
    for i in range(6):
        records.append({"id": f"de{i}", "text": "\n".join(GERMAN[i % 2 :] + GERMAN[: i % 2])})  # 2 sentences
        records.append({"id": f"es{i}", "text": "\n".join([*SPANISH[: 2 + i % 2], SHORT])})  # 2 or 3 sentences
        records.append({"id": f"en{i}", "text": "\n".join([*ENGLISH[i % 3 :], *ENGLISH[: i % 3], SHORT])})
    write_jsonl(folder / "a.jsonl", records)


def _config(root: Path, run: str, store_measures: bool):
    return parse_config(
        {
            "run_dir": str(root / run),
            "sources": [{"name": "web", "reader": "jsonl", "paths": [str(root / "in")], "id_field": "id"}],
            "filter": {
                "filters": ["c4_quality"],
                "store_measures": store_measures,
                "by_lang": {
                    "de": {"params": {"c4_quality": {"min_sentences": 1}}},  # keeps the German pairs
                    "es": {"params": {"c4_quality": {"min_sentences": 4}}},  # removes every Spanish one
                },
            },
            "dedup": {"enabled": False},
            "lines": {"enabled": False},
            "tokenize": {"enabled": False},
        }
    )


@pytest.fixture(scope="module", params=[True, False], ids=["stored", "measured-again"])
def run_dir(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("by-lang")
    _corpus(root / "in")
    config = _config(root, "run", request.param)
    curate_in_process(config)
    return Path(config.run_dir)


def test_inspect_and_the_api_agree_with_the_removed_files_for_every_document(run_dir):
    removed = pl.read_parquet(run_dir / "filter" / "removed" / "*.parquet")
    recorded = dict(zip(removed["id"], removed["rule"]))
    langs = dict(zip(removed["id"], removed["lang"]))
    assert {i.split("/")[1][:2] for i in recorded} == {"es"}  # the run: German kept, Spanish removed
    assert read_run(run_dir).removed("filter").equals(removed)
    ids = [f"web/{lang}{i}" for i in range(6) for lang in ("de", "es", "en")]
    verdicts = read_run(run_dir).filter_verdicts(ids)
    per_doc = verdicts.unique("id", maintain_order=True)
    assert per_doc["id"].to_list() == ids
    assert dict(zip(per_doc["id"], per_doc["removed_by"])) == {i: recorded.get(i) for i in ids}
    sentences = verdicts.filter(pl.col("rule") == "c4_quality.min_sentences")
    assert dict(zip(sentences["id"], sentences["threshold"])) == {i: {"de": 1, "es": 4, "en": 3}[i[4:6]] for i in ids}
    assert set(per_doc["settings"]) == {"de", "es", None}
    for i in range(6):
        for lang in ("de", "es", "en"):
            doc_id = f"web/{lang}{i}"
            found = inspect_document(run_dir, doc_id)
            rule = recorded.get(doc_id)
            assert found["filter"]["first_rule"] == rule, doc_id
            assert not found["filter"]["errors"], found["filter"]["errors"]
            stored = (run_dir / "filter" / "attributes").is_dir()
            assert found["filter"]["measured"] == ("stored" if stored else "measured again")
            rules = {r["rule"]: r for r in found["filter"]["rules"]}
            sentences = rules["c4_quality.min_sentences"]
            assert sentences["fires"] == (rule == "c4_quality.min_sentences")
            assert sentences["threshold"] == {"de": 1, "es": 4, "en": 3}[lang]
            if rule is None:
                assert found["fate"].startswith("curated")
            else:
                assert langs[doc_id] == "es" and found["removed_by"]["threshold"] == sentences["threshold"]
                assert sentences["value"] == found["removed_by"]["value"]


def test_inspect_says_which_settings_judged_a_document(run_dir):
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "web/de0"])
    assert result.exit_code == 0, result.output
    assert "filter rules ([filter.by_lang.de] over the stage's settings)" in result.output
    assert "sentence_count < 1" in result.output and "fires" not in result.output


def test_the_report_finds_no_kept_document_the_rules_of_its_language_would_remove(run_dir):
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert "would be removed" not in page
    assert "sentence_count &lt; 3 (" in page and "de: &lt; 1" in page and "es: &lt; 4" in page


def test_a_rule_lists_the_documents_it_removed_in_the_cli_and_the_api(run_dir):
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "--rule", "c4_quality.min_sentences", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert "c4_quality.min_sentences (filter stage): 6 documents removed" in result.output
    assert "web/es" in result.output and "--limit N for more" in result.output
    listed = json.loads(
        CliRunner().invoke(app, ["inspect", str(run_dir), "--rule", "c4_quality.min_sentences", "--json"]).output
    )
    assert listed["count"] == 6 and len(listed["documents"]) == 6
    assert {(d["lang"], d["threshold"]) for d in listed["documents"]} == {("es", 4.0)}
    api = read_run(run_dir).removed(rule="c4_quality.min_sentences")
    assert api["id"].to_list() == [d["id"] for d in listed["documents"]]
    unknown = CliRunner().invoke(app, ["inspect", str(run_dir), "--rule", "c4_quality.min_sentence"])
    assert unknown.exit_code == 2
    assert unknown.output.strip().splitlines() == [
        "error: no document of this run was removed by 'c4_quality.min_sentence'; the rules that removed some: "
        "c4_quality.min_sentences"
    ]
    with pytest.raises(LookupError, match="rules that removed some: c4_quality.min_sentences"):
        read_run(run_dir).removed(rule="gopher_quality.min_words")


def test_text_shows_the_document_as_each_stage_left_it(run_dir):
    kept = read_run(run_dir).texts("web/en0")
    assert kept["stage"].to_list() == ["source", "lang", "filter"]
    assert kept["status"].to_list() == ["kept"] * 3
    source, _, filtered = kept["text"].to_list()
    assert source.endswith("\n" + SHORT) and filtered == source.removesuffix("\n" + SHORT)
    removed = read_run(run_dir).texts("web/es0")
    assert removed["status"].to_list() == ["kept", "kept", "removed"]
    assert removed["rule"][2] == "c4_quality.min_sentences" and SHORT not in removed["text"][2]
    result = CliRunner().invoke(app, ["inspect", str(run_dir), "web/es0", "--text"])
    assert result.exit_code == 0, result.output
    assert "lang: kept; text unchanged" in result.output
    assert "filter: removed by c4_quality.min_sentences; the text as the filters' rewrites left it" in result.output
    assert result.output.count(SHORT) == 1  # in the source's text only
    with pytest.raises(LookupError, match="no document 'web/zz'"):
        read_run(run_dir).texts("web/zz")


@pytest.mark.parametrize("damaged", ["filter/stats.json", "filter/docs"])
def test_a_truncated_file_is_one_line_naming_it_and_the_fix(run_dir, tmp_path, damaged):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    path = copy / damaged
    if path.is_dir():
        path = sorted(path.glob("*.parquet"))[0]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    where = str(path.relative_to(copy))
    for args in (["report", str(copy)], ["inspect", str(copy), "web/en0"], ["inspect", str(copy), "web/en0", "--text"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and f"{where} is damaged or truncated" in lines[0], result.output
        assert "curate run CONFIG" in lines[0]
