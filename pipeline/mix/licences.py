"""Licence counts of the mix stage: what each mixture takes and holds out per group and licence,
their total over groups, and the pool's documents and tokens per licence and side."""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.formats.ledger import add_counts

_NO_LICENCE = {"documents_taken": 0, "tokens_taken": 0, "validation_documents": 0, "validation_tokens": 0}


def mixture_licences(taken: Mapping, pool: Mapping) -> dict[str, dict[str, dict[str, int]]]:
    """Per group and licence, what a mixture takes (``documents_taken``, ``tokens_taken``: tokens
    of every copy) and holds out (``validation_documents``, ``validation_tokens``). ``taken``: the
    mixture's figures per group from pipeline.mix.shards.route_copies; ``pool``: the documents
    and tokens per group, side and licence from pipeline.mix.shards.shard_sides."""
    found: dict = {}
    for group, figures in taken.items():
        for licence, used in figures.get("licences", {}).items():
            if used["documents"]:
                mine = found.setdefault(group, {}).setdefault(licence, dict(_NO_LICENCE))
                mine.update(documents_taken=int(used["documents"]), tokens_taken=int(used["tokens"]))
    for group, sides in pool.items():
        for licence, held in sides.get("validation", {}).items():
            mine = found.setdefault(group, {}).setdefault(licence, dict(_NO_LICENCE))
            mine.update(validation_documents=int(held["documents"]), validation_tokens=int(held["tokens"]))
    return {group: dict(sorted(by.items())) for group, by in sorted(found.items())}


def licences_in_all(by_group: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """The figures per licence of :func:`mixture_licences`, summed over the groups."""
    total: dict = {}
    for figures in by_group.values():
        add_counts(total, figures)
    return dict(sorted(total.items()))


def pool_licences(pool: Mapping) -> dict[str, dict[str, dict[str, int]]]:
    """Documents and tokens per licence and side (train, validation, contaminated, excluded) of the
    stage's pool, summed over groups."""
    found: dict = {}
    for sides in pool.values():
        for side, by in sides.items():
            for licence, figures in by.items():
                add_counts(found.setdefault(licence, {}), {side: figures})
    return {licence: dict(sorted(found[licence].items())) for licence in sorted(found)}
