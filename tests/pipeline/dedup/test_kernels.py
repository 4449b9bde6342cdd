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


def plain_bucket_pairs(band, key, doc, all_pairs: int, exact_band: int) -> dict[tuple[int, int], bool]:
    """kernels.bucket_pairs read plainly: buckets by (band, key) in a dict, a star on the smallest
    document for the exact band and large buckets, every pair of the others; exact ORed."""
    buckets: dict[tuple[int, int], list[int]] = {}
    for b, k, d in zip(band.tolist(), key.tolist(), doc.tolist()):
        buckets.setdefault((b, k), []).append(d)
    pairs: dict[tuple[int, int], bool] = {}
    for (b, _), docs in buckets.items():
        if b == exact_band or len(docs) > all_pairs:
            found = [(min(docs), d) for d in docs if d != min(docs)]
        else:
            found = [(min(x, y), max(x, y)) for i, x in enumerate(docs) for y in docs[i + 1 :] if x != y]
        for pair in found:
            pairs[pair] = pairs.get(pair, False) or b == exact_band
    return pairs


# Run in a fresh interpreter: bucket_pairs on fixed rows, with whether its loops were compiled or
# loaded from numba's cache on disk.
CACHE_PROBE = """
import json
import numpy as np
from pipeline.dedup import kernels
rng = np.random.default_rng(5)
band = rng.integers(-1, 4, 3000).astype(np.int16)
key = rng.integers(0, 300, 3000).astype(np.uint64)
doc = rng.permutation(10_000)[:3000].astype(np.int64)
a, b, exact = kernels.bucket_pairs(band, key, doc, 8, -1)
loops = [kernels._group_buckets, kernels._bucket_pairs, kernels._distinct_pairs]
print(json.dumps({"pairs": sorted(zip(a.tolist(), b.tolist(), exact.tolist())),
                  "hits": sum(sum(f.stats.cache_hits.values()) for f in loops),
                  "misses": sum(sum(f.stats.cache_misses.values()) for f in loops)}))
"""


def test_a_fresh_process_loads_the_compiled_loops_from_the_cache_and_they_stay_right(tmp_path):
    """The loops are cached on disk (cache=True; NUMBA_CACHE_DIR here, as for a read-only install):
    the first process compiles and writes them, the next loads them without compiling, and both
    give the pairs of the plain reading."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    root = Path(__file__).resolve().parents[3]
    first, second = (
        json.loads(
            subprocess.run(
                [sys.executable, "-c", CACHE_PROBE], env=env, cwd=root, capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(2)
    )
    assert (first["misses"], first["hits"]) == (3, 0)  # compiled, and written to the cache
    assert (second["misses"], second["hits"]) == (0, 3)  # loaded from it
    assert any((tmp_path / "numba").rglob("*.nbc"))
    rng = np.random.default_rng(5)
    band = rng.integers(-1, 4, 3000).astype(np.int16)
    key = rng.integers(0, 300, 3000).astype(np.uint64)
    doc = rng.permutation(10_000)[:3000].astype(np.int64)
    expected = sorted((a, b, exact) for (a, b), exact in plain_bucket_pairs(band, key, doc, 8, -1).items())
    assert len(expected) > 100 and any(exact for *_, exact in expected)
    assert [tuple(p) for p in first["pairs"]] == [tuple(p) for p in second["pairs"]] == expected
