"""MinHash signatures and LSH bands, computed for a whole batch at once, equal to datasketch's.

Shingles are word n-grams of the normalized text (:mod:`pipeline.dedup.normalize`): ``ngram``
consecutive words (5 by default, as FineWeb's MinHash dedup uses); a document of
fewer than ``ngram`` words has one shingle made of all its words, and a document with no words has
none. Each shingle is hashed to 64 bits by one of two functions (``shingle_hash``), and the low 32
bits of that hash are the 32-bit hash the signatures permute (datasketch's hashes are 32-bit):

* ``"polynomial"`` (the default): the n-gram's 64-bit word hashes combined by Horner's rule
  (``h = h * K + word``, modulo 2^64), plus the n-gram's length, through the MurmurHash3
  finalizer, rotated by 32 bits (so the low half is the finalizer's top 32 bits). Computed in one
  compiled pass over a batch (numba), stable across library versions.
* ``"sha1"``: datasketch's default: SHA-1 of the shingle's words joined by single spaces, UTF-8
  encoded, its first 8 bytes read little-endian; the low half is
  ``datasketch.hashfunc.sha1_hash32``. One SHA-1 call per shingle in Python, which costs more
  than everything else together (see ``sha1_shingle_hashes``). Kept so that signatures can be
  checked against ``datasketch.MinHash`` shingle by shingle, and for sketches that must match ones
  made with datasketch's defaults.

Verification compares the 64-bit hashes (the signature files' shingle sets), never the 32-bit
ones: a document shorter than ``ngram`` words has one shingle, and among 100,000 such documents
two unrelated ones share its 32-bit hash about once (n^2 / 2^33), which made their sets equal
and their Jaccard similarity 1.0. With 64 bits that takes some 4 billion of them.

Signatures apply datasketch's permutations to the shingle hashes and keep each permutation's
minimum per document (:func:`minhash_signatures`), over the flat array of a batch's hashes and
the per-document offsets: compiled for affine32 (:mod:`pipeline.dedup.kernels`), with numpy
(``np.minimum.reduceat``) for legacy.
Two of datasketch's schemes (``datasketch.minhash``) are reproduced bit for bit:

* ``"affine32"`` (datasketch >= 2.0's default): the 32-bit hash is premixed with the MurmurHash3
  32-bit finalizer, then ``a * h + b`` in uint32 arithmetic (wrapping, ``a`` odd: a bijection);
  signatures are uint32.
* ``"legacy"`` (datasketch < 2.0's only scheme): ``(a * h + b) % (2**61 - 1) & (2**32 - 1)``,
  where ``a * h + b`` is computed in uint64 and wraps modulo 2^64 *before* the modulo, exactly as
  datasketch's numpy code does; signatures are uint64 holding 32-bit values.

``a`` and ``b`` are drawn as datasketch's ``MinHash._init_permutations`` draws them, from
``np.random.RandomState(seed)``, so ``minhash_signatures(...)[d]`` equals
``MinHash(num_perm, seed, scheme=...).hashvalues`` after updating it with document ``d``'s shingles
(with ``shingle_hash="sha1"``, or with an identity ``hashfunc`` over the polynomial hashes).

LSH: the signature is cut into ``bands`` bands of ``rows`` values; documents that share a band's
values are candidate duplicates, a pair of Jaccard similarity s with probability
1 - (1 - s^rows)^bands. :func:`recall_bands` chooses the layout for a recall at the threshold
(candidates are verified exactly, so only false negatives lose duplicates);
:func:`optimal_bands` chooses it as datasketch's ``MinHashLSH`` does. :func:`band_keys` hashes each
band's values to one 64-bit key.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from pipeline.dedup.normalize import Texts, Words, words
from pipeline.formats.hashing import fmix64

Scheme = Literal["affine32", "legacy"]
ShingleHash = Literal["polynomial", "sha1"]
SCHEMES = ("affine32", "legacy")
SHINGLE_HASHES = ("polynomial", "sha1")

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
MAX_HASH_32 = np.uint64((1 << 32) - 1)

_U64 = np.uint64
_SHINGLE_K = _U64(0x9FB21C651E98DF25)
_SHINGLE_SEED = _U64(0x5EED_5B1E)
_BAND_SEED = 0x5EED_BA4D

# The legacy scheme's permutations are applied to a quarter of this many shingles at a time: a
# (num_perm x that) uint64 buffer, 2 MiB at 128 permutations.
_SHINGLES_PER_STEP = 8192


@dataclass(frozen=True)
class MinHashParams:
    """Everything that decides a document's signature, band keys and the dedup's outcome.

    ``ngram`` words per shingle; ``num_perm`` permutations, drawn from ``seed``; ``threshold`` the
    Jaccard similarity from which two documents are duplicates (verified exactly on the shingle
    sets); ``bands`` x ``rows`` the LSH layout, by default :func:`recall_bands`: the layout whose
    candidate probability at ``threshold`` is at least ``recall`` (0.998) with the least
    false-positive work. Every candidate is verified by exact Jaccard, so a false positive costs
    only verification time while a false negative is a missed duplicate. At threshold 0.8 and 128
    permutations that gives 21 bands of 6 rows (candidate probability 0.998 at 0.8) instead of the
    14 x 9 (0.867) that weighting false negatives 0.9 and false positives 0.1 gave, or datasketch's
    9 x 13 (weights 0.5 and 0.5); ``benchmarks/dedup_stage.py`` measures the recall and time of
    each layout on near copies of news articles (the figures in benchmarks/README.md).
    Set ``bands`` and ``rows`` together to choose the layout yourself (``recall`` is then unused).
    ``scheme`` datasketch's permutation scheme ("affine32", datasketch 2's default, or "legacy",
    datasketch 1's); ``shingle_hash`` "polynomial" (fast) or "sha1" (datasketch's default hash).
    ``exact`` adds the exact hash of the normalized text as one more band (exact duplicates);
    ``near`` computes MinHash at all (off: exact dedup only).
    ``keep_signature`` writes the signatures into the signature files too. ``score_column`` names
    a numeric column of the documents to copy into the signature files, for the ``"quality"``
    keep rule. ``url`` adds the hash of each document's normalized URL (``pipeline.dedup.urls``)
    as one more key: documents with the same normalized URL are duplicates too (needs ``near``, whose
    shingle sets measure a URL copy's similarity with the kept document).
    """

    ngram: int = 5
    num_perm: int = 128
    seed: int = 1
    threshold: float = 0.8
    bands: int | None = None
    rows: int | None = None
    recall: float = 0.998
    scheme: Scheme = "affine32"
    shingle_hash: ShingleHash = "polynomial"
    exact: bool = True
    near: bool = True
    keep_signature: bool = False
    score_column: str | None = None
    url: bool = False

    def __post_init__(self):
        if self.ngram < 1:
            raise ValueError(f"dedup ngram must be at least 1, got {self.ngram}")
        if self.num_perm < 1:
            raise ValueError(f"dedup num_perm must be at least 1, got {self.num_perm}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"dedup threshold must be in (0, 1], got {self.threshold}")
        if self.scheme not in SCHEMES:
            raise ValueError(f"dedup scheme must be one of {', '.join(SCHEMES)}, got {self.scheme!r}")
        if self.shingle_hash not in SHINGLE_HASHES:
            raise ValueError(
                f"dedup shingle_hash must be one of {', '.join(SHINGLE_HASHES)}, got {self.shingle_hash!r}"
            )
        if (self.bands is None) != (self.rows is None):
            raise ValueError(
                "dedup bands and rows go together: set both, or neither to derive them from threshold and num_perm"
            )
        if self.bands is not None and (self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm):
            raise ValueError(
                f"dedup bands x rows ({self.bands} x {self.rows}) must be positive and "
                f"at most num_perm ({self.num_perm})"
            )
        if not 0.0 < self.recall < 1.0:
            raise ValueError(f"dedup recall must be in (0, 1), got {self.recall}")
        if self.near and self.bands is None:
            recall_bands(self.threshold, self.num_perm, self.recall)  # an unreachable recall stops here
        if not (self.exact or self.near):
            raise ValueError("dedup needs exact or near (or both) turned on")
        if self.url and not self.near:
            raise ValueError("dedup url needs near: a URL copy's similarity is measured on the shingle sets")

    @property
    def lsh(self) -> tuple[int, int]:
        """``(bands, rows)``: as given, or :func:`recall_bands` for ``threshold``, ``num_perm`` and
        ``recall``."""
        if self.bands is not None:
            return self.bands, self.rows
        return recall_bands(self.threshold, self.num_perm, self.recall)

    @property
    def candidate_probability(self) -> float:
        """The probability that a pair of Jaccard similarity ``threshold`` becomes an LSH candidate
        with this layout: ``1 - (1 - threshold^rows)^bands``."""
        return candidate_probability(self.threshold, *self.lsh)

    def to_dict(self) -> dict:
        values = asdict(self)
        values["bands"], values["rows"] = self.lsh if self.near else (None, None)
        if not self.url:  # files made without URL keys read as before the setting
            del values["url"]
        return values


# --- shingles ---------------------------------------------------------------------------------


def _shingle_layout(word_counts: np.ndarray, ngram: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per shingle: index of its first word (within the flat word array) and its word count;
    plus per-document shingle offsets."""
    counts = np.asarray(word_counts, dtype=np.int64)
    word_offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=word_offsets[1:])
    shingles = np.where(counts > 0, np.maximum(counts - ngram + 1, 1), 0)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(shingles, out=offsets[1:])
    total = int(offsets[-1])
    within = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], shingles)
    first_word = np.repeat(word_offsets[:-1], shingles) + within
    size = np.repeat(np.minimum(counts, ngram), shingles)
    return first_word, size, offsets


def polynomial_shingle_hashes(
    word_hashes: np.ndarray, word_offsets: np.ndarray, ngram: int, wide: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of every shingle from the 64-bit hashes of the words (see module docstring): the
    32-bit ones (uint32), or with ``wide`` the 64-bit ones (uint64), whose low half is the 32-bit
    hash (the finalizer's output rotated by 32 bits).

    One compiled pass over the documents (:func:`pipeline.dedup.kernels.polynomial_shingles`),
    each shingle hashed by Horner's rule over its words' hashes."""
    from pipeline.dedup.kernels import polynomial_shingles  # numba: imported by the processes that sign

    h, offsets = polynomial_shingles(word_hashes, word_offsets, ngram, _SHINGLE_SEED, _SHINGLE_K)
    if wide:
        return (h << _U64(32)) | (h >> _U64(32)), offsets
    return (h >> _U64(32)).astype(np.uint32), offsets


def sha1_shingle_hashes(found: Words, ngram: int, wide: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``datasketch.hashfunc.sha1_hash32`` of every shingle: SHA-1 of the shingle's words joined
    by single spaces, UTF-8; its first 4 bytes read little-endian (uint32), or with ``wide`` its
    first 8 (uint64, whose low half is the 32-bit hash). One SHA-1 call per shingle in Python;
    each shingle is a slice of the batch's normalized text, found with numpy."""
    first_word, size, offsets = _shingle_layout(found.counts, ngram)
    text, word_starts, word_ends = found.joined_bytes()
    view = memoryview(text)
    sha1 = hashlib.sha1
    lo = word_starts[first_word].tolist()
    hi = word_ends[first_word + size - 1].tolist()
    width = 8 if wide else 4
    digests = b"".join([sha1(view[a:b]).digest()[:width] for a, b in zip(lo, hi)])
    if wide:
        return np.frombuffer(digests, dtype="<u8").astype(np.uint64), offsets
    return np.frombuffer(digests, dtype="<u4").astype(np.uint32), offsets


def shingle_hashes(
    texts: Texts, ngram: int = 5, shingle_hash: ShingleHash = "polynomial", wide: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, offsets)``: hashes of every document's shingles, in order, flat;
    ``hashes[offsets[d]:offsets[d + 1]]`` are document ``d``'s (repeats included). uint32 (what
    the signatures permute), or with ``wide`` uint64 (what verification compares; the low half is
    the 32-bit hash, :func:`signature_hashes`)."""
    found = words(texts)
    if shingle_hash == "sha1":
        return sha1_shingle_hashes(found, ngram, wide)
    return polynomial_shingle_hashes(found.hashes, found.doc_offsets, ngram, wide)


def signature_hashes(wide: np.ndarray) -> np.ndarray:
    """The 32-bit shingle hashes (uint32) that MinHash permutes, from the 64-bit ones: their low
    halves."""
    return (np.asarray(wide, dtype=np.uint64) & MAX_HASH_32).astype(np.uint32)


def shingle_sets(hashes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes, sorted: ``(values, offsets)`` like the input
    (uint32 or uint64, as given). One compiled pass, document by document
    (:func:`pipeline.dedup.kernels.distinct_sorted`)."""
    from pipeline.dedup.kernels import distinct_sorted  # numba: imported by the processes that sign

    hashes = np.asarray(hashes)
    if hashes.dtype not in (np.uint32, np.uint64):
        raise TypeError(f"shingle hashes are uint32 or uint64, not {hashes.dtype}")
    return distinct_sorted(hashes, np.asarray(offsets, dtype=np.int64))


def polynomial_shingle_sets(
    word_hashes: np.ndarray, word_offsets: np.ndarray, ngram: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shingle_sets` of the wide :func:`polynomial_shingle_hashes`, in one compiled pass
    that hashes, sorts and makes distinct each document's shingles while they are in the cache."""
    from pipeline.dedup.kernels import polynomial_shingle_sets as sets

    return sets(word_hashes, word_offsets, ngram, _SHINGLE_SEED, _SHINGLE_K)


# --- signatures -------------------------------------------------------------------------------


def permutations(num_perm: int, seed: int = 1, scheme: Scheme = "affine32") -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` exactly as ``datasketch.MinHash(num_perm, seed, scheme=scheme)`` draws them."""
    gen = np.random.RandomState(seed)
    if scheme == "legacy":
        pairs = np.array(
            [
                (gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
                for _ in range(num_perm)
            ],
            dtype=np.uint64,
        )
        return pairs[:, 0].copy(), pairs[:, 1].copy()
    if scheme == "affine32":
        a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
        return a, b
    raise ValueError(f"unknown MinHash scheme {scheme!r}: use one of {', '.join(SCHEMES)}")


def fmix32(h: np.ndarray) -> np.ndarray:
    """The MurmurHash3 32-bit finalizer, as datasketch premixes hashes in the affine32 scheme (the
    compiled kernel's own copy is :mod:`pipeline.dedup.kernels`; the tests hold them equal)."""
    h = h.astype(np.uint32)
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x85EBCA6B)
        h = h ^ (h >> np.uint32(13))
        h = h * np.uint32(0xC2B2AE35)
        return h ^ (h >> np.uint32(16))


def _permute_legacy(h: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray, spare: np.ndarray) -> np.ndarray:
    """``(a * h + b) % (2**61 - 1) & (2**32 - 1)`` with datasketch's uint64 wrap-around.

    The modulo by the Mersenne prime p = 2^61 - 1 is a fold: x = hi * 2^61 + lo is congruent to
    r = hi + lo < 2p. Only the low 32 bits are kept, and those of r - p (when r >= p) are those of
    r + 1 since 2^61 is 0 modulo 2^32; (r + 1) >> 61 is 1 exactly when r >= p. So the result is
    the low 32 bits of r + ((r + 1) >> 61), which equal datasketch's value."""
    with np.errstate(over="ignore"):
        np.multiply(a[:, None], h.astype(np.uint64)[None, :], out=out)
        np.add(out, b[:, None], out=out)
        np.right_shift(out, _U64(61), out=spare)
        np.bitwise_and(out, MERSENNE_PRIME, out=out)
        np.add(out, spare, out=out)  # r
        np.add(out, _U64(1), out=spare)
        np.right_shift(spare, _U64(61), out=spare)
        np.add(out, spare, out=out)
        np.bitwise_and(out, MAX_HASH_32, out=out)
    return out


def minhash_signatures(
    hashes: np.ndarray, offsets: np.ndarray, num_perm: int = 128, seed: int = 1, scheme: Scheme = "affine32"
) -> np.ndarray:
    """MinHash signatures of a batch: row ``d`` is document ``d``'s, from its shingle hashes
    ``hashes[offsets[d]:offsets[d + 1]]`` (uint32; repeats allowed).

    Returns ``(documents, num_perm)``, uint32 for ``"affine32"``, uint64 for ``"legacy"``, equal
    to datasketch's ``hashvalues``. A document without shingles gets datasketch's empty value
    (all ``2**32 - 1``). affine32 runs compiled (:func:`pipeline.dedup.kernels.affine32_signatures`:
    each document's minima in registers); legacy with numpy, in fixed
    steps of a few thousand shingles. Memory stays bounded for very long documents either way."""
    a, b = permutations(num_perm, seed, scheme)
    offsets = np.asarray(offsets, dtype=np.int64)
    if scheme == "affine32":
        from pipeline.dedup.kernels import affine32_signatures  # numba: imported by the processes that sign

        return affine32_signatures(hashes, offsets, a, b)
    return _legacy_signatures(np.asarray(hashes), offsets, a, b)


def _legacy_signatures(hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`minhash_signatures` in the legacy scheme, with numpy: the permutations of a few
    thousand shingles at a time as one (permutations x shingles) block, reduced per document."""
    docs, num_perm = len(offsets) - 1, len(a)
    signatures = np.full((docs, num_perm), MAX_HASH_32, dtype=np.uint64)
    total = int(offsets[-1]) if docs else 0
    step = _SHINGLES_PER_STEP // 4
    buffer = np.empty((num_perm, min(step, max(total, 1))), dtype=np.uint64)
    spare = np.empty_like(buffer)
    for lo in range(0, total, step):
        hi = min(lo + step, total)
        # Segments: the step's start plus every document start inside the step.
        inside = offsets[np.searchsorted(offsets, lo, side="right") : np.searchsorted(offsets, hi, side="left")]
        seg_starts = np.unique(np.concatenate([[lo], inside]))
        seg_docs = np.searchsorted(offsets, seg_starts, side="right") - 1
        block = buffer[:, : hi - lo]
        _permute_legacy(hashes[lo:hi], a, b, block, spare[:, : hi - lo])
        mins = np.minimum.reduceat(block, seg_starts - lo, axis=1).T
        signatures[seg_docs] = np.minimum(signatures[seg_docs], mins)
    return signatures


# --- LSH --------------------------------------------------------------------------------------


def _gauss_legendre(lo: float, hi: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, weights = np.polynomial.legendre.leggauss(points)
    half = (hi - lo) / 2.0
    return lo + half * (nodes + 1.0), half * weights


@functools.lru_cache(maxsize=64)
def optimal_bands(
    threshold: float, num_perm: int, false_positive_weight: float = 0.5, false_negative_weight: float = 0.5
) -> tuple[int, int]:
    """``(bands, rows)`` minimizing the weighted false positive and false negative probabilities
    integrated over Jaccard similarity, as datasketch's ``lsh._optimal_param`` does.

    For a pair of similarity s, P(candidate) = 1 - (1 - s^rows)^bands. The false positive
    probability is its integral over [0, threshold], the false negative probability the integral
    of 1 - P over [threshold, 1]. Both integrands are polynomials of degree rows * bands <=
    num_perm, so Gauss-Legendre quadrature with num_perm / 2 + 1 points computes them exactly, for
    all (bands, rows) with bands * rows <= num_perm at once; ties go, as in datasketch, to the
    fewest bands, then the fewest rows."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be at least 1, got {num_perm}")
    pairs = [(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    bands = np.array([p[0] for p in pairs], dtype=np.float64)[:, None]
    rows = np.array([p[1] for p in pairs], dtype=np.float64)[:, None]
    points = num_perm // 2 + 2
    s_fp, w_fp = _gauss_legendre(0.0, threshold, points)
    s_fn, w_fn = _gauss_legendre(threshold, 1.0, points)
    false_positive = (1.0 - (1.0 - s_fp[None, :] ** rows) ** bands) @ w_fp
    false_negative = ((1.0 - s_fn[None, :] ** rows) ** bands) @ w_fn
    error = false_positive * false_positive_weight + false_negative * false_negative_weight
    return pairs[int(np.argmin(error))]


def candidate_probability(similarity, bands: int, rows: int):
    """P(candidate) = 1 - (1 - s^rows)^bands for pairs of Jaccard similarity ``similarity`` (a
    number or an array)."""
    return 1.0 - (1.0 - np.asarray(similarity, dtype=np.float64) ** rows) ** bands


@functools.lru_cache(maxsize=64)
def recall_bands(threshold: float, num_perm: int, recall: float = 0.998) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` whose candidate probability at
    ``threshold`` is at least ``recall``, with the least false-positive work.

    Every candidate is verified by exact Jaccard, so a candidate below the threshold costs only
    its verification, while a pair at the threshold that never becomes a candidate is a missed
    duplicate. Of the layouts reaching ``recall`` at ``threshold`` (and so more above it), the one
    with the smallest false-positive probability, the integral of P(candidate) over similarities
    [0, threshold] (computed exactly, as :func:`optimal_bands` does), is chosen; ties go to the
    fewest bands, then the fewest rows. Raises ValueError, naming the fix, when no layout of
    ``num_perm`` permutations reaches ``recall``."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be at least 1, got {num_perm}")
    if not 0.0 < recall < 1.0:
        raise ValueError(f"recall must be in (0, 1), got {recall}")
    pairs = [(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    bands = np.array([p[0] for p in pairs], dtype=np.float64)
    rows = np.array([p[1] for p in pairs], dtype=np.float64)
    at_threshold = candidate_probability(threshold, bands, rows)
    reach = at_threshold >= recall
    if not reach.any():
        best = pairs[int(np.argmax(at_threshold))]
        raise ValueError(
            f"no LSH layout of {num_perm} permutations reaches a candidate probability of "
            f"{recall} at threshold {threshold} (at most {at_threshold.max():.4f}, "
            f"{best[0]} bands x {best[1]} rows); raise num_perm or lower recall"
        )
    s, w = _gauss_legendre(0.0, threshold, num_perm // 2 + 2)
    false_positive = candidate_probability(s[None, :], bands[reach, None], rows[reach, None]) @ w
    return [p for p, ok in zip(pairs, reach) if ok][int(np.argmin(false_positive))]


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``(documents, bands)`` uint64 keys: band ``i`` of a document hashes its signature values
    ``[i * rows, (i + 1) * rows)``, seeded by ``i`` so that equal values in different bands give
    different keys. Equal keys mean equal band values (up to 64-bit hash collisions)."""
    docs, num_perm = signatures.shape
    if bands * rows > num_perm:
        raise ValueError(f"bands x rows ({bands} x {rows}) exceeds the signature length {num_perm}")
    from pipeline.dedup.kernels import band_keys as keys  # one compiled pass, no (documents, bands) temporaries

    return keys(signatures, rows, fmix64(np.arange(bands, dtype=np.uint64) + _U64(_BAND_SEED)))
