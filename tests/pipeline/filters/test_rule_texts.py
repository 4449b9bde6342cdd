"""Each rule's text says what its measure counts, so a value can be read without the source: C4's
"0 sentences" on a page of sentences is the count after C4 drops lines without an end mark."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pipeline.filters import classifier, perplexity, quality
from pipeline.filters.heuristics import C4Quality
from pipeline.filters.registry import FILTERS
from report.console import _rules_table


def _rules(name: str, monkeypatch, tmp_path) -> list:
    if name == "c4_badwords":
        (tmp_path / "en.txt").write_text("word\n")
        return FILTERS[name](lists={"en": tmp_path / "en.txt"}).rules()
    if name == "url_blocklist":
        (tmp_path / "domains").write_text("example.com\n")
        (tmp_path / "urls").write_text("example.com/a\n")
        return FILTERS[name](domains=tmp_path / "domains", urls=tmp_path / "urls", substrings=["x"]).rules()
    if name == "perplexity":
        monkeypatch.setattr(perplexity, "check_kenlm_file", lambda path, what: None)
        (tmp_path / "en.arpa").write_bytes(b"model")
        cutoffs = {"en": [1.0, 2.0]}
        return FILTERS[name](
            models={"en": tmp_path / "en.arpa"}, max_perplexity=500, cutoffs=cutoffs, max_bucket="middle"
        ).rules()
    if name not in ("quality", "classifier"):
        return FILTERS[name]().rules()
    monkeypatch.setattr(quality, "load_quality_model", lambda path: None)
    monkeypatch.setattr(classifier, "model_labels", lambda path: ("__label__hq",))
    (tmp_path / "model.bin").write_bytes(b"model")
    return FILTERS[name](model=tmp_path / "model.bin").rules()


@pytest.mark.parametrize("name", [name for name in FILTERS if name != "pii"])
def test_every_rule_says_what_its_measure_counts(name, monkeypatch, tmp_path):
    rules = _rules(name, monkeypatch, tmp_path)
    assert rules
    for rule in rules:
        assert rule.counts, rule.name
        assert rule.describe().startswith(f"{rule.measure} {rule.op} ") and rule.counts in rule.describe()


def test_c4s_sentence_rule_says_it_counts_after_dropping_lines_as_set():
    (rule,) = [r for r in C4Quality().rules() if r.measure == "sentence_count"]
    assert rule.describe() == (
        "sentence_count < 3 (sentences, one or more per line, in the lines C4 keeps after dropping those "
        "without an end mark, of fewer than 5 words, naming javascript, with a policy phrase)"
    )
    (thai,) = [
        r
        for r in C4Quality(filter_no_terminal_punct=False, min_words_per_line=2).rules()
        if r.measure == "sentence_count"
    ]
    assert "end mark" not in thai.counts and "fewer than 2 words" in thai.counts


def test_inspects_rule_table_shows_what_a_rule_counts():
    (rule,) = [r for r in C4Quality().rules() if r.measure == "sentence_count"]
    entry = {"rule": rule.name, "measure": rule.measure, "op": rule.op, "threshold": 3.0, "value": 0.0}
    out = io.StringIO()
    Console(file=out, width=400).print(_rules_table({"rules": [{**entry, "counts": rule.counts, "fires": True}]}))
    assert "sentence_count < 3 (sentences, one or more per line, in the lines C4 keeps after dropping" in out.getvalue()
