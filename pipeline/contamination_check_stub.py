"""A minimal stand-in for the token-window contamination check of a mixture (13-token windows
shared between its training shards and a set of texts), with the interface of the full check
that the decontamination module provides:

    check_contamination(mixture_dir, texts, tokenizer) -> dict

Returns ``{"window": 13, "documents": n, "windows": n, "common_windows": n, "tokens_checked": n,
"seconds": s, "groups": {group: {"documents", "windows", "common_windows"}}, "examples": [...]}``:
training documents (distinct ids) that share at least one window with ``texts``, the distinct
shared windows, and apart from them the common windows (shared by more than ``common_window_docs``
training documents: licences, templates), counted, not silently dropped.

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


def check_contamination(mixture_dir: Path, texts: Sequence[str], tokenizer, window: int = 13,
                        common_window_docs: int = 10) -> dict:
    started = time.perf_counter()
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(Path(tokenizer))
    encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    reference = np.unique(np.concatenate([_window_hashes(np.asarray(e.ids, np.int64), window) for e in encoded]
                                         or [np.zeros(0, np.uint64)]))
    manifest = read_json(Path(mixture_dir) / "manifest.json")
    pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    code: dict[str, int] = {}
    checked = 0
    for entry in manifest["train"]:
        tokens, offsets = read_token_shard(Path(mixture_dir) / entry["file"])
        checked += int(tokens.size)
        hashes = _window_hashes(np.asarray(tokens), window)
        starts = offsets["doc_start"].to_numpy()
        ends = starts + offsets["doc_tokens"].to_numpy()
        positions = np.arange(hashes.size)
        doc = np.searchsorted(starts, positions, side="right") - 1
        inside = positions + window <= ends[doc] if hashes.size else np.zeros(0, bool)
        hit = inside & np.isin(hashes, reference)
        ids = offsets["doc_id"].to_list()
        codes = np.array([code.setdefault(i, len(code)) for i in ids], np.int64)
        pairs.setdefault(entry["group"], []).append((codes[doc[hit]], hashes[hit]))
    id_of = {c: i for i, c in code.items()}
    groups, all_docs, all_hashes = {}, [], []
    for group, found in pairs.items():
        docs = np.concatenate([d for d, _ in found]) if found else np.zeros(0, np.int64)
        hashes = np.concatenate([h for _, h in found]) if found else np.zeros(0, np.uint64)
        all_docs.append(docs)
        all_hashes.append(hashes)
    docs = np.concatenate(all_docs) if all_docs else np.zeros(0, np.int64)
    hashes = np.concatenate(all_hashes) if all_hashes else np.zeros(0, np.uint64)
    pair = np.unique(np.stack([docs.astype(np.uint64), hashes]), axis=1) if docs.size else np.zeros((2, 0), np.uint64)
    window_values, docs_per_window = np.unique(pair[1], return_counts=True)
    common = window_values[docs_per_window > common_window_docs]
    group_of_doc: dict[int, str] = {}
    for group, found in pairs.items():
        for d, _ in found:
            for value in np.unique(d).tolist():
                group_of_doc.setdefault(value, group)
    contaminated = pair[:, ~np.isin(pair[1], common)]
    for group in pairs:
        in_group = np.array([group_of_doc.get(int(d)) == group for d in contaminated[0]], bool)
        mine = contaminated[:, in_group] if in_group.size else contaminated
        common_here = pair[:, np.isin(pair[1], common) & np.array(
            [group_of_doc.get(int(d)) == group for d in pair[0]], bool)] if pair.size else pair
        groups[group] = {"documents": int(np.unique(mine[0]).size), "windows": int(np.unique(mine[1]).size),
                         "common_windows": int(np.unique(common_here[1]).size)}
    return {"window": window, "common_window_docs": common_window_docs,
            "documents": int(np.unique(contaminated[0]).size), "windows": int(np.unique(contaminated[1]).size),
            "common_windows": int(common.size), "tokens_checked": checked,
            "seconds": time.perf_counter() - started, "groups": groups,
            "examples": [id_of[int(d)] for d in np.unique(contaminated[0])[:5]]}
