"""Heuristic document filters: Gopher quality and repetition, C4, FineWeb.

Each filter measures a whole batch at once with polars expressions and numpy (words, lines and
paragraphs come from :mod:`pipeline.filters.text`), returns one Float64 column per measure in
input order, and states its rules as :class:`~pipeline.formats.step.Rule` thresholds. Thresholds
are constructor arguments whose defaults are the published values; ``None`` disables a rule.

Sources:

* Gopher: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training
  Gopher", appendix A.1.1 (quality filter) and Table A1 (repetition thresholds).
* C4: Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
  Transformer", section 2.2, and its reference code ``clean_page`` in tensorflow/datasets
  ``tensorflow_datasets/text/c4_utils.py``.
* FineWeb: Penedo et al. 2024, "The FineWeb Datasets: Decanting the Web for the Finest Text Data
  at Scale", section 3.6 (custom filters), and datatrove's ``FineWebQualityFilter``.

Each class docstring lists where it departs on purpose from datatrove 0.10
(``datatrove/pipeline/filters/*``), the usual peer, so that agreement can be measured per rule.
Common to all four: datatrove splits words with an NLTK or spaCy tokenizer that emits punctuation
as tokens and splits contractions (``don't`` -> ``do``, ``n't``); here a word is the
punctuation-stripped whitespace token of :mod:`pipeline.filters.text` (a spaceless-script
character in Chinese, Japanese, Thai, ...).

Per-document duplicates (lines, paragraphs, n-grams) are found by 64-bit hashes salted with the
document's row, so two different strings are taken as equal with probability about 2**-64 per
pair.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.filters.engine import batch_memo
from pipeline.filters.params import Count, Fraction, Length, NgramFractions, Ratio
from pipeline.filters.text import (
    SPACELESS_CHAR_PATTERN,
    flatten,
    is_spaceless,
    line_count,
    nonempty_lines,
    normalize_line_breaks,
    split_lines,
    split_newline,
    split_paragraphs,
    split_words,
    token_count,
    word_count,
)
from pipeline.formats.langcodes import lang_languages, parse_lang
from pipeline.formats.step import FilterOutput, Rule

# Gopher appendix A.1.1: "at least two of the following English words: the, be, to, of, and,
# that, have, with". Other languages get a list here once one is published for them.
GOPHER_STOP_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("the", "be", "to", "of", "and", "that", "have", "with"),
}
# Characters that open a bullet-point line. The paper names none; these are datatrove 0.10's.
GOPHER_BULLETS = ("•", "-")
# c4_utils.py: _END_MARKS, _POLICY_SUBSTRINGS and the citation regex of get_clean_page_fn.
C4_END_MARKS = (".", "?", "!", '"')
C4_POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
C4_CITATION_PATTERN = r"\[\d*\]|\[edit\]|\[citation needed\]"
# What may close a sentence after its terminal: quotes and brackets, in any script (” ’ 」 』 ） »).
_CLOSERS = r"""["'\p{Pe}\p{Pf}»]"""
# A line that ends a sentence (C4's rule 2, by default): its last character a Unicode
# Sentence_Terminal (. ! ? and 。！？ । ॥ ։ ۔ ؟ ። ...), maybe closed by quotes or brackets, or a
# straight double quote (the reference's own end mark).
C4_TERMINAL_LINE_PATTERN = rf"""(?:\p{{Sentence_Terminal}}{_CLOSERS}*|")$"""
# A sentence end inside a line: a run of . ! ? (and closing quotes or brackets) before whitespace
# or the end of the line, or a run of any other sentence terminal (。！？ । ։ ...: scripts that put
# no space after a sentence, or whose full stop is no abbreviation mark) ...
C4_SENTENCE_END_PATTERN = rf"""[.!?]+{_CLOSERS}*(?:\s|$)|[\p{{Sentence_Terminal}}&&[^.!?]]+{_CLOSERS}*"""
# ... unless it closes an initial or a dotted abbreviation ("J.", "U.S.", "e.g.").
C4_ABBREVIATION_END_PATTERN = r"""\b(?:\p{L}\.)+["'”’)\]]*(?:\s|$)"""
# The line ends that made the 2024 FineWeb release (datatrove's FineWebQualityFilter before 0.10
# defaulted to them); the default now is Unicode Sentence_Terminal (see FineWebQuality).
FINEWEB_2024_STOP_CHARS = (".", "'", '"', "!", "?")

_P = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the rolling n-gram hash

# Characters per word of the languages written without spaces whose words were measured: jieba
# (Chinese) and janome (Japanese) segmentations of the chatterbot-corpus dialogues of those
# languages (5,802 and 13,093 words); pythainlp 5.4's newmm segmentation (Thai) of the Thai
# dialogues, the Thai UDHR specimens of gflanguages and one Thai Common Crawl page (800 words; a
# character here is one with its combining marks, as pipeline.filters.text counts them; 2.8, 4.1
# and 3.8 per word in the three). Gopher's repetition rules count n-grams of words; a document of
# these languages, whose "words" here are its characters, is measured on n-grams of round(n x this)
# characters instead, so that an n-gram spans about as much text as n words do.
SPACELESS_CHARS_PER_WORD = {"zh": 1.62, "yue": 1.62, "wuu": 1.62, "ja": 1.80, "th": 3.84}


# ---------------------------------------------------------------------------------------------
# shared batch helpers


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijective scramble of 64-bit integers."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _doc_salts(counts: np.ndarray) -> np.ndarray:
    """A pseudo-random 64-bit salt per row, the same for the ``counts[d]`` rows of document d."""
    return np.repeat(_mix64(np.arange(1, len(counts) + 1, dtype=np.uint64)), counts)


def _doc_keys(values: pl.Series, counts: np.ndarray) -> np.ndarray:
    """A 64-bit key per string, equal for equal strings of the same document only."""
    return values.hash(seed=0).to_numpy() ^ _doc_salts(counts)


def _first_in_doc(values: pl.Series, counts: np.ndarray, doc: np.ndarray) -> np.ndarray:
    """True where a string is the first of its equals within its document (``counts[d]``
    consecutive strings per document d; ``doc``: each string's document)."""
    from pipeline.filters.kernels import first_in_docs  # numba loads on first use (see _ngram_fractions)

    return first_in_docs(_doc_keys(values, counts), doc)


def _per_doc(doc: np.ndarray, n_docs: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``weights`` (or count of rows) per document, as float64."""
    return np.bincount(doc, weights=weights, minlength=n_docs).astype(np.float64, copy=False)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0 (NaN becomes null in the measures frame)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _measures(columns: dict[str, np.ndarray | pl.Series]) -> pl.DataFrame:
    """The measures frame: Float64 columns, NaN as null."""
    out = {}
    for name, values in columns.items():
        if isinstance(values, np.ndarray):
            out[name] = pl.Series(name, values.astype(np.float64, copy=False), nan_to_null=True)
        else:
            out[name] = pl.Series(name, values).cast(pl.Float64).fill_nan(None)
    return pl.DataFrame(out)


def _texts(docs: pl.DataFrame) -> pl.Series:
    return docs.get_column("text").cast(pl.String).fill_null("")


def _langs(docs: pl.DataFrame) -> pl.Series:
    if "lang" not in docs.columns:
        return pl.Series("lang", [None] * docs.height, dtype=pl.String)
    return docs.get_column("lang").cast(pl.String)


def _eval(series: pl.Series, expr_fn) -> pl.Series:
    """Apply an expression builder (from :mod:`pipeline.filters.text`) to a Series."""
    return series.to_frame("x").select(expr_fn(pl.col("x"))).to_series()


class _Words:
    """The words of a batch, flattened: one row per word, documents in order."""

    def __init__(self, text: pl.Series):
        self._fill(*split_words(text))

    def _fill(self, values: pl.Series, counts: np.ndarray, lengths: np.ndarray, letters: np.ndarray) -> None:
        self.n_docs = len(counts)
        self.values, self.counts, self.lengths = values, counts, lengths
        self.letters = letters  # whether each word has a letter (Unicode L*)
        self.offsets = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(self.counts, out=self.offsets[1:])
        self.doc = np.repeat(np.arange(self.n_docs, dtype=np.int64), self.counts)
        # cum[i]: characters of the words before word i, over the whole batch
        self.cum = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=self.cum[1:])
        self.chars = (self.cum[self.offsets[1:]] - self.cum[self.offsets[:-1]]).astype(np.float64)
        for array in (self.counts, self.offsets, self.doc, self.lengths, self.letters, self.cum, self.chars):
            array.flags.writeable = False  # shared by the filters that measure the same text

    def take(self, rows: np.ndarray) -> _Words:
        """The words of the documents at ``rows`` (ascending), as a split of their texts gives
        them (the Gopher repetition filter's Chinese, Japanese and Thai documents, which a second
        split would cost a quarter of that filter's time)."""
        counts = self.counts[rows]
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        index = np.arange(starts[-1], dtype=np.int64) + np.repeat(self.offsets[rows] - starts[:-1], counts)
        taken = _Words.__new__(_Words)
        taken._fill(self.values.gather(index), counts.copy(), self.lengths[index], self.letters[index])
        return taken


def _words_of(text: pl.Series) -> _Words:
    """The words of ``text``. Every filter measures the text as it entered the stage, so the Gopher
    quality and repetition filters split the same text one after the other: while a batch is
    measured (:func:`pipeline.filters.engine.batch_memo`) the split is kept and given again for an
    equal text (a comparison of the bytes, much cheaper than splitting them; the word splitting was
    about a third of the filters' time, profiled)."""
    memo = batch_memo()
    words = _kept_words(memo, text)
    if words is None:
        words = _Words(text)
        if memo is not None:
            memo["gopher_words"] = (text, words)
    return words


def _kept_words(memo: dict | None, text: pl.Series) -> _Words | None:
    """The words of ``text`` if the batch's memo holds them (see :func:`_words_of`)."""
    kept = memo.get("gopher_words") if memo is not None else None
    if kept is not None and len(kept[0]) == len(text) and kept[0].equals(text):
        return kept[1]
    return None


def _word_counts(text: pl.Series) -> np.ndarray:
    """Words per document: from the Gopher filters' split of this text where the batch holds one,
    else counted without building the words (40% of the FineWeb filter's time on 20,000 demo
    documents)."""
    kept = _kept_words(batch_memo(), text)
    if kept is not None:
        return kept.counts
    return pl.DataFrame({"text": text}).select(word_count(pl.col("text"))).to_series().to_numpy()


# ---------------------------------------------------------------------------------------------
# Gopher quality


class GopherQuality:
    """Gopher's quality filter (Rae et al. 2021, appendix A.1.1).

    Removes a document when (thresholds, all from appendix A.1.1):

    * ``word_count`` < 50 or > 100,000 (``min_words``, ``max_words``);
    * ``mean_word_length`` (characters per word) < 3 or > 10 (``min_mean_word_length``,
      ``max_mean_word_length``); not measured (null) for documents in a spaceless script, where
      every character is a word and the published range does not apply (the script comes from
      the ``lang`` code, :func:`~pipeline.formats.langcodes.parse_lang`: ``zh``, ``yue``, ``wuu``,
      ``cmn_Hani``, ``zho_Hans``, ``tha_Thai`` ...; from the characters when the code is missing
      or names no known script);
    * ``hash_to_word_ratio`` (count of ``#`` / words) or ``ellipsis_to_word_ratio`` (count of
      ``...`` and ``…`` / words) > 0.1 (``max_symbol_word_ratio``);
    * ``bullet_lines_ratio`` (lines whose first non-blank character is a bullet,
      :data:`GOPHER_BULLETS`) > 0.9 (``max_bullet_lines_ratio``);
    * ``ellipsis_lines_ratio`` (lines ending in ``...`` or ``…`` before trailing blanks) > 0.3
      (``max_ellipsis_lines_ratio``);
    * ``alpha_words_ratio`` (words with at least one alphabetic character, Unicode ``L*``) < 0.8
      (``min_alpha_words_ratio``);
    * ``stop_word_count`` < 2 (``min_stop_words``): how many *different* words of the document's
      language list (:data:`GOPHER_STOP_WORDS`; the paper's eight English words) it contains,
      case-insensitively; null (rule off) when the language has no list or is unknown. Codes
      are matched by language (:func:`~pipeline.formats.langcodes.parse_lang`), so ``en``, ``eng``,
      ``en-GB`` and ``eng_Latn`` documents all get the English list.

    Lines are ``str.splitlines()`` lines, blank ones included (as datatrove counts them).

    Intentional differences from datatrove 0.10 ``GopherQualityFilter``:

    * words: punctuation-stripped whitespace tokens (module docstring), not spaCy tokens; datatrove
      counts and averages only its tokens that are not all punctuation, but keeps the punctuation
      tokens in the other denominators;
    * ``hash_to_word_ratio``, ``ellipsis_to_word_ratio`` and ``alpha_words_ratio`` divide by the
      word count; datatrove divides by all tokens, punctuation included, and counts punctuation
      tokens as words without a letter, so its ``alpha_words_ratio`` is lower (on English news it
      removes about 5% of documents that pass here);
    * ``stop_word_count`` is case-insensitive ("The" counts as "the"); datatrove also counts
      distinct stop words but case-sensitively, and applies the English list to every language;
    * ``mean_word_length`` is skipped for spaceless scripts; datatrove segments them with
      language tokenizers (jieba, SudachiPy, pythainlp) and applies the 3..10 range.
    """

    name = "gopher_quality"
    # The parameters that only set a rule's threshold (see pipeline.formats.step.DocFilter).
    thresholds = (
        "min_words",
        "max_words",
        "min_mean_word_length",
        "max_mean_word_length",
        "max_symbol_word_ratio",
        "max_bullet_lines_ratio",
        "max_ellipsis_lines_ratio",
        "min_alpha_words_ratio",
        "min_stop_words",
    )

    def __init__(
        self,
        min_words: Count | None = 50,
        max_words: Count | None = 100_000,
        min_mean_word_length: Length | None = 3,
        max_mean_word_length: Length | None = 10,
        max_symbol_word_ratio: Ratio | None = 0.1,
        max_bullet_lines_ratio: Fraction | None = 0.9,
        max_ellipsis_lines_ratio: Fraction | None = 0.3,
        min_alpha_words_ratio: Fraction | None = 0.8,
        min_stop_words: Count | None = 2,
        stop_words: Mapping[str, Sequence[str]] | None = None,
        bullets: Sequence[str] = GOPHER_BULLETS,
    ):
        self.min_words = min_words
        self.max_words = max_words
        self.min_mean_word_length = min_mean_word_length
        self.max_mean_word_length = max_mean_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        self.min_alpha_words_ratio = min_alpha_words_ratio
        self.min_stop_words = min_stop_words
        source = GOPHER_STOP_WORDS if stop_words is None else stop_words
        # keyed by parse_lang's language, so "en", "eng" and "eng_Latn" name the same list
        self.stop_words: dict[str, tuple[str, ...]] = {}
        for lang, ws in source.items():
            key = parse_lang(lang)[0] or lang.lower()
            self.stop_words[key] = self.stop_words.get(key, ()) + tuple(w.lower() for w in ws)
        self.bullets = tuple(bullets)

    def rules(self) -> list[Rule]:
        p = self.name
        spec = [
            ("word_count_min", "word_count", "<", self.min_words),
            ("word_count_max", "word_count", ">", self.max_words),
            ("mean_word_length_min", "mean_word_length", "<", self.min_mean_word_length),
            ("mean_word_length_max", "mean_word_length", ">", self.max_mean_word_length),
            ("hash_to_word_ratio", "hash_to_word_ratio", ">", self.max_symbol_word_ratio),
            ("ellipsis_to_word_ratio", "ellipsis_to_word_ratio", ">", self.max_symbol_word_ratio),
            ("bullet_lines_ratio", "bullet_lines_ratio", ">", self.max_bullet_lines_ratio),
            ("ellipsis_lines_ratio", "ellipsis_lines_ratio", ">", self.max_ellipsis_lines_ratio),
            ("alpha_words_ratio", "alpha_words_ratio", "<", self.min_alpha_words_ratio),
            ("stop_words_min", "stop_word_count", "<", self.min_stop_words),
        ]
        return [Rule(f"{p}.{name}", m, op, float(t), MEASURE_COUNTS[m]) for name, m, op, t in spec if t is not None]

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        text = _texts(docs)
        n = len(text)
        w = _words_of(text)
        n_words = w.counts.astype(np.float64)

        frame = pl.DataFrame({"text": text})
        t = pl.col("text")
        lines = normalize_line_breaks(t)
        bullets = _regex_alternatives(self.bullets)
        stats = frame.select(
            hashes=t.str.count_matches("#", literal=True),
            ellipses=t.str.count_matches(r"\.\.\.|…"),
            lines=line_count(lines),
            # (?m)^ as the text's start or a "\n": a literal the engine finds by memchr, twice as fast
            bullet_lines=lines.str.count_matches(rf"\n[^\S\n]*{bullets}")
            + lines.str.contains(rf"^[^\S\n]*{bullets}").cast(pl.UInt32),
            ellipsis_lines=lines.str.count_matches(r"(?m)(?:\.\.\.|…)[^\S\n]*$"),
        )
        langs = _langs(docs)
        spaceless = is_spaceless(text, langs, pl.Series(w.counts)).to_numpy()

        mean_len = _ratio(w.chars, n_words)
        mean_len[spaceless] = np.nan

        alpha_words = _per_doc(w.doc[w.letters], n)

        return FilterOutput(
            measures=_measures(
                {
                    "word_count": n_words,
                    "mean_word_length": mean_len,
                    "hash_to_word_ratio": _ratio(stats.get_column("hashes").to_numpy(), n_words),
                    "ellipsis_to_word_ratio": _ratio(stats.get_column("ellipses").to_numpy(), n_words),
                    "bullet_lines_ratio": _ratio(
                        stats.get_column("bullet_lines").to_numpy(), stats.get_column("lines").to_numpy()
                    ),
                    "ellipsis_lines_ratio": _ratio(
                        stats.get_column("ellipsis_lines").to_numpy(), stats.get_column("lines").to_numpy()
                    ),
                    "alpha_words_ratio": _ratio(alpha_words, n_words),
                    "stop_word_count": self._stop_word_counts(w, lang_languages(langs)),
                }
            )
        )

    def _stop_word_counts(self, w: _Words, lang: pl.Series) -> np.ndarray:
        """Distinct stop words per document; NaN where its language has no list."""
        out = np.full(w.n_docs, np.nan)
        lang_np = lang.to_numpy()
        for code, stop_list in self.stop_words.items():
            in_lang = lang_np == code
            if not in_lang.any():
                continue
            vocab = list(dict.fromkeys(stop_list))
            variants = _case_variants(vocab)
            if variants is not None:
                # every spelling whose lowercase is a stop word: no need to lowercase the batch
                spellings = pl.Series(list(variants), dtype=pl.String)
                hit = np.flatnonzero(w.values.is_in(list(variants)).to_numpy())
                found = w.values.gather(hit)
                table = spellings
                table_index = np.fromiter(variants.values(), dtype=np.int64, count=len(variants))
            else:
                # lowercase only the words short enough to be a stop word (lowering never shortens)
                short = np.flatnonzero((w.values.str.len_chars() <= max(map(len, vocab))).to_numpy())
                lowered = w.values.gather(short).str.to_lowercase()
                table = pl.Series(vocab, dtype=pl.String)
                inner = np.flatnonzero(lowered.is_in(vocab).to_numpy())
                hit, found = short[inner], lowered.gather(inner)
                table_index = np.arange(len(vocab))
            # which stop word each hit is: match exact strings through their hashes
            table_hash = table.hash(seed=0).to_numpy()
            order = np.argsort(table_hash)
            index = table_index[order[np.searchsorted(table_hash[order], found.hash(seed=0).to_numpy())]]
            doc = w.doc[hit]
            keep = in_lang[doc]
            present = np.zeros((w.n_docs, len(vocab)), dtype=bool)
            present[doc[keep], index[keep]] = True
            out[in_lang] = present.sum(axis=1)[in_lang]
        return out


def _case_variants(vocab: list[str], limit: int = 20_000) -> dict[str, int] | None:
    """Every string whose ``str.lower()`` is a word of ``vocab`` -> that word's index.

    Only for ASCII words (None otherwise, or past ``limit`` spellings): the only non-ASCII
    character that lowercases into ASCII is the Kelvin sign, lowercased to "k".
    """
    from itertools import product

    out: dict[str, int] = {}
    for i, word in enumerate(vocab):
        if not word.isascii() or word != word.lower():
            return None
        options = [{c, c.upper()} | ({"\u212a"} if c == "k" else set()) for c in word]
        if len(out) + np.prod([len(o) for o in options]) > limit:
            return None
        for spelling in product(*options):
            out["".join(spelling)] = i
    return out


def _regex_literal(s: str) -> str:
    """``s`` as a regex matching exactly it (every non-alphanumeric character as ``\\x{..}``)."""
    return "".join(ch if ch.isascii() and ch.isalnum() else rf"\x{{{ord(ch):X}}}" for ch in s)


def _regex_alternatives(strings: Sequence[str]) -> str:
    """A regex group matching any of ``strings`` (nothing at all when there is none)."""
    alternatives = [_regex_literal(s) for s in strings if s]
    return f"(?:{'|'.join(alternatives)})" if alternatives else r"[^\s\S]"


# What each measure counts, as the report's rule texts say it (the class docstrings give the detail).
MEASURE_COUNTS = {
    # Gopher quality
    "word_count": "words: whitespace tokens, punctuation stripped; each character in Chinese, Japanese, Thai",
    "mean_word_length": "characters per word; not measured in scripts without spaces",
    "hash_to_word_ratio": "'#' per word",
    "ellipsis_to_word_ratio": "'...' and '…' per word",
    "bullet_lines_ratio": "share of lines, blank ones included, starting with a bullet",
    "ellipsis_lines_ratio": "share of lines, blank ones included, ending in '...' or '…'",
    "alpha_words_ratio": "share of words with a letter",
    "stop_word_count": "different stop words of the language's list; English's only, by default",
    # Gopher repetition (the n-gram measures: _repetition_counts)
    "dup_line_frac": "share of non-empty lines that repeat an earlier line",
    "dup_para_frac": "share of paragraphs (split at blank lines) that repeat an earlier one",
    "dup_line_char_frac": "characters of lines that repeat an earlier line / characters of the text",
    "dup_para_char_frac": "characters of paragraphs that repeat an earlier one / characters of the text",
    # C4
    "has_lorem_ipsum": "1 when a line C4 has not dropped by then says 'lorem ipsum'",
    "has_curly_bracket": "1 when a line C4 has not dropped by then has a '{'",
    # FineWeb
    "line_punct_ratio": "share of non-blank lines ending in an end mark",
    "short_line_ratio": "share of non-blank lines of fewer than 30 characters",
    "char_dup_ratio": "characters of lines that repeat an earlier line / characters without newlines",
    "new_line_ratio": "newlines per word",
}


def _repetition_counts(measure: str) -> str:
    """What a Gopher repetition measure counts (:data:`MEASURE_COUNTS`, and the n-gram ones)."""
    per_size = _PER_SIZE.fullmatch(measure)
    if per_size is None:
        return MEASURE_COUNTS[measure]
    n = per_size.group(2)
    if per_size.group(1) == "top":
        return f"word characters covered by the most frequent {n}-word n-gram / all word characters"
    return f"word characters covered by {n}-word n-grams that occur twice or more / all word characters"


# ---------------------------------------------------------------------------------------------
# Gopher repetition


# Gopher's n-gram thresholds by size (Table A1).
TOP_NGRAM_CHAR_FRAC = {2: 0.20, 3: 0.18, 4: 0.16}
DUP_NGRAM_CHAR_FRAC = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
# One size's threshold by its rule's name: dup_5gram_char_frac.
_PER_SIZE = re.compile(r"(top|dup)_(\d+)gram_char_frac")


class GopherRepetition:
    """Gopher's repetition filter (Rae et al. 2021, appendix A.1.1 and Table A1).

    Measures and thresholds (all Table A1; a document is removed above the threshold):

    * ``dup_line_frac`` > 0.30: lines equal to an earlier line of the document / lines;
    * ``dup_para_frac`` > 0.30: the same for paragraphs;
    * ``dup_line_char_frac`` > 0.20: characters of those duplicate lines / characters of the text;
    * ``dup_para_char_frac`` > 0.20: the same for paragraphs;
    * ``top_{n}gram_char_frac`` for n = 2, 3, 4 > 0.20, 0.18, 0.16: characters covered by the
      occurrences of the most frequent word n-gram / characters of all words;
    * ``dup_{n}gram_char_frac`` for n = 5..10 > 0.15, 0.14, 0.13, 0.12, 0.11, 0.10: characters
      covered by all occurrences of every n-gram that occurs more than once / characters of all
      words, "taking care not to count characters that occur in overlapping n-grams more than
      once" (the paper).

    Definitions: lines are the non-empty pieces between ``\\n``; paragraphs the pieces of the
    stripped text between runs of two or more ``\\n``. The line and paragraph fractions count the
    second and later copies (the first copy is the original). An n-gram is n consecutive words;
    its characters are its words' characters (whitespace and the stripped punctuation between
    them are not counted, on either side of the fraction). A word character is covered when at
    least one counted n-gram occurrence contains it, so overlapping and self-overlapping
    occurrences count once. Among equally frequent n-grams the top one is the first to occur. A
    document with fewer than n words has no top n-gram (null) and no duplicate n-grams (0).

    Words in Chinese, Japanese and Thai are their characters (module docstring), and an n-gram of
    characters spans far less text than one of words: common endings such as "ができます" repeat in
    any prose. A document of those languages is measured on n-grams of ``round(n x c)`` characters
    for the published n, c the language's characters per word (:data:`SPACELESS_CHARS_PER_WORD`:
    1.62 for Chinese, 1.80 for Japanese, 3.84 for Thai, from jieba, janome and pythainlp
    segmentations); the rules and their names are unchanged. Other spaceless scripts (Lao, Khmer,
    Myanmar ...) keep character n-grams: their words have not been measured.

    Intentional differences from datatrove 0.10 ``GopherRepetitionFilter``:

    * n-gram fractions divide by the characters of all words; datatrove divides by ``len(text)``
      (whitespace, punctuation and newlines included);
    * ``top_{n}gram_char_frac`` counts covered characters; datatrove multiplies the count by the
      length of the n-gram joined with spaces, so self-overlapping occurrences count twice;
    * ``dup_{n}gram_char_frac`` covers *every* occurrence of a repeated n-gram, first one
      included, without double counting; datatrove scans left to right, counts only the second and
      later occurrences (joined without spaces) and jumps n words after each, so it misses
      repeats that start inside a counted one;
    * lines: datatrove splits on ``\\n+`` and so counts an empty first or last piece (text
      starting or ending with a newline) as a line, and two of them as a duplicate;
    * an empty text has null measures (no rule fires); datatrove removes it as "empty".
    """

    name = "gopher_repetition"
    thresholds = ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac")
    # The thresholds per n-gram size, with their defaults: a size's value is a threshold only, a
    # size beyond the defaults is measured too.
    threshold_maps = {"top_ngram_char_frac": TOP_NGRAM_CHAR_FRAC, "dup_ngram_char_frac": DUP_NGRAM_CHAR_FRAC}

    def __init__(
        self,
        dup_line_frac: Fraction | None = 0.30,
        dup_para_frac: Fraction | None = 0.30,
        dup_line_char_frac: Fraction | None = 0.20,
        dup_para_char_frac: Fraction | None = 0.20,
        top_ngram_char_frac: NgramFractions | None = None,
        dup_ngram_char_frac: NgramFractions | None = None,
    ):
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        # The sizes given override their defaults; the others keep them (as datatrove's lists do not).
        self.top_ngram_char_frac = {**TOP_NGRAM_CHAR_FRAC, **(top_ngram_char_frac or {})}
        self.dup_ngram_char_frac = {**DUP_NGRAM_CHAR_FRAC, **(dup_ngram_char_frac or {})}
        for n in [*self.top_ngram_char_frac, *self.dup_ngram_char_frac]:
            if int(n) < 2:
                raise ValueError(f"gopher_repetition: n-gram size {n} is below 2; use sizes 2 and up")

    @staticmethod
    def config_params(values: dict) -> dict:
        """A config table's parameters as the constructor takes them: a size's own name
        (``dup_5gram_char_frac = 0.2``) as its entry of the map (``dup_ngram_char_frac = {5 = 0.2}``),
        and the map's keys (TOML's are strings) as sizes. Raises ValueError naming a size set both
        ways."""
        params: dict = {}
        for key, value in values.items():
            if key in GopherRepetition.threshold_maps and isinstance(value, Mapping):
                value = {int(n) if isinstance(n, str) and n.isdigit() else n: t for n, t in value.items()}
            params[key] = value
        for key, value in values.items():
            per_size = _PER_SIZE.fullmatch(key)
            if per_size is None:
                continue
            kind, n = per_size.group(1), int(per_size.group(2))
            table = params.setdefault(f"{kind}_ngram_char_frac", {})
            if not isinstance(table, Mapping):  # a map given as something else: the check names it
                continue
            if n in table:
                raise ValueError(f"gopher_repetition.{key}: {kind}_ngram_char_frac also sets size {n}; set it once")
            params[f"{kind}_ngram_char_frac"] = {**table, n: value}
            del params[key]
        return params

    def rules(self) -> list[Rule]:
        p = self.name
        spec = [
            ("dup_line_frac", self.dup_line_frac),
            ("dup_para_frac", self.dup_para_frac),
            ("dup_line_char_frac", self.dup_line_char_frac),
            ("dup_para_char_frac", self.dup_para_char_frac),
        ]
        spec += [(f"top_{n}gram_char_frac", t) for n, t in sorted(self.top_ngram_char_frac.items())]
        spec += [(f"dup_{n}gram_char_frac", t) for n, t in sorted(self.dup_ngram_char_frac.items())]
        return [Rule(f"{p}.{m}", m, ">", float(t), _repetition_counts(m)) for m, t in spec if t is not None]

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        text = _texts(docs)
        n = len(text)
        text_chars = text.str.len_chars().to_numpy().astype(np.float64)
        columns: dict[str, np.ndarray] = {}
        for unit, splitter in (("line", nonempty_lines), ("para", split_paragraphs)):
            pieces, counts = flatten(_eval(text, splitter))
            doc = np.repeat(np.arange(n, dtype=np.int64), counts)
            dup = ~_first_in_doc(pieces, counts, doc)
            lengths = pieces.str.len_chars().to_numpy().astype(np.float64)
            columns[f"dup_{unit}_frac"] = _ratio(_per_doc(doc[dup], n), counts)
            columns[f"dup_{unit}_char_frac"] = _ratio(_per_doc(doc[dup], n, lengths[dup]), text_chars)
        columns = {
            k: columns[k] for k in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac")
        }
        tops, dups = sorted(self.top_ngram_char_frac), sorted(self.dup_ngram_char_frac)
        split = _words_of(text)
        columns.update(_ngram_fractions(split, tops, dups))
        for rows, chars_per_word in _scaled_languages(docs, text):
            sub = split.take(rows)
            top_sizes = {k: _chars_for(k, chars_per_word) for k in tops}
            dup_sizes = {k: _chars_for(k, chars_per_word) for k in dups}
            scaled = _ngram_fractions(sub, sorted(set(top_sizes.values())), sorted(set(dup_sizes.values())))
            for kind, sizes in (("top", top_sizes), ("dup", dup_sizes)):
                for k, size in sizes.items():
                    columns[f"{kind}_{k}gram_char_frac"][rows] = scaled[f"{kind}_{size}gram_char_frac"]
        return FilterOutput(measures=_measures(columns))


def _chars_for(n_words: int, chars_per_word: float) -> int:
    """The characters of an n-gram spanning about ``n_words`` words (half up)."""
    return max(2, int(n_words * chars_per_word + 0.5))


def _scaled_languages(docs: pl.DataFrame, text: pl.Series) -> list[tuple[np.ndarray, float]]:
    """The rows of each language of :data:`SPACELESS_CHARS_PER_WORD` written in its spaceless
    script, with its characters per word."""
    langs = _langs(docs)
    if langs.null_count() == len(langs):
        return []
    language = lang_languages(langs).to_numpy()
    spaceless = is_spaceless(text, langs).to_numpy()
    found = []
    for lang, chars_per_word in SPACELESS_CHARS_PER_WORD.items():
        rows = np.flatnonzero((language == lang) & spaceless)
        if len(rows):
            found.append((rows, chars_per_word))
    return found


def _ngram_fractions(w: _Words, top_ns: list[int], dup_ns: list[int]) -> dict[str, np.ndarray]:
    """``top_{n}gram_char_frac`` and ``dup_{n}gram_char_frac`` of every document.

    N-grams are keyed by a rolling polynomial hash of 64-bit word hashes, salted per document,
    and counted per document in one compiled pass (:func:`pipeline.filters.kernels.ngram_chars`).
    An n-gram can only repeat where its (n-1)-gram prefix repeats, so each larger n looks only at
    the positions whose shorter n-gram was duplicated: after the 2-grams the work shrinks fast.
    """
    # Imported here: importing numba costs a process a few tenths of a second, which a command
    # that only reads the config (and so imports the filters) should not pay.
    from pipeline.filters.kernels import ngram_chars

    word_hash = w.values.hash(seed=0).to_numpy() if len(w.values) else np.zeros(0, np.uint64)
    salts = _mix64(np.arange(1, w.n_docs + 1, dtype=np.uint64))
    top, dup = ngram_chars(word_hash, salts, w.offsets, w.cum, top_ns, dup_ns, _P)
    out: dict[str, np.ndarray] = {}
    for i, size in enumerate(top_ns):
        frac = _ratio(top[:, i].astype(np.float64), w.chars)
        frac[top[:, i] < 0] = np.nan  # fewer words than the size: no n-gram
        out[f"top_{size}gram_char_frac"] = frac
    for i, size in enumerate(dup_ns):
        out[f"dup_{size}gram_char_frac"] = _ratio(dup[:, i].astype(np.float64), w.chars)
    return out


# ---------------------------------------------------------------------------------------------
# C4


class C4Quality:
    """C4's page cleaning (Raffel et al. 2020, section 2.2; reference ``clean_page`` in
    tensorflow/datasets ``c4_utils.py``).

    Line by line, in the reference's order, each line (``str.splitlines``, stripped) is removed
    for the first reason that applies, counted in its measure:

    1. ``lines_removed_too_long_word``: a whitespace token longer than 1000 characters
       (``max_word_length``, c4_utils ``_MAX_WORD_LENGTH``); then Wikipedia-style citations
       (``[1]``, ``[edit]``, ``[citation needed]``) are deleted from the line;
    2. ``lines_removed_no_terminal_punct``: the line does not end in a terminal punctuation mark
       (the paper's words), or ends in ``...``; blank lines fall here too. A terminal mark is, by
       default, a Unicode ``Sentence_Terminal`` (``. ! ?`` and ``。！？ । ॥ ։ ۔ ؟ ።`` ...), maybe
       closed by quotes or brackets (``.”``, ``。」``), or ``"`` (:data:`C4_TERMINAL_LINE_PATTERN`);
       ``end_marks`` gives the strings instead (``C4_END_MARKS``: c4_utils ``_END_MARKS``,
       ``. ? ! "``, which remove every line of a script with terminals of its own), and
       ``extra_end_marks`` strings that end a line too (Armenian's ``:``, see
       :data:`~pipeline.filters.profiles.LANGUAGE_PROFILES`);
    3. ``lines_removed_too_few_words``: fewer than 5 whitespace tokens (``min_words_per_line``,
       c4_utils ``_MIN_WORDS_PER_LINE = 5``; a spaceless-script character counts as a token);
    4. a line containing "lorem ipsum" (any case) flags the page (``has_lorem_ipsum``);
    5. ``lines_removed_javascript``: the line contains "javascript" (any case);
    6. a line containing ``{`` flags the page (``has_curly_bracket``);
    7. ``lines_removed_policy``: the line contains one of :data:`C4_POLICY_SUBSTRINGS` (any case;
       c4_utils ``_POLICY_SUBSTRINGS``);

    the others are kept (``lines_kept``) and the text becomes the kept lines joined by ``\\n``
    (``FilterOutput.text``; per-document line counts are also in ``FilterOutput.counts``). Then the
    page is removed when it has lorem ipsum (``has_lorem_ipsum`` >= 1, ``filter_lorem_ipsum``), a
    curly bracket (``has_curly_bracket`` >= 1, ``filter_curly_bracket``), or fewer than 3
    sentences in its kept lines (``sentence_count`` < 3, ``min_sentences``, c4_utils
    ``_MIN_NUM_SENTENCES = 3``). The bad-words rule is not applied: no word list ships with this
    project.

    Sentences: the reference counts NLTK Punkt sentences per kept line. Here a kept line has
    ``max(1, k)`` sentences, k being the number of sentence ends in it: a run of ``. ! ?``
    (optionally closed by quotes or brackets) before whitespace or the end of the line, unless it
    ends an initial or a dotted abbreviation (``J.``, ``U.S.``, ``e.g.``), or a run of any other
    sentence terminal (``。！？ । ։ ۔ ؟`` ...), with or without a space after it (Chinese and
    Japanese put none, and their full stops end no abbreviation). Unlike Punkt, which
    learned a list of abbreviations, it splits after "Mr." or "etc."; since every kept line counts
    at least once, this only matters for pages with one or two kept lines.

    Intentional differences from datatrove 0.10 ``C4QualityFilter``:

    * ``min_words_per_line`` is 5 and ``min_sentences`` 3, as in c4_utils; datatrove's defaults
      are 3 and 5;
    * terminal marks are every script's (above); c4_utils and datatrove take only ``. ? ! "``
      (datatrove adds ``'``), so that C4 removed every Chinese, Japanese, Armenian ... line; a
      line closing its last sentence with ``”`` or ``)`` is kept too;
    * words per line are counted after citations are deleted (c4_utils); datatrove counts before;
    * sentences: datatrove counts spaCy sentencizer sentences (the reference: Punkt); here the
      rule above;
    * lines keep being classified after a lorem-ipsum or curly-bracket line (the page is removed
      either way), so the line counts of such pages include lines the reference never reached.

    As in the reference (and datatrove), "lorem ipsum" and ``{`` only count on lines that passed
    rules 1-3 (and 5 for ``{``), though the paper's prose speaks of any page containing them.
    """

    name = "c4_quality"
    thresholds = ("min_sentences",)

    def __init__(
        self,
        min_sentences: Count | None = 3,
        min_words_per_line: Count = 5,
        max_word_length: Count | None = 1000,
        end_marks: Sequence[str] | None = None,
        extra_end_marks: Sequence[str] = (),
        remove_citations: bool = True,
        filter_no_terminal_punct: bool = True,
        filter_javascript: bool = True,
        filter_policy: bool = True,
        policy_substrings: Sequence[str] = C4_POLICY_SUBSTRINGS,
        filter_lorem_ipsum: bool = True,
        filter_curly_bracket: bool = True,
    ):
        self.min_sentences = min_sentences
        self.min_words_per_line = min_words_per_line
        self.max_word_length = max_word_length
        self.end_marks = None if end_marks is None else tuple(end_marks)
        self.extra_end_marks = tuple(extra_end_marks)
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct
        self.filter_javascript = filter_javascript
        self.filter_policy = filter_policy
        self.policy_substrings = tuple(policy_substrings)
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_curly_bracket = filter_curly_bracket

    def _sentences_counted(self) -> str:
        """What ``sentence_count`` counts with these settings: C4 counts after its line removals."""
        dropped = ["without an end mark"] if self.filter_no_terminal_punct else []
        dropped.append(f"of fewer than {self.min_words_per_line} words")
        dropped += ["naming javascript"] if self.filter_javascript else []
        dropped += ["with a policy phrase"] if self.filter_policy else []
        return f"sentences, one or more per line, in the lines C4 keeps after dropping those {', '.join(dropped)}"

    def rules(self) -> list[Rule]:
        p = self.name
        rules = []
        if self.filter_lorem_ipsum:
            rules.append(Rule(f"{p}.lorem_ipsum", "has_lorem_ipsum", ">=", 1.0, MEASURE_COUNTS["has_lorem_ipsum"]))
        if self.filter_curly_bracket:
            rules.append(
                Rule(f"{p}.curly_bracket", "has_curly_bracket", ">=", 1.0, MEASURE_COUNTS["has_curly_bracket"])
            )
        if self.min_sentences is not None:
            threshold = float(self.min_sentences)
            rules.append(Rule(f"{p}.min_sentences", "sentence_count", "<", threshold, self._sentences_counted()))
        return rules

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        text = _texts(docs)
        n = len(text)
        lines, counts = flatten(_eval(text, split_lines))
        doc = np.repeat(np.arange(n, dtype=np.int64), counts)
        frame = pl.DataFrame({"line": lines.str.strip_chars()})
        line = pl.col("line")

        too_long = np.zeros(len(frame), dtype=bool)
        if self.max_word_length is not None:
            long_lines = frame.get_column("line").str.len_chars() > self.max_word_length
            long_idx = np.flatnonzero(long_lines.to_numpy())
            if len(long_idx):
                longest = (
                    frame.get_column("line")
                    .gather(long_idx)
                    .str.extract_all(r"\S+")
                    .list.eval(pl.element().str.len_chars())
                    .list.max()
                )
                too_long[long_idx] = (longest > self.max_word_length).fill_null(False).to_numpy()

        cleaned = line.str.replace_all(C4_CITATION_PATTERN, "") if self.remove_citations else line
        frame = frame.with_columns(cleaned.alias("line"))
        if self.end_marks is None:
            ends_ok = line.str.contains(C4_TERMINAL_LINE_PATTERN)
        else:
            ends_ok = pl.lit(False)
            for mark in self.end_marks:
                ends_ok = ends_ok | line.str.ends_with(mark)
        for mark in self.extra_end_marks:
            ends_ok = ends_ok | line.str.ends_with(mark)
        policy = _regex_alternatives(self.policy_substrings)
        flags = frame.select(
            no_end=(~ends_ok | line.str.ends_with("...")) & self.filter_no_terminal_punct,
            few=_fewer_tokens_than(line, self.min_words_per_line),
            lorem=line.str.contains(r"(?i)lorem ipsum") & self.filter_lorem_ipsum,
            js=line.str.contains(r"(?i)javascript") & self.filter_javascript,
            curly=line.str.contains("{", literal=True) & self.filter_curly_bracket,
            policy=line.str.contains(f"(?i){policy}") & self.filter_policy,
        )
        f = {c: flags.get_column(c).fill_null(False).to_numpy() for c in flags.columns}
        few = np.flatnonzero(f["few"])
        spaceless_lines = few[_has_spaceless(frame.get_column("line").gather(few))]
        if len(spaceless_lines):  # count each spaceless-script character as a token
            sub = frame.get_column("line").gather(spaceless_lines)
            f["few"][spaceless_lines] = (_eval(sub, token_count) < self.min_words_per_line).to_numpy()
        alive = ~too_long
        r_punct = alive & f["no_end"]
        alive &= ~r_punct
        r_few = alive & f["few"]
        alive &= ~r_few
        lorem = alive & f["lorem"]
        alive &= ~lorem
        r_js = alive & f["js"]
        alive &= ~r_js
        curly = alive & f["curly"]
        alive &= ~curly
        r_policy = alive & f["policy"]
        kept = alive & ~r_policy

        kept_counts = np.bincount(doc[kept], minlength=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(kept_counts, out=offsets[1:])
        kept_lines = frame.get_column("line").filter(pl.Series(kept))
        sentences = _sentence_counts(kept_lines)  # only kept lines count (a third of the lines here)
        kept_lists = pa.LargeListArray.from_arrays(
            pa.array(offsets, pa.int64()), kept_lines.to_arrow().cast(pa.large_string())
        )
        rebuilt = pl.Series("text", kept_lists).list.join("\n").str.strip_chars()

        line_counts = {
            "lines_removed_too_long_word": _per_doc(doc[too_long], n),
            "lines_removed_no_terminal_punct": _per_doc(doc[r_punct], n),
            "lines_removed_too_few_words": _per_doc(doc[r_few], n),
            "lines_removed_javascript": _per_doc(doc[r_js], n),
            "lines_removed_policy": _per_doc(doc[r_policy], n),
            "lines_kept": kept_counts.astype(np.float64),
        }
        measures = {
            "has_lorem_ipsum": (_per_doc(doc[lorem], n) > 0).astype(np.float64),
            "has_curly_bracket": (_per_doc(doc[curly], n) > 0).astype(np.float64),
            "sentence_count": _per_doc(doc[kept], n, sentences),
            **line_counts,
        }
        return FilterOutput(
            measures=_measures(measures),
            text=rebuilt,
            counts={k: pl.Series(k, v.astype(np.int64)) for k, v in line_counts.items()},
        )


def _sentence_counts(lines: pl.Series) -> np.ndarray:
    """Sentences of each line (float64): its sentence ends that close no abbreviation, at least 1."""
    ends = lines.str.count_matches(C4_SENTENCE_END_PATTERN).cast(pl.Int64) - _abbreviation_ends(lines)
    return ends.clip(lower_bound=1).to_numpy().astype(np.float64)


def _abbreviation_ends(lines: pl.Series) -> pl.Series:
    """``count_matches(C4_ABBREVIATION_END_PATTERN)`` of each line (Int64), counted only on the lines
    where a full stop follows a letter that begins a word (after the line's start or a non-word
    character, as the pattern's word boundary requires), which every match holds: about one line
    in a thousand of the demo. The pattern's Unicode word boundary sends the regular expression
    engine to its slow path on non-ASCII text, and counting on every line was half of C4's time;
    the test needs no word boundary."""
    out = np.zeros(len(lines), dtype=np.int64)
    rows = np.flatnonzero(lines.str.contains(r"(?:^|\W)\p{L}\.").fill_null(False).to_numpy())
    if len(rows):
        found = lines.gather(rows).str.count_matches(C4_ABBREVIATION_END_PATTERN).fill_null(0)
        out[rows] = found.to_numpy()
    return pl.Series("abbreviation_ends", out)


def _fewer_tokens_than(line: pl.Expr, k: int) -> pl.Expr:
    """Whether a line has fewer than k whitespace tokens (``len(line.split()) < k``), by one
    anchored match instead of counting; spaceless-script characters are not split out."""
    if k <= 0:
        return line.str.len_bytes() < 0
    return ~line.str.contains(r"^\s*\S+" + (rf"(?:\s+\S+){{{k - 1}}}" if k > 1 else ""))


def _has_spaceless(values: pl.Series) -> np.ndarray:
    return values.str.contains(SPACELESS_CHAR_PATTERN).to_numpy()


# ---------------------------------------------------------------------------------------------
# FineWeb


class FineWebQuality:
    """FineWeb's custom quality filters (Penedo et al. 2024, section 3.6; datatrove 0.10
    ``FineWebQualityFilter``).

    Lines are the non-blank pieces of ``text.split("\\n")`` (as datatrove 0.10 counts them). A
    document is removed when:

    * ``line_punct_ratio`` <= 0.12 (``line_punct_thr``; the paper: "fraction of lines ending with
      punctuation <= 0.12"): lines whose last character (no stripping) is a sentence terminal /
      lines. Terminals: Unicode ``Sentence_Terminal`` (``. ! ?``, ``。``, ``।``, ...) by default,
      or the strings in ``stop_chars``, and those in ``extra_stop_chars`` (Armenian's ``:``).
      A document without a non-blank line has ratio 0;
    * ``short_line_ratio`` >= 0.67 (``short_line_thr``; the paper: "fraction of lines shorter than
      30 characters >= 0.67"): lines of fewer than ``short_line_length`` = 30 characters / lines;
    * ``char_dup_ratio`` >= 0.1 (``char_duplicates_ratio``; the paper: "fraction of characters in
      duplicated lines >= 0.1"): characters of the lines equal to an earlier line / characters of
      the text without its newlines;
    * ``new_line_ratio`` > 0.3 (``new_line_ratio``; datatrove, not in the paper): newlines / words.

    With ``line_punct_exclude_zero`` a ratio of exactly 0 does not fire the punctuation rule
    (datatrove's option); its measure is then null for those documents.

    Intentional differences from datatrove 0.10 ``FineWebQualityFilter``:

    * comparisons follow the paper: datatrove removes at ``line_punct_ratio < 0.12``,
      ``short_line_ratio > 0.67`` and ``char_dup_ratio > char_duplicates_ratio`` (strict);
    * a short line has *fewer than* 30 characters (the paper); datatrove counts ``<= 30``;
    * ``char_duplicates_ratio`` defaults to 0.1 (the paper); datatrove's default is 0.01;
    * terminals: datatrove's ``TERMINAL_PUNCTUATION`` list is Unicode ``Sentence_Terminal`` of an
      older Unicode version plus three Khmer signs (U+17D6, U+17D9, U+17DA); here the property
      itself, as the regex engine's Unicode version defines it. (The 2024 FineWeb release used
      ``(".", "'", '"', "!", "?")``: pass ``stop_chars=FINEWEB_2024_STOP_CHARS`` for it.);
    * ``new_line_ratio`` divides by words, not by spaCy tokens (which include punctuation);
    * a document with no non-blank line is removed by ``line_punct_ratio`` (datatrove: "empty").
    """

    name = "fineweb_quality"
    thresholds = ("line_punct_thr", "short_line_thr", "char_duplicates_ratio", "new_line_ratio")

    def __init__(
        self,
        line_punct_thr: Fraction | None = 0.12,
        line_punct_exclude_zero: bool = False,
        short_line_thr: Fraction | None = 0.67,
        short_line_length: Count = 30,
        char_duplicates_ratio: Fraction | None = 0.1,
        new_line_ratio: Ratio | None = 0.3,
        stop_chars: Sequence[str] | None = None,
        extra_stop_chars: Sequence[str] = (),
    ):
        self.line_punct_thr = line_punct_thr
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio
        self.stop_chars = None if stop_chars is None else tuple(stop_chars)
        self.extra_stop_chars = tuple(extra_stop_chars)

    def rules(self) -> list[Rule]:
        p = self.name
        spec = [
            ("line_punct_ratio", "<=", self.line_punct_thr),
            ("short_line_ratio", ">=", self.short_line_thr),
            ("char_dup_ratio", ">=", self.char_duplicates_ratio),
            ("new_line_ratio", ">", self.new_line_ratio),
        ]
        return [Rule(f"{p}.{m}", m, op, float(t), MEASURE_COUNTS[m]) for m, op, t in spec if t is not None]

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        text = _texts(docs)
        n = len(text)
        pieces, counts = flatten(_eval(text, split_newline))
        doc = np.repeat(np.arange(n, dtype=np.int64), counts)
        nonblank = np.flatnonzero((pieces.str.strip_chars().str.len_bytes() > 0).to_numpy())
        lines, doc = pieces.gather(nonblank), doc[nonblank]
        n_lines = np.bincount(doc, minlength=n)

        stops = r"\p{Sentence_Terminal}" if self.stop_chars is None else _regex_alternatives(self.stop_chars)
        if self.extra_stop_chars:
            stops = f"(?:{stops}|{_regex_alternatives(self.extra_stop_chars)})"
        ends = lines.str.contains(f"{stops}$").to_numpy()
        line_chars = lines.str.len_chars().to_numpy()
        short = line_chars < self.short_line_length
        dup = ~_first_in_doc(lines, n_lines, doc)

        stats = pl.DataFrame({"text": text}).select(
            newlines=pl.col("text").str.count_matches("\n", literal=True),
            chars=pl.col("text").str.len_chars(),
        )
        newlines = stats.get_column("newlines").to_numpy().astype(np.float64)

        punct = _ratio(_per_doc(doc[ends], n), n_lines)
        punct[n_lines == 0] = 0.0
        if self.line_punct_exclude_zero:
            punct[punct == 0] = np.nan
        return FilterOutput(
            measures=_measures(
                {
                    "line_punct_ratio": punct,
                    "short_line_ratio": _ratio(_per_doc(doc[short], n), n_lines),
                    "char_dup_ratio": _ratio(
                        _per_doc(doc[dup], n, line_chars[dup].astype(np.float64)),
                        stats.get_column("chars").to_numpy() - newlines,
                    ),
                    "new_line_ratio": _ratio(newlines, _word_counts(text)),
                }
            )
        )


HEURISTIC_FILTERS = {
    "gopher_quality": GopherQuality,
    "gopher_repetition": GopherRepetition,
    "c4_quality": C4Quality,
    "fineweb_quality": FineWebQuality,
}

__all__ = [
    "C4Quality",
    "FineWebQuality",
    "GopherQuality",
    "GopherRepetition",
    "HEURISTIC_FILTERS",
]
