"""The run report's charts set their own margins (no layout engine): every label is inside the
figure, with no more white around the drawing than constrained layout would leave, and the
funnel's two charts do not overlap."""

from __future__ import annotations

import io

import matplotlib
import pytest
from matplotlib.backends.backend_svg import RendererSVG

from report import plots
from tests.helpers import parse_html

STAGES = ["source", "lang", "a-much-longer-stage-name", "dedup", "tokenize"]
LANGUAGES = ["en", "zh", "Lingua Latina (classical)", "other"]
SIDE_PT = 4.0  # white allowed on each side, in points: the 3 pt pad, and a point of rounding


def _svg_renderer(fig) -> RendererSVG:
    """A renderer that measures text as the SVG the report embeds does (72 dpi, no hinting)."""
    fig.set_dpi(72)
    width, height = fig.get_size_inches()
    return RendererSVG(width * 72, height * 72, io.StringIO())


def _sides(fig) -> dict[str, float]:
    """The white between the drawing and each edge of the figure, in points (negative: cut off)."""
    box = fig.get_tightbbox(_svg_renderer(fig))
    width, height = fig.get_size_inches()
    return {
        "left": box.x0 * 72,
        "bottom": box.y0 * 72,
        "right": (width - box.x1) * 72,
        "top": (height - box.y1) * 72,
    }


def _charts():
    yield "funnel", plots._funnel_figure(
        STAGES, [1_234_567, 987_654, 500_000, 499_000, 499_000], [0, 246_913, 487_654, 1_000, 0], [12, 0, 0, 0, 0],
        [9_876_543_210, 8e9, 4e9, 3.9e9, None],
    )  # fmt: skip
    series = {"entering lang": [48_300, 7_600, 12, 3_900], "curated (after lines)": [22_600, 6_600, 0, 1_900]}
    yield "languages", plots._grouped_bars_figure("documents per language", LANGUAGES, series, "documents", False)
    yield "symlog", plots._grouped_bars_figure("documents per language", LANGUAGES, series, "documents", True)
    weights = {"main": [0.31, 0.65, 0.02], "tempered": [0.36, 0.45, 0.08]}
    yield (
        "weights",
        plots._grouped_bars_figure("effective weight", ["dialogues", "news", "notes"], weights, "share", False),
    )
    sizes = ["2", "3-4", "5-8", "9-16", "17-32"]
    yield "log", plots._column_figure("clusters by size", sizes, [29_000, 5, 1, 0, 1], "documents", "clusters", True)
    yield (
        "linear",
        plots._column_figure("clusters by size", sizes, [29_000, 5, 1, 0, 1], "documents", "clusters", False),
    )


@pytest.mark.parametrize("index", range(6))
def test_each_chart_fits_its_labels_with_a_small_even_margin(index):
    with matplotlib.rc_context(plots.STYLE):
        name, fig = list(_charts())[index]
        sides = _sides(fig)
    for side, white in sides.items():
        assert 0.0 <= white <= SIDE_PT, (name, side, sides)


def test_the_funnels_right_chart_starts_after_the_left_one_ends():
    with matplotlib.rc_context(plots.STYLE):
        _, fig = next(_charts())
        renderer = _svg_renderer(fig)
        left_axis, right_axis = fig.axes
        left_end = left_axis.get_tightbbox(renderer).x1  # its last x tick label, "1e6" included
        right_start = right_axis.get_tightbbox(renderer).x0  # the stage names
    assert 0 < (right_start - left_end) * 72 / fig.dpi <= 2 * SIDE_PT


@pytest.mark.parametrize(
    ("values", "labels"),
    [([29_000, 5, 1], ["10⁰", "10¹", "10²", "10³", "10⁴"]), ([300, 500, 700], ["3×10²", "4×10²", "6×10²"])],
)
def test_a_log_axis_writes_its_powers_as_text(values, labels):
    """matplotlib's own log labels (decades, and within a decade its minor ticks), written in
    text rather than mathtext, whose parser costs a tenth of a second in each process."""
    svg = plots.column_chart("c", "clusters by size", ["2", "3-4", "5-8"], values, "documents", "clusters", log=True)
    drawn = [text for text in parse_html(svg).text if text.strip()]
    assert drawn[drawn.index("documents") + 1 : drawn.index("clusters")] == labels
    assert "mathdefault" not in svg


def test_a_symlog_axis_writes_its_powers_and_signs_as_text():
    svg = plots.grouped_bars("g", "change", ["a", "b"], {"n": [-30, 2_000]}, "documents", log=True)
    drawn = [text for text in parse_html(svg).text if text.strip()]
    assert drawn[drawn.index("−10¹") : drawn.index("documents")] == ["−10¹", "−10⁰", "0", "10⁰", "10¹", "10²", "10³"]
    assert "mathdefault" not in svg
