"""The validation split over blocks of shards: each block's held-out candidates split again over
their union with the groups' sizes (so the cap and minimum per group are those of the whole pool,
pipeline.mix.shards explains why this equals the split of the whole pool), the shards that hold
the validation documents, and the warning of a split too small to measure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from pipeline.formats.ledger import add_counts
from pipeline.mix.plan import split_validation, validation_warning
from pipeline.mix.shards import Candidates

CANDIDATES_SCHEMA = {"id": pl.String, "group": pl.String, "shard": pl.Int32}
# The sides of the documents the validation split chose from (the excluded ones left before it).
_SPLIT_FROM = ("train", "validation", "contaminated")


def split_blocks(
    found: Sequence[Candidates], fraction: float, max_docs: int | None, seed: int, min_docs: int
) -> tuple[pl.DataFrame, pl.Series]:
    """The split of the blocks' candidates (``found``: what pipeline.mix.shards.split_candidates
    returned for each block, with the same settings). Return the candidates (``id, group,
    shard``) and the ids held out."""
    candidates = pl.concat([pl.DataFrame(schema=CANDIDATES_SCHEMA), *(block.candidates for block in found)])
    sizes: dict[str, int] = {}
    for block in found:
        add_counts(sizes, block.documents)
    _, validation_ids = split_validation(candidates, fraction, max_docs, seed, min_docs=min_docs, sizes=sizes)
    return candidates, validation_ids


def holding_shards(candidates: pl.DataFrame, validation_ids: pl.Series) -> list[int]:
    """The shards that hold a validation document, in order."""
    return candidates.filter(pl.col("id").is_in(validation_ids.implode()))["shard"].unique().sort().to_list()


def split_warning(groups: Mapping[str, Mapping], fraction: float, max_docs: int | None, min_docs: int) -> str | None:
    """The warning of a validation split too small to measure (pipeline.mix.plan.validation_warning)
    from the documents and tokens per group and side (``groups``); none where nothing is held out
    (a fraction or cap of 0)."""
    if fraction == 0 or max_docs == 0:
        return None
    figures = {}
    for name, sides in groups.items():
        held = sides.get("validation", {})
        figures[name] = {
            "documents": sum(sides.get(side, {}).get("documents", 0) for side in _SPLIT_FROM),
            "validation_documents": held.get("documents", 0),
            "validation_tokens": held.get("tokens", 0),
        }
    return validation_warning(figures, min_docs) if figures else None
