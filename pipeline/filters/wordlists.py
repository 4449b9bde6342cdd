"""C4's bad-words rule: a document that holds any word or phrase of its language's list is removed.

Raffel et al. 2020 ("Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer", section 2.2) drop every page containing a word of the "List of Dirty, Naughty,
Obscene or Otherwise Bad Words"; mC4 and datatrove's ``C4BadWordsFilter`` do so per language.
As they do, an entry matches, in any case, where it stands between non-word characters or the
text's ends (``(?:^|\\W)(entry)(?:\\W|$)``, Unicode ``\\W``), so ``ass`` does not match
``class`` and a phrase matches with its spaces; in a language written without spaces between
words (a script of :data:`pipeline.filters.text.SPACELESS_SCRIPT_CODES`: ``ja``, ``zh``, ``th``,
``lo``, ``km``, ``my``, ``bo``) an entry matches anywhere, as datatrove does for ja, th and zh.

No list ships with this project, and none is fetched: the user names one file per language
(``lists``: a folder of ``<code>.txt`` or ``<code>`` files, as a clone of LDNOOBW's repository
has them, or a table ``{ en = "en.txt" }``), one entry per line, UTF-8; blank lines and lines
starting with ``#`` are skipped. A folder's files of one language (``de`` and ``de-AT``) are
one list. A
document's language is the lang stage's (``zho_Hans`` finds the ``zh`` list); a language
without a list passes, as does a document without a language unless ``default_lang`` names the
list for it.

Each language's entries are one case-insensitive regular expression (an alternation, longest
entries first), run by polars over the batch's documents of that language: no loop over words or
documents in Python. Its ``(?i)`` costs less than lowercasing the text first: on 7,170 web pages
of 4.2 KB and a list of 404 entries, 42 us a document against 65 (one core; pyahocorasick with
the boundary check in Python: 170). A list of more than :data:`CHUNK_ENTRIES` entries is cut into
expressions of that many, each under polars' size limit for a compiled expression (20,000 entries
in one exceed it), each run on the documents the ones before left unmatched.

The rule ``c4_badwords.listed_word`` fires when ``has_listed_word`` is 1; the entry that matched
(as the list writes it) is the note ``c4_badwords.match``, stored with the measures and shown by
the report and ``curate inspect``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.filters.text import is_spaceless_code
from pipeline.formats.langcodes import code_language, code_languages, lang_languages, parse_lang
from pipeline.formats.step import FilterOutput, Rule

RULE_LISTED_WORD = "c4_badwords.listed_word"
LIST_SUFFIX = ".txt"
# Entries per expression: 1,000 random words cost 27 us a web page, 4,000 cost 130 (the engine
# leaves its fast automaton), so longer lists are cut.
CHUNK_ENTRIES = 1000
# The characters a Rust regular expression (polars') reads as syntax, escaped in an entry.
_REGEX_SYNTAX = set("\\.+*?()|[]{}^$#&-~")


@lru_cache(maxsize=64)
def _cached_entries(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    return _read_entries(path)


def _read_entries(path: str) -> tuple[str, ...]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"list {path!r} is not UTF-8 text (byte {error.start}); save it as UTF-8") from None
    entries = (line.strip() for line in text.splitlines())
    return tuple(dict.fromkeys(e for e in entries if e and not e.startswith("#")))


def read_list(path: str | Path, cached: bool = True) -> tuple[str, ...]:
    """The entries of a list file, in order, once each: one per line, stripped, without blank
    lines and lines starting with ``#``. Read once per process while the file is unchanged
    (``cached``; a caller that keeps what it makes of a long list reads it uncached). Raises
    FileNotFoundError or ValueError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"list {str(path)!r} not found (or not a file); point the setting at an existing file")
    if not cached:
        return _read_entries(str(path))
    stat = path.stat()
    return _cached_entries(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def list_files(lists: str | Path | Mapping[str, str | Path], key: str = "lists") -> dict[str, list[Path]]:
    """The list files of each language: a table of code to file, or a folder's files named
    ``<code>.txt`` or ``<code>`` (as LDNOOBW's repository names them; its ``de-AT`` joins
    ``de``), other files (README, LICENSE, ``*.json``) left alone. Raises ValueError or
    FileNotFoundError naming the folder, file or code."""
    if isinstance(lists, Mapping):
        return {language: [Path(lists[code])] for language, code in code_languages(lists, key).items()}
    folder = Path(lists)
    if not folder.is_dir():
        raise FileNotFoundError(
            f'{key}: {str(folder)!r} is not a folder; give a folder of <code>.txt files or a table {{ en = "en.txt" }}'
        )
    languages: dict[str, list[Path]] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in ("", LIST_SUFFIX)):
        if path.suffix == LIST_SUFFIX:  # named as a list: its name must be a code
            try:
                language = code_language(path.stem, key)
            except ValueError as error:
                raise ValueError(f"{error} (the file {str(path)!r}: name each list <code>.txt)") from None
        else:
            language = parse_lang(path.name)[0]
        if language is not None:
            languages.setdefault(language, []).append(path)
    if not languages:
        raise FileNotFoundError(f"{key}: the folder {str(folder)!r} has no <code>.txt files (en.txt, de.txt, ...)")
    return languages


def _escaped(entry: str) -> str:
    return "".join("\\" + c if c in _REGEX_SYNTAX else c for c in entry)


def entry_patterns(entries: list[str] | tuple[str, ...], boundaries: bool) -> list[str]:
    """Case-insensitive regular expressions (polars' syntax) whose group 1 is the first entry
    found in a text, on word boundaries unless ``boundaries`` is False: one per
    :data:`CHUNK_ENTRIES` entries, longest first (none for no entries)."""
    lowered = sorted(dict.fromkeys(e.lower() for e in entries), key=lambda e: (-len(e), e))
    patterns = []
    for start in range(0, len(lowered), CHUNK_ENTRIES):
        alternation = "|".join(_escaped(e) for e in lowered[start : start + CHUNK_ENTRIES])
        patterns.append(rf"(?i)(?:^|\W)({alternation})(?:\W|$)" if boundaries else f"(?i)({alternation})")
    return patterns


class C4BadWords:
    """C4's bad-words rule per language (module docstring). ``lists``: a folder of
    ``<code>.txt`` files or a table of code to file; ``default_lang``: the list for documents
    without a language (None: they pass)."""

    name = "c4_badwords"
    thresholds = ()
    notes = ("match",)  # the entry found, as its list writes it

    def __init__(self, lists: str | Path | Mapping[str, str | Path], default_lang: str | None = None):
        files = list_files(lists, "lists")
        self.lists, self.default_lang = lists, default_lang
        self.files = {language: [str(path) for path in paths] for language, paths in files.items()}
        self.default_language = None if default_lang is None else code_language(default_lang, "default_lang")
        self.patterns: dict[str, list[str]] = {}
        self.written: dict[str, dict[str, str]] = {}  # per language: the lowercased entry -> as written
        for language, paths in files.items():
            entries = tuple(dict.fromkeys(e for path in paths for e in read_list(path)))
            patterns = entry_patterns(entries, boundaries=is_spaceless_code(language) is not True)
            if patterns:
                self.patterns[language] = patterns
                self.written[language] = {e.lower(): e for e in reversed(entries)}

    def rules(self) -> list[Rule]:
        what = "1 when the text holds an entry of its language's list, on word boundaries; 0 when not"
        return [Rule(RULE_LISTED_WORD, measure="has_listed_word", op=">=", threshold=1.0, counts=what)]

    def languages(self, docs: pl.DataFrame) -> pl.Series:
        """Each document's language as the lists are keyed (``default_lang`` where it has none)."""
        if "lang" in docs.columns:
            language = lang_languages(docs["lang"])
        else:
            language = pl.Series("lang", [None] * docs.height, dtype=pl.String)
        return language.fill_null(self.default_language) if self.default_language is not None else language

    def matches(self, docs: pl.DataFrame) -> pl.Series:
        """The entry each document holds (as its list writes it; the first found), null where it
        holds none or its language has no list."""
        n = docs.height
        found = pl.Series("match", [None] * n, dtype=pl.String)
        language = self.languages(docs)
        for code in language.drop_nulls().unique(maintain_order=True).to_list():
            if code not in self.patterns:
                continue
            rows = np.flatnonzero((language == code).to_numpy())
            hits = self._first_hits(docs["text"].gather(rows).fill_null(""), self.patterns[code])
            if hits.is_not_null().any():
                written = hits.str.to_lowercase().replace_strict(self.written[code], default=hits)
                found = found.scatter(rows, written)
        return found

    @staticmethod
    def _first_hits(text: pl.Series, patterns: list[str]) -> pl.Series:
        """The text each document's first matching expression found (null: none matched)."""
        hits = text.str.extract(patterns[0], 1)
        for pattern in patterns[1:]:
            left = np.flatnonzero(hits.is_null().to_numpy())
            if not len(left):
                break
            hits = hits.scatter(left, text.gather(left).str.extract(pattern, 1))
        return hits

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        found = self.matches(docs)
        listed = self.languages(docs).is_in(list(self.files))
        has = pl.select(pl.when(listed.fill_null(False)).then(found.is_not_null().cast(pl.Float64))).to_series()
        return FilterOutput(measures=pl.DataFrame([has.alias("has_listed_word")]), notes={"match": found})
