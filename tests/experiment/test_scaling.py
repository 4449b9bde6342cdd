"""The scaling-law fit (experiment.scaling): losses generated from known parameters are
recovered (exactly without noise, within stated tolerances with it), the compute-optimal split is
the minimum along its iso-FLOP line, and the bootstrap's intervals hold the truth."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from experiment.scaling import (
    ScalingFit,
    _objective,
    bootstrap_scaling_law,
    compare_scaling_laws,
    fit_scaling_law,
)

# Hoffmann et al. 2022's fitted values (their equation 10).
TRUE = ScalingFit(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28, objective=0.0, runs=0)
SIZES = [1e5, 3e5, 1e6, 3e6, 1e7]
BUDGETS = [1e7, 3e7, 1e8, 3e8, 1e9]


def _grid(noise: float = 0.0, seed: int = 0):
    n, d = map(np.array, zip(*itertools.product(SIZES, BUDGETS)))
    loss = TRUE.predict(n, d) * np.exp(np.random.default_rng(seed).normal(0.0, noise, len(n)))
    return n, d, loss


def test_exact_losses_give_back_the_parameters():
    fit = fit_scaling_law(*_grid())
    for name in ("E", "A", "B"):
        assert getattr(fit, name) == pytest.approx(getattr(TRUE, name), rel=0.02), name
    assert fit.alpha == pytest.approx(TRUE.alpha, abs=0.005) and fit.beta == pytest.approx(TRUE.beta, abs=0.005)
    assert fit.runs == 25 and fit.objective < 1e-9


def test_noisy_losses_give_back_the_exponents_and_the_optimum_within_tolerance():
    """Losses off by 1% (log-normal): the exponents within 0.05, the predicted losses within 1%,
    the compute-optimal parameters at 1e18 FLOPs within a factor of 2."""
    n, d, loss = _grid(noise=0.01, seed=3)
    fit = fit_scaling_law(n, d, loss)
    assert abs(fit.alpha - TRUE.alpha) < 0.05 and abs(fit.beta - TRUE.beta) < 0.05
    assert np.abs(fit.predict(n, d) / TRUE.predict(n, d) - 1).max() < 0.01
    found, expected = fit.optimal(1e18)[0], TRUE.optimal(1e18)[0]
    assert 0.5 < found / expected < 2.0


def test_the_optimum_is_the_minimum_along_its_iso_flop_line():
    for flops in (1e15, 1e18, 1e21):
        best_n, best_d = TRUE.optimal(flops)
        assert 6 * best_n * best_d == pytest.approx(flops, rel=1e-9)
        n = best_n * np.exp(np.linspace(-2, 2, 401))
        losses = TRUE.predict(n, flops / (6 * n))
        assert n[np.argmin(losses)] == pytest.approx(best_n, rel=0.011)


def test_a_term_too_small_for_the_runs_is_undetermined_wherever_the_optimizer_stopped():
    """E at exp(-9) or exp(-14) (two CPUs' stopping points on losses with no floor) is below every
    run's loss by more than the negligible share: both say E is undetermined; E = 1.69 does not."""
    for e in (np.exp(-9.0), np.exp(-14.0)):
        fit = ScalingFit(E=e, A=TRUE.A, B=50.0, alpha=TRUE.alpha, beta=0.2, objective=0.0, runs=25)
        assert fit.at_bounds() == [] and fit.at_bounds(SIZES, BUDGETS) == ["E"]
    assert "E" not in TRUE.at_bounds(SIZES, BUDGETS)


def test_the_gradient_is_the_objectives():
    n, d, loss = _grid(noise=0.02, seed=1)
    args = (np.log(n), np.log(d), np.log(loss), 1e-3)
    theta = np.array([5.5, 6.2, 0.4, 0.3, 0.25])
    _, grad = _objective(theta, *args)
    step = 1e-6
    numeric = [(_objective(theta + step * e, *args)[0] - _objective(theta - step * e, *args)[0]) / (2 * step)
               for e in np.eye(5)]  # fmt: skip
    assert np.allclose(grad, numeric, rtol=1e-4, atol=1e-10)


def test_bootstrap_intervals_hold_the_truth():
    n, d, loss = _grid(noise=0.01, seed=5)
    found = bootstrap_scaling_law(n, d, loss, flops=[1e18], resamples=60, seed=2)
    for name in ("alpha", "beta", "E"):
        low, high = found["intervals"][name]
        assert low <= getattr(TRUE, name) <= high, (name, low, high)
    optimum = found["optimal"][0]
    low, high = optimum["params_interval"]
    assert low <= optimum["params"] <= high and optimum["tokens_per_param"] > 0


@pytest.mark.parametrize(
    "params, tokens, losses, message",
    [
        ([1e5] * 6, [1e7, 2e7, 3e7, 4e7, 5e7, 6e7], [3.0] * 6, "two model sizes"),
        ([1e5, 1e6], [1e7, 1e8], [3.0, 2.5], "at least 5 runs"),
        ([1e5, 1e6, 1e5, 1e6, 1e7, 1e7], [1e7, 1e8, 1e8, 1e7, 1e7, 1e8], [3.0, 2.5, -1.0, 2.8, 2.4, 2.2], "losses > 0"),
        ([1e5, 1e6, 1e7], [1e7, 1e8], [3.0, 2.5, 2.0], "one each per run"),
    ],
)
def test_bad_runs_are_refused_with_the_reason(params, tokens, losses, message):
    with pytest.raises(ValueError, match=message):
        fit_scaling_law(params, tokens, losses)


def test_the_frontier_loss_is_the_optimum_and_compute_for_inverts_it():
    budgets = np.array([1e15, 1e18, 1e21])
    best_n, best_d = TRUE.optimal(budgets)
    assert np.allclose(TRUE.frontier_loss(budgets), TRUE.predict(best_n, best_d), rtol=1e-12)
    assert np.allclose(TRUE.compute_for(TRUE.frontier_loss(budgets)), budgets, rtol=1e-9)
    assert np.isinf(TRUE.compute_for(TRUE.E)) and np.isinf(TRUE.compute_for(TRUE.E - 0.1))


def _scaled(k: float) -> ScalingFit:
    """The law of a variant whose every run is worth k times the parameters and k times the tokens:
    L(N, D) = TRUE(k N, k D), so its frontier at C is TRUE's at k^2 C."""
    return ScalingFit(E=TRUE.E, A=TRUE.A * k**-TRUE.alpha, B=TRUE.B * k**-TRUE.beta, alpha=TRUE.alpha,
                      beta=TRUE.beta, objective=0.0, runs=0)  # fmt: skip


def test_a_variant_worth_k_times_the_parameters_and_tokens_needs_k_squared_less_compute():
    k = 1.5
    better = _scaled(k)
    for budget in (1e16, 1e19):
        assert better.frontier_loss(budget) == pytest.approx(TRUE.frontier_loss(k**2 * budget), rel=1e-12)
        assert TRUE.compute_for(better.frontier_loss(budget)) / budget == pytest.approx(k**2, rel=1e-9)
    n, d, _ = _grid()
    noise = np.exp(np.random.default_rng(4).normal(0.0, 0.01, len(n)))
    runs = {"raw": (n, d, TRUE.predict(n, d) * noise), "curated": (n, d, better.predict(n, d) * noise)}
    found = compare_scaling_laws(runs, flops=[1e17, 1e18], resamples=60, seed=1)
    # Bonferroni over 2 budgets, 5 sizes and the mean over cells
    assert found["reference"] == "raw" and found["comparison_level"] == pytest.approx(1 - 0.05 / 8)
    cells = found["comparisons"]["curated"]["cells"]
    assert cells["better"] == cells["cells"] == 25 and cells["interval"][1] < 0
    # At fixed N raw needs more tokens for curated's loss at the middle budget, the more the
    # smaller the model (its N term leaves it less room above E); an unbounded end is None.
    rows = found["comparisons"]["curated"]["data_multiplier"]
    assert [row["multiplier"] for row in rows] == sorted((row["multiplier"] for row in rows), reverse=True)
    for row in rows:
        assert row["multiplier"] > 1 and row["excludes_one"]
        assert row["interval"][0] <= row["multiplier"] <= (row["interval"][1] or np.inf)
    for entry in found["comparisons"]["curated"]["frontier"]:
        low, high = entry["multiplier_interval"]
        assert low <= k**2 <= high and entry["excludes_one"], entry
        assert entry["loss_difference"] < 0 and entry["excludes_zero"]
        # The same cells' noise on both sides: paired resamples keep the difference tight (0.03
        # wide at 1e17 FLOPs, where each variant's own frontier loss spans about 0.26).
        assert entry["loss_interval"][1] - entry["loss_interval"][0] < 0.1, entry
    assert abs(found["comparisons"]["curated"]["differences"]["alpha"]["value"]) < 0.02


def test_a_variant_with_the_same_law_is_not_called_different():
    n, d, exact = _grid()
    rng = np.random.default_rng(7)
    runs = {name: (n, d, exact * np.exp(rng.normal(0.0, 0.01, len(n)))) for name in ("a", "b")}
    found = compare_scaling_laws(runs, flops=[1e18], resamples=60, seed=3)
    entry = found["comparisons"]["b"]["frontier"][0]
    assert entry["loss_interval"][0] <= 0 <= entry["loss_interval"][1] and not entry["excludes_zero"]
    assert entry["multiplier_interval"][0] <= 1 <= entry["multiplier_interval"][1]


def test_variants_on_different_grids_are_refused():
    n, d, loss = _grid()
    with pytest.raises(ValueError, match="same grid"):
        compare_scaling_laws({"a": (n, d, loss), "b": (n[::-1], d[::-1], loss[::-1])})


def test_a_fit_the_runs_do_not_determine_stays_finite_and_says_so():
    """Losses that fall with D alone, steeper than any floor allows (the demo grid's early
    training): the fit says E is not determined (at its bound, or a term too small for any run to
    tell from it: where L-BFGS stops along a vanishing gradient differs from CPU to CPU), and the
    frontier and the optimum stay finite numbers."""
    n, d, _ = _grid()
    found = compare_scaling_laws({"a": (n, d, 50.0 / d**0.2), "b": (n, d, 45.0 / d**0.2)}, flops=[1e16], resamples=20)
    fit = found["variants"]["a"]
    assert "E" in fit["at_bounds"]
    assert ScalingFit(**TRUE.as_dict()).at_bounds(SIZES, BUDGETS) == []
    point = fit["optimal"][0]
    assert all(np.isfinite(point[key]) for key in ("params", "tokens", "loss"))
    assert found["comparisons"]["b"]["frontier"][0]["loss_difference"] < 0
