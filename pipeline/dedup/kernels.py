"""Compiled loops (numba) for the parts of MinHash that numpy can only do through large
temporaries: each function computes, bit for bit, what its caller's
docstring (:mod:`pipeline.dedup.normalize`, :mod:`pipeline.dedup.minhash`) defines, and the tests
hold each to a plain reading of that definition (the minima to datasketch's too).

* :func:`affine32_signatures`: datasketch's affine32 permutations and their minima per document.
  numpy writes a (permutations x shingles) block to memory and reduces it; here each document's
  128 running minima stay in the cache while its shingles stream past four at a time, and the
  loop over the permutations is vectorized by LLVM.

* :func:`prepared_lengths` and :func:`fill_prepared`: the normalization's steps 1 to 3 over a
  batch's UTF-8 bytes, ASCII lowercased and every other code point replaced by its form from a
  table (:func:`pipeline.dedup.normalize.prepared_alone`), where each non-ASCII document became a
  Python string for NFKC and lowercase and went through two polars regular expressions;
  :func:`prepared_lengths` also finds the code points the table does not hold yet;
  :func:`prepared_word_hashes` hashes the words of what :func:`fill_prepared` would write as it
  makes each byte, without writing it (the signatures never read the prepared text).

* :func:`word_hashes`: the words of a batch's prepared UTF-8 bytes (runs of word bytes, never
  across a document boundary) and their polynomial hashes, in one pass over the bytes without a
  branch per byte (each byte's term from a table of powers of M, so no byte waits for the power
  of the one before), where numpy needs a translated copy, a difference, a prefix sum of the
  bytes times powers and gathers; :func:`word_bounds` their byte ranges, for the callers that
  need the words' text.

* :func:`polynomial_shingles`: each shingle's 64-bit hash, Horner's rule over its words' hashes,
  where numpy makes n passes over shifted views of every word position, then gathers each
  document's shingles and hashes short documents on their own; :func:`polynomial_shingle_sets`
  the same hashes sorted and made distinct per document in the same pass
  (:func:`distinct_sorted` for hashes made elsewhere): a bucket pass on the top bits, then an
  insertion sort, where numpy sorted the batch with the document number in the key.

* :func:`combine_hashes` (the exact hash) and :func:`band_keys`: loops over each document's
  values, where numpy built (documents x bands) temporaries once per row.

* :func:`pair_jaccard`: verification's exact Jaccard similarity, one merge of each pair's two
  sorted sets, where numpy tagged every value with its pair's number and binary-searched one set's
  values in the other's.

* :func:`bucket_pairs`: the candidate pairs of a band-key partition, its buckets found and its
  repeated pairs dropped with open-addressing tables, where numpy sorted 4.4 million rows by band
  and key (two stable sorts) and lexsorted the pairs.

Compiled on first use and cached next to this file (``cache=True``; numba falls back to its user
cache folder, ``~/.cache/numba``, where that is not writable, and ``NUMBA_CACHE_DIR`` overrides
both), so a process pays the compilation once per machine and loading the loops once per process.
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
    """Four shingles at a time: each permutation's multiplier, offset and running minimum are
    loaded and stored once for the four, so the loads and stores are fewer than the arithmetic."""
    num_perm = a.shape[0]
    acc = np.empty(num_perm, dtype=np.uint32)
    for d in range(offsets.shape[0] - 1):
        acc[:] = _MAX32
        i, stop = offsets[d], offsets[d + 1]
        while i + 4 <= stop:
            h0, h1 = _fmix32(hashes[i]), _fmix32(hashes[i + 1])
            h2, h3 = _fmix32(hashes[i + 2]), _fmix32(hashes[i + 3])
            for k in range(num_perm):
                ak, bk = a[k], b[k]
                low = min(np.uint32(ak * h0 + bk), np.uint32(ak * h1 + bk))
                high = min(np.uint32(ak * h2 + bk), np.uint32(ak * h3 + bk))
                acc[k] = min(acc[k], min(low, high))
            i += 4
        while i < stop:
            h = _fmix32(hashes[i])
            for k in range(num_perm):
                acc[k] = min(acc[k], np.uint32(a[k] * h + b[k]))
            i += 1
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


_POWERS = 64  # M^0 .. M^63 in a table: the bytes of a word of up to 64 bytes hash independently


def _power_table() -> np.ndarray:
    powers = np.ones(_POWERS, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(1, _POWERS):
            powers[j] = powers[j - 1] * _M
    return powers


_POWER_TABLE = _power_table()


@numba.njit(cache=True, nogil=True, inline="always")
def _word_byte(byte, h, j, prev, n, longest, raw, in_word, powers):
    """One byte of prepared text into :func:`_raw_word_hashes`' running word, without a branch."""
    cur = np.uint64(in_word[byte])
    raw[n] = h + j * _GOLDEN
    n += np.int64(prev & (cur ^ np.uint64(1)))
    keep = np.uint64(0) - cur
    h = (h + np.uint64(byte) * powers[j & np.uint64(_POWERS - 1)]) & keep
    j = (j + np.uint64(1)) & keep
    return h, j, cur, n, max(longest, j)


@numba.njit(cache=True, nogil=True, inline="always")
def _end_words(h, j, prev, n, longest, raw):
    """A document's end in :func:`_word_byte`'s running state: its last word, if it ends in one,
    counted. Returns the words so far and whether a word was longer than the power table."""
    raw[n] = h + j * _GOLDEN
    return n + np.int64(prev), longest > np.uint64(_POWERS)


@numba.njit(cache=True, nogil=True)
def _raw_word_hashes(data, offsets, in_word, powers, raw, doc_offsets):
    """Without a branch per byte: every byte stores the running word's unfinished hash at the next
    word's slot, which moves on when a word ends. Returns the documents with a word longer than
    the power table, which these sums got wrong (the caller hashes them again)."""
    n = 0
    long_docs = []
    for d in range(offsets.shape[0] - 1):
        h = np.uint64(0)
        j = np.uint64(0)  # bytes of the running word so far (0 between words)
        prev = np.uint64(0)
        longest = np.uint64(0)
        for i in range(offsets[d], offsets[d + 1]):
            h, j, prev, n, longest = _word_byte(data[i], h, j, prev, n, longest, raw, in_word, powers)
        n, too_long = _end_words(h, j, prev, n, longest, raw)
        doc_offsets[d + 1] = n
        if too_long:
            long_docs.append(d)
    return n, long_docs


@numba.njit(cache=True, nogil=True)
def _rehash_words(data, offsets, in_word, doc_offsets, docs, raw):
    """The plain loop (power by power) over the given documents' words."""
    for d in docs:
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
            raw[w] = h + np.uint64(i - start) * _GOLDEN
            w += 1


@numba.njit(cache=True, nogil=True)
def _finish(values, n):
    for i in range(n):
        values[i] = _fmix64(values[i])


def word_hashes(data: np.ndarray, offsets: np.ndarray, in_word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, doc_offsets)`` of the words of ``data`` (uint8, the documents' bytes one after
    another, ``offsets`` their bounds): a word is a run of bytes that ``in_word`` (256 entries,
    1 inside a word) marks, inside one document; its hash fmix64(sum_j byte_j * M^j + length * G)
    over its bytes j = 0, 1, ... (pipeline.dedup.normalize). One pass over the bytes."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    in_word = np.ascontiguousarray(in_word, dtype=np.uint8)
    docs = len(offsets) - 1
    # A document of b bytes has at most (b + 1) // 2 words; one more slot for the last store.
    raw = np.empty((len(data) + docs) // 2 + docs + 1, np.uint64)
    doc_offsets = np.zeros(docs + 1, np.int64)
    n, long_docs = _raw_word_hashes(data, offsets, in_word, _POWER_TABLE, raw, doc_offsets)
    if len(long_docs):
        _rehash_words(data, offsets, in_word, doc_offsets, np.asarray(long_docs, np.int64), raw)
    _finish(raw, n)
    return raw[:n].copy(), doc_offsets


@numba.njit(cache=True, nogil=True)
def _fill_bounds(data, offsets, in_word, doc_offsets, starts, ends):
    for d in range(offsets.shape[0] - 1):
        w = doc_offsets[d]
        inside = False
        for i in range(offsets[d], offsets[d + 1]):
            if in_word[data[i]]:
                if not inside:
                    starts[w] = i
                    inside = True
            elif inside:
                ends[w] = i
                w += 1
                inside = False
        if inside:
            ends[w] = offsets[d + 1]


def word_bounds(data: np.ndarray, offsets: np.ndarray, in_word: np.ndarray, doc_offsets: np.ndarray):
    """``(starts, ends)``: each word's byte range in ``data``, the words :func:`word_hashes` found
    (``doc_offsets`` its second result)."""
    total = int(doc_offsets[-1])
    starts, ends = np.empty(total, np.int64), np.empty(total, np.int64)
    _fill_bounds(
        np.ascontiguousarray(data, dtype=np.uint8),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(in_word, dtype=np.uint8),
        doc_offsets,
        starts,
        ends,
    )
    return starts, ends


@numba.njit(cache=True, nogil=True, inline="always")
def _shingle_hash(word_hashes, at, size, seed, k):
    """The hash of the ``size`` words from ``word_hashes[at]`` on: Horner's rule, the size, fmix64."""
    h = seed
    for j in range(size):
        h = h * k + word_hashes[at + j]
    return _fmix64(h + np.uint64(size) * _GOLDEN)


@numba.njit(cache=True, nogil=True, inline="always")
def _shingle_count(words, ngram):
    """A document's shingles: its ``ngram``-word runs, one of all its words when it has fewer."""
    return max(words - ngram + 1, 1) if words else 0


@numba.njit(cache=True, nogil=True, inline="always")
def _document_shingles(word_hashes, first, words, ngram, seed, k, out, at):
    """Writes the shingle hashes of the document whose ``words`` words start at ``first`` to
    ``out[at:]``; returns how many."""
    size = min(words, ngram)
    shingles = _shingle_count(words, ngram)
    for i in range(shingles):
        out[at + i] = _shingle_hash(word_hashes, first + i, size, seed, k)
    return shingles


@numba.njit(cache=True, nogil=True)
def _fill_shingles(word_hashes, word_offsets, ngram, seed, k, offsets, out):
    for d in range(word_offsets.shape[0] - 1):
        words = word_offsets[d + 1] - word_offsets[d]
        _document_shingles(word_hashes, word_offsets[d], words, ngram, seed, k, out, offsets[d])


def _shingle_offsets(word_offsets: np.ndarray, ngram: int) -> np.ndarray:
    """Each document's shingle range: ``ngram``-word runs, one of all its words when it has
    fewer, none when it has none."""
    counts = np.diff(word_offsets)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(np.where(counts > 0, np.maximum(counts - ngram + 1, 1), 0), out=offsets[1:])
    return offsets


def polynomial_shingles(word_hashes: np.ndarray, word_offsets: np.ndarray, ngram: int, seed, k):
    """``(hashes, offsets)``: the 64-bit hash of each document's every run of ``ngram`` words (of
    all its words when it has fewer, none when it has none), fmix64(Horner's rule from ``seed``
    with multiplier ``k`` over the words' hashes + size * G) (pipeline.dedup.minhash)."""
    word_offsets = np.ascontiguousarray(word_offsets, dtype=np.int64)
    offsets = _shingle_offsets(word_offsets, ngram)
    out = np.empty(int(offsets[-1]), np.uint64)
    hashes = np.ascontiguousarray(word_hashes, dtype=np.uint64)
    _fill_shingles(hashes, word_offsets, np.int64(ngram), np.uint64(seed), np.uint64(k), offsets, out)
    return out, offsets


_MOST_PER_BUCKET = 64  # a bucket fuller than this (values far from uniform) sorts the piece plainly


@numba.njit(cache=True, nogil=True, inline="always")
def _bucket_bits(n):
    """Bits of the top-bit buckets for ``n`` values: about two values a bucket."""
    bits = 1
    while (1 << (bits + 1)) < n:
        bits += 1
    return bits


@numba.njit(cache=True, nogil=True)
def _sort_distinct(values, lo, hi, width, scratch, ends):
    """Sorts ``values[lo:hi]`` and moves its distinct values to the front; returns where they end.
    Hashes are uniform, so a pass of bucketing by their top bits (about two values a bucket)
    leaves only neighbours out of order, which an insertion sort puts right."""
    n = hi - lo
    if n < 2:
        return hi
    bits = _bucket_bits(n)
    shift = np.uint64(width - bits)
    ends[: (1 << bits) + 1] = 0
    for i in range(lo, hi):
        ends[(np.uint64(values[i]) >> shift) + 1] += 1
    return _sort_counted(values, lo, hi, bits, shift, scratch, ends)


@numba.njit(cache=True, nogil=True)
def _sort_counted(values, lo, hi, bits, shift, scratch, ends):
    """:func:`_sort_distinct` once ``ends[b + 1]`` holds how many values of ``values[lo:hi]`` are
    in bucket ``b`` (their top ``bits`` bits, ``value >> shift``): scattered to ``scratch`` by
    bucket, put right there by an insertion sort, and written back distinct."""
    n = hi - lo
    if n < 2:
        return hi
    most = 0
    for b in range(1 << bits):
        most = max(most, ends[b + 1])
        ends[b + 1] += ends[b]
    if most > _MOST_PER_BUCKET:  # values far from uniform: sorted plainly
        values[lo:hi].sort()
        m = lo + 1
        for i in range(lo + 1, hi):
            v = values[i]
            if v != values[m - 1]:
                values[m] = v
                m += 1
        return m
    for i in range(lo, hi):
        v = values[i]
        b = np.uint64(v) >> shift
        scratch[ends[b]] = v
        ends[b] += 1
    for i in range(1, n):
        v = scratch[i]
        j = i
        while j > 0 and scratch[j - 1] > v:
            scratch[j] = scratch[j - 1]
            j -= 1
        scratch[j] = v
    values[lo] = scratch[0]
    m = lo + 1
    for i in range(1, n):
        v = scratch[i]
        if v != values[m - 1]:
            values[m] = v
            m += 1
    return m


@numba.njit(cache=True, nogil=True)
def _longest(offsets):
    longest = 0
    for d in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    return longest


@numba.njit(cache=True, nogil=True)
def _distinct_sorted(values, offsets, width, out, out_offsets):
    longest = _longest(offsets)
    scratch = np.empty(longest, out.dtype)
    ends = np.empty(longest + 2, np.int64)
    n = 0
    for d in range(offsets.shape[0] - 1):
        lo, hi = offsets[d], offsets[d + 1]
        out[n : n + hi - lo] = values[lo:hi]
        n = _sort_distinct(out, n, n + hi - lo, width, scratch, ends)
        out_offsets[d + 1] = n
    return n


def distinct_sorted(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)``: each document's distinct values ``values[offsets[d]:offsets[d + 1]]``
    (unsigned integers, best uniform: hashes), sorted, one document after another (the dtype
    kept)."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    values = np.ascontiguousarray(values)
    out = np.empty(int(offsets[-1] - offsets[0]), values.dtype)
    out_offsets = np.zeros(len(offsets), np.int64)
    n = _distinct_sorted(values, offsets, np.int64(values.dtype.itemsize * 8), out, out_offsets)
    return out[:n].copy(), out_offsets


@numba.njit(cache=True, nogil=True)
def _fill_shingle_sets(word_hashes, word_offsets, ngram, seed, k, out, out_offsets):
    """Per document, one pass hashes its shingles (:func:`_document_shingles`' hashes with their
    halves swapped) and counts them into the top-bit buckets, then :func:`_sort_counted`."""
    longest = _longest(word_offsets)  # a document's shingles are at most its words
    scratch = np.empty(longest, np.uint64)
    ends = np.empty(longest + 2, np.int64)
    half = np.uint64(32)
    n = 0
    for d in range(word_offsets.shape[0] - 1):
        first = word_offsets[d]
        words = word_offsets[d + 1] - first
        size = min(words, ngram)
        shingles = _shingle_count(words, ngram)
        bits = _bucket_bits(shingles)
        shift = np.uint64(64 - bits)
        ends[: (1 << bits) + 1] = 0
        for i in range(shingles):
            h = _shingle_hash(word_hashes, first + i, size, seed, k)
            v = (h << half) | (h >> half)  # the wide hash: halves swapped
            out[n + i] = v
            ends[(v >> shift) + 1] += 1
        n = _sort_counted(out, n, n + shingles, bits, shift, scratch, ends)
        out_offsets[d + 1] = n
    return n


def polynomial_shingle_sets(word_hashes: np.ndarray, word_offsets: np.ndarray, ngram: int, seed, k):
    """``(values, offsets)``: :func:`distinct_sorted` of :func:`polynomial_shingles`' hashes with
    their halves swapped (the wide shingle hashes of pipeline.dedup.minhash), in one pass: each
    document's shingles are hashed, sorted and made distinct while they are in the cache."""
    word_offsets = np.ascontiguousarray(word_offsets, dtype=np.int64)
    out = np.empty(int(_shingle_offsets(word_offsets, ngram)[-1]), np.uint64)
    out_offsets = np.zeros(len(word_offsets), np.int64)
    hashes = np.ascontiguousarray(word_hashes, dtype=np.uint64)
    n = _fill_shingle_sets(hashes, word_offsets, np.int64(ngram), np.uint64(seed), np.uint64(k), out, out_offsets)
    return out[:n].copy(), out_offsets


@numba.njit(cache=True, nogil=True)
def _combine(hashes, offsets, multipliers, out):
    for d in range(offsets.shape[0] - 1):
        lo, hi = offsets[d], offsets[d + 1]
        total = np.uint64(0)
        for i in range(lo, hi):
            total += hashes[i] * multipliers[i - lo]
        out[d] = _fmix64(total + np.uint64(hi - lo) * _GOLDEN)


def combine_hashes(hashes: np.ndarray, offsets: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """One uint64 per document: fmix64(sum_i hashes[i] * multipliers[i] + count * G) over its
    hashes ``hashes[offsets[d]:offsets[d + 1]]`` in order (``multipliers`` at least as long as
    the longest document); pipeline.dedup.normalize's exact hash."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    out = np.empty(len(offsets) - 1, np.uint64)
    _combine(np.ascontiguousarray(hashes, np.uint64), offsets, np.ascontiguousarray(multipliers, np.uint64), out)
    return out


@numba.njit(cache=True, nogil=True)
def _band_keys(signatures, rows, seeds, out):
    for d in range(signatures.shape[0]):
        for band in range(seeds.shape[0]):
            key = seeds[band]
            for j in range(band * rows, (band + 1) * rows):
                key = _fmix64((key ^ np.uint64(signatures[d, j])) * _GOLDEN)
            out[d, band] = key


def band_keys(signatures: np.ndarray, rows: int, seeds: np.ndarray) -> np.ndarray:
    """``(documents, len(seeds))`` uint64: band ``i``'s key starts at ``seeds[i]`` and takes in
    each of its ``rows`` signature values v in order as key = fmix64((key ^ v) * G)
    (pipeline.dedup.minhash)."""
    out = np.empty((signatures.shape[0], len(seeds)), np.uint64)
    _band_keys(np.ascontiguousarray(signatures), np.int64(rows), np.ascontiguousarray(seeds, np.uint64), out)
    return out


@numba.njit(cache=True, nogil=True)
def _gather_ranges(source, starts, offsets, out):
    for i in range(starts.shape[0]):
        lo, start = offsets[i], starts[i]
        for j in range(offsets[i + 1] - lo):
            out[lo + j] = source[start + j]


def gather_ranges(source: np.ndarray, starts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``source[starts[i] : starts[i] + offsets[i + 1] - offsets[i]]`` for each ``i``, one after
    the other (uint64): the shingle sets a hop asks of a sets file (pipeline.dedup.lsh.read_sets),
    copied from the mapped file range by range, with no index array of every value."""
    out = np.empty(int(offsets[-1]), np.uint64)
    _gather_ranges(source, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(offsets, np.int64), out)
    return out


def _table_size(items: int) -> int:
    """Slots of an open-addressing table for ``items`` entries: a power of two, at most three
    quarters full."""
    return 1 << max(4, int(max(items, 1) * 4 // 3).bit_length())


@numba.njit(cache=True, nogil=True)
def _group_buckets(band, key, doc, slots, row_bucket, first_row, count, smallest):
    """Each row's bucket (its band and key), numbered in order of first appearance; per bucket its
    first row, size and smallest document. Returns the number of buckets."""
    mask = np.uint64(slots.shape[0] - 1)
    buckets = 0
    for i in range(key.shape[0]):
        k, b = key[i], band[i]
        slot = _fmix64(k ^ (np.uint64(b + 2) * _GOLDEN)) & mask
        while True:
            found = slots[slot]
            if found < 0:
                slots[slot] = buckets
                first_row[buckets] = i
                count[buckets] = 1
                smallest[buckets] = doc[i]
                row_bucket[i] = buckets
                buckets += 1
                break
            r = first_row[found]
            if key[r] == k and band[r] == b:
                count[found] += 1
                if doc[i] < smallest[found]:
                    smallest[found] = doc[i]
                row_bucket[i] = found
                break
            slot = (slot + np.uint64(1)) & mask
    return buckets


@numba.njit(cache=True, nogil=True)
def _bucket_pairs(band, doc, row_bucket, first_row, count, smallest, all_pairs, exact_band, a, b, exact):
    """The raw pairs of the buckets (with repeats): a star on the smallest document for the exact
    band's buckets (and the URL band's) and those over ``all_pairs`` documents, every pair for the others; the smaller
    document first. Returns how many."""
    n = 0
    buckets = count.shape[0]
    start = np.zeros(buckets + 1, np.int64)  # members of the all-pairs buckets, placed by bucket
    for g in range(buckets):
        small = count[g] >= 2 and count[g] <= all_pairs and band[first_row[g]] > exact_band
        start[g + 1] = start[g] + (count[g] if small else 0)
    members = np.empty(start[buckets], np.int64)
    placed = start[:-1].copy()
    for i in range(doc.shape[0]):
        g = row_bucket[i]
        c = count[g]
        if c < 2:
            continue
        if band[i] <= exact_band or c > all_pairs:
            if doc[i] != smallest[g]:
                a[n], b[n], exact[n] = smallest[g], doc[i], band[i] <= exact_band
                n += 1
        else:
            members[placed[g]] = doc[i]
            placed[g] += 1
    for g in range(buckets):
        for x in range(start[g], start[g + 1]):
            for y in range(x + 1, start[g + 1]):
                u, v = members[x], members[y]
                if u != v:
                    a[n], b[n], exact[n] = min(u, v), max(u, v), False
                    n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _distinct_pairs(a, b, exact, slots, keep):
    """The first row of each distinct pair (in ``keep``), its ``exact`` the OR of its repeats';
    returns how many."""
    mask = np.uint64(slots.shape[0] - 1)
    n = 0
    for i in range(a.shape[0]):
        slot = _fmix64(np.uint64(a[i]) * _GOLDEN ^ np.uint64(b[i])) & mask
        while True:
            found = slots[slot]
            if found < 0:
                slots[slot] = i
                keep[n] = i
                n += 1
                break
            if a[found] == a[i] and b[found] == b[i]:
                exact[found] |= exact[i]
                break
            slot = (slot + np.uint64(1)) & mask
    return n


def bucket_pairs(
    band: np.ndarray, key: np.ndarray, doc: np.ndarray, all_pairs: int, exact_band: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(doc_a, doc_b, exact)``, one row per distinct pair of documents that share a bucket (rows
    of one ``band`` and ``key``), ``doc_a < doc_b``, in no particular order: each member of the
    ``exact_band``'s buckets (and those of the bands below it: the URL's) and of buckets over
    ``all_pairs`` documents with the bucket's smallest document, every pair of the other buckets;
    ``exact`` when any bucket of the pair is such a band's (pipeline.dedup.lsh.candidate_pairs).
    Rows may come in any order: the buckets are found with a hash table, where sorting 4.4 million
    rows by band and key took most of the step."""
    band = np.ascontiguousarray(band, np.int16)
    key = np.ascontiguousarray(key, np.uint64)
    doc = np.ascontiguousarray(doc, np.int64)
    n = len(key)
    if n >= 1 << 31:
        raise ValueError(f"{n} band-key rows in one partition: more than 2^31; raise dedup.partitions")
    row_bucket = np.empty(n, np.int32)
    first_row, count, smallest = np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.int64)
    slots = np.full(_table_size(n), -1, np.int32)
    buckets = _group_buckets(band, key, doc, slots, row_bucket, first_row, count, smallest)
    del slots
    first_row, count, smallest = first_row[:buckets], count[:buckets], smallest[:buckets]
    shared = count >= 2
    in_buckets = count[shared].astype(np.int64)
    small = (in_buckets <= all_pairs) & (band[first_row[shared]] > exact_band)
    most = int((in_buckets[~small] - 1).sum() + (in_buckets[small] * (in_buckets[small] - 1) // 2).sum())
    a, b, exact = np.empty(most, np.int64), np.empty(most, np.int64), np.empty(most, np.bool_)
    raw = _bucket_pairs(band, doc, row_bucket, first_row, count, smallest, all_pairs, exact_band, a, b, exact)
    a, b, exact = a[:raw], b[:raw], exact[:raw]
    keep = np.empty(raw, np.int64)
    slots = np.full(_table_size(raw), -1, np.int64 if raw >= 1 << 31 else np.int32)
    distinct = _distinct_pairs(a, b, exact, slots, keep)
    keep = keep[:distinct]
    return a[keep], b[keep], exact[keep]


@numba.njit(cache=True, nogil=True)
def _pair_jaccard(left_values, left_offsets, right_values, right_offsets, left, right, out):
    for i in range(left.shape[0]):
        a, a_end = left_offsets[left[i]], left_offsets[left[i] + 1]
        b, b_end = right_offsets[right[i]], right_offsets[right[i] + 1]
        union = (a_end - a) + (b_end - b)
        shared = 0
        while a < a_end and b < b_end:  # a merge without a branch per step
            x, y = left_values[a], right_values[b]
            shared += x == y
            a += x <= y
            b += y <= x
        union -= shared
        out[i] = shared / union if union > 0 else 0.0


def pair_jaccard(
    values: np.ndarray,
    offsets: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    right_values: np.ndarray | None = None,
    right_offsets: np.ndarray | None = None,
) -> np.ndarray:
    """float64 per pair: |A n B| / |A u B| of sets ``left[i]`` and ``right[i]`` (set ``k`` is
    ``values[offsets[k]:offsets[k + 1]]``, sorted and distinct; the right sets from
    ``right_values, right_offsets`` where given, of the same dtype), 0 for two empty sets; one
    merge of the two sets per pair (pipeline.dedup.clusters.jaccard_of_pairs)."""
    left = np.ascontiguousarray(left, dtype=np.int64)
    out = np.empty(len(left), np.float64)
    values = np.ascontiguousarray(values)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if right_values is None or right_offsets is None:
        right_values, right_offsets = values, offsets
    else:
        right_values = np.ascontiguousarray(right_values, dtype=values.dtype)
        right_offsets = np.ascontiguousarray(right_offsets, dtype=np.int64)
    _pair_jaccard(values, offsets, right_values, right_offsets, left, np.ascontiguousarray(right, dtype=np.int64), out)
    return out


# Code point table values of pipeline.dedup.normalize's preparation: >= 0 is an entry of the pool
# of prepared forms; these two are not.
UNKNOWN = -1  # not looked at yet
IN_CONTEXT = -2  # what it becomes depends on its neighbours: the document is prepared in Python
UNKNOWN_LENGTH = -2  # prepared_lengths' length of a document that holds a code point not yet learned


@numba.njit(cache=True, nogil=True, inline="always")
def _code_point(data, i, stop):
    """``(code point, bytes)`` of the UTF-8 sequence at ``data[i]`` (a byte >= 0x80), or
    ``(-1, 1)`` where it is not a valid one (a stray or missing continuation byte, an overlong
    form, a surrogate, past U+10FFFF)."""
    lead = np.int64(data[i])
    if lead < 0xC2:
        return -1, 1
    if lead < 0xE0:
        n, cp, least = 2, lead & 0x1F, 0x80
    elif lead < 0xF0:
        n, cp, least = 3, lead & 0x0F, 0x800
    elif lead < 0xF5:
        n, cp, least = 4, lead & 0x07, 0x10000
    else:
        return -1, 1
    if i + n > stop:
        return -1, 1
    for k in range(1, n):
        byte = np.int64(data[i + k])
        if byte & 0xC0 != 0x80:
            return -1, 1
        cp = (cp << 6) | (byte & 0x3F)
    if cp < least or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
        return -1, 1
    return cp, n


_HIGH_BITS = np.uint64(0x8080808080808080)  # the lead bit of each of 8 bytes: none set, all ASCII


@numba.njit(cache=True, nogil=True)
def _prepared_lengths(data, words8, offsets, table, pool_offsets, rows, lengths, unknown):
    """The lengths of documents ``rows``; returns how many code points it wrote to ``unknown``.
    ``words8`` is ``data`` read 8 bytes at a time: 8 ASCII bytes at a multiple of 8 are counted at
    once."""
    n = 0
    for d in rows:
        i, stop = offsets[d], offsets[d + 1]
        length = 0
        learn = False
        while i < stop:
            if i & 7 == 0 and i + 8 <= stop and words8[i >> 3] & _HIGH_BITS == 0:
                length += 8
                i += 8
                continue
            if data[i] < 0x80:
                length += 1
                i += 1
                continue
            cp, size = _code_point(data, i, stop)
            entry = table[cp] if cp >= 0 else IN_CONTEXT
            # Unknown, or learned by another thread since the caller took the pool: to learn. The
            # rest of the document is read for the others it holds.
            if entry == UNKNOWN or entry >= pool_offsets.shape[0] - 1:
                unknown[n] = cp
                n += 1
                learn = True
            elif entry < 0:
                length = -1
                break
            else:
                length += pool_offsets[entry + 1] - pool_offsets[entry]
            i += size
        lengths[d] = length if length < 0 or not learn else UNKNOWN_LENGTH
    return n


@numba.njit(cache=True, nogil=True)
def _fill_prepared(data, offsets, table, pool, pool_offsets, lower, out, out_offsets, own, own_offsets, own_rows):
    k = 0  # the next of the documents prepared elsewhere
    for d in range(offsets.shape[0] - 1):
        at = out_offsets[d]
        if k < own_rows.shape[0] and own_rows[k] == d:
            for j in range(own_offsets[k], own_offsets[k + 1]):
                out[at] = own[j]
                at += 1
            k += 1
            continue
        i, stop = offsets[d], offsets[d + 1]
        while i < stop:
            byte = data[i]
            if byte < 0x80:
                out[at] = lower[byte]
                at += 1
                i += 1
                continue
            cp, size = _code_point(data, i, stop)
            entry = table[cp]
            for j in range(pool_offsets[entry], pool_offsets[entry + 1]):
                out[at] = pool[j]
                at += 1
            i += size


@numba.njit(cache=True, nogil=True)
def _prepared_word_hashes(
    data, offsets, table, pool, pool_offsets, lower, in_word, powers, own, own_offsets, own_rows, raw, doc_offsets
):
    """:func:`_fill_prepared` and :func:`_raw_word_hashes` in one pass: each prepared byte goes
    into the running word as it is made, never to memory. Returns the words found and the
    documents with a word longer than the power table (their hashes are wrong; their count and
    places are right)."""
    n = 0
    long_docs = []
    k = 0  # the next of the documents prepared elsewhere
    for d in range(offsets.shape[0] - 1):
        h = np.uint64(0)
        j = np.uint64(0)
        prev = np.uint64(0)
        longest = np.uint64(0)
        if k < own_rows.shape[0] and own_rows[k] == d:
            for i in range(own_offsets[k], own_offsets[k + 1]):
                h, j, prev, n, longest = _word_byte(own[i], h, j, prev, n, longest, raw, in_word, powers)
            k += 1
        else:
            i, stop = offsets[d], offsets[d + 1]
            while i < stop:
                byte = data[i]
                if byte < 0x80:
                    h, j, prev, n, longest = _word_byte(lower[byte], h, j, prev, n, longest, raw, in_word, powers)
                    i += 1
                    continue
                cp, size = _code_point(data, i, stop)
                entry = table[cp]
                for e in range(pool_offsets[entry], pool_offsets[entry + 1]):
                    h, j, prev, n, longest = _word_byte(pool[e], h, j, prev, n, longest, raw, in_word, powers)
                i += size
        n, too_long = _end_words(h, j, prev, n, longest, raw)
        doc_offsets[d + 1] = n
        if too_long:
            long_docs.append(d)
    return n, long_docs


def prepared_word_hashes(
    data: np.ndarray,
    offsets: np.ndarray,
    table: np.ndarray,
    pool: np.ndarray,
    pool_offsets: np.ndarray,
    lower: np.ndarray,
    in_word: np.ndarray,
    prepared_bytes: int,
    own: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(hashes, doc_offsets, long_docs)``: :func:`word_hashes` of what :func:`fill_prepared`
    would write (``prepared_bytes`` of it in all), without writing it; ``long_docs`` are the
    documents with a word longer than 64 bytes, whose hashes the caller replaces (their number
    and places are right)."""
    docs = len(offsets) - 1
    rows, own_data, own_offsets = own
    raw = np.empty((prepared_bytes + docs) // 2 + docs + 1, np.uint64)
    doc_offsets = np.zeros(docs + 1, np.int64)
    n, long_docs = _prepared_word_hashes(
        data,
        np.ascontiguousarray(offsets, dtype=np.int64),
        table,
        pool,
        pool_offsets,
        lower,
        np.ascontiguousarray(in_word, dtype=np.uint8),
        _POWER_TABLE,
        own_data,
        own_offsets,
        rows,
        raw,
        doc_offsets,
    )
    _finish(raw, n)
    return raw[:n].copy(), doc_offsets, np.asarray(long_docs, np.int64)


def prepared_lengths(
    data: np.ndarray, offsets: np.ndarray, table: np.ndarray, pool_offsets: np.ndarray, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths, unknown)``: int64 per document (of ``rows``, by default all; the others' -1):
    the bytes of its prepared text, each ASCII byte one and each other code point its entry's in
    the pool (``pool_offsets``), or -1 where a code point is :data:`IN_CONTEXT` or the bytes are
    not valid UTF-8, or :data:`UNKNOWN_LENGTH` where a code point is :data:`UNKNOWN` (to measure
    again once learned); ``unknown`` the distinct code points found :data:`UNKNOWN`, sorted."""
    docs = len(offsets) - 1
    rows = np.arange(docs, dtype=np.int64) if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    lengths = np.full(docs, -1, np.int64)
    unknown = np.empty(len(data) // 2 + 1, np.int64)  # a non-ASCII code point takes two bytes or more
    words8 = data[: len(data) // 8 * 8].view(np.uint64)
    n = _prepared_lengths(data, words8, offsets, table, pool_offsets, rows, lengths, unknown)
    return lengths, np.unique(unknown[:n])


def fill_prepared(
    data: np.ndarray,
    offsets: np.ndarray,
    table: np.ndarray,
    pool: np.ndarray,
    pool_offsets: np.ndarray,
    lower: np.ndarray,
    out_offsets: np.ndarray,
    own: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """The prepared texts' bytes (``out_offsets`` from :func:`prepared_lengths`): each ASCII byte
    through ``lower`` (256 entries), each other code point its pool entry; the documents of
    ``own = (rows, bytes, offsets)`` (rows sorted) are those bytes instead."""
    out = np.empty(int(out_offsets[-1]), np.uint8)
    rows, own_data, own_offsets = own
    _fill_prepared(data, offsets, table, pool, pool_offsets, lower, out, out_offsets, own_data, own_offsets, rows)
    return out
