"""Properties of the normalization and the shingles dedup compares, on random Unicode: every
whitespace and control character, format characters, combining marks, unspaced scripts
(surrogates aside: a Python string of them cannot be UTF-8 encoded)."""

from __future__ import annotations

import sys
import unicodedata

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dedup.minhash import shingle_hashes, signature_hashes
from pipeline.dedup.normalize import INVISIBLE_IN_WORDS, exact_hash, normalize_text, split_words


def _characters_of(categories: tuple[str, ...]) -> list[str]:
    return [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in categories or (chr(c).isspace() and "Z" in "".join(categories))
    ]


# Every whitespace (Z*, and what Python calls a space), control and format character; every
# combining mark; then words of several scripts, and marks that compose with a letter before them.
SEPARATORS = _characters_of(("Zs", "Zl", "Zp", "Cc", "Cf"))
MARKS = _characters_of(("Mn", "Mc", "Me"))
WORDS = ["word", "WORD", "Ｗｏｒｄ", "ﬁne", "café", "cafe\u0301", "你好", "カタカナ", "ｶﾀｶﾅ", "สวัสดี", "İstanbul", "ß"]
# Letters and the marks that compose with them under NFKC (e + U+0301 is é, か + U+3099 is が,
# w + U+030A is U+1E98, which has no capital: W + U+030A stays two characters).
COMPOSING = ["e", "\u0301", "\u0308", "か", "\u3099", "W", "\u030a"]
PIECES = st.one_of(
    st.characters(exclude_categories=("Cs",)),
    st.sampled_from(SEPARATORS),
    st.sampled_from(MARKS),
    st.sampled_from(WORDS),
    st.sampled_from(INVISIBLE_IN_WORDS),
    st.sampled_from(COMPOSING),
    st.sampled_from(" .,!-'\t\n"),
)
TEXTS = st.lists(st.lists(PIECES, max_size=40).map("".join), min_size=1, max_size=8)


def test_the_strategy_covers_every_whitespace_and_control_class():
    classes = {unicodedata.category(c) for c in SEPARATORS}
    assert {"Zs", "Zl", "Zp", "Cc", "Cf"} <= classes and "\u3000" in SEPARATORS and "\x85" in SEPARATORS
    assert {unicodedata.category(c) for c in MARKS} == {"Mn", "Mc", "Me"}


@settings(max_examples=60)
@given(TEXTS)
def test_normalization_never_raises_and_gives_the_same_bytes_every_time(texts):
    normalized = normalize_text(texts).to_list()
    assert [t.encode("utf-8") for t in normalize_text(list(texts)).to_list()] == [t.encode("utf-8") for t in normalized]
    assert exact_hash(texts).tobytes() == exact_hash(list(texts)).tobytes()
    # A batch gives what its documents give one at a time.
    assert normalized == [normalize_text([t]).item() for t in texts]
    assert exact_hash(texts).tolist() == [int(exact_hash([t])[0]) for t in texts]


@settings(max_examples=60)
@given(TEXTS)
def test_normalization_is_idempotent_and_leaves_words_between_single_spaces(texts):
    normalized = normalize_text(texts).to_list()
    assert normalize_text(normalized).to_list() == normalized
    assert exact_hash(normalized).tolist() == exact_hash(texts).tolist()
    for text, words in zip(normalized, split_words(texts)):
        assert text == " ".join(words)
        assert all(words) and not any(" " in w for w in words)
        for char in text.replace(" ", ""):
            assert (
                not char.isspace() and unicodedata.category(char)[0] not in "PSZ" and unicodedata.category(char) != "Cc"
            )


@settings(max_examples=40)
@given(TEXTS, st.integers(1, 6))
def test_shingle_count_is_the_word_count_less_the_shingle_size_plus_one(texts, ngram):
    """The docs: a document of ``w >= ngram`` words has ``w - ngram + 1`` shingles, one of fewer
    words has one (all its words), one with no words has none. Equal normalized texts get equal
    shingles, and the 32-bit hashes are the low halves of the 64-bit ones."""
    words = np.array([len(w) for w in split_words(texts)])
    expected = np.where(words == 0, 0, np.maximum(words - ngram + 1, 1))
    normalized = normalize_text(texts).to_list()
    for shingle_hash in ("polynomial", "sha1"):
        narrow, offsets = shingle_hashes(texts, ngram, shingle_hash)
        wide, wide_offsets = shingle_hashes(texts, ngram, shingle_hash, wide=True)
        assert np.diff(offsets).tolist() == expected.tolist() and np.array_equal(offsets, wide_offsets)
        assert np.array_equal(signature_hashes(wide), narrow)
        again, _ = shingle_hashes(normalized, ngram, shingle_hash, wide=True)
        assert again.tobytes() == wide.tobytes()


def test_the_non_ascii_rules_in_two_passes_give_what_one_pass_with_a_group_gave():
    """Every code point (surrogates aside), alone, after a letter, between a letter and a mark and
    twice in a row: the two passes of split_non_ascii match the one-pass rule they replaced
    (an unspaced character with its marks, or a separator, in one alternation)."""
    import polars as pl

    from pipeline.dedup.normalize import _UNSPACED, split_non_ascii

    one_pass = rf"([{_UNSPACED}]\p{{M}}*)|[[\p{{P}}\p{{S}}\p{{Z}}\p{{Cc}}\p{{Co}}\p{{Cn}}\p{{Cf}}]&&[^\x00-\x7f]]"
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    texts = pl.Series([f"{c}a{c}\u0301{c}{c}\u3099b" for c in chars], dtype=pl.String)
    expected = texts.str.replace_all(one_pass, " $1 ")
    got = split_non_ascii(texts)
    assert got.equals(expected)
    # the case the separator class leaves out on purpose: a Han radical is a symbol (So) and a word
    assert unicodedata.category("\u2e80") == "So" and split_non_ascii(pl.Series(["a\u2e80b"])).item() == "a \u2e80 b"
