"""The experiment's report: one static HTML page (``<out_dir>/report/index.html``) built from
``results.json`` alone: what each variant kept, held-out bits per byte with seed error bars,
training and held-out curves, transfer scores, and every comparison with the sentence it supports.

Every number shown from ``results.json`` carries ``data-json="results.json#<key>.<key>..."`` so a
reader (or a test) can check the page against the file.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

from pipeline.io.writer import atomic_path, read_json
from pipeline.report.html import esc, fmt, table
from pipeline.report.plots import STYLE, _figure, to_svg

PALETTE = ["#3b6ea8", "#d98b3a", "#4f9a5b", "#b8463f", "#7d5ba6", "#8c6d46", "#c25b9a", "#5f6b78"]


def _value(results: dict, metric: str, model: str, digits: int = 3) -> str:
    entry = results["metrics"].get(metric, {}).get(model)
    if not entry or entry["mean"] is None:
        return "–"
    ref = f"results.json#metrics.{metric}.{model}"
    return (f'<span class="num" data-json="{esc(ref)}.mean">{esc(fmt(entry["mean"], digits))}</span>'
            f' ± <span class="num" data-json="{esc(ref)}.std">{esc(fmt(entry["std"], digits))}</span>')


def _color(results: dict, model: str) -> str:
    """One color per model on every chart: random first, then the variants in config order."""
    return PALETTE[["random", *results["variants"]].index(model) % len(PALETTE)]


def _bars(results: dict, metrics: list[str], models: list[str], title: str, ylabel: str, name: str,
          zoom: bool = False) -> str:
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
            top = max(entry["mean"] + entry["std"] for metric in metrics for entry in
                      [results["metrics"].get(metric, {}).get(m) for m in models] if entry and entry["mean"] is not None)
            ax.set_ylim(min(lows) * 0.97, top * 1.01)
        ax.legend(frameon=False, fontsize=8, ncol=min(len(models), 4))
    return to_svg(fig, name, title)


def _curves(results: dict) -> str:
    """Training loss and held-out (reference) bits per byte against tokens, per variant: each seed
    a thin line."""
    curves = results.get("curves", {})
    if not curves:
        return ""
    with matplotlib.rc_context(STYLE):
        fig = _figure(9.0, 3.2)
        left, right = fig.subplots(1, 2)
        for i, name in enumerate(results["variants"]):
            color = _color(results, name)
            for k, rows in enumerate(curves.get(name, {}).values()):
                train = [(r["tokens_seen"], r["train_loss"]) for r in rows if r.get("train_loss") is not None]
                held = [(r["tokens_seen"], r["reference_bpb"]) for r in rows if r.get("reference_bpb") is not None]
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
        right.set_title("held-out: clean reference set", loc="left")
        right.legend(frameon=False, fontsize=8)
    return to_svg(fig, "curves", "training and held-out curves")


def _curation_table(results: dict) -> str:
    rows = []
    for name in results["variants"]:
        info = results["curation"][name]
        stages = info["stages"]
        epochs = ", ".join(f"{g} {v['epochs']:.2f}" for g, v in info["groups"].items())
        ref = f"results.json#curation.{name}"
        rows.append([esc(name), esc(" + ".join(stages) or "none"),
                     f'<span class="num" data-json="{esc(ref)}.documents_in">{fmt(info["documents_in"])}</span>',
                     f'<span class="num" data-json="{esc(ref)}.documents_curated">{fmt(info["documents_curated"])}</span>',
                     f'<span class="num" data-json="{esc(ref)}.tokens_available">{fmt(info["tokens_available"])}</span>',
                     f'<span class="num" data-json="{esc(ref)}.tokens_taken">{fmt(info["tokens_taken"])}</span>',
                     esc(epochs)])
    return table(["variant", "curation", "documents read", "documents kept", "training tokens available",
                  "tokens trained on", "epochs per group"], rows, numeric={2, 3, 4, 5})


def _metric_table(results: dict, metrics: list[str], models: list[str], digits: int, label) -> str:
    rows = [[esc(model)] + [_value(results, metric, model, digits) for metric in metrics] for model in models]
    return table(["model", *[label(m) for m in metrics]], rows, numeric=set(range(1, len(metrics) + 1)))


def _comparisons(results: dict, select) -> str:
    rows = []
    for i, c in enumerate(results["comparisons"]):
        if not select(c):
            continue
        ref = f"results.json#comparisons.{i}"
        verdict = ("beyond the seed spread" if c["exceeds_spread"] else "within the seed spread")
        flag = ' <span class="warn">(contradicts the expectation)</span>' if c["contradicts_expectation"] else ""
        rows.append([esc(c["metric"]), esc(c["a"]), esc(c["b"]),
                     f'<span class="num" data-json="{esc(ref)}.difference">{esc(fmt(c["difference"], 4))}</span>',
                     f'<span class="num" data-json="{esc(ref)}.stderr">{esc(fmt(c["stderr"], 4))}</span>',
                     esc(verdict) + flag, esc(c["sentence"])])
    return table(["measure", "a", "b", "a − b", "std. error", "verdict", "what it supports"], rows,
                 numeric={3, 4}, cls="examples", widths=[12, 9, 9, 7, 7, 14, 42])


def render(results: dict) -> str:
    from pipeline.report.build import CSS

    variants = results["variants"]
    baseline = results["baseline"]
    groups = sorted(m.split("/", 1)[1] for m in results["metrics"] if m.startswith("reference_bpb/"))
    held_metrics = ["reference_bpb", *[f"reference_bpb/{g}" for g in groups]]
    accuracy = [m for m in results["metrics"] if m.startswith(("probe_accuracy@", "finetune_accuracy@"))]
    losses = [m for m in results["metrics"] if m.startswith(("probe_loss@", "finetune_loss@"))]
    models = ["random", *variants]
    config = results["config"]
    timing = results.get("timing", {})
    headline = [c for c in results["comparisons"] if c["metric"] == "reference_bpb"]
    contradicted = [c for c in results["comparisons"] if c["contradicts_expectation"]]
    findings = "".join(f"<li>{esc(c['sentence'])}</li>" for c in headline)
    flagged = "".join(f"<li>{esc(c['sentence'])}</li>" for c in contradicted) or "<li>none</li>"
    budget = f'<span class="num" data-json="results.json#config.budget_tokens">{fmt(config["budget_tokens"])}</span>'
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width, initial-scale=1'>",
        f"<title>experiment report</title><style>{CSS}</style></head><body>",
        "<header><h1>What curation buys: curated vs raw mixtures</h1>",
        f"<p>{len(variants)} variants of one raw pool, each trained on {budget} tokens with the same model "
        f"and schedule, over {len(results['seeds'])} seeds ({', '.join(map(str, results['seeds']))}); "
        f"baseline <b>{esc(baseline)}</b>. Held-out loss is measured on one clean reference set "
        f"({fmt(results['reference']['documents'])} documents) that every variant's pool was decontaminated "
        "against; transfer on a downstream task held out from every pool.</p>",
        f"<p>Wall time of the last invocation: {fmt(timing.get('total_s', 0) / 60, 1)} min (curation "
        f"{fmt(timing.get('curation_s', 0) / 60, 1)}, pretraining {fmt(timing.get('training_s', 0) / 60, 1)}, transfer "
        f"{fmt(timing.get('transfer_s', 0) / 60, 1)}); runs finished earlier are reused, not timed again. The "
        f"runs themselves took {fmt(timing.get('pretraining_runs_s', 0) / 60, 1)} min of pretraining and "
        f"{fmt(timing.get('transfer_runs_s', 0) / 60, 1)} min of transfer.</p>",
        "<nav><a href='#findings'>findings</a><a href='#variants'>variants</a><a href='#heldout'>held-out loss</a>"
        "<a href='#curves'>curves</a><a href='#transfer'>transfer</a><a href='#comparisons'>all comparisons</a></nav>",
        "</header><main>",
        "<section id=findings><h2>Findings</h2><p class=note>Runs of one seed share their initialization and batch "
        "order, so two variants are compared seed by seed: a difference counts as beyond the seed spread when "
        "every seed shows it with the same sign and its mean exceeds twice its standard error.</p>",
        f"<ul>{findings}</ul><h3>Results against the expectation</h3><ul>{flagged}</ul></section>",
        "<section id=variants><h2>Variants</h2>", _curation_table(results), "</section>",
        "<section id=heldout><h2>Held-out loss (bits per byte on the reference set; lower is better)</h2>",
        _metric_table(results, held_metrics, variants, 4, lambda m: "all groups" if m == "reference_bpb" else m.split("/", 1)[1]),
        _bars(results, held_metrics, variants, "bits per byte on the clean reference set (± seed std)",
              "bits per byte", "heldout", zoom=True),
        "</section>",
        "<section id=curves><h2>Training and held-out curves</h2>", _curves(results), "</section>",
        "<section id=transfer><h2>Transfer to the downstream task</h2>"
        "<p class=note>Linear probe on the frozen backbone and full fine-tuning, at each number of labelled "
        "examples; test accuracy (and cross-entropy below). 'random' is the same architecture, not pretrained.</p>",
        _metric_table(results, accuracy, models, 3, lambda m: m.replace("_accuracy@", " accuracy @ ")),
        _bars(results, accuracy, models, "test accuracy (± seed std)", "accuracy", "transfer") if accuracy else "",
        _metric_table(results, losses, models, 3, lambda m: m.replace("_loss@", " loss @ ")),
        "</section>",
        "<section id=comparisons><h2>All comparisons</h2>",
        "<h3>Held-out loss against the baseline</h3>",
        _comparisons(results, lambda c: c["metric"].startswith("reference_bpb")),
        "<h3>Pretrained against random initialization</h3>",
        _comparisons(results, lambda c: c["b"] == "random"),
        "<h3>Fine-tuning against probing</h3>",
        _comparisons(results, lambda c: c["metric"].startswith("finetune_vs_probe")),
        "</section></main></body></html>",
    ]
    return "\n".join(parts)


def build_experiment_report(out_dir: str | Path) -> Path:
    """Write ``<out_dir>/report/index.html`` from ``<out_dir>/results.json``; return its path."""
    out_dir = Path(out_dir)
    results = read_json(out_dir / "results.json")
    path = out_dir / "report" / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(render(results), encoding="utf-8")
    return path
