"""The mixture search's proxies and its fit: proxies per core-hour, and how well the fit predicts
proxy runs it was not fitted on as the search grows (N = 16, 32, 64 sampled mixtures), against
RegMix's linear-regression baseline.

    python benchmarks/mixsearch.py                    # 64 proxies of 50k tokens on the demo corpus
    python benchmarks/mixsearch.py --results PATH     # the same analysis of a search's results.json

Run: ``configs/mixsearch-demo.toml``'s search (the demo corpus, built once under ``.cache/`` and
not timed; its curation, groups, targets and proxy model) with ``proxies = 64``, ``proxy_tokens``
= :data:`PROXY_TOKENS`, each proxy evaluated on :data:`EVAL_TOKENS` per group, and no
validation, into a fresh folder under ``.cache/`` (removed after), under Prefect's temporary
server as ``curate mixsearch`` runs it, ``parallel_runs`` as the config says (2: a process and a
core per proxy). The search's own fits run too (their proposal is not used here; its bootstrap is
cut to the config's minimum to save time).

Proxies per core-hour, counted three ways from the same runs (the baselines' 3 included):

* ``proxies_per_core_hour``: proxy runs / the core-hours of the trainer's runs, each run's
  ``wall_time_s`` from its ``summary.json`` (model setup, the optimizer steps, the final
  evaluation on every group and held-out set, the checkpoint) times the threads it ran on;
* ``proxies_per_core_hour_steps``: the same with ``train_time_s`` (the optimizer steps only);
* ``proxies_per_core_hour_all_in``: proxy runs / (the flow's proxy stage in seconds, ``timing``'s
  ``proxies_s``, times the cores it held): worker processes, Prefect, each run's held-out
  documents scored whole (the one-language target's measure), and any idle core.

The fit, per target (``heldout``: the mean clean held-out bits per byte; ``uk``: Ukrainian held-out
text) at each N: the first N sampled proxies plus the baselines (draw k is seeded by (seed, k), so
a smaller search's proxies are the larger one's first N). Cross-validated Spearman and mean
absolute error (5 folds, seeded by the search's seed, as ``curate mixsearch`` reports) of
:func:`experiment.mixfit.choose_fit`'s chosen family, of each family (LightGBM trees and the
mixing law) and of the peer, RegMix's linear regression (scikit-learn ``LinearRegression`` on the
same weights and folds; scikit-learn is a dependency of the project already, so it needs no
environment of its own). The chosen family is the better of the two by this same Spearman, so its
figure is a maximum of two; each family's is printed beside it. Because 19 to 67 runs make a noisy
Spearman, each is also given as the mean over :data:`FOLD_SEEDS` fold assignments.

The last line printed is one JSON object; the headline is ``spearman_ratio_vs_linear``, the chosen
fit's cross-validated Spearman over linear regression's at N = 64 on the ``heldout`` target (null
where linear regression's is not positive), with ``proxies_per_core_hour`` and
``cv_spearman_<target>_n<N>`` (the chosen fit's) beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiment.mixfit import _splits, choose_fit  # noqa: E402  (_splits: cross_validate's folds)
from pipeline.formats.configfile import read_toml  # noqa: E402

CONFIG = ROOT / "configs" / "mixsearch-demo.toml"
PROXIES = 64
SIZES = (16, 32, 64)
# A third of the demo search's proxy tokens and a quarter of its evaluation, so that 67 proxies
# run in a few minutes on 2 cores (at the demo's 150k tokens the benchmark took 20.8 min).
PROXY_TOKENS = 50_000
EVAL_TOKENS = 4096
FOLDS = 5
FOLD_SEEDS = 5
LINEAR = "linear"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def search_config(out_dir: Path, proxies: int, proxy_tokens: int, demo_docs: int | None = None) -> dict:
    """The demo search's config, proxies only: ``proxies`` sampled mixtures of ``proxy_tokens``,
    no validation, the fits' bootstrap at its minimum, everything under ``out_dir``."""
    data = read_toml(CONFIG)
    data["out_dir"] = str(out_dir)
    if demo_docs is not None:  # a smaller pool: its proposals' bounds at the proxies' size (no validation runs)
        data["demo_docs"] = demo_docs
        data["budget_tokens"] = proxy_tokens
    data["mixsearch"].update(
        {"proxies": proxies, "proxy_tokens": proxy_tokens, "validation": False, "resamples": 20, "candidates": 10_000}
    )
    data["mixsearch"].setdefault("proxy_train", {})["eval_tokens"] = EVAL_TOKENS
    return data


def run_search(data: dict) -> tuple[dict, float]:
    """The search's flow as ``curate mixsearch`` runs it; returns results.json's content and the
    wall seconds of the whole flow."""
    from experiment.config import parse_experiment
    from flows.runtime import configure_prefect

    config = parse_experiment(data)
    configure_prefect(config.out_dir, quiet=True, command="mixsearch")
    from flows.mixsearch import mixsearch_flow
    from flows.runners import shared_api
    from flows.runtime import temporary_server

    start = time.perf_counter()
    with shared_api() if config.parallel_runs > 1 else temporary_server():
        results = mixsearch_flow(config)
    return results, time.perf_counter() - start


def proxy_threads(parallel_runs: int) -> int:
    """The threads each proxy ran on: a worker process's share of the cores (flows.experiment), or
    this process's torch threads when the runs are in turn here."""
    if parallel_runs > 1:
        return max(1, (os.cpu_count() or 1) // parallel_runs)
    import torch

    return torch.get_num_threads()


def proxy_rates(results: dict, out_dir: Path, threads: int) -> dict:
    """Proxies per core-hour from the runs' summaries and from the flow's proxy stage (see the
    module's docstring); ``threads``: what each run ran on."""
    seed = results["config"]["seeds"][0]
    summaries = [
        json.loads((out_dir / "proxies" / row["name"] / f"seed-{seed}" / "summary.json").read_text())
        for row in results["proxies"]
    ]
    runs = len(summaries)
    wall = sum(s["wall_time_s"] for s in summaries)
    steps = sum(s["train_time_s"] for s in summaries)
    cores = results["config"]["parallel_runs"] * threads
    stage = results["timing"]["proxies_s"]
    return {
        "proxy_runs": runs,
        "threads_per_proxy": threads,
        "proxy_tokens": summaries[0]["tokens"],
        "proxy_parameters": summaries[0]["parameters"],
        "proxy_wall_s_mean": wall / runs,
        "proxy_steps_s_mean": steps / runs,
        "proxies_stage_s": stage,
        "proxies_per_core_hour": runs / (wall * threads / 3600),
        "proxies_per_core_hour_steps": runs / (steps * threads / 3600),
        "proxies_per_core_hour_all_in": runs / (stage * cores / 3600),
    }


def first_proxies(results: dict, target: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The weights (in ``results["groups"]``' order) and the target of the baselines and the first
    ``n`` sampled proxies, where the run measured the target."""
    groups = results["groups"]
    rows = [
        row
        for row in results["proxies"]
        if (not row["label"].startswith("sample-") or int(row["label"].split("-")[1]) < n)
        and row["targets"][target] is not None
    ]
    weights = np.array([[row["shares"].get(g, 0.0) for g in groups] for row in rows])
    return weights, np.array([row["targets"][target] for row in rows])


def linear_cv(weights: np.ndarray, target: np.ndarray, seed: int, folds: int = FOLDS) -> dict:
    """RegMix's linear-regression baseline, cross-validated on cross_validate's folds."""
    from scipy.stats import spearmanr
    from sklearn.linear_model import LinearRegression

    predicted = np.empty(len(target))
    for test in _splits(len(target), seed, folds):
        train = np.setdiff1d(np.arange(len(target)), test)
        predicted[test] = LinearRegression().fit(weights[train], target[train]).predict(weights[test])
    constant = np.ptp(predicted) == 0 or np.ptp(target) == 0
    return {
        "spearman": None if constant else float(spearmanr(predicted, target).statistic),
        "mae": float(np.mean(np.abs(predicted - target))),
    }


def fit_scores(weights: np.ndarray, target: np.ndarray, seed: int, fold_seeds: int = FOLD_SEEDS) -> dict:
    """The chosen family, and per family (``chosen`` too, and ``linear``) the cross-validated
    Spearman and MAE at ``seed`` and the mean Spearman over ``fold_seeds`` fold assignments (seed,
    seed + 1, ...; the chosen family re-chosen at each)."""
    scores: dict[str, dict] = {}
    chosen_family = None
    for s in range(seed, seed + fold_seeds):
        fitted = choose_fit(weights, target, s, FOLDS)
        by_family = {f: {"spearman": r["spearman"], "mae": r["mae"]} for f, r in fitted["families"].items()}
        by_family["chosen"] = by_family[fitted["family"]]
        by_family[LINEAR] = linear_cv(weights, target, s)
        if s == seed:
            chosen_family = fitted["family"]
            scores = {f: {**r, "spearmans": []} for f, r in by_family.items()}
        for f, r in by_family.items():
            scores[f]["spearmans"].append(r["spearman"])
    for r in scores.values():
        values = [v for v in r.pop("spearmans") if v is not None]
        r["spearman_mean"] = float(np.mean(values)) if values else None
    return {"family": chosen_family, "runs": len(target), "scores": scores}


def fit_table(results: dict, sizes: tuple[int, ...], fold_seeds: int = FOLD_SEEDS) -> dict[str, dict[int, dict]]:
    """:func:`fit_scores` per target and N (sizes above the search's proxies left out)."""
    seed = results["config"]["seed"]
    drawn = sum(row["label"].startswith("sample-") for row in results["proxies"])
    table: dict[str, dict[int, dict]] = {}
    for target in (t["name"] for t in results["config"]["mixsearch"]["targets"]):
        for n in (n for n in sizes if n <= drawn):
            weights, values = first_proxies(results, target, n)
            table.setdefault(target, {})[n] = fit_scores(weights, values, seed, fold_seeds)
    return table


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_fits(table: dict[str, dict[int, dict]], fold_seeds: int) -> None:
    first = next(iter(next(iter(table.values())).values()))
    families = ("chosen", *(f for f in first["scores"] if f not in ("chosen", LINEAR)), LINEAR)
    print(f"\n{'':<26}" + "".join(f"{f:^21}" for f in families))
    print(f"{'target':<9}{'N':>4}{'runs':>5} {'chosen':<7}" + f"{'rho':>7}{'rho5':>7}{'MAE':>7}" * len(families))
    for target, by_n in table.items():
        for n, fit in by_n.items():
            cells = "".join(
                f"{_number(r['spearman']):>7}{_number(r['spearman_mean']):>7}{_number(r['mae'], 4):>7}"
                for r in (fit["scores"][f] for f in families)
            )
            print(f"{target:<9}{n:>4}{fit['runs']:>5} {fit['family']:<7}{cells}")
    print(
        f"rho: cross-validated Spearman ({FOLDS} folds, the search's seed); rho5: its mean over "
        f"{fold_seeds} fold assignments; MAE: bits per byte"
    )


def figures(table: dict[str, dict[int, dict]], rates: dict | None) -> dict:
    """The JSON line's figures: rates, per target and N the chosen fit's and each family's
    cross-validated Spearman and MAE, and the headline ratio at the largest N of ``heldout``."""
    made: dict = dict(rates or {})
    for target, by_n in table.items():
        for n, fit in by_n.items():
            made[f"chosen_family_{target}_n{n}"] = fit["family"]
            for family, r in fit["scores"].items():
                stem = "" if family == "chosen" else f"_{family}"
                made[f"cv_spearman{stem}_{target}_n{n}"] = _round(r["spearman"])
                made[f"cv_spearman_mean{stem}_{target}_n{n}"] = _round(r["spearman_mean"])
                made[f"cv_mae{stem}_{target}_n{n}"] = _round(r["mae"], 5)
    head = "heldout" if "heldout" in table else next(iter(table), None)
    if head is not None:
        n = max(table[head])
        scores = table[head][n]["scores"]
        made["headline"] = f"{head}, N = {n}"
        for stem, measure in (("", "spearman"), ("_mean", "spearman_mean")):
            made[f"spearman{stem}_ratio_vs_linear"] = _ratio(scores["chosen"][measure], scores[LINEAR][measure])
    return made


def _ratio(ours: float | None, linear: float | None) -> float | None:
    """Ours over linear's Spearman; none where linear's is not positive (no ratio says how much
    better a fit is than one that orders the runs no better than chance, or backwards)."""
    return _round(ours / linear) if ours is not None and linear is not None and linear > 0 else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, help="analyse this search's results.json instead of running one")
    parser.add_argument("--proxies", type=int, default=PROXIES, help="sampled mixtures (default %(default)s)")
    parser.add_argument("--proxy-tokens", type=int, default=PROXY_TOKENS, help="each proxy's training tokens")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="N values, comma-separated")
    parser.add_argument("--demo-docs", type=int, help="a smaller demo corpus (default: the config's)")
    parser.add_argument("--fold-seeds", type=int, default=FOLD_SEEDS, help="fold assignments averaged")
    parser.add_argument("--keep", action="store_true", help="keep the search's folder under .cache/")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = tuple(int(n) for n in args.sizes.split(","))
    rates, wall = None, None
    if args.results is not None:
        results = json.loads(args.results.read_text())
        print(f"{args.results}: {len(results['proxies'])} proxy runs over groups {', '.join(results['groups'])}")
    else:
        os.chdir(ROOT)  # the demo corpus' default folder is .cache/demo-corpus under the working directory
        (ROOT / ".cache").mkdir(exist_ok=True)
        out_dir = Path(tempfile.mkdtemp(prefix="bench-mixsearch-", dir=ROOT / ".cache"))
        data = search_config(out_dir, args.proxies, args.proxy_tokens, args.demo_docs)
        print(
            f"search: {CONFIG.relative_to(ROOT)}, {args.proxies} proxies + baselines of {args.proxy_tokens:,} tokens, "
            f"parallel_runs {data.get('parallel_runs', 1)}, no validation; {out_dir.relative_to(ROOT)}",
            flush=True,
        )
        try:
            results, wall = run_search(data)
            rates = proxy_rates(results, out_dir, proxy_threads(results["config"]["parallel_runs"]))
        finally:
            if not args.keep:
                shutil.rmtree(out_dir, ignore_errors=True)
        timing = results["timing"]
        rates = {
            **rates,
            "search_wall_s": wall,
            "curation_s": timing.get("curation_s"),
            "fits_s": timing.get("fits_s"),
            "groups": len(results["groups"]),
        }
        print(
            f"{rates['proxy_runs']} proxy runs ({rates['proxy_parameters']:,} parameters, {rates['proxy_tokens']:,} "
            f"tokens, {rates['threads_per_proxy']} thread(s) each): {rates['proxy_wall_s_mean']:.1f} s a run "
            f"({rates['proxy_steps_s_mean']:.1f} s in steps); proxy stage {rates['proxies_stage_s']:.0f} s; "
            f"search {wall:.0f} s (curation {rates['curation_s']:.0f} s)"
        )
        print(
            f"proxies per core-hour: {rates['proxies_per_core_hour']:.0f} (trainer runs), "
            f"{rates['proxies_per_core_hour_steps']:.0f} (optimizer steps only), "
            f"{rates['proxies_per_core_hour_all_in']:.0f} (the proxy stage all in)"
        )
    table = fit_table(results, sizes, args.fold_seeds)
    print_fits(table, args.fold_seeds)
    made = figures(table, rates)
    if "spearman_ratio_vs_linear" in made:
        print(
            f"chosen fit / linear regression, cross-validated Spearman at {made['headline']}: "
            f"{made['spearman_ratio_vs_linear']} (mean over fold assignments {made['spearman_mean_ratio_vs_linear']})"
        )
    print(json.dumps(made))


if __name__ == "__main__":
    main()
