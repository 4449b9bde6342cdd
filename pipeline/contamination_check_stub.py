"""A minimal stand-in for the token-window contamination check of a mixture (13-token windows
shared between its training shards and a set of texts), with the interface of the full check
that the decontamination module provides:

    check_contamination(mixture_dir, texts, tokenizer) -> dict

Returns ``{"window": 13, "documents": n, "windows": n, "common_windows": n, "tokens_checked": n,
"seconds": s, "groups": {group: {"documents", "windows", "common_windows"}}, "examples": [...]}``:
training documents (distinct ids) that share at least one window with ``texts``, the distinct
shared windows, and apart from them the common windows (in more than ``common_window_docs``
documents of the curated pool the mixture was drawn from: licences, templates, lorem ipsum),
counted, not silently dropped.

TODO(merge): delete this module and import ``check_contamination`` from the decontamination module.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np

from pipeline.io.writer import read_json
from pipeline.tokenize import load_tokenizer, read_token_shard

_BASE = np.uint64(0x100000001B3)


def _window_hashes(tokens: np.ndarray, window: int) -> np.ndarray:
    """Polynomial hash (mod 2^64) of every ``window`` consecutive tokens: one value per start."""
    count = tokens.size - window + 1
    if count <= 0:
        return np.zeros(0, np.uint64)
    values = tokens.astype(np.uint64) + np.uint64(1)
    hashes = np.zeros(count, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(window):
            hashes = hashes * _BASE + values[j:j + count]
    return hashes


def _shard_hits(path: Path, reference: np.ndarray, window: int, code: dict[str, int]):
    """``(doc codes, window hashes)`` of the windows of a shard's documents that are in ``reference``
    (windows inside one document only), and the shard's token count."""
    tokens, offsets = read_token_shard(path)
    hashes = _window_hashes(np.asarray(tokens), window)
    starts = offsets["doc_start"].to_numpy()
    ends = starts + offsets["doc_tokens"].to_numpy()
    positions = np.arange(hashes.size)
    doc = np.searchsorted(starts, positions, side="right") - 1
    hit = (positions + window <= ends[doc]) & np.isin(hashes, reference) if hashes.size else np.zeros(0, bool)
    codes = np.array([code.setdefault(i, len(code)) for i in offsets["doc_id"].to_list()], np.int64)
    return codes[doc[hit]], hashes[hit], int(tokens.size)


def _unique_pairs(docs: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    if not docs.size:
        return np.zeros((2, 0), np.uint64)
    return np.unique(np.stack([docs.astype(np.uint64), hashes]), axis=1)


def check_contamination(mixture_dir: Path, texts: Sequence[str], tokenizer, window: int = 13,
                        common_window_docs: int = 10) -> dict:
    started = time.perf_counter()
    mixture_dir = Path(mixture_dir)
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(Path(tokenizer))
    encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    reference = np.unique(np.concatenate([_window_hashes(np.asarray(e.ids, np.int64), window) for e in encoded]
                                         or [np.zeros(0, np.uint64)]))
    # Common windows: in more than common_window_docs documents of the curated pool the mixture was
    # drawn from (the run's tokenize shards), or of the mixture itself where those are not beside it.
    pool_shards = sorted((mixture_dir.parent.parent / "tokenize" / "shards").glob("*.arrow"))
    manifest = read_json(mixture_dir / "manifest.json")
    train = [(entry["group"], mixture_dir / entry["file"]) for entry in manifest["train"]]
    pool_code: dict[str, int] = {}
    pool_pairs = [_unique_pairs(*_shard_hits(path, reference, window, pool_code)[:2])
                  for path in (pool_shards or [path for _, path in train])]
    pool_hashes = np.concatenate([pair[1] for pair in pool_pairs]) if pool_pairs else np.zeros(0, np.uint64)
    values, docs_per_window = np.unique(pool_hashes, return_counts=True)
    common = values[docs_per_window > common_window_docs]

    code: dict[str, int] = {}
    groups, checked, found = {}, 0, []
    for group, path in train:
        docs, hashes, tokens = _shard_hits(path, reference, window, code)
        checked += tokens
        found.append((group, _unique_pairs(docs, hashes)))
    for group in sorted({g for g, _ in found}):
        pairs = np.concatenate([p for g, p in found if g == group], axis=1)
        is_common = np.isin(pairs[1], common)
        groups[group] = {"documents": int(np.unique(pairs[0, ~is_common]).size),
                         "windows": int(np.unique(pairs[1, ~is_common]).size),
                         "common_windows": int(np.unique(pairs[1, is_common]).size)}
    pairs = np.concatenate([p for _, p in found], axis=1) if found else np.zeros((2, 0), np.uint64)
    is_common = np.isin(pairs[1], common)
    contaminated = np.unique(pairs[0, ~is_common])
    id_of = {c: i for i, c in code.items()}
    return {"window": window, "common_window_docs": common_window_docs,
            "documents": int(contaminated.size), "windows": int(np.unique(pairs[1, ~is_common]).size),
            "common_windows": int(np.unique(pairs[1, is_common]).size), "tokens_checked": checked,
            "seconds": time.perf_counter() - started, "groups": groups,
            "examples": [id_of[int(d)] for d in contaminated[:5]]}
