"""The compiled MinHash loops equal a plain numpy reading of what they compute."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dedup import minhash as minhash_module
from pipeline.dedup import normalize as normalize_module
from pipeline.dedup.kernels import affine32_signatures
from pipeline.dedup.minhash import MAX_HASH_32, band_keys, fmix32, permutations
from pipeline.dedup.normalize import combine_word_hashes
from pipeline.formats.hashing import fmix64


def plain_affine32(hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.full((len(offsets) - 1, len(a)), MAX_HASH_32, dtype=np.uint32)
    mixed = fmix32(hashes)
    with np.errstate(over="ignore"):
        for d in range(len(offsets) - 1):
            mine = mixed[offsets[d] : offsets[d + 1]]
            if len(mine):
                out[d] = (a[:, None] * mine[None, :] + b[:, None]).min(axis=1)
    return out


def test_affine32_signatures_equal_the_plain_reading_with_empty_and_long_documents():
    rng = np.random.default_rng(0)
    counts = np.array([0, 1, 5, 0, 30_000, 2, 0, 17])  # one document far longer than the rest
    offsets = np.concatenate([[0], np.cumsum(counts)])
    hashes = rng.integers(0, 2**32, size=int(offsets[-1]), dtype=np.uint64).astype(np.uint32)
    for num_perm, seed in ((128, 1), (13, 7), (1, 0)):
        a, b = permutations(num_perm, seed)
        got = affine32_signatures(hashes, offsets, a, b)
        assert got.dtype == np.uint32 and got.shape == (len(counts), num_perm)
        assert np.array_equal(got, plain_affine32(hashes, offsets, a, b))
        assert (got[counts == 0] == MAX_HASH_32).all()


@settings(max_examples=100, deadline=None)
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=20),
    seed=st.integers(0, 2**16),
    num_perm=st.integers(1, 40),
)
def test_affine32_signatures_equal_the_plain_reading(counts, seed, num_perm):
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    hashes = np.random.default_rng(seed).integers(0, 2**32, size=int(offsets[-1]), dtype=np.uint64).astype(np.uint32)
    a, b = permutations(num_perm, seed)
    assert np.array_equal(affine32_signatures(hashes, offsets, a, b), plain_affine32(hashes, offsets, a, b))


def test_band_keys_and_exact_hashes_equal_the_plain_reading_with_python_integers():
    mask, golden = (1 << 64) - 1, 0x9E3779B97F4A7C15

    def fmix(h: int) -> int:
        return int(fmix64(np.array([h & mask], np.uint64))[0])

    rng = np.random.default_rng(2)
    for dtype in (np.uint32, np.uint64):
        signatures = rng.integers(0, np.iinfo(dtype).max, (7, 20), dtype=dtype, endpoint=True)
        keys = band_keys(signatures, 3, 6)
        assert keys.shape == (7, 3) and keys.dtype == np.uint64
        for d in range(7):
            for band in range(3):
                key = fmix(band + minhash_module._BAND_SEED)
                for value in signatures[d, band * 6 : (band + 1) * 6].tolist():
                    key = fmix((key ^ value) * golden)
                assert int(keys[d, band]) == key
    hashes = rng.integers(0, 2**64, 40, dtype=np.uint64)
    offsets = np.array([0, 0, 1, 13, 13, 40])
    multipliers = normalize_module._WORD_MULTIPLIERS.upto(30).tolist()
    combined = combine_word_hashes(hashes, offsets)
    for d in range(len(offsets) - 1):
        mine = hashes[offsets[d] : offsets[d + 1]].tolist()
        total = sum(h * multipliers[i] for i, h in enumerate(mine))
        assert int(combined[d]) == fmix(total + len(mine) * golden)
