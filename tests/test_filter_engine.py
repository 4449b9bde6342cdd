"""The filter engine: first rule wins, every rule is counted, rewrites flow to later filters."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.filters.base import FilterOutput, Rule
from pipeline.filters.engine import EMPTY_AFTER_REWRITE, apply_filters
from pipeline.filters.pii import PIIScrubber


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
        removed = (lines.list.len() - lines.list.eval(pl.element().filter(~pl.element().str.starts_with("x"))).list.len())
        return FilterOutput(pl.DataFrame({"x_lines": removed.cast(pl.Float64)}), text=kept)


def docs(*texts):
    return pl.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": list(texts),
                         "source": ["s"] * len(texts), "lang": ["en"] * len(texts)})


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


def test_pii_counts_go_to_stats_in_total_and_per_source():
    batch = pl.DataFrame({"id": ["a", "b"], "text": ["mail me: a@b.org", "ip 10.1.2.3 and c@d.com"],
                          "source": ["web", "news"], "lang": ["en", "en"]})
    result = apply_filters(batch, [PIIScrubber()])
    assert result.kept["text"].to_list() == ["mail me: <EMAIL>", "ip <IP_ADDRESS> and <EMAIL>"]
    assert result.counts["pii.email"] == 2 and result.counts["pii.email|web"] == 1
    assert result.counts["pii.ip_address|news"] == 1 and result.removed.height == 0


def test_filters_apply_only_to_the_configured_sources(tmp_path):
    from pipeline.steps import filter_step
    from tests.helpers import source_config, write_jsonl

    path = write_jsonl(tmp_path / "in.jsonl", [{"text": "x"}])
    config = source_config(tmp_path, [{"name": "web", "reader": "jsonl", "paths": [str(path)]},
                                      {"name": "chat", "reader": "jsonl", "paths": [str(path)]}],
                           filter={"filters": ["gopher_quality", "pii"], "sources": ["web"]})
    batch = pl.DataFrame({"id": ["w", "c"], "text": ["hi a@b.com", "hi a@b.com"], "source": ["web", "chat"],
                          "lang": ["en", "en"]})
    result = filter_step(config)(batch)
    assert result.removed.select("id", "rule").rows() == [("w", "gopher_quality.word_count_min")]
    assert result.kept.rows(named=True) == [{"id": "c", "text": "hi a@b.com", "source": "chat", "lang": "en",
                                             "pii_replacements": None}]
