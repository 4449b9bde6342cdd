"""The mix stage's algorithms as plain functions, on figures small enough to check by hand: licence
counts, the counts per side and rule and their ledger, a mixture's figures per group, the
exclusion's rules in order, the key ranges and writing order of the copies, the split's warning."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.formats.ledger import LedgerError
from pipeline.mix import contamination, figures, licences, routing, split
from pipeline.mix.plan import cap_epochs

MIT = {"documents": 2, "tokens": 30}
BSD = {"documents": 1, "tokens": 5}


def test_licence_counts_of_a_mixture_and_of_the_pool():
    taken = {"news": {"tokens": 70, "documents": 3, "licences": {"MIT": MIT, "GPL": {"documents": 0, "tokens": 0}}}}
    pool = {
        "news": {"train": {"MIT": MIT}, "validation": {"BSD": BSD}},
        "web": {"train": {"MIT": {"documents": 4, "tokens": 40}}, "excluded": {"MIT": BSD}},
    }
    by_group = licences.mixture_licences(taken, pool)
    # A licence the mixture takes nothing of is left out, unless the group holds some of it out.
    assert by_group == {
        "news": {
            "BSD": {"documents_taken": 0, "tokens_taken": 0, "validation_documents": 1, "validation_tokens": 5},
            "MIT": {"documents_taken": 2, "tokens_taken": 30, "validation_documents": 0, "validation_tokens": 0},
        }
    }
    by_group["web"] = {"MIT": {"documents_taken": 4, "tokens_taken": 40, "validation_documents": 0}}
    assert licences.licences_in_all(by_group)["MIT"] == {
        "documents_taken": 6,
        "tokens_taken": 70,
        "validation_documents": 0,
        "validation_tokens": 0,
    }
    assert licences.pool_licences(pool) == {
        "BSD": {"validation": BSD},
        "MIT": {"excluded": BSD, "train": {"documents": 6, "tokens": 70}},
    }


def _side(train: int, contaminated: int, rule_count: int) -> dict:
    return {
        "splits": {"train": train, "validation": 1, "contaminated": contaminated, "excluded": 0},
        "rules": {"validation_near_duplicate": rule_count} if rule_count else {},
        "groups": {"news": {"train": {"documents": train, "tokens": 10 * train, "bytes": 40 * train}}},
        "licences": {},
        "tokens_in": 10 * (train + 1 + contaminated),
    }


def test_side_counts_and_the_ledger_of_removed_documents():
    counts = figures.side_counts([_side(3, 1, 1), _side(4, 0, 0)])
    assert counts["splits"] == {"train": 7, "validation": 2, "contaminated": 1, "excluded": 0}
    assert counts["groups"]["news"]["train"] == {"documents": 7, "tokens": 70, "bytes": 280}
    assert counts["tokens_in"] == 100
    assert figures.removed_by_rule(counts, handed_over=10) == {"validation_near_duplicate": 1}
    with pytest.raises(LedgerError, match="11 handed over"):
        figures.removed_by_rule(counts, handed_over=11)
    counts["rules"] = {}
    with pytest.raises(LedgerError, match="by rule != 1 removed"):
        figures.removed_by_rule(counts, handed_over=10)


def test_a_mixture_report_and_its_figures_per_group():
    groups = {
        "news": {"train": {"documents": 4, "tokens": 400}, "contaminated": {"documents": 1}},
        "tiny": {"validation": {"documents": 2, "tokens": 20, "bytes": 80}},
    }
    sizes = {"news": 400}
    caps = cap_epochs({"news": 1.0}, sizes, 600, 2.0)
    layers = {"news": {"tokens": 600, "documents": 4}}
    report = figures.mixture_report((caps, sizes), layers, groups, 600, 2.0)
    assert (report["tokens_taken"], report["groups"]["news"]["epochs"]) == (600, 1.5)
    per_group = figures.mixture_groups(report, groups, {"news": {"MIT": {"tokens_taken": 600}}})
    assert per_group["news"]["contaminated_documents"] == 1 and per_group["news"]["licences"]["MIT"]
    # A group with only validation documents is in the manifest, with nothing taken.
    assert per_group["tiny"]["tokens_taken"] == 0 and per_group["tiny"]["validation_bytes"] == 80
    empty = figures.mixture_report((None, {}), None, groups, 500, 4.0)
    assert (empty["tokens_taken"], empty["shortfall_tokens"], empty["groups"]) == (0, 500, {})


def test_the_exclusion_takes_each_document_by_its_first_rule():
    matches = pl.DataFrame(
        {"id": ["a", "a", "b"], "reference_id": ["t2", "t1", "t1"], "jaccard": [0.9, 0.9, 0.8]},
        schema=contamination.MATCHES_SCHEMA,
    )
    near = contamination.best_match(matches)
    assert dict(zip(near["id"], near["reference_id"])) == {"a": "t1", "b": "t1"}  # a tie: the smaller id
    found = contamination.excluded_by_reference(pl.Series("id", ["x"]), near, texts=3)
    assert found.causes["rule"].to_list() == ["reference_id", "reference_near_duplicate", "reference_near_duplicate"]
    assert found.summary == {"texts": 3, "by_id": 1, "near_duplicate": 2}
    windows = pl.DataFrame({"id": ["a", "c", "d"], "reference_id": ["t3", "t3", "t3"], "windows": [4, 2, 0]})
    common = pl.DataFrame({"hash": [7], "documents": [30]})
    found = contamination.excluded_by_window(found, (windows, {"common_windows": 1}, common), {"ngram": 13}, 10)
    # a left by near-duplicate already, d shares only common windows: c alone leaves by window.
    assert found.causes.filter(pl.col("rule") == "reference_window")["id"].to_list() == ["c"]
    assert found.summary["window"] == 1 and found.summary["ngram"] == 13 and found.summary["texts"] == 3
    assert found.common is common


def test_key_ranges_and_the_writing_order_of_the_copies(monkeypatch):
    monkeypatch.setattr("pipeline.mix.shards.RANGE_ROWS", 10)
    layers = {
        "main": {
            "news": {"full": 2, "bucket": 5, "group_documents": 25, "partial_documents": 4},
            "web": {"full": 1, "bucket": None, "group_documents": 3},
        },
        "empty": None,
    }
    groups = {"news": {"train": {"documents": 25}, "validation": {"documents": 11}}, "web": {"train": {}}}
    ranges = routing.key_ranges(layers, groups)
    assert ranges.train["main"] == {("news", 0): 3, ("news", 1): 3, ("news", 2): 1, ("web", 0): 1}
    assert ranges.train["empty"] == {} and ranges.validation == {("news", 0): 2} and ranges.held == {"news": 11}
    assert routing.writing_orders(ranges) == [
        ("main", "news", [(0, 3), (1, 3), (2, 1)]),
        ("main", "web", [(0, 1)]),
        (None, "news", [(0, 2)]),
    ]
    taken = {"main": {"news": {"tokens": 90, "documents": 25}}}
    routing.check_taken(taken, {"main": {"news": {"tokens": 90, "documents": 25}}, "empty": None})
    with pytest.raises(LedgerError, match="the plan takes 91 tokens"):
        routing.check_taken(taken, {"main": {"news": {"tokens": 91, "documents": 25}}})


def test_the_split_warns_only_where_it_holds_something_out():
    groups = {"news": {"train": {"documents": 50}, "validation": {"documents": 1, "tokens": 30}}}
    assert "news" in split.split_warning(groups, 0.01, 1000, 5)
    assert split.split_warning(groups, 0.0, 1000, 5) is None
    assert split.split_warning(groups, 0.01, 0, 5) is None
    candidates = pl.DataFrame({"id": ["a", "b", "c"], "group": ["g"] * 3, "shard": [4, 1, 4]})
    assert split.holding_shards(candidates, pl.Series(["c", "b"])) == [1, 4]
