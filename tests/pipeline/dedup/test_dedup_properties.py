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


def _prepared_in_python(texts: list[str]) -> list[str]:
    """Steps 1 to 3 on each whole text in Python (NFKC, lowercase, NFKC, the polars rules): the
    path prepare_texts keeps for the documents whose characters depend on their neighbours."""
    from pipeline.dedup.normalize import _prepare_non_ascii

    return _prepare_non_ascii(texts)


def test_only_marks_are_second_characters_of_a_canonical_composition():
    """prepared_alone takes the characters NFKC may join to the one before as the combining marks
    and the Hangul jamo; this Python's Unicode data holds no other canonical pair, and no other
    character of a nonzero combining class."""
    from pipeline.dedup.normalize import _composes

    seconds = set()
    for code in range(sys.maxunicode + 1):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<") and len(decomposition.split()) == 2:
            seconds.add(chr(int(decomposition.split()[1], 16)))
    assert len(seconds) > 50 and all(_composes(char) for char in seconds)
    assert all(_composes(chr(c)) for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c)))
    # the Hangul vowels and final consonants compose by rule: U+1100 U+1161 U+11A8 is one syllable
    assert unicodedata.normalize("NFKC", "\u1100\u1161\u11a8") == "\uac01"


def test_compiled_preparation_gives_the_python_bytes_for_every_code_point():
    """Every non-ASCII code point (surrogates aside) after an ASCII capital, between two ASCII
    letters and twice in a row: the compiled pass (each character's form learned alone) gives the
    bytes of the whole-text Python preparation. It fails without the rules of prepared_alone: the
    Lao U+0ECE is a mark to the regex engine (Unicode 15) but unassigned in Python's 14, and the
    lunate capital sigma U+03F9 lowercases by its place in the word once NFKC has made it a sigma."""
    from pipeline.dedup.normalize import prepare_texts

    chars = [chr(c) for c in range(0x80, sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"A{c}b{c}{c} Z" for c in chars]
    assert prepare_texts(texts).to_pylist() == _prepared_in_python(texts)


def test_ascii_runs_counted_eight_bytes_at_a_time_give_the_python_bytes():
    """The lengths pass counts 8 ASCII bytes at once where they start at a multiple of 8 of the
    batch's buffer: runs of every length from every offset, against and between non-ASCII
    characters (two and four bytes long, one that prepares much longer, a capital sigma whose form
    depends on its neighbours), give the bytes of the Python preparation."""
    from pipeline.dedup.normalize import prepare_texts

    texts = [
        "x" * lead + "Ab.CDeFgHiJ KLmNoP"[:run] + other + "QrStUvWxYz 0123456789"[:tail]
        for lead in range(9)
        for run in (0, 7, 8, 9, 16, 17)
        for other in ("", "é", "\ufdfa", "Σ", "\U0001d6ba")
        for tail in (0, 8, 15)
    ]
    assert prepare_texts(texts).to_pylist() == _prepared_in_python(texts)


# Characters whose form depends on their neighbours, or that make others': capital sigmas (and
# what NFKC makes one of), marks (the regex engine's too), Hangul jamo, invisible characters.
TRICKY = list("ΣσςΑβΓϹ\U0001d6ba\u0301\u0308\u0ece\u0e31\u0e48\u3099가\u1100\u1161\u11a8ㄱㅏ漢かカไລ")
TRICKY += list("ＡＢｃ１，。\u00a0\u2019…™ﬁİĲéÉßẞ\ufdfa\u2e80\uf900\U0001f600") + list(INVISIBLE_IN_WORDS)
PREPARED_TEXTS = st.lists(
    st.lists(st.one_of(st.sampled_from(TRICKY), st.sampled_from("aZ9 .,-\n'"), PIECES), max_size=30).map("".join),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200)
@given(PREPARED_TEXTS)
def test_compiled_preparation_gives_the_python_bytes_in_any_context(texts):
    from pipeline.dedup.normalize import prepare_texts

    assert prepare_texts(texts).to_pylist() == _prepared_in_python(texts)


@settings(max_examples=200)
@given(PREPARED_TEXTS, st.integers(0, 80))
def test_words_in_one_pass_are_the_words_of_the_prepared_bytes(texts, long_word):
    """words() prepares and hashes in one compiled pass that never writes the prepared bytes; it
    finds the words and hashes that hashing the prepared bytes does, with words about the power
    table's 64 bytes among them (ASCII and not) and documents prepared in Python."""
    from pipeline.dedup.normalize import prepare_texts, words

    texts = [*texts, "é" * long_word + " ab", "x" * long_word + "\u0301 Σ", ""]
    once, twice = words(texts), words(texts, prepare_texts(texts))
    assert np.array_equal(once.hashes, twice.hashes) and np.array_equal(once.doc_offsets, twice.doc_offsets)
    assert once.data.tobytes() == twice.data.tobytes() and np.array_equal(once.offsets, twice.offsets)


def test_threads_learning_code_points_at_once_prepare_what_one_thread_does():
    """The table of prepared forms is shared by the threads of a process and grows under a lock:
    threads that meet new code points at the same time prepare what Python does."""
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.dedup.normalize import prepare_texts

    blocks = [
        [f"Ab{chr(c)}{chr(c + 1)} z" for c in range(start, start + 3000)] for start in range(0x4E00, 0x9000, 2000)
    ]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda block: prepare_texts(block).to_pylist(), blocks))
    assert got == [_prepared_in_python(block) for block in blocks]
