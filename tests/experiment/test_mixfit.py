"""The mixture search's mathematics (experiment.mixfit): sampled mixtures meet every bound and a
larger search repeats a smaller one's draws; bounds no mixture meets are refused in one line; a
fit on proxies drawn from a known mixing law ranks held-out proxies and proposes a mixture near
the law's optimum; a target that is one group's loss gets more of that group."""

from __future__ import annotations

import numpy as np
import pytest

from experiment.mixfit import (
    Constraints,
    candidate_pool,
    choose_fit,
    cross_validate,
    fit_model,
    propose,
    sample_mixtures,
    synthetic_law,
    synthetic_proxies,
)
from pipeline.formats.configfile import ConfigError

TOKENS = {"code": 500_000, "web": 300_000, "docs": 120_000, "de": 60_000, "fr": 20_000}


def _constraints(**kw) -> Constraints:
    return Constraints.of(TOKENS, budget=kw.pop("budget", 200_000), max_epochs=2, **kw)


def test_sampled_mixtures_meet_every_bound():
    bounds = _constraints(min_share={"docs": 0.05}, max_share={"code": 0.15})
    # 2 epochs of fr's 20k tokens fill at most 20% of the 200k budget: an epoch cap is a share cap.
    assert bounds.upper.tolist() == pytest.approx([0.15, 1.0, 1.0, 0.6, 0.2])
    drawn = sample_mixtures(bounds, 300, seed=3)
    w = drawn.weights
    assert w.shape == (300, 5) and bounds.feasible(w).all()
    assert np.abs(w.sum(axis=1) - 1).max() < 1e-9 and (w >= 0).all()
    assert w[:, 0].max() <= 0.15 and w[:, 2].min() >= 0.05 and w[:, 4].max() <= 0.2
    assert np.array_equal(w, np.round(w, 6))
    # code's natural share is 50%, capped at 15%: most draws near the natural shares break a bound.
    assert drawn.rejected > 300
    # Small scales put nearly all weight on one group, as RegMix's draws do.
    assert (w.max(axis=1) > 0.9).mean() > 0.05
    pool = candidate_pool(bounds, 5000, seed=3)
    assert bounds.feasible(pool).all()
    assert np.abs(pool.mean(axis=0) - w.mean(axis=0)).max() < 0.05


def test_a_larger_search_repeats_the_smaller_ones_draws():
    bounds = _constraints(max_share=0.5)
    small = sample_mixtures(bounds, 8, seed=11).weights
    large = sample_mixtures(bounds, 20, seed=11).weights
    rest = sample_mixtures(bounds, 12, seed=11, start=8).weights
    assert np.array_equal(large[:8], small) and np.array_equal(large[8:], rest)
    assert not np.array_equal(sample_mixtures(bounds, 8, seed=12).weights, small)


@pytest.mark.parametrize(
    ("kw", "names"),
    [
        ({"min_share": {"fr": 0.3}}, ["'fr'", "min_share 0.3", "0.2"]),
        ({"min_share": {"code": 0.5, "web": 0.3, "docs": 0.1, "de": 0.05, "fr": 0.1}}, ["sums to 1.05"]),
        ({"budget": 4_000_000}, ["sum to 0.5", "raise max_epochs"]),
        ({"max_share": {"it": 0.5}}, ["unknown group", "'it'"]),
        ({"min_share": {"web": 1.5}}, ["'web'", "[0, 1]"]),
    ],
)
def test_bounds_no_mixture_meets_are_refused_in_one_line(kw, names):
    with pytest.raises(ConfigError) as refused:
        _constraints(**kw)
    message = str(refused.value)
    assert "\n" not in message and all(n in message for n in names), message


def test_min_shares_are_a_floor_and_an_upper_bound_that_rejects_everything_is_named():
    # 2 epochs of fr's 20k tokens are 20% of the budget, and fr must have 20%: pinned there.
    pinned = _constraints(min_share={"fr": 0.2, "de": 0.1})
    drawn = sample_mixtures(pinned, 50, seed=5)
    assert (drawn.weights[:, 4] == 0.2).all() and drawn.weights[:, 3].min() >= 0.1
    assert pinned.feasible(drawn.weights).all() and pinned.feasible(candidate_pool(pinned, 50, 5)).all()
    # Upper bounds summing to 1.005 leave almost no mixture a Dirichlet draw can hit.
    tight = Constraints.of({g: 1000 for g in "abcde"}, 1000, 4, max_share=0.201)
    with pytest.raises(ConfigError, match=r"10,000 tries .* upper bound 0.201 .* sum to 1.005"):
        sample_mixtures(tight, 1, seed=0)


def test_a_fit_on_a_known_law_proposes_near_its_optimum():
    bounds = Constraints.of(
        {f"g{i}": int(t) for i, t in enumerate([549_000, 715_000, 603_000, 545_000, 424_000])},
        budget=1_000_000,
        max_epochs=3,
        max_share=0.6,
    )
    law = synthetic_law(5, seed=0)
    w, y = synthetic_proxies(law, bounds, 48, seed=0)
    chosen = choose_fit(w, y, seed=0)
    assert chosen["families"]["trees"]["spearman"] >= 0.8
    assert max(f["spearman"] for f in chosen["families"].values()) == chosen["families"][chosen["family"]]["spearman"]
    assert chosen["families"]["trees"]["folds"] == 5
    found = propose("trees", w, y, bounds, seed=0, candidates=20_000, resamples=40)
    best = np.array(list(found["weights"].values()))
    optimum = law.optimum(bounds)
    natural, at_best, at_optimum = law(bounds.natural)[0], law(best)[0], law(optimum)[0]
    assert bounds.feasible(best).all() and np.array_equal(best, np.round(best, 6))
    # Most of the gain the law allows over the natural shares, and near the optimum.
    assert (natural - at_best) / (natural - at_optimum) > 0.8
    assert np.abs(best - optimum).sum() < 0.3
    # The bootstrap measures the runs' sampling spread, not the trees' pull towards the centre
    # of the candidates: it covers the optimum for most groups, and misses none by much.
    lo, hi = np.array(list(found["interval"].values())).T
    assert ((optimum >= lo) & (optimum <= hi)).sum() >= 4
    assert np.maximum(lo - optimum, optimum - hi).max() < 0.06
    # Trees regress towards the mean at the minimum: the prediction there errs high, never low.
    assert at_best <= found["predicted_interval"][1]


def test_a_target_that_is_one_groups_loss_gets_more_of_that_group():
    bounds = _constraints()
    fr = bounds.groups.index("fr")
    law = synthetic_law(5, seed=4, target=np.eye(5)[fr])
    w, y = synthetic_proxies(law, bounds, 32, seed=4)
    chosen = choose_fit(w, y, seed=4)
    assert chosen["families"][chosen["family"]]["spearman"] >= 0.9
    found = propose(chosen["family"], w, y, bounds, seed=4, candidates=20_000, resamples=40)
    natural = bounds.natural[fr]
    assert natural == pytest.approx(0.02)
    assert found["weights"]["fr"] > natural + 0.1 and found["interval"]["fr"][0] > natural


def test_the_law_recovers_its_own_form_and_small_searches_leave_one_out():
    bounds = _constraints()
    law = synthetic_law(5, seed=2, target=np.eye(5)[1])
    w, y = synthetic_proxies(law, bounds, 24, seed=2, noise=0.0)
    held = cross_validate("law", w, y, seed=2)
    assert held["spearman"] > 0.98 and held["mae"] < 0.01
    few = cross_validate("trees", w[:8], y[:8], seed=2)
    assert few["folds"] == 8 and len(few["predicted"]) == 8
    again = fit_model("trees", w, y, seed=2).predict(w)
    assert np.array_equal(fit_model("trees", w, y, seed=2).predict(w), again)


def test_the_log_linear_family_recovers_a_power_law_in_one_groups_share():
    """A target that falls as a power of one group's share (loss = a - b log r): the log-linear
    family ranks held-out proxies almost perfectly, better than the mixing law, and its proposal
    takes as much of that group as the bounds allow."""
    bounds = _constraints()
    w = sample_mixtures(bounds, 40, seed=3).weights
    noise = np.random.default_rng(3).normal(0, 0.003, len(w))
    y = 3.0 - 0.2 * np.log(w[:, 0] + 1e-3) + noise
    chosen = choose_fit(w, y, seed=0)
    assert chosen["family"] == "loglinear" and chosen["families"]["loglinear"]["spearman"] > 0.95
    assert chosen["families"]["loglinear"]["spearman"] > chosen["families"]["law"]["spearman"]
    found = propose("loglinear", w, y, bounds, seed=0, candidates=20_000, resamples=20)
    first = bounds.groups[0]
    assert found["weights"][first] > 0.8 * bounds.upper[0]
    low, high = found["interval"][first]
    assert low <= found["weights"][first] <= high
