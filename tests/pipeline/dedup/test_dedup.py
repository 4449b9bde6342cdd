"""Dedup: datasketch-equal signatures, exact and near duplicates found, false positives dropped,
partitioning and keep rules that do not change the answer, repeated-line removal."""

from __future__ import annotations

import inspect
import random
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketch import MinHash
from datasketch.lsh import _optimal_param

from pipeline.dedup import engine
from pipeline.dedup import jobs as jobs_module
from pipeline.dedup import lsh as lsh_module
from pipeline.dedup import minhash as minhash_module
from pipeline.dedup import normalize as normalize_module
from pipeline.dedup import reference as reference_module
from pipeline.dedup.clusters import (
    RULE_EXACT,
    RULE_NEAR,
    ShingleLookup,
    choose_kept,
    dedup_step,
    jaccard_of_pairs,
)
from pipeline.dedup.engine import deduplicate_shards
from pipeline.dedup.layout import DedupWork
from pipeline.dedup.lines import (
    RepeatedLines,
    frequent_lines,
    line_counts,
    line_counts_for_shard,
    remove_repeated_lines,
    remove_repeated_lines_shard,
)
from pipeline.dedup.lsh import EXACT_BAND, candidate_pairs, partition_band_keys, signatures_for_shard
from pipeline.dedup.minhash import (
    MinHashParams,
    band_keys,
    candidate_probability,
    minhash_signatures,
    optimal_bands,
    recall_bands,
    shingle_hashes,
    shingle_sets,
    signature_hashes,
)
from pipeline.dedup.normalize import exact_hash, normalize_text, split_words, word_hashes
from pipeline.dedup.normalize import words as find_words
from pipeline.dedup.reference import cluster_table, connected_components, verify_pairs
from pipeline.filters.engine import apply_filters
from pipeline.formats.documents import REMOVED_SCHEMA

HAS_SCHEMES = "scheme" in inspect.signature(MinHash.__init__).parameters
SCHEMES = ["affine32", "legacy"] if HAS_SCHEMES else ["legacy"]


def datasketch_minhash(num_perm: int, seed: int, scheme: str, **kwargs) -> MinHash:
    if HAS_SCHEMES:
        return MinHash(num_perm=num_perm, seed=seed, scheme=scheme, **kwargs)
    return MinHash(num_perm=num_perm, seed=seed, **kwargs)  # datasketch 1.x: the legacy scheme


def make_vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return sorted({"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)})


def random_text(rng: random.Random, vocabulary: list[str], words: int) -> str:
    text = [rng.choice(vocabulary) for _ in range(words)]
    for i in range(12, len(text), 12):  # sentences, some punctuation and capitals
        text[i - 1] += "."
        text[i] = text[i].capitalize()
    return " ".join(text)


def edit_words(rng: random.Random, text: str, edits: int) -> str:
    words = text.split(" ")
    for _ in range(edits):
        words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


# 64-bit values that differ only in their lowest bits: equal in the top bits a sort or search key keeps.
NEAR_TIES = np.array([0, 1 << 62, 3 << 62], dtype=np.uint64)

MIXED_TEXTS = [
    "Ｈｅｌｌｏ， World!! 你好世界。 This is a test, isn't it?",
    "hello world 你 好 世 界 this is a test isn t it",
    "สวัสดีครับ ยินดีต้อนรับ",
    "ｶﾀｶﾅ と ひらがな、日本語です。",
    "short",
    "two words",
    "",
    "!!! ... ???",
    "Ünïcödé café naïve résumé — ﬁne ligatures and soft\u00adhyphens",
    "tab\tseparated\nlines\r\nand  spaces",
]


# --- normalization ----------------------------------------------------------------------------


def test_normalization_folds_case_width_punctuation_and_splits_unspaced_scripts():
    normalized = normalize_text(MIXED_TEXTS).to_list()
    assert normalized[0] == "hello world 你 好 世 界 this is a test isn t it"
    assert normalized[0] == normalized[1]
    assert normalized[2].split(" ")[:2] == ["ส", "วั"]  # a Thai vowel sign stays with its consonant
    assert normalized[3] == "カ タ カ ナ と ひ ら が な 日 本 語 で す"
    assert normalized[6] == "" and normalized[7] == ""
    assert normalized[8] == "ünïcödé café naïve résumé fine ligatures and softhyphens"
    assert normalized[9] == "tab separated lines and spaces"
    assert split_words(["Hello, World"]) == [["hello", "world"]]


def test_letters_and_marks_compose_whatever_invisible_characters_or_capitals_sat_between():
    """A zero-width space or soft hyphen between a letter and its mark is deleted before NFKC
    composes them, and a capital with a mark whose lowercase composes (W + ring: only the small
    w has a precomposed form) normalizes as the precomposed small letter does: the same word."""
    texts = ["cafe\u200b\u0301", "café", "caf\u00ade\u0301", "W\u030a", "\u1e98", "\u0300\u00ad\u059a"]
    normalized = normalize_text(texts).to_list()
    assert normalized[:3] == ["café"] * 3 and normalized[3:5] == ["\u1e98"] * 2
    assert normalize_text(normalized).to_list() == normalized
    assert len(set(exact_hash(texts[:3]).tolist())) == 1 and exact_hash(texts[3:5]).tolist()[0] == exact_hash(["ẘ"])[0]


def test_exact_hash_equal_exactly_when_normalized_text_is():
    hashes = exact_hash(MIXED_TEXTS)
    assert hashes.dtype == np.uint64 and len(hashes) == len(MIXED_TEXTS)
    assert hashes[0] == hashes[1]
    assert hashes[6] == hashes[7]  # both have no words
    distinct = [0, 2, 3, 4, 5, 6, 8, 9]
    assert len(set(hashes[distinct].tolist())) == len(distinct)
    # Word order and word boundaries matter.
    a, b, c = exact_hash(["one two three", "two one three", "onetwo three"])
    assert len({a, b, c}) == 3


def plain_word_hashes(text: str) -> list[int]:
    """The module docstring's word hash, read plainly: each run of word bytes of the prepared
    text, fmix64(sum_j byte_j * M^j + length * G) modulo 2^64, with Python integers."""
    mask, m, golden = (1 << 64) - 1, 0x9E3779B97F4A7C15 | 1, 0x9E3779B97F4A7C15

    def fmix(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & mask
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & mask
        return h ^ (h >> 33)

    data = normalize_module.prepare_texts([text])[0].as_py().encode()
    found, word = [], []
    for byte in [*data, 32]:
        if normalize_module._IN_WORD[byte]:
            word.append(byte)
        elif word:
            total = sum(b * pow(m, j, 1 << 64) for j, b in enumerate(word))
            found.append(fmix((total + len(word) * golden) & mask))
            word = []
    return found


def test_shingle_hashes_equal_the_plain_reading_of_the_formula():
    """Horner's rule from the seed over each shingle's word hashes, plus size x G, fmix64, rotated
    by 32 bits; with Python integers, document by document (short and empty documents included)."""
    mask = (1 << 64) - 1
    rng = random.Random(8)
    vocabulary = make_vocabulary(rng, 200)
    texts = [random_text(rng, vocabulary, n) for n in (0, 1, 4, 5, 6, 40)] + ["", "... !!", "one two"]
    words_hashes, word_offsets = word_hashes(texts)
    wide, offsets = minhash_module.polynomial_shingle_hashes(words_hashes, word_offsets, 5, wide=True)
    narrow, _ = minhash_module.polynomial_shingle_hashes(words_hashes, word_offsets, 5)
    seed, k, golden = int(minhash_module._SHINGLE_SEED), int(minhash_module._SHINGLE_K), 0x9E3779B97F4A7C15
    for d in range(len(texts)):
        ws = words_hashes[word_offsets[d] : word_offsets[d + 1]].tolist()
        expected = []
        for start in range(max(len(ws) - 4, 1) if ws else 0):
            gram = ws[start : start + 5]
            h = seed
            for w in gram:
                h = (h * k + w) & mask
            h = int(minhash_module.fmix64(np.array([(h + len(gram) * golden) & mask], np.uint64))[0])
            expected.append(((h << 32) | (h >> 32)) & mask)
        assert wide[offsets[d] : offsets[d + 1]].tolist() == expected
        assert narrow[offsets[d] : offsets[d + 1]].tolist() == [h & 0xFFFFFFFF for h in expected]


def test_word_hashes_equal_the_plain_reading_whatever_the_batch():
    rng = random.Random(3)
    vocabulary = make_vocabulary(rng, 300)
    texts = [random_text(rng, vocabulary, rng.randint(0, 60)) for _ in range(40)] + MIXED_TEXTS
    texts.insert(5, "x" * 5000)  # one long word
    # Words about the power table's length (64 bytes), alone and among short words.
    texts += ["y" * n for n in (63, 64, 65, 128, 129)] + ["a " + "z" * 65 + " b " + "w" * 64 + " c"]
    texts[7:7] = ["", "...", "ends-with-a-word", "starts the next"]  # documents never share a word
    whole, whole_offsets = word_hashes(texts)
    one_at_a_time = [word_hashes([t])[0] for t in texts]
    assert np.array_equal(whole, np.concatenate(one_at_a_time))
    assert [whole[a:b].tolist() for a, b in zip(whole_offsets[:-1], whole_offsets[1:])] == [
        plain_word_hashes(t) for t in texts
    ]
    assert split_words(texts) == [t.split(" ") if t else [] for t in normalize_text(texts).to_list()]


# --- signatures -------------------------------------------------------------------------------


def corpus_for_signatures() -> list[str]:
    rng = random.Random(7)
    vocabulary = make_vocabulary(rng, 500)
    return [random_text(rng, vocabulary, rng.randint(0, 80)) for _ in range(150)] + MIXED_TEXTS


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("ngram", [1, 3, 5])
def test_signatures_equal_datasketch_with_sha1_shingles(scheme, ngram, monkeypatch):
    texts = corpus_for_signatures()
    # Small steps, so that documents straddle the steps of the batched permutation.
    monkeypatch.setattr(minhash_module, "_SHINGLES_PER_STEP", 61)
    hashes, offsets = shingle_hashes(texts, ngram, "sha1")
    signatures = minhash_signatures(hashes, offsets, num_perm=64, seed=11, scheme=scheme)
    assert signatures.shape == (len(texts), 64)
    for d, words in enumerate(split_words(texts)):
        expected = datasketch_minhash(64, 11, scheme)
        if words:
            shingles = [words] if len(words) <= ngram else [words[i : i + ngram] for i in range(len(words) - ngram + 1)]
            expected.update_batch([" ".join(s).encode("utf-8") for s in shingles])
        assert np.array_equal(signatures[d], expected.hashvalues), (scheme, ngram, d)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_signatures_equal_datasketch_with_polynomial_shingles(scheme):
    texts = corpus_for_signatures()
    hashes, offsets = shingle_hashes(texts, 5)
    sets, set_offsets = shingle_sets(hashes, offsets)
    signatures = minhash_signatures(hashes, offsets, num_perm=128, seed=1, scheme=scheme)
    # A set or the shingles with their repeats: the same minimums.
    assert np.array_equal(signatures, minhash_signatures(sets, set_offsets, 128, 1, scheme))
    for d in range(len(texts)):
        expected = datasketch_minhash(128, 1, scheme, hashfunc=lambda value: value)
        expected.update_batch(hashes[offsets[d] : offsets[d + 1]].tolist())
        assert np.array_equal(signatures[d], expected.hashvalues)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("shingle_hash", ["polynomial", "sha1"])
def test_signature_files_keep_64_bit_sets_and_permute_their_32_bit_low_halves(shingle_hash, scheme):
    """Verification compares 64-bit shingle hashes; the signatures stay those of the 32-bit ones
    (datasketch's, above), whose values are the low halves of the 64-bit ones."""
    texts = corpus_for_signatures()
    params = MinHashParams(shingle_hash=shingle_hash, scheme=scheme, keep_signature=True)
    columns = lsh_module.signature_batch(pa.array(texts, pa.large_string()), params)
    narrow, offsets = shingle_hashes(texts, 5, shingle_hash)
    wide, wide_offsets = shingle_hashes(texts, 5, shingle_hash, wide=True)
    assert wide.dtype == np.uint64 and np.array_equal(offsets, wide_offsets)
    assert np.array_equal(signature_hashes(wide), narrow)
    assert np.array_equal(columns["signature"], minhash_signatures(narrow, offsets, 128, 1, scheme))
    expected = [sorted(set(wide[offsets[d] : offsets[d + 1]].tolist())) for d in range(len(texts))]
    assert columns["shingle_set"].type == pa.large_binary()  # each set's uint64 bytes
    values, set_offsets = lsh_module.set_arrays(columns["shingle_set"])
    assert [values[set_offsets[d] : set_offsets[d + 1]].tolist() for d in range(len(texts))] == expected
    assert columns["shingles"].tolist() == [len(s) for s in expected]


@pytest.mark.parametrize("dtype", [np.uint64, np.uint32])
def test_shingle_sets_are_sorted_and_distinct_per_document_however_the_values_spread(dtype):
    """The sort buckets values by their top bits: uniform values, repeats, values equal in all but
    their lowest bits, and documents whose values all share their top bits (one full bucket, which
    sorts the document plainly) all come out sorted and distinct."""
    rng = np.random.default_rng(5)
    top = np.iinfo(dtype).max
    counts = np.concatenate([rng.integers(0, 40, 60), [3_000, 500, 1, 2]])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    hashes = rng.integers(0, top, int(offsets[-1]), dtype=dtype, endpoint=True)
    ties = (NEAR_TIES >> np.uint64(64 - 8 * np.dtype(dtype).itemsize)).astype(dtype)
    hashes[::3] = ties[rng.integers(0, 3, len(hashes[::3]))] | rng.integers(0, 9, len(hashes[::3])).astype(dtype)
    crowded = slice(offsets[60], offsets[61])  # 3,000 values below 2^12: all in the first bucket
    hashes[crowded] = rng.integers(0, 1 << 12, counts[60]).astype(dtype)
    values, set_offsets = shingle_sets(hashes, offsets)
    assert values.dtype == dtype
    for d in range(len(offsets) - 1):
        expected = sorted(set(hashes[offsets[d] : offsets[d + 1]].tolist()))
        assert values[set_offsets[d] : set_offsets[d + 1]].tolist() == expected


def test_polynomial_shingle_sets_are_the_sets_of_the_wide_shingle_hashes():
    texts = corpus_for_signatures() + ["a a a a a a a a a a a a", "", "one"]
    found = find_words(texts)
    wide, offsets = minhash_module.polynomial_shingle_hashes(found.hashes, found.doc_offsets, 5, wide=True)
    expected_values, expected_offsets = shingle_sets(wide, offsets)
    values, set_offsets = minhash_module.polynomial_shingle_sets(found.hashes, found.doc_offsets, 5)
    assert np.array_equal(set_offsets, expected_offsets) and np.array_equal(values, expected_values)
    assert [values[a:b].tolist() for a, b in zip(set_offsets[:-1], set_offsets[1:])] == [
        sorted(set(wide[a:b].tolist())) for a, b in zip(offsets[:-1], offsets[1:])
    ]


def test_short_documents_have_one_shingle_of_all_their_words():
    hashes, offsets = shingle_hashes(["a b c", "a b c d e f", "", "a b c"], 5, "sha1")
    assert np.diff(offsets).tolist() == [1, 2, 0, 1]
    assert hashes[0] == hashes[3]


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
@pytest.mark.parametrize("num_perm", [32, 128, 256])
def test_optimal_bands_match_datasketch(threshold, num_perm):
    assert optimal_bands(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)
    assert optimal_bands(threshold, num_perm, 0.2, 0.8) == _optimal_param(threshold, num_perm, 0.2, 0.8)


def test_default_layout_makes_pairs_at_the_threshold_candidates_99_times_in_100():
    params = MinHashParams()
    bands, rows = params.lsh
    assert bands * rows <= params.num_perm
    # 1 - (1 - 0.8^rows)^bands: 0.867 for the former 14 x 9, which lost 7% of the pairs at 0.80-0.85.
    assert 1 - (1 - 0.8**rows) ** bands >= 0.99
    assert params.candidate_probability == pytest.approx(1 - (1 - 0.8**rows) ** bands)
    assert params.candidate_probability >= params.recall == 0.998
    assert (bands, rows) == (21, 6)


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
@pytest.mark.parametrize("recall", [0.9, 0.99, 0.999])
def test_recall_bands_reach_the_recall_with_the_least_false_positive_work(threshold, recall):
    bands, rows = recall_bands(threshold, 128, recall)
    assert bands * rows <= 128 and candidate_probability(threshold, bands, rows) >= recall
    # Brute force, integrating P(candidate) over [0, threshold] on a fine grid.
    s = np.linspace(0.0, threshold, 20_001)

    def false_positive(b, r):
        return np.trapezoid(candidate_probability(s, b, r), s)

    reaching = [
        (b, r)
        for b in range(1, 129)
        for r in range(1, 128 // b + 1)
        if candidate_probability(threshold, b, r) >= recall
    ]
    best = min(reaching, key=lambda p: false_positive(*p))
    assert false_positive(bands, rows) == pytest.approx(false_positive(*best), rel=1e-6)


def test_lsh_layout_is_configurable_and_validated():
    assert MinHashParams(recall=0.99).lsh == recall_bands(0.8, 128, 0.99) == (16, 6)
    assert MinHashParams(recall=0.999).candidate_probability >= 0.999
    assert MinHashParams(bands=14, rows=9).lsh == (14, 9)
    with pytest.raises(ValueError, match="raise num_perm or lower recall"):
        MinHashParams(num_perm=2)  # at most 1 - 0.2^2 = 0.96 at 0.8
    with pytest.raises(ValueError, match="recall must be in"):
        MinHashParams(recall=1.0)
    with pytest.raises(ValueError, match="at most num_perm"):
        MinHashParams(bands=20, rows=7)

    from pipeline.config import DedupConfig
    from pipeline.formats.configfile import ConfigError, validate_model

    assert validate_model(DedupConfig, {}).minhash_params().lsh == (21, 6)
    assert validate_model(DedupConfig, {"recall": 0.95}).minhash_params().lsh == recall_bands(0.8, 128, 0.95)
    assert validate_model(DedupConfig, {"bands": 14, "rows": 9}).minhash_params().lsh == (14, 9)
    for bad, message in [
        ({"bands": 14}, "set bands and rows together"),
        ({"bands": 20, "rows": 7}, "must be at most num_perm"),
        ({"bands": 14, "rows": 9, "recall": 0.9}, "not both"),
        ({"num_perm": 2}, "raise num_perm or lower recall"),
        ({"recall": 1.0}, "recall"),
    ]:
        with pytest.raises(ConfigError, match=message):
            validate_model(DedupConfig, bad)


def test_band_keys_equal_exactly_when_band_values_are():
    rng = np.random.default_rng(0)
    signatures = rng.integers(0, 2**32, size=(6, 12), dtype=np.uint64).astype(np.uint32)
    signatures[1, :4] = signatures[0, :4]  # band 0 shared
    signatures[2, 4:8] = signatures[0, 4:8]  # band 1 shared
    signatures[3] = np.roll(signatures[0], 4)  # same values, other bands
    keys = band_keys(signatures, bands=3, rows=4)
    assert keys.shape == (6, 3) and keys.dtype == np.uint64
    assert keys[1, 0] == keys[0, 0] and keys[1, 1] != keys[0, 1]
    assert keys[2, 1] == keys[0, 1] and keys[2, 0] != keys[0, 0]
    assert not set(keys[3].tolist()) & set(keys[0].tolist())


# --- the staged dedup -------------------------------------------------------------------------


def write_docs(path: Path, docs: list[tuple[str, str]], **columns) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = {
        "id": [d[0] for d in docs],
        "text": [d[1] for d in docs],
        "source": ["test"] * len(docs),
        "url": [None] * len(docs),
        "meta": [None] * len(docs),
        **columns,
    }
    pq.write_table(pa.table(table), path)
    return path


def duplicate_corpus(seed: int = 0):
    """Distinct originals, exact copies (case, punctuation, spacing changed) and near copies (a
    word edited), spread over shards; returns the documents and the expected groups."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    originals = [random_text(rng, vocabulary, rng.randint(250, 400)) for _ in range(60)]
    docs = [(f"orig-{i}", text) for i, text in enumerate(originals)]
    groups = {}
    for i in range(0, 20):
        copy = originals[i].upper().replace(" ", "  ") + " !!"
        docs.append((f"exact-{i}", copy))
        groups.setdefault(f"orig-{i}", {f"orig-{i}"}).add(f"exact-{i}")
    for i in range(10, 30):
        # One word edited: Jaccard about 0.97, which the default bands (21 x 6) all but never miss.
        docs.append((f"near-{i}", edit_words(rng, originals[i], 1)))
        groups.setdefault(f"orig-{i}", {f"orig-{i}"}).add(f"near-{i}")
    docs.append(("empty", ""))
    docs.append(("punctuation", "!!! ..."))
    rng.shuffle(docs)
    return docs, [frozenset(g) for g in groups.values()]


def write_shards(folder: Path, docs: list[tuple[str, str]], shards: int) -> list[Path]:
    return [write_docs(folder / f"docs-{s:03d}.parquet", docs[s::shards]) for s in range(shards)]


def found_groups(clusters: pl.DataFrame) -> set[frozenset]:
    return {frozenset(ids) for ids in clusters.group_by("cluster").agg(pl.col("id"))["id"].to_list()}


def shingle_set(text: str) -> set[int]:
    hashes, offsets = shingle_hashes([text])
    return set(hashes.tolist())


def near_threshold_pairs(seed: int, pairs: int, low: float = 0.80, high: float = 0.85):
    """``pairs`` (original, copy) texts whose exact Jaccard (our 5-word shingles) lies in [low, high):
    scattered words of each original replaced by other vocabulary words, more or fewer until the
    similarity lands in the range."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    out = []
    while len(out) < pairs:
        original = random_text(rng, vocabulary, rng.randint(250, 450))
        words = original.split(" ")
        edits = max(1, round(len(words) * 0.02))
        for _ in range(20):
            copy = list(words)
            for i in rng.sample(range(len(words)), edits):
                copy[i] = rng.choice(vocabulary)
            a, b = shingle_set(original), shingle_set(" ".join(copy))
            similarity = len(a & b) / len(a | b)
            if low <= similarity < high:
                out.append((original, " ".join(copy), similarity))
                break
            edits = max(1, edits + (1 if similarity >= high else -1))
    return out


def test_near_copies_just_above_the_threshold_are_found(tmp_path):
    """400 pairs with exact Jaccard in [0.80, 0.85): the default layout joins at least 99% of them;
    the former 14 x 9 (candidate probability 0.867 at 0.8) joined about 93%."""
    pairs = near_threshold_pairs(seed=3, pairs=400)
    assert all(0.80 <= s < 0.85 for _, _, s in pairs)
    docs = [doc for i, (a, b, _) in enumerate(pairs) for doc in ((f"orig-{i}", a), (f"copy-{i}", b))]
    random.Random(0).shuffle(docs)
    paths = write_shards(tmp_path / "docs", docs, shards=2)

    def share_found(params: MinHashParams) -> float:
        clusters = deduplicate_shards(paths, tmp_path / f"work-{params.lsh}", params, partitions=2)
        cluster_of = dict(clusters.select("id", "cluster").iter_rows())
        together = [cluster_of.get(f"orig-{i}", -1) == cluster_of.get(f"copy-{i}", -2) for i in range(len(pairs))]
        assert clusters.height == 2 * sum(together)  # never a pair merged with another
        return sum(together) / len(pairs)

    assert share_found(MinHashParams()) >= 0.99
    assert share_found(MinHashParams(bands=14, rows=9)) < 0.96


def test_known_duplicates_found_and_distinct_documents_never_merged(tmp_path):
    docs, expected = duplicate_corpus()
    paths = write_shards(tmp_path / "docs", docs, shards=3)
    clusters = deduplicate_shards(paths, tmp_path / "work", MinHashParams(threshold=0.8), partitions=4)
    assert found_groups(clusters) == set(expected)
    kept = clusters.filter(pl.col("kept"))
    assert kept.height == len(expected)
    by_id = {row["id"]: row for row in clusters.iter_rows(named=True)}
    normalized = dict(zip([d[0] for d in docs], normalize_text([d[1] for d in docs]).to_list()))
    for row in by_id.values():
        same_text = normalized[row["id"]] == normalized[row["kept_id"]]
        assert row["exact"] == same_text
        assert (row["jaccard"] == 1.0) if same_text else (0.8 <= row["jaccard"] < 1.0)
    assert "empty" not in by_id and "punctuation" not in by_id
    # Applied shard by shard as a stage step: every document kept or removed with its rule.
    removed_total, kept_ids = 0, []
    for shard, path in enumerate(paths):
        batch = pl.read_parquet(path)
        result = dedup_step(clusters, threshold=0.8, shard=shard)(batch)
        assert result.kept.height + result.removed.height == batch.height
        assert result.removed.to_arrow().cast(REMOVED_SCHEMA).num_rows == result.removed.height
        assert set(result.removed["rule"].to_list()) <= {RULE_EXACT, RULE_NEAR}
        removed_total += result.removed.height
        kept_ids += result.kept["id"].to_list()
    assert removed_total == clusters.height - len(expected)
    assert set(kept_ids) == {d[0] for d in docs} - set(clusters.filter(~pl.col("kept"))["id"].to_list())


def test_exact_dedup_alone(tmp_path):
    docs, _ = duplicate_corpus()
    paths = write_shards(tmp_path / "docs", docs, shards=2)
    clusters = deduplicate_shards(paths, tmp_path / "work", MinHashParams(near=False), partitions=3)
    assert found_groups(clusters) == {frozenset({f"orig-{i}", f"exact-{i}"}) for i in range(20)}
    assert clusters["exact"].all() and (clusters["jaccard"] == 1.0).all()
    assert "shingle_set" not in pq.read_schema(tmp_path / "work" / "signatures" / "shard-00000.parquet").names


def test_verification_drops_lsh_false_positives(tmp_path):
    rng = random.Random(5)
    vocabulary = make_vocabulary(rng, 2000)
    base = random_text(rng, vocabulary, 200).split(" ")
    # About a third of the words shared: Jaccard of 5-gram sets far below 0.8, but with bands of
    # one row a single equal minimum makes the pair a candidate.
    partial = base[:60] + [rng.choice(vocabulary) for _ in range(140)]
    docs = [("a", " ".join(base)), ("b", " ".join(partial)), ("c", random_text(rng, vocabulary, 200))]
    path = write_docs(tmp_path / "docs.parquet", docs)
    params = MinHashParams(num_perm=64, bands=64, rows=1, threshold=0.8)
    signatures = tmp_path / "sig" / "shard-00000.parquet"
    signatures_for_shard(path, signatures, params, shard=0)
    partition_band_keys([signatures], [tmp_path / "bands" / "part-0000" / signatures.name])
    pairs = candidate_pairs(tmp_path / "bands" / "part-0000")
    assert (0, 1) in set(zip(pairs["doc_a"].to_list(), pairs["doc_b"].to_list()))
    lookup = ShingleLookup([signatures])
    edges = verify_pairs(pairs, lookup, threshold=0.8)
    assert edges.height == 0
    loose = verify_pairs(pairs, lookup, threshold=0.1)
    row = loose.filter((pl.col("doc_a") == 0) & (pl.col("doc_b") == 1))
    words_a, words_b = base, partial

    def grams(ws):
        return {" ".join(ws[i : i + 5]) for i in range(len(ws) - 4)}

    truth = len(grams(words_a) & grams(words_b)) / len(grams(words_a) | grams(words_b))
    assert row["jaccard"].item() == pytest.approx(truth, abs=0.01)


def test_a_block_of_shards_in_one_band_file_gives_the_same_candidates(tmp_path, monkeypatch):
    """The band keys of several signature files in one file per partition (a block's, shard after
    shard) give each partition the same candidate pairs as one file per shard; and the stage,
    signing in blocks of two shards, the same clusters as in one block."""
    docs, _ = duplicate_corpus(seed=2)
    paths = write_shards(tmp_path / "docs", docs, shards=5)
    signatures = [tmp_path / "sig" / f"shard-{s:05d}.parquet" for s in range(5)]
    for s, (path, out) in enumerate(zip(paths, signatures)):
        signatures_for_shard(path, out, MinHashParams(), shard=s)
    for signature in signatures:
        partition_band_keys([signature], [tmp_path / "per-shard" / f"part-{p:04d}" / signature.name for p in range(3)])
    blocks = DedupWork(tmp_path / "blocks")
    partition_band_keys(signatures[:2], blocks.band_files(0, 3))
    partition_band_keys(signatures[2:], blocks.band_files(2, 3))
    for p in range(3):
        per_shard = candidate_pairs(tmp_path / "per-shard" / f"part-{p:04d}")
        assert per_shard.height > 0 and candidate_pairs(blocks.band_partition(p)).equals(per_shard)
    one = deduplicate_shards(paths, tmp_path / "one", MinHashParams(), partitions=3)
    monkeypatch.setattr(engine, "SHARDS_PER_BLOCK", 2)
    three = deduplicate_shards(paths, tmp_path / "three", MinHashParams(), partitions=3)
    assert len(list((tmp_path / "three" / "bands" / "part-0000").glob("block-*.parquet"))) == 3
    assert one.equals(three) and one.height > 10


def test_more_partitions_same_clusters(tmp_path):
    docs, expected = duplicate_corpus(seed=1)
    paths = write_shards(tmp_path / "docs", docs, shards=3)
    one = deduplicate_shards(paths, tmp_path / "one", MinHashParams(), partitions=1)
    many = deduplicate_shards(paths, tmp_path / "many", MinHashParams(), partitions=7)
    assert one.equals(many)
    assert found_groups(one) == set(expected)
    band_files = list((tmp_path / "many" / "bands").glob("part-*/*.parquet"))
    assert len(band_files) == 7  # one block of 3 shards: a file per partition
    keys = pl.concat([pl.read_parquet(f).with_columns(file=pl.lit(f.parent.name)) for f in band_files])
    # Equal keys always in one partition.
    assert keys.group_by(["band", "key"]).agg(pl.col("file").n_unique())["file"].max() == 1
    assert (keys["band"] == EXACT_BAND).sum() == len(docs) - 2  # all but the two without words


def test_signature_file_layout_and_lookup(tmp_path):
    docs, _ = duplicate_corpus()
    path = write_docs(tmp_path / "docs.parquet", docs, quality=[float(i) for i in range(len(docs))])
    params = MinHashParams(keep_signature=True, score_column="quality")
    out = tmp_path / "sig.parquet"
    counts = signatures_for_shard(path, out, params, shard=3)
    assert counts["docs"] == len(docs) and counts["docs_without_words"] == 2
    table = pq.read_table(out)
    bands, rows = params.lsh
    assert table.column_names == [
        "doc",
        "id",
        "exact_hash",
        "words",
        "chars",
        "score",
        "shingles",
        "band_keys",
        "signature",
    ]
    assert table.schema.field("band_keys").type == pa.list_(pa.uint64(), bands)
    assert table.column("doc").to_pylist()[:2] == [3 << 32, (3 << 32) + 1]
    assert table.column("id").to_pylist() == [d[0] for d in docs]
    # the sets file beside it: each row's set in row order, as many hashes as its shingles
    values = np.fromfile(lsh_module.sets_path(out), "<u8")
    set_offsets = np.concatenate([[0], np.cumsum(table.column("shingles").to_numpy())])
    assert set_offsets[-1] == len(values)
    sets = [values[set_offsets[d] : set_offsets[d + 1]].tolist() for d in range(table.num_rows)]
    assert all(s == sorted(set(s)) for s in sets) and sum(map(len, sets)) > 0
    in_memory = lsh_module.signature_batch(pa.array([d[1] for d in docs], pa.large_string()), params)
    assert in_memory["shingle_set"].equals(lsh_module.set_column(values, set_offsets))
    texts = [d[1] for d in docs]
    assert table.column("exact_hash").to_numpy().tolist() == exact_hash(texts).tolist()
    signature = np.array(table.column("signature").to_pylist(), dtype=np.uint32)
    assert np.array_equal(band_keys(signature, bands, rows), np.array(table.column("band_keys").to_pylist(), np.uint64))
    lookup = ShingleLookup([out])
    wanted = np.array([(3 << 32) + 7, (3 << 32) + 2, (3 << 32) + 7])
    rows_read = lookup.rows(wanted, ["id", "shingle_set"])
    assert rows_read.column("id").to_pylist() == [docs[2][0], docs[7][0]]
    read_values, read_offsets = lsh_module.set_arrays(rows_read.column("shingle_set"))
    assert [read_values[read_offsets[i] : read_offsets[i + 1]].tolist() for i in range(2)] == [sets[2], sets[7]]
    assert lookup.rows(wanted, ["shingle_set"]).column("doc").to_pylist() == [(3 << 32) + 2, (3 << 32) + 7]
    with pytest.raises(ValueError, match="score_column"):
        signatures_for_shard(path, tmp_path / "x.parquet", MinHashParams(score_column="missing"), shard=0)


def test_signature_files_do_not_depend_on_batch_size(tmp_path, monkeypatch):
    docs, _ = duplicate_corpus()
    path = write_docs(tmp_path / "docs.parquet", docs)
    texts = pa.array([d[1] for d in docs], pa.large_string())
    whole = lsh_module.signature_batch(texts, MinHashParams())
    signatures_for_shard(path, tmp_path / "one.parquet", MinHashParams(), shard=1)
    monkeypatch.setattr(lsh_module, "DOCS_PER_BATCH", 7)
    signatures_for_shard(path, tmp_path / "many.parquet", MinHashParams(), shard=1)
    assert pq.read_table(tmp_path / "one.parquet").equals(pq.read_table(tmp_path / "many.parquet"))
    pieces = lsh_module.signature_batch(texts, MinHashParams())
    assert whole.keys() == pieces.keys()
    for name, values in whole.items():
        assert values.equals(pieces[name]) if name == "shingle_set" else np.array_equal(values, pieces[name])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_jaccard_of_pairs_is_exact(dtype):
    rng = np.random.default_rng(2)
    sets = [np.unique(rng.integers(0, 50, rng.integers(0, 30))).astype(dtype) for _ in range(40)]
    if dtype == np.uint64:
        sets = [np.unique(s | NEAR_TIES[rng.integers(0, 3, len(s))]) for s in sets]
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sets])])
    values = np.concatenate(sets)
    left, right = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    got = jaccard_of_pairs(values, offsets, left, right)
    assert got.dtype == np.float64 and len(got) == 300
    for i, j, value in zip(left, right, got):
        a, b = set(sets[i].tolist()), set(sets[j].tolist())
        assert value == (len(a & b) / len(a | b) if a | b else 0.0)  # the same float, not a close one
    assert len(jaccard_of_pairs(values, offsets, left[:0], right[:0])) == 0
    # The right sets from arrays of their own (the second hop's own sets): the same values.
    cut = 17
    own = (values[offsets[cut] :], offsets[cut:] - offsets[cut])
    mine = (left < cut) & (right >= cut)
    split = jaccard_of_pairs(values[: offsets[cut]], offsets[: cut + 1], left[mine], right[mine] - cut, own)
    assert mine.sum() > 50 and np.array_equal(split, got[mine])


def test_reference_components_are_named_by_their_smallest_document():
    rng = np.random.default_rng(4)
    edges = pl.DataFrame({"doc_a": rng.integers(0, 300, 200) * 7, "doc_b": rng.integers(0, 300, 200) * 7})
    with_scipy = connected_components(edges)
    assert with_scipy["component"].n_unique() > 10
    # Component = smallest member; every edge inside one component.
    component = dict(zip(with_scipy["doc"].to_list(), with_scipy["component"].to_list()))
    for a, b in edges.iter_rows():
        assert component[a] == component[b] <= min(a, b)


def test_keep_rules_are_deterministic():
    components = pl.DataFrame(
        {
            "doc": [5, 2, 9, 7, 3, 11],
            "component": [2, 2, 2, 3, 3, 3],
            "chars": [100, 50, 100, 10, 10, 10],
            "score": [0.5, 0.9, 0.9, None, 0.1, 0.1],
        }
    )
    expected = {"first": {2, 3}, "longest": {5, 3}, "quality": {2, 3}}
    for rule, kept in expected.items():
        results = [choose_kept(components.sample(fraction=1.0, shuffle=True, seed=s), rule) for s in range(5)]
        assert all(r.equals(results[0]) for r in results)
        assert set(results[0].filter(pl.col("kept"))["doc"].to_list()) == kept
    with pytest.raises(ValueError, match="keep rule"):
        choose_kept(components, "random")


def test_keep_rule_longest_and_quality_end_to_end(tmp_path):
    rng = random.Random(9)
    vocabulary = make_vocabulary(rng)
    text = random_text(rng, vocabulary, 200)
    docs = [("short", text), ("long", text + " Sincerely."), ("copy", text.upper())]
    paths = [write_docs(tmp_path / "d.parquet", docs, score=[0.2, 0.1, 0.7])]
    clusters = {}
    for rule in ("first", "longest", "quality"):
        params = MinHashParams(score_column="score")
        table = deduplicate_shards(paths, tmp_path / rule, params, partitions=2, rule=rule)
        clusters[rule] = table.filter(pl.col("kept"))["id"].to_list()
    assert clusters == {"first": ["short"], "longest": ["long"], "quality": ["copy"]}


def test_cluster_jaccard_is_measured_against_the_kept_document(tmp_path, monkeypatch):
    docs, _ = duplicate_corpus(seed=2)
    paths = write_shards(tmp_path / "docs", docs, shards=2)
    work = tmp_path / "work"
    clusters = deduplicate_shards(paths, work, MinHashParams(), partitions=2)
    lookup = ShingleLookup(sorted((work / "signatures").glob("*.parquet")))
    edges = pl.concat([pl.read_parquet(p) for p in sorted((work / "verify" / "measured").glob("*.parquet"))])
    # Reverse the edge order and verify in tiny steps: same table.
    monkeypatch.setattr(reference_module, "PAIRS_PER_STEP", 3)
    again = cluster_table(edges.reverse(), lookup, "first")
    assert again.equals(clusters)


@pytest.mark.parametrize("rule", ["first", "longest", "quality"])
def test_the_keep_rule_per_home_shard_and_the_table_by_row_groups_give_the_one_process_table(
    tmp_path, monkeypatch, rule
):
    docs, _ = duplicate_corpus(seed=4)
    scores = [float((7 * i) % 11) for i in range(len(docs))]
    paths = [
        write_docs(tmp_path / "docs" / f"d{s}.parquet", docs[s::5], score=scores[s::5]) for s in range(5)
    ]  # clusters spread over 5 shards, most of them homed in another shard than some members
    params = MinHashParams(score_column="score")
    work = tmp_path / "work"
    monkeypatch.setattr(jobs_module, "CLUSTER_ROWS_PER_ROW_GROUP", 7)  # several row groups, one cut mid-shard
    monkeypatch.setattr(engine, "EDGES_PER_HOME", 10)  # homes dealt to several keep-rule units
    monkeypatch.setattr(engine, "DOCS_PER_GROUP", len(docs) // 3 + 1)  # 3 groups of shards
    staged = deduplicate_shards(paths, work, params, partitions=3, rule=rule)
    homes = {p.parent.name for p in (work / "components" / "home").glob("home-*/*.parquet")}
    groups = {p.parent.name for p in (work / "members").glob("group-*/*.parquet")}
    assert len(homes) > 1 and groups == {"group-00000", "group-00001", "group-00002"}
    assert len(list((work / "members").glob("group-*/*.parquet"))) > len(homes)
    assert pq.ParquetFile(work / "clusters.parquet").metadata.num_row_groups == -(-staged.height // 7) > 2
    lookup = ShingleLookup(sorted((work / "signatures").glob("*.parquet")))
    edges = pl.concat([pl.read_parquet(p) for p in sorted((work / "verify" / "measured").glob("*.parquet"))])
    assert staged.equals(cluster_table(edges, lookup, rule))
    assert staged["doc"].is_sorted() and staged.filter(pl.col("kept")).height == staged["cluster"].n_unique()


# --- repeated lines ---------------------------------------------------------------------------


def line_corpus():
    rng = random.Random(11)
    vocabulary = make_vocabulary(rng, 800)
    texts = []
    for i in range(30):
        lines = [random_text(rng, vocabulary, 12) for _ in range(4)]
        if i % 2 == 0:
            lines.insert(0, "Home | News | Contact" if i % 4 else "HOME  news contact!")
        if i % 3 == 0:
            lines.append("Copyright 2024 Example Media. All rights reserved.")
        lines.append("")
        texts.append("\n".join(lines))
    return texts


def test_repeated_lines_removed_and_counted():
    texts = pl.Series(line_corpus())
    counts = line_counts(texts)
    frequent = counts.filter(pl.col("docs") > 5)
    assert sorted(frequent["docs"].to_list()) == [10, 15]  # copyright in 10, menu (both spellings) in 15
    result = remove_repeated_lines(texts, frequent["line_hash"])
    assert result.height == len(texts)
    for i, row in enumerate(result.iter_rows(named=True)):
        before = texts[i]
        expected_cut = (i % 2 == 0) + (i % 3 == 0)
        assert row["lines_removed"] == expected_cut
        assert row["lines"] == before.count("\n") + 1
        assert row["chars_removed"] == len(before) - len(row["text"])
        assert "Copyright" not in row["text"] and "news contact" not in row["text"].lower()
    untouched = remove_repeated_lines(texts, np.zeros(0, np.uint64))
    assert untouched["text"].to_list() == texts.to_list() and untouched["chars_removed"].sum() == 0


def test_repeated_lines_staged_equals_in_memory(tmp_path):
    texts = line_corpus()
    docs = [(f"d{i}", t) for i, t in enumerate(texts)]
    paths = write_shards(tmp_path / "docs", docs, shards=3)
    for path in paths:
        line_counts_for_shard(path, tmp_path / "counts", partitions=4)
    frequent = pl.concat([frequent_lines(tmp_path / "counts" / f"part-{p:04d}", max_docs=5) for p in range(4)])
    in_memory = line_counts(pl.Series(texts)).filter(pl.col("docs") > 5)
    assert frequent.sort("line_hash").equals(in_memory.sort("line_hash"))
    for path in paths:
        stats = remove_repeated_lines_shard(path, frequent, tmp_path / "out" / path.name)
        before = pq.read_table(path)
        after = pq.read_table(tmp_path / "out" / path.name)
        assert after.column_names == before.column_names
        assert after.column("id").to_pylist() == stats["id"].to_list() == before.column("id").to_pylist()
        expected = remove_repeated_lines(pl.from_arrow(before.column("text")), frequent["line_hash"])
        assert after.column("text").to_pylist() == expected["text"].to_list()
        assert stats["lines_removed"].sum() > 0


def test_repeated_lines_as_a_filter():
    texts = line_corpus() + ["Home | News | Contact\nCopyright 2024 Example Media. All rights reserved."]
    docs = pl.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts, "source": ["web"] * len(texts)})
    frequent = line_counts(docs["text"]).filter(pl.col("docs") > 5)["line_hash"].to_numpy()
    result = apply_filters(docs, [RepeatedLines(frequent)])
    assert result.removed["rule"].to_list() == ["filter.empty_after_rewrite"]  # only boilerplate
    assert result.kept.height == len(texts) - 1
    assert result.counts["repeated_lines.lines_removed"] == 15 + 10 + 2
    assert result.kept["text"].to_list() == remove_repeated_lines(docs["text"], frequent)["text"].to_list()[:-1]


def test_reference_index_finds_near_and_exact_copies_of_reference_texts_only():
    import random

    from pipeline.dedup.contamination import ReferenceIndex

    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(400)]
    references = [" ".join(rng.choice(vocabulary) for _ in range(80)) for _ in range(30)]
    index = ReferenceIndex([f"r{i}" for i in range(30)], references)
    near = references[4].split()
    near[40] = "changed"  # one word of 80: Jaccard of the 5-word shingles 71/81
    texts = [
        " ".join(near),
        references[9].upper() + "!",
        "",
        "unrelated words " * 30,
        " ".join(rng.choice(vocabulary) for _ in range(80)),
    ]
    found = index.matches(["near", "exact", "empty", "other", "random"], texts)
    assert found["id"].to_list() == ["exact", "near"]
    assert found["reference_id"].to_list() == ["r9", "r4"]
    assert found["jaccard"].to_list() == [1.0, pytest.approx(71 / 81)]
    strict = ReferenceIndex([f"r{i}" for i in range(30)], references, MinHashParams(threshold=0.9))
    assert strict.matches(["near"], [" ".join(near)]).height == 0


def test_small_buckets_give_every_pair_and_large_ones_a_star(tmp_path):
    """Near copies B and C of one article can sit in a bucket behind a less similar A: in a small
    near-duplicate bucket every pair is a candidate, so B-C is verified; a large bucket (a template
    on thousands of pages) and the exact hash stay linear, each member paired with the first."""
    big = lsh_module.ALL_PAIRS_BUCKET + 1
    rows = [(0, 11, doc) for doc in (1, 2, 3)]  # a small bucket of band 0
    rows += [(1, 22, doc) for doc in range(100, 100 + big)]  # a large bucket of band 1
    rows += [(EXACT_BAND, 33, doc) for doc in (7, 8, 9)]  # an exact-hash bucket
    band, key, doc = zip(*rows)
    path = tmp_path / "part.parquet"
    pq.write_table(
        pa.table(
            {"band": pa.array(band, pa.int16()), "key": pa.array(key, pa.uint64()), "doc": pa.array(doc, pa.int64())},
            schema=lsh_module.BAND_KEYS_SCHEMA,
        ),
        path,
    )
    pairs = {(a, b): exact for a, b, exact in candidate_pairs(path).iter_rows()}
    assert {(1, 2), (1, 3), (2, 3)} <= set(pairs)
    assert {(100, d) for d in range(101, 100 + big)} <= set(pairs)
    assert not any(100 < a and a < 100 + big for a, _ in pairs)  # no pair among the large bucket's others
    assert pairs[(7, 8)] and pairs[(7, 9)] and (8, 9) not in pairs
    assert len(pairs) == 3 + (big - 1) + 2


def _candidate_pairs_plainly(keys: pl.DataFrame) -> pl.DataFrame:
    """candidate_pairs read plainly in polars: buckets by (band, key), all pairs of a small
    near-duplicate bucket, a star of each other bucket on its first document, one row per pair."""
    bucket = ["band", "key"]
    ranked = keys.sort(["band", "key", "doc"]).with_columns(
        size=pl.len().over(bucket), doc_a=pl.col("doc").first().over(bucket)
    )
    small = (pl.col("band") != EXACT_BAND) & (pl.col("size") <= lsh_module.ALL_PAIRS_BUCKET)
    star = ranked.filter(~small & (pl.col("doc") != pl.col("doc_a"))).select("band", "doc_a", doc_b="doc")
    members = ranked.filter(small).select("band", "key", "doc")
    every = members.join(members, on=bucket, suffix="_b").filter(pl.col("doc") < pl.col("doc_b"))
    both = pl.concat([star, every.select("band", doc_a="doc", doc_b="doc_b")])
    pairs = both.group_by(["doc_a", "doc_b"]).agg(exact=(pl.col("band") == EXACT_BAND).any())
    return pairs.sort(["doc_a", "doc_b"]).select(
        pl.col("doc_a").cast(pl.Int64), pl.col("doc_b").cast(pl.Int64), "exact"
    )


def _band_key_files(folder, rng, rows: list[int], bands: int, keys: list[int], docs: int) -> list:
    """One band-key file per shard (``rows[f]`` rows of shard f, bands ``EXACT_BAND`` to
    ``bands - 1``, keys below ``keys[f]``, distinct documents below ``docs``), each sorted as
    partition_band_keys writes it."""
    files = []
    for f, (n, k) in enumerate(zip(rows, keys)):
        frame = pl.DataFrame(
            {
                "band": rng.integers(EXACT_BAND, bands, n).astype(np.int16),
                "key": rng.integers(0, k, n).astype(np.uint64),
                "doc": (f << 32) + rng.choice(docs, n, replace=False).astype(np.int64),
            }
        )
        path = folder / f"part-{f}.parquet"
        frame = frame.unique(["band", "doc"]).sort("band", "key", "doc")
        pq.write_table(frame.to_arrow().cast(lsh_module.BAND_KEYS_SCHEMA), path)
        files.append(path)
    return files


@pytest.mark.parametrize("seed", range(6))
def test_candidate_pairs_are_those_of_the_plain_reading(tmp_path, seed):
    """Random band keys over several files (buckets of 1 to 30 documents, the exact band among
    them, pairs that meet in several bands): the same pairs, order and exact flags as a plain
    polars reading of the rule."""
    rng = np.random.default_rng(seed)
    rows = [int(rng.integers(0, 400)) for _ in range(3)]
    files = _band_key_files(tmp_path, rng, rows, 4, [1 + int(rng.integers(1, 40)) for _ in range(3)], 1000)
    expected = _candidate_pairs_plainly(pl.concat([pl.read_parquet(p) for p in files]))
    got = candidate_pairs(files)
    assert got.schema == expected.schema
    assert got.equals(expected)
    assert candidate_pairs([]).height == 0 and candidate_pairs([]).schema == expected.schema


def test_candidate_pairs_do_not_depend_on_the_order_of_the_files(tmp_path):
    """The files of a partition in reverse shard order (a bucket's documents then out of order in
    the concatenation): the same pairs as in shard order."""
    files = _band_key_files(tmp_path, np.random.default_rng(11), [300] * 4, 3, [25] * 4, 500)
    expected = _candidate_pairs_plainly(pl.concat([pl.read_parquet(p) for p in files]))
    assert candidate_pairs(files).equals(expected)
    assert candidate_pairs(files[::-1]).equals(expected)
