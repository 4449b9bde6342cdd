"""The dedup stage benchmark in its ``tiny`` mode (our side only, nothing installed): it runs,
reads the stage's files the way ``peers`` reads them, and its last line holds the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "dedup_stage.py"


def test_tiny_mode_reads_the_stage_files_peers_reads_and_scores_them_against_the_truth():
    done = subprocess.run([sys.executable, str(SCRIPT), "tiny"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "dedup_stage" and result["mode"] == "tiny"
    assert result["docs"] > 1000 and result["true_pairs"] > 0 and result["edges"] > 0
    assert result["ours_f1"] >= 0.99
    assert result["ours_edge_similarity_max_difference"] == 0.0  # the stored Jaccard is the exact one
    assert result["band_keys_shape"] == [result["docs"], 21]  # the default layout: 21 bands of 6 rows
