"""The sweep's report: one static HTML page (``<out_dir>/report/index.html``) built from a sweep's
``results.json`` alone: held-out loss against training tokens per model size with each variant's
fitted L(N, D), the iso-FLOP frontier per variant (the loss and the model size that are optimal at
each compute, with bootstrap bands, and every run at its compute), the fitted parameters and the
compute-optimal splits with their intervals, each variant against the reference, every run with
the fit's residual, what each variant's curation kept, and the contamination check.

Every number shown from ``results.json`` carries ``data-json="results.json#<key>.<key>..."``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from experiment.scaling import PARAMETERS, ScalingFit
from experiment.sweep import residuals, rms
from pipeline.formats.stats import DOCS_IN, DOCS_OUT
from report.experiment import PALETTE, write_results_page
from report.html import esc, fmt, table
from report.plots import STYLE, _figure, to_svg

COUNT_LABEL = {"non_embedding": "non-embedding parameters", "total": "parameters, embedding included"}


def _num(ref: str, value, digits: int = 3, sci: bool = False, none: str = "–") -> str:
    sci = sci or (value is not None and abs(value) >= 1e6)
    shown = none if value is None else (f"{value:.3g}" if sci else fmt(value, digits))
    return f'<span class="num" data-json="results.json#{esc(ref)}">{esc(shown)}</span>'


def _with_interval(ref: str, value, interval, digits: int = 3, sci: bool = False) -> str:
    low, high = interval
    return (
        f"{_num(ref, value, digits, sci)} ({_num(ref + '_interval.0', low, digits, sci)} to "
        f"{_num(ref + '_interval.1', high, digits, sci)})"
    )


UNBOUNDED = "∞"  # a multiplier past the reference's loss floor: no compute of the reference reaches it


def multiple(value: float | None) -> str:
    """A compute multiplier as text: ``1.52x``, or unbounded."""
    if value is None:
        return "unbounded (below the reference's fitted floor E)"
    return f"{value:.2f}x" if value < 1000 else f"{value:.2g}x"


def _color(results: dict, variant: str) -> str:
    return PALETTE[results["variants"].index(variant) % len(PALETTE)]


def _loss_curves(results: dict) -> str:
    """One panel per variant: each model size's held-out loss against tokens (points: the mean over
    seeds) and the fitted L(N, D) at its N (lines)."""
    count = results["headline"]
    metric = results["metric"]
    fits = results["fits"][count]["variants"]
    sizes = [m["name"] for m in results["models"]]
    with matplotlib.rc_context(STYLE):
        fig = _figure(3.2 * len(results["variants"]) + 1.4, 3.4)
        axes = np.atleast_1d(fig.subplots(1, len(results["variants"]), sharey=True))
        cmap = matplotlib.colormaps["viridis"]
        for ax, variant in zip(axes, results["variants"]):
            law = ScalingFit(**fits[variant]["fit"])
            for k, size in enumerate(sizes):
                own = sorted(
                    (c for c in results["cells"] if c["variant"] == variant and c["model"] == size),
                    key=lambda c: c["tokens"],
                )
                if not own:
                    continue
                color = cmap(k / max(1, len(sizes) - 1) * 0.9)
                tokens = [c["tokens"] for c in own]
                ax.plot(tokens, [c[metric]["mean"] for c in own], "o", color=color, ms=4, label=size)
                dense = np.geomspace(min(tokens) / 1.5, max(tokens) * 1.5, 40)
                n = own[0]["parameters"][count]
                ax.plot(dense, law.predict(np.full_like(dense, n), dense), color=color, lw=1.0)
            ax.set_xscale("log")
            ax.set_xlabel("training tokens D")
            ax.set_title(variant, loc="left")
        axes[0].set_ylabel("held-out bits per byte")
        axes[-1].legend(frameon=False, fontsize=8, title="model", title_fontsize=8, loc="upper right")
    return to_svg(fig, "sweep-loss", "held-out loss against training tokens per model size, with the fitted curves")


def _values(points: list[dict], key: str) -> np.ndarray:
    """A figure of each point, None (past any finite number) as NaN, which a plot leaves out."""
    return np.array([np.nan if p[key] is None else p[key] for p in points], dtype=np.float64)


def _band(points: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    low, high = zip(*(p[key] for p in points))
    return (np.array([np.nan if v is None else v for v in side], dtype=np.float64) for side in (low, high))


def _frontier(results: dict) -> str:
    """The loss on the compute-optimal frontier and the optimal N against compute, a line and a 95%
    band per variant, every run at its compute (6 N D) behind them."""
    count = results["headline"]
    metric = results["metric"]
    fits = results["fits"][count]["variants"]
    with matplotlib.rc_context(STYLE):
        fig = _figure(9.0, 3.5)
        left, right = fig.subplots(1, 2)
        for variant in results["variants"]:
            color = _color(results, variant)
            own = [c for c in results["cells"] if c["variant"] == variant]
            left.plot(
                [c["flops"][count] for c in own],
                [c[metric]["mean"] for c in own],
                "o", color=color, ms=3, alpha=0.45,
            )  # fmt: skip
            curve = fits[variant]["curve"]
            flops = [p["flops"] for p in curve]
            left.plot(flops, _values(curve, "loss"), color=color, lw=1.4, label=variant)
            left.fill_between(flops, *_band(curve, "loss_interval"), color=color, alpha=0.15, lw=0)
            right.plot(flops, _values(curve, "params"), color=color, lw=1.4, label=variant)
            right.fill_between(flops, *_band(curve, "params_interval"), color=color, alpha=0.15, lw=0)
        sizes = sorted({c["parameters"][count] for c in results["cells"]})
        right.axhspan(sizes[0], sizes[-1], color="#999999", alpha=0.08, lw=0)
        # A fit the runs do not determine has bands over hundreds of decades: the axes stay near
        # what was trained, so the runs and the fitted lines stay readable.
        losses = [c[metric]["mean"] for c in results["cells"]]
        left.set_ylim(0.0, max(losses) * 1.25)
        lines = [p["params"] for v in results["variants"] for p in fits[v]["curve"] if p["params"] is not None] or sizes
        right.set_ylim(min(sizes[0], *lines) / 10 if min(lines) > sizes[0] / 1e4 else sizes[0] / 1e4,
                       max(sizes[-1], *lines) * 10 if max(lines) < sizes[-1] * 1e4 else sizes[-1] * 1e4)  # fmt: skip
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_xlabel("compute C = 6ND (FLOPs)")
        right.set_yscale("log")
        left.set_ylabel("held-out bits per byte")
        right.set_ylabel(f"compute-optimal N ({COUNT_LABEL[count]})")
        left.set_title("loss on the compute-optimal frontier (runs: dots)", loc="left")
        right.set_title("compute-optimal model size (grey: sizes trained)", loc="left")
        left.legend(frameon=False, fontsize=8)
    return to_svg(fig, "sweep-frontier", "the compute-optimal frontier per variant")


def _fit_table(results: dict, count: str) -> str:
    info = results["fits"][count]
    rows = []
    for variant in results["variants"]:
        entry = info["variants"][variant]
        ref = f"fits.{count}.variants.{variant}"
        cells = [esc(variant)]
        for name in PARAMETERS:
            low, high = entry["intervals"][name]
            sci = name in ("A", "B")
            at = f"{ref}.intervals.{name}"
            cells.append(
                f"{_num(f'{ref}.fit.{name}', entry['fit'][name], 3, sci)} "
                f"({_num(f'{at}.0', low, 3, sci)} to {_num(f'{at}.1', high, 3, sci)})"
                + (" <b>undetermined</b>" if name in entry.get("at_bounds", []) else "")
            )
        fitted = residuals(entry["fit"], results["cells"], variant, count, results["metric"])
        cells.append(_num(f"{ref}.fit.runs", entry["fit"]["runs"], 0))
        cells.append(esc(fmt(rms(r["residual"] for r in fitted), 4)))
        rows.append(cells)
    return table(
        ["variant", "E", "A", "B", "alpha", "beta", "cells", "RMS residual"],
        rows,
        numeric={1, 2, 3, 4, 5, 6, 7},
    )


def _optimal_table(results: dict, count: str) -> str:
    info = results["fits"][count]
    rows = []
    for variant in results["variants"]:
        for k, point in enumerate(info["variants"][variant]["optimal"]):
            ref = f"fits.{count}.variants.{variant}.optimal.{k}"
            rows.append(
                [
                    esc(variant),
                    _num(f"{ref}.flops", point["flops"], sci=True),
                    _with_interval(f"{ref}.params", point["params"], point["params_interval"], sci=True),
                    _with_interval(f"{ref}.tokens", point["tokens"], point["tokens_interval"], sci=True),
                    _with_interval(
                        f"{ref}.tokens_per_param", point["tokens_per_param"], point["tokens_per_param_interval"], 1
                    ),
                    _with_interval(f"{ref}.loss", point["loss"], point["loss_interval"]),
                    "yes" if point["extrapolated"] else "no",
                ]
            )
    return table(
        ["variant", "compute (FLOPs)", "optimal N", "optimal D", "D / N", "loss on the frontier", "extrapolated"],
        rows,
        numeric={1, 2, 3, 4, 5},
    )


def _in_grid(results: dict, count: str) -> tuple[str, list[str]]:
    """What the runs say without extrapolating: the mean cell-by-cell difference, and the data
    multiplier at each model size at the middle budget."""
    info = results["fits"][count]
    reference = info["reference"]
    rows, sentences = [], []
    for variant, entry in info["comparisons"].items():
        ref = f"fits.{count}.comparisons.{variant}"
        cells = entry["cells"]
        low, high = cells["interval"]
        sentences.append(
            f"{variant} - {reference}, cell by cell (the runs, no fit): {cells['mean_difference']:+.4f} bits per byte "
            f"on average over the {cells['cells']} cells ({low:+.4f} to {high:+.4f}); {variant} is lower in "
            f"{cells['better']} of {cells['cells']}."
        )
        for k, row in enumerate(entry["data_multiplier"]):
            at = f"{ref}.data_multiplier.{k}"
            rows.append(
                [
                    esc(variant),
                    _num(f"{at}.params", row["params"], 0),
                    _num(f"{at}.tokens", row["tokens"], 0),
                    f"{_num(f'{at}.multiplier', row['multiplier'], 2, none=UNBOUNDED)}x "
                    f"({_num(f'{at}.interval.0', row['interval'][0], 2, none=UNBOUNDED)} to "
                    f"{_num(f'{at}.interval.1', row['interval'][1], 2, none=UNBOUNDED)})",
                    "yes" if row["excludes_one"] else "no",
                    "yes" if row["extrapolated"] else "no",
                ]
            )
            sentences.append(
                f"At N = {row['params']:,.0f}, {reference}'s fit needs {multiple(row['multiplier'])} the tokens to "
                f"reach {variant}'s fitted loss at {row['tokens']:,.0f} tokens ({multiple(row['interval'][0])} to "
                f"{multiple(row['interval'][1])})"
                + (", outside the budgets trained." if row["extrapolated"] else ", within the budgets trained.")
            )
    headers = ["variant", "N", "tokens D", f"tokens {reference} needs, as a multiple", "excludes 1", "extrapolated"]
    return table(headers, rows, numeric={1, 2, 3}), sentences


def _comparison_table(results: dict, count: str) -> tuple[str, list[str]]:
    info = results["fits"][count]
    reference = info["reference"]
    rows, sentences = [], []
    for variant, entry in info["comparisons"].items():
        ref = f"fits.{count}.comparisons.{variant}"
        for k, point in enumerate(entry["frontier"]):
            at = f"{ref}.frontier.{k}"
            rows.append(
                [
                    esc(variant),
                    _num(f"{at}.flops", point["flops"], sci=True),
                    f"{_num(f'{at}.loss_difference', point['loss_difference'], 4)} "
                    f"({_num(f'{at}.loss_interval.0', point['loss_interval'][0], 4)} to "
                    f"{_num(f'{at}.loss_interval.1', point['loss_interval'][1], 4)})",
                    f"{_num(f'{at}.compute_multiplier', point['compute_multiplier'], 2, none=UNBOUNDED)}x "
                    f"({_num(f'{at}.multiplier_interval.0', point['multiplier_interval'][0], 2, none=UNBOUNDED)} to "
                    f"{_num(f'{at}.multiplier_interval.1', point['multiplier_interval'][1], 2, none=UNBOUNDED)})"
                    + (" extrapolated" if point["multiplier_extrapolated"] else ""),
                    "yes" if point["excludes_zero"] else "no",
                ]
            )
            verdict = (
                ("lower" if point["loss_difference"] < 0 else "higher") + " than"
                if point["excludes_zero"]
                else "not distinguishable from"
            )
            if any(o["extrapolated"] for o in (info["variants"][v]["optimal"][k] for v in (variant, reference))):
                verdict += " (an optimum outside the sizes or budgets trained: extrapolated)"
            sentences.append(
                f"At {point['flops']:.2g} FLOPs, {variant}'s frontier loss is {verdict} {reference}'s: "
                f"{point['loss_difference']:+.4f} bits per byte ({point['loss_interval'][0]:+.4f} to "
                f"{point['loss_interval'][1]:+.4f}); {reference} needs {multiple(point['compute_multiplier'])} the "
                f"compute to reach it ({multiple(point['multiplier_interval'][0])} to "
                f"{multiple(point['multiplier_interval'][1])})"
                + (
                    ", read off the fit beyond the compute of the runs."
                    if point["multiplier_extrapolated"]
                    else ", within the compute of the runs."
                )
            )
        differences = entry["differences"]
        rows_note = ", ".join(
            f"{name} {differences[name]['value']:+.3f} ({differences[name]['interval'][0]:+.3f} to "
            f"{differences[name]['interval'][1]:+.3f})"
            for name in ("E", "alpha", "beta")
        )
        sentences.append(f"{variant} - {reference}, fitted parameters: {rows_note}.")
    headers = [
        "variant",
        "compute (FLOPs)",
        f"frontier loss - {reference}'s",
        f"compute {reference} needs, as a multiple",
        "interval excludes 0",
    ]
    return table(headers, rows, numeric={1, 2, 3}), sentences


def _runs_table(results: dict) -> str:
    count = results["headline"]
    metric = results["metric"]
    laws = {v: ScalingFit(**results["fits"][count]["variants"][v]["fit"]) for v in results["variants"]}
    rows = []
    for k, run in enumerate(results["runs"]):
        ref = f"runs.{k}"
        predicted = float(laws[run["variant"]].predict(run["parameters"][count], run["tokens"]))
        loss = run["metrics"].get(metric)
        rows.append(
            [
                esc(run["variant"]),
                esc(run["model"]),
                _num(f"{ref}.seed", run["seed"], 0),
                _num(f"{ref}.parameters.non_embedding", run["parameters"]["non_embedding"], 0),
                _num(f"{ref}.parameters.total", run["parameters"]["total"], 0),
                _num(f"{ref}.tokens", run["tokens"], 0),
                _num(f"{ref}.lr", run["lr"], sci=True),
                _num(f"{ref}.steps", run["steps"], 0),
                _num(f"{ref}.flops.{count}", run["flops"][count], sci=True),
                _num(f"{ref}.metrics.{metric}", loss, 4),
                esc(fmt(predicted, 4)),
                esc(fmt(None if loss is None else loss - predicted, 4)),
            ]
        )
    return table(
        ["variant", "model", "seed", "N (non-emb.)", "N (total)", "tokens D", "lr", "steps", "compute",
         "held-out bpb", "fit", "residual"],
        rows,
        numeric=set(range(2, 12)),
    )  # fmt: skip


def _curation_table(results: dict) -> str:
    rows = []
    for variant in results["variants"]:
        info = results["curation"][variant]
        funnel = info["funnel"]
        first, last = next(iter(funnel.values())), list(funnel.values())[-1]
        ref = f"curation.{variant}"
        budgets = ", ".join(
            f"{int(b):,}: {_num(f'{ref}.budgets.{b}.max_epochs', v['max_epochs'], 2)}"
            for b, v in info["budgets"].items()
        )
        any_budget = next(iter(info["budgets"]))  # the pool is the same at every budget
        pool = info["budgets"][any_budget]["tokens_available"]
        rows.append(
            [
                esc(variant),
                _num(f"{ref}.funnel.{next(iter(funnel))}.{DOCS_IN}", first[DOCS_IN], 0),
                _num(f"{ref}.funnel.{list(funnel)[-1]}.{DOCS_OUT}", last[DOCS_OUT], 0),
                _num(f"{ref}.budgets.{any_budget}.tokens_available", pool, 0),
                budgets,
            ]
        )
    return table(
        ["variant", "documents read", "after the last stage", "pool tokens", "budget: most epochs of a group"],
        rows,
        numeric={1, 2, 3},
    )


def _contamination_table(results: dict) -> str:
    rows = []
    for mixture, check in results["contamination"].items():
        rows.append(
            [
                esc(mixture),
                _num(f"contamination.{mixture}.contaminated_documents", check.get("contaminated_documents"), 0),
                _num(f"contamination.{mixture}.common_windows", check.get("common_windows"), 0),
            ]
        )
    return table(["mixture", "training documents sharing a window", "common windows (reported apart)"], rows, {1, 2})


PROXY_PLOTTED = ("heldout_bpb", "tasks/core", "tasks/gold_bpb")


def _proxy(results: dict) -> str:
    """Proxy validity: per metric, the share of variant pairs each cell orders as the largest cell
    does (a table over the cells by compute, and the plotted aggregates)."""
    proxy = results.get("proxy")
    if not proxy or not proxy["metrics"]:
        return ""
    metrics = list(proxy["metrics"])
    cells = proxy["metrics"][metrics[0]]
    header = ["metric", *[f"{c['model']} @ {fmt(c['budget'])}" + (" (target)" if c["target"] else "") for c in cells]]
    rows = [
        [esc(m)]
        + [_num(f"proxy.metrics.{m}.{k}.accuracy", row["accuracy"], 2) for k, row in enumerate(proxy["metrics"][m])]
        for m in metrics
    ]
    below = {
        m: [r["accuracy"] for r in rows_ if not r["target"] and r["accuracy"] is not None]
        for m, rows_ in proxy["metrics"].items()
    }
    ranked = sorted(((float(np.mean(v)), m) for m, v in below.items() if v), reverse=True)
    sentence = (
        f"Over the cells below the target, {esc(ranked[0][1])} orders the variants as the target does most often "
        f"(mean decision accuracy {ranked[0][0]:.2f})"
        + (f", {esc(ranked[-1][1])} least often ({ranked[-1][0]:.2f})" if len(ranked) > 1 else "")
        + f"; {proxy['pairs']} variant pair(s), so each cell's accuracy moves in steps of 1/{proxy['pairs']}."
        if ranked
        else ""
    )
    with matplotlib.rc_context(STYLE):
        fig = _figure(5.5, 3.2)
        ax = fig.subplots()
        for k, metric in enumerate(m for m in PROXY_PLOTTED if m in proxy["metrics"]):
            points = [(r["flops"], r["accuracy"]) for r in proxy["metrics"][metric] if r["accuracy"] is not None]
            if points:
                ax.plot(*zip(*points), marker="o", ms=3, lw=1, color=PALETTE[k], label=metric)
        ax.set_xscale("log")
        ax.set_xlabel("compute of the cell (6 N D)")
        ax.set_ylabel("decision accuracy")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(frameon=False, fontsize=8)
    return (
        "<section id=proxy><h2>Which small runs pick the large run's winner</h2><p class=note>DataDecide's "
        "decision accuracy (Magnusson et al. 2025): the largest model at the largest budget is the target; at "
        "every cell, the share of variant pairs it orders as the target does, per metric (held-out bits per "
        "byte, and the curve items' task scores at each run's last evaluation). A tie counts half.</p>"
        f"<p>{sentence}</p>"
        + to_svg(fig, "proxy", "decision accuracy against compute")
        + table(header, rows, numeric=set(range(1, len(header))))
        + "</section>"
    )


def render(results: dict) -> str:
    from report.build import CSS

    count = results["headline"]
    other = next(c for c in results["fits"] if c != count)
    timing = results.get("timing", {})
    comparisons, sentences = _comparison_table(results, count)
    in_grid, grid_sentences = _in_grid(results, count)
    info = results["fits"][count]
    models = table(
        ["model", "layers", "width", "heads", "N (non-emb.)", "N (total)", "lr"],
        [
            [esc(m["name"]), esc(m["n_layer"]), esc(m["n_embd"]), esc(m["n_head"]),
             esc(fmt(run["parameters"]["non_embedding"])), esc(fmt(run["parameters"]["total"])),
             esc(f"{run['lr']:.3g}")]
            for m in results["models"]
            for run in [next(r for r in results["runs"] if r["model"] == m["name"])]
        ],
        numeric={1, 2, 3, 4, 5, 6},
    )  # fmt: skip
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width, initial-scale=1'>",
        f"<title>scaling sweep report</title><style>{CSS}</style></head><body>",
        "<header><h1>Scaling laws of curated and raw data</h1>",
        f"<p>{len(results['models'])} model sizes x {len(results['budgets'])} token budgets "
        f"({esc(', '.join(f'{b:,}' for b in results['budgets']))}) x {len(results['seeds'])} seed(s) for each of "
        f"{len(results['variants'])} variants ({esc(', '.join(results['variants']))}; the reference "
        f"<b>{esc(results['reference'])}</b>): {len(results['runs'])} runs, each its own mixture of exactly its budget "
        "and a cosine schedule of its own length. Held-out loss is the experiment's: bits per byte on held-out "
        "sets no curation chose, the mean over the clean sets, one tokenizer for every run. N counts "
        f"{esc(COUNT_LABEL[count])} (the other count's fits are further down).</p>",
        f"<p class=note>{esc(results['how'])} A parameter marked <b>undetermined</b> is one the runs do not "
        "determine: at a bound of the search, or in a term under 1e-4 of every run's loss (E, when the loss is "
        "still far from any floor); the optimum and the frontier then follow from the bound, not from the runs.</p>",
        f"<p>Wall time of the last invocation: {fmt(timing.get('total_s', 0) / 60, 1)} min (curation "
        f"{fmt(timing.get('curation_s', 0) / 60, 1)}, training {fmt(timing.get('training_s', 0) / 60, 1)}, "
        f"{timing.get('parallel_runs', 1)} at a time; fits {fmt(timing.get('fits_s', 0), 0)} s); runs finished "
        "earlier are reused, not timed again.</p>",
        "<nav><a href='#findings'>findings</a><a href='#loss'>loss against tokens</a><a href='#frontier'>frontier</a>"
        "<a href='#fits'>fits</a>"
        + ("<a href='#proxy'>proxy validity</a>" if results.get("proxy") else "")
        + "<a href='#runs'>runs</a><a href='#curation'>curation</a></nav>",
        "</header><main>",
        "<section id=findings><h2>Findings</h2>",
        f"<p class=note>Intervals on differences are paired bootstrap percentiles at level "
        f"{_num(f'fits.{count}.comparison_level', info['comparison_level'], 4)} (95% Bonferroni-corrected over "
        "every comparison with a verdict: each variant's mean over cells, its data multiplier at each model size "
        "and its frontier at each compute budget); the parameters' own intervals are 95%. A frontier at a "
        "compute whose optimum lies outside the sizes or budgets trained is an extrapolation (see the table).</p>",
        "<h3>Within the grid</h3><ul>" + "".join(f"<li>{esc(s)}</li>" for s in grid_sentences) + "</ul>",
        in_grid,
        "<h3>On the compute-optimal frontier</h3>",
        "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in sentences) + "</ul>",
        comparisons,
        "</section>",
        "<section id=loss><h2>Held-out loss against tokens, per model size</h2>",
        models,
        _loss_curves(results),
        "</section>",
        "<section id=frontier><h2>The compute-optimal frontier</h2>",
        _frontier(results),
        _optimal_table(results, count),
        "</section>",
        f"<section id=fits><h2>Fitted parameters ({esc(COUNT_LABEL[count])})</h2>",
        _fit_table(results, count),
        f"<h3>With N counted as {esc(COUNT_LABEL[other])}</h3>",
        _fit_table(results, other),
        _optimal_table(results, other),
        "</section>",
        _proxy(results),
        "<section id=runs><h2>Every run</h2>",
        _runs_table(results),
        "</section>",
        "<section id=curation><h2>What each variant trained on</h2>",
        _curation_table(results),
        "<h3>Contamination check: training documents sharing a token window with held-out or task text</h3>",
        _contamination_table(results),
        "</section></main></body></html>",
    ]
    return "\n".join(parts)


def build_sweep_report(out_dir: str | Path) -> Path:
    """Write ``<out_dir>/report/index.html`` from a sweep's ``<out_dir>/results.json``; return its path."""
    return write_results_page(out_dir, render)
