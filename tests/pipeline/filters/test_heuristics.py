"""Heuristic filters: golden documents on both sides of every published threshold.

Ratios are built as exact fractions of the threshold (5/50 == 0.1 in floating point too), so each
rule is checked exactly at its threshold and one step past it.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.filters.heuristics import (
    C4_END_MARKS,
    HEURISTIC_FILTERS,
    C4Quality,
    FineWebQuality,
    GopherQuality,
    GopherRepetition,
)
from pipeline.filters.text import is_spaceless_code, split_lines, split_paragraphs, split_words, words
from pipeline.formats.langcodes import parse_lang
from pipeline.formats.step import FilterOutput


def batch(texts: list[str], lang: str | None | list = "en") -> pl.DataFrame:
    langs = lang if isinstance(lang, list) else [lang] * len(texts)
    n = len(texts)
    return pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(n)],
            "text": texts,
            "source": ["test"] * n,
            "url": [None] * n,
            "meta": [None] * n,
            "lang": langs,
            "lang_score": [1.0] * n,
        },
        schema_overrides={"url": pl.String, "meta": pl.String, "lang": pl.String},
    )


def run(filt, texts: list[str], lang="en") -> tuple[FilterOutput, dict[str, list[bool]]]:
    """The filter's output on ``texts`` and, per rule name, whether it fires on each text."""
    out = filt.apply(batch(texts, lang))
    fires = {r.name: out.measures.select(r.fires(pl.col(r.measure))).to_series().to_list() for r in filt.rules()}
    return out, fires


def values(out: FilterOutput, measure: str) -> list:
    return out.measures.get_column(measure).to_list()


def distinct_words(k: int, length: int, prefix: str = "q") -> list[str]:
    """k different lowercase words of ``length`` characters, all starting with ``prefix``."""
    out = []
    for i in range(k):
        tail, digits = "", i
        for _ in range(length - len(prefix)):
            tail = string.ascii_lowercase[digits % 26] + tail
            digits //= 26
        assert digits == 0, "not enough distinct words of that length"
        out.append(prefix + tail)
    return out


# ---------------------------------------------------------------------------------------------
# text helpers


def test_words_strip_punctuation_and_split_spaceless_scripts():
    text = "(Hello), world! don't -- #tag 3.5% … 中文字 Python编程 カタカナー"
    got = pl.select(words(pl.lit(text))).item().to_list()
    assert got == [
        "Hello",
        "world",
        "don't",
        "tag",
        "3.5",
        "中",
        "文",
        "字",
        "Python",
        "编",
        "程",
        "カ",
        "タ",
        "カ",
        "ナ",
        "ー",
    ]


# Characters of every class the word pattern reads: spaces (ASCII and not), punctuation and
# symbols, letters of spaced and spaceless scripts, combining marks (of both), digits, emoji and
# CJK characters above U+FFFF, Hangul.
WORD_CHARS = (
    " \t\n\u00a0\u3000.,!?'\"-#%…()「」$+€=abcZé\u0301日本語中文カタナーひらがなไทย\u0e31\u0e48ລາວ가나다123🙂𠀋𝐀"
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=WORD_CHARS, max_size=40), min_size=1, max_size=8))
def test_the_compiled_word_split_finds_what_the_word_pattern_finds(texts):
    series = pl.Series(texts, dtype=pl.String)
    values, counts, chars, letters = split_words(series)
    expected = series.to_frame("t").select(words(pl.col("t"))).to_series()
    assert counts.tolist() == expected.list.len().to_list()
    assert values.to_list() == [w for ws in expected.to_list() for w in ws]
    assert chars.tolist() == [len(w) for ws in expected.to_list() for w in ws]
    assert letters.tolist() == values.str.contains(r"\p{L}").to_list()


def test_lines_and_paragraphs_follow_python():
    texts = ["", "a\n", "\n", "a\r\nb\rc\x85d\u2028e\n\nf", "  p1\n\n \n\n\np2\nx  ", "one"]
    frame = pl.DataFrame({"t": texts})
    assert frame.select(split_lines(pl.col("t"))).to_series().to_list() == [t.splitlines() for t in texts]
    assert frame.select(split_paragraphs(pl.col("t"))).to_series().to_list() == [
        re.split(r"\n{2,}", t.strip()) for t in texts
    ]


# ---------------------------------------------------------------------------------------------
# Gopher quality


def test_gopher_quality_word_count_bounds():
    w = "word "
    out, fires = run(GopherQuality(), [w * 49, w * 50, w * 100_000, w * 100_001])
    assert values(out, "word_count") == [49, 50, 100_000, 100_001]
    assert fires["gopher_quality.word_count_min"] == [True, False, False, False]
    assert fires["gopher_quality.word_count_max"] == [False, False, False, True]


def test_gopher_quality_mean_word_length_bounds():
    docs = [
        " ".join(["abc"] * 50),  # 3.0
        " ".join(["abc"] * 49 + ["ab"]),  # 149 / 50
        " ".join(["abcdefghij"] * 50),  # 10.0
        " ".join(["abcdefghij"] * 49 + ["abcdefghijk"]),  # 501 / 50
    ]
    out, fires = run(GopherQuality(), docs)
    assert values(out, "mean_word_length") == pytest.approx([3.0, 2.98, 10.0, 10.02])
    assert fires["gopher_quality.mean_word_length_min"] == [False, True, False, False]
    assert fires["gopher_quality.mean_word_length_max"] == [False, False, False, True]


def test_gopher_quality_symbol_to_word_ratios():
    base = ["word"] * 50
    docs = [
        " ".join(["#tag"] * 5 + base[5:]),  # 5 hashes / 50 words
        " ".join(["#tag"] * 6 + base[6:]),
        " ".join(base) + " ..." * 3 + " …" * 2,  # 5 ellipses (not words) / 50 words
        " ".join(base) + " ..." * 3 + " …" * 3,
    ]
    out, fires = run(GopherQuality(), docs)
    assert values(out, "word_count") == [50] * 4
    assert values(out, "hash_to_word_ratio") == [0.1, 0.12, 0.0, 0.0]
    assert values(out, "ellipsis_to_word_ratio") == [0.0, 0.0, 0.1, 0.12]
    assert fires["gopher_quality.hash_to_word_ratio"] == [False, True, False, False]
    assert fires["gopher_quality.ellipsis_to_word_ratio"] == [False, False, False, True]


def test_gopher_quality_bullet_and_ellipsis_lines():
    line = "the cat and the dog sat with me"
    bullets_9_of_10 = "\n".join([f"• {line}"] * 5 + [f"  - {line}"] * 4 + [line])
    bullets_19_of_20 = "\n".join([f"• {line}"] * 19 + [line])
    ellipses_3_of_10 = "\n".join([line + "..."] * 2 + [line + " …  "] + [line] * 7)
    ellipses_4_of_10 = "\n".join([line + "..."] * 4 + [line] * 6)
    out, fires = run(GopherQuality(), [bullets_9_of_10, bullets_19_of_20, ellipses_3_of_10, ellipses_4_of_10])
    assert values(out, "bullet_lines_ratio") == [0.9, 0.95, 0.0, 0.0]
    assert values(out, "ellipsis_lines_ratio") == [0.0, 0.0, 0.3, 0.4]
    assert fires["gopher_quality.bullet_lines_ratio"] == [False, True, False, False]
    assert fires["gopher_quality.ellipsis_lines_ratio"] == [False, False, False, True]


def test_gopher_quality_alphabetic_words():
    docs = [" ".join(["word"] * 40 + ["2024"] * 10), " ".join(["word"] * 39 + ["3.14"] * 11)]
    out, fires = run(GopherQuality(), docs)
    assert values(out, "alpha_words_ratio") == [0.8, 0.78]
    assert fires["gopher_quality.alpha_words_ratio"] == [False, True]


def test_gopher_quality_stop_words_distinct_case_insensitive_english_only():
    filler = " ".join(["word"] * 50)
    docs = [f"The {filler} THE the", f"The {filler} of", filler, f"the {filler} of", f"the {filler} of"]
    out, fires = run(GopherQuality(), docs, lang=["en", "en", "en-US", "fr", None])
    assert values(out, "stop_word_count") == [1, 2, 0, None, None]
    assert fires["gopher_quality.stop_words_min"] == [True, False, True, False, False]


def test_gopher_quality_stop_words_of_another_language():
    gq = GopherQuality(stop_words={"de": ["der", "die", "und", "straße"]})
    out, _ = run(gq, ["Der Hund und die STRASSE", "DER der STRAßE"], lang="de")
    assert values(out, "stop_word_count") == [3, 2]


def test_gopher_quality_spaceless_scripts_count_characters():
    chinese = "我们今天去公园散步，天气很好。"  # 13 characters, 2 punctuation marks
    japanese = "日本語のテキストです。"  # 10 characters
    docs = [chinese * 3 + "我们今天去公园散步，天", chinese * 4, japanese]
    out, fires = run(GopherQuality(), docs, lang=["zh", None, "ja"])
    assert values(out, "word_count") == [49, 52, 10]
    assert values(out, "mean_word_length") == [None, None, None]  # the 3..10 range is for spaced words
    assert values(out, "alpha_words_ratio") == [1.0, 1.0, 1.0]
    assert fires["gopher_quality.word_count_min"] == [True, False, True]
    assert not any(fires["gopher_quality.mean_word_length_min"])


@pytest.mark.parametrize(
    "code, expected",
    [
        ("en", ("en", "Latn")),
        ("EN", ("en", "Latn")),
        ("en-US", ("en", "Latn")),
        ("eng", ("en", "Latn")),
        ("eng_Latn", ("en", "Latn")),
        ("zh", ("zh", "Hani")),
        ("zh-Hant-TW", ("zh", "Hant")),
        ("zh_TW", ("zh", "Hani")),
        ("cmn_Hani", ("zh", "Hani")),
        ("zho_Hans", ("zh", "Hans")),
        ("yue", ("yue", "Hani")),
        ("yue_Hant", ("yue", "Hant")),
        ("wuu", ("wuu", "Hani")),
        ("jpn_Jpan", ("ja", "Jpan")),
        ("tha_Thai", ("th", "Thai")),
        ("khm_Khmr", ("km", "Khmr")),
        ("lao_Laoo", ("lo", "Laoo")),
        ("mya_Mymr", ("my", "Mymr")),
        ("bod_Tibt", ("bo", "Tibt")),
        ("dzo_Tibt", ("dz", "Tibt")),
        ("arb_Arab", ("ar", "Arab")),
        ("sr_Latn", ("sr", "Latn")),
        ("ger", ("de", "Latn")),
        ("kor_Hang", ("ko", "Hang")),
        ("xyz_Latn", ("xyz", "Latn")),
        ("xyz", ("xyz", None)),
        ("", (None, None)),
        (None, (None, None)),
        ("not a code", (None, None)),
    ],
)
def test_parse_lang_reads_iso_bcp47_and_glotlid_codes(code, expected):
    assert parse_lang(code) == expected


@pytest.mark.parametrize(
    "code, expected",
    [
        ("zh", True),
        ("yue", True),
        ("wuu", True),
        ("cmn_Hani", True),
        ("zho_Hans", True),
        ("zho_Hant", True),
        ("ja", True),
        ("jpn_Jpan", True),
        ("tha_Thai", True),
        ("lo", True),
        ("km", True),
        ("my", True),
        ("bo", True),
        ("en", False),
        ("eng_Latn", False),
        ("ko", False),
        ("kor_Hang", False),
        ("sr_Cyrl", False),
        ("xyz", None),
        ("und_Zyyy", None),
        (None, None),
    ],
)
def test_spaceless_is_decided_by_script_not_code_length(code, expected):
    assert is_spaceless_code(code) is expected


def test_gopher_quality_keeps_chinese_labelled_by_three_letter_and_glotlid_codes():
    chinese = "我们今天去公园散步，天气很好。" * 6  # 78 characters, one word each
    codes = ["yue", "wuu", "cmn_Hani", "zho_Hans", "zho_Hant", "yue_Hant", "zh"]
    out, fires = run(GopherQuality(), [chinese] * len(codes), lang=codes)
    assert values(out, "mean_word_length") == [None] * len(codes)
    assert not any(fires["gopher_quality.mean_word_length_min"])


def test_gopher_quality_stop_words_apply_to_three_letter_and_glotlid_english():
    filler = " ".join(["word"] * 50)
    docs = [f"the {filler}", f"the {filler} of"]
    for code in ("eng", "eng_Latn", "en-GB"):
        out, fires = run(GopherQuality(), docs, lang=code)
        assert values(out, "stop_word_count") == [1, 2], code
        assert fires["gopher_quality.stop_words_min"] == [True, False], code
    # a list keyed by a three-letter code applies to two-letter labels too
    out, _ = run(GopherQuality(stop_words={"deu": ["der", "und"]}), ["der und " + filler], lang="de")
    assert values(out, "stop_word_count") == [2]


def test_gopher_quality_threshold_none_disables_rule():
    names = [r.name for r in GopherQuality(min_stop_words=None, max_words=None).rules()]
    assert "gopher_quality.stop_words_min" not in names and "gopher_quality.word_count_max" not in names
    assert len(names) == 8


# ---------------------------------------------------------------------------------------------
# Gopher repetition


def lines_with_duplicates(total: int, duplicates: int) -> str:
    unique = [f"line {w} here" for w in distinct_words(total - duplicates, 4)]
    return "\n".join(unique + [unique[0]] * duplicates)


def text_with_duplicate_chars(dup_chars: int, length: int, sep: str) -> str:
    """A text of ``length`` characters: a piece of ``dup_chars`` characters, a filler piece, the
    first piece again, separated by ``sep``."""
    filler = "f" * (length - 2 * dup_chars - 2 * len(sep))
    return sep.join(["r" * dup_chars, filler, "r" * dup_chars])


def test_gopher_repetition_duplicate_line_and_paragraph_fractions():
    lines_30 = lines_with_duplicates(100, 30)
    lines_31 = lines_with_duplicates(100, 31)
    paras_30 = lines_30.replace("\n", "\n\n\n")
    paras_31 = lines_31.replace("\n", "\n\n")
    out, fires = run(GopherRepetition(), [lines_30, lines_31, paras_30, paras_31])
    assert values(out, "dup_line_frac") == [0.3, 0.31, 0.3, 0.31]
    assert values(out, "dup_para_frac") == [0.0, 0.0, 0.3, 0.31]
    assert fires["gopher_repetition.dup_line_frac"] == [False, True, False, True]
    assert fires["gopher_repetition.dup_para_frac"] == [False, False, False, True]


def test_gopher_repetition_duplicate_character_fractions():
    docs = [
        text_with_duplicate_chars(40, 200, "\n"),  # 40 / 200
        text_with_duplicate_chars(40, 199, "\n"),
        text_with_duplicate_chars(40, 200, "\n\n"),
        text_with_duplicate_chars(40, 199, "\n\n"),
    ]
    out, fires = run(GopherRepetition(), docs)
    assert values(out, "dup_line_char_frac") == pytest.approx([0.2, 40 / 199, 0.2, 40 / 199])
    assert values(out, "dup_para_char_frac") == pytest.approx([0.0, 0.0, 0.2, 40 / 199])
    assert fires["gopher_repetition.dup_line_char_frac"] == [False, True, False, True]
    assert fires["gopher_repetition.dup_para_char_frac"] == [False, False, False, True]


def repeated_ngram_doc(gram: list[str], total_chars: int) -> str:
    """``gram`` twice, apart, among distinct filler words: ``total_chars`` word characters."""
    rest = total_chars - 2 * sum(map(len, gram))
    fill = distinct_words(rest // 4, 4, prefix="z")
    if rest % 4:
        fill.append(distinct_words(1, rest % 4 + 4, prefix="y")[0])
        fill.pop(0)
    assert sum(map(len, fill)) == rest
    half = len(fill) // 2
    return " ".join(gram + fill[:half] + gram + fill[half:])


GRAM_LENGTHS = {  # word lengths of an n-gram whose characters are k hundredths of 200
    2: [10, 10],
    3: [6, 6, 6],
    4: [4, 4, 4, 4],
    5: [3] * 5,
    6: [3, 3, 2, 2, 2, 2],
    7: [2] * 6 + [1],
    8: [2] * 4 + [1] * 4,
    9: [2, 2] + [1] * 7,
    10: [1] * 10,
}
THRESHOLDS = {2: 0.20, 3: 0.18, 4: 0.16, 5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}


@pytest.mark.parametrize("n", sorted(THRESHOLDS))
def test_gopher_repetition_ngram_fractions_at_threshold(n):
    letters = iter("abcdefghijklmnop")
    gram = [next(letters) * length for length in GRAM_LENGTHS[n]]
    assert 2 * sum(GRAM_LENGTHS[n]) == round(THRESHOLDS[n] * 200)
    measure = f"top_{n}gram_char_frac" if n <= 4 else f"dup_{n}gram_char_frac"
    out, fires = run(GopherRepetition(), [repeated_ngram_doc(gram, 200), repeated_ngram_doc(gram, 199)])
    assert values(out, measure) == pytest.approx([THRESHOLDS[n], THRESHOLDS[n] * 200 / 199])
    assert values(out, measure)[0] == THRESHOLDS[n]
    assert fires[f"gopher_repetition.{measure}"] == [False, True]


def test_gopher_repetition_overlapping_ngrams_count_once():
    # "la la" occurs 3 times over 4 words: 8 characters covered, not 12
    # the repeated 5-grams of "x y x y x y x y" cover all 8 words once
    out, _ = run(GopherRepetition(), ["la la la la", "x y x y x y x y", "one two"])
    assert values(out, "top_2gram_char_frac") == [1.0, 1.0, 1.0]
    assert values(out, "dup_5gram_char_frac") == [0.0, 1.0, 0.0]
    assert values(out, "top_3gram_char_frac")[2] is None  # fewer than 3 words: no 3-gram


def test_gopher_repetition_spaceless_text_uses_character_ngrams():
    out, _ = run(GopherRepetition(), ["中文字" * 30], lang=None)  # a spaceless script, no language
    # 2-grams 中文, 文字 (30 each) and 字中 (29): 中文 comes first and covers 60 of 90 characters
    assert values(out, "top_2gram_char_frac") == pytest.approx([60 / 90])
    assert values(out, "top_3gram_char_frac") == [1.0]


def test_gopher_repetition_measures_chinese_and_japanese_on_ngrams_as_long_as_words():
    # Sentences that share the 6-character ending "ができます。" and nothing as long as 5 words.
    starts = ["東京", "大阪", "京都", "奈良", "札幌", "福岡", "神戸", "横浜", "仙台", "広島", "長崎", "金沢"]
    text = "".join(f"{a}{b}ができます。" for a, b in zip(starts, reversed(starts)))
    sizes = {5: 0.15, 9: 0.11}  # 5 words of Japanese: 5 x 1.80 = 9 characters
    characters, _ = run(GopherRepetition(dup_ngram_char_frac=sizes), [text], lang=None)
    japanese, fires = run(GopherRepetition(), [text], lang="ja")
    assert values(characters, "dup_5gram_char_frac")[0] > 0.4  # 5 characters: the shared ending repeats
    assert values(japanese, "dup_5gram_char_frac") == values(characters, "dup_9gram_char_frac")
    assert values(japanese, "dup_5gram_char_frac")[0] < 0.15 and not fires["gopher_repetition.dup_5gram_char_frac"][0]
    chinese, _ = run(GopherRepetition(), ["中文字" * 30], lang="zho_Hans")  # 2 words: 2 x 1.62 -> 3 characters
    assert values(chinese, "top_2gram_char_frac") == [1.0]


def test_gopher_repetition_measures_thai_on_ngrams_as_long_as_words():
    # Phrases sharing the ending "สามารถทำได้" (10 characters with their marks), nothing of 5 words.
    starts = ["บ้าน", "เมือง", "ป่า", "ทะเล", "ภูเขา", "แม่น้ำ", "ถนน", "ตลาด", "วัด", "โรงเรียน", "สวน", "นา"]
    text = " ".join(f"{a}{b}สามารถทำได้" for a, b in zip(starts, reversed(starts)))
    sizes = {5: 0.15, 19: 0.11}  # 5 words of Thai: round(5 x 3.84) = 19 characters
    characters, _ = run(GopherRepetition(dup_ngram_char_frac=sizes), [text], lang=None)
    thai, fires = run(GopherRepetition(), [text], lang="th")
    assert values(characters, "dup_5gram_char_frac")[0] > 0.4
    assert values(thai, "dup_5gram_char_frac") == values(characters, "dup_19gram_char_frac")
    assert not fires["gopher_repetition.dup_5gram_char_frac"][0]


def reference_repetition(text: str) -> dict[str, float | None]:
    """A plain reading of the definitions, for ASCII text."""
    ws = [w for w in (t.strip(string.punctuation) for t in text.split()) if w]
    total = sum(map(len, ws))
    out: dict[str, float | None] = {}

    def covered(starts, n):
        return sum(len(ws[i]) for i in {i for s in starts for i in range(s, s + n)})

    for n in range(2, 11):
        grams = [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]
        counts = Counter(grams)
        if n <= 4:
            if not grams:
                out[f"top_{n}gram_char_frac"] = None
                continue
            top = next(g for g in grams if counts[g] == max(counts.values()))
            out[f"top_{n}gram_char_frac"] = covered([i for i, g in enumerate(grams) if g == top], n) / total
        else:
            starts = [i for i, g in enumerate(grams) if counts[g] > 1]
            out[f"dup_{n}gram_char_frac"] = covered(starts, n) / total if total else None
    lines = [line for line in text.split("\n") if line]
    seen: set[str] = set()
    dups = [line for line in lines if line in seen or seen.add(line)]
    out["dup_line_frac"] = len(dups) / len(lines) if lines else None
    out["dup_line_char_frac"] = sum(map(len, dups)) / len(text) if text else None
    return out


def test_gopher_repetition_matches_a_plain_reading_on_random_documents():
    rng = random.Random(7)
    vocab = "the cat sat on a mat and it was very happy, (truly) so!".split()
    texts = []
    for _ in range(150):
        lines = [" ".join(rng.choices(vocab, k=rng.randint(0, 14))) for _ in range(rng.randint(1, 8))]
        lines += rng.sample(lines, k=rng.randint(0, len(lines)))
        texts.append("\n".join(lines))
    out = GopherRepetition().apply(batch(texts)).measures.to_dicts()
    for text, got in zip(texts, out):
        for measure, expected in reference_repetition(text).items():
            assert got[measure] == pytest.approx(expected), (text, measure)


# ---------------------------------------------------------------------------------------------
# C4


PAGE = """Home | News | Contact
Welcome to our site! We write about gardening every week.
The tomato harvest was larger than expected this year [1], thanks to rain.
   Read more...
Please enable JavaScript to view the comments powered by a vendor.
This site uses cookies to improve your experience, as explained here.
Short line here.
Gardening is a calm hobby that rewards patience and care.
Copyright 2024"""


def test_c4_line_removal_exact_output_and_counts():
    out, fires = run(C4Quality(), [PAGE])
    assert out.text.to_list() == [
        "Welcome to our site! We write about gardening every week.\n"
        "The tomato harvest was larger than expected this year , thanks to rain.\n"
        "Gardening is a calm hobby that rewards patience and care."
    ]
    row = out.measures.row(0, named=True)
    assert row == {
        "has_lorem_ipsum": 0.0,
        "has_curly_bracket": 0.0,
        "sentence_count": 4.0,
        "lines_removed_too_long_word": 0.0,
        "lines_removed_no_terminal_punct": 3.0,
        "lines_removed_too_few_words": 1.0,
        "lines_removed_javascript": 1.0,
        "lines_removed_policy": 1.0,
        "lines_kept": 3.0,
    }
    assert out.counts["lines_removed_no_terminal_punct"].to_list() == [3]
    assert not any(v[0] for v in fires.values())


def test_c4_line_rules_at_their_limits():
    four_words = "one two three four."
    five_words = "one two three four five."
    long_word = "w" * 1000
    out, _ = run(
        C4Quality(min_sentences=None),
        [
            four_words,
            five_words,
            f"{long_word} a b c d.",
            f"{long_word}x a b c d.",
            'He said "it is fine now"',
            "a b c d e'",
            "a b c d e...",
        ],
    )
    assert values(out, "lines_kept") == [0, 1, 1, 0, 1, 0, 0]
    assert values(out, "lines_removed_too_few_words") == [1, 0, 0, 0, 0, 0, 0]
    assert values(out, "lines_removed_too_long_word") == [0, 0, 0, 1, 0, 0, 0]
    assert values(out, "lines_removed_no_terminal_punct") == [0, 0, 0, 0, 0, 1, 1]


def test_c4_page_rules():
    s = "This sentence has enough words in it."
    docs = [
        "\n".join([s] * 3),  # 3 sentences
        "\n".join([s] * 2),
        f"{s} Another one follows here. And a third.",  # one line, 3 sentences
        "\n".join([s] * 3 + ["Lorem ipsum dolor sit amet, consectetur."]),
        "\n".join([s] * 3 + ["function f() { return 1; } is code here."]),
        "\n".join([s] * 3 + ["var x = { a: 1 }"]),  # the bracket line goes first (no end mark)
        "\n".join([s] * 3 + ["Enable javascript: { is needed here }."]),  # javascript line removed first
    ]
    out, fires = run(C4Quality(), docs)
    assert values(out, "sentence_count") == [3, 2, 3, 3, 3, 3, 3]
    assert fires["c4_quality.min_sentences"] == [False, True, False, False, False, False, False]
    assert fires["c4_quality.lorem_ipsum"] == [False, False, False, True, False, False, False]
    assert fires["c4_quality.curly_bracket"] == [False, False, False, False, True, False, False]


def test_c4_sentences_skip_initials_and_dotted_abbreviations():
    lines = [
        "J. R. R. Tolkien wrote the book.",  # 1
        "In the U.S., prices rose. Then they fell!",  # 2
        'He said "Stop." Then he left the room.',  # 2
    ]
    out, fires = run(C4Quality(), ["\n".join(lines[:1]), "\n".join(lines[1:]), "\n".join(lines)])
    assert values(out, "sentence_count") == [1, 4, 5]
    assert fires["c4_quality.min_sentences"] == [True, False, False]


def test_c4_spaceless_characters_count_as_words():
    docs = ["我们今天去公园.", "我们今.", "We 去公园 today."]  # 7, 3 and 5 words
    out, _ = run(C4Quality(min_sentences=None), docs, lang="zh")
    assert values(out, "lines_kept") == [1, 0, 1]


def test_c4_sentences_end_at_every_scripts_terminals_inside_lines_and_at_their_ends():
    docs = {
        "zh": "今天天气很好。我们去公园散步了！你想一起去吗？\n公园里有很多人在跑步和打太极拳。",
        "ja": "量子コンピュータを使うと素因数分解が高速にできる。具体的に何が高速化するのでしょう？\n"
        "「これを知るのが本稿の目的です。」",
        "hy": "Արքաների հովիտը քարքարոտ հովիտ է Եգիպտոսում։ Այնտեղ կառուցվել են դամբարաններ։ Այն հայտնի է։",
        "hi": "आज मौसम बहुत अच्छा है। हम पार्क में टहलने गए। क्या आप भी चलेंगे?",
        "ar": "الطقس جميل اليوم. ذهبنا إلى الحديقة للتنزه. هل تريد أن تأتي معنا؟",
        "en": "The weather is fine today. We walked in the park. Will you come along?",
    }
    out, fires = run(C4Quality(), list(docs.values()), lang=list(docs))
    assert dict(zip(docs, values(out, "sentence_count"))) == {"zh": 4, "ja": 3, "hy": 3, "hi": 3, "ar": 3, "en": 3}
    assert values(out, "lines_removed_no_terminal_punct") == [0] * len(docs)
    assert not any(fires["c4_quality.min_sentences"])
    # The reference's own end marks (ASCII only) remove the lines of the scripts with terminals of their own.
    reference, fires = run(C4Quality(end_marks=C4_END_MARKS), list(docs.values()), lang=list(docs))
    assert values(reference, "lines_removed_no_terminal_punct") == [2, 2, 1, 0, 1, 0]
    assert fires["c4_quality.min_sentences"] == [True, True, True, False, True, False]


def test_c4_a_line_may_close_its_sentence_with_quotes_or_brackets():
    lines = ['He said "hi."', "She left.”", "(It rained.)", "「終わりです。」", "ends with a quote'", "no mark at all"]
    out, _ = run(C4Quality(min_sentences=None, min_words_per_line=0), lines)
    assert values(out, "lines_removed_no_terminal_punct") == [0, 0, 0, 0, 1, 1]


# ---------------------------------------------------------------------------------------------
# FineWeb


def test_fineweb_line_punctuation_ratio():
    long = "x" * 40
    docs = ["\n".join([long + "."] * 12 + [long] * 88), "\n".join([long + "!"] * 13 + [long] * 87)]
    out, fires = run(FineWebQuality(), docs)
    assert values(out, "line_punct_ratio") == [0.12, 0.13]
    assert fires["fineweb_quality.line_punct_ratio"] == [True, False]


def test_fineweb_short_line_ratio():
    long, short = "y" * 30 + ".", "z" * 29 + "."  # 31 and 30 characters: neither is short
    docs = [
        "\n".join(["s" * 29] * 67 + [long] * 33),  # 29 characters: short
        "\n".join(["s" * 29] * 66 + [short] * 34),
    ]
    out, fires = run(FineWebQuality(), docs)
    assert values(out, "short_line_ratio") == [0.67, 0.66]
    assert fires["fineweb_quality.short_line_ratio"] == [True, False]


def test_fineweb_duplicate_line_characters():
    dup = "d" * 10
    unique = distinct_words(8, 10, prefix="u")
    docs = [
        "\n".join([dup, *unique, dup]),  # 10 duplicate characters of 100 (newlines not counted)
        "\n".join([dup, *unique, "u" * 11, dup]),  # 10 of 111
        "\n".join([dup, "   ", "", "   ", dup]),  # blank lines are never duplicates: 10 of 26
    ]
    out, fires = run(FineWebQuality(), docs)
    assert values(out, "char_dup_ratio") == [0.1, 10 / 111, 10 / 26]
    assert fires["fineweb_quality.char_dup_ratio"] == [True, False, True]


def test_fineweb_counts_non_blank_lines_and_any_sentence_terminal():
    paragraphs = "\n\n".join(["A full sentence that is long enough."] * 3)  # blank lines not counted
    sentence = "这是一个足够长的句子，用来测试标点符号的结尾。"  # 23 characters
    chinese = "\n".join([sentence] * 2 + ["没有标点"])
    out, fires = run(FineWebQuality(), [paragraphs, chinese, "", " \n \n"], lang=["en", "zh", "en", "en"])
    assert values(out, "line_punct_ratio") == [1.0, pytest.approx(2 / 3), 0.0, 0.0]
    assert values(out, "short_line_ratio") == [0.0, 1.0, None, None]
    assert values(out, "char_dup_ratio") == [pytest.approx(70 / 105), pytest.approx(23 / 50), None, 0.0]
    assert fires["fineweb_quality.line_punct_ratio"] == [False, False, True, True]


def test_fineweb_newline_ratio():
    docs = ["one two three\nfour five six\nseven eight nine\nten.", "a b c\nd e f\ng h i\nj k l\nm."]
    out, fires = run(FineWebQuality(), docs)
    assert values(out, "new_line_ratio") == [0.3, 4 / 13]
    assert fires["fineweb_quality.new_line_ratio"] == [False, True]


# ---------------------------------------------------------------------------------------------
# all filters


@pytest.mark.parametrize("name", sorted(HEURISTIC_FILTERS))
def test_measures_are_float64_in_input_order(name):
    filt = HEURISTIC_FILTERS[name]()
    assert filt.name == name
    texts = ["", "Short text.", PAGE, "中文字" * 20, "The cat sat on the mat.\n" * 30]
    out = filt.apply(batch(texts, lang=["en", None, "en", "zh", "en"]))
    assert out.measures.height == len(texts)
    assert set(out.measures.dtypes) == {pl.Float64}
    assert {r.measure for r in filt.rules()} <= set(out.measures.columns)
    assert all(r.name.startswith(f"{name}.") for r in filt.rules())
    reversed_out = filt.apply(batch(texts[::-1], lang=["en", "zh", "en", None, "en"]))
    assert reversed_out.measures.reverse().equals(out.measures)
    empty = filt.apply(batch([], lang=[]))
    assert empty.measures.height == 0 and empty.measures.columns == out.measures.columns


def test_abbreviation_ends_are_counted_as_the_pattern_counts_them_on_every_line():
    """Counted only on the lines with a letter before a full stop: the same counts as the pattern
    over every line (initials, dotted abbreviations closed by quotes, letters of any script, lines
    without a stop, empty lines)."""
    from pipeline.filters.heuristics import C4_ABBREVIATION_END_PATTERN, _abbreviation_ends

    lines = pl.Series(
        [
            "J. R. R. Tolkien wrote it.",
            "See e.g. i.e. the U.S. and the U.K.",
            'He said "A.B." then left.',
            "Él dijo é. y á. también.",
            "Ж.Д. вокзал. Конец.",
            "東京は日本の首都です。",
            "",
            "no stop here",
            "3.14 is not a letter stop",
            "x.\ty.\nz.",
        ]
        * 3
    )
    expected = lines.str.count_matches(C4_ABBREVIATION_END_PATTERN).cast(pl.Int64)
    got = _abbreviation_ends(lines)
    assert got.dtype == pl.Int64 and got.to_list() == expected.to_list()
    assert sum(got.to_list()) > 10
