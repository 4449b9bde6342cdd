"""A tiny experiment end to end under the Prefect test harness: two variants, two seeds, a tiny
model; the report's numbers equal results.json, the variants' runs differ as their curation says,
and no pretraining mixture holds a downstream-task text or a near copy of one."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from flows.experiment import experiment_flow
from pipeline.config import ConfigError
from pipeline.dedup.contamination import ReferenceIndex
from pipeline.experiment import compare, parse_experiment, spread
from pipeline.tokenize import decode_documents, load_tokenizer

pytestmark = pytest.mark.usefixtures("prefect_server")


def _config(tmp_path, **overrides):
    data = {
        "out_dir": str(tmp_path / "experiment"), "demo": True, "demo_docs": 1500,
        "corpus_dir": str(tmp_path / "corpus"), "seeds": [0, 1], "budget_tokens": 6000,
        "reference": {"fraction": 0.1, "max_docs": 20, "min_docs": 2},
        "tokenizer": {"vocab_size": 400, "sample_docs": 500},
        "task": {"train_docs": 30, "test_docs": 20, "sizes": [10, 0], "max_tokens": 16, "finetune_steps": 2},
        "variants": [{"name": "raw"}, {"name": "full", "stages": ["lang", "filter", "dedup", "lines"], "quality": True}],
        "train": {"device": "cpu", "eval_interval": 4, "eval_tokens": 256, "log_interval": 2,
                  "model": {"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16},
                  "batch": {"micro_batch": 4}, "optim": {"warmup_steps": 1}},
    }
    data.update(overrides)
    return parse_experiment(data)


def _resolve(data, path: str):
    """A data-json path: at each level the longest key that matches (keys may hold dots)."""
    parts = path.split(".")
    while parts:
        for take in range(len(parts), 0, -1):
            key = ".".join(parts[:take])
            if isinstance(data, list) and key.isdigit():
                data, parts = data[int(key)], parts[take:]
                break
            if isinstance(data, dict) and key in data:
                data, parts = data[key], parts[take:]
                break
        else:
            raise KeyError(path)
    return data


def test_tiny_experiment_end_to_end(tmp_path):
    config = _config(tmp_path)
    results = experiment_flow(config)
    out = config.out_dir
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(results))
    for name in ("raw", "full"):
        for seed in ("0", "1"):
            assert results["runs"][name][seed]["tokens"] >= 6000
            assert results["runs"][name][seed]["reference_bpb"] > 0
    assert set(results["transfer"]) == {"random", "raw", "full"}
    assert results["metrics"]["reference_bpb"]["raw"]["n"] == 2

    # The report shows results.json's numbers.
    page = (out / "report" / "index.html").read_text()
    shown = re.findall(r'data-json="results\.json#([^"]+)">([^<]*)<', page)
    assert len(shown) > 20
    for path, text in shown:
        value = _resolve(results, path)
        if value is None:
            assert text == "–"
            continue
        digits = len(text.split(".")[1]) if "." in text else 0
        assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10 ** -digits + 1e-12, (path, text, value)

    # The runs differ as their curation says.
    raw_run = json.loads((out / "curation" / "raw" / "manifest.json").read_text())
    full_run = json.loads((out / "curation" / "lang+filter+dedup+lines+quality" / "manifest.json").read_text())
    assert not {"lang", "filter", "dedup", "lines"} & set(raw_run["stages"])
    assert {"lang", "filter", "dedup", "lines", "tokenize", "mix"} <= set(full_run["stages"])
    assert "quality" in full_run["config"]["filter"]["filters"]
    raw, full = results["curation"]["raw"], results["curation"]["full"]
    assert raw["documents_in"] == full["documents_in"] and raw["documents_curated"] > full["documents_curated"]
    # Mixtures take whole documents (each group within half a document of its share of the
    # budget); the trainer reads the same number of tokens from every variant.
    assert raw["tokens_taken"] == pytest.approx(6000, rel=0.25) and full["tokens_taken"] == pytest.approx(6000, rel=0.25)
    assert len({run["tokens"] for runs in results["runs"].values() for run in runs.values()}) == 1

    # Decontamination: no training document of any mixture is a task text or a near copy of one,
    # nor a reference-set document.
    task = pl.read_parquet(out / "task.parquet")
    reference = pl.read_parquet(out / "reference" / "texts.parquet")
    index = ReferenceIndex(pl.concat([task["id"], reference["id"]]), pl.concat([task["text"], reference["text"]]))
    tokenizer = load_tokenizer(out / "tokenizer.json")
    excluded = 0
    for name, run in (("raw", "raw"), ("full", "lang+filter+dedup+lines+quality")):
        mixture = out / "curation" / run / "mix" / name
        manifest = json.loads((mixture / "manifest.json").read_text())
        texts = [text for entry in manifest["train"] for text in decode_documents(mixture / entry["file"], tokenizer)]
        assert index.matches([str(i) for i in range(len(texts))], texts).height == 0
        documents = pl.read_parquet(out / "curation" / run / "mix" / "documents.parquet")
        excluded += documents.filter(pl.col("split") == "excluded").height
    assert excluded > 0  # the pools held task articles or their copies, and lost them


def test_seed_statistics_and_the_spread_rule():
    a, b = spread({0: 2.0, 1: 2.1, 2: 2.2}), spread({0: 3.0, 1: 3.1})
    assert a["mean"] == pytest.approx(2.1) and a["std"] == pytest.approx(0.1) and a["n"] == 3
    result = compare(a, b, lower_is_better=True)  # different seeds: unpaired
    assert not result["paired"] and result["exceeds_spread"] and result["better"]
    assert result["difference"] == pytest.approx(-0.95)
    assert not compare(spread({0: 2.0, 1: 3.0}), spread({2: 2.5, 3: 3.5}), lower_is_better=True)["exceeds_spread"]
    # Same seeds: paired. The seeds move both variants alike (2.0 / 3.0 and 2.1 / 3.1), so a small
    # difference that every seed shows exceeds the spread, though the ranges overlap.
    paired = compare(spread({0: 2.0, 1: 3.0, 2: 2.5}), spread({0: 2.1, 1: 3.1, 2: 2.58}), lower_is_better=True)
    assert paired["paired"] and paired["exceeds_spread"] and paired["better"]
    assert paired["difference"] == pytest.approx(-0.28 / 3)
    mixed = compare(spread({0: 2.0, 1: 3.0}), spread({0: 2.1, 1: 2.9}), lower_is_better=True)
    assert mixed["paired"] and not mixed["exceeds_spread"]


@pytest.mark.parametrize("change, message", [
    ({"demo": False}, "demo = true, or curation"),
    ({"variants": [{"name": "a"}, {"name": "a"}]}, "unique"),
    ({"variants": [{"name": "q", "quality": True}]}, "needs 'filter'"),
    ({"train": {"seed": 3}}, "train.seed"),
    ({"group_by": ["lang"]}, "lang stage in every variant"),
])
def test_experiment_config_errors(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **change)
