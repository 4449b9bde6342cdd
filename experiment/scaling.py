"""Scaling laws: the final loss of runs of several model sizes and token budgets fitted as

    L(N, D) = E + A / N^alpha + B / D^beta

(N parameters, D training tokens; Hoffmann et al. 2022, "Training Compute-Optimal Large Language
Models", approach 3), and the compute-optimal split of a budget of C = 6 N D FLOPs.

The fit follows the paper: minimize the Huber loss (delta = 1e-3) between the log of the
predicted and the observed loss, with the prediction written as a log-sum-exp,
``log L = LSE(a - alpha log N, b - beta log D, e)`` with ``A = exp(a), B = exp(b), E = exp(e)``,
by L-BFGS from every start of a grid, keeping the best. Intervals come from a bootstrap over the
runs: resample the runs with replacement, fit again (started from the fit on all runs), and take
percentiles. A grid of a few runs gives wide intervals, and they say so.

Minimizing the loss for a fixed C = 6 N D gives (the paper's equation 4)::

    N_opt(C) = G (C / 6)^(beta / (alpha + beta)),   D_opt(C) = (C / 6)^(alpha / (alpha + beta)) / G,
    G = (alpha A / (beta B))^(1 / (alpha + beta)).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

HUBER_DELTA = 1e-3
# Starts of the fit (the paper's grid, coarser: 2 x 2 x 2 x 3 x 3 = 72 starts).
START_ALPHA = (0.3, 0.8)
START_BETA = (0.3, 0.8)
START_E = (-1.0, 1.0)
START_A = (0.0, 5.0, 10.0)
START_B = (0.0, 5.0, 10.0)
# The objective is small (mean Huber loss of residuals of about 1e-2), so L-BFGS-B's default
# relative tolerance would stop it near its start; these let it converge.
OPTIMIZER = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 5000}
PARAMETERS = ("E", "A", "B", "alpha", "beta")
# The search's bounds on (log A, log B, log E, alpha, beta): wide enough for any loss in nats or
# bits, narrow enough that a fit the runs do not determine (E falling towards 0 when the loss is far
# from any floor) stays a finite number that says it sits at its bound.
BOUNDS = ((-30.0, 60.0), (-30.0, 60.0), (-20.0, 5.0), (1e-3, 5.0), (1e-3, 5.0))
# A term of the law under this share of every run's predicted loss is not determined by the runs
# (ScalingFit.at_bounds): a tenth of the Huber loss's delta, well under the noise of a real run.
NEGLIGIBLE_SHARE = 1e-4


@dataclass(frozen=True)
class ScalingFit:
    """A fitted L(N, D) = E + A / N^alpha + B / D^beta, with the fit's objective (mean Huber loss
    of the log residuals) and the number of runs behind it."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    objective: float
    runs: int

    def predict(self, params, tokens) -> np.ndarray:
        """The fitted loss at ``params`` (N) and ``tokens`` (D), arrays of one shape."""
        n, d = np.asarray(params, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    def optimal(self, flops) -> tuple[np.ndarray, np.ndarray]:
        """The compute-optimal parameters and tokens for budgets of ``flops`` (C = 6 N D)."""
        log_c = np.log(np.asarray(flops, dtype=np.float64) / 6.0)
        total = self.alpha + self.beta
        log_g = self._log_g()
        with np.errstate(over="ignore"):
            return np.exp(log_g + log_c * self.beta / total), np.exp(log_c * self.alpha / total - log_g)

    def _log_g(self) -> float:
        """log G, G = (alpha A / (beta B))^(1 / (alpha + beta)), in logs: A and B of a fit may lie
        hundreds of orders of magnitude apart."""
        ratio = np.log(self.alpha) + np.log(self.A) - np.log(self.beta) - np.log(self.B)
        return float(ratio / (self.alpha + self.beta))

    def frontier_loss(self, flops) -> np.ndarray:
        """The loss at the compute-optimal split of ``flops``. Both terms at the optimum fall as
        (C / 6)^-gamma with gamma = alpha beta / (alpha + beta), so L*(C) = E + K (C / 6)^-gamma."""
        log_k, gamma = self._frontier_terms()
        return self.E + np.exp(log_k - gamma * np.log(np.asarray(flops, dtype=np.float64) / 6.0))

    def compute_for(self, loss) -> np.ndarray:
        """The compute whose optimal split reaches ``loss`` (the inverse of :meth:`frontier_loss`);
        infinite at or below E."""
        log_k, gamma = self._frontier_terms()
        gap = np.asarray(loss, dtype=np.float64) - self.E
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(gap > 0, 6.0 * np.exp((log_k - np.log(np.where(gap > 0, gap, 1.0))) / gamma), np.inf)

    def _frontier_terms(self) -> tuple[float, float]:
        """log K and gamma of :meth:`frontier_loss`."""
        log_g = self._log_g()
        log_k = np.logaddexp(np.log(self.A) - self.alpha * log_g, np.log(self.B) + self.beta * log_g)
        return float(log_k), self.alpha * self.beta / (self.alpha + self.beta)

    def tokens_for(self, params, loss) -> np.ndarray:
        """The tokens at which a model of ``params`` reaches ``loss``; infinite when ``loss`` is at
        or below what that size reaches with unlimited tokens (E + A / N^alpha)."""
        n = np.asarray(params, dtype=np.float64)
        gap = np.asarray(loss, dtype=np.float64) - self.E - self.A / n**self.alpha
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(gap > 0, (self.B / np.where(gap > 0, gap, 1.0)) ** (1.0 / self.beta), np.inf)

    def at_bounds(self, params=None, tokens=None) -> list[str]:
        """The parameters the runs do not determine: left at a bound of the search (:data:`BOUNDS`),
        or, given the runs' ``params`` and ``tokens`` (their ranges suffice), in a term of the law
        under :data:`NEGLIGIBLE_SHARE` of every run's predicted loss (E, A and alpha, or B and beta):
        no run can tell such a term from its bound, and L-BFGS stops wherever its gradient, which
        scales with the term, falls under the tolerance, a point that differs from CPU to CPU. What
        follows from them (the optimum, the frontier) is the bound's, not the runs'."""
        values = {"A": np.log(self.A), "B": np.log(self.B), "E": np.log(self.E), "alpha": self.alpha, "beta": self.beta}
        found = {
            name
            for name, (low, high) in zip(("A", "B", "E", "alpha", "beta"), BOUNDS)
            if min(abs(values[name] - low), abs(values[name] - high)) < 1e-6 * max(1.0, abs(low), abs(high))
        }
        if params is not None and tokens is not None:
            n, d = (np.asarray(v, dtype=np.float64).ravel() for v in (params, tokens))
            n, d = np.repeat(n, len(d)), np.tile(d, len(n))  # every pairing of the ranges' values
            with np.errstate(over="ignore", divide="ignore"):
                terms = {("E",): np.full_like(n, self.E), ("A", "alpha"): self.A / n**self.alpha,
                         ("B", "beta"): self.B / d**self.beta}  # fmt: skip
                loss = self.predict(n, d)
            for names, term in terms.items():
                if np.all(term / loss < NEGLIGIBLE_SHARE):
                    found.update(names)
        return [name for name in ("A", "B", "E", "alpha", "beta") if name in found]

    def as_dict(self) -> dict:
        return asdict(self)


def _objective(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray, delta: float):
    """Mean Huber loss of the log residuals, and its gradient in (a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = theta
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    top = terms.max(axis=0)
    weights = np.exp(terms - top)
    total = weights.sum(axis=0)
    residual = top + np.log(total) - log_l
    soft = weights / total
    small = np.abs(residual) <= delta
    loss = np.where(small, 0.5 * residual**2, delta * (np.abs(residual) - 0.5 * delta))
    slope = np.where(small, residual, delta * np.sign(residual))
    grad = np.array(
        [
            (slope * soft[0]).sum(),
            (slope * soft[1]).sum(),
            (slope * soft[2]).sum(),
            -(slope * soft[0] * log_n).sum(),
            -(slope * soft[1] * log_d).sum(),
        ]
    )
    return loss.mean(), grad / len(log_l)


def _fit_from(starts, log_n, log_d, log_l, delta) -> tuple[np.ndarray, float]:
    """The best L-BFGS-B fit over ``starts``, on one BLAS thread: the problem has five parameters,
    and OpenBLAS's threads spinning for work on a busy machine made fits ten times slower."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _best_of(starts, log_n, log_d, log_l, delta)


def _best_of(starts, log_n, log_d, log_l, delta) -> tuple[np.ndarray, float]:
    best, best_value = None, np.inf
    for start in starts:
        found = minimize(
            _objective, np.clip(np.asarray(start, dtype=np.float64), *np.array(BOUNDS).T),
            args=(log_n, log_d, log_l, delta), jac=True, method="L-BFGS-B", bounds=BOUNDS, options=OPTIMIZER,
        )  # fmt: skip
        if np.isfinite(found.fun) and found.fun < best_value:
            best, best_value = found.x, float(found.fun)
    if best is None:
        raise ValueError("fit_scaling_law: no start of the fit converged to a finite loss")
    return best, best_value


def _checked(params, tokens, losses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, d, loss = (np.asarray(v, dtype=np.float64).ravel() for v in (params, tokens, losses))
    if not len(n) == len(d) == len(loss):
        raise ValueError(
            f"fit_scaling_law: {len(n)} sizes, {len(d)} token counts and {len(loss)} losses; one each per run"
        )
    if len(n) < len(PARAMETERS):
        raise ValueError(
            f"fit_scaling_law: {len(n)} runs for {len(PARAMETERS)} parameters; the grid needs at least "
            f"{len(PARAMETERS)} runs (several sizes and token budgets)"
        )
    for name, values in (("parameters", n), ("tokens", d), ("losses", loss)):
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise ValueError(f"fit_scaling_law: every run needs {name} > 0 and finite")
    if len(np.unique(n)) < 2 or len(np.unique(d)) < 2:
        raise ValueError("fit_scaling_law: the runs need at least two model sizes and two token budgets")
    return n, d, loss


def fit_scaling_law(
    params: Sequence[float], tokens: Sequence[float], losses: Sequence[float], delta: float = HUBER_DELTA
) -> ScalingFit:
    """Fit L(N, D) to runs of ``params`` (N), ``tokens`` (D) and final ``losses`` (module
    docstring); the best of every start of the grid."""
    n, d, loss = _checked(params, tokens, losses)
    starts = itertools.product(START_A, START_B, START_E, START_ALPHA, START_BETA)
    theta, value = _fit_from(starts, np.log(n), np.log(d), np.log(loss), delta)
    return _as_fit(theta, value, len(n))


def _as_fit(theta: np.ndarray, value: float, runs: int) -> ScalingFit:
    a, b, e, alpha, beta = (float(v) for v in theta)
    return ScalingFit(E=float(np.exp(e)), A=float(np.exp(a)), B=float(np.exp(b)), alpha=alpha, beta=beta,
                      objective=value, runs=runs)  # fmt: skip


def _percentiles(values, level: float) -> list[float]:
    """The central ``level`` interval of ``values``; interpolated between order statistics when all
    are finite, else the order statistics themselves (an infinite multiplier among them)."""
    tail = (1.0 - level) / 2.0 * 100.0
    array = np.asarray(values, dtype=np.float64)
    method = "linear" if np.isfinite(array).all() else "inverted_cdf"
    return [float(v) for v in np.percentile(array, [tail, 100.0 - tail], method=method)]


def _finite(value: float) -> float | None:
    """A number for JSON: None for infinity (a loss below the reference's floor: no compute reaches it)."""
    return float(value) if np.isfinite(value) else None


def bootstrap_scaling_law(
    params: Sequence[float],
    tokens: Sequence[float],
    losses: Sequence[float],
    flops: Sequence[float] = (),
    resamples: int = 200,
    seed: int = 0,
    level: float = 0.95,
    delta: float = HUBER_DELTA,
) -> dict:
    """One variant's fit with bootstrap intervals (:func:`compare_scaling_laws` of one variant):
    ``fit``, ``intervals`` per parameter and ``optimal`` per budget of ``flops``, with ``level``
    and ``resamples``."""
    found = compare_scaling_laws({"runs": (params, tokens, losses)}, flops, resamples, seed, level, delta)
    return {"level": level, "resamples": resamples, **found["variants"]["runs"]}


def compare_scaling_laws(
    runs: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    flops: Sequence[float] = (),
    resamples: int = 200,
    seed: int = 0,
    level: float = 0.95,
    delta: float = HUBER_DELTA,
    curve: Sequence[float] = (),
) -> dict:
    """Fit L(N, D) to each variant's runs (``runs[name] = (params, tokens, losses)``, the same
    grid in the same order for every variant; the first is the reference) and compare each other
    variant with the reference.

    The bootstrap is paired: each resample draws grid positions with replacement and fits every
    variant on the same positions (each fit started from the fit on all runs and three starts near
    it; a draw with fewer than two sizes or two budgets is drawn again), so a difference between
    variants is measured on the same cells. Returns:

    - ``variants[name]``: ``fit`` (:meth:`ScalingFit.as_dict`), ``at_bounds`` (the parameters
      the runs do not determine: at a bound of the search, or in a term too small to matter on the
      grid, :meth:`ScalingFit.at_bounds`), ``intervals`` per parameter at
      ``level``, and per budget of ``flops`` its ``optimal`` N and D, D / N and the loss on the
      frontier, each with its interval;
    - ``comparisons[name]`` for every variant after the first: at each budget the difference of
      frontier losses (variant - reference) and the compute multiplier (the compute the reference
      needs to reach the variant's frontier loss, over the budget; None, in JSON, when that loss
      is below the reference's E: no compute reaches it), and the differences of E, alpha and
      beta, with intervals at ``comparison_level``: ``level`` Bonferroni-corrected over every
      comparison with a verdict (variants x (budgets + sizes + 1), below). ``excludes_zero`` (a
      loss difference) or ``excludes_one`` (a multiplier) says whether the interval leaves out no
      difference; ``multiplier_extrapolated`` whether the
      reference's matching compute lies outside the compute of the runs (a multiplier read off the
      fits beyond what was trained);
    - ``comparisons[name]["cells"]``: the mean over grid cells of the variant's loss minus the
      reference's (the data, no fit), how many cells the variant is lower in, and the bootstrap
      interval of the mean; ``comparisons[name]["data_multiplier"]``: at each model size, the
      tokens the reference's fit needs to reach the variant's fitted loss at the middle budget,
      over that budget (``extrapolated`` outside the budgets trained);
    - ``variants[name]["curve"]``, with budgets ``curve`` given: the frontier at each (for a
      plot), the same figures as ``optimal`` with no comparison made at them."""
    names = list(runs)
    data = _same_grid(runs)
    n, d, _ = data[names[0]]
    logs = {name: tuple(np.log(v) for v in data[name]) for name in names}
    fits = {name: fit_scaling_law(*data[name], delta=delta) for name in names}
    starts = {name: _starts_near(fit) for name, fit in fits.items()}
    draws, picks = _paired_draws(logs, starts, n, d, resamples, seed, delta)
    budgets = np.asarray(list(flops), dtype=np.float64)
    grid = {"params": [float(n.min()), float(n.max())], "tokens": [float(d.min()), float(d.max())]}
    variants = _variant_summaries(fits, draws, budgets, curve, level, grid)
    compared = names[1:]
    sizes = np.unique(n)
    comparison_level = 1.0 - (1.0 - level) / max(1, len(compared) * (len(budgets) + len(sizes) + 1))
    comparisons = {
        name: _against_reference(data, fits, draws, picks, name, names[0], budgets, comparison_level)
        for name in compared
    }
    return _json_numbers(
        {
            "reference": names[0],
            "level": level,
            "comparison_level": comparison_level,
            "resamples": resamples,
            "flops": budgets.tolist(),
            "variants": variants,
            "comparisons": comparisons,
        }
    )


def _same_grid(
    runs: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each variant's runs as arrays (:func:`_checked`); a ValueError unless every variant has the
    first one's grid (its sizes and tokens in the same order)."""
    names = list(runs)
    data = {name: _checked(*runs[name]) for name in names}
    n, d, _ = data[names[0]]
    for name in names[1:]:
        if not (np.array_equal(data[name][0], n) and np.array_equal(data[name][1], d)):
            raise ValueError(
                f"compare_scaling_laws: {name}'s runs are not the same grid (sizes and tokens in the same "
                f"order) as {names[0]}'s; a paired comparison needs the same cells"
            )
    return data


def _starts_near(fit: ScalingFit) -> list[np.ndarray]:
    """The bootstrap's starts for a variant: its fit on all runs, and three starts near it."""
    start = np.array([np.log(fit.A), np.log(fit.B), np.log(fit.E), fit.alpha, fit.beta])
    shifts = ([0.0, 0.0, 0.0, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0, 0.1], [1.0, 1.0, -0.5, 0.0, 0.0])
    return [start, *(start + np.array(shift) for shift in shifts)]


def _paired_draws(
    logs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], starts: dict[str, list[np.ndarray]],
    n: np.ndarray, d: np.ndarray, resamples: int, seed: int, delta: float,
) -> tuple[dict[str, list[ScalingFit]], list[np.ndarray]]:  # fmt: skip
    """``resamples`` paired bootstrap fits of every variant (each on the same grid positions, drawn
    with replacement; a draw with fewer than two sizes or two budgets is drawn again), and the
    positions of each draw."""
    names = list(logs)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[ScalingFit]] = {name: [] for name in names}
    picks = []
    while len(draws[names[0]]) < resamples:
        pick = rng.integers(0, len(n), len(n))
        if len(np.unique(n[pick])) < 2 or len(np.unique(d[pick])) < 2:
            continue
        picks.append(pick)
        for name in names:
            log_n, log_d, log_l = logs[name]
            theta, value = _fit_from(starts[name], log_n[pick], log_d[pick], log_l[pick], delta)
            draws[name].append(_as_fit(theta, value, len(n)))
    return draws, picks


def _variant_summaries(
    fits: dict[str, ScalingFit], draws: dict[str, list[ScalingFit]], budgets: np.ndarray,
    curve: Sequence[float], level: float, grid: dict,
) -> dict[str, dict]:  # fmt: skip
    """:func:`_variant_summary` of every variant at ``budgets``, with its frontier at each budget
    of ``curve`` (``curve``) when some are given."""
    variants = {name: _variant_summary(fits[name], draws[name], budgets, level, grid) for name in fits}
    if len(curve):
        dense = np.asarray(list(curve), dtype=np.float64)
        for name in fits:
            variants[name]["curve"] = _variant_summary(fits[name], draws[name], dense, level, grid)["optimal"]
    return variants


def _against_reference(
    data: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], fits: dict[str, ScalingFit],
    draws: dict[str, list[ScalingFit]], picks: list[np.ndarray], name: str, reference: str,
    budgets: np.ndarray, level: float,
) -> dict:  # fmt: skip
    """Variant ``name`` against ``reference`` (``comparisons[name]`` of :func:`compare_scaling_laws`):
    the fits' differences and frontier (:func:`_comparison`), the cells and the data multiplier."""
    n, d, _ = data[reference]
    reach = (float((6.0 * n * d).min()), float((6.0 * n * d).max()))
    fit, reference_fit, own, reference_draws = fits[name], fits[reference], draws[name], draws[reference]
    found = _comparison(fit, reference_fit, own, reference_draws, budgets, level, reach)
    found["cells"] = _cells(data[name][2] - data[reference][2], picks, level)
    found["data_multiplier"] = _data_multipliers(fit, reference_fit, own, reference_draws, np.unique(n), d, level)
    return found


def _cells(difference: np.ndarray, picks: list[np.ndarray], level: float) -> dict:
    """The data, no fit: the mean over grid cells of the variant's loss minus the reference's, its
    bootstrap interval over the draws' positions, and how many cells the variant is lower in."""
    return {
        "mean_difference": float(difference.mean()),
        "interval": _percentiles([difference[pick].mean() for pick in picks], level),
        "better": int((difference < 0).sum()),
        "cells": len(difference),
    }


def _json_numbers(value):
    """``value`` with every infinite or NaN float as None (JSON has no infinity: an optimum or an
    interval end past any finite number, from a fit the runs do not determine)."""
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_numbers(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _variant_summary(fit: ScalingFit, draws: list[ScalingFit], budgets: np.ndarray, level: float, grid: dict) -> dict:
    intervals = {name: _percentiles([getattr(f, name) for f in draws], level) for name in PARAMETERS}
    optimal = []
    for budget in budgets:
        best_n, best_d = fit.optimal(budget)
        found = np.array([f.optimal(budget) for f in draws])
        with np.errstate(all="ignore"):  # an undetermined draw's optimum may be 0 or infinite
            ratios = np.exp(np.log(found[:, 1]) - np.log(found[:, 0]))
        frontier = [f.frontier_loss(budget) for f in draws]
        optimal.append(
            {
                "flops": float(budget),
                "params": float(best_n),
                "tokens": float(best_d),
                "tokens_per_param": float(best_d / best_n),
                "loss": float(fit.frontier_loss(budget)),
                "params_interval": _percentiles(found[:, 0], level),
                "tokens_interval": _percentiles(found[:, 1], level),
                "tokens_per_param_interval": _percentiles(ratios, level),
                "loss_interval": _percentiles(frontier, level),
                # The optimum lies outside the sizes or budgets trained: the fit extrapolates.
                "extrapolated": bool(
                    not grid["params"][0] <= best_n <= grid["params"][1]
                    or not grid["tokens"][0] <= best_d <= grid["tokens"][1]
                ),
            }
        )
    undetermined = fit.at_bounds(grid["params"], grid["tokens"])
    return {"fit": fit.as_dict(), "at_bounds": undetermined, "intervals": intervals, "optimal": optimal}


def _data_multipliers(
    fit: ScalingFit, reference: ScalingFit, draws: list[ScalingFit], reference_draws: list[ScalingFit],
    sizes: np.ndarray, tokens: np.ndarray, level: float,
) -> list[dict]:  # fmt: skip
    """At each model size, the tokens the reference needs to reach the variant's loss at the middle
    budget, over that budget (the data multiplier at fixed N, from the fits): at the middle, a
    multiplier up to the ratio of the largest budget to it is read within the budgets trained."""
    budgets = np.unique(tokens)
    most = float(budgets[len(budgets) // 2])
    rows = []
    for size in sizes:
        value = float(reference.tokens_for(size, fit.predict(size, most)) / most)
        found = [b.tokens_for(size, a.predict(size, most)) / most for a, b in zip(draws, reference_draws)]
        interval = _percentiles(found, level)
        rows.append(
            {
                "params": float(size),
                "tokens": most,
                "multiplier": _finite(value),
                "interval": [_finite(v) for v in interval],
                "excludes_one": bool(interval[0] > 1 or interval[1] < 1),
                # The reference's matching tokens lie beyond the budgets trained.
                "extrapolated": bool(not budgets[0] <= value * most <= budgets[-1]),
            }
        )
    return rows


def _comparison(
    fit: ScalingFit, reference: ScalingFit, draws: list[ScalingFit], reference_draws: list[ScalingFit],
    budgets: np.ndarray, level: float, reach: tuple[float, float],
) -> dict:  # fmt: skip
    pairs = list(zip(draws, reference_draws))
    differences = {
        name: {
            "value": float(getattr(fit, name) - getattr(reference, name)),
            "interval": _percentiles([getattr(a, name) - getattr(b, name) for a, b in pairs], level),
        }
        for name in ("E", "alpha", "beta")
    }
    frontier = []
    for budget in budgets:
        losses = [a.frontier_loss(budget) - b.frontier_loss(budget) for a, b in pairs]
        multipliers = [b.compute_for(a.frontier_loss(budget)) / budget for a, b in pairs]
        loss_interval = _percentiles(losses, level)
        multiplier = reference.compute_for(fit.frontier_loss(budget)) / budget
        multiplier_interval = _percentiles(multipliers, level)
        frontier.append(
            {
                "flops": float(budget),
                "loss_difference": float(fit.frontier_loss(budget) - reference.frontier_loss(budget)),
                "loss_interval": loss_interval,
                "excludes_zero": bool(loss_interval[0] > 0 or loss_interval[1] < 0),
                # None: beyond any compute of the reference (its loss floor E is higher).
                "compute_multiplier": _finite(multiplier),
                "multiplier_interval": [_finite(v) for v in multiplier_interval],
                "excludes_one": bool(multiplier_interval[0] > 1 or multiplier_interval[1] < 1),
                "multiplier_draws_unbounded": int(np.sum(~np.isfinite(multipliers))),
                # The reference's compute that matches lies outside the compute of the runs.
                "multiplier_extrapolated": bool(not reach[0] <= multiplier * budget <= reach[1]),
            }
        )
    return {"level": level, "differences": differences, "frontier": frontier}
