"""The whole curation run under Prefect: source -> lang -> filter, each stage accounted for."""

from __future__ import annotations

import json

import polars as pl
import pytest

from flows.curate import curate_flow
from pipeline.formats.documents import RunLayout
from tests.helpers import source_config, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")

ENGLISH = "The committee met on Tuesday to discuss the budget for the coming year and agreed on most points."
GERMAN = "Der Ausschuss traf sich am Dienstag, um den Haushalt für das kommende Jahr zu besprechen."
FRENCH = "Le comité s'est réuni mardi pour discuter du budget de l'année prochaine et a trouvé un accord."


def test_lang_and_filter_stages_chain_their_ledgers_and_record_every_removal(tmp_path):
    records = [{"id": f"en{i}", "text": f"{ENGLISH} Write to desk{i}@example.org."} for i in range(30)]
    records += [{"id": f"de{i}", "text": GERMAN} for i in range(10)]
    records += [{"id": f"fr{i}", "text": FRENCH} for i in range(5)]
    write_jsonl(tmp_path / "in" / "a.jsonl", records[::2])
    write_jsonl(tmp_path / "in" / "b.jsonl", records[1::2] + ['{"broken'])
    config = source_config(
        tmp_path,
        [{"name": "mix", "reader": "jsonl", "paths": [str(tmp_path / "in")], "id_field": "id"}],
        lang={"keep": ["en", "de"], "min_score": 0.5},
        filter={"filters": ["pii"]},
        dedup={"enabled": False},
        lines={"enabled": False},
        tokenize={"enabled": False},
    )
    stats = curate_flow(config)

    assert stats["source"]["docs_out"] == 45 and stats["source"]["quarantined"] == {"invalid_json": 1}
    assert stats["lang"]["docs_in"] == 45
    assert stats["lang"]["removed"] == {"lang.not_kept": 5}
    assert stats["lang"]["languages"]["fr"]["removed"] == {"lang.not_kept": 5}
    assert stats["lang"]["languages"]["en"]["docs_out"] == 30
    assert stats["filter"]["docs_in"] == 40 and stats["filter"]["docs_out"] == 40
    assert stats["filter"]["counts"]["pii.email"] == 30 and stats["filter"]["counts"]["pii.email|mix"] == 30

    layout = RunLayout(config.run_dir)
    removed = pl.read_parquet(layout.stage("lang").removed / "*.parquet")
    assert sorted(removed["id"].to_list()) == sorted(f"mix/fr{i}" for i in range(5))
    assert removed["rule"].unique().to_list() == ["lang.not_kept"] and removed["lang"].unique().to_list() == ["fr"]
    docs = pl.read_parquet(layout.stage("filter").docs / "*.parquet")
    assert docs.height == 40 and set(docs["lang"]) == {"en", "de"}
    assert docs.filter(pl.col("lang") == "en")["text"].str.ends_with("Write to <EMAIL>.").all()
    assert docs.filter(pl.col("lang") == "en")["pii_replacements"].to_list() == [1] * 30
    assert (docs["lang_score"] > 0.5).all()
    manifest = json.loads(layout.manifest.read_text())
    assert set(manifest["stages"]) == {"source", "lang", "filter"}
    assert curate_flow(config) == stats  # a second run resumes every unit and changes nothing
