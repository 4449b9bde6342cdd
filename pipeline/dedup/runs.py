"""Runs of equal keys in sorted numpy arrays: how dedup's steps group rows (pairs by document,
component records by key, rows by bucket, group, home or shard) with one sort instead of a
group-by, which held several times the rows' bytes (polars' group-by of 388,536 routed pairs took
52 MiB)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def run_starts(*keys: np.ndarray) -> np.ndarray:
    """Where each run of equal rows starts, the rows being ``keys`` (columns of one length,
    sorted together): the first row, and each row that differs from the one before in any key."""
    if not len(keys[0]):
        return np.zeros(0, np.int64)
    changed = np.zeros(len(keys[0]) - 1, bool)
    for key in keys:
        changed |= key[1:] != key[:-1]
    return np.flatnonzero(np.concatenate([[True], changed]))


def runs(*keys: np.ndarray) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` of each run of equal rows of ``keys`` (as :func:`run_starts`), in order."""
    starts = run_starts(*keys)
    yield from zip(starts.tolist(), [*starts[1:].tolist(), len(keys[0])])
