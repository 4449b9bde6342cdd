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
        c = np.asarray(flops, dtype=np.float64) / 6.0
        total = self.alpha + self.beta
        g = (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / total)
        return g * c ** (self.beta / total), c ** (self.alpha / total) / g

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
    best, best_value = None, np.inf
    bounds = [(None, None), (None, None), (None, None), (1e-3, 5.0), (1e-3, 5.0)]
    for start in starts:
        found = minimize(
            _objective, np.asarray(start, dtype=np.float64), args=(log_n, log_d, log_l, delta),
            jac=True, method="L-BFGS-B", bounds=bounds, options=OPTIMIZER,
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
    """The fit on all runs and percentile intervals from ``resamples`` fits on runs drawn with
    replacement (each started from the fit on all runs and three starts near it). Returns
    ``fit`` (ScalingFit.as_dict), ``intervals`` per parameter ``[low, high]``, and per budget of
    ``flops`` the optimal N and D with their intervals. A resample with fewer than two sizes or
    two budgets is drawn again."""
    n, d, loss = _checked(params, tokens, losses)
    log_n, log_d, log_l = np.log(n), np.log(d), np.log(loss)
    fit = fit_scaling_law(n, d, loss, delta)
    start = np.array([np.log(fit.A), np.log(fit.B), np.log(fit.E), fit.alpha, fit.beta])
    extra = [start + shift for shift in ([0.0, 0.0, 0.0, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0, 0.1], [1.0, 1.0, -0.5, 0, 0])]
    rng = np.random.default_rng(seed)
    draws: list[ScalingFit] = []
    while len(draws) < resamples:
        pick = rng.integers(0, len(n), len(n))
        if len(np.unique(n[pick])) < 2 or len(np.unique(d[pick])) < 2:
            continue
        theta, value = _fit_from([start, *extra], log_n[pick], log_d[pick], log_l[pick], delta)
        draws.append(_as_fit(theta, value, len(n)))
    tail = (1.0 - level) / 2.0 * 100.0
    intervals = {
        name: [float(v) for v in np.percentile([getattr(f, name) for f in draws], [tail, 100.0 - tail])]
        for name in PARAMETERS
    }
    optimal = []
    for budget in flops:
        best_n, best_d = fit.optimal(budget)
        found = np.array([f.optimal(budget) for f in draws])
        optimal.append(
            {
                "flops": float(budget),
                "params": float(best_n),
                "tokens": float(best_d),
                "tokens_per_param": float(best_d / best_n),
                "params_interval": [float(v) for v in np.percentile(found[:, 0], [tail, 100.0 - tail])],
                "tokens_interval": [float(v) for v in np.percentile(found[:, 1], [tail, 100.0 - tail])],
                "tokens_per_param_interval": [
                    float(v) for v in np.percentile(found[:, 1] / found[:, 0], [tail, 100.0 - tail])
                ],
            }
        )
    return {"fit": fit.as_dict(), "level": level, "resamples": resamples, "intervals": intervals, "optimal": optimal}
