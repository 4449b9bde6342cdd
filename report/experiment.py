"""The experiment's report: one static HTML page (``<out_dir>/report/index.html``) built from
``results.json`` alone: the primary comparison named in the config before the run, first (the rest
is secondary), what each variant kept and trained on (tokens, bytes, epochs, kinds of
document), the held-out sets and where they came from, the contamination check, held-out bits per
byte with seed error bars (headline over the clean sets, each set and group, junk apart), training
and held-out curves, memorization of planted canaries, transfer scores, and every comparison with the
sentence it supports.

Every number shown from ``results.json`` carries ``data-json="results.json#<key>.<key>..."`` so a
reader (or a test) can check the page against the file.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

from experiment.results import FAMILIES
from pipeline.io.writer import atomic_path, read_json
from report.html import esc, fmt, table
from report.plots import STYLE, _figure, to_svg

ONE_ANSWER = 0.9  # a model giving one answer to this share of a task's items is flagged
PALETTE = ["#3b6ea8", "#d98b3a", "#4f9a5b", "#b8463f", "#7d5ba6", "#8c6d46", "#c25b9a", "#5f6b78"]


def _value(results: dict, metric: str, model: str, digits: int = 3) -> str:
    entry = results["metrics"].get(metric, {}).get(model)
    if not entry or entry["mean"] is None:
        return "–"
    ref = f"results.json#metrics.{metric}.{model}"
    return (
        f'<span class="num" data-json="{esc(ref)}.mean">{esc(fmt(entry["mean"], digits))}</span>'
        f' ± <span class="num" data-json="{esc(ref)}.std">{esc(fmt(entry["std"], digits))}</span>'
    )


def _color(results: dict, model: str) -> str:
    """One color per model on every chart: random first, then the variants in config order (the
    bag-of-words reference is grey)."""
    if model == "bag-of-words":
        return "#777777"
    return PALETTE[["random", *results["variants"]].index(model) % len(PALETTE)]


def _interval(entry: dict) -> tuple[float, float]:
    """The 95% t-interval of a seed mean (:func:`experiment.statistics.spread`); the mean alone
    for one seed."""
    from scipy import stats

    if not entry or entry["n"] < 2:
        return entry["mean"], entry["mean"]
    half = stats.t.ppf(0.975, entry["n"] - 1) * entry["std"] / entry["n"] ** 0.5
    return entry["mean"] - half, entry["mean"] + half


def _label_curves(results: dict, models: list[str]) -> str:
    """Test accuracy against labelled examples (log axis), one panel per method: a line per model
    with its 95% interval over seeds, the bag-of-words reference dashed in each panel."""
    info = results.get("task") or {}
    methods = [m for m in ("probe", "finetune") if info.get("sizes", {}).get(m)]
    if not methods:
        return ""
    titles = {"probe": "linear probe (frozen backbone)", "finetune": "full fine-tuning"}
    with matplotlib.rc_context(STYLE):
        fig = _figure(4.6 * len(methods), 3.3)
        axes = fig.subplots(1, len(methods), squeeze=False)[0]
        for ax, method in zip(axes, methods, strict=True):
            lines = [(model, method, "-") for model in models] + [("bag-of-words", "bow", "--")]
            for model, key, style in lines:
                points = []
                for size in info["sizes"].get(key, []):
                    entry = results["metrics"].get(f"{key}_accuracy@{size}", {}).get(model)
                    if entry and entry["mean"] is not None:
                        points.append((info["examples"][size], entry["mean"], *_interval(entry)))
                if not points:
                    continue
                x, mean, low, high = zip(*points)
                color = _color(results, model)
                ax.plot(x, mean, style, color=color, marker="o", ms=3, lw=1.2, label=model)
                ax.fill_between(x, low, high, color=color, alpha=0.15, lw=0)
            for key, style, label in (("chance", ":", "chance"), ("majority", "-.", "majority class")):
                if info.get(key) is not None:
                    ax.axhline(info[key], color="#999999", ls=style, lw=1, label=label if ax is axes[0] else None)
            ax.set_xscale("log")
            ax.set_xlabel("labelled examples")
            ax.set_ylabel("test accuracy")
            ax.set_title(titles[method], loc="left")
        axes[0].legend(frameon=False, fontsize=8)
    return to_svg(fig, "label-efficiency", "test accuracy against labelled examples")


def _lines(info: dict) -> str:
    """The lines accuracy is read against: chance and the majority class's share of the test split."""
    if info.get("chance") is None:
        return ""
    return (
        '<p>Chance (one over the classes): <span class="num" data-json="results.json#task.chance">'
        f'{fmt(info["chance"], 3)}</span>; always the majority class: <span class="num" '
        f'data-json="results.json#task.majority">{fmt(info["majority"], 3)}</span> of the test split.</p>'
    )


def _transfer(results: dict, models: list[str]) -> str:
    """The label-efficiency curves, accuracy and cross-entropy tables, and what the task was."""
    info = results.get("task") or {}
    accuracy = [m for m in results["metrics"] if m.startswith(("probe_accuracy@", "finetune_accuracy@"))]
    losses = [m for m in results["metrics"] if m.startswith(("probe_loss@", "finetune_loss@"))]
    reference = [m for m in results["metrics"] if m.startswith("bow_accuracy@")]
    balanced = [m for m in results["metrics"] if "_balacc@" in m]
    gains = [m for m in results["metrics"] if "_gain@" in m]
    shown = [*models, *(["bag-of-words"] if reference else [])]
    draws = info.get("draws")
    return (
        "<section id=transfer><h2>Transfer to the downstream task: label efficiency</h2>"
        "<p class=note>At each number of labelled examples, "
        + (f'<span class="num" data-json="results.json#task.draws">{draws}</span> ' if draws else "several ")
        + "labelled subsets are drawn per seed (class-balanced; the whole pool is one draw; every model of a seed "
        "sees the same draws). Linear probe: a logistic regression on the frozen backbone's mean final hidden "
        "state, its L2 penalty chosen by dev loss. Full fine-tuning: every weight and a linear head, with warmup, "
        "at a few learning rates; the dev loss stops each and picks one"
        + (
            f' (<span class="num" data-json="results.json#task.finetune_draws">{info.get("finetune_draws")}</span>'
            " draw per size)"
            if info.get("finetune_draws")
            else ""
        )
        + ". Bag of words: TF-IDF and logistic regression on the same text, the reference line. 'random' is the "
        "same architecture, not pretrained. Labelled pool "
        f'<span class="num" data-json="results.json#task.pool_examples">{fmt(info.get("pool_examples"))}</span>, dev '
        f'<span class="num" data-json="results.json#task.dev_examples">{fmt(info.get("dev_examples"))}</span>, test '
        f'<span class="num" data-json="results.json#task.test_examples">{fmt(info.get("test_examples"))}</span> '
        "examples. Each point is the mean over seeds of the mean over draws, its band the 95% interval over "
        "seeds. The dev split is larger than the smallest labelled sets: the few-label points are what the best "
        "of a few settings gives, not what one could choose blind.</p>"
        + _label_curves(results, models)
        + "<h3>Test accuracy (mean over seeds ± std)</h3>"
        + _lines(info)
        + _metric_table(results, accuracy + reference, shown, 3, lambda m: m.replace("_accuracy@", " @ "))
        + (
            "<h3>Balanced test accuracy (the mean of the classes' recalls; mean over seeds ± std)</h3>"
            + _metric_table(results, balanced, shown, 3, lambda m: m.replace("_balacc@", " @ "))
            if balanced
            else ""
        )
        + (
            "<h3>Gain in accuracy over random initialization, seed by seed</h3>"
            + _metric_table(results, gains, models[1:], 3, lambda m: m.replace("_gain@", " @ "))
            + _comparisons(results, lambda c: _made_in(c) == "label efficiency")
            if gains
            else ""
        )
        + "<h3>Test cross-entropy (nats)</h3>"
        + _metric_table(results, losses, models, 3, lambda m: m.replace("_loss@", " @ "))
        + "</section>"
    )


def _bars(
    results: dict, metrics: list[str], models: list[str], title: str, ylabel: str, name: str, zoom: bool = False
) -> str:
    """Grouped bars: one group per metric, one bar per model, error bars = seed std. ``zoom``
    starts the axis near the smallest bar (small differences of a large quantity)."""
    with matplotlib.rc_context(STYLE):
        fig = _figure(max(5.0, 1.1 * len(metrics) * max(len(models), 2) / 2), 3.0)
        ax = fig.subplots()
        width = 0.8 / max(len(models), 1)
        lows = []
        for i, model in enumerate(models):
            means, stds, xs = [], [], []
            for j, metric in enumerate(metrics):
                entry = results["metrics"].get(metric, {}).get(model)
                if entry and entry["mean"] is not None:
                    xs.append(j + (i - (len(models) - 1) / 2) * width)
                    means.append(entry["mean"])
                    stds.append(entry["std"])
                    lows.append(entry["mean"] - entry["std"])
            ax.bar(xs, means, width * 0.95, yerr=stds, capsize=3, color=_color(results, model), label=model)
        ax.set_xticks(range(len(metrics)), [m.split("/", 1)[-1] if "/" in m else m for m in metrics], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left")
        if lows and zoom:
            top = max(
                entry["mean"] + entry["std"]
                for metric in metrics
                for entry in [results["metrics"].get(metric, {}).get(m) for m in models]
                if entry and entry["mean"] is not None
            )
            ax.set_ylim(min(lows) * 0.97, top * 1.01)
        ax.legend(frameon=False, fontsize=8, ncol=min(len(models), 4))
    return to_svg(fig, name, title)


def _curves(results: dict) -> str:
    """Training loss and held-out bits per byte (the headline: mean over the clean sets) against
    tokens, per variant: each seed a thin line."""
    curves = results.get("curves", {})
    if not curves:
        return ""
    with matplotlib.rc_context(STYLE):
        fig = _figure(9.0, 3.2)
        left, right = fig.subplots(1, 2)
        for name in results["variants"]:
            color = _color(results, name)
            for k, rows in enumerate(curves.get(name, {}).values()):
                train = [(r["tokens_seen"], r["train_loss"]) for r in rows if r.get("train_loss") is not None]
                held = [(r["tokens_seen"], r["heldout_bpb"]) for r in rows if r.get("heldout_bpb") is not None]
                label = name if k == 0 else None
                if train:
                    left.plot(*zip(*train), color=color, lw=1, alpha=0.8, label=label)
                if held:
                    right.plot(*zip(*held), color=color, lw=1, alpha=0.8, marker="o", ms=2, label=label)
        left.set_xlabel("training tokens")
        left.set_ylabel("training loss (nats per token)")
        left.set_title("training loss (each variant's own mixture)", loc="left")
        right.set_xlabel("training tokens")
        right.set_ylabel("bits per byte")
        right.set_title("held-out: mean over the clean sets", loc="left")
        right.legend(frameon=False, fontsize=8)
    return to_svg(fig, "curves", "training and held-out curves")


def _num(ref: str, value, digits: int | None = None) -> str:
    shown = fmt(value) if digits is None else fmt(value, digits)
    return f'<span class="num" data-json="{esc(ref)}">{esc(shown)}</span>'


def _curation_table(results: dict) -> str:
    rows = []
    for name in results["variants"]:
        info = results["curation"][name]
        used = info.get("trained_on", {})
        stages = info["stages"]
        ref = f"results.json#curation.{name}"
        epochs = ", ".join(
            f"{esc(g)} " + _num(f"{ref}.trained_on.epochs.{g}", e, 2) for g, e in used.get("epochs", {}).items()
        )
        rows.append(
            [
                esc(name),
                esc(" + ".join(stages) or "none"),
                _num(f"{ref}.documents_in", info["documents_in"]),
                _num(f"{ref}.documents_curated", info["documents_curated"]),
                _num(f"{ref}.tokens_available", info["tokens_available"]),
                _num(f"{ref}.tokens_taken", info["tokens_taken"]),
                _num(f"{ref}.trained_on.bytes", used.get("bytes")),
                _num(f"{ref}.trained_on.bytes_per_token", used.get("bytes_per_token"), 3),
                epochs,
            ]
        )
    return table(
        [
            "variant",
            "curation",
            "documents read",
            "documents kept",
            "training tokens available",
            "tokens trained on",
            "bytes trained on",
            "bytes per token",
            "epochs per group",
        ],
        rows,
        numeric={2, 3, 4, 5, 6, 7},
    )


def _kinds_table(results: dict) -> str:
    """Each kind of document's share of the tokens a variant trained on (demo corpus labels)."""
    kinds = sorted(
        {k for name in results["variants"] for k in results["curation"][name].get("trained_on", {}).get("kinds", {})}
    )
    if not kinds:
        return ""
    rows = []
    for name in results["variants"]:
        shares = results["curation"][name]["trained_on"].get("kinds", {})
        rows.append(
            [esc(name)]
            + [
                _num(f"results.json#curation.{name}.trained_on.kinds.{k}.share", shares[k]["share"], 3)
                if k in shares
                else "–"
                for k in kinds
            ]
        )
    return "<h3>Kinds of document in the tokens trained on (share of tokens; the corpus's labels)</h3>" + table(
        ["variant", *kinds], rows, numeric=set(range(1, len(kinds) + 1))
    )


def _licences_table(results: dict) -> str:
    """Each licence's share of the tokens a variant trained on (from its mixture's manifest)."""
    names = sorted({k for name in results["variants"] for k in results["curation"][name].get("licences", {})})
    if not names:
        return ""
    rows = []
    for name in results["variants"]:
        shares = results["curation"][name].get("licences", {})
        rows.append(
            [esc(name)]
            + [
                _num(f"results.json#curation.{name}.licences.{k}.share", shares[k]["share"], 3) if k in shares else "–"
                for k in names
            ]
        )
    return "<h3>Licences of the tokens trained on (share of tokens)</h3>" + table(
        ["variant", *names], rows, numeric=set(range(1, len(names) + 1))
    )


def _heldout_table(results: dict) -> str:
    """The held-out sets: where each came from, clean or not, documents and bytes."""
    rows = []
    for name, info in results["heldout"]["sets"].items():
        ref = f"results.json#heldout.sets.{name}"
        rows.append(
            [
                esc(name),
                esc(info.get("origin", "")),
                "clean" if info["clean"] else "junk (reported apart)",
                _num(f"{ref}.documents", info["documents"]),
                _num(f"{ref}.bytes", info["bytes"]),
                esc(", ".join(info["groups"])),
                esc(info.get("how", "")),
                f"<code>{esc(str(info.get('sha256', ''))[:12])}</code>",
            ]
        )
    return table(
        ["set", "origin", "role", "documents", "bytes", "groups", "how chosen", "file sha256"], rows, numeric={3, 4}
    )


def _contamination_table(results: dict) -> str:
    rows = []
    for name, check in results.get("contamination", {}).items():
        ref = f"results.json#contamination.{name}"
        junk = check.get("junk") or {}
        rows.append(
            [
                esc(name),
                _num(f"{ref}.contaminated_documents", check.get("contaminated_documents")),
                _num(f"{ref}.contaminated_windows", check.get("contaminated_windows")),
                _num(f"{ref}.common_windows", check.get("common_windows")),
                _num(f"{ref}.tokens_checked", check.get("tokens_checked")),
                _num(f"{ref}.junk.contaminated_documents", junk.get("contaminated_documents")),
            ]
        )
    return table(
        [
            "variant",
            "training documents sharing a window with held-out or task text",
            "shared windows",
            "common windows (not counted)",
            "training tokens checked",
            "training documents sharing a window with the junk set (reported, allowed)",
        ],
        rows,
        numeric={1, 2, 3, 4, 5},
    )


def _memorization(results: dict) -> str:
    """Memorization by occurrences in the raw pool: per variant, how often its mixture trained on a
    canary, exact extraction, leading tokens extracted, suffix loss and exposure (mean ± seed std)."""
    info = results.get("memorization")
    if not info:
        return ""
    variants = results["variants"]
    counts = info["canaries"]
    order = sorted(counts, key=lambda n: -1 if n == "control" else int(n))
    head = [esc(v) for v in variants]
    sections = []
    trained = info.get("trained")
    if trained:
        rows = [
            [esc(n), _num(f"results.json#memorization.canaries.{n}", counts[n])]
            + [
                (
                    _num(f"results.json#memorization.trained.{v}.{n}.mean_views", trained[v][n]["mean_views"], 2)
                    + " ("
                    + _num(f"results.json#memorization.trained.{v}.{n}.seen_share", trained[v][n]["seen_share"], 2)
                    + ")"
                )
                if n in trained.get(v, {})
                else "–"
                for v in variants
            ]
            for n in order
            if n != "control"
        ]
        sections.append(
            "<h3>Times each variant's mixture trained on a canary (mean; share seen at least once)</h3>"
            + table(["occurrences in the raw pool", "canaries", *head], rows, numeric=set(range(1, len(variants) + 2)))
        )
    names = {
        "exposure": "exposure (bits; lower: memorized less)",
        "exact": "exact extraction (share of canaries)",
        "matched": "leading suffix tokens extracted",
        "suffix_loss": "suffix loss (nats per token)",
    }
    for measure, title in names.items():
        rows = [
            [esc(n), _num(f"results.json#memorization.canaries.{n}", counts[n])]
            + [_value(results, f"memorization/{measure}/{n}", v, 3) for v in variants]
            for n in order
        ]
        sections.append(
            f"<h3>{esc(title)}</h3>"
            + table(["occurrences in the raw pool", "canaries", *head], rows, numeric=set(range(1, len(variants) + 2)))
        )
    return (
        "<section id=memorization><h2>Memorization of planted canaries</h2>"
        f"<p class=note>Canaries are texts of random words planted in the raw pool 1 to 100 times; controls are made "
        f"alike and planted nowhere. Each is cut after its first "
        f'<span class="num" data-json="results.json#memorization.prefix_tokens">{info["prefix_tokens"]}</span> tokens; '
        f'greedy decoding of the next <span class="num" data-json="results.json#memorization.suffix_tokens">'
        f"{info['suffix_tokens']}</span> is scored (exact extraction and leading tokens right, Carlini et al. 2022), "
        "with the true suffix's loss, and exposure: how far below the controls' suffix losses a canary's lies, "
        "log2(controls + 1) − log2(rank) bits (Carlini et al. 2019; each control against the others averages 1.43 bits "
        "by construction). "
        "Means over the canaries of each row, ± the spread over seeds.</p>"
        + "".join(sections)
        + "<h3>Comparisons (Holm over the memorization family)</h3>"
        + _comparisons(results, lambda c: _made_in(c) == "memorization")
        + "</section>"
    )


def _languages(results: dict) -> str:
    """Bits per byte per language on the held-out text, per variant (mean ± seed std): the macro
    averages first, then each language with its held-out bytes; the temperature family's chart and
    comparisons."""
    info = results.get("languages")
    if not info:
        return ""
    variants = [
        v for v in results["variants"] if f"lang_bpb/{(info['low_resource'] or ['-'])[0]}" in results["metrics"]
    ]
    rows = []
    for name, label in (("low-resource", "low-resource (macro-average)"), ("high-resource", "high-resource")):
        if f"lang_bpb/{name}" in results["metrics"]:
            rows.append([esc(label), ""] + [_value(results, f"lang_bpb/{name}", v, 4) for v in variants])
    for lang, held in info["heldout"].items():
        rows.append(
            [esc(lang), _num(f"results.json#languages.heldout.{lang}.bytes", held["bytes"])]
            + [_value(results, f"lang_bpb/{lang}", v, 4) for v in variants]
        )
    family = list(info.get("family") or {})
    chart = ""
    if family:
        metrics = [m for m in ("lang_bpb/low-resource", "lang_bpb/high-resource") if m in results["metrics"]]
        chart = _bars(
            results,
            metrics,
            family,
            "bits per byte by sampling temperature (± seed std)",
            "bits per byte",
            "languages",
            zoom=True,
        )
    temperatures = ", ".join(
        f"{esc(name)}: {'uniform (UniMax)' if entry['uniform'] else 'T = ' + fmt(entry['temperature'], 3)}"
        for name, entry in (info.get("family") or {}).items()
    )
    return (
        "<section id=languages><h2>Bits per byte per language</h2>"
        "<p class=note>Every document of the clean held-out sets scored whole after pretraining (its tokens after "
        "an end-of-document token, windows of the model's context); a language's bits over its bytes. "
        f"High-resource: {esc(', '.join(info['high_resource']) or 'none')}; low-resource: every other language with "
        "held-out text, averaged with each language counting once. Few held-out bytes make a language's own number "
        "noisy; the macro-average is the measure."
        + (f" Temperature family: {temperatures}; each compared with the first." if family else "")
        + "</p>"
        + chart
        + table(
            ["language", "held-out bytes", *[esc(v) for v in variants]], rows, numeric=set(range(1, len(variants) + 2))
        )
        + (
            "<h3>Comparisons (Holm over the languages family)</h3>"
            + _comparisons(results, lambda c: _made_in(c) == "languages")
            if family
            else ""
        )
        + "</section>"
    )


def _efficiency(results: dict) -> str:
    """Held-out loss against training tokens per variant (each seed's points and fitted power law)
    and the data multiplier with its interval."""
    info = results.get("data_efficiency")
    if not info:
        return ""
    import numpy as np

    with matplotlib.rc_context(STYLE):
        fig = _figure(6.0, 3.4)
        ax = fig.subplots()
        for name, seeds in info["fits"].items():
            color = _color(results, name)
            for k, entry in enumerate(seeds.values()):
                tokens, losses = zip(*entry["points"])
                ax.plot(tokens, losses, "o", color=color, ms=3, label=name if k == 0 else None)
                fit = entry["fit"]
                if fit:
                    grid = np.geomspace(min(tokens) / 2, max(tokens) * 2, 50)
                    ax.plot(grid, fit["E"] + fit["B"] * (grid / 1e6) ** -fit["beta"], color=color, lw=0.8, alpha=0.7)
        ax.set_xscale("log")
        ax.set_xlabel("training tokens")
        ax.set_ylabel("held-out bits per byte")
        ax.set_title("held-out loss against tokens, fitted E + B / D^beta", loc="left")
        ax.legend(frameon=False, fontsize=8)
    figure = to_svg(fig, "efficiency", "held-out loss against training tokens")
    rows = []
    for name, seeds in info["fits"].items():
        fits = [entry["fit"] for entry in seeds.values() if entry["fit"]]
        cells = []
        for key in ("E", "B", "beta"):
            values = np.array([f[key] for f in fits])
            cells.append(f"{fmt(values.mean(), 3)} ± {fmt(values.std(ddof=1), 3)}" if len(values) > 1 else "–")
        m = info["multiplier"].get(name)
        if m and m["geomean"] is not None:
            ref = f"results.json#data_efficiency.multiplier.{name}"
            ci = m["ci95"] or [None, None]
            shown = (
                f"{_num(f'{ref}.geomean', m['geomean'], 2)}x (95% CI {_num(f'{ref}.ci95.0', ci[0], 2)} to "
                f"{_num(f'{ref}.ci95.1', ci[1], 2)})" + (" extrapolated" if m["extrapolated"] else "")
            )
        else:
            shown = "reference" if name == info["reference"] else "–"
        rows.append([esc(name), *cells, shown])
    return (
        "<section id=efficiency><h2>Data efficiency</h2>"
        f"<p class=note>{esc(info['how'])}. Budgets: {esc(', '.join(f'{b:,}' for b in info['budgets']))} tokens; "
        "E, B, beta are mean ± std over seeds; the multiplier's interval is over seeds (t on the logarithms).</p>"
        + figure
        + table(
            ["variant", "E (bits per byte)", "B", "beta", f"tokens multiplier against {info['reference']}"],
            rows,
            numeric={1, 2, 3},
        )
        + "</section>"
    )


def _with_ci(results: dict, metric: str, model: str, digits: int = 3) -> str:
    """A seed mean with its 95% t-interval (both from results.json)."""
    entry = results["metrics"].get(metric, {}).get(model)
    if not entry or entry["mean"] is None:
        return "–"
    ref = f"results.json#metrics.{metric}.{model}"
    shown = f'<span class="num" data-json="{esc(ref)}.mean">{esc(fmt(entry["mean"], digits))}</span>'
    ci = entry.get("ci95")
    if ci:
        shown += (
            f' [<span class="num" data-json="{esc(ref)}.ci95.0">{esc(fmt(ci[0], digits))}</span>, '
            f'<span class="num" data-json="{esc(ref)}.ci95.1">{esc(fmt(ci[1], digits))}</span>]'
        )
    return shown


def _verdict(results: dict, metric: str, model: str) -> str:
    """The Holm-adjusted verdict of ``model`` against the baseline on ``metric``, where tested."""
    for i, c in enumerate(results["comparisons"]):
        if c["metric"] == metric and c["a"] == model and c["b"] == results["baseline"]:
            word = ("better" if c["better"] else "worse") if c["significant"] else "no difference shown"
            return f"{esc(word)} (p<sub>Holm</sub> {_num(f'results.json#comparisons.{i}.p_holm', c['p_holm'], 3)})"
    return "–"


def _tasks(results: dict) -> str:
    """The multiple-choice tasks scored by likelihood: the aggregates per variant, then per task
    and variant its items, chance and majority lines, per-byte accuracy, centred accuracy and gold
    bits per byte (seed means with 95% t-intervals) with the verdicts against the baseline, the
    curves, the signal table and the comparisons of both families."""
    info = results.get("tasks")
    if not info:
        return ""
    variants = [v for v in results["variants"] if v in info["runs"]]
    rows = []
    for task, entry in info["tasks"].items():
        ref = f"results.json#tasks.tasks.{task}"
        for k, v in enumerate(variants):
            rows.append(
                [
                    esc(task) if k == 0 else "",
                    (
                        _num(f"{ref}.items", entry["items"])
                        + (f" ({entry['truncated']} cut)" if entry["truncated"] else "")
                    )
                    if k == 0
                    else "",
                    _num(f"{ref}.chance", entry["chance"], 3) if k == 0 else "",
                    _num(f"{ref}.majority", entry.get("majority"), 3) if k == 0 else "",
                    esc(v),
                    _with_ci(results, f"task/{task}/acc_norm", v),
                    _with_ci(results, f"task/{task}/centred_acc_norm", v),
                    _with_ci(results, f"task/{task}/acc_pmi", v),
                    _with_ci(results, f"task/{task}/gold_bpb", v),
                    _verdict(results, f"task/{task}/acc_norm", v),
                    _verdict(results, f"task/{task}/gold_bpb", v),
                ]
            )
    columns = [
        "task", "items", "chance", "majority", "variant", "acc_norm", "centred acc_norm", "acc_pmi", "gold bpb",
        "acc_norm vs baseline", "gold bpb vs baseline",
    ]  # fmt: skip
    files = ", ".join(f"{esc(Path(f['path']).name)} <code>{esc(f['sha256'][:12])}</code>" for f in info["files"])
    return (
        "<section id=tasks><h2>Tasks scored by likelihood</h2><p class=note>Each item's choices are scored as "
        "continuations of its context by the pretrained model (no gradient step): acc_norm, the share of "
        "items whose right choice has the highest log-likelihood per byte (chance and majority, always the most "
        "common right answer, beside it; each number the mean over seeds with its 95% t-interval); "
        "acc_pmi, the highest over the choice's own likelihood without the context (what the item adds to a "
        "model's preference for some answers, reported, not tested); "
        "gold bpb, the right choice's bits per byte (lower is better), the continuous measure that ranks data "
        "recipes more reliably at small scale. CORE is the mean over tasks of the accuracy centred on chance "
        "(0 is guessing). Built from the held-out sets and the task's articles, which no pool holds; "
        f"files: {files}.</p>"
        + table(
            ["variant", "CORE (mean centred acc_norm)", "vs baseline", "mean gold bpb", "vs baseline"],
            [
                [
                    esc(v),
                    _with_ci(results, "tasks/core", v),
                    _verdict(results, "tasks/core", v),
                    _with_ci(results, "tasks/gold_bpb", v),
                    _verdict(results, "tasks/gold_bpb", v),
                ]
                for v in variants
            ],
            numeric={1, 3},
        )
        + table(columns, rows, numeric={1, 2, 3, 5, 6, 7, 8})
        + _one_answer(results, info, variants)
        + _task_curves(results)
        + _signal_table(results, info)
        + "<h3>Comparisons: the aggregates (Holm over the task aggregates family)</h3>"
        + _comparisons(results, lambda c: _made_in(c) == "task aggregates")
        + "<h3>Comparisons: each task (Holm over the tasks family)</h3>"
        + _comparisons(results, lambda c: _made_in(c) == "tasks")
        + "</section>"
    )


def _task_curves(results: dict) -> str:
    """CORE and the mean gold bits per byte of the curve items against training tokens, per
    variant, each seed a thin line; nothing when the runs scored no curve items."""
    curves = results.get("curves", {})
    keys = [("tasks_core", "CORE (mean centred acc_norm)"), ("tasks_gold_bpb", "mean gold bits per byte")]
    if not any(row.get("tasks_core") is not None for runs in curves.values() for rows in runs.values() for row in rows):
        return ""
    with matplotlib.rc_context(STYLE):
        fig = _figure(9.0, 3.2)
        axes = fig.subplots(1, 2)
        for name in results["variants"]:
            for k, rows in enumerate(curves.get(name, {}).values()):
                for ax, (key, _) in zip(axes, keys, strict=True):
                    points = [(r["tokens_seen"], r[key]) for r in rows if r.get(key) is not None]
                    if points:
                        ax.plot(*zip(*points), color=_color(results, name), lw=1, alpha=0.8, marker="o", ms=2,
                                label=name if k == 0 else None)  # fmt: skip
        for ax, (_, title) in zip(axes, keys, strict=True):
            ax.set_xlabel("training tokens")
            ax.set_title(f"{title}, curve items", loc="left")
        axes[0].axhline(0, color="#999999", ls=":", lw=1)
        axes[0].legend(frameon=False, fontsize=8)
    return "<h3>Over training (the curve items, scored at every evaluation)</h3>" + to_svg(
        fig, "task-curves", "task scores over training"
    )


def _signal_table(results: dict, info: dict) -> str:
    """Which measures carry signal at this scale: monotonicity over training, the seeds' spread,
    each variant's gap over the baseline and its ratio to the spread."""
    signal = info.get("signal") or {}
    if not signal:
        return ""
    thresholds = info.get("thresholds", {})
    variants = sorted({v for entry in signal.values() for v in entry["variants"]}, key=results["variants"].index)
    rows = []
    for measure, entry in signal.items():
        ref = f"results.json#tasks.signal.{measure}"
        rows.append(
            [
                esc(measure),
                _num(f"{ref}.monotonicity", entry["monotonicity"], 2),
                _num(f"{ref}.spread", entry["spread"], 4),
                *(
                    f"{_num(f'{ref}.variants.{v}.gap', entry['variants'][v]['gap'], 4)} "
                    f"(SNR {_num(f'{ref}.variants.{v}.snr', entry['variants'][v]['snr'], 1)})"
                    if v in entry["variants"]
                    else "–"
                    for v in variants
                ),
                "signal" if entry["signal"] else "noise",
            ]
        )
    carried = [esc(m) for m, e in signal.items() if e["signal"]]
    return (
        "<h3>Which measures carry signal at this scale</h3><p class=note>After FineWeb's task selection: "
        "monotonicity is Spearman's rho between training step and score on the curve items (mean over every "
        f"variant's and seed's curve; positive is improving), at least {thresholds.get('monotonicity')}; the "
        "spread is the seeds' standard deviation of the final score on every item (mean over variants); a "
        f"variant's gap over the baseline (positive: better) over that spread is its SNR, at least "
        f"{thresholds.get('snr')} for some variant. Carrying signal: "
        + (", ".join(carried) if carried else "none")
        + ".</p>"
        + table(
            [
                "measure",
                "monotonicity",
                "seed spread",
                *[f"{v} − {results['baseline']} (SNR)" for v in variants],
                "verdict",
            ],
            rows,
            numeric=set(range(1, 3 + len(variants))),
        )
    )


def _one_answer(results: dict, info: dict, variants: list[str]) -> str:
    """A note naming the tasks where a variant's model gave one answer to most items (its
    accuracy is then the share of items that answer is right for, whatever the item says)."""
    flagged = []
    for task in info["tasks"]:
        shares = {
            v: results["metrics"].get(f"task/{task}/top_answer_share", {}).get(v, {}).get("mean") for v in variants
        }
        same = [v for v, share in shares.items() if share is not None and share >= ONE_ANSWER]
        if same:
            flagged.append(f"{esc(task)} ({', '.join(esc(v) for v in same)})")
    if not flagged:
        return ""
    return (
        f"<p class=note>One answer to at least {ONE_ANSWER:.0%} of the items (mean over seeds): "
        + "; ".join(flagged)
        + ". Such a model scores what always answering that choice scores: it ranks the answers by "
        "their own likelihood, not by the item.</p>"
    )


def _metric_table(results: dict, metrics: list[str], models: list[str], digits: int, label) -> str:
    rows = [[esc(model)] + [_value(results, metric, model, digits) for metric in metrics] for model in models]
    return table(["model", *[label(m) for m in metrics]], rows, numeric=set(range(1, len(metrics) + 1)))


def _made_in(comparison: dict) -> str:
    """The family a comparison was made in: a primary one is also shown in its measure's section."""
    return comparison.get("family_otherwise") or comparison["family"]


def verdict(comparison: dict) -> str:
    """A comparison's verdict in a table cell: no test, significant (better or worse), or none."""
    if comparison["p"] is None:
        return "no test (too few seeds)"
    if comparison["significant"]:
        return "significant: " + ("better" if comparison["better"] else "worse")
    return "no difference shown"


def _comparisons(results: dict, select) -> str:
    rows = []
    for i, c in enumerate(results["comparisons"]):
        if not select(c):
            continue
        ref = f"results.json#comparisons.{i}"
        flag = ' <span class="warn">(contradicts the expectation)</span>' if c["contradicts_expectation"] else ""
        flag += " <b>(primary: Holm over the primary family)</b>" if c.get("role") == "primary" else ""
        ci = c.get("ci95")
        boot = c.get("bootstrap")
        rows.append(
            [
                esc(c["metric"]),
                esc(c["a"]),
                esc(c["b"]),
                _num(f"{ref}.difference", c["difference"], 4),
                (
                    f"{_num(f'{ref}.ci95.0', ci[0], 4)} to {_num(f'{ref}.ci95.1', ci[1], 4)}"
                    if ci
                    else _num(f"{ref}.ci95", None)
                    + (" (the same on every seed: exact test)" if c.get("test") == "exact" else "")
                ),
                (
                    f"{_num(f'{ref}.bootstrap.ci95.0', boot['ci95'][0], 4)} to "
                    f"{_num(f'{ref}.bootstrap.ci95.1', boot['ci95'][1], 4)} "
                    f"(p {_num(f'{ref}.bootstrap.p', boot['p'], 3)}; "
                    f"{_num(f'{ref}.bootstrap.items', boot['items'])} items)"
                    if boot
                    else "–"
                ),
                _num(f"{ref}.p", c["p"], 4),
                _num(f"{ref}.p_holm", c["p_holm"], 4),
                esc(verdict(c)) + flag,
                esc(c["sentence"]),
            ]
        )
    return table(
        [
            "measure",
            "a",
            "b",
            "a − b",
            "95% CI (t over seeds)",
            "95% CI over seeds and test items (bootstrap, whole-document scores)",
            "p",
            "p (Holm, in its family)",
            "verdict",
            "what it supports",
        ],
        rows,
        numeric={3, 4, 5, 6, 7},
        cls="examples",
        widths=[10, 7, 7, 6, 9, 11, 5, 5, 9, 31],
    )


def render(results: dict) -> str:
    """The experiment's report page of ``results`` (results.json's content) as a string."""
    from report.build import CSS

    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width, initial-scale=1'>",
        f"<title>experiment report</title><style>{CSS}</style></head><body>",
        *_page_header(results),
        "</header><main>",
        *_primary_section(results),
        *_findings(results),
        "<section id=variants><h2>Variants</h2>",
        _curation_table(results),
        _kinds_table(results),
        _licences_table(results),
        "</section>",
        "<section id=sets><h2>Held-out sets and decontamination</h2>",
        _heldout_table(results),
        "<h3>Contamination check: training documents sharing a token window with held-out or task text</h3>",
        _contamination_table(results),
        "</section>",
        *_heldout_loss(results),
        "<section id=curves><h2>Training and held-out curves</h2>",
        _curves(results),
        "</section>",
        _efficiency(results),
        _memorization(results),
        _languages(results),
        _tasks(results),
        _transfer(results, _transfer_models(results)),
        *_all_comparisons(results),
        "</section></main></body></html>",
    ]
    return "\n".join(parts)


def _junk_metrics(results: dict) -> list[str]:
    """``heldout_bpb/<set>`` of every held-out set that is not clean, sets in name order."""
    heldout = results["heldout"]
    return [f"heldout_bpb/{s}" for s in sorted(heldout["sets"]) if s not in heldout["clean_sets"]]


def _transfer_models(results: dict) -> list[str]:
    """Random initialization, then the variants that have transfer results, in variant order."""
    transferred = {name for name, seeds in results.get("transfer", {}).items() if seeds}
    return ["random", *(v for v in results["variants"] if v in transferred)]


def _page_header(results: dict) -> list[str]:
    """The header's lines (its closing tag apart): the title, what was trained and measured, the
    wall time and the navigation."""
    variants = results["variants"]
    heldout = results["heldout"]
    sets = sorted(heldout["sets"])
    config = results["config"]
    timing = results.get("timing", {})
    budget = f'<span class="num" data-json="results.json#config.budget_tokens">{fmt(config["budget_tokens"])}</span>'
    return [
        "<header><h1>What curation buys: curated vs raw mixtures</h1>",
        f"<p>{len(variants)} variants of one raw pool, each trained on {budget} tokens with the same model "
        f"and schedule, over {len(results['seeds'])} seeds ({', '.join(map(str, results['seeds']))}); "
        f"baseline <b>{esc(results['baseline'])}</b>. Held-out loss is measured on {len(sets)} held-out sets "
        f"({fmt(heldout['documents'])} documents, raw: chosen before any curation, never rewritten by it) that "
        "every variant's pool was decontaminated against; the headline is the mean over the clean sets "
        f"({esc(', '.join(heldout['clean_sets']))}), the junk is reported on its own. Every variant uses one "
        "tokenizer, trained on the raw pool. Transfer is measured on a downstream task held out from every "
        "pool.</p>",
        f"<p>Wall time of the last invocation: {fmt(timing.get('total_s', 0) / 60, 1)} min (curation "
        f"{fmt(timing.get('curation_s', 0) / 60, 1)}, pretraining and transfer "
        f"{fmt(timing.get('training_and_transfer_s', 0) / 60, 1)}, {timing.get('parallel_runs', 1)} at a time); "
        "runs finished earlier are reused, not timed again. The runs themselves took "
        f"{fmt(timing.get('pretraining_runs_s', 0) / 60, 1)} min of pretraining and "
        f"{fmt(timing.get('transfer_runs_s', 0) / 60, 1)} min of transfer.</p>",
        "<nav>"
        + ("<a href='#primary'>primary comparison</a>" if results.get("primary") else "")
        + "<a href='#findings'>findings</a><a href='#variants'>variants</a><a href='#sets'>held-out sets</a>"
        "<a href='#heldout'>held-out loss</a>"
        "<a href='#curves'>curves</a>"
        + ("<a href='#efficiency'>data efficiency</a>" if results.get("data_efficiency") else "")
        + ("<a href='#memorization'>memorization</a>" if results.get("memorization") else "")
        + ("<a href='#languages'>languages</a>" if results.get("languages") else "")
        + ("<a href='#tasks'>tasks</a>" if results.get("tasks") else "")
        + "<a href='#transfer'>transfer</a><a href='#comparisons'>all comparisons</a></nav>",
    ]


def _primary_section(results: dict) -> list[str]:
    """The comparison the config named before the run, first on the page: what it is, its
    sentences, its table and any measure the runs did not yield; nothing when none was named."""
    primary = results.get("primary")
    if not primary:
        return []
    measures = ", ".join(primary["metrics"])
    sentences = "".join(f"<li>{esc(c['sentence'])}</li>" for c in primary["comparisons"])
    missing = primary.get("not_measured") or []
    return [
        "<section id=primary><h2>Primary comparison (pre-registered)</h2><p class=note>Named "
        f"{esc(primary['named'])}: <b>{esc(primary['variant'])}</b> against <b>{esc(primary['against'])}</b> on "
        f"{esc(measures)}. Holm's correction covers these "
        f'<span class="num" data-json="results.json#families.primary">{results["families"]["primary"]}</span> '
        "comparisons alone; every other comparison on this page is secondary, corrected within its own "
        "family.</p>",
        f"<ul>{sentences}</ul>",
        _comparisons(results, lambda c: c["family"] == "primary"),
        f"<p class=warn>Not measured by these runs: {esc(', '.join(missing))}.</p>" if missing else "",
        "</section>",
    ]


def _findings(results: dict) -> list[str]:
    """The findings section: how comparisons are tested, the headline sentences and those against
    the expectation; secondary ones when the config named a primary comparison."""
    junk = _junk_metrics(results)
    primary = bool(results.get("primary"))
    headline = [
        c for c in results["comparisons"] if c["metric"] in ("heldout_bpb", *junk) and c.get("role") != "primary"
    ]
    contradicted = [c for c in results["comparisons"] if c["contradicts_expectation"]]
    findings = "".join(f"<li>{esc(c['sentence'])}</li>" for c in headline)
    flagged = "".join(f"<li>{esc(c['sentence'])}</li>" for c in contradicted) or "<li>none</li>"
    return [
        f"<section id=findings><h2>{'Secondary findings' if primary else 'Findings'}</h2>"
        "<p class=note>Runs of one seed share their initialization and batch "
        "order, so two variants are compared seed by seed: Student's t on the per-seed differences (n − 1 degrees "
        "of freedom), with a 95% confidence interval; a difference is significant when its p-value, Holm-adjusted "
        "over the comparisons of its family (one question: "
        + ", ".join(
            f"{esc(name)} {results['families'][name]}" for name in FAMILIES if name in results.get("families", {})
        )
        + f") is below {results.get('alpha', 0.05)}, so noise calls a difference anywhere in a family at most 5% "
        "of the time.</p>",
        f"<ul>{findings}</ul><h3>Results against the expectation</h3><ul>{flagged}</ul></section>",
    ]


def _heldout_loss(results: dict) -> list[str]:
    """The held-out loss section: the headline, each set (clean, then junk) and each group, per
    variant."""
    variants = results["variants"]
    clean = [f"heldout_bpb/{s}" for s in results["heldout"]["clean_sets"]]
    held_metrics = [m for m in ["heldout_bpb", *clean, *_junk_metrics(results)] if m in results["metrics"]]
    group_metrics = sorted(m for m in results["metrics"] if m.startswith("heldout_bpb/") and m.count("/") == 2)
    return [
        "<section id=heldout><h2>Held-out loss (bits per byte; lower is better)</h2>",
        _metric_table(
            results,
            held_metrics,
            variants,
            4,
            lambda m: "clean sets (mean)" if m == "heldout_bpb" else m.split("/", 1)[1],
        ),
        _bars(
            results,
            held_metrics,
            variants,
            "bits per byte on the held-out sets (± seed std)",
            "bits per byte",
            "heldout",
            zoom=True,
        ),
        "<h3>Per group</h3>",
        _metric_table(results, group_metrics, variants, 4, lambda m: m.split("/", 1)[1]),
        "</section>",
    ]


def _all_comparisons(results: dict) -> list[str]:
    """The section of every comparison (its closing tag apart): held-out loss against the baseline,
    leave-one-out (when any), pretrained against random, transfer against the baseline and against
    the bag of words (when any), fine-tuning against probing."""
    return [
        "<section id=comparisons><h2>All comparisons</h2>",
        "<h3>Held-out loss against the baseline</h3>",
        _comparisons(results, lambda c: c["metric"].startswith("heldout_bpb") and c["family"] != "leave-one-out"),
        *(
            [
                "<h3>Leave-one-out: each variant against the pipeline it leaves a step out of</h3>",
                _comparisons(results, lambda c: c["family"] == "leave-one-out"),
            ]
            if any(c.get("family") == "leave-one-out" for c in results["comparisons"])
            else []
        ),
        "<h3>Pretrained against random initialization</h3>",
        _comparisons(results, lambda c: c["b"] == "random"),
        *(
            part
            for family, heading in (
                ("transfer vs baseline", "Transfer: each variant against the baseline"),
                ("transfer vs bag of words", "Transfer: each probe against the bag of words on the same labels"),
            )
            if any(_made_in(c) == family for c in results["comparisons"])
            for part in (f"<h3>{heading}</h3>", _comparisons(results, lambda c, family=family: _made_in(c) == family))
        ),
        "<h3>Fine-tuning against probing</h3>",
        _comparisons(results, lambda c: c["metric"].startswith("finetune_vs_probe")),
    ]


def write_results_page(out_dir: str | Path, render_page) -> Path:
    """Write ``<out_dir>/report/index.html``, ``render_page`` of ``<out_dir>/results.json``; return
    its path."""
    out_dir = Path(out_dir)
    results = read_json(out_dir / "results.json")
    path = out_dir / "report" / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(render_page(results), encoding="utf-8")
    return path


def build_experiment_report(out_dir: str | Path) -> Path:
    """Write ``<out_dir>/report/index.html`` from ``<out_dir>/results.json``; return its path."""
    return write_results_page(out_dir, render)
