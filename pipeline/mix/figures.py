"""The mix stage's figures from what its units counted: documents per side and rule (checked
against the documents handed over), and each mixture's report and figures per group, as its
manifest (pipeline.formats.mixture) records them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.formats.ledger import LedgerError, add_counts
from pipeline.mix.plan import report_from_counts
from pipeline.mix.routing import Planned
from pipeline.mix.shards import SPLITS

# The figures of a group a mixture takes nothing of (one with only validation documents).
_NO_GROUP = {
    "documents_available": 0,
    "tokens_available": 0,
    "tokens_allocated": 0,
    "tokens_taken": 0,
    "documents_taken": 0,
    "epochs": 0.0,
    "effective_weight": 0.0,
    "target_weight": 0.0,
    "capped": False,
}


def side_counts(sides: Sequence[Mapping]) -> dict:
    """The documents per side and per rule, the figures per group and licence, and the tokens in,
    summed over the blocks (``sides``: the counts pipeline.mix.shards.shard_sides returned for
    each, ``Sides.counts``)."""
    counts: dict = {"splits": dict.fromkeys(SPLITS, 0), "rules": {}, "groups": {}, "licences": {}, "tokens_in": 0}
    for side in sides:
        add_counts(
            counts,
            {k: side[k] for k in ("splits", "rules", "groups", "licences", "tokens_in", "rehydration") if k in side},
        )
    return counts


def removed_by_rule(counts: Mapping, handed_over: int) -> dict[str, int]:
    """The documents removed per rule (``counts``: :func:`side_counts`), checked: every document
    handed over has a side, and every removed one a rule (LedgerError: a bug)."""
    by_side = counts["splits"]
    if sum(by_side.values()) != handed_over:
        raise LedgerError(f"stage mix: {by_side} documents by side != {handed_over} handed over")
    removed = dict(sorted(counts["rules"].items()))
    if sum(removed.values()) != by_side["contaminated"] + by_side["excluded"]:
        raise LedgerError(
            f"stage mix: {removed} documents by rule != {by_side['contaminated'] + by_side['excluded']} removed"
        )
    return removed


def mixture_report(
    planned: Planned, layers: Mapping | None, groups: Mapping, budget_tokens: int | None, max_epochs: float | None
) -> dict:
    """A mixture's figures (pipeline.mix.plan.report_from_counts) from its plan, its layers per
    group (pipeline.mix.routing.mixture_layers) and the documents per group and side; those of
    an empty mixture (an empty pool, or all of it held out) when its plan takes nothing."""
    caps, sizes = planned
    if caps is None:
        return {
            "budget_tokens": budget_tokens or 0,
            "max_epochs": max_epochs,
            "tokens_allocated": 0,
            "tokens_taken": 0,
            "shortfall_tokens": budget_tokens or 0,
            "groups": {},
        }
    return report_from_counts(
        {g: groups[g]["train"]["documents"] for g in sizes},
        caps,
        {g: layers[g]["tokens"] for g in sizes},
        {g: layers[g]["documents"] for g in sizes},
    )


def mixture_groups(report: Mapping, by_group: Mapping, licences: Mapping) -> dict[str, dict]:
    """A mixture's figures per group for its manifest: the report's (``report``), the validation
    side's documents, tokens and bytes and the contaminated documents (``by_group``: per group
    and side), and its licences (``licences``: pipeline.mix.licences.mixture_licences)."""
    groups = {}
    for name in sorted(set(report["groups"]) | {g for g, sides in by_group.items() if "validation" in sides}):
        held = by_group.get(name, {}).get("validation", {})
        groups[name] = {
            **report["groups"].get(name, _NO_GROUP),
            "validation_documents": int(held.get("documents", 0)),
            "validation_tokens": int(held.get("tokens", 0)),
            "validation_bytes": int(held.get("bytes", 0)),
            "contaminated_documents": int(by_group.get(name, {}).get("contaminated", {}).get("documents", 0)),
            "licences": licences.get(name, {}),
        }
    return groups
