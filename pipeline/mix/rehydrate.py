"""Re-hydration (FineWeb-2): a kept document stands for the duplicate cluster dedup removed around
it, and a page copied many times across a crawl tends to be good text, so the mix stage may count
each training document as several copies of itself, by its cluster's size.

    copies_by_cluster_size(sizes, bins, max_copies)  -> the copies of each document

The sizes come from the dedup stage's clusters table (a document in no cluster has size 1); the
mix stage plans each mixture over the re-hydrated pool (a group's tokens are its documents' tokens
times their copies), so a document's repeats in a mixture are its copies times the epochs its
group takes (``plan.parquet``'s ``repeats``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# FineWeb-2's upsampling weights (github.com/huggingface/fineweb-2, README, "Deduplication"): from
# each cluster size up, this many copies; clusters of 1000 or more are taken once, as likely
# boilerplate or spam.
FINEWEB2_BINS = {1: 1, 2: 2, 3: 3, 5: 5, 100: 8, 1000: 1}


def copies_by_cluster_size(sizes: np.ndarray, bins: Mapping[int, int] | None, max_copies: int) -> np.ndarray:
    """The copies of each document of cluster size ``sizes[i]``: the value of the largest bin at or
    below its size (``bins``: cluster size -> copies; a size under every bin gets 1), or its size
    when ``bins`` is None; at most ``max_copies``, at least 1."""
    sizes = np.maximum(np.asarray(sizes, dtype=np.int64), 1)
    if bins is None:
        copies = sizes
    else:
        edges = np.array(sorted(bins), dtype=np.int64)
        values = np.array([bins[edge] for edge in edges.tolist()], dtype=np.int64)
        at = np.searchsorted(edges, sizes, side="right") - 1
        copies = np.where(at >= 0, values[np.maximum(at, 0)], 1)
    return np.clip(copies, 1, max_copies).astype(np.int64)
