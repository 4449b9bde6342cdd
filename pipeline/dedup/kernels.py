"""Compiled loops (numba) for the parts of MinHash that numpy can only do through large
temporaries (the ones numpy did before): each function computes, bit for bit, what its caller's
docstring (:mod:`pipeline.dedup.normalize`, :mod:`pipeline.dedup.minhash`) defines, and the tests
hold each to a plain reading of that definition (the minima to datasketch's too).

* :func:`affine32_signatures`: datasketch's affine32 permutations and their minima per document.
  numpy writes a (permutations x shingles) block to memory and reduces it; here each document's
  128 running minima stay in registers while its shingles stream past, and the loop over the
  permutations is vectorized by LLVM.

* :func:`word_spans`: the words of a batch's prepared UTF-8 bytes (runs of word bytes, never
  across a document boundary) and their polynomial hashes, in one pass over the bytes, where numpy
  needs a translated copy, a difference, a prefix sum of the bytes times powers and gathers.

* :func:`polynomial_shingles`: each shingle's 64-bit hash, Horner's rule over its words' hashes,
  where numpy makes n passes over shifted views of every word position, then gathers each
  document's shingles and hashes short documents on their own.

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


_M = np.uint64(0x9E3779B97F4A7C15 | 1)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _fmix64(h):
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


@numba.njit(cache=True, nogil=True)
def _count_words(data, offsets, in_word):
    counts = np.zeros(offsets.shape[0] - 1, dtype=np.int64)
    for d in range(offsets.shape[0] - 1):
        inside = False
        n = 0
        for i in range(offsets[d], offsets[d + 1]):
            if in_word[data[i]]:
                if not inside:
                    n += 1
                    inside = True
            else:
                inside = False
        counts[d] = n
    return counts


@numba.njit(cache=True, nogil=True)
def _fill_words(data, offsets, in_word, doc_offsets, hashes, starts, ends):
    for d in range(offsets.shape[0] - 1):
        w = doc_offsets[d]
        i, stop = offsets[d], offsets[d + 1]
        while i < stop:
            if not in_word[data[i]]:
                i += 1
                continue
            start = i
            h = np.uint64(0)
            power = np.uint64(1)
            while i < stop and in_word[data[i]]:
                h += np.uint64(data[i]) * power
                power *= _M
                i += 1
            hashes[w] = _fmix64(h + np.uint64(i - start) * _GOLDEN)
            starts[w] = start
            ends[w] = i
            w += 1


def word_spans(data: np.ndarray, offsets: np.ndarray, in_word: np.ndarray):
    """``(hashes, starts, ends, doc_offsets)`` of the words of ``data`` (uint8, the documents'
    bytes one after another, ``offsets`` their bounds): a word is a run of bytes that
    ``in_word`` (bool, 256) marks, inside one document; its hash fmix64(sum_j byte_j * M^j +
    length * G) over its bytes j = 0, 1, ... (pipeline.dedup.normalize)."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    counts = _count_words(data, offsets, in_word)
    doc_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_offsets[1:])
    total = int(doc_offsets[-1])
    hashes = np.empty(total, np.uint64)
    starts, ends = np.empty(total, np.int64), np.empty(total, np.int64)
    _fill_words(data, offsets, in_word, doc_offsets, hashes, starts, ends)
    return hashes, starts, ends, doc_offsets


@numba.njit(cache=True, nogil=True)
def _fill_shingles(word_hashes, word_offsets, ngram, seed, k, offsets, out):
    for d in range(word_offsets.shape[0] - 1):
        first, words = word_offsets[d], word_offsets[d + 1] - word_offsets[d]
        size = min(words, ngram)
        length = np.uint64(size) * _GOLDEN
        position = offsets[d]
        for i in range(offsets[d + 1] - offsets[d]):
            h = seed
            for j in range(size):
                h = h * k + word_hashes[first + i + j]
            out[position + i] = _fmix64(h + length)


def polynomial_shingles(word_hashes: np.ndarray, word_offsets: np.ndarray, ngram: int, seed, k):
    """``(hashes, offsets)``: the 64-bit hash of each document's every run of ``ngram`` words (of
    all its words when it has fewer, none when it has none), fmix64(Horner's rule from ``seed``
    with multiplier ``k`` over the words' hashes + size * G) (pipeline.dedup.minhash)."""
    word_offsets = np.ascontiguousarray(word_offsets, dtype=np.int64)
    counts = np.diff(word_offsets)
    shingles = np.where(counts > 0, np.maximum(counts - ngram + 1, 1), 0)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(shingles, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint64)
    hashes = np.ascontiguousarray(word_hashes, dtype=np.uint64)
    _fill_shingles(hashes, word_offsets, np.int64(ngram), np.uint64(seed), np.uint64(k), offsets, out)
    return out, offsets
