"""The filter engine: first rule wins, every rule is counted, rewrites flow to later filters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest

from pipeline.filters.engine import EMPTY_AFTER_REWRITE, apply_filters
from pipeline.filters.pii import PIIScrubber
from pipeline.formats.step import FilterOutput, Rule


@dataclass
class WordCount:
    name: str = "words"
    minimum: int = 3

    def rules(self):
        return [Rule("words.min", "word_count", "<", self.minimum)]

    def apply(self, docs):
        return FilterOutput(pl.DataFrame({"word_count": docs["text"].str.split(" ").list.len().cast(pl.Float64)}))


@dataclass
class DropLinesWithX:
    name: str = "drop_x"

    def rules(self):
        return [Rule("drop_x.too_many_x", "x_lines", ">", 1)]

    def apply(self, docs):
        lines = docs["text"].str.split("\n")
        kept = lines.list.eval(pl.element().filter(~pl.element().str.starts_with("x"))).list.join("\n")
        removed = lines.list.len() - lines.list.eval(pl.element().filter(~pl.element().str.starts_with("x"))).list.len()
        return FilterOutput(pl.DataFrame({"x_lines": removed.cast(pl.Float64)}), text=kept)


def docs(*texts):
    return pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(len(texts))],
            "text": list(texts),
            "source": ["s"] * len(texts),
            "lang": ["en"] * len(texts),
        }
    )


def test_first_rule_is_recorded_and_all_fired_rules_are_counted():
    batch = docs("one two three four", "x\nx\nx", "a b", "fine text here\nx line")
    result = apply_filters(batch, [DropLinesWithX(), WordCount()])
    assert result.kept["id"].to_list() == ["d0", "d3"]
    assert result.kept["text"].to_list() == ["one two three four", "fine text here"]
    removed = result.removed.sort("id")
    assert removed.select("id", "rule", "value", "threshold", "stage").rows() == [
        ("d1", "drop_x.too_many_x", 3.0, 1.0, "filter"),
        ("d2", "words.min", 2.0, 3.0, "filter"),
    ]
    # d1's text is blank after the rewrite, so words.min fires on it too: counted, not recorded.
    assert result.counts["fired|drop_x.too_many_x"] == 1
    assert result.counts["fired|words.min"] == 2


def test_a_document_left_blank_by_a_rewrite_is_removed():
    result = apply_filters(docs("x", "keep me"), [DropLinesWithX()])
    assert result.removed["rule"].to_list() == [EMPTY_AFTER_REWRITE]
    assert result.kept["text"].to_list() == ["keep me"]


def test_a_rewrite_that_leaves_only_control_or_format_characters_leaves_the_document_blank():
    # (the source stage's definition of an empty text: pipeline.formats.documents.blank_text)
    result = apply_filters(docs("x\n\x0b", "x\n\u200b\x1f", "x\n\x85 ", "x\nkept\x1f"), [DropLinesWithX()])
    assert result.removed["rule"].to_list() == [EMPTY_AFTER_REWRITE] * 3
    assert result.kept["text"].to_list() == ["kept\x1f"]


def test_pii_counts_go_to_stats_in_total_and_per_source():
    batch = pl.DataFrame(
        {
            "id": ["a", "b"],
            "text": ["mail me: a@b.org", "ip 81.2.69.142 and c@d.com"],
            "source": ["web", "news"],
            "lang": ["en", "en"],
        }
    )
    result = apply_filters(batch, [PIIScrubber()])
    assert result.kept["text"].to_list() == ["mail me: <EMAIL>", "ip <IP_ADDRESS> and <EMAIL>"]
    assert result.counts["pii.email"] == 2 and result.counts["pii.email|web"] == 1
    assert result.counts["pii.ip_address|news"] == 1 and result.removed.height == 0


def test_filters_apply_only_to_the_configured_sources(tmp_path):
    from pipeline.stages.steps import filter_step
    from tests.helpers import source_config, write_jsonl

    path = write_jsonl(tmp_path / "in.jsonl", [{"text": "x"}])
    config = source_config(
        tmp_path,
        [
            {"name": "web", "reader": "jsonl", "paths": [str(path)]},
            {"name": "chat", "reader": "jsonl", "paths": [str(path)]},
        ],
        filter={"filters": ["gopher_quality", "pii"], "sources": ["web"]},
    )
    batch = pl.DataFrame(
        {"id": ["w", "c"], "text": ["hi a@b.com", "hi a@b.com"], "source": ["web", "chat"], "lang": ["en", "en"]}
    )
    result = filter_step(config)(batch)
    assert result.removed.select("id", "rule").rows() == [("w", "gopher_quality.word_count_min")]
    assert result.kept.rows(named=True) == [
        {"id": "c", "text": "hi a@b.com", "source": "chat", "lang": "en", "pii_replacements": None}
    ]


def test_every_filter_measures_the_text_as_it_entered_the_stage():
    # WordCount after DropLinesWithX counts the words of the text before the x line was dropped
    # ("a b c\nx d e f" splits on spaces into 6), and the kept text is still the rewritten one.
    result = apply_filters(docs("a b c\nx d e f", "a b\nx c"), [DropLinesWithX(), WordCount(minimum=4)])
    assert result.kept.select("id", "text").rows() == [("d0", "a b c")]
    assert result.removed.select("id", "rule", "value").rows() == [("d1", "words.min", 3.0)]


def test_a_rewriting_filter_after_a_rewrite_measures_the_input_and_rewrites_the_current_text():
    batch = docs("x mail a@b.org\nkeep c@d.org", "x one\nx two\nkeep")
    result = apply_filters(batch, [PIIScrubber(), DropLinesWithX()])
    assert result.kept["text"].to_list() == ["keep <EMAIL>"]  # both rewrites, in order
    assert result.removed.select("id", "rule", "value").rows() == [("d1", "drop_x.too_many_x", 2.0)]


GOOD_LINES = [
    "The river flooded the lower fields after three days of heavy rain in the valley.",
    "Farmers moved their cattle to the hills and waited for the water to go down.",
    "By the end of the week most of the roads were open again and the schools reopened.",
    "Engineers from the county inspected every bridge before letting trucks cross them.",
    "A new levee, paid for with state money, will be built along the eastern bank next year.",
    "Residents said that they had not seen such a flood since the spring of nineteen ninety.",
]
ELLIPSIS_LINES = [
    "Read the rest of the story about the storm and what happened to the mill...",
    "More photos of the damage to the old covered bridge are in our gallery...",
    "Officials promised that further updates on the repairs would follow soon...",
    "Click here to see how neighbours helped each other during the long night...",
]


def test_gopher_paragraph_and_ellipsis_rules_fire_in_the_default_chain():
    """C4 (first in the default chain) drops blank lines and lines ending in "...": Gopher's
    duplicate-paragraph and ellipsis-line rules must still see them."""
    from pipeline.config import DEFAULT_FILTERS
    from pipeline.filters.registry import build_filters

    assert DEFAULT_FILTERS[0] == "c4_quality"
    repeated = "Subscribe to our newsletter for weekly updates."
    texts = [
        "\n".join(GOOD_LINES + ELLIPSIS_LINES),  # 4 of 10 lines end in "..." (> 0.3)
        "\n".join(GOOD_LINES) + "\n\n" + repeated + "\n\n" + repeated,  # 1 of 3 paragraphs a copy (> 0.3)
        "\n".join(GOOD_LINES) + "\n\n" + ELLIPSIS_LINES[0],  # 1 of 7 lines: kept
    ]
    batch = pl.DataFrame(
        {"id": ["ellipsis", "paragraphs", "clean"], "text": texts, "source": ["web"] * 3, "lang": ["en"] * 3}
    )
    result = apply_filters(batch, build_filters(DEFAULT_FILTERS, {}))
    assert result.removed.sort("id").select("id", "rule", "value").rows() == [
        ("ellipsis", "gopher_quality.ellipsis_lines_ratio", 0.4),
        ("paragraphs", "gopher_repetition.dup_para_frac", pytest.approx(1 / 3)),
    ]
    assert result.counts["fired|gopher_quality.ellipsis_lines_ratio"] == 1
    assert result.counts["fired|gopher_repetition.dup_para_frac"] == 1
    # the kept document is C4's cleaned text: the "..." line and the blank line are gone
    assert result.kept["text"].to_list() == ["\n".join(GOOD_LINES)]


def test_stored_measurements_decide_as_measuring_again_with_any_threshold():
    from pipeline.filters.engine import decide, from_attributes, measure, to_attributes

    batch = docs("one two three four", "x\nx\nx", "a b", "fine text here\nx line", "x", "")
    batch = batch.with_columns(pl.Series("text", ["one two three four", "x\nx\nx", "a b", "fine\nx", "x", None]))
    stored = to_attributes(batch, measure(batch, [DropLinesWithX(), WordCount(), PIIScrubber()]))
    assert stored["text_changed"].to_list() == [False, True, False, True, True, False]
    assert stored["text"].to_list() == [None, "", None, "fine", "", None]
    for minimum in (1, 3, 5):
        filters = [DropLinesWithX(), WordCount(minimum=minimum), PIIScrubber()]
        fresh = apply_filters(batch, filters)
        again = decide(batch, from_attributes(batch, stored), filters)
        assert again.kept.equals(fresh.kept) and again.removed.equals(fresh.removed)
        assert again.counts == fresh.counts


def _first_fired_plainly(n, rules):
    """The first rule that fires per document, read plainly in polars (Rule.fires, when/then)."""
    rule = pl.Series("rule", [None] * n, dtype=pl.Utf8)
    value = pl.Series("value", [None] * n, dtype=pl.Float64)
    threshold = pl.Series("threshold", [None] * n, dtype=pl.Float64)
    fired_counts = {}
    for filter_rule, measured in rules:
        fired = measured.to_frame("m").select(filter_rule.fires(pl.col("m"))).to_series()
        fired_counts[f"fired|{filter_rule.name}"] = int(fired.sum())
        first = fired & rule.is_null()
        rule = pl.select(pl.when(first).then(pl.lit(filter_rule.name)).otherwise(rule)).to_series()
        value = pl.select(pl.when(first).then(measured).otherwise(value)).to_series()
        threshold = pl.select(
            pl.when(first).then(pl.lit(float(filter_rule.threshold))).otherwise(threshold)
        ).to_series()
    return (rule, value, threshold), fired_counts


@pytest.mark.parametrize("seed", range(5))
def test_the_first_rule_fired_is_that_of_the_plain_reading(seed):
    """Every operator, thresholds met exactly, nulls (never fire) and NaNs (above every threshold,
    as polars compares them), measures of Float64 and of integers."""
    from collections import Counter

    from pipeline.filters.engine import _first_fired

    rng = np.random.default_rng(seed)
    n = 300
    rules = []
    for k in range(6):
        values = rng.integers(0, 6, n).astype(np.float64)
        series = pl.Series(values).cast(pl.Int64) if k == 5 else pl.Series(values)
        if k != 5:
            series = series.scatter(rng.choice(n, 30, replace=False), None)
            series = series.scatter(rng.choice(n, 10, replace=False), float("nan"))
        rules.append((Rule(f"f.r{k}", f"r{k}", ("<", "<=", ">", ">=")[k % 4], float(rng.integers(1, 5))), series))
    counts = Counter()
    got = _first_fired(n, rules, counts)
    expected, expected_counts = _first_fired_plainly(n, rules)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and a.equals(b), a.name
    assert dict(counts) == expected_counts
    assert all(s.equals(e) for s, e in zip(_first_fired(n, rules[:0], Counter()), _first_fired_plainly(n, [])[0]))


def test_the_gopher_filters_share_their_words_within_a_batch_and_keep_nothing_after(monkeypatch):
    """While a batch is measured the Gopher quality and repetition filters split its text once, and
    measure what each measures alone; the memo is gone once the batch is measured."""
    from pipeline.filters import heuristics
    from pipeline.filters.engine import batch_memo, measure

    texts = [
        "The cat sat on the mat. " * 20,
        "Home | News | Sport | Weather\nA line of words that ends here.",
        "",
        "你好世界。" * 30,
        "Buy now! Buy now! Buy now!",
    ]
    docs = pl.DataFrame({"id": [str(i) for i in range(len(texts))], "text": texts, "lang": ["en"] * 4 + [None]})
    splits = []
    original = heuristics._Words.__init__

    def counting(self, text):
        splits.append(len(text))
        original(self, text)

    monkeypatch.setattr(heuristics._Words, "__init__", counting)
    filters = [heuristics.GopherQuality(), heuristics.GopherRepetition(), heuristics.FineWebQuality()]
    measured = measure(docs, filters)
    assert splits == [len(texts)]  # one split for the three filters (FineWeb counts the words)
    assert batch_memo() is None
    for doc_filter in filters:
        alone = doc_filter.apply(docs).measures
        for column in alone.columns:
            assert measured.values[f"{doc_filter.name}.{column}"].equals(alone[column].cast(pl.Float64))
    assert len(splits) == 3  # outside a measured batch, each Gopher filter splits for itself
