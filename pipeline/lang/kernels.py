"""fastText's prediction for a quantized supervised model (``lid.176.ftz``), compiled with numba.

The same arithmetic as fastText 0.9's C++ (``Dictionary::getLine``, ``QuantMatrix::
averageRowsToVector``, ``HierarchicalSoftmaxLoss::dfs``), step for step in float32, so the labels
and scores are fastText's own, bit for bit; what it leaves out is fastText's per-word and
per-n-gram string building and its hash-map look-ups of pruned n-gram buckets (a dense table
here), which made language ID most of the filter benchmark's time. Only the models it can
reproduce are read (:func:`read_model`: quantized input, dense output, hierarchical softmax, no
word n-grams); :class:`pipeline.lang.LanguageIdentifier` uses fastText itself for the others,
and also when a check of a few texts against fastText differs.

The text of a document is read as fastText's Python binding reads one line: words split at
``" \\n\\r\\t\\v\\f\\0"``, an end-of-sentence token ``</s>`` after the last, and nothing after a
word that is itself ``</s>``.

Compiled on first use and cached next to this file (``cache=True``), as
:mod:`pipeline.filters.kernels` are.
"""

from __future__ import annotations

import math
import mmap
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

FASTTEXT_MAGIC = 793712314
KSUB = 256  # centroids per sub-quantizer (8-bit codes)
LOSS_HS = 1
MODEL_SUPERVISED = 3
# The words whose input rows a batch keeps (a table of twice as many slots), and the rows it keeps
# in all: 10 MiB (pages only where used).
CACHE_SLOTS = 1 << 17
CACHE_ROWS = 1 << 21


class Model(NamedTuple):
    """The arrays of a quantized supervised fastText model that prediction reads."""

    minn: int
    maxn: int
    bucket: int
    nwords: int
    words: np.ndarray  # uint8, every word of the dictionary (labels too) back to back
    word_offsets: np.ndarray  # int64, len(words) + 1
    word_types: np.ndarray  # int8: 0 word, 1 label
    labels: list[str]  # the labels in the model's order
    pruned: np.ndarray  # int32 per n-gram bucket: its input row after nwords, -1 pruned away
    codes: np.ndarray  # uint8 [rows, nsubq]
    norms: np.ndarray  # float32 per row
    centroids: np.ndarray  # float32 [dim * KSUB]
    dsub: int
    lastdsub: int
    output: np.ndarray  # float32 [labels, dim]: row k, the tree's inner node labels + k
    left: np.ndarray  # int32 per tree node, -1 at a leaf
    right: np.ndarray


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, dtype, count: int = 1) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos).copy()  # the file closes
        self.pos += out.nbytes
        return out

    def one(self, dtype):
        return self.take(dtype)[0].item()


def read_model(path: Path | str) -> Model | None:
    """The arrays of the fastText model at ``path``, or None when it is not one this module
    predicts as fastText does (see the module docstring)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            return _read(_Reader(data))
        except (ValueError, IndexError):  # a file shorter than its header says: fastText's to judge
            return None


def _read(r: _Reader) -> Model | None:
    if r.one(np.int32) != FASTTEXT_MAGIC or r.one(np.int32) != 12:
        return None
    dim, _ws, _epoch, _min_count, _neg, word_ngrams, loss, model, bucket, minn, maxn, _lr_update = r.take(np.int32, 12)
    r.one(np.float64)
    if loss != LOSS_HS or model != MODEL_SUPERVISED or word_ngrams > 1 or maxn <= 0:
        return None
    size, nwords, nlabels = r.take(np.int32, 3).tolist()
    r.one(np.int64)  # tokens
    prune_size = r.one(np.int64)
    words, offsets, types, counts = bytearray(), [0], [], []
    for _ in range(size):
        end = r.data.find(b"\0", r.pos)
        words += r.data[r.pos : end]
        offsets.append(len(words))
        r.pos = end + 1
        counts.append(r.one(np.int64))
        types.append(r.one(np.int8))
    pairs = r.take(np.int32, 2 * max(prune_size, 0)).reshape(-1, 2)
    if prune_size < 0:  # not pruned: every bucket is its own row
        pruned = np.arange(bucket, dtype=np.int32)
    else:
        pruned = np.full(bucket, -1, dtype=np.int32)
        pruned[pairs[:, 0]] = pairs[:, 1]
    if not r.one(np.bool_):  # a dense input matrix: fastText's own prediction is used
        return None
    qnorm = r.one(np.bool_)
    rows, cols = r.take(np.int64, 2).tolist()
    codesize = r.one(np.int32)
    codes = r.take(np.uint8, codesize)
    pq_dim, nsubq, dsub, lastdsub = r.take(np.int32, 4).tolist()
    centroids = r.take(np.float32, pq_dim * KSUB)
    norms = np.ones(rows, dtype=np.float32)
    if qnorm:  # each row's norm, quantized on its own (``QuantMatrix::addRowToVector``)
        norm_codes = r.take(np.uint8, rows)
        _, _, norm_dsub, norm_lastdsub = r.take(np.int32, 4).tolist()
        norm_centroids = r.take(np.float32, KSUB * 1)
        if norm_dsub != 1 or norm_lastdsub != 1:
            return None
        norms = norm_centroids[norm_codes.astype(np.int64)]
    if cols != dim or pq_dim != dim or codesize != rows * nsubq:
        return None
    if r.one(np.bool_):  # a quantized output matrix
        return None
    out_rows, out_cols = r.take(np.int64, 2).tolist()
    output = r.take(np.float32, out_rows * out_cols).reshape(out_rows, out_cols)
    word_bytes = np.frombuffer(bytes(words), dtype=np.uint8)
    offsets = np.array(offsets, dtype=np.int64)
    labels = [word_bytes[offsets[i] : offsets[i + 1]].tobytes().decode() for i in range(nwords, size)]
    left, right = _tree(counts[nwords:])  # the labels' counts shape the tree
    if out_rows != nlabels or out_cols != dim:
        return None
    return Model(
        int(minn), int(maxn), int(bucket), nwords, word_bytes, offsets, np.array(types, dtype=np.int8), labels,
        pruned, codes.reshape(rows, nsubq), norms, centroids, dsub, lastdsub, np.ascontiguousarray(output), left, right,
    )  # fmt: skip


def _tree(counts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``HierarchicalSoftmaxLoss::buildTree``: the Huffman tree of the labels (leaves first,
    sorted by falling count), each node's children."""
    osz = len(counts)
    count = [*counts, *[10**15] * (osz - 1)]
    left = np.full(2 * osz - 1, -1, dtype=np.int32)
    right = np.full(2 * osz - 1, -1, dtype=np.int32)
    leaf, node = osz - 1, osz
    for i in range(osz, 2 * osz - 1):
        mini = [0, 0]
        for j in range(2):
            if leaf >= 0 and count[leaf] < count[node]:
                mini[j], leaf = leaf, leaf - 1
            else:
                mini[j], node = node, node + 1
        left[i], right[i] = mini
        count[i] = count[mini[0]] + count[mini[1]]
    return left, right


# ---------------------------------------------------------------------------------------------
# Compiled


@numba.njit(cache=True, nogil=True, inline="always")
def _step(h, byte):
    """One byte of fastText's FNV-1a hash, the byte read as a signed char."""
    signed = np.int32(byte) - 256 if byte >= 128 else np.int32(byte)
    return np.uint32((h ^ np.uint32(signed & 0xFFFFFFFF)) * np.uint32(16777619))


@numba.njit(cache=True, nogil=True, inline="always")
def _is_space(byte):
    return byte == 32 or byte == 10 or byte == 13 or byte == 9 or byte == 11 or byte == 12 or byte == 0


@numba.njit(cache=True, nogil=True, inline="always")
def _byte(data, start, length, i):
    """Byte ``i`` of ``"<" + data[start:start + length] + ">"``."""
    if i == 0:
        return np.uint8(60)
    if i == length + 1:
        return np.uint8(62)
    return data[start + i - 1]


@numba.njit(cache=True, nogil=True, inline="always")
def _mod(h, bucket):
    """``h % bucket`` by a float64 multiply and one correction, not an integer division (the
    quotient of a 32-bit ``h`` is off by at most one)."""
    x = np.int64(h)
    r = x - np.int64(np.float64(x) * (1.0 / bucket)) * bucket
    if r < 0:
        r += bucket
    elif r >= bucket:
        r -= bucket
    return r


@numba.njit(cache=True, nogil=True, inline="always")
def _kept_row(pruned, b):
    """The input row (after the words) of n-gram bucket ``b``, -1 when pruning dropped it: a bit
    per bucket, the kept ones counted per 64 (:func:`prune_index`), so the look-up reads about
    0.5 MiB of tables where a row per bucket would read 8 MiB."""
    bits, ranks, rows = pruned
    word = bits[b >> 6]
    bit = np.uint64(1) << np.uint64(b & 63)
    if not word & bit:
        return -1
    below = word & (bit - np.uint64(1))
    return rows[ranks[b >> 6] + _popcount(below)]


@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, nogil=True)
def _subwords(data, start, length, minn, maxn, bucket, pruned, nwords, out, n_out):
    """``Dictionary::computeSubwords`` of ``"<" + word + ">"``: the input rows of its character
    n-grams, written to ``out`` from ``n_out``; the new count."""
    size = length + 2
    for i in range(size):
        if (_byte(data, start, length, i) & 0xC0) == 0x80:
            continue
        h = np.uint32(2166136261)
        j = i
        n = 1
        while j < size and n <= maxn:
            h = _step(h, _byte(data, start, length, j))
            j += 1
            while j < size and (_byte(data, start, length, j) & 0xC0) == 0x80:
                h = _step(h, _byte(data, start, length, j))
                j += 1
            if n >= minn and not (n == 1 and (i == 0 or j == size)):
                row = _kept_row(pruned, _mod(h, bucket))
                if row >= 0:
                    out[n_out] = nwords + row
                    n_out += 1
            n += 1
    return n_out


@numba.njit(cache=True, nogil=True)
def _hash(data, start, end):
    h = np.uint32(2166136261)
    for i in range(start, end):
        h = _step(h, data[i])
    return h


@numba.njit(cache=True, nogil=True)
def build_vocabulary(words, offsets, minn, maxn, bucket, pruned, nwords):
    """A hash table of the dictionary's words (slot -> word, -1 free; size a power of two) and
    each word's input rows (itself, then its n-grams; ``</s>`` none), as offsets and rows."""
    size = len(offsets) - 1
    slots = 1
    while slots < 2 * size:
        slots *= 2
    table = np.full(slots, -1, dtype=np.int32)
    for w in range(size):
        s = np.int64(_hash(words, offsets[w], offsets[w + 1]) & np.uint32(slots - 1))
        while table[s] != -1:
            s = (s + 1) & (slots - 1)
        table[s] = w
    row_offsets = np.zeros(size + 1, dtype=np.int64)
    rows = np.empty(16, dtype=np.int32)
    n = 0
    scratch = np.empty(4 * maxn * (np.max(offsets[1:] - offsets[:-1]) + 2) + 1, dtype=np.int32)
    for w in range(size):
        start, length = offsets[w], offsets[w + 1] - offsets[w]
        count = 1
        scratch[0] = w
        if not _equals(words, start, length, EOS_BYTES):
            count = _subwords(words, start, length, minn, maxn, bucket, pruned, nwords, scratch, 1)
        while n + count > len(rows):
            grown = np.empty(2 * len(rows), dtype=np.int32)
            grown[:n] = rows[:n]
            rows = grown
        rows[n : n + count] = scratch[:count]
        n += count
        row_offsets[w + 1] = n
    return table, row_offsets, rows[:n].copy()


EOS_BYTES = np.frombuffer(b"</s>", dtype=np.uint8)  # the end-of-sentence token
LABEL_BYTES = np.frombuffer(b"__label__", dtype=np.uint8)  # a word that begins so is a label


@numba.njit(cache=True, nogil=True, inline="always")
def _equals(data, start, length, word):
    if length != len(word):
        return False
    for i in range(length):
        if data[start + i] != word[i]:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _starts_with(data, start, length, prefix):
    if length < len(prefix):
        return False
    for i in range(len(prefix)):
        if data[start + i] != prefix[i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _find(data, start, end, h, words, offsets, table):
    """The dictionary index of ``data[start:end]`` (hash ``h``), -1 when it is not a word of the
    dictionary."""
    mask = len(table) - 1
    s = np.int64(h & np.uint32(mask))
    while table[s] != -1:
        w = table[s]
        if _equals(data, start, end - start, words[offsets[w] : offsets[w + 1]]):
            return w
        s = (s + 1) & mask
    return -1


@numba.njit(cache=True, nogil=True, inline="always")
def _add_row(hidden, vectors, row):
    for n in range(hidden.shape[0]):
        hidden[n] += vectors[row, n]


@numba.njit(cache=True, nogil=True)
def _cached(slots, words, data, start, end, h):
    """The cache entry of the word ``data[start:end]`` (hash ``h``), -1 when it has none. A slot
    holds the word's hash (high 32 bits) and its entry, so a probe compares bytes only where
    the hashes agree."""
    mask = len(slots) - 1
    s = np.int64((h ^ (h >> np.uint32(15))) & np.uint32(mask))
    key = np.int64(h) << 32
    while slots[s] != -1:
        slot = slots[s]
        if slot & np.int64(-4294967296) == key:
            e = slot & np.int64(0xFFFFFFFF)
            if _equals(data, start, end - start, data[words[e, 0] : words[e, 1]]):
                return e
        s = (s + 1) & mask
    return -1


@numba.njit(cache=True, nogil=True)
def _remember(cache, data, start, end, h, rows, n):
    """Keep the input rows ``rows[:n]`` of the word ``data[start:end]`` in ``cache`` while it has
    room (a batch's words past that are looked up each time, as fastText does every word); the
    entry, -1 when there was none. The rows are the same whichever way they are found, so the
    sums are too."""
    slots, words, cached, used = cache
    e = used[0]
    if e >= len(words) or used[1] + n > len(cached):
        return -1
    mask = len(slots) - 1
    s = np.int64((h ^ (h >> np.uint32(15))) & np.uint32(mask))
    while slots[s] != -1:
        s = (s + 1) & mask
    slots[s] = (np.int64(h) << 32) | e
    words[e, 0], words[e, 1], words[e, 2], words[e, 3] = start, end, used[1], used[1] + n
    cached[used[1] : used[1] + n] = rows[:n]
    used[0] += 1
    used[1] += n
    return e


@numba.njit(cache=True, nogil=True)
def _word_rows(data, start, end, h, vocab, out):
    """The input rows of one word (``Dictionary::getLine``: a dictionary word's own and its
    n-grams', a word out of it its n-grams', none for a label or ``</s>`` out of the
    dictionary), written to ``out``; their count."""
    words, offsets, types, table, row_offsets, rows, minn, maxn, bucket, pruned, nwords, vectors, eos = vocab
    w = _find(data, start, end, h, words, offsets, table)
    if w >= 0:
        if types[w] != 0:
            return 0
        n = row_offsets[w + 1] - row_offsets[w]
        out[:n] = rows[row_offsets[w] : row_offsets[w + 1]]
        return n
    if _starts_with(data, start, end - start, LABEL_BYTES) or _equals(data, start, end - start, EOS_BYTES):
        return 0
    return _subwords(data, start, end - start, minn, maxn, bucket, pruned, nwords, out, 0)


@numba.njit(cache=True, nogil=True)
def _hidden(data, start, end, vocab, hidden, scratch, cache):
    """``averageRowsToVector`` over the input rows of one line (``Dictionary::getLine``); the
    number of rows. Each word's rows are kept in ``cache`` for the next time it comes
    (:func:`_remember`)."""
    rows, types, row_offsets, vectors, eos = vocab[5], vocab[2], vocab[4], vocab[11], vocab[12]
    slots, words, cached, used = cache
    hidden[:] = np.float32(0.0)
    count = 0
    pos = start
    while True:
        while pos < end and _is_space(data[pos]):
            pos += 1
        if pos >= end:  # the binding's closing newline: the end-of-sentence token
            if eos >= 0 and types[eos] == 0:
                for k in range(row_offsets[eos], row_offsets[eos + 1]):
                    _add_row(hidden, vectors, rows[k])
                    count += 1
            break
        token = pos
        while pos < end and not _is_space(data[pos]):
            pos += 1
        h = _hash(data, token, pos)
        e = _cached(slots, words, data, token, pos, h)
        if e >= 0:
            for k in range(words[e, 2], words[e, 3]):
                _add_row(hidden, vectors, cached[k])
            count += words[e, 3] - words[e, 2]
        else:
            n = _word_rows(data, token, pos, h, vocab, scratch)
            for k in range(n):
                _add_row(hidden, vectors, scratch[k])
            count += n
            _remember(cache, data, token, pos, h, scratch, n)
        if pos - token == len(EOS_BYTES) and _equals(data, token, pos - token, EOS_BYTES):
            break
    if count:
        scale = np.float32(1.0 / count)
        for i in range(len(hidden)):
            hidden[i] *= scale
    return count


@numba.njit(cache=True, nogil=True, inline="always")
def _std_log(x):
    return np.float32(math.log(np.float64(np.float32(x)) + 1e-5))


@numba.njit(cache=True, nogil=True)
def _best(hidden, output, left, right, stack_node, stack_score):
    """``HierarchicalSoftmaxLoss::dfs`` with k = 1 and threshold 0: the best leaf and its
    log-probability (a leaf at least as good as the best so far replaces it, as fastText's heap
    does)."""
    osz = (len(left) + 1) // 2
    floor = _std_log(np.float32(0.0))
    best, best_score = -1, np.float32(0.0)
    top = 0
    stack_node[0] = 2 * osz - 2
    stack_score[0] = np.float32(0.0)
    top = 1
    while top:
        top -= 1
        node, score = stack_node[top], stack_score[top]
        if score < floor or (best >= 0 and score < best_score):
            continue
        if left[node] == -1 and right[node] == -1:
            best, best_score = node, score
            continue
        d = np.float32(0.0)
        for j in range(output.shape[1]):
            d += output[node - osz, j] * hidden[j]
        f = np.float32(1.0 / np.float64(np.float32(1.0) + np.float32(math.exp(-d))))
        stack_node[top], stack_score[top] = right[node], score + _std_log(np.float64(f))
        stack_node[top + 1], stack_score[top + 1] = left[node], score + _std_log(1.0 - np.float64(f))
        top += 2
    return best, best_score


@numba.njit(cache=True, nogil=True)
def predict(data, offsets, index, vocab, output, left, right, dim, longest_word):
    """The best label (-1: no input rows) and its probability of each text ``index[i]`` of the
    UTF-8 ``data`` at ``offsets``."""
    n = len(index)
    labels = np.full(n, -1, dtype=np.int32)
    scores = np.zeros(n, dtype=np.float32)
    hidden = np.zeros(dim, dtype=np.float32)
    scratch = np.empty(vocab[7] * (longest_word + 2) + 1, dtype=np.int32)  # maxn n-grams a position
    stack_node = np.empty(len(left) + 1, dtype=np.int32)
    stack_score = np.empty(len(left) + 1, dtype=np.float32)
    cache = (
        np.full(CACHE_SLOTS, -1, dtype=np.int64),  # hash << 32 | entry
        np.empty((CACHE_SLOTS // 2, 4), dtype=np.int64),  # per entry: the word's bytes, its rows in cached
        np.empty(CACHE_ROWS, dtype=np.int32),
        np.zeros(2, dtype=np.int64),  # entries, rows used
    )
    for i in range(n):
        doc = index[i]
        if _hidden(data, offsets[doc], offsets[doc + 1], vocab, hidden, scratch, cache) == 0:
            continue
        best, score = _best(hidden, output, left, right, stack_node, stack_score)
        labels[i] = best
        scores[i] = np.float32(math.exp(score))
    return labels, scores


def prune_index(pruned: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kept buckets of ``pruned`` (row per bucket, -1 dropped) as :func:`_kept_row` reads
    them: a bit per bucket, the kept buckets before each 64, and their rows in bucket order."""
    kept = pruned >= 0
    padded = np.zeros(-(-len(pruned) // 64) * 64, dtype=bool)
    padded[: len(pruned)] = kept
    bits = np.packbits(padded.reshape(-1, 8)[:, ::-1]).view("<u8").copy()
    per_word = padded.reshape(-1, 64).sum(axis=1)
    ranks = np.concatenate([[0], np.cumsum(per_word)[:-1]]).astype(np.int32)
    return bits, ranks, pruned[kept].astype(np.int32)


def input_vectors(model: Model) -> np.ndarray:
    """Every input row as ``ProductQuantizer::addcode`` adds it: each sub-quantizer's centroid
    times the row's norm, in float32 (the same products, so the same sums)."""
    rows, nsubq = model.codes.shape
    dim = model.centroids.size // KSUB
    vectors = np.empty((rows, dim), dtype=np.float32)
    for m in range(nsubq):
        codes = model.codes[:, m].astype(np.int64)
        if m == nsubq - 1:
            d, base = model.lastdsub, m * KSUB * model.dsub + codes * model.lastdsub
        else:
            d, base = model.dsub, (m * KSUB + codes) * model.dsub
        for n in range(d):
            vectors[:, m * model.dsub + n] = model.norms * model.centroids[base + n]
    return vectors


class Predictor:
    """A model read by :func:`read_model`, ready to predict batches of prepared texts."""

    def __init__(self, model: Model):
        self.model = model
        m, pruned = model, prune_index(model.pruned)
        table, row_offsets, rows = build_vocabulary(m.words, m.word_offsets, m.minn, m.maxn, m.bucket, pruned, m.nwords)
        eos = _find(EOS_BYTES, 0, len(EOS_BYTES), _hash(EOS_BYTES, 0, len(EOS_BYTES)), m.words, m.word_offsets, table)
        self._vocab = (
            m.words, m.word_offsets, m.word_types, table, row_offsets, rows, m.minn, m.maxn, m.bucket, pruned,
            m.nwords, input_vectors(m), eos,
        )  # fmt: skip

    def predict(self, data: np.ndarray, offsets: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per text ``index[i]`` of ``data`` at ``offsets``: the index of its top label in
        ``model.labels`` (-1 when fastText would predict nothing) and its probability."""
        longest = int(np.diff(offsets).max()) if len(offsets) > 1 else 0  # no token is longer than its text
        m = self.model
        return predict(data, offsets, index, self._vocab, m.output, m.left, m.right, m.centroids.size // KSUB, longest)
