"""Statistics over seeds: the spread of a measure, two variants compared (Student's t paired by
seed, Welch's t otherwise), the paired bootstrap over seeds and test items, Holm's correction over
a family of comparisons (the primary family, named before the run, among them:
:func:`pre_register`), the sentence a comparison supports; and the power-law fit of loss against
tokens with the tokens it needs to reach a loss."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats


def spread(values: dict | list) -> dict:
    """Mean, sample standard deviation (0 for one value), min, max, n and the mean's 95%
    t-interval (n - 1 degrees of freedom; None for one value) of the seeds' values; ``values``
    maps seed -> value (a list counts its positions as seeds). ``by_seed`` keeps them, for paired
    comparisons."""
    items = values.items() if isinstance(values, dict) else enumerate(values)
    by_seed = {str(seed): float(v) for seed, v in items if v is not None and math.isfinite(v)}
    array = np.asarray(list(by_seed.values()), dtype=np.float64)
    if array.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0, "ci95": None, "by_seed": {}}
    mean, std = float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else 0.0
    half = float(stats.t.ppf(0.975, array.size - 1)) * std / math.sqrt(array.size) if array.size > 1 else None
    return {
        "mean": mean,
        "std": std,
        "ci95": [mean - half, mean + half] if half is not None else None,
        "min": float(array.min()),
        "max": float(array.max()),
        "n": int(array.size),
        "by_seed": by_seed,
    }


ALPHA = 0.05  # the family-wise error rate of each family of comparisons (Holm)


def compare(a: dict, b: dict, lower_is_better: bool) -> dict:
    """``a`` against ``b`` (two :func:`spread` results): the difference, its standard error, a
    two-sided t-test and the 95% confidence interval of the difference.

    Paired by seed when both have the same seeds (two or more): a seed fixes the model's
    initialization and the order of its batches, so runs of one seed on two variants differ only by
    their data, and the per-seed differences d_i are what varies: Student's t on mean(d) with
    standard error sd(d) / sqrt(n) and n - 1 degrees of freedom. Unpaired otherwise: Welch's t on
    the difference of means (Welch-Satterthwaite degrees of freedom). With fewer than two values
    on a side there is no test (``p`` is None). ``better`` is the direction of the difference
    (whether ``a`` is better), not a verdict: :func:`holm` decides which differences are
    significant within a family of comparisons."""
    empty = {
        "difference": None,
        "stderr": None,
        "df": None,
        "t": None,
        "p": None,
        "ci95": None,
        "better": None,
        "paired": False,
        "test": None,
    }
    if a["mean"] is None or b["mean"] is None:
        return empty
    seeds = sorted(a["by_seed"])
    paired = len(seeds) >= 2 and seeds == sorted(b["by_seed"])
    if paired:
        d = np.array([a["by_seed"][s] - b["by_seed"][s] for s in seeds])
        difference = float(d.mean())
        stderr = float(d.std(ddof=1) / math.sqrt(d.size))
        df = float(d.size - 1)
    else:
        difference = a["mean"] - b["mean"]
        va, vb = (a["std"] ** 2) / max(a["n"], 1), (b["std"] ** 2) / max(b["n"], 1)
        stderr = math.sqrt(va + vb)
        if a["n"] < 2 or b["n"] < 2:
            df = None
        elif va + vb == 0:
            df = float(a["n"] + b["n"] - 2)
        else:
            df = (va + vb) ** 2 / (va**2 / (a["n"] - 1) + vb**2 / (b["n"] - 1))
    better = (difference < 0) if lower_is_better else (difference > 0)
    result = {
        **empty,
        "difference": difference,
        "stderr": stderr,
        "df": df,
        "paired": paired,
        "better": bool(better) if difference != 0 else None,
    }
    if df is None:
        return result
    if stderr == 0:
        # Every seed shows exactly the same difference (accuracy over a few hundred items moves in
        # steps of one item, so seeds agree often): a t-test has no spread to divide by, and the
        # difference has no interval. The exact randomization test still holds.
        p = exact_p(a, b, paired) if difference != 0 else 1.0
        return {**result, "p": p, "test": "exact" if p is not None else None}
    t = difference / stderr
    p = float(2 * stats.t.sf(abs(t), df))
    half = float(stats.t.ppf(0.975, df) * stderr)
    return {**result, "t": t, "p": p, "ci95": [difference - half, difference + half], "test": "t"}


EXACT_MAX_ARRANGEMENTS = 200_000


def exact_p(a: dict, b: dict, paired: bool) -> float | None:
    """The two-sided p-value of the exact randomization test of ``a`` against ``b``: paired, every
    sign of every seed's difference (Fisher's sign-flip test); unpaired, every split of the pooled
    values into groups of the two sizes. The share of arrangements whose difference is at least as
    large as the one seen; None past :data:`EXACT_MAX_ARRANGEMENTS`. With n paired seeds that
    all agree, it is 2 / 2^n: 0.5 for two seeds, 0.25 for three, so two or three seeds never make
    an identical difference significant, as a t-test's p = 0 would."""
    if paired:
        seeds = sorted(a["by_seed"])
        d = np.array([a["by_seed"][s] - b["by_seed"][s] for s in seeds])
        if 2**d.size > EXACT_MAX_ARRANGEMENTS:
            return None
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        means = np.abs(signs @ d) / d.size
        return float(np.mean(means >= abs(d.mean()) - 1e-12))
    values = np.array([*a["by_seed"].values(), *b["by_seed"].values()])
    n_a = len(a["by_seed"])
    if math.comb(values.size, n_a) > EXACT_MAX_ARRANGEMENTS:
        return None
    observed = abs(values[:n_a].mean() - values[n_a:].mean())
    total = values.sum()
    count = arrangements = 0
    for chosen in itertools.combinations(range(values.size), n_a):
        first = values[list(chosen)].sum()
        arrangements += 1
        count += abs(first / n_a - (total - first) / (values.size - n_a)) >= observed - 1e-12
    return count / arrangements


BOOTSTRAP_REPLICATES = 2000


def bootstrap_ratio_difference(
    numerator_a: np.ndarray,
    numerator_b: np.ndarray,
    denominator: np.ndarray,
    strata: np.ndarray,
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = 0,
) -> dict:
    """A paired bootstrap over seeds and test items of ``stat(a) - stat(b)``.

    ``numerator_a`` and ``numerator_b`` are ``(seeds, items)``, the same items in the same order
    (for held-out text: each document's bits; for a task: 1 where an item was classified right);
    ``denominator`` is ``(items,)`` (the document's bytes; 1 per task item). A model's statistic on
    one stratum (a held-out set) is its summed numerator over the summed denominator; over several
    strata, their mean (each set counts once, as in the headline). Each replicate draws the seeds
    with replacement and, within each stratum, the items with replacement, the same draws for both
    sides (paired), and takes the mean over the drawn seeds. Returns the observed difference, the
    95% percentile interval and a two-sided p-value (twice the smaller tail share beyond 0, at most
    1), with the number of items and replicates.

    With few seeds the seed half of this resampling is coarse (3 seeds have 10 distinct draws) and
    narrower than the t-interval; it is reported beside the seed t-test, for what the test items'
    variation adds, not instead of it."""
    rng = np.random.default_rng(seed)
    seeds = numerator_a.shape[0]
    chosen_seeds = rng.integers(0, seeds, size=(replicates, seeds))
    labels = np.unique(strata)
    observed, replicated = 0.0, np.zeros(replicates)
    for label in labels:
        columns = np.flatnonzero(strata == label)
        a, b, d = numerator_a[:, columns], numerator_b[:, columns], denominator[columns]
        observed += (a.sum(1).mean() - b.sum(1).mean()) / d.sum()
        counts = rng.multinomial(len(columns), np.full(len(columns), 1 / len(columns)), size=replicates)
        per_seed = counts @ (a - b).T  # (replicates, seeds): each seed's summed difference
        taken = np.take_along_axis(per_seed, chosen_seeds, axis=1).mean(1)
        replicated += taken / np.maximum(counts @ d, 1e-12)
    observed /= len(labels)
    replicated /= len(labels)
    low, high = np.percentile(replicated, [2.5, 97.5])
    tail = min((replicated <= 0).mean(), (replicated >= 0).mean())
    return {
        "difference": float(observed),
        "ci95": [float(low), float(high)],
        "p": float(min(1.0, 2 * tail)),
        "items": int(numerator_a.shape[1]),
        "seeds": int(seeds),
        "replicates": replicates,
    }


def holm(comparisons: list[dict], alpha: float = ALPHA) -> None:
    """Holm's step-down correction across ``comparisons`` (each with ``p`` from :func:`compare`):
    adds ``p_holm`` (the adjusted p-value, None without a test) and ``significant`` (``p_holm`` <
    ``alpha``), so the chance that any comparison of the family calls a difference where there is
    none stays below ``alpha``, however many comparisons there are (Holm 1979)."""
    tested = sorted((c for c in comparisons if c.get("p") is not None), key=lambda c: c["p"])
    m = len(tested)
    running = 0.0
    for rank, comparison in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * comparison["p"]))
        comparison["p_holm"] = running
    for comparison in comparisons:
        comparison.setdefault("p_holm", None)
        comparison["significant"] = comparison["p_holm"] is not None and comparison["p_holm"] < alpha
        comparison["family_size"] = m


PRIMARY = "primary"  # the family of the comparisons named in the config before the run
PRE_REGISTERED = "in the config before the run"


def pre_register(comparisons: list[dict], wanted: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Move the comparisons named before the run, each ``(metric, a, b)`` (the first made of
    each), into the family :data:`PRIMARY`, so that :func:`holm` corrects them among themselves
    only; the family each was made in stays as ``family_otherwise``, and every comparison gets its
    ``role``, primary or secondary (each test counted once: nothing is in two families). Returns
    the ``wanted`` that no comparison matched (not measured). Call it before :func:`holm`."""
    missing = []
    for metric, a, b in wanted:
        found = next(
            (c for c in comparisons if (c["metric"], c["a"], c["b"]) == (metric, a, b) and c["family"] != PRIMARY),
            None,
        )
        if found is None:
            missing.append((metric, a, b))
            continue
        found["family_otherwise"], found["family"] = found["family"], PRIMARY
    for c in comparisons:
        c["role"] = "primary" if c["family"] == PRIMARY else "secondary"
    return missing


def pre_registered(comparisons: list[dict]) -> list[dict]:
    """The primary family's comparisons in short, in the order made (after :func:`holm` and the
    sentences): each one's index among ``comparisons``, sides, difference, 95% interval, p, Holm's
    p within the family, verdict and sentence."""
    keys = ("metric", "a", "b", "difference", "ci95", "p", "p_holm", "significant", "better", "family_size", "sentence")
    return [
        {"index": i, **{key: c.get(key) for key in keys}} for i, c in enumerate(comparisons) if c["family"] == PRIMARY
    ]


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if abs(value) >= 10**-digits else f"{value:.1e}"


def _p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def sentence(
    metric: str, a_name: str, b_name: str, a: dict, b: dict, comparison: dict, lower_is_better: bool, digits: int = 3
) -> str:
    """The plain sentence a comparison supports (after :func:`holm`)."""
    if comparison["difference"] is None:
        return f"{metric}: no values for {a_name} or {b_name}."
    a_text = f"{a['mean']:.{digits}f} ± {a['std']:.{digits}f}"
    b_text = f"{b['mean']:.{digits}f} ± {b['std']:.{digits}f}"
    direction = "lower" if comparison["difference"] < 0 else "higher"
    pairing = "paired by seed" if comparison.get("paired") else "unpaired"
    head = (
        f"{metric}: {a_name} {a_text} vs {b_name} {b_text}, {direction} by {abs(comparison['difference']):.{digits}f}"
    )
    if comparison["p"] is None:
        return f"{head} ({a['n']} and {b['n']} seeds: too few for a test); no verdict."
    if comparison["ci95"] is None:  # no spread: the exact randomization test
        interval = "no interval: the same difference on every seed; "
        test = "exact " + ("sign-flip" if comparison.get("paired") else "permutation") + " test, "
    else:
        low, high = comparison["ci95"]
        interval = f"95% CI {_number(low, digits)} to {_number(high, digits)}; "
        test = f"t = {comparison['t']:.2f} at {comparison['df']:.3g} df, "
    family = (
        f"the {comparison['family_size']} primary comparisons named {PRE_REGISTERED}"
        if comparison["family"] == PRIMARY
        else f"the {comparison['family_size']} comparisons of its family, {comparison['family']}"
    )
    head += (
        f" ({interval}{a['n']} and {b['n']} seeds, {pairing}, {test}" + f"{_p_text(comparison['p'])}, "
        f"Holm-adjusted over {family}: {_p_text(comparison['p_holm'])})"
    )
    if not comparison["significant"]:
        return f"{head}: not significant, so these runs show no difference."
    if metric.startswith("memorization/"):
        return f"{head}: significant; {a_name} memorizes {'less' if comparison['better'] else 'more'} than {b_name}."
    verdict = "better" if comparison["better"] else "worse"
    return f"{head}: significant; {a_name} is {verdict} than {b_name} on this measure."


# ---------------------------------------------------------------------------------------------
# Power law of loss against tokens


def fit_power_law(tokens, losses) -> dict | None:
    """Fit L(D) = E + B / D^beta to ``losses`` at ``tokens`` (D in millions of tokens), least squares
    with E in [0, min loss], B >= 0 and beta in [0.01, 5], started from several betas; the best fit's
    ``E``, ``B``, ``beta`` and root-mean-square residual ``rms``, or None with fewer than three
    points or no decreasing fit."""
    from scipy.optimize import least_squares

    d = np.asarray(tokens, dtype=np.float64) / 1e6
    loss = np.asarray(losses, dtype=np.float64)
    if len(d) < 3 or len(set(d.tolist())) < 3 or not np.all(np.isfinite(loss)):
        return None
    floor = float(loss.min())
    best = None
    for beta in (0.1, 0.3, 0.6, 1.0, 2.0):
        scale = max(float(loss.max() - loss.min()), 1e-6) * float(d.min()) ** beta
        start = [max(0.0, floor - scale), scale, beta]
        found = least_squares(
            lambda p: p[0] + p[1] * d ** -p[2] - loss,
            start,
            bounds=([0.0, 0.0, 0.01], [floor, np.inf, 5.0]),
            x_scale="jac",
        )
        rms = float(np.sqrt(np.mean(found.fun**2)))
        if best is None or rms < best["rms"]:
            best = {"E": float(found.x[0]), "B": float(found.x[1]), "beta": float(found.x[2]), "rms": rms}
    return best if best is not None and best["B"] > 0 else None


def tokens_to_reach(fit: dict, loss: float) -> float | None:
    """Tokens a fitted power law needs to reach ``loss``: (B / (loss - E))^(1/beta) million, or None
    when ``loss`` is at or below its floor E."""
    if fit is None or loss <= fit["E"]:
        return None
    return 1e6 * (fit["B"] / (loss - fit["E"])) ** (1.0 / fit["beta"])
