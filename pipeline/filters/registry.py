"""The filters a config can name, and building them from a config with checked parameters."""

from __future__ import annotations

import inspect

from pipeline.filters.pii import PIIScrubber

FILTERS: dict[str, type] = {
    "pii": PIIScrubber,
}


def filter_parameters(name: str) -> list[str]:
    """The threshold and option names a filter's constructor takes."""
    return [p for p in inspect.signature(FILTERS[name]).parameters if p != "name"]


def build_filters(names: list[str], params: dict[str, dict]) -> list:
    return [FILTERS[name](**params.get(name, {})) for name in names]
