"""The rule that flags a filter unfair to a language (report.languages.unfair_rules) on stats
dicts as the stages write them, at its edges; the warning lines the console prints; and the
report's table of each language through the stages, its long list folded, every number kept."""

from __future__ import annotations

import io
import json

from rich.console import Console

from pipeline.formats.stats import StageStats
from pipeline.lang import RULE_NOT_KEPT
from pipeline.licence import LicenceRule
from pipeline.stages.run import RunFiles
from report.build import TOP_LANGUAGES, _fairness, _language_funnel
from report.console import print_language_warnings
from report.languages import languages_by_documents, unfair_rules
from tests.helpers import parse_html, resolve_json_path

RULE = "c4_quality.min_sentences"


def _ledger(stage: str, docs_in: int, removed: dict[str, int]) -> dict:
    return {
        "stage": stage,
        "docs_in": docs_in,
        "docs_out": docs_in - sum(removed.values()),
        "removed": removed,
        "quarantined": {},
    }


def _stage(stage: str, languages: dict[str, tuple[int, dict[str, int]]]) -> dict:
    """A stage's stats with per-language ledgers ``{code: (docs in, removed by rule)}``."""
    ledgers = {code: _ledger(stage, n, removed) for code, (n, removed) in languages.items()}
    total: dict[str, int] = {}
    for ledger in ledgers.values():
        for rule, n in ledger["removed"].items():
            total[rule] = total.get(rule, 0) + n
    return {**_ledger(stage, sum(n for n, _ in languages.values()), total), "languages": ledgers}


def _flagged(languages: dict[str, tuple[int, dict[str, int]]]) -> list[tuple[str, str]]:
    return [(u.rule, u.lang) for u in unfair_rules(_typed({"filter": _stage("filter", languages)}))]


def _typed(stats: dict[str, dict]) -> dict[str, StageStats]:
    return {stage: StageStats.from_dict(counts) for stage, counts in stats.items()}


def test_the_warning_names_the_rule_the_language_and_both_shares():
    stats = {"filter": _stage("filter", {"en": (30, {RULE: 1}), "zh": (9, {RULE: 9})})}
    (found,) = unfair_rules(_typed(stats))
    assert (found.stage, found.rule, found.lang, found.removed, found.docs_in) == ("filter", RULE, "zh", 9, 9)
    assert found.line() == (
        "c4_quality.min_sentences removes 100% of zh (9 of 9 documents) but 3% of en; "
        "its threshold may not suit zh (see docs/config.md)"
    )


def test_more_than_half_of_the_language_is_flagged_exactly_half_is_not():
    assert _flagged({"en": (10, {}), "fr": (10, {RULE: 5})}) == []
    assert _flagged({"en": (10, {}), "fr": (10, {RULE: 6})}) == [(RULE, "fr")]
    assert _flagged({"en": (10, {}), "fr": (1001, {RULE: 501})}) == [(RULE, "fr")]
    assert _flagged({"en": (10, {}), "fr": (1000, {RULE: 500})}) == []


def test_under_a_fifth_of_english_is_flagged_exactly_a_fifth_is_not():
    assert _flagged({"en": (10, {RULE: 2}), "fr": (10, {RULE: 10})}) == []
    assert _flagged({"en": (15, {RULE: 3}), "fr": (10, {RULE: 10})}) == []
    assert _flagged({"en": (10, {RULE: 1}), "fr": (10, {RULE: 10})}) == [(RULE, "fr")]
    assert _flagged({"en": (16, {RULE: 3}), "fr": (10, {RULE: 10})}) == [(RULE, "fr")]


def test_no_english_no_warning():
    assert _flagged({"fr": (50, {RULE: 50}), "de": (50, {})}) == []
    assert _flagged({"eng_Latn": (50, {}), "fr": (50, {RULE: 50})}) == []  # only lid.176's "en" is English
    assert unfair_rules({}) == [] and unfair_rules(_typed({"source": {"stage": "source", "docs_in": 3}})) == []


def test_fewer_than_five_documents_are_too_few_to_judge():
    assert _flagged({"en": (10, {}), "fr": (4, {RULE: 4})}) == []
    assert _flagged({"en": (10, {}), "fr": (5, {RULE: 5})}) == [(RULE, "fr")]
    assert _flagged({"en": (4, {}), "fr": (50, {RULE: 50})}) == []  # English too


def test_rules_that_remove_by_choice_are_not_flagged():
    chosen = {RULE_NOT_KEPT: 10}
    stats = {
        "lang": _stage("lang", {"en": (10, {}), "fr": (10, chosen)}),
        "filter": _stage("filter", {"en": (10, {}), "fr": (10, {LicenceRule.DROPPED: 6})}),
        "dedup": _stage("dedup", {"en": (10, {}), "fr": (10, {"dedup.exact_duplicate": 6})}),
    }
    assert unfair_rules(_typed(stats)) == []
    # the word and URL lists: entries the user chose, per language for the words
    lists = {"c4_badwords.listed_word": 6, "url_blocklist.domain": 0}
    stats = {"filter": _stage("filter", {"en": (10, {}), "fr": (10, lists), "de": (10, {"url_blocklist.url": 6})})}
    assert unfair_rules(_typed(stats)) == []


def test_content_flags_and_the_stages_that_do_not_judge_text_are_not_flagged():
    stats = {
        "lang": _stage("lang", {"en": (10, {}), "fi": (10, {"lang.low_score": 10})}),
        "filter": _stage("filter", {"en": (10, {}), "la": (10, {"c4_quality.lorem_ipsum": 10})}),
        "dedup": _stage("dedup", {"en": (10, {}), "fr": (10, {"dedup.near_duplicate": 6})}),
    }
    assert unfair_rules(_typed(stats)) == []


def test_each_stage_is_judged_on_what_entered_it():
    """A language that lost documents before a stage is measured against what reached it, with
    English as it entered that stage; stages in run order, the largest share first."""
    stats = {
        "lang": _stage("lang", {"en": (40, {"lang.low_score": 2}), "zh": (20, {"lang.low_score": 11})}),
        "filter": _stage("filter", {"en": (38, {RULE: 7}), "zh": (9, {RULE: 6, "gopher_quality.word_count_min": 3})}),
        "dedup": _stage("dedup", {"en": (31, {}), "zh": (0, {})}),
    }
    found = [
        (u.stage, u.rule, u.lang, u.removed, u.docs_in, u.english_removed, u.english_in)
        for u in unfair_rules(_typed(stats))
    ]
    # lang.low_score is not judged: the lang stage's score judges the identification, not the text
    assert found == [("filter", RULE, "zh", 6, 9, 7, 38)]
    assert languages_by_documents(_typed(stats)) == ["en", "zh"]


def test_the_console_prints_one_line_per_warning_with_names_escaped():
    hostile = "z\x1b[31m[bold]h\n"
    buffer = io.StringIO()
    out = Console(file=buffer, width=300, force_terminal=True, color_system=None)
    stats = {"filter": _stage("filter", {"en": (30, {RULE: 1}), "zh": (9, {RULE: 9}), hostile: (5, {RULE: 5})})}
    print_language_warnings(out, _typed(stats))
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "warning: c4_quality.min_sentences removes 100% of z\\x1b[31m[bold]h\\n (5 of 5 documents) but 3% of en; "
        "its threshold may not suit z\\x1b[31m[bold]h\\n (see docs/config.md)",
        "warning: c4_quality.min_sentences removes 100% of zh (9 of 9 documents) but 3% of en; "
        "its threshold may not suit zh (see docs/config.md)",
    ]


def _run(tmp_path, stats: dict[str, dict]) -> RunFiles:
    for stage, counts in stats.items():
        (tmp_path / stage).mkdir()
        (tmp_path / stage / "stats.json").write_text(json.dumps(counts))
    return RunFiles(tmp_path)


def test_the_report_folds_the_smaller_languages_and_keeps_every_number(tmp_path):
    codes = ["en", "<b>zh</b>", *[f"l{i:02d}" for i in range(TOP_LANGUAGES)]]
    langs = {code: (100 - i, {"lang.low_score": i % 3} if i % 3 else {}) for i, code in enumerate(codes)}
    stats = {
        "lang": _stage("lang", langs),
        "filter": _stage("filter", {code: (n - sum(r.values()), {}) for code, (n, r) in langs.items()}),
    }
    stats["filter"]["languages"]["<b>zh</b>"] = _ledger("filter", 98, {RULE: 90})
    run = _run(tmp_path, stats)
    html = _fairness(run) + _language_funnel(run)
    parsed = parse_html(html)
    assert "b" not in [tag for tag, _ in parsed.tags]  # the hostile code is text
    text = "".join(parsed.text)
    assert "warning: c4_quality.min_sentences removes 92% of <b>zh</b> (90 of 98 documents) but 0% of en" in text
    # the TOP_LANGUAGES with most documents shown, the two smallest folded under a summary of their sums
    shown, folded = html.split("<details>")
    assert "l12" in shown and "l13" not in shown and "l13" in folded and "l14" in folded
    assert "the other 2 languages (169 documents into lang, 168 out of filter)" in text
    stat_keys = {attrs["data-stat"] for _, attrs in parsed.tags if "data-stat" in attrs}
    for code, (_, removed) in langs.items():
        assert f"lang.languages.{code}.docs_in" in stat_keys
        assert f"filter.languages.{code}.docs_out" in stat_keys
        assert all(f"lang.languages.{code}.removed.{rule}" in stat_keys for rule in removed)
    assert "filter.languages.<b>zh</b>.removed.c4_quality.min_sentences" in stat_keys
    for key in stat_keys:  # each number shows what its stats.json holds
        stage, path = key.split(".", 1)
        value = resolve_json_path(stats[stage], path)
        assert f'data-stat="{key.replace("<", "&lt;").replace(">", "&gt;")}">{value:,}<' in html


def test_the_report_says_when_no_rule_could_be_checked(tmp_path):
    run = _run(tmp_path, {"lang": _stage("lang", {"fr": (20, {}), "de": (10, {})})})
    assert "This run has no English documents, so no rule was checked." in _fairness(run)
    assert "warning" not in _fairness(run)
