"""The report's charts: matplotlib figures (Agg canvas, no pyplot and no global state) rendered as
inline SVG, with text kept as text, so the page needs no file and no network to show them.
The same data give the same SVG bytes. The run report's charts set their margins from the labels
they draw (as constrained layout would, at a fraction of its cost: `curate run` builds the report
every time); the other reports' figures use constrained layout (:func:`_figure`)."""

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
PAD = 3 / 72  # inches of white around a chart, as constrained layout leaves
# y given, matplotlib does not measure each axis at every draw to lift the title over top tick labels
TITLE = {"loc": "left", "y": 1.0}
MIN_PLOT = 0.3  # the least share of a chart's width its axes keep, however long the names beside them


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


def _fixed_figure(width: float, height: float) -> Figure:
    """A figure with no layout engine: its chart sets the margins (:func:`_place`, :func:`_settle`)
    from the labels it draws, so saving draws it once, not twice plus constrained layout's passes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _text_size(text: str, points: float) -> tuple[float, float, float]:
    """Width, height and descent in inches of one line of ``text`` at ``points``, measured as the
    SVG renderer measures it (called inside ``rc_context(STYLE)``, for the same font)."""
    from matplotlib.cbook import is_math_text
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    math = is_math_text(text)
    shown = text if math else text.replace("\\$", "$")
    width, height, descent = text_to_path.get_text_width_height_descent(shown, FontProperties(size=points), math)
    return width / 72, height / 72, descent / 72


def _widest(labels: list[str], points: float) -> float:
    return max((_text_size(label, points)[0] for label in labels), default=0.0)


def _font(key: str) -> float:
    """The size in points of the rcParams font ``key`` (``"large"`` and the like resolved)."""
    from matplotlib.font_manager import font_scalings

    value = _matplotlib().rcParams[key]
    return font_scalings[value] * STYLE["font.size"] if isinstance(value, str) else float(value)


def _margins(yticks: float, ylabel: bool = False) -> tuple[float, float, float]:
    """The left, bottom and top margins in inches of a chart with y tick labels ``yticks`` inches
    wide (and a y label), one line of x tick labels and an x label below, a title above."""
    rc = _matplotlib().rcParams
    tick = (rc["ytick.major.size"] + rc["ytick.major.pad"]) / 72
    label = _text_size("lp", _font("axes.labelsize"))[1] + rc["axes.labelpad"] / 72
    left = PAD + (label if ylabel else 0.0) + yticks + tick
    bottom = PAD + label + _text_size("lp", _font("xtick.labelsize"))[1] + tick
    _, height, descent = _text_size("lp", _font("axes.titlesize"))
    top = PAD + height - descent + rc["axes.titlepad"] / 72  # the title stands on its baseline
    return left, bottom, top


def _place(fig: Figure, left: float, bottom: float, top: float, gap: float = 0.0, width_ratios=(1,)) -> list:
    """A row of axes with these margins in inches and ``gap`` inches between them."""
    width, height = fig.get_size_inches()
    grid = fig.add_gridspec(1, len(width_ratios), width_ratios=list(width_ratios))
    grid.update(bottom=bottom / height, top=1 - top / height)
    _columns(fig, grid, left, PAD, gap)
    return [fig.add_subplot(grid[0, k]) for k in range(len(width_ratios))]


def _columns(fig: Figure, grid, left: float, right: float, gap: float) -> None:
    """``grid``'s left and right margins and the gap between its columns, in inches, applied to
    the axes already on it."""
    width = fig.get_figwidth()
    columns = grid.ncols
    margins = left + right + gap * (columns - 1)
    if margins > (1 - MIN_PLOT) * width:  # names too long to fit: the bars keep their share, names clip
        shrink = (1 - MIN_PLOT) * width / margins
        left, right, gap = left * shrink, right * shrink, gap * shrink
    spacing = {"wspace": gap * columns / (width - left - right - gap * (columns - 1))} if columns > 1 else {}
    grid.update(left=left / width, right=1 - right / width, **spacing)
    for axis in fig.axes:
        axis.set_position(axis.get_subplotspec().get_position(fig))


def _settle(axes: list, left: float, gap: float = 0.0) -> None:
    """Once the axes hold their data: the left margin ``left``, and room on the right of each axis
    for the x tick labels that reach past its end (as constrained layout would leave)."""
    reach = [_overhang(axis) for axis in axes]
    fig = axes[0].get_figure()
    _columns(fig, axes[0].get_subplotspec().get_gridspec(), left, PAD + reach[-1], gap + sum(reach[:-1]))


def _overhang(axis) -> float:
    """How far in inches the x tick labels of ``axis`` reach past its right end."""
    end, dpi, size = axis.bbox.x1, axis.get_figure().dpi, _font("xtick.labelsize")
    reach = 0.0
    for loc, text in _tick_labels(axis.xaxis):
        centre = axis.transData.transform((loc, 0))[0]
        reach = max(reach, (centre - end) / dpi + _text_size(text, size)[0] / 2)
    return reach


def _tick_labels(axis) -> list[tuple[float, str]]:
    """The ticks with labels that ``axis`` will draw: its major and minor ones within its view."""
    low, high = sorted(axis.get_view_interval())
    slack = (high - low) * 1e-9
    drawn = []
    for locs, formatter in (
        (axis.get_majorticklocs(), axis.get_major_formatter()),
        (axis.get_minorticklocs(), axis.get_minor_formatter()),
    ):
        texts = formatter.format_ticks(list(locs))
        drawn += [(loc, text) for loc, text in zip(locs, texts) if low - slack <= loc <= high + slack and text]
    return drawn


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
        fig = _funnel_figure(stages, docs_out, lost, quarantined, text_bytes)
        return to_svg(fig, "funnel", "documents and text bytes through the stages")


def _funnel_figure(
    stages: list[str], docs_out: list[int], lost: list[int], quarantined: list[int], text_bytes: list[int | None]
) -> Figure:
    stages = [chart_text(stage) for stage in stages]
    fig = _fixed_figure(9.0, 0.45 * len(stages) + 1.2)
    left, bottom, top = _margins(_widest(stages, _font("ytick.labelsize")))
    gap = left + PAD  # the right chart's stage names, beside the left chart's own margin
    left_axis, right_axis = _place(fig, left, bottom, top, gap=gap, width_ratios=(3, 2))
    y = list(range(len(stages)))[::-1]
    left_axis.barh(y, docs_out, color=COLORS["kept"], label="passed on")
    left_axis.barh(y, lost, left=docs_out, color=COLORS["removed"], label="removed")
    starts = [a + b for a, b in zip(docs_out, lost)]
    left_axis.barh(y, quarantined, left=starts, color=COLORS["quarantined"], label="quarantined")
    left_axis.set_yticks(y, stages)
    left_axis.set_xlabel("documents")
    left_axis.set_title("documents per stage", **TITLE)
    left_axis.legend(loc="lower right", frameon=False, fontsize=8)
    scale, unit = _byte_unit(text_bytes)
    right_axis.barh(y, [(b or 0) / scale for b in text_bytes], color=COLORS["kept"])
    right_axis.set_yticks(y, stages)
    right_axis.set_xlabel(f"{unit} of text passed on")
    right_axis.set_title("text bytes", **TITLE)
    for axis in (left_axis, right_axis):
        axis.xaxis.grid(True, color="#e5e5e5")
        axis.set_axisbelow(True)
    _settle([left_axis, right_axis], left, gap)
    return fig


def grouped_bars(
    name: str, title: str, labels: list[str], series: dict[str, list[float]], xlabel: str, log: bool = False
) -> str:
    """Horizontal bars, one group per label and one bar per series."""
    with _matplotlib().rc_context(STYLE):
        return to_svg(_grouped_bars_figure(title, labels, series, xlabel, log), name, title)


def _grouped_bars_figure(
    title: str, labels: list[str], series: dict[str, list[float]], xlabel: str, log: bool
) -> Figure:
    labels = [chart_text(label) for label in labels]
    fig = _fixed_figure(7.5, 0.13 * max(len(labels), 1) * max(len(series), 1) + 1.0)
    left, bottom, top = _margins(_widest(labels, _font("ytick.labelsize")))
    [axis] = _place(fig, left, bottom, top)
    height = 0.8 / max(len(series), 1)
    palette = [COLORS["before"], COLORS["after"], COLORS["removed"]]
    base = list(range(len(labels)))[::-1]
    for k, (label, values) in enumerate(series.items()):
        ys = [b + (len(series) - 1 - k) * height - 0.4 + height / 2 for b in base]
        axis.barh(ys, values, height=height, color=palette[k % len(palette)], label=chart_text(label))
    axis.set_yticks(base, labels)
    axis.set_xlabel(xlabel)
    if log:
        axis.set_xscale("symlog")
        axis.xaxis.set_major_formatter(_powers_formatter())
    axis.set_title(title, **TITLE)
    if len(series) > 1:
        axis.legend(loc="lower right", frameon=False, fontsize=8)
    axis.xaxis.grid(True, color="#e5e5e5")
    axis.set_axisbelow(True)
    _settle([axis], left)
    return fig


def column_chart(
    name: str, title: str, labels: list[str], values: list[int], xlabel: str, ylabel: str, log: bool = False
) -> str:
    """Vertical bars (a histogram over named bins)."""
    with _matplotlib().rc_context(STYLE):
        return to_svg(_column_figure(title, labels, values, xlabel, ylabel, log), name, title)


def _column_figure(title: str, labels: list[str], values: list[int], xlabel: str, ylabel: str, log: bool) -> Figure:
    labels = [chart_text(label) for label in labels]
    fig = _fixed_figure(7.5, 2.8)
    left, bottom, top = _margins(0.0, ylabel=True)
    [axis] = _place(fig, left, bottom, top)
    axis.bar(range(len(labels)), values, color=COLORS["bar"])
    axis.set_xticks(range(len(labels)), labels)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    if log and any(values):
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(_powers_formatter())
        axis.yaxis.set_minor_formatter(_powers_formatter())
    axis.set_title(title, **TITLE)
    axis.yaxis.grid(True, color="#e5e5e5")
    axis.set_axisbelow(True)
    for x, v in enumerate(values):
        if v:
            axis.annotate(
                f"{v:,}", (x, v), ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points"
            )
    # the y tick labels depend on the axis's height, now fixed: room for the widest of them
    _settle([axis], left + _widest([text for _, text in _tick_labels(axis.yaxis)], _font("ytick.labelsize")))
    return fig


SUPERSCRIPT = str.maketrans("0123456789\u2212", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _powers_formatter():
    """matplotlib's (sym)log-axis formatter with its labels written in text (``10²``, ``2×10⁰``) rather
    than mathtext: the same labels, without the mathtext parser, which costs about 0.1 s to build
    in each process that draws its first log axis and more per label."""
    from matplotlib.ticker import LogFormatterSciNotation

    class PowersFormatter(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return _plain_powers(super().__call__(x, pos))

    return PowersFormatter()


def _plain_powers(label: str) -> str:
    """``$\\mathdefault{2\\times10^{1}}$`` as ``2×10¹``; any other label as it is."""
    match = re.fullmatch(r"\$\\mathdefault\{(.*)\}\$", label)
    if not match:
        return label
    text = match.group(1).replace("\\times", "×").replace("-", "\u2212")  # mathtext draws a minus sign
    text = re.sub(r"\^\{(\u2212?\d+)\}", lambda power: power.group(1).translate(SUPERSCRIPT), text)
    return label if re.search(r"[\\{}^$]", text) else text
