"""Compiled loops (numba) for the filters' per-document duplicate counts.

* :func:`ngram_chars`: the Gopher repetition filter's n-gram measures, every size of a document
  in one pass over its words with a hash table sized to it, not a hash and sort of the whole
  batch per size (the filter step's time, measured: ``docs/benchmarks.md``).
* :func:`first_in_docs`: whether a line or paragraph is the first of its equals in its document.

Keys are 64-bit hashes salted per document (:func:`pipeline.filters.heuristics._doc_keys`),
compared within their document only, so they give what polars' ``is_duplicated`` /
``is_first_distinct`` over the whole batch gave: equal keys of two documents are as unlikely as
any other collision.

Compiled on first use and cached next to this file (``cache=True``), as
:mod:`pipeline.dedup.kernels` are.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(key, mask):
    """A table slot for ``key``: splitmix64's finalizer, masked (a rolling n-gram key's low bits
    alone are poorly mixed)."""
    x = np.uint64(key)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return np.int64(x & np.uint64(mask))


@numba.njit(cache=True, nogil=True, inline="always")
def _mask_for(count):
    """The mask of the smallest power-of-two table of at least twice ``count`` slots."""
    size = 1
    while size < 2 * count:
        size *= 2
    return size - 1


@numba.njit(cache=True, nogil=True, inline="always")
def _tally(key, table_key, table_count, table_stamp, stamp, mask):
    """Count ``key`` in an open-addressing table whose live slots carry ``stamp`` (a slot of any
    other stamp is free, so a new stamp empties the table at no cost); return its slot. Whether
    the key is new is not branched on: half the keys are, in no order a predictor can guess."""
    h = _slot(key, mask)
    while table_stamp[h] == stamp and table_key[h] != key:
        h = (h + 1) & mask
    live = np.int32(table_stamp[h] == stamp)
    table_stamp[h] = stamp
    table_key[h] = key
    table_count[h] = table_count[h] * live + 1
    return h


@numba.njit(cache=True, nogil=True)
def _count_in_docs(key, doc_of, first):
    """Per key: how many keys of its document equal it; with ``first``, 1 where it is the first
    of them and 0 after (int32)."""
    n = key.shape[0]
    out = np.empty(n, dtype=np.int32)
    if n == 0:
        return out
    longest, i = 0, 0
    while i < n:
        j = i
        while j < n and doc_of[j] == doc_of[i]:
            j += 1
        longest = max(longest, j - i)
        i = j
    size = _mask_for(longest) + 1
    table_key = np.empty(size, dtype=np.uint64)
    table_count = np.zeros(size, dtype=np.int32)
    table_run = np.full(size, -1, dtype=np.int64)  # the run (document) that filled a slot
    slot = np.empty(n, dtype=np.int64)
    i = 0
    while i < n:
        j = i
        while j < n and doc_of[j] == doc_of[i]:
            j += 1
        mask = _mask_for(j - i)
        for p in range(i, j):
            h = _tally(key[p], table_key, table_count, table_run, i, mask)
            slot[p] = h
            if first:
                out[p] = 1 if table_count[h] == 1 else 0
        if not first:
            for p in range(i, j):
                out[p] = table_count[slot[p]]
        i = j
    return out


def first_in_docs(key: np.ndarray, doc_of: np.ndarray) -> np.ndarray:
    """True where a key is the first of its equals within its document."""
    return _count_in_docs(np.ascontiguousarray(key, dtype=np.uint64), np.ascontiguousarray(doc_of), True) == 1


@numba.njit(cache=True, nogil=True)
def _covered(starts, count, size, cum):
    """Word characters inside the union of the n-grams of ``size`` words at ``starts[:count]``
    (ascending word positions)."""
    total = 0
    for k in range(count):
        stop = starts[k] + size
        if k + 1 < count and starts[k + 1] < stop:
            stop = starts[k + 1]
        total += cum[stop] - cum[starts[k]]
    return total


@numba.njit(cache=True, nogil=True)
def _ngram_chars(word_hash, salts, offsets, cum, top_sizes, dup_sizes, multiplier):
    """Per document and size: the word characters covered by the most frequent n-gram (top) and
    by the n-grams occurring twice or more (dup); -1 where the document has fewer words than
    the size (top only). See :func:`ngram_chars`."""
    n_docs = offsets.shape[0] - 1
    largest = 0
    for s in top_sizes:
        largest = max(largest, s)
    for s in dup_sizes:
        largest = max(largest, s)
    top = np.zeros((n_docs, top_sizes.shape[0]), dtype=np.int64)
    dup = np.zeros((n_docs, dup_sizes.shape[0]), dtype=np.int64)
    longest = 1
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    size_table = _mask_for(longest) + 1
    table_key = np.empty(size_table, dtype=np.uint64)
    table_count = np.zeros(size_table, dtype=np.int32)
    table_pass = np.full(size_table, -1, dtype=np.int64)
    pos = np.empty(longest, dtype=np.int64)
    key = np.empty(longest, dtype=np.uint64)
    slot = np.empty(longest, dtype=np.int64)
    starts = np.empty(longest, dtype=np.int64)
    passes = 0
    for d in range(n_docs):
        a, b = offsets[d], offsets[d + 1]
        # 2-grams: every pair of neighbouring words
        m = 0
        for p in range(a, b - 1):
            pos[m] = p
            key[m] = (word_hash[p] ^ salts[d]) * multiplier + word_hash[p + 1]
            m += 1
        for size in range(2, largest + 1):
            if size > 2:  # the n-grams that extend a repeated (n-1)-gram and fit in the document
                kept = 0
                for k in range(m):
                    if pos[k] + size - 1 < b:
                        pos[kept] = pos[k]
                        key[kept] = key[k] * multiplier + word_hash[pos[k] + size - 1]
                        kept += 1
                m = kept
            mask = _mask_for(m)
            for k in range(m):
                slot[k] = _tally(key[k], table_key, table_count, table_pass, passes, mask)
            passes += 1
            for t in range(top_sizes.shape[0]):
                if top_sizes[t] != size:
                    continue
                if b - a < size:
                    top[d, t] = -1
                    continue
                best, most = -1, 1  # the first n-gram of the highest count, when above 1
                for k in range(m):
                    c = table_count[slot[k]]
                    better = c > most
                    best = k if better else best
                    most = c if better else most
                if best < 0:  # every n-gram occurs once: the first one is the top
                    top[d, t] = cum[a + size] - cum[a]
                else:
                    count = 0
                    for k in range(best, m):
                        if key[k] == key[best]:
                            starts[count] = pos[k]
                            count += 1
                    top[d, t] = _covered(starts, count, size, cum)
            count = 0
            for k in range(m):  # keep the repeated ones, without a branch
                pos[count] = pos[k]
                key[count] = key[k]
                count += table_count[slot[k]] >= 2
            m = count
            for t in range(dup_sizes.shape[0]):
                if dup_sizes[t] == size:
                    dup[d, t] = _covered(pos, m, size, cum)
    return top, dup


def ngram_chars(
    word_hash: np.ndarray,
    salts: np.ndarray,
    offsets: np.ndarray,
    cum: np.ndarray,
    top_sizes: list[int],
    dup_sizes: list[int],
    multiplier: np.uint64,
) -> tuple[np.ndarray, np.ndarray]:
    """The Gopher repetition filter's n-gram character counts, per document (rows) and size
    (columns, in the order given): ``top`` the word characters covered by every occurrence of
    the document's most frequent n-gram (ties to the one that occurs first; the first n-gram
    when none repeats; -1 when the document has fewer words than the size), ``dup`` those
    covered by every n-gram that occurs twice or more. An n-gram's key is a rolling polynomial
    hash (``multiplier``) of its words' 64-bit hashes, the first one XOR its document's salt;
    an n-gram is only counted where its (n-1)-gram prefix repeats, the only place it can.
    ``offsets``: each document's first word and the end; ``cum``: word characters before each
    word (``len(word_hash) + 1`` values)."""
    return _ngram_chars(
        np.ascontiguousarray(word_hash, dtype=np.uint64),
        np.ascontiguousarray(salts, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(cum, dtype=np.int64),
        np.asarray(top_sizes, dtype=np.int64),
        np.asarray(dup_sizes, dtype=np.int64),
        np.uint64(multiplier),
    )


# The classes of a code point that the word pattern (pipeline.filters.text.WORD_PATTERN) reads.
SPACE, PUNCT_OR_SYMBOL, SPACELESS, MARK, LETTER = 1, 2, 4, 8, 16


@numba.njit(cache=True, nogil=True, inline="always")
def _decode(data, p):
    """The code point of the UTF-8 sequence at ``p`` and its length in bytes (valid UTF-8)."""
    b = np.int64(data[p])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(data[p + 1]) & 0x3F) << 6) | (np.int64(data[p + 2]) & 0x3F), 3
    return (
        ((b & 0x07) << 18)
        | ((np.int64(data[p + 1]) & 0x3F) << 12)
        | ((np.int64(data[p + 2]) & 0x3F) << 6)
        | (np.int64(data[p + 3]) & 0x3F)
    ), 4


@numba.njit(cache=True, nogil=True)
def _astral_class(cp, astral, astral_classes):
    """The class of a code point above 0xFFFF (a binary search of the ones found; rare, and
    kept out of line: inlined, it made the whole scan several times slower)."""
    lo, hi = 0, astral.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if astral[mid] < cp:
            lo = mid + 1
        else:
            hi = mid
    return astral_classes[lo]


@numba.njit(cache=True, nogil=True)
def _class_of(cp, bmp, astral, astral_classes):
    if cp < 0x10000:
        return bmp[cp]
    return _astral_class(cp, astral, astral_classes)


@numba.njit(cache=True, nogil=True)
def _split_words(data, offsets, bmp, astral, astral_classes):
    n_docs = offsets.shape[0] - 1
    total = offsets[n_docs] - offsets[0]
    out = np.empty(total, dtype=np.uint8)
    bounds = np.empty(total + 1, dtype=np.int64)  # at most one word per byte
    chars = np.empty(total, dtype=np.int64)
    letters = np.empty(total, dtype=np.bool_)
    counts = np.zeros(n_docs, dtype=np.int64)
    n_words = 0
    written = 0
    bounds[0] = 0
    for d in range(n_docs):
        p, end = offsets[d], offsets[d + 1]
        while p < end:
            cp, size = _decode(data, p)
            cls = _class_of(cp, bmp, astral, astral_classes)
            letter = cls & LETTER != 0
            if cls & SPACELESS and not cls & MARK:  # one character and the marks after it
                stop, length = p + size, 1
                while stop < end:
                    cp2, size2 = _decode(data, stop)
                    cls2 = _class_of(cp2, bmp, astral, astral_classes)
                    if not cls2 & MARK:
                        break
                    letter |= cls2 & LETTER != 0
                    stop += size2
                    length += 1
            elif not cls & (SPACE | PUNCT_OR_SYMBOL | SPACELESS):
                # a run without space or spaceless character, up to its last character that is
                # not punctuation or a symbol
                q, run = p + size, 1
                stop, length = q, 1
                letter_stop = q if letter else -1  # where the first letter ends
                while q < end:
                    cp2, size2 = _decode(data, q)
                    cls2 = _class_of(cp2, bmp, astral, astral_classes)
                    if cls2 & (SPACE | SPACELESS):
                        break
                    q += size2
                    run += 1
                    if letter_stop < 0 and cls2 & LETTER:
                        letter_stop = q
                    if not cls2 & PUNCT_OR_SYMBOL:
                        stop, length = q, run
                letter = 0 <= letter_stop <= stop
            else:
                p += size
                continue
            for b in range(p, stop):  # a loop: a slice assignment per word cost more than the scan
                out[written] = data[b]
                written += 1
            chars[n_words] = length
            letters[n_words] = letter
            n_words += 1
            bounds[n_words] = written
            counts[d] += 1
            p = stop
    return out[:written], bounds[: n_words + 1], chars[:n_words], letters[:n_words], counts


def split_words(
    data: np.ndarray, offsets: np.ndarray, bmp: np.ndarray, astral: np.ndarray, astral_classes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The words of UTF-8 texts (``data``, each text ``offsets[d]:offsets[d + 1]``) as
    :data:`pipeline.filters.text.WORD_PATTERN` finds them, scanning as the regular expression
    does: the words' bytes one after the other, their bounds in them, their characters, whether
    each has a letter (:data:`LETTER`), and the words of each text. ``bmp``: the classes
    (:data:`SPACE` ...) of code points below 0x10000; ``astral`` the others found in the texts
    (ascending) and ``astral_classes`` theirs."""
    return _split_words(data, offsets, bmp, astral, astral_classes)


@numba.njit(cache=True, nogil=True)
def astral_code_points(data):
    """The distinct code points above 0xFFFF in UTF-8 ``data`` (ascending)."""
    found = []
    for p in range(data.shape[0]):
        if data[p] >= 0xF0:
            cp, _ = _decode(data, p)
            found.append(cp)
    return np.unique(np.array(found, dtype=np.int64)) if found else np.zeros(0, dtype=np.int64)
