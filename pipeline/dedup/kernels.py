"""Compiled loops (numba) for the parts of MinHash that numpy can only do through large
temporaries: each function computes exactly what its numpy counterpart in
:mod:`pipeline.dedup.minhash` computes, bit for bit, and the tests hold them equal.

* :func:`affine32_signatures`: datasketch's affine32 permutations and their minima per document.
  numpy writes a (permutations x shingles) block to memory and reduces it; here each document's
  128 running minima stay in registers while its shingles stream past, and the loop over the
  permutations is vectorized by LLVM.

Compiled on first use and cached next to this file (``cache=True``; numba falls back to its user
cache folder where that is not writable), so a process pays the compilation once per machine.
"""

from __future__ import annotations

import numba
import numpy as np

_MAX32 = np.uint32(0xFFFFFFFF)


@numba.njit(cache=True, nogil=True, inline="always")
def _fmix32(h):
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    return np.uint32(h ^ (h >> np.uint32(16)))


@numba.njit(cache=True, nogil=True)
def _affine32_minima(hashes, offsets, a, b, out):
    num_perm = a.shape[0]
    acc = np.empty(num_perm, dtype=np.uint32)
    for d in range(offsets.shape[0] - 1):
        acc[:] = _MAX32
        for i in range(offsets[d], offsets[d + 1]):
            h = _fmix32(hashes[i])
            for k in range(num_perm):
                v = np.uint32(a[k] * h + b[k])
                if v < acc[k]:
                    acc[k] = v
        out[d, :] = acc


def affine32_signatures(hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(documents, len(a))`` uint32: for each document, the minimum over its shingle hashes
    ``hashes[offsets[d]:offsets[d + 1]]`` (uint32) of ``a * fmix32(h) + b`` (uint32, wrapping),
    all ``2**32 - 1`` for a document without shingles: datasketch's affine32 ``hashvalues``."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = np.empty((len(offsets) - 1, len(a)), dtype=np.uint32)
    _affine32_minima(hashes, offsets, np.ascontiguousarray(a, np.uint32), np.ascontiguousarray(b, np.uint32), out)
    return out
