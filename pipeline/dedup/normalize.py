"""Text normalization for deduplication: the same words, whatever their case, width or punctuation.

Two documents are compared on their *normalized* text, defined as:

1. Invisible format characters that sit inside words (soft hyphen, zero-width space and joiners,
   word joiner, left-to-right and right-to-left marks, byte-order mark) are deleted; then Unicode
   NFKC (full-width letters, ligatures, compatibility forms and non-breaking spaces fold to their
   plain forms), lowercase (Python's full Unicode case mapping) and NFKC again (a lowercased
   letter may compose with the mark after it).
2. Punctuation and symbols (Unicode categories P* and S*), control characters and every kind of
   whitespace become word separators; runs of separators collapse to one space.
3. Scripts written without spaces between words (Han, Hiragana, Katakana, Thai, Lao, Khmer,
   Myanmar) are split into characters: each character, with the combining marks that follow it, is
   a word of its own. The decision is made per character from its Unicode script, so it needs no
   language label and works inside mixed-language documents.

The *words* of a text are then its normalized text split on spaces, and :func:`normalize_text`
returns the words joined by single spaces. ``"Ｈｅｌｌｏ, World!! 你好"`` normalizes to
``"hello world 你 好"``. Normalizing is idempotent: a normalized text normalizes to itself, so it
has the words, shingles and exact hash of the text it came from.

How it runs, per batch: one compiled pass over the UTF-8 bytes of the whole batch
(:func:`pipeline.dedup.kernels.fill_prepared`) lowercases ASCII bytes and replaces every other
character by its prepared form, learned once per code point in Python
(:func:`prepared_alone`): NFKC, lowercase, NFKC and the non-ASCII rules of steps 2 and 3, applied
to the character alone. That is what they make of it inside any text as long as no character of
the text is joined to its neighbour by NFKC or by the rule of step 3 (combining marks, Hangul jamo)
or lowercased by its place (the capital sigma); a document holding one goes through Python's NFKC
and lowercase and the polars rules as a whole text. A test runs every code point through both.
The compiled pass is the faster on the demo's documents (``benchmarks/dedup_signatures.py``).
The words are the runs of word bytes (a 256-entry table marks them: not ASCII whitespace, control
characters, punctuation or symbols), never across a document's end; :func:`words` hashes them as
the pass makes each prepared byte (:func:`pipeline.dedup.kernels.prepared_word_hashes`), without
writing the prepared text, which it makes only when asked for (:attr:`Words.data`).

Word hashes (:func:`word_hashes`) are a polynomial hash of each word's bytes modulo 2^64, sum_j
byte_j * M^j with a fixed odd M, plus the length, finished with the MurmurHash3 64-bit finalizer,
each word hashed as its bytes are read. Like any polynomial hash modulo 2^64 it can be made to
collide by crafted words of thousands of bytes (Thue-Morse strings); natural text never does, and
a collision merges two words, nothing worse. The hashes are stable: they depend on the bytes and
the constants here and in pipeline.dedup.kernels only, never on a library's version.
:func:`exact_hash` combines a document's word hashes (an odd pseudo-random multiplier per word
position, the word count, then the finalizer), so equal normalized texts get equal exact hashes.
"""

from __future__ import annotations

import string
import sys
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.formats.hashing import fmix64

Texts = pl.Series | pa.Array | pa.ChunkedArray | Sequence[str]

# Scripts written without spaces between words: every character is a word.
UNSPACED_SCRIPTS = ("Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar")
_UNSPACED = "".join(rf"\p{{{script}}}" for script in UNSPACED_SCRIPTS)
# Non-ASCII characters that separate words (ASCII ones are handled on bytes, see _SEPARATOR_BYTES),
# but for those of an unspaced script (some Han radicals are symbols): those are words.
_NON_ASCII_SEPARATOR = rf"[[\p{{P}}\p{{S}}\p{{Z}}\p{{Cc}}\p{{Co}}\p{{Cn}}\p{{Cf}}]&&[^\x00-\x7f]&&[^{_UNSPACED}]]"
# A character of an unspaced script with the marks after it.
_UNSPACED_CHARACTER = rf"[{_UNSPACED}]\p{{M}}*"
# Format characters that live inside words: deleted, not turned into separators.
INVISIBLE_IN_WORDS = ("\u00ad", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060", "\ufeff")

_SEPARATOR_BYTES = np.zeros(256, dtype=bool)
_SEPARATOR_BYTES[:0x21] = True  # control characters and space
_SEPARATOR_BYTES[0x7F] = True
for _char in string.punctuation:  # ASCII punctuation and symbols: all of them are Unicode P* or S*
    _SEPARATOR_BYTES[ord(_char)] = True
_IN_WORD = (~_SEPARATOR_BYTES).astype(np.uint8)  # byte -> 1 inside a word, 0 between
_WORD_BYTE_TABLE = bytes(_IN_WORD)

_U64 = np.uint64
_WORD_SEED = 0x5EED_0D0C


class _Multipliers:
    """Odd pseudo-random 64-bit multipliers, one per position, grown on demand."""

    def __init__(self, seed: int):
        self.seed = seed
        self.table = self._make(0, 1024)

    def _make(self, start: int, stop: int) -> np.ndarray:
        positions = np.arange(start, stop, dtype=np.uint64) + _U64(self.seed)
        return fmix64(positions) | _U64(1)

    def upto(self, n: int) -> np.ndarray:
        if n > len(self.table):
            size = max(n, 2 * len(self.table))
            self.table = np.concatenate([self.table, self._make(len(self.table), size)])
        return self.table


_WORD_MULTIPLIERS = _Multipliers(_WORD_SEED)


def _as_arrow(texts: Texts) -> pa.Array:
    if isinstance(texts, pl.Series):
        texts = texts.to_arrow()
    elif not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(list(texts), pa.large_string())
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.large_string())
    return texts.cast(pa.large_string())


def _prepare_non_ascii(texts: list[str]) -> list[str]:
    prepared = []
    for text in texts:
        # Invisible characters go first, so that NFKC composes a letter with a mark they separated;
        # NFKC again after lowercasing, which can leave a letter and a mark that compose
        # ("W\u030a" lowercases to "w\u030a", which is "\u1e98"). So the result is a fixed point.
        for char in INVISIBLE_IN_WORDS:
            if char in text:
                text = text.replace(char, "")
        prepared.append(unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).lower()))
    return split_non_ascii(pl.Series(prepared, dtype=pl.String)).to_list()


def split_non_ascii(texts: pl.Series) -> pl.Series:
    """Steps 2 and 3 for non-ASCII characters: a separator becomes two spaces, a character of an
    unspaced script (with its marks) gets a space on either side.

    Two passes without capture groups, which the regex engine runs on its fast path.
    The two patterns match no character in common and marks are neither, so the order of the
    passes does not matter."""
    return texts.str.replace_all(_NON_ASCII_SEPARATOR, "  ").str.replace_all(_UNSPACED_CHARACTER, " ${0} ")


def _composes(char: str) -> bool:
    """Whether NFKC may join ``char`` to the character before it: the combining marks (the only
    second characters of a canonical composition, and the only ones of a nonzero combining class)
    and the Hangul vowel and final-consonant jamo (composed by rule, not by table). A test checks
    the first part against this Python's Unicode data."""
    return unicodedata.category(char)[0] == "M" or "\u1161" <= char <= "\u1175" or "\u11a8" <= char <= "\u11c2"


def prepared_alone(char: str) -> str | None:
    """What steps 1 to 3 make of the non-ASCII character ``char`` wherever it stands, or None where
    that depends on its neighbours: a combining mark or a Hangul jamo that NFKC would join to the
    character before, a character whose NFKC holds the Greek capital sigma (lowercased by its place
    in the word), or one whose NFKC and lowercase hold a mark or a jamo. Any other character is a
    starter that nothing joins to and that joins to nothing, so a text of such characters and ASCII
    is prepared character by character: NFKC and lowercase map each alone, and the non-ASCII rules
    of steps 2 and 3 replace each alone. An invisible character inside words is deleted (step 1)."""
    if char in INVISIBLE_IN_WORDS:
        return ""
    first = unicodedata.normalize("NFKC", char)
    if "\u03a3" in first or _composes(char):
        return None
    out = unicodedata.normalize("NFKC", first.lower())
    return None if any(map(_composes, out)) else out


class _Preparations:
    """Each non-ASCII code point's prepared form (:func:`prepared_alone`), learned the first time
    a batch holds it: ``table[code point]`` is its entry in a pool of UTF-8 forms, or
    ``kernels.UNKNOWN`` / ``kernels.IN_CONTEXT``. Entries are only ever added, under a lock, so
    threads share one table."""

    def __init__(self):
        self.table: np.ndarray | None = None
        self._forms: list[bytes] = []
        # Read-only bytes, as the pool is once learned: one compiled variant of the kernels.
        self._pool = (np.frombuffer(b"", np.uint8), np.zeros(1, np.int64))
        self._lock = threading.Lock()

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(table, pool, pool_offsets)`` as they are: entries are only ever added, so what they
        hold stays true."""
        from pipeline.dedup.kernels import UNKNOWN

        with self._lock:
            if self.table is None:
                self.table = np.full(sys.maxunicode + 1, UNKNOWN, np.int32)
            return self.table, *self._pool

    def learn(self, found: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`snapshot` once the code points ``found`` are learned."""
        from pipeline.dedup.kernels import IN_CONTEXT, UNKNOWN

        with self._lock:
            found = found[self.table[found] == UNKNOWN]  # another thread may have learned some since
            if len(found):
                chars = [chr(cp) for cp in found.tolist()]
                alone = [prepared_alone(char) for char in chars]
                # The regex engine's Unicode may be newer than Python's: a character it takes for
                # a mark joins the unspaced character before it (step 3).
                marks = pl.Series([char + (form or "") for char, form in zip(chars, alone)], dtype=pl.String)
                marked = marks.str.contains(r"\p{M}").to_list()
                known = [i for i, form in enumerate(alone) if form is not None and not marked[i]]
                forms = split_non_ascii(pl.Series([alone[i] for i in known], dtype=pl.String)).to_list()
                entries = np.full(len(found), IN_CONTEXT, np.int32)
                entries[known] = np.arange(len(self._forms), len(self._forms) + len(known))
                self._forms.extend(form.encode() for form in forms)
                lengths = np.fromiter(map(len, self._forms), np.int64, len(self._forms))
                self._pool = (
                    np.frombuffer(b"".join(self._forms), np.uint8),
                    np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)]),
                )
                self.table[found] = entries
            return self.table, *self._pool


_PREPARATIONS = _Preparations()
_ASCII_LOWER = np.frombuffer(bytes(range(128)).lower() + bytes(range(128, 256)), np.uint8)


def prepare_texts(texts: Texts) -> pa.LargeStringArray:
    """Steps 1 to 3 of the normalization, except the ASCII separators, which stay as they are
    (the byte-level tokenizer treats them as separators). Nulls become empty strings.

    One compiled pass over the UTF-8 bytes: ASCII bytes lowercased, each other character replaced
    by its prepared form where that does not depend on its neighbours (:func:`prepared_alone`,
    learned once per code point). The documents that hold a character whose form does (combining
    marks, Hangul jamo, the capital sigma) go through Python's NFKC and lowercase and the polars
    rules as whole texts, and take their places back."""
    from pipeline.dedup.kernels import fill_prepared

    plan = _Preparation(texts)
    out = fill_prepared(plan.data, plan.offsets, *plan.pool, _ASCII_LOWER, plan.out_offsets, plan.own)
    return pa.LargeStringArray.from_buffers(len(plan.lengths), pa.py_buffer(plan.out_offsets), pa.py_buffer(out))


class _Preparation:
    """What :func:`prepare_texts` needs to know about a batch before it writes the prepared bytes:
    the batch's UTF-8 buffers, the table and pool of prepared forms, each document's prepared
    length and where it starts, and the documents prepared in Python, as ``(rows, bytes,
    offsets)``."""

    def __init__(self, texts: Texts):
        from pipeline.dedup.kernels import UNKNOWN_LENGTH, prepared_lengths

        self.texts = pc.fill_null(_as_arrow(texts), "")
        self.data, self.offsets = _utf8_buffers(self.texts)
        table, pool, pool_offsets = _PREPARATIONS.snapshot()
        self.lengths, unknown = prepared_lengths(self.data, self.offsets, table, pool_offsets)
        if len(unknown):  # learned outside the pass (other threads go on), then measured again
            table, pool, pool_offsets = _PREPARATIONS.learn(unknown)
            again = np.flatnonzero(self.lengths == UNKNOWN_LENGTH)
            self.lengths[again] = prepared_lengths(self.data, self.offsets, table, pool_offsets, again)[0][again]
        self.pool = (table, pool, pool_offsets)
        rows = np.flatnonzero(self.lengths < 0)
        own_data, own_offsets = np.zeros(0, np.uint8), np.zeros(1, np.int64)  # writable, as Arrow's
        if len(rows):
            own = pa.array(_prepare_non_ascii(self.texts.take(pa.array(rows)).to_pylist()), pa.large_string())
            own_data, own_offsets = _utf8_buffers(own)
            own_offsets = own_offsets - own_offsets[0]
            self.lengths[rows] = np.diff(own_offsets)
        self.own = (rows, own_data, own_offsets)
        self.out_offsets = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=self.out_offsets[1:])


def _utf8_buffers(array: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets) of a large_string array without copying."""
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64, count=len(array) + 1, offset=array.offset * 8)
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return data, offsets


@dataclass
class Words:
    """The words of a batch of documents, as hashes.

    ``hashes[doc_offsets[d]:doc_offsets[d + 1]]`` are document ``d``'s words in order; ``data``
    and ``offsets`` are the UTF-8 bytes of the prepared texts and each document's range in them
    (prepared from ``texts`` when first asked for, where they were not given); :attr:`starts` and
    :attr:`ends` are each word's byte range in ``data`` (found when first asked for: signatures
    from the polynomial shingle hash never need them, nor the prepared bytes)."""

    hashes: np.ndarray  # uint64, one per word
    doc_offsets: np.ndarray  # int64, documents + 1
    texts: pa.LargeStringArray  # the documents
    prepared: pa.LargeStringArray | None = None  # their prepared texts (prepare_texts)

    @cached_property
    def _buffers(self) -> tuple[np.ndarray, np.ndarray]:
        if self.prepared is None:
            self.prepared = prepare_texts(self.texts)
        return _utf8_buffers(self.prepared)

    @property
    def data(self) -> np.ndarray:
        """uint8: the prepared texts' bytes, one after another."""
        return self._buffers[0]

    @property
    def offsets(self) -> np.ndarray:
        """int64, documents + 1: each document's byte range in :attr:`data`."""
        return self._buffers[1]

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        from pipeline.dedup.kernels import word_bounds

        return word_bounds(self.data, self.offsets, _IN_WORD, self.doc_offsets)

    @property
    def starts(self) -> np.ndarray:
        return self._bounds[0]

    @property
    def ends(self) -> np.ndarray:
        return self._bounds[1]

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.doc_offsets)

    def joined_bytes(self) -> tuple[bytes, np.ndarray, np.ndarray]:
        """``(text, starts, ends)``: every document's words joined by single spaces, all documents
        in a row (no separator between documents), and each word's byte range in ``text``; the
        normalized text of a run of words of one document is one slice of it."""
        lengths = self.ends - self.starts
        spaced = np.ones(len(lengths), dtype=bool)  # a space follows every word but a document's last
        counts = self.counts
        spaced[self.doc_offsets[1:][counts > 0] - 1] = False
        keep = np.frombuffer(self.data.tobytes().translate(_WORD_BYTE_TABLE), dtype=bool).copy()
        out = self.data.copy()
        # The separator byte right after a word (never the next word's: words of one document are
        # separated by at least one separator byte) becomes the space.
        after = self.ends[spaced]
        keep[after] = True
        out[after] = 32
        text = out[keep].tobytes()
        ends = np.cumsum(lengths + spaced) - spaced
        return text, ends - lengths, ends

    def joined(self) -> list[str]:
        """Each document's words joined by single spaces (its normalized text)."""
        text, starts, ends = self.joined_bytes()
        counts = self.counts
        out = []
        for first, n in zip(self.doc_offsets[:-1].tolist(), counts.tolist()):
            out.append(text[starts[first] : ends[first + n - 1]].decode("utf-8") if n else "")
        return out

    def strings(self) -> list[list[str]]:
        """Each document's words as strings."""
        return [text.split(" ") if text else [] for text in self.joined()]


def words(texts: Texts, prepared: pa.LargeStringArray | None = None) -> Words:
    """Hash the words of every document of a batch (see the module's docstring). Without
    ``prepared`` (:func:`prepare_texts` of ``texts``), the texts are prepared and their words
    hashed in one compiled pass that never writes the prepared bytes
    (:func:`pipeline.dedup.kernels.prepared_word_hashes`)."""
    from pipeline.dedup.kernels import prepared_word_hashes
    from pipeline.dedup.kernels import word_hashes as hash_words

    if prepared is not None:
        data, offsets = _utf8_buffers(prepared)
        hashes, doc_offsets = hash_words(data, offsets, _IN_WORD)
        return Words(hashes, doc_offsets, pc.fill_null(_as_arrow(texts), ""), prepared)
    plan = _Preparation(texts)
    hashes, doc_offsets, long_docs = prepared_word_hashes(
        plan.data, plan.offsets, *plan.pool, _ASCII_LOWER, _IN_WORD, int(plan.out_offsets[-1]), plan.own
    )
    if len(long_docs):  # a word longer than the one-pass hash's table: those documents again, plainly
        long_texts = plan.texts.take(pa.array(long_docs))
        again = words(long_texts, prepare_texts(long_texts))
        starts = doc_offsets[long_docs]
        counts = np.diff(again.doc_offsets)
        places = np.repeat(starts - again.doc_offsets[:-1], counts) + np.arange(len(again.hashes))
        hashes[places] = again.hashes
    return Words(hashes, doc_offsets, plan.texts)


def word_hashes(texts: Texts) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, offsets)``: uint64 hashes of every document's words, flat, with per-document
    offsets (``hashes[offsets[d]:offsets[d + 1]]`` belong to document ``d``)."""
    found = words(texts)
    return found.hashes, found.doc_offsets


def combine_word_hashes(hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """One uint64 per document from its words' hashes, in order (a multiplier per word position,
    the word count, then the finalizer)."""
    from pipeline.dedup.kernels import combine_hashes

    offsets = np.asarray(offsets, dtype=np.int64)
    longest = int(np.diff(offsets).max()) if len(offsets) > 1 else 0
    return combine_hashes(hashes, offsets, _WORD_MULTIPLIERS.upto(longest + 1))


def exact_hash(texts: Texts) -> np.ndarray:
    """uint64 hash of each document's normalized text: equal normalized texts, equal hashes.

    Vectorized over the batch: the documented normalization, the words' byte-level hashes, then a
    position-aware combination of them (see the module's docstring). A text with no words (empty,
    or only punctuation and spaces) gets the hash of the empty text."""
    hashes, offsets = word_hashes(texts)
    return combine_word_hashes(hashes, offsets)


def split_words(texts: Texts) -> list[list[str]]:
    """The words of each document (unspaced scripts split into characters), as strings."""
    return words(texts).strings()


def normalize_text(texts: Texts) -> pl.Series:
    """The normalized text of each document: its words joined by single spaces."""
    return pl.Series("normalized", words(texts).joined(), dtype=pl.String)
