"""Dedup of documents shorter than a shingle: one shingle of all their words, compared by a hash
wide enough that two different texts never verify as Jaccard 1.0 from a hash collision."""

from __future__ import annotations

import random
import string

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dedup.contamination import ReferenceIndex
from pipeline.dedup.engine import deduplicate_shards
from pipeline.dedup.lsh import set_arrays, signature_batch
from pipeline.dedup.minhash import MinHashParams, shingle_hashes
from pipeline.dedup.normalize import normalize_text, split_words
from tests.pipeline.dedup.test_dedup import write_shards

# Two unrelated texts of fewer than 5 words whose one shingle each has the same 32-bit hash.
COLLIDING = ("collecting znsxsedfo critical 93519", "M past 49609")


def shingle_strings(text: str, ngram: int = 5) -> frozenset[str]:
    """The shingles of a text as the docs define them, from its words (as strings)."""
    (words,) = split_words([text])
    if len(words) <= ngram:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + ngram]) for i in range(len(words) - ngram + 1))


def tiny_texts(rng: random.Random, count: int) -> list[str]:
    letters = string.ascii_lowercase
    out = set()
    while len(out) < count:
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 9))) for _ in range(rng.randint(1, 4))]
        out.add(" ".join(words) + f" {rng.randrange(100_000)}")
    return sorted(out)


def assert_duplicates_share_their_shingles(clusters: pl.DataFrame, text_of: dict[str, str]) -> None:
    """Every clustered document at Jaccard 1.0 with its kept one has the kept one's shingles, and
    one marked exact has its normalized text."""
    for row in clusters.filter(~pl.col("kept")).iter_rows(named=True):
        mine, kept = text_of[row["id"]], text_of[row["kept_id"]]
        if row["jaccard"] == 1.0:
            assert shingle_strings(mine) == shingle_strings(kept), (mine, kept)
        if row["exact"]:
            assert normalize_text([mine]).item() == normalize_text([kept]).item()


def test_unrelated_short_documents_with_colliding_32_bit_shingle_hashes_are_kept(tmp_path):
    """The two texts' single shingles share a 32-bit hash, so their signatures are equal and they
    are candidates in every band; verified on 32-bit shingle sets they got Jaccard 1.0 and one was
    removed as a near duplicate."""
    low, _ = shingle_hashes(list(COLLIDING))
    assert low[0] == low[1]  # the collision the signatures (datasketch-equal, 32-bit) keep
    rng = random.Random(0)
    docs = [(f"tiny-{i}", t) for i, t in enumerate(tiny_texts(rng, 300))]
    docs += [("collecting", COLLIDING[0]), ("past", COLLIDING[1])]
    # Short texts that are the same once normalized are still exact duplicates of each other.
    docs += [("past-copy", "m, PAST  49609!"), ("collecting-copy", "Collecting: znsxsedfo critical 93519.")]
    rng.shuffle(docs)
    paths = write_shards(tmp_path / "docs", docs, shards=2)
    clusters = deduplicate_shards(paths, tmp_path / "work", MinHashParams(), partitions=2)
    groups = {frozenset(ids) for ids in clusters.group_by("cluster").agg(pl.col("id"))["id"].to_list()}
    assert groups == {frozenset({"past", "past-copy"}), frozenset({"collecting", "collecting-copy"})}
    assert clusters["exact"].all() and (clusters["jaccard"] == 1.0).all()
    assert_duplicates_share_their_shingles(clusters, dict(docs))


def test_no_two_of_many_distinct_short_documents_share_a_shingle_set():
    """200,000 distinct texts of 2 to 5 words: with 32-bit shingle hashes about 5 pairs of them
    share their one shingle's hash (n^2 / 2^33); the sets verification compares must not."""
    texts = tiny_texts(random.Random(1), 200_000)
    columns = signature_batch(pl.Series(texts).to_arrow(), MinHashParams())
    values, offsets = set_arrays(columns["shingle_set"])
    assert (np.diff(offsets) == 1).all()  # one shingle each
    assert len(np.unique(values)) == len(texts)


SHORT_WORD = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=8)


@settings(max_examples=25)
@given(st.lists(st.lists(SHORT_WORD, min_size=1, max_size=6), min_size=1, max_size=30))
def test_short_documents_match_exactly_when_their_shingles_are_equal(word_lists):
    """Short random documents (the colliding pair among them) looked up against themselves: every
    match at Jaccard 1.0 is a pair with equal shingles, and every document matches itself."""
    texts = [" ".join(words) for words in word_lists] + list(COLLIDING)
    ids = [str(i) for i in range(len(texts))]
    index = ReferenceIndex(ids, texts)
    found = index.matches(ids, texts)
    assert set(found.filter(pl.col("id") == pl.col("reference_id"))["id"].to_list()) == set(ids)
    for doc, reference, jaccard in found.iter_rows():
        a, b = shingle_strings(texts[int(doc)]), shingle_strings(texts[int(reference)])
        truth = len(a & b) / len(a | b)
        assert jaccard == truth, (texts[int(doc)], texts[int(reference)])
