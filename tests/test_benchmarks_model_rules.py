"""The model-based rules' cost benchmark on a few documents: it makes its own fastText and KenLM
models (nothing downloaded), times each rule and prints one JSON line of microseconds per document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl

from tests.pipeline.filters.test_classifier import GOOD, SPAM

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "model_rules.py"


def test_it_times_each_rule_on_models_it_makes(tmp_path):
    texts = [f"{GOOD[i % 3]}\n{SPAM[i % 3]} {i}" for i in range(60)]
    sample = tmp_path / "sample.parquet"
    pl.DataFrame({"id": [str(i) for i in range(60)], "text": texts}).write_parquet(sample)
    done = subprocess.run([sys.executable, str(SCRIPT), str(sample)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    costs = json.loads(done.stdout.strip().splitlines()[-1])
    assert costs["docs"] == 60 and costs["default_filters_us_per_doc"] > 0
    assert costs["classifier_us_per_doc"] > 0 and costs["perplexity_us_per_doc"] > 0
