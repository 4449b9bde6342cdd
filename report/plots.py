"""The report's charts: matplotlib figures (Agg canvas, no pyplot and no global state) rendered as
inline SVG, with text kept as text, so the page needs no file and no network to show them.
The same data give the same SVG bytes."""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

from pipeline.formats.escape import visible

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLORS = {
    "kept": "#3b6ea8",
    "removed": "#d98b3a",
    "quarantined": "#b8463f",
    "before": "#9bb3cf",
    "after": "#3b6ea8",
    "bar": "#3b6ea8",
}
STYLE = {
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
}


def _matplotlib():
    import matplotlib  # on the first chart: a run that rebuilds no report never pays its import

    return matplotlib


def chart_text(text) -> str:
    """A label from the data (a group's or a language's name) as a chart shows it: control
    characters as escapes (``\\x1b``), each ``$`` escaped so that matplotlib draws it rather than
    reading mathtext (a name with ``$\\frac$`` in it would stop the chart)."""
    return visible(text).replace("$", "\\$")


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_svg(fig: Figure, name: str, title: str) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), its ids salted by ``name`` so several
    charts can share a page, with ``title`` for screen readers."""
    buffer = io.StringIO()
    with _matplotlib().rc_context({**STYLE, "svg.hashsalt": name}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    svg = _namespaced(svg[svg.index("<svg") :], name)
    return f'<figure class="chart" id="chart-{name}" role="img" aria-label="{_attr(title)}">{svg}</figure>'


def _namespaced(svg: str, name: str) -> str:
    """The SVG with every id (matplotlib numbers them per figure: ``patch_1``) prefixed by ``name``,
    and the references to them, so that ids stay unique on a page of several charts."""
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{name}-{m.group(1)})", svg)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{name}-{m.group(1)}"', svg)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _byte_unit(values: list[int | None]) -> tuple[float, str]:
    """A unit that suits the largest value: bytes, KB, MB or GB."""
    largest = max([v or 0 for v in values], default=0)
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if largest >= scale:
            return scale, unit
    return 1.0, "bytes"


def funnel_chart(
    stages: list[str], docs_out: list[int], lost: list[int], quarantined: list[int], text_bytes: list[int | None]
) -> str:
    """Documents through the stages (kept, removed, quarantined), and text megabytes kept."""
    with _matplotlib().rc_context(STYLE):
        fig = _figure(9.0, 0.45 * len(stages) + 1.2)
        left, right = fig.subplots(1, 2, width_ratios=[3, 2])
        y = list(range(len(stages)))[::-1]
        left.barh(y, docs_out, color=COLORS["kept"], label="passed on")
        left.barh(y, lost, left=docs_out, color=COLORS["removed"], label="removed")
        starts = [a + b for a, b in zip(docs_out, lost)]
        left.barh(y, quarantined, left=starts, color=COLORS["quarantined"], label="quarantined")
        stages = [chart_text(stage) for stage in stages]
        left.set_yticks(y, stages)
        left.set_xlabel("documents")
        left.set_title("documents per stage", loc="left")
        left.legend(loc="lower right", frameon=False, fontsize=8)
        scale, unit = _byte_unit(text_bytes)
        right.barh(y, [(b or 0) / scale for b in text_bytes], color=COLORS["kept"])
        right.set_yticks(y, stages)
        right.set_xlabel(f"{unit} of text passed on")
        right.set_title("text bytes", loc="left")
        for axis in (left, right):
            axis.xaxis.grid(True, color="#e5e5e5")
            axis.set_axisbelow(True)
        return to_svg(fig, "funnel", "documents and text bytes through the stages")


def grouped_bars(
    name: str, title: str, labels: list[str], series: dict[str, list[float]], xlabel: str, log: bool = False
) -> str:
    """Horizontal bars, one group per label and one bar per series."""
    with _matplotlib().rc_context(STYLE):
        fig = _figure(7.5, 0.13 * max(len(labels), 1) * max(len(series), 1) + 1.0)
        axis = fig.subplots()
        height = 0.8 / max(len(series), 1)
        palette = [COLORS["before"], COLORS["after"], COLORS["removed"]]
        base = list(range(len(labels)))[::-1]
        for k, (label, values) in enumerate(series.items()):
            ys = [b + (len(series) - 1 - k) * height - 0.4 + height / 2 for b in base]
            axis.barh(ys, values, height=height, color=palette[k % len(palette)], label=chart_text(label))
        axis.set_yticks(base, [chart_text(label) for label in labels])
        axis.set_xlabel(xlabel)
        if log:
            axis.set_xscale("symlog")
        axis.set_title(title, loc="left")
        if len(series) > 1:
            axis.legend(loc="lower right", frameon=False, fontsize=8)
        axis.xaxis.grid(True, color="#e5e5e5")
        axis.set_axisbelow(True)
        return to_svg(fig, name, title)


def column_chart(
    name: str, title: str, labels: list[str], values: list[int], xlabel: str, ylabel: str, log: bool = False
) -> str:
    """Vertical bars (a histogram over named bins)."""
    with _matplotlib().rc_context(STYLE):
        fig = _figure(7.5, 2.8)
        axis = fig.subplots()
        axis.bar(range(len(labels)), values, color=COLORS["bar"])
        axis.set_xticks(range(len(labels)), [chart_text(label) for label in labels])
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        if log and any(values):
            axis.set_yscale("log")
        axis.set_title(title, loc="left")
        axis.yaxis.grid(True, color="#e5e5e5")
        axis.set_axisbelow(True)
        for x, v in enumerate(values):
            if v:
                axis.annotate(
                    f"{v:,}", (x, v), ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points"
                )
        return to_svg(fig, name, title)
