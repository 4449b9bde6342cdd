"""The mathematics of the mixture search: which mixtures the proxies train on, the regression
from mixture weights to a target's bits per byte, and the mixture that regression proposes.

Sampling follows RegMix (Liu et al., ICLR 2025, "RegMix: Data Mixture as Regression for Language
Model Pre-training"; reference code ``mixture_config/synthesize_mixture.py``): each mixture is a
Dirichlet draw centred on the groups' natural token shares, its concentration scaled between 0.1
and 5 so that some draws put nearly all weight on one group, and a draw that breaks a bound (the
epoch cap, a min or max share) is rejected and drawn again, never clipped.

Two model families map weights to the target: gradient-boosted trees (LightGBM, RegMix's
regressor) and the data mixing law of Ye et al. 2024 ("Data Mixing Laws: Optimizing Data Mixtures
by Predicting Language Modeling Performance", equation 2), ``L(r) = c + k exp(sum_j t_j r_j)``.
Each is judged by cross-validated Spearman and MAE on proxies it was not fitted on, and the
proposal is RegMix's: the mean of the ``top_k`` sampled mixtures the fit predicts lowest, with a
bootstrap over the proxy runs for its intervals. Lower target is better (bits per byte).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from lightgbm import LGBMRegressor
from scipy.optimize import least_squares, minimize
from scipy.stats import pearsonr, spearmanr
from sklearn.linear_model import RidgeCV
from threadpoolctl import threadpool_limits

from pipeline.formats.configfile import ConfigError

# Weights are rounded to this many decimals so the hash of a mixture (the proxies' cache key) is
# stable across platforms; 1e-6 of a run's tokens is far below anything the mix stage resolves.
PRECISION = 6
# Shares are compared with the bounds and the simplex within this tolerance.
TOLERANCE = 1e-9
# Tries for one draw before the sampler says which bound rejects nearly everything.
MAX_TRIES = 10_000
# A group's Dirichlet prior is at least this share of a uniform one (PRIOR_FLOOR / G), so a group
# with few tokens is still drawn sometimes (RegMix flattens skewed priors with a temperature).
PRIOR_FLOOR = 0.1
# The candidate mixtures of propose() and the bootstrap's resamples come from streams of their own
# (seeded by [seed, stream], a proxy's draw k by [seed, k]: streams are k's no search reaches).
CANDIDATE_STREAM = 2**32 + 1
BOOTSTRAP_STREAM = 2**32 + 2
# Cross-validation is leave-one-out below this many proxies.
LOO_BELOW = 10


@dataclass(frozen=True, eq=False)
class Constraints:
    """The bounds a mixture must meet: ``groups`` orders the columns of every weight matrix,
    ``available`` the training tokens of each group's pool, ``budget`` the tokens of one run,
    ``max_epochs`` how often a group's pool may be repeated, and per-group min and max shares.
    Build it with :meth:`of`, which refuses bounds no mixture can meet."""

    groups: tuple[str, ...]
    available: np.ndarray
    budget: int
    max_epochs: float
    min_share: np.ndarray
    max_share: np.ndarray

    @classmethod
    def of(
        cls,
        groups_tokens: Mapping[str, int],
        budget: int,
        max_epochs: float,
        min_share: Mapping[str, float] | float = 0.0,
        max_share: Mapping[str, float] | float = 1.0,
    ) -> Constraints:
        """Constraints over ``groups_tokens`` (group -> training tokens, in column order); a
        ``ConfigError`` (a ValueError) of one line when no mixture can satisfy them."""
        groups = tuple(groups_tokens)
        if not groups:
            raise ConfigError("no groups to mix: give at least one group with its training tokens")
        if budget <= 0 or max_epochs <= 0:
            raise ConfigError(f"budget {budget} and max_epochs {max_epochs} must both be positive; fix them")
        available = np.array([float(groups_tokens[g]) for g in groups])
        if (available < 0).any():
            bad = groups[int(np.argmin(available))]
            raise ConfigError(f"group {bad!r} has a negative token count; count its tokens again")
        lo = _per_group(min_share, groups, "min_share")
        hi = _per_group(max_share, groups, "max_share")
        made = cls(groups, available, int(budget), float(max_epochs), lo, hi)
        made._check_satisfiable()
        return made

    @property
    def natural(self) -> np.ndarray:
        """The groups' shares of the available tokens (the mixture of no reweighting)."""
        total = self.available.sum()
        if total <= 0:
            return np.full(len(self.groups), 1.0 / len(self.groups))
        return self.available / total

    @property
    def upper(self) -> np.ndarray:
        """Each group's largest share: its max_share, or fewer if its pool repeated max_epochs
        times cannot fill that share of the budget (an epoch cap is a share cap)."""
        return np.minimum(self.max_share, self.max_epochs * self.available / self.budget)

    def feasible(self, weights: np.ndarray) -> np.ndarray:
        """One bool per row of ``weights``: in the simplex and every share within its bounds."""
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        in_simplex = (np.abs(w.sum(axis=1) - 1.0) <= TOLERANCE) & (w >= -TOLERANCE).all(axis=1)
        in_box = (w >= self.min_share - TOLERANCE) & (w <= self.upper + TOLERANCE)
        return in_simplex & in_box.all(axis=1)

    def _check_satisfiable(self) -> None:
        """Raise the one-line error that names the bound no mixture can meet."""
        upper = self.upper
        for g, lo, up, hi in zip(self.groups, self.min_share, upper, self.max_share):
            if lo > up + TOLERANCE:
                cap = f"max_share {hi:g}" if up >= hi else f"{self.max_epochs:g} epochs of its pool"
                raise ConfigError(
                    f"group {g!r}: min_share {lo:g} exceeds its upper bound {up:.6g} ({cap}); "
                    "lower min_share, or raise max_share / max_epochs"
                )
        if self.min_share.sum() > 1.0 + TOLERANCE:
            raise ConfigError(
                f"min_share sums to {self.min_share.sum():.6g} over the groups, over 1: "
                "no mixture meets them; lower them to sum to at most 1"
            )
        if upper.sum() < 1.0 - TOLERANCE:
            raise ConfigError(
                f"the groups' upper bounds (max_share, and max_epochs {self.max_epochs:g} x tokens "
                f"/ budget {self.budget:,}) sum to {upper.sum():.6g}, under 1: no mixture fills "
                "the budget; raise max_epochs or max_share, or lower the budget"
            )


def _per_group(value: Mapping[str, float] | float, groups: tuple[str, ...], name: str) -> np.ndarray:
    """A share given for all groups or per group (others get the default: 0 for min, 1 for
    max) as an array in group order; unknown names and shares outside [0, 1] refused."""
    default = 0.0 if name == "min_share" else 1.0
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(groups))
        if unknown:
            raise ConfigError(
                f"{name} names unknown group(s) {', '.join(map(repr, unknown))}; "
                f"the groups are {', '.join(map(repr, groups))}"
            )
        shares = np.array([float(value.get(g, default)) for g in groups])
    else:
        shares = np.full(len(groups), float(value))
    bad = (shares < 0) | (shares > 1) | ~np.isfinite(shares)
    if bad.any():
        g = groups[int(np.argmax(bad))]
        raise ConfigError(f"{name} of group {g!r} is {shares[bad][0]:g}; give a share in [0, 1]")
    return shares


@dataclass(frozen=True, eq=False)
class Sampled:
    """Sampled mixtures, one row per draw (columns in the constraints' group order), and how many
    draws broke a bound and were drawn again."""

    weights: np.ndarray
    rejected: int


def project(point: np.ndarray, constraints: Constraints) -> np.ndarray:
    """The feasible mixture nearest ``point`` (Euclidean): clip(point + tau, min, upper) with tau
    found by bisection so the shares sum to 1. The sampler centres its Dirichlet there, so bounds
    the natural shares break do not reject nearly every draw."""
    lo, hi = constraints.min_share, constraints.upper
    a, b = float(np.min(lo - point)) - 1.0, float(np.max(hi - point)) + 1.0
    for _ in range(200):
        tau = 0.5 * (a + b)
        if np.clip(point + tau, lo, hi).sum() > 1.0:
            b = tau
        else:
            a = tau
    return np.clip(point + 0.5 * (a + b), lo, hi)


def sample_mixtures(
    constraints: Constraints,
    n: int,
    seed: int,
    concentration: tuple[float, float] = (0.1, 5.0),
    start: int = 0,
) -> Sampled:
    """``n`` mixtures as RegMix samples them: draw k (``start`` .. ``start + n - 1``) uses its own
    generator, seeded by (seed, k), so a search with a larger n repeats the smaller one's draws
    exactly (the proxies are cached by their weights).

    Each try draws a scale log-uniformly in ``concentration`` and then a Dirichlet with
    alpha = scale * G * prior, the prior being the natural shares floored at PRIOR_FLOOR / G and
    moved into the bounds (:func:`project`); small scales put nearly all weight on one group.
    RegMix's reference code uses alpha = scale * prior (total concentration 0.1 to 5 whatever G);
    the factor G keeps the per-group concentration, and so the spread, the same for any number of
    groups. Min shares are a floor every mixture gets: the Dirichlet shares out the rest
    (1 - their sum), so they never reject a draw (a group pinned at min = upper gets exactly its
    share). Weights are rounded to PRECISION decimals, summing to 1. A try over an upper bound
    (max share or epoch cap, after rounding) is rejected and drawn again from the same generator,
    never clipped; after MAX_TRIES rejections for one draw a ConfigError names the bound."""
    lo_c, hi_c = concentration
    if not 0 < lo_c <= hi_c:
        raise ValueError(f"concentration {concentration} must be 0 < low <= high")
    floor, rest, base = _shape(constraints)
    log_lo, log_hi = np.log(lo_c), np.log(hi_c)
    upper = constraints.upper + TOLERANCE
    rows, rejected = np.empty((n, len(base))), 0
    for i, k in enumerate(range(start, start + n)):
        rng = np.random.default_rng([seed, k])
        tries = 0
        while True:
            share = rng.dirichlet(np.exp(rng.uniform(log_lo, log_hi)) * base)
            w = _rounded(floor + rest * share)
            if np.isfinite(w).all() and (w <= upper).all() and (w >= floor - TOLERANCE).all():
                break
            tries += 1
            if tries >= MAX_TRIES:
                raise ConfigError(_rejection_message(constraints, k, seed))
        rows[i] = w
        rejected += tries
    return Sampled(rows, rejected)


def _shape(constraints: Constraints) -> tuple[np.ndarray, float, np.ndarray]:
    """(min shares, the mass left above them, G times the Dirichlet's prior over that mass): the
    natural shares floored at PRIOR_FLOOR / G and moved into the bounds, less the min shares. A
    group with no room above its min keeps a tiny alpha: drawn ~0, rounded to exactly 0."""
    count = len(constraints.groups)
    prior = np.maximum(constraints.natural, PRIOR_FLOOR / count)
    centre = project(prior / prior.sum(), constraints)
    floor = constraints.min_share
    rest = max(0.0, 1.0 - float(floor.sum()))
    room = np.maximum(centre - floor, 0.0)
    free = room / room.sum() if room.sum() > 0 else np.full(count, 1.0 / count)
    return floor, rest, count * np.maximum(free, 1e-12)


def _rounded(w: np.ndarray) -> np.ndarray:
    """``w`` rounded to PRECISION decimals, the rounding error put on its largest share so the
    row sums to 1 (within float error)."""
    r = np.round(w, PRECISION)
    top = int(np.argmax(r))
    r[top] = round(r[top] + 1.0 - r.sum(), PRECISION)
    return r


def _rejection_message(constraints: Constraints, k: int, seed: int) -> str:
    """Which upper bound rejected draw k's tries, re-counted on a fresh sample of the same kind."""
    rng = np.random.default_rng([seed, k, 99])
    floor, rest, base = _shape(constraints)
    w = floor + rest * rng.dirichlet(base, size=2000)
    above = (w > constraints.upper + TOLERANCE).mean(axis=0)
    worst = int(np.argmax(above))
    return (
        f"draw {k}: {MAX_TRIES:,} tries all broke a bound; group {constraints.groups[worst]!r}'s "
        f"upper bound {constraints.upper[worst]:.6g} (max_share or epoch cap) rejects "
        f"{above[worst]:.0%} of draws; loosen the upper bounds (they sum to "
        f"{constraints.upper.sum():.4g})"
    )


def candidate_pool(
    constraints: Constraints,
    n: int,
    seed: int,
    concentration: tuple[float, float] = (0.1, 5.0),
) -> np.ndarray:
    """``n`` mixtures from :func:`sample_mixtures`'s distribution (same prior, scales, rounding
    and rejection), drawn in vectorized blocks from a stream the proxies never use: the many
    candidates the fit is optimized over, some 20x faster than one generator per draw."""
    floor, rest, base = _shape(constraints)
    rng = np.random.default_rng([seed, CANDIDATE_STREAM])
    upper = constraints.upper + TOLERANCE
    kept: list[np.ndarray] = []
    have, drawn = 0, 0
    while have < n:
        size = max(1024, 2 * (n - have))
        scale = np.exp(rng.uniform(np.log(concentration[0]), np.log(concentration[1]), size))
        gam = rng.standard_gamma(scale[:, None] * base)
        w = _rounded_rows(floor + rest * gam / gam.sum(axis=1, keepdims=True))
        ok = np.isfinite(w).all(axis=1) & (w <= upper).all(axis=1)
        ok &= (w >= floor - TOLERANCE).all(axis=1)
        kept.append(w[ok])
        have, drawn = have + int(ok.sum()), drawn + size
        if drawn >= MAX_TRIES * 100 and have < n // 100 + 1:
            raise ConfigError(_rejection_message(constraints, 0, seed))
    return np.concatenate(kept)[:n]


def _rounded_rows(w: np.ndarray) -> np.ndarray:
    """:func:`_rounded` for every row of ``w``."""
    r = np.round(w, PRECISION)
    top = np.argmax(r, axis=1)
    rows = np.arange(len(r))
    r[rows, top] = np.round(r[rows, top] + 1.0 - r.sum(axis=1), PRECISION)
    return r


# RegMix's regressor (regression_fitting/regression.ipynb: gbdt, L2 objective, learning rate 1e-2,
# up to 1000 rounds with early stopping on held-out mixtures) fits 512 proxies. A search here has
# 16 to 64, where LightGBM's defaults (min_child_samples=20, min_data_in_bin=3) allow no split at
# all: leaves of 3 proxies, one proxy per bin, shallow trees, and a fixed number of rounds at a
# higher rate instead of early stopping (there are too few proxies to hold some out). On synthetic
# mixing laws (G = 5, N = 16/32/64, 6 seeds) 4 leaves of depth 2 at 100 x 0.1 matched or beat 8
# leaves of depth 3 at 300 x 0.05 in CV Spearman (0.63/0.88/0.94 vs 0.62/0.88/0.93) and predict
# 3x faster, which the bootstrap needs. One thread and deterministic=True repeat a fit bit for bit.
TREE_PARAMS = {
    "objective": "regression",
    "n_estimators": 100,
    "learning_rate": 0.1,
    "num_leaves": 4,
    "max_depth": 2,
    "min_child_samples": 3,
    "min_child_weight": 1e-3,
    "min_data_in_bin": 1,
    "reg_lambda": 1e-3,
    "n_jobs": 1,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
}


class TreesModel:
    """A LightGBM regression from mixture weights to the target."""

    def __init__(self, regressor: LGBMRegressor) -> None:
        self.regressor = regressor

    def predict(self, weights: np.ndarray) -> np.ndarray:
        return self.regressor.predict(np.atleast_2d(weights))


@dataclass(frozen=True, eq=False)
class LawModel:
    """Ye et al.'s mixing law for one target, ``L(r) = c + exp(sum_j t_j r_j)``: their
    ``c + k exp(t . r)`` with k folded into t (shares sum to 1, so log k adds to every t_j)."""

    c: float
    t: np.ndarray

    def predict(self, weights: np.ndarray) -> np.ndarray:
        return self.c + np.exp(np.atleast_2d(weights) @ self.t)

    @property
    def parameters(self) -> np.ndarray:
        return np.concatenate([[self.c], self.t])


def _fit_trees(weights: np.ndarray, target: np.ndarray, seed: int, warm=None) -> TreesModel:
    """LightGBM with TREE_PARAMS, seeded."""
    regressor = LGBMRegressor(**TREE_PARAMS, random_state=seed)
    regressor.fit(weights, target)
    return TreesModel(regressor)


# Starting values of c for the law fit, below the lowest target by these multiples of its range
# (with t then solved linearly from log(y - c)); a seeded jitter adds as many random ones.
LAW_OFFSETS = (0.05, 0.3, 1.0, 3.0)
# A ridge on t, in units of the target's range: a t_j of 10 costs as much as a residual of a tenth
# of the range, so a few proxies cannot fit an exponent that explodes between them.
LAW_RIDGE = 0.01


def _fit_law(weights: np.ndarray, target: np.ndarray, seed: int, warm=None) -> LawModel:
    """The mixing law by nonlinear least squares (scipy's trust-region reflective solver, analytic
    Jacobian) from several starts, keeping the lowest sum of squares. Each start fixes c below the
    lowest target and solves t by linear least squares on log(y - c), so every start begins near
    a fit; ``warm`` (a LawModel) adds its parameters as a start (the bootstrap's refits)."""
    w, y = np.asarray(weights, float), np.asarray(target, float)
    spread = max(float(np.ptp(y)), 1e-6)
    rng = np.random.default_rng([seed, len(y)])
    offsets = [*LAW_OFFSETS, *np.exp(rng.uniform(np.log(0.02), np.log(5.0), len(LAW_OFFSETS)))]
    starts = [] if warm is None else [warm.parameters]
    for offset in offsets if warm is None else offsets[:1]:
        c0 = float(y.min()) - offset * spread
        t0 = np.linalg.lstsq(w, np.log(y - c0), rcond=None)[0]
        starts.append(np.concatenate([[c0], t0]))

    ridge = LAW_RIDGE * spread

    def residuals(p: np.ndarray) -> np.ndarray:
        return np.concatenate([p[0] + np.exp(np.clip(w @ p[1:], -50, 50)) - y, ridge * p[1:]])

    def jacobian(p: np.ndarray) -> np.ndarray:
        e = np.exp(np.clip(w @ p[1:], -50, 50))
        fit = np.column_stack([np.ones(len(y)), e[:, None] * w])
        penalty = np.column_stack([np.zeros(len(p) - 1), ridge * np.eye(len(p) - 1)])
        return np.vstack([fit, penalty])

    best = None
    for p0 in starts:
        fit = least_squares(residuals, p0, jac=jacobian, method="trf", max_nfev=200)
        if best is None or fit.cost < best.cost:
            best = fit
    return LawModel(float(best.x[0]), best.x[1:].copy())


# A share below this counts as this much in log space: a group a mixture leaves out still has a
# document or two in it at the demo's budgets, not minus infinity.
LOG_FLOOR = 1e-3
LOGLINEAR_ALPHAS = tuple(np.logspace(-6, 1, 15))  # the ridge penalties leave-one-out chooses from


@dataclass(frozen=True, eq=False)
class LogLinearModel:
    """``L(r) = a + sum_j b_j log(r_j + LOG_FLOOR)``: each group's share acting on the target as a
    power law of its tokens would (a ridge regression on log shares, its penalty chosen by
    leave-one-out). On the demo's proxies it follows the held-out mean better than the mixing law,
    whose single exponential bends one way for every group (docs/mixsearch.md)."""

    regressor: RidgeCV

    def predict(self, weights: np.ndarray) -> np.ndarray:
        return self.regressor.predict(np.log(np.atleast_2d(weights) + LOG_FLOOR))


def _fit_loglinear(weights: np.ndarray, target: np.ndarray, seed: int, warm=None) -> LogLinearModel:
    """The log-linear model, its penalty chosen by leave-one-out (no randomness: ``seed`` unused)."""
    regressor = RidgeCV(alphas=LOGLINEAR_ALPHAS).fit(np.log(np.asarray(weights) + LOG_FLOOR), target)
    return LogLinearModel(regressor)


Model = TreesModel | LawModel | LogLinearModel
FAMILIES: dict[str, Callable[..., Model]] = {"trees": _fit_trees, "law": _fit_law, "loglinear": _fit_loglinear}


def fit_model(family: str, weights: np.ndarray, target: np.ndarray, seed: int) -> Model:
    """The ``family`` ("trees" or "law") fitted to proxies' weights (n, G) and target (n,)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; use one of {', '.join(FAMILIES)}")
    w, y = np.asarray(weights, float), np.asarray(target, float)
    if w.ndim != 2 or len(w) != len(y):
        raise ValueError(f"weights {w.shape} and target {y.shape} do not match: one row per run")
    if not (np.isfinite(w).all() and np.isfinite(y).all()):
        rows = np.flatnonzero(~(np.isfinite(w).all(axis=1) & np.isfinite(y)))
        raise ValueError(f"proxy runs {rows.tolist()} have a missing or infinite value; drop them")
    with threadpool_limits(limits=1, user_api="blas"):
        return FAMILIES[family](w, y, seed)


def _splits(n: int, seed: int, folds: int) -> list[np.ndarray]:
    """Test indices of each fold: leave-one-out under LOO_BELOW runs, else ``folds`` seeded
    folds of near-equal size."""
    if n < LOO_BELOW:
        return [np.array([i]) for i in range(n)]
    order = np.random.default_rng([seed, n]).permutation(n)
    return [np.sort(part) for part in np.array_split(order, min(folds, n))]


def cross_validate(family: str, weights: np.ndarray, target: np.ndarray, seed: int, folds: int = 5) -> dict:
    """How well ``family`` predicts proxies it was not fitted on: K-fold (seeded; leave-one-out
    under LOO_BELOW runs) out-of-fold predictions, their Spearman and Pearson correlation with the
    measured target (None where the predictions are constant) and mean absolute error."""
    w, y = np.asarray(weights, float), np.asarray(target, float)
    if len(y) < 3:
        raise ValueError(f"cross-validation needs at least 3 proxy runs, got {len(y)}")
    predicted = np.empty(len(y))
    splits = _splits(len(y), seed, folds)
    for test in splits:
        train = np.setdiff1d(np.arange(len(y)), test)
        predicted[test] = fit_model(family, w[train], y[train], seed).predict(w[test])
    constant = np.ptp(predicted) == 0 or np.ptp(y) == 0
    return {
        "spearman": None if constant else float(spearmanr(predicted, y).statistic),
        "pearson": None if constant else float(pearsonr(predicted, y).statistic),
        "mae": float(np.mean(np.abs(predicted - y))),
        "predicted": predicted.tolist(),
        "folds": len(splits),
    }


def choose_fit(weights: np.ndarray, target: np.ndarray, seed: int, folds: int = 5) -> dict:
    """Cross-validate every family and pick the higher Spearman (lower MAE breaks a tie):
    ``{"family": name, "families": {name: cross_validate(...)}}``."""
    families = {f: cross_validate(f, weights, target, seed, folds) for f in FAMILIES}

    def rank(f: str) -> tuple[float, float]:
        rho = families[f]["spearman"]
        return (-np.inf if rho is None else rho, -families[f]["mae"])

    return {"family": max(families, key=rank), "families": families}


def predict_order(family: str, weights: np.ndarray, target: np.ndarray, mixtures: np.ndarray, seed: int) -> np.ndarray:
    """The prediction at ``mixtures`` of ``family`` fitted on all proxies: the proxies' view of
    mixtures trained again at a larger size (proxy validity compares its order with theirs)."""
    return fit_model(family, weights, target, seed).predict(np.asarray(mixtures, float))


@dataclass(frozen=True, eq=False)
class MixingLaw:
    """A known data mixing law for tests and benchmarks: group i's loss is
    ``c_i + k_i exp(sum_j t_ij r_j)`` (Ye et al. 2024, one law per domain) and the target is
    ``sum_i target_i * loss_i``. Calling it on weights (n, G) gives the target."""

    c: np.ndarray
    k: np.ndarray
    t: np.ndarray
    target: np.ndarray

    def group_losses(self, weights: np.ndarray) -> np.ndarray:
        return self.c + self.k * np.exp(np.atleast_2d(weights) @ self.t.T)

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        return self.group_losses(weights) @ self.target

    def optimum(self, constraints: Constraints, starts: int = 8) -> np.ndarray:
        """The mixture of lowest target within ``constraints`` (SLSQP from the projected natural
        shares, uniform shares and sampled mixtures; the best)."""
        lo, hi = constraints.min_share, constraints.upper
        count = len(constraints.groups)
        points = [project(constraints.natural, constraints), project(np.full(count, 1 / count), constraints)]
        points += list(candidate_pool(constraints, starts, seed=0))
        best = None
        for p0 in points:
            fit = minimize(
                lambda r: float(self(r)[0]),
                p0,
                method="SLSQP",
                bounds=list(zip(lo, hi)),
                constraints=[{"type": "eq", "fun": lambda r: r.sum() - 1.0}],
                options={"ftol": 1e-12, "maxiter": 500},
            )
            if best is None or fit.fun < best.fun:
                best = fit
        return project(best.x, constraints)


def synthetic_law(groups: int, seed: int, target: np.ndarray | None = None) -> MixingLaw:
    """A plausible random mixing law over ``groups`` groups in bits per byte: each group's loss
    falls steeply with its own share (t_ii in [-4, -2]) and mildly with the others' (transfer,
    t_ij in [-0.6, 0.3]); floors c_i in [0.7, 1.5], k_i in [0.4, 1.0]. ``target`` weights the
    group losses (default: their mean; one-hot: one group's own held-out loss)."""
    rng = np.random.default_rng([seed, groups])
    t = rng.uniform(-0.6, 0.3, (groups, groups))
    t[np.diag_indices(groups)] = rng.uniform(-4.0, -2.0, groups)
    weights = np.full(groups, 1.0 / groups) if target is None else np.asarray(target, float)
    return MixingLaw(rng.uniform(0.7, 1.5, groups), rng.uniform(0.4, 1.0, groups), t, weights)


def _top_mean(pool: np.ndarray, predicted: np.ndarray, top_k: int) -> np.ndarray:
    """RegMix's optimum: the mean of the ``top_k`` mixtures predicted lowest. The bounds are a box
    intersected with the simplex, a convex set, so the mean of feasible mixtures is feasible."""
    top = np.argpartition(predicted, min(top_k, len(pool)) - 1)[:top_k]
    return pool[top].mean(axis=0)


def _mixture(mean: np.ndarray, constraints: Constraints) -> np.ndarray:
    """The proposal rounded like a sampled mixture (a stable cache key for the flow), unless
    rounding pushes a share at its bound over it (then the mean as it is)."""
    rounded = _rounded(mean)
    return rounded if constraints.feasible(rounded)[0] else mean


def propose(
    family: str,
    weights: np.ndarray,
    target: np.ndarray,
    constraints: Constraints,
    seed: int,
    candidates: int = 100_000,
    top_k: int = 100,
    resamples: int = 200,
    pool: np.ndarray | None = None,
) -> dict:
    """The mixture ``family``, fitted on all proxies, predicts best: the mean of the ``top_k``
    lowest-predicted of ``candidates`` mixtures from :func:`candidate_pool` (or ``pool``, shared
    between targets), with ``predicted`` the fit's target there.

    Intervals (95%, percentile) come from ``resamples`` bootstrap resamples of the proxy runs:
    refit, re-optimize, and record the new proposal's weights and the refit's prediction at the
    proposal. Each resample re-optimizes over the same candidates and top_k as the proposal, so
    the interval is of the proposal's own estimator (a smaller pool's top fraction is a noisier
    one, whose interval can miss the proposal); trees predict 100,000 candidates in about 0.2 s,
    40 s for 200 resamples."""
    w, y = np.asarray(weights, float), np.asarray(target, float)
    if pool is None:
        pool = candidate_pool(constraints, candidates, seed)
    model = fit_model(family, w, y, seed)
    best = _mixture(_top_mean(pool, model.predict(pool), top_k), constraints)
    predicted = float(model.predict(best)[0])
    boot_w, boot_p = np.empty((resamples, w.shape[1])), np.empty(resamples)
    for b in range(resamples):
        rows = np.random.default_rng([seed, BOOTSTRAP_STREAM, b]).integers(0, len(y), len(y))
        refit = _refit(family, model, w[rows], y[rows], seed)
        boot_w[b] = _top_mean(pool, refit.predict(pool), top_k)
        boot_p[b] = refit.predict(best)[0]
    groups = constraints.groups
    lo_w, hi_w = np.percentile(boot_w, [2.5, 97.5], axis=0) if resamples else (best, best)
    lo_p, hi_p = np.percentile(boot_p, [2.5, 97.5]) if resamples else (predicted, predicted)
    return {
        "weights": {g: float(v) for g, v in zip(groups, best)},
        "interval": {g: [float(a), float(b)] for g, a, b in zip(groups, lo_w, hi_w)},
        "predicted": predicted,
        "predicted_interval": [float(lo_p), float(hi_p)],
        "family": family,
        "candidates": len(pool),
        "top_k": top_k,
        "resamples": resamples,
    }


def _refit(family: str, fitted: Model, weights: np.ndarray, target: np.ndarray, seed: int) -> Model:
    """A bootstrap refit: the law starts from the full fit (one local solve, not a multi-start)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return FAMILIES[family](weights, target, seed, warm=fitted if family == "law" else None)


def synthetic_proxies(
    law: MixingLaw, constraints: Constraints, n: int, seed: int, noise: float = 0.003
) -> tuple[np.ndarray, np.ndarray]:
    """Proxy runs from a known law: ``n`` sampled mixtures (seed as the search's) and their
    target with Gaussian noise of ``noise`` bits per byte (a proxy's seed-to-seed spread)."""
    weights = sample_mixtures(constraints, n, seed).weights
    return weights, law(weights) + np.random.default_rng([seed, n]).normal(0.0, noise, n)
