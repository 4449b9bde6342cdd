"""The mixture search's report: one static HTML page (``<out_dir>/report/index.html``) built from a
search's ``results.json`` alone, in the order a reader decides by: the pre-registered answer per
target (the proposal against the primary baseline), the proposed weights beside the baselines'
with their intervals and the constraints, the fits (cross-validated, predicted against measured),
the validation over seeds with every comparison, what each group gains or pays, the proxies'
validity at the larger size, then every proxy run, the contamination check, timing and how each
number was measured. A search run without validation shows the proxies' side alone.

Every number shown from ``results.json`` carries ``data-json="results.json#<key>.<key>..."``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from report.experiment import PALETTE, verdict, write_results_page
from report.html import esc, fmt, table
from report.plots import STYLE, _figure, chart_text, to_svg

BPB = 4  # digits of a bits-per-byte value or difference
SHARE = 3  # digits of a mixture weight
PROPOSAL = "proposal-"  # a target's proposal as a validated run: proposal-<target>


def _num(ref: str, value, digits: int = BPB) -> str:
    """A number from results.json at ``ref``, shown with ``digits`` decimals (None as a dash)."""
    shown = fmt(value, digits) if isinstance(value, float) else fmt(value)
    return f'<span class="num" data-json="results.json#{esc(ref)}">{esc(shown)}</span>'


def _interval(ref: str, pair, digits: int = BPB) -> str:
    """``[low, high]`` at ``ref`` (a dash when there is none)."""
    if not pair:
        return _num(ref, None)
    return f"[{_num(f'{ref}.0', pair[0], digits)}, {_num(f'{ref}.1', pair[1], digits)}]"


def _search(results: dict) -> dict:
    return results["config"].get("mixsearch") or {}


def _primary(results: dict) -> str:
    return _search(results).get("primary") or "natural"


def _baselines(results: dict) -> list[str]:
    """The baselines in the config's order (those that have a proxy run or a validated run)."""
    labels = {p["label"] for p in results["proxies"]} | set((results.get("validation") or {}).get("runs", {}))
    named = _search(results).get("baselines") or [p["label"] for p in results["proxies"] if p["label"] in labels]
    return [b for b in named if b in labels]


def _mixtures(results: dict) -> list[str]:
    """Every mixture shown beside the others: the baselines, then each target's proposal."""
    return _baselines(results) + [PROPOSAL + t for t in results["fits"]]


def _color(results: dict, mixture: str) -> str:
    return PALETTE[_mixtures(results).index(mixture) % len(PALETTE)] if mixture in _mixtures(results) else "#777777"


def _proxy_index(results: dict, label: str) -> int | None:
    return next((k for k, p in enumerate(results["proxies"]) if p["label"] == label), None)


def _verdict(comparison: dict) -> str:
    """What a primary comparison supports, in words."""
    a, b = comparison["a"], comparison["b"]
    if comparison["p"] is None:
        return f"No test: too few seeds to compare {a} with {b}."
    if comparison["significant"] and comparison["better"]:
        return f"The evidence supports training on {a}: it beats {b} on this target at the validation size."
    if comparison["significant"]:
        return (
            f"The evidence favours {b}: the proxies' preference did not hold at the validation size, so {a} "
            "should not replace it."
        )
    return (
        f"These runs do not separate {a} from {b}: no evidence that the proposal beats {b} on this target. "
        f"That is a result: {b} is as good as these runs can tell."
    )


# ---- 1. the question and the answer --------------------------------------------------------------


def _answer(results: dict) -> str:
    """Per target, the primary comparison's sentence and what it supports; without validation,
    the proxies' prediction alone."""
    primary = _primary(results)
    comparisons = (results.get("validation") or {}).get("comparisons", [])
    items = []
    for target, fit in results["fits"].items():
        proposal = fit["proposal"]
        ref = f"fits.{target}.proposal"
        predicted = (
            f"predicted by the proxies' {esc(proposal['family'])} fit: "
            f"{_num(f'{ref}.predicted', proposal['predicted'])} "
            f"{_interval(f'{ref}.predicted_interval', proposal['predicted_interval'])}"
        )
        found = [(i, c) for i, c in enumerate(comparisons) if c["target"] == target and c["family"] == "primary"]
        if not found:
            natural = _proxy_index(results, primary)
            measured = (
                f"; the {esc(primary)} proxy measured "
                f"{_num(f'proxies.{natural}.targets.{target}', results['proxies'][natural]['targets'].get(target))}"
                if natural is not None
                else ""
            )
            items.append(
                f"<li><b>{esc(target)}</b>: "
                + ("no primary comparison recorded" if comparisons else "not validated")
                + ". The proposal is the proxies' prediction alone "
                + f"({predicted}{measured}); validating it at the experiment's size over seeds is what would "
                "say whether it beats the baseline.</li>"
            )
            continue
        for i, c in found:
            at = f"validation.comparisons.{i}"
            items.append(
                f"<li><b>{esc(target)}</b>: {esc(c['sentence'])} "
                f"(difference {_num(f'{at}.difference', c['difference'])}, "
                f"p<sub>Holm</sub> {_num(f'{at}.p_holm', c['p_holm'])}). <b>{esc(_verdict(c))}</b> "
                f"<span class=note>The proposal was {predicted}.</span></li>"
            )
    named = "named in the config before the run" if _search(results).get("primary") else "the default"
    return (
        "<section id=answer><h2>The answer (pre-registered primary comparison)</h2>"
        f"<p>Which mixture of {esc(', '.join(results['groups']))} to train on, per target? The primary comparison, "
        f"{named}: each target's proposal against <b>{esc(primary)}</b> on that target, paired by seed, Holm over "
        "the targets. Every other comparison on this page is secondary. A proposal that does not beat "
        f"{esc(primary)} is a result, reported as such.</p><ul>{''.join(items)}</ul></section>"
    )


# ---- 2. the weights --------------------------------------------------------------------------


def _baseline_shares(results: dict, baseline: str) -> tuple[str, dict]:
    """A baseline's shares and where they are in results.json: the validated run's, else its proxy's."""
    runs = (results.get("validation") or {}).get("runs", {})
    if baseline in runs:
        return f"validation.runs.{baseline}.shares", runs[baseline]["shares"]
    k = _proxy_index(results, baseline)
    return f"proxies.{k}.shares", results["proxies"][k]["shares"]


def _weights(results: dict) -> str:
    """Each group's weight in the baselines and each proposal (with its bootstrap 95% interval),
    the constraints, and a chart of the same."""
    groups, baselines = results["groups"], _baselines(results)
    shares = {b: _baseline_shares(results, b) for b in baselines}
    runs = (results.get("validation") or {}).get("runs", {})
    rows = []
    for g in groups:
        row = [esc(g), _num(f"pool.tokens.{g}", results["pool"]["tokens"].get(g))]
        row += [_num(f"{ref}.{g}", s.get(g), SHARE) for ref, s in shares.values()]
        for target, fit in results["fits"].items():
            ref = f"fits.{target}.proposal"
            row.append(
                f"<b>{_num(f'{ref}.weights.{g}', fit['proposal']['weights'][g], SHARE)}</b> "
                f"{_interval(f'{ref}.interval.{g}', fit['proposal']['interval'].get(g), SHARE)}"
            )
            if PROPOSAL + target in runs:
                row.append(
                    _num(
                        f"validation.runs.{PROPOSAL}{target}.shares.{g}",
                        runs[PROPOSAL + target]["shares"].get(g),
                        SHARE,
                    )
                )
        row += [
            _num(f"constraints.min_share.{g}", results["constraints"]["min_share"].get(g), SHARE),
            _num(f"constraints.upper.{g}", results["constraints"]["upper"].get(g), SHARE),
        ]
        rows.append(row)
    headers = ["group", "pool tokens", *baselines]
    for target in results["fits"]:
        headers.append(f"proposal for {target} [95% bootstrap interval]")
        if PROPOSAL + target in runs:
            headers.append(f"proposal for {target} as trained")
    headers += ["min share", "upper bound (max share, epoch cap)"]
    source = "the validated runs' token shares" if runs else "the baseline proxies' token shares"
    cap = results["constraints"]
    return (
        "<section id=weights><h2>The proposed weights beside the baselines</h2>"
        f"<p class=note>Baselines: {source}. A proposal is the mean of the best candidates of the chosen fit "
        "inside the constraints; its interval is the 2.5th to 97.5th percentile of the proposals refitted on "
        "bootstrap resamples of the proxy runs. The upper bound is the smaller of a group's max share and "
        f"what {_num('constraints.max_epochs', cap['max_epochs'], 1)} epochs of its tokens fill of a "
        f"{_num('constraints.budget', cap['budget'])}-token budget."
        + (
            ' "As trained" is the share the validation run\'s mixture took (an epoch cap can hold a group below '
            "its weight)."
            if runs
            else ""
        )
        + "</p>"
        + table(headers, rows, numeric=set(range(1, len(headers))))
        + _weights_chart(results, shares)
        + "</section>"
    )


def _weights_chart(results: dict, shares: dict) -> str:
    groups = results["groups"]
    series = {b: [s.get(g, 0.0) for g in groups] for b, (_, s) in shares.items()}
    errors = {}
    for target, fit in results["fits"].items():
        p = fit["proposal"]
        series[PROPOSAL + target] = [p["weights"][g] for g in groups]
        errors[PROPOSAL + target] = [
            [p["weights"][g] - p["interval"][g][0] for g in groups],
            [p["interval"][g][1] - p["weights"][g] for g in groups],
        ]
    with matplotlib.rc_context(STYLE):
        fig = _figure(7.5, 2.8 + 0.05 * len(groups) * len(series))
        ax = fig.subplots()
        width = 0.8 / max(len(series), 1)
        for k, (name, values) in enumerate(series.items()):
            xs = np.arange(len(groups)) + (k - (len(series) - 1) / 2) * width
            yerr = np.clip(np.array(errors[name]), 0, None) if name in errors else None
            ax.bar(xs, values, width, color=_color(results, name), label=chart_text(name),
                   yerr=yerr, capsize=2, error_kw={"lw": 0.8})  # fmt: skip
        upper = [results["constraints"]["upper"].get(g, 1.0) for g in groups]
        ax.plot(np.arange(len(groups)), upper, "_", ms=24, color="#333333", label="upper bound")
        ax.set_xticks(np.arange(len(groups)), [chart_text(g) for g in groups])
        ax.set_ylabel("share of training tokens")
        ax.set_ylim(0, min(1.05, max(1e-3, *upper, *(v for vs in series.values() for v in vs)) * 1.1))
        ax.set_title("weights per group (proposals: bootstrap 95% interval)", loc="left")
        ax.legend(frameon=False, fontsize=8, ncols=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.yaxis.grid(True, color="#e5e5e5")
        ax.set_axisbelow(True)
    return to_svg(fig, "mixsearch-weights", "the proposed weights beside the baselines")


# ---- 3. the fits -----------------------------------------------------------------------------


def _fit_rows(results: dict) -> list[str]:
    """One row per target and family: the cross-validated scores, which was chosen, and the
    chosen one's prediction at its proposal."""
    rows = []
    for target, fit in results["fits"].items():
        chosen = fit["fit"]["family"]
        for family, scores in fit["fit"]["families"].items():
            ref = f"fits.{target}.fit.families.{family}"
            proposal = fit["proposal"]
            at = f"fits.{target}.proposal"
            rows.append(
                [
                    esc(target),
                    esc(family) + (" <b>(chosen)</b>" if family == chosen else ""),
                    _num(f"{ref}.spearman", scores.get("spearman"), 3),
                    _num(f"{ref}.pearson", scores.get("pearson"), 3),
                    _num(f"{ref}.mae", scores.get("mae")),
                    _num(f"{ref}.folds", scores.get("folds")),
                    _num(f"fits.{target}.proxies", fit["proxies"]),
                    (
                        f"{_num(f'{at}.predicted', proposal['predicted'])} "
                        f"{_interval(f'{at}.predicted_interval', proposal['predicted_interval'])}"
                        if family == chosen
                        else ""
                    ),
                ]
            )
    return rows


def _fits(results: dict) -> str:
    rows = _fit_rows(results)
    headers = ["target", "family", "Spearman", "Pearson", "mean absolute error", "folds", "proxy runs",
               "predicted at the proposal [bootstrap 95%]"]  # fmt: skip
    return (
        "<section id=fit><h2>The fit: how well the proxies predict a mixture they were not fitted on</h2>"
        "<p class=note>Three families per target: gradient-boosted trees on the weights (LightGBM, as RegMix), "
        "the data mixing law c + k exp(t · w) (Ye et al. 2024) and a log-linear model a + Σ b log(w + 0.001) "
        "(each group's share as a power law). Each is scored by k-fold cross-validation over "
        "the proxy runs: the Spearman and Pearson correlations and the mean absolute error (bits per byte) of "
        "its out-of-fold predictions against what the proxies measured. The family with the higher Spearman "
        "(then the lower error) is chosen and proposes the mixture.</p>"
        + table(headers, rows, numeric={2, 3, 4, 5, 6, 7})
        + _fit_chart(results)
        + "</section>"
    )


def _fit_chart(results: dict) -> str:
    """Per target, out-of-fold predicted against measured for every proxy with a value (both
    families; the chosen one filled), the natural-shares proxy's measured value dashed."""
    targets = list(results["fits"])
    natural = _proxy_index(results, "natural")
    with matplotlib.rc_context(STYLE):
        fig = _figure(3.6 * len(targets) + 0.6, 3.4)
        axes = np.atleast_1d(fig.subplots(1, len(targets)))
        for ax, target in zip(axes, targets):
            fit = results["fits"][target]["fit"]
            measured = [p["targets"][target] for p in results["proxies"] if p["targets"].get(target) is not None]
            for k, (family, scores) in enumerate(fit["families"].items()):
                predicted = scores.get("predicted") or []
                chosen = family == fit["family"]
                shown = dict(
                    s=14, color=PALETTE[k], facecolors=PALETTE[k] if chosen else "none", zorder=3 - (not chosen)
                )
                ax.scatter(measured[: len(predicted)], predicted[: len(measured)], label=chart_text(family), **shown)
            if measured:
                low, high = min(measured), max(measured)
                ax.plot([low, high], [low, high], color="#999999", lw=0.8, label="predicted = measured")
            value = results["proxies"][natural]["targets"].get(target) if natural is not None else None
            if value is not None:
                ax.axvline(value, color="#555555", ls="--", lw=0.8, label="natural shares (measured)")
            ax.set_xlabel(f"measured {chart_text(target)} (bits per byte)")
            ax.set_ylabel("predicted out of fold")
            ax.set_title(chart_text(target), loc="left")
        axes[0].legend(frameon=False, fontsize=7)
    return to_svg(fig, "mixsearch-fit", "predicted out of fold against measured, per target")


# ---- 4. the validation -----------------------------------------------------------------------


def _spread(ref: str, entry: dict | None) -> str:
    """A seed mean ± std with its 95% t-interval and the number of seeds."""
    if not entry or entry.get("mean") is None:
        return _num(f"{ref}.mean", None)
    return (
        f"{_num(f'{ref}.mean', entry['mean'])} ± {_num(f'{ref}.std', entry['std'])} "
        f"{_interval(f'{ref}.ci95', entry.get('ci95'))} (n {_num(f'{ref}.n', entry['n'])})"
    )


def _comparison_rows(results: dict) -> list[list[str]]:
    """Every comparison, the primary family first."""
    comparisons = results["validation"]["comparisons"]
    order = sorted(range(len(comparisons)), key=lambda i: comparisons[i]["family"] != "primary")
    rows = []
    for i in order:
        c = comparisons[i]
        ref = f"validation.comparisons.{i}"
        rows.append(
            [
                esc(c["target"]),
                esc(c["a"]),
                esc(c["b"]),
                "<b>primary</b>" if c["family"] == "primary" else esc(c["family"]),
                _num(f"{ref}.difference", c["difference"]),
                _interval(f"{ref}.ci95", c.get("ci95")),
                _num(f"{ref}.p", c["p"]),
                _num(f"{ref}.p_holm", c["p_holm"]),
                esc(verdict(c)),
                esc(c["sentence"]),
            ]
        )
    return rows


def _validation(results: dict) -> str:
    validation = results.get("validation")
    if not validation:
        why = (
            "its validation runs have not finished: this page is written again when they have"
            if _search(results).get("validation")
            else "this search ran without validation (set <code>mixsearch.validation = true</code>)"
        )
        return (
            "<section id=validation><h2>Validation at the experiment's size</h2><p class=warn>Not validated: "
            f"{why}. The proposals are the proxies' predictions, not yet trained at the experiment's size over "
            "seeds.</p></section>"
        )
    runs = validation["runs"]
    targets = list(results["fits"])
    names = [m for m in _mixtures(results) if m in runs] + [m for m in runs if m not in _mixtures(results)]
    rows = [
        [esc(name)] + [_spread(f"validation.runs.{name}.targets.{t}", runs[name]["targets"].get(t)) for t in targets]
        for name in names
    ]
    headers = ["mixture", *(f"{t}: mean ± std [95% CI] (seeds)" for t in targets)]
    config = results["config"]
    seeds = esc(", ".join(map(str, config.get("seeds", []))))
    return (
        "<section id=validation><h2>Validation at the experiment's size, over seeds</h2>"
        "<p class=note>Each baseline and each proposal trained again on "
        f"{_num('config.budget_tokens', config.get('budget_tokens'))} tokens with the "
        f"experiment's model, over seeds {seeds}; the "
        "target in bits per byte (lower is better), the mean over seeds ± their standard deviation with the "
        "mean's 95% t-interval. Comparisons are paired by seed (Student's t on the per-seed differences); the "
        "primary family (each proposal against the primary baseline) is Holm-corrected over the targets, the "
        "secondary family (against the other baselines) on its own.</p>"
        + table(headers, rows, numeric=set(range(1, len(headers))))
        + _validation_chart(results, names)
        + "<h3>Every comparison (primary first)</h3>"
        + table(
            [
                "target",
                "a",
                "b",
                "family",
                "a − b",
                "95% CI",
                "p",
                "p (Holm, in its family)",
                "verdict",
                "what it supports",
            ],
            _comparison_rows(results),
            numeric={4, 5, 6, 7},
            cls="examples",
            widths=[8, 11, 8, 7, 6, 12, 6, 6, 8, 28],
        )  # fmt: skip
        + "</section>"
    )


def _validation_chart(results: dict, names: list[str]) -> str:
    """Per target, each validated mixture's mean with its 95% interval; natural shares dashed."""
    runs = results["validation"]["runs"]
    targets = list(results["fits"])
    with matplotlib.rc_context(STYLE):
        fig = _figure(3.6 * len(targets) + 0.6, 0.3 * len(names) + 1.4)
        axes = np.atleast_1d(fig.subplots(1, len(targets)))
        for ax, target in zip(axes, targets):
            ys = list(range(len(names)))[::-1]
            for y, name in zip(ys, names):
                entry = runs[name]["targets"].get(target) or {}
                if entry.get("mean") is None:
                    continue
                low, high = entry.get("ci95") or (entry["mean"], entry["mean"])
                ax.errorbar(entry["mean"], y, xerr=[[entry["mean"] - low], [high - entry["mean"]]], fmt="o",
                            ms=4, color=_color(results, name), capsize=2, lw=1)  # fmt: skip
            natural = (runs.get("natural", {}).get("targets", {}).get(target) or {}).get("mean")
            if natural is not None:
                ax.axvline(natural, color="#555555", ls="--", lw=0.8)
            ax.set_yticks(ys, [chart_text(n) for n in names])
            ax.set_xlabel(f"{chart_text(target)} (bits per byte; dashed: natural)")
            ax.set_title(chart_text(target), loc="left")
            ax.xaxis.grid(True, color="#e5e5e5")
            ax.set_axisbelow(True)
    return to_svg(fig, "mixsearch-validation", "each validated mixture's target with its 95% interval")


# ---- 5. the per-group trade-off --------------------------------------------------------------

KINDS = (("heldout_bpb", "held-out"), ("lang_bpb", "language"), ("task", "task"), ("tasks", "tasks"))


def _measure_order(key: str) -> tuple:
    """Held-out sets and groups first, then languages, the tasks, and the run's own validation."""
    head = key.split("/", 1)[0]
    rank = next((k for k, (prefix, _) in enumerate(KINDS) if head == prefix), len(KINDS))
    return rank, key != head, key


def _tradeoff(results: dict) -> str:
    tradeoff = (results.get("validation") or {}).get("tradeoff") or {}
    if not tradeoff:
        return ""
    primary = _primary(results)
    parts = []
    for proposal, measures in tradeoff.items():
        rows = []
        for key in sorted(measures, key=_measure_order):
            c = measures[key]
            ref = f"validation.tradeoff.{proposal}.{key}"
            moved = "–" if c.get("better") is None else ("gains" if c["better"] else "pays")
            rows.append(
                [
                    esc(key),
                    _num(f"{ref}.difference", c.get("difference")),
                    _interval(f"{ref}.ci95", c.get("ci95")),
                    _num(f"{ref}.p", c.get("p")),
                    esc(moved),
                ]  # fmt: skip
            )
        parts.append(
            f"<h3>{esc(proposal)} against {esc(primary)}</h3>"
            + table(
                ["measure (bits per byte)", f"{proposal} − {primary}", "95% CI", "p (uncorrected)", "the proposal"],
                rows,
                numeric={1, 2, 3},
            )
        )
    return (
        "<section id=tradeoff><h2>What each group gains or pays</h2><p class=note>Each proposal against "
        f"{esc(primary)} on every held-out set and group (<code>heldout_bpb/&lt;set&gt;/&lt;group&gt;</code>), "
        "each language's held-out text (<code>lang_bpb/…</code>) and each task's gold-answer bits per byte, "
        "paired by seed. Descriptive: these intervals and p-values are not corrected for the many measures, so "
        "read them as where the mixture moves loss, not as tested claims. A negative difference is lower loss: "
        "the group gains; a positive one, it pays. <code>own_validation_bpb</code> is each run's own mixture's "
        "validation split, which differs between mixtures.</p>"
        + _tradeoff_chart(results, tradeoff)
        + "".join(parts)
        + "</section>"
    )


def _tradeoff_chart(results: dict, tradeoff: dict) -> str:
    proposals = list(tradeoff)
    keys = sorted({k for m in tradeoff.values() for k in m}, key=_measure_order)
    with matplotlib.rc_context(STYLE):
        fig = _figure(3.8 * len(proposals) + 2.0, 0.22 * len(keys) + 1.3)
        axes = np.atleast_1d(fig.subplots(1, len(proposals), sharey=True))
        ys = list(range(len(keys)))[::-1]
        for ax, proposal in zip(axes, proposals):
            for y, key in zip(ys, keys):
                c = tradeoff[proposal].get(key) or {}
                if c.get("difference") is None:
                    continue
                low, high = c.get("ci95") or (c["difference"], c["difference"])
                ax.errorbar(c["difference"], y, xerr=[[c["difference"] - low], [high - c["difference"]]], fmt="o",
                            ms=3, lw=0.8, capsize=1.5, color=_color(results, proposal))  # fmt: skip
            ax.axvline(0, color="#555555", ls="--", lw=0.8)
            ax.set_xlabel(f"{chart_text(proposal)} − {chart_text(_primary(results))} (bits per byte)")
            ax.xaxis.grid(True, color="#e5e5e5")
            ax.set_axisbelow(True)
        axes[0].set_yticks(ys, [chart_text(k) for k in keys])
    return to_svg(fig, "mixsearch-tradeoff", "each proposal's difference from the primary baseline per measure")


# ---- 6. proxy validity -----------------------------------------------------------------------


def _validity(results: dict) -> str:
    validity = (results.get("validation") or {}).get("validity") or {}
    if not validity:
        return ""
    parts = []
    for target, entry in validity.items():
        ref = f"validation.validity.{target}"
        ranks = [_ranks(entry["predicted"]), _ranks(entry["measured"])]
        rows = [
            [
                esc(name),
                _num(f"{ref}.predicted.{k}", entry["predicted"][k]),
                esc(ranks[0][k]),
                _num(f"{ref}.measured.{k}", entry["measured"][k]),
                esc(ranks[1][k]),
            ]
            for k, name in enumerate(entry["mixtures"])
        ]
        parts.append(
            f"<h3>{esc(target)}: Spearman {_num(f'{ref}.spearman', entry.get('spearman'), 2)}</h3>"
            + table(
                [
                    "mixture",
                    "predicted by the proxies' fit",
                    "its rank",
                    "measured at the experiment's size (mean)",
                    "its rank",
                ],
                rows,
                numeric={1, 2, 3, 4},
            )  # fmt: skip
        )
    return (
        "<section id=validity><h2>Do the proxies order mixtures as the larger runs do?</h2><p class=note>Per "
        "target, the chosen fit's prediction (fitted on every proxy run) for each validated mixture against the "
        "mean its runs at the experiment's size measured, and the Spearman rank correlation of the two orders "
        "(RegMix's rank invariance; a dash where fewer than three mixtures or a constant order leave it "
        "undefined). With a handful of mixtures one swap moves it a lot.</p>"
        + _validity_chart(results, validity)
        + "".join(parts)
        + "</section>"
    )


def _ranks(values: list) -> list[int]:
    """Each value's rank, 1 for the lowest (the best bits per byte)."""
    order = sorted(range(len(values)), key=lambda k: values[k])
    return [order.index(k) + 1 for k in range(len(values))]


def _validity_chart(results: dict, validity: dict) -> str:
    targets = list(validity)
    with matplotlib.rc_context(STYLE):
        fig = _figure(3.4 * len(targets) + 0.6, 3.0)
        axes = np.atleast_1d(fig.subplots(1, len(targets)))
        for ax, target in zip(axes, targets):
            entry = validity[target]
            for name, p, m in zip(entry["mixtures"], entry["predicted"], entry["measured"]):
                ax.scatter(p, m, s=18, color=_color(results, name), zorder=3)
                ax.annotate(chart_text(name), (p, m), fontsize=7, xytext=(3, 2), textcoords="offset points")
            ax.set_xlabel("predicted by the proxies (bits per byte)")
            ax.set_ylabel("measured, larger runs")
            ax.set_title(chart_text(target), loc="left")
    return to_svg(fig, "mixsearch-validity", "the proxies' predicted order against the larger runs' measured order")


# ---- 7. the proxies, contamination, timing and how -------------------------------------------


def _proxies(results: dict) -> str:
    groups, targets = results["groups"], list(results["fits"])
    rows = []
    for k, proxy in enumerate(results["proxies"]):
        ref = f"proxies.{k}"
        rows.append(
            [esc(proxy["label"]), f'<span class="id">{esc(proxy["name"])}</span>']
            + [_num(f"{ref}.shares.{g}", proxy["shares"].get(g), SHARE) for g in groups]
            + [_num(f"{ref}.targets.{t}", proxy["targets"].get(t)) for t in targets]
        )
    headers = ["proxy", "run", *groups, *(f"{t} (bpb)" for t in targets)]
    return (
        "<section id=proxies><h2>Every proxy run</h2><p class=note>The token shares each proxy trained on (its "
        "mixture's manifest: what the run saw, not the weights asked for) and its measured targets.</p>"
        + table(headers, rows, numeric=set(range(2, len(headers))))
        + "</section>"
    )


def _contamination(results: dict) -> str:
    """The check per mixture: the validated runs' first, then each proxy's under its label."""
    labels = {p["name"]: p["label"] for p in results["proxies"]}
    checks = results.get("contamination", {})
    order = [n for n in checks if n not in labels] + [p["name"] for p in results["proxies"] if p["name"] in checks]
    rows = [
        [
            esc(f"proxy {labels[name]} ({name})" if name in labels else name),
            _num(f"contamination.{name}.contaminated_documents", checks[name].get("contaminated_documents")),
            _num(f"contamination.{name}.contaminated_windows", checks[name].get("contaminated_windows")),
            _num(f"contamination.{name}.common_windows", checks[name].get("common_windows")),
            _num(f"contamination.{name}.tokens_checked", checks[name].get("tokens_checked")),
        ]
        for name in order
    ]
    return (
        "<h3>Contamination check: training documents sharing a token window with held-out or task text</h3>"
        + table(
            [
                "mixture",
                "training documents sharing a window",
                "shared windows",
                "common windows (not counted)",
                "training tokens checked",
            ],
            rows,
            numeric={1, 2, 3, 4},
        )  # fmt: skip
    )


def _how(results: dict) -> str:
    search, timing, sampling = _search(results), results.get("timing", {}), results.get("sampling", {})
    concentration = search.get("concentration") or [None, None]
    name = next(iter(results["fits"]))
    first = results["fits"][name]["proposal"]
    steps = ", ".join(
        f"{label} {_num(f'timing.{key}', timing[key], 1)} s"
        for key, label in (("curation_s", "curation"), ("proxies_s", "proxy runs"), ("fits_s", "fits"),
                           ("validation_s", "validation"), ("contamination_check_s", "contamination check"))
        if key in timing
    )  # fmt: skip
    total = timing.get("total_s")
    return (
        "<section id=how><h2>How each number was measured</h2>"
        f"<p>Proxies: {_num('sampling.drawn', sampling.get('drawn'))} mixtures drawn as RegMix draws them "
        f"({_num('sampling.rejected', sampling.get('rejected'))} draws over a bound rejected and drawn again, never "
        "clipped): a Dirichlet centred on the natural token shares, its concentration scaled log-uniformly from "
        f"{_num('config.mixsearch.concentration.0', concentration[0], 2)} to "
        f"{_num('config.mixsearch.concentration.1', concentration[1], 2)} (low values put nearly all weight on "
        "one group), plus the baselines; each trained once as a small model on "
        f"{_num('config.mixsearch.proxy_tokens', search.get('proxy_tokens'))} tokens. Fit: per target, "
        "gradient-boosted trees, the mixing law and the log-linear model, each cross-validated; the best predicts "
        f"{_num(f'fits.{name}.proposal.candidates', first.get('candidates'))} candidate "
        "mixtures inside the constraints and the proposal is the mean of its best "
        f"{_num(f'fits.{name}.proposal.top_k', first.get('top_k'))}. Intervals: "
        f"{_num(f'fits.{name}.proposal.resamples', first.get('resamples'))} bootstrap "
        "resamples of the proxy runs, each refitted and re-optimized. Validation: the baselines and the proposals "
        "at the experiment's model and budget over seeds, paired by seed.</p>"
        "<p class=warn>Caveat: proxies train on fewer tokens than the validation runs, so a group repeated at the "
        "validation budget (its epochs grow with the budget) is repeated more than any proxy saw; the proxies "
        "cannot have learnt what repetition costs there. The epoch cap bounds it; the validation measures it.</p>"
        f"<p>Wall time of the last invocation: {_num('timing.total_s', total, 1)} s "
        f"({steps}); runs finished earlier are read back, not timed again.</p></section>"
    )


def _header(results: dict) -> str:
    search, config = _search(results), results["config"]
    targets = ", ".join(results["fits"])
    validated = bool(results.get("validation"))
    nav = [("answer", "the answer"), ("weights", "weights"), ("fit", "the fit"), ("validation", "validation")]
    if validated:
        nav += [("tradeoff", "per-group trade-off"), ("validity", "proxy validity")]
    nav += [("proxies", "proxy runs"), ("how", "how it was measured")]
    return (
        "<header><h1>Which mixture to train on: a proxy-model search</h1>"
        f"<p>{len(results['proxies'])} proxy runs (the baselines {esc(', '.join(_baselines(results)))} and sampled "
        f"mixtures) over the groups {esc(', '.join(results['groups']))}, one regression per target ({esc(targets)}), "
        "its optimum proposed inside the constraints"
        + (
            f", then validated at the experiment's size over {len(config.get('seeds', []))} seed(s) against the "
            f"baselines; primary baseline <b>{esc(_primary(results))}</b>."
            if validated
            else "; not validated at the experiment's size."
        )
        + f" Proxy budget {_num('config.mixsearch.proxy_tokens', search.get('proxy_tokens'))} tokens.</p>"
        + "<nav>"
        + "".join(f"<a href='#{key}'>{esc(title)}</a>" for key, title in nav)
        + "</nav></header>"
    )


def render(results: dict) -> str:
    """The search's report page of ``results`` (results.json's content) as a string."""
    from report.build import CSS

    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width, initial-scale=1'>",
        f"<title>mixture search report</title><style>{CSS}</style></head><body>",
        _header(results),
        "<main>",
        _answer(results),
        _weights(results),
        _fits(results),
        _validation(results),
        _tradeoff(results),
        _validity(results),
        _proxies(results),
        "<section id=contamination><h2>Contamination</h2>" + _contamination(results) + "</section>",
        _how(results),
        "</main></body></html>",
    ]
    return "\n".join(parts)


def build_mixsearch_report(out_dir: str | Path) -> Path:
    """Write ``<out_dir>/report/index.html`` from a search's ``<out_dir>/results.json``; return its path."""
    return write_results_page(out_dir, render)
