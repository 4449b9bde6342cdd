"""Names from the data in the terminal's tables and lines and in the report's charts: shown as
text, never read as rich markup, emoji codes, ANSI escapes or mathtext."""

from __future__ import annotations

import io
from collections import Counter

from rich.console import Console

from pipeline.formats.ledger import Ledger
from pipeline.formats.stats import StageStats
from report.console import (
    print_experiment,
    print_mixtures,
    print_rule_removals,
    print_sources,
    print_stage_warnings,
    say,
)
from report.plots import column_chart, grouped_bars
from tests.helpers import parse_html

GROUP = "[g]<b> [bold]x[/bold] :warning: \x1b[31mred\nnext"
SHOWN = "[g]<b> [bold]x[/bold] :warning: \\x1b[31mred\\nnext"


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=300, force_terminal=True, color_system=None), buffer


def _group(tokens: int) -> dict:
    return {"tokens_available": tokens, "tokens_taken": tokens, "epochs": 1.0, "effective_weight": 1.0,
            "validation_tokens": 0}  # fmt: skip


def test_tables_show_names_as_they_are():
    out, buffer = _console()
    stats = StageStats("mix", train_documents=1, validation_documents=0,
                       mixtures={"main": {"groups": {GROUP: _group(5)}, "tokens_taken": 5}})  # fmt: skip
    print_mixtures(out, stats)
    counts = Ledger("source", 1, 1, quarantined=Counter({"bad [json]\x1b[0m": 0}), files=1)
    print_sources(out, StageStats("source", 1, 1, sources={"s[x]": counts}))
    printed = buffer.getvalue()
    assert SHOWN in printed and "s[x]" in printed and "bad [json]\\x1b[0m 0" in printed
    assert "\x1b" not in printed and "⚠" not in printed


def test_a_line_is_printed_as_it_is():
    out, buffer = _console()
    say(out, f"run directory: /tmp/{GROUP}")
    assert buffer.getvalue() == "run directory: /tmp/[g]<b> [bold]x[/bold] :warning: \\x1b[31mred\nnext\n"


def test_chart_labels_are_drawn_as_text():
    labels = ["a$\\frac$b", "\x1b[31m<script>x</script>", "$x$"]
    for svg in (
        grouped_bars("g", "title", labels, {"n": [1, 2, 3]}, "documents"),
        column_chart("c", "title", labels, [1, 2, 3], "x", "y"),
    ):
        drawn = "".join(parse_html(svg).text)
        assert "a$\\frac$b" in drawn and "\\x1b[31m<script>x</script>" in drawn and "$x$" in drawn
        assert "\x1b" not in svg and "script" not in [tag for tag, _ in parse_html(svg).tags]


def test_the_experiment_table_prints_its_metrics_and_a_variant_named_with_markup():
    """The summary ``curate experiment`` prints at its end (it stopped there with a TypeError)."""
    out, buffer = _console()
    value = {"mean": 3.5, "std": 0.01}
    results = {
        "seeds": [0, 1],
        "timing": {"total_s": 120.0},
        "heldout": {"sets": {"news": {"clean": True}, "junk": {"clean": False}}},
        "task": {"sizes": {"probe": [10, 100]}},
        "metrics": {
            "heldout_bpb": {"raw": value, "[full]": value},
            "heldout_bpb/junk": {"raw": value, "[full]": value},
            "probe_accuracy@10": {"raw": value, "[full]": value},
            "probe_accuracy@100": {"raw": value, "[full]": None},
        },
        "transfer": {},
        "variants": ["raw", "[full]"],
        "comparisons": [
            {"metric": "heldout_bpb", "contradicts_expectation": True, "sentence": "[full] is lower than raw."}
        ],
    }
    print_experiment(out, results)
    printed = buffer.getvalue()
    assert "held-out bpb" in printed and "junk" in printed and "probe acc @100" in printed
    assert "[full]" in printed and "3.500 ± 0.010" in printed
    assert "[contradicts the expectation] [full] is lower than raw." in printed


def test_a_stages_warnings_are_warning_lines():
    # the filter stage's stored measurements measured again; the mix stage's are print_mixtures'
    out, buffer = _console()
    line = "filter: the stored measurements a.parquet have no checksum; measuring its documents again"
    stats = {"lang": StageStats("lang", 1), "filter": StageStats("filter", warnings=[line])}
    print_stage_warnings(out, {**stats, "mix": StageStats("mix", warnings=["x"])})
    assert buffer.getvalue().splitlines() == [f"warning: {line}"]


def test_a_rule_that_removed_one_document_says_document():
    out, buffer = _console()
    print_rule_removals(out, {"rule": "c4_quality.min_sentences", "stage": "filter", "count": 1, "documents": []})
    assert buffer.getvalue().splitlines()[0] == "c4_quality.min_sentences (filter stage): 1 document removed"
