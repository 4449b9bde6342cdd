"""Words, lines and paragraphs of documents, as polars expressions over a batch.

The heuristic filters (:mod:`pipeline.filters.heuristics`) count and compare these units. Every
helper here takes and returns polars expressions (or Series) so a whole batch is split in one pass
of compiled code; none loops over documents in Python.

**Words.** Gopher (Rae et al. 2021, appendix A) counts *words* without defining a tokenizer; the
reading used everywhere in this package is:

* In space-delimited scripts a word is a whitespace-separated token with its leading and trailing
  punctuation and symbols (Unicode categories ``P*`` and ``S*``) stripped; a token made only of
  punctuation and symbols (``-``, ``...``, ``|``, an emoji) is no word. ``"(don't),"`` is the
  word ``don't``, ``"#tag"`` is ``tag``, ``"3.5%"`` is ``3.5``.
* In scripts written without spaces between words (:data:`SPACELESS_SCRIPTS`: Chinese Han,
  Japanese kana, Thai, Lao, Khmer, Myanmar, Tibetan) each character, with the combining marks that
  follow it, is one word: ``"中文字"`` is three words. A run of another script inside such text
  (``"Python编程"``) splits at the script change: ``Python``, ``编``, ``程``.

One regular expression (:data:`WORD_PATTERN`) implements both, so mixed text needs no language
label. Whether a *document* is in a spaceless script (for rules such as mean word length, whose
published thresholds assume space-delimited words) comes from the script of its ``lang`` code
(:func:`pipeline.formats.langcodes.parse_lang` reads ISO 639-1/639-3, BCP 47 and GlotLID/OpenLID
``xxx_Scrp`` codes; a language without a script subtag has its usual one, its ``DEFAULT_SCRIPTS``; the unspaced
scripts are :data:`SPACELESS_SCRIPT_CODES`), otherwise from its characters (:func:`is_spaceless`).

**Lines.** :func:`split_lines` follows Python's ``str.splitlines``: ``\\n``, ``\\r\\n``, ``\\r``
and the other Unicode line boundaries end a line, and a final line break does not start an empty
line. :func:`split_newline` splits on ``\\n`` only, keeping every piece (``str.split("\\n")``).
:func:`nonempty_lines` gives the non-empty runs between ``\\n`` (``re.split("\\n+")`` without the
empty ends).

**Paragraphs.** :func:`split_paragraphs` splits the whitespace-stripped text at runs of two or
more ``\\n`` (``re.split("\\n{2,}", text.strip())``).

The splitters use literal ``str.split`` where they can: on a batch it is several times faster
than a regex ``extract_all``, which allocates every match.
"""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pyarrow as pa

# Language codes are read in one place (pipeline.formats.langcodes); these names stay importable here.
from pipeline.formats.langcodes import parse_lang

# ISO 15924 codes of scripts written without spaces between words: Han (and its simplified and
# traditional variants), Japanese (and its kana), Thai, Lao, Khmer, Myanmar, Tibetan, and the
# Tai and Indonesian Brahmic scripts that are traditionally unspaced.
SPACELESS_SCRIPT_CODES = frozenset(
    {
        "Hani",
        "Hans",
        "Hant",
        "Jpan",
        "Hira",
        "Kana",
        "Hrkt",
        "Thai",
        "Laoo",
        "Khmr",
        "Mymr",
        "Tibt",
        "Lana",
        "Tale",
        "Talu",
        "Bali",
        "Java",
    }
)


def is_spaceless_code(code: str | None) -> bool | None:
    """Whether a language code says its text is written without spaces between words; None when
    it names no script and its language has no known default (then the characters decide)."""
    script = parse_lang(code)[1]
    if script is None or script.startswith("Z"):  # Zyyy (common), Zxxx (unwritten), Zinh, Zzzz
        return None
    return script in SPACELESS_SCRIPT_CODES


def lang_spaceless(lang: pl.Series) -> pl.Series:
    """:func:`is_spaceless_code` for every code of a Series (Boolean, null: unknown)."""
    lang = lang.cast(pl.String)
    table = {code: is_spaceless_code(code) for code in lang.drop_nulls().unique().to_list()}
    return lang.replace_strict(table, default=None, return_dtype=pl.Boolean)


# Unicode scripts written without spaces between words; U+30FC (the katakana-hiragana prolonged
# sound mark, script "Common") is counted with them.
SPACELESS_SCRIPTS = ("Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan")
_SPACELESS_CLASS = "".join(rf"\p{{{script}}}" for script in SPACELESS_SCRIPTS) + r"\x{30FC}"

# One character of a spaceless script with the combining marks that follow it.
SPACELESS_CHAR_PATTERN = rf"[[{_SPACELESS_CLASS}]&&\P{{M}}]\p{{M}}*"
# A whitespace-separated token of other scripts, punctuation and symbols stripped from both ends.
SPACED_WORD_PATTERN = (
    rf"[^\s\p{{P}}\p{{S}}{_SPACELESS_CLASS}]"
    rf"(?:[^\s{_SPACELESS_CLASS}]*[^\s\p{{P}}\p{{S}}{_SPACELESS_CLASS}])?"
)
WORD_PATTERN = f"{SPACELESS_CHAR_PATTERN}|{SPACED_WORD_PATTERN}"
# Whitespace tokens (``str.split()``), except that each spaceless-script character is its own token.
TOKEN_PATTERN = rf"{SPACELESS_CHAR_PATTERN}|[^\s{_SPACELESS_CLASS}]+"

# Every line boundary of ``str.splitlines``.
_LINE_BREAKS = r"\r\n|[\r\x0B\x0C\x1C\x1D\x1E\x{85}\x{2028}\x{2029}]"


def words(text: pl.Expr) -> pl.Expr:
    """The words of each document (list of strings), by the reading in the module docstring."""
    return text.str.extract_all(WORD_PATTERN)


def split_words(text: pl.Series) -> tuple[pl.Series, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`words` of every document, flattened: the words in order, each document's number of
    words, each word's characters (int64) and whether it has a letter (``\\p{L}``). The same
    words, found by one compiled scan of the UTF-8 text (:func:`pipeline.filters.kernels.split_words`)
    with the pattern's character classes read from the regular expression engine itself
    (:func:`_classes`), not by polars' ``extract_all``, which builds every match as a string (most
    of a split's time on the demo)."""
    from pipeline.filters import kernels  # numba loads on first use, not with the config's imports

    array = text.cast(pl.String).fill_null("").to_arrow()
    array = (array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array).cast(pa.large_string())
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    data = data[: offsets[-1]] if len(offsets) else data[:0]
    astral = kernels.astral_code_points(data[offsets[0] :]) if (data >= 0xF0).any() else np.zeros(0, np.int64)
    out, bounds, chars, letters, counts = kernels.split_words(
        data, np.ascontiguousarray(offsets), _bmp_classes(), astral, _classes(astral.tolist())
    )
    words = pa.LargeStringArray.from_buffers(len(chars), pa.py_buffer(bounds), pa.py_buffer(out))
    return pl.Series("x", words, dtype=pl.String), counts, chars, letters


def _classes(code_points: list[int]) -> np.ndarray:
    """The classes (:data:`pipeline.filters.kernels.SPACE` ...) of code points, as the word
    pattern's regular expressions read them (uint8)."""
    from pipeline.filters import kernels

    chars = pl.Series([chr(c) for c in code_points], dtype=pl.String).to_frame("c")
    c = pl.col("c")
    classes = chars.select(
        c.str.contains(r"^\s$").cast(pl.UInt8) * kernels.SPACE
        + c.str.contains(r"^[\p{P}\p{S}]$").cast(pl.UInt8) * kernels.PUNCT_OR_SYMBOL
        + c.str.contains(rf"^[{_SPACELESS_CLASS}]$").cast(pl.UInt8) * kernels.SPACELESS
        + c.str.contains(r"^\p{M}$").cast(pl.UInt8) * kernels.MARK
        + c.str.contains(r"^\p{L}$").cast(pl.UInt8) * kernels.LETTER
    )
    return classes.to_series().to_numpy().astype(np.uint8)


@functools.cache
def _bmp_classes() -> np.ndarray:
    """:func:`_classes` of every code point below 0x10000 (surrogates: none), made once."""
    table = np.zeros(0x10000, dtype=np.uint8)
    points = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    table[points] = _classes(points)
    return table


def word_count(text: pl.Expr) -> pl.Expr:
    """The number of words of each document, without building the lists."""
    return text.str.count_matches(WORD_PATTERN)


def spaceless_char_count(text: pl.Expr) -> pl.Expr:
    """The number of spaceless-script characters (each one word) of each document."""
    return text.str.count_matches(SPACELESS_CHAR_PATTERN)


def token_count(text: pl.Expr) -> pl.Expr:
    """Whitespace tokens (``len(text.split())``), each spaceless-script character one token."""
    return text.str.count_matches(TOKEN_PATTERN)


def spaceless_by_chars(text: pl.Expr, n_words: pl.Expr | None = None) -> pl.Expr:
    """Whether more than half of each document's words are spaceless-script characters
    (``n_words`` may pass an already computed word count)."""
    n_words = word_count(text) if n_words is None else n_words
    return spaceless_char_count(text) * 2 > n_words


def is_spaceless(text: pl.Series, lang: pl.Series, n_words: pl.Series | None = None) -> pl.Series:
    """Whether each document is written in a spaceless script: from its ``lang`` code's script
    (:func:`is_spaceless_code`) where the code gives one, else from its characters
    (:func:`spaceless_by_chars`, computed only for those documents)."""
    out = lang_spaceless(lang)
    unknown = out.is_null()
    if unknown.any():
        frame = pl.DataFrame({"text": text.filter(unknown)})
        if n_words is not None:
            frame = frame.with_columns(n_words=n_words.filter(unknown))
        by_chars = frame.select(
            spaceless_by_chars(pl.col("text"), pl.col("n_words") if n_words is not None else None)
        ).to_series()
        out = out.scatter(unknown.arg_true(), by_chars)
    return out.fill_null(False)


def normalize_line_breaks(text: pl.Expr) -> pl.Expr:
    """Replace every ``str.splitlines`` boundary (``\\r\\n``, ``\\r``, ``\\x85``, ...) by ``\\n``."""
    return text.str.replace_all(_LINE_BREAKS, "\n")


def line_count(normalized: pl.Expr) -> pl.Expr:
    """``len(text.splitlines())`` of text already passed through :func:`normalize_line_breaks`."""
    breaks = normalized.str.count_matches("\n", literal=True)
    last_open = (normalized.str.len_bytes() > 0) & ~normalized.str.ends_with("\n")
    return breaks + last_open.cast(pl.UInt32)


def split_lines(text: pl.Expr) -> pl.Expr:
    """The lines of each document with ``str.splitlines`` semantics (list of strings)."""
    normalized = normalize_line_breaks(text)
    pieces = normalized.str.strip_suffix("\n").str.split("\n")
    return pl.when(normalized.str.len_bytes() == 0).then(pieces.list.head(0)).otherwise(pieces)


def split_newline(text: pl.Expr) -> pl.Expr:
    """``text.split("\\n")``: every piece, empty ones and a final empty one included."""
    return text.str.split("\n")


def nonempty_lines(text: pl.Expr) -> pl.Expr:
    """The non-empty pieces between ``\\n`` (a line of spaces is non-empty)."""
    return text.str.split("\n").list.eval(pl.element().filter(pl.element().str.len_bytes() > 0))


def split_paragraphs(text: pl.Expr) -> pl.Expr:
    """Paragraphs: the stripped text split at runs of two or more ``\\n``.

    As ``re.split("\\n{2,}", text.strip())``: an empty text is one empty paragraph.
    """
    return text.str.strip_chars().str.replace_all(r"\n{3,}", "\n\n").str.split("\n\n")


def flatten(lists: pl.Series) -> tuple[pl.Series, np.ndarray]:
    """The elements of a list Series in order, and each row's element count (int64).

    Null rows count as empty. The elements must not be null themselves (the splitters above
    never produce null elements).
    """
    lengths = lists.list.len().fill_null(0).to_numpy().astype(np.int64, copy=False)
    values = lists.explode().drop_nulls()
    return values, lengths
