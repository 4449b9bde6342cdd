"""The analysis ``benchmarks/mixsearch.py`` prints from a search's results.json: proxies per
core-hour from the runs' summaries, the first N sampled proxies with the baselines, and the
cross-validated fits against linear regression on the same folds, here on proxies drawn from a
known mixing law (no search is run)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from experiment.mixfit import Constraints, cross_validate, synthetic_law, synthetic_proxies

REPO = Path(__file__).resolve().parents[1]
GROUPS = ["g0", "g1", "g2", "g3"]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_mixsearch", REPO / "benchmarks" / "mixsearch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(n: int, linear_target: bool = False) -> dict:
    """A search's results.json with 3 baselines and ``n`` sampled proxies: target ``heldout`` from a
    synthetic mixing law (or exactly linear in the weights), ``uk`` missing on the second sample."""
    tokens = {g: 50_000 * (i + 1) for i, g in enumerate(GROUPS)}
    bounds = Constraints.of(tokens, 150_000, 4.0)
    law = synthetic_law(len(GROUPS), 0)
    weights, values = synthetic_proxies(law, bounds, n, 0)
    baselines = np.vstack([bounds.natural, np.full(len(GROUPS), 0.25), [0.4, 0.3, 0.2, 0.1]])
    all_weights = np.vstack([baselines, weights])
    linear = all_weights @ np.array([1.0, 2.0, 3.0, 5.0])
    heldout = linear if linear_target else np.concatenate([law(baselines), values])
    labels = ["natural", "t3.33", "unimax"] + [f"sample-{k}" for k in range(n)]
    rows = [
        {
            "name": f"p-{i:012x}",
            "label": label,
            "shares": dict(zip(GROUPS, map(float, w))),
            "targets": {"heldout": float(h), "uk": None if label == "sample-1" else float(1.5 - w[0])},
        }
        for i, (label, w, h) in enumerate(zip(labels, all_weights, heldout))
    ]
    targets = [{"name": "heldout"}, {"name": "uk"}]
    return {
        "config": {"seed": 0, "seeds": [7], "parallel_runs": 2, "mixsearch": {"targets": targets}},
        "groups": GROUPS,
        "proxies": rows,
        "timing": {"proxies_s": 90.0},
    }


def test_the_first_n_sampled_proxies_come_with_the_baselines(bench):
    results = _results(12)
    weights, values = bench.first_proxies(results, "heldout", 4)
    assert weights.shape == (3 + 4, len(GROUPS))
    rows = results["proxies"][:7]
    assert np.allclose(weights, [[r["shares"][g] for g in GROUPS] for r in rows])
    assert values.tolist() == [r["targets"]["heldout"] for r in rows]
    # a run without the target's measure is left out, not counted as a zero
    weights, values = bench.first_proxies(results, "uk", 4)
    assert len(values) == 6 and values.tolist() == [r["targets"]["uk"] for r in rows if r["label"] != "sample-1"]


def test_proxies_per_core_hour_from_the_runs_summaries_and_the_proxy_stage(bench, tmp_path):
    results = _results(3)
    for i, row in enumerate(results["proxies"]):
        folder = tmp_path / "proxies" / row["name"] / "seed-7"
        folder.mkdir(parents=True)
        summary = {"wall_time_s": 10.0 + i, "train_time_s": 4.0 + i, "tokens": 150_528, "parameters": 143_456}
        (folder / "summary.json").write_text(json.dumps(summary))
    rates = bench.proxy_rates(results, tmp_path, threads=1)
    # 6 runs: 10 + 11 + ... + 15 = 75 s of trainer runs, 4 + ... + 9 = 39 s of steps, on one core each
    assert rates["proxy_runs"] == 6
    assert rates["proxies_per_core_hour"] == pytest.approx(6 / (75 / 3600))
    assert rates["proxies_per_core_hour_steps"] == pytest.approx(6 / (39 / 3600))
    # the stage's 90 s held 2 processes x 1 thread
    assert rates["proxies_per_core_hour_all_in"] == pytest.approx(6 / (90 * 2 / 3600))
    assert bench.proxy_rates(results, tmp_path, threads=2)["proxies_per_core_hour"] == pytest.approx(6 / (150 / 3600))


def test_linear_regression_is_cross_validated_on_the_fits_folds(bench):
    weights, values = bench.first_proxies(_results(20, linear_target=True), "heldout", 20)
    linear = bench.linear_cv(weights, values, seed=0)
    assert linear["spearman"] == pytest.approx(1.0) and linear["mae"] < 1e-9
    # the same folds as the fits: the law's out-of-fold figures come from cross_validate itself
    weights, values = bench.first_proxies(_results(20), "heldout", 20)
    scores = bench.fit_scores(weights, values, seed=0, fold_seeds=1)
    law = cross_validate("law", weights, values, 0)
    assert scores["scores"]["law"]["spearman"] == pytest.approx(law["spearman"])
    assert scores["scores"]["law"]["mae"] == pytest.approx(law["mae"])


def test_the_table_and_the_headline_ratio(bench):
    table = bench.fit_table(_results(16), (4, 16, 64), fold_seeds=2)
    assert set(table) == {"heldout", "uk"} and list(table["heldout"]) == [4, 16]  # no N above the search's
    fit = table["heldout"][16]
    assert fit["runs"] == 19
    scores = fit["scores"]
    # at the search's seed the chosen family's scores; over fold assignments it may be re-chosen
    assert {k: scores["chosen"][k] for k in ("spearman", "mae")} == {
        k: scores[fit["family"]][k] for k in ("spearman", "mae")
    }
    assert scores["chosen"]["spearman"] == max(scores["trees"]["spearman"], scores["law"]["spearman"])
    made = bench.figures(table, {"proxies_per_core_hour": 500.0})
    assert made["headline"] == "heldout, N = 16" and made["proxies_per_core_hour"] == 500.0
    assert made["spearman_ratio_vs_linear"] == pytest.approx(
        scores["chosen"]["spearman"] / scores["linear"]["spearman"], abs=1e-4
    )
    assert made["cv_spearman_heldout_n16"] == round(scores["chosen"]["spearman"], 4)
    assert made["cv_mae_linear_uk_n4"] == round(table["uk"][4]["scores"]["linear"]["mae"], 5)


def test_main_on_a_results_file_ends_with_its_json(bench, tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results(16)))
    bench.main(["--results", str(path), "--sizes", "8,16", "--fold-seeds", "1"])
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["headline"] == "heldout, N = 16" and last["spearman_ratio_vs_linear"] > 0
    assert {"cv_spearman_uk_n8", "cv_spearman_linear_heldout_n16", "chosen_family_uk_n16"} <= set(last)


def test_no_ratio_to_a_linear_fit_that_orders_the_runs_backwards(bench):
    scores = {f: {"spearman": 0.5, "spearman_mean": 0.4, "mae": 0.1} for f in ("chosen", "trees", "law")}
    table = {"heldout": {64: {"family": "trees", "runs": 67, "scores": {**scores, "linear": None}}}}
    for linear, ratio in ((0.25, 2.0), (0.0, None), (-0.2, None), (None, None)):
        table["heldout"][64]["scores"]["linear"] = {"spearman": linear, "spearman_mean": 0.2, "mae": 0.2}
        made = bench.figures(table, None)
        assert made["spearman_ratio_vs_linear"] == ratio and made["spearman_mean_ratio_vs_linear"] == 2.0
