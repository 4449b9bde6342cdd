"""The dedup index benchmark at a small size: it runs, and its last line holds the figures the
benchmarks' README reports (the time ratio, the F1 against the truth, the kept sets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "dedup_index.py"


def test_small_run_scores_the_index_against_the_truth_and_one_run_over_both():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "6000", "3000"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "dedup_index" and (result["docs_a"], result["docs_b"]) == (6000, 3000)
    assert result["truth"] > 500 and result["f1"] >= 0.99
    assert result["kept_set_equal_where_rule_allows"] is True
    assert result["kept_differences"] == result["kept_differences_through_a_removed"]
    assert 0 < result["time_ratio_indexed_vs_together"] and 0 < result["cpu_ratio_indexed_vs_together"]
    assert result["bytes_read_indexed"]["index_candidates"] > 0
