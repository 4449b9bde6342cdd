"""The filters a config can name, and building them from a config with checked parameters."""

from __future__ import annotations

import inspect

from pipeline.filters.heuristics import HEURISTIC_FILTERS
from pipeline.filters.pii import PIIScrubber
from pipeline.filters.quality import QualityFilter

FILTERS: dict[str, type] = {
    **HEURISTIC_FILTERS,
    "pii": PIIScrubber,
    "quality": QualityFilter,  # needs params.quality.model: a model made by `curate train-quality`
}


def filter_parameters(name: str) -> list[str]:
    """The threshold and option names a filter's constructor takes."""
    return [p for p in inspect.signature(FILTERS[name]).parameters if p != "name"]


def build_filters(names: list[str], params: dict[str, dict]) -> list:
    return [FILTERS[name](**params.get(name, {})) for name in names]
