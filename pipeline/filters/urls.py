"""URL blocklists: a document whose URL is on a domain or URL list, or holds a banned substring,
is removed (datatrove's ``URLFilter``, Dolma's and NeMo Curator's URL blocklists, DCLM's and
RefinedWeb's URL filtering).

The lists are the user's files, one entry per line (blank lines and lines starting with ``#``
skipped), in the layout of the Université Toulouse Capitole's blacklists (UT1, which datatrove
reads): a folder per category holding a ``domains`` and a ``urls`` file. ``domains`` and ``urls``
each take files or folders; a folder stands for every file of that name under it, so
``domains = ["~/blacklists"]`` reads ``adult/domains``, ``gambling/domains``, ... A list is named
by its file and the folder holding it (``adult/domains``): a removed document names the list and
the entry that matched (the note ``url_blocklist.match``: ``adult/domains: example.com``).

How a URL is read (the same for the lists' entries): lowercase; the scheme, user and password,
port, fragment and trailing dots of the host dropped; a leading ``www.`` dropped, so that
``www.example.com`` and ``example.com`` are one site whichever of them a list or a URL writes.

* **Domains**: an entry matches the URL's host and every host under it (``example.com`` matches
  ``example.com``, ``www.example.com`` and ``a.b.example.com``, not ``badexample.com``); a
  leading ``*.`` or ``.`` of an entry is dropped (its wildcard means the same).
* **URLs**: an entry (``example.com/path``, with or without a scheme) matches that URL and every
  URL below it: the same host and a path that is the entry's or continues it after a ``/``; the
  query too when the entry has one. A trailing ``/`` of an entry is dropped.
* **Substrings** (``substrings``): a string found anywhere in the lowercased URL.

A document without a URL, or one no host can be read from, passes (its measures are null). The
rules are ``url_blocklist.domain``, ``url_blocklist.url`` and ``url_blocklist.substring``, each
only where its lists are given; a document is removed by the first that fires, in that order.

Every step runs over the batch at once: one polars expression reads the hosts and paths, and
each level of a host (``a.b.example.com``, ``b.example.com``, ``example.com``) and of a path is
looked up among the lists' entries by hash (:class:`EntryLookup`): no loop over documents or
entries in Python. The lists are read once per process while their files are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.filters.wordlists import read_list
from pipeline.formats.step import FilterOutput, Rule

RULE_DOMAIN = "url_blocklist.domain"
RULE_URL = "url_blocklist.url"
RULE_SUBSTRING = "url_blocklist.substring"
SUBSTRINGS = "substrings"  # the name of the substring list in a note

# A URL's parts: scheme with its "//" (optional: a list's "example.com:8080/a" has a port, not
# a scheme), user (optional), host (a bracketed IPv6 or up to a port or path), port, path, query.
# The same expression reads the lists' entries.
_URL = (
    r"^\s*(?:(?:[a-z][a-z0-9+.\-]*:)?//)?(?:[^@/?#\s]*@)?(?P<host>\[[^\]]*\]|[^:/?#\s]*)"
    r"(?::\d*)?(?P<path>[^?#\s]*)(?P<query>\?[^#\s]*)?"
)
# Most levels of a host or path looked up: deeper ones are cut (a host of 20 labels is no site).
MAX_LEVELS = 16
_SEED = 0  # of the 64-bit hashes the entries are looked up by (within one process)


def _paths(given: str | Path | Sequence[str | Path] | None) -> list[Path]:
    if given is None:
        return []
    return [Path(p) for p in ([given] if isinstance(given, (str, Path)) else given)]


def list_files(given: str | Path | Sequence[str | Path] | None, kind: str) -> list[Path]:
    """The list files ``given`` names for ``kind`` (``domains`` or ``urls``): each file, and
    every file named ``kind`` under each folder (UT1's layout), in sorted order. Raises
    FileNotFoundError naming a path that is neither, or a folder without such a file."""
    files: list[Path] = []
    for path in _paths(given):
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob(kind) if p.is_file())
            if not found:
                raise FileNotFoundError(
                    f"{kind}: the folder {str(path)!r} has no file named {kind!r} (UT1's layout: <category>/{kind})"
                )
            files += found
        else:
            raise FileNotFoundError(f"{kind}: {str(path)!r} is neither a file nor a folder; give the list's path")
    return files


def list_name(path: Path) -> str:
    """A list's name in notes: its file and the folder holding it (``adult/domains``)."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def url_parts(urls: pl.Series) -> pl.DataFrame:
    """Each URL's ``host`` (lowercase, without port, trailing dots and a leading ``www.``;
    null where none can be read), ``path`` (lowercase, without a trailing ``/``) and ``query``
    (with its ``?``, or empty)."""
    parts = urls.cast(pl.String).str.to_lowercase().str.extract_groups(_URL).struct.unnest()
    host = parts["host"].str.strip_chars_end(".").str.replace(r"^www\.", "")
    return pl.DataFrame(
        {
            "host": pl.select(pl.when(host.str.len_bytes() > 0).then(host)).to_series(),
            "path": parts["path"].fill_null("").str.strip_chars_end("/"),
            "query": parts["query"].fill_null(""),
        }
    )


def _domain_entries(entries: pl.Series) -> pl.Series:
    return url_parts(entries.str.strip_chars_start("*."))["host"]


def _url_entries(entries: pl.Series) -> pl.Series:
    parts = url_parts(entries)
    return parts["host"] + parts["path"] + parts["query"]


def _table(files: list[Path], normalize) -> pl.DataFrame:
    """``entry`` (as read by ``normalize``) and ``list`` (the first list holding it), each once."""
    frames = []
    for path in files:
        entries = pl.Series("entry", read_list(path, cached=False), dtype=pl.String)
        frames.append(
            pl.DataFrame([normalize(entries).alias("entry"), pl.Series("list", [list_name(path)] * len(entries))])
        )
    table = pl.concat(frames) if frames else pl.DataFrame(schema={"entry": pl.String, "list": pl.String})
    return table.drop_nulls("entry").unique("entry", keep="first", maintain_order=True)


class EntryLookup:
    """The entries of a kind's lists (``_table``), looked up by their sorted 64-bit hashes: a
    batch's candidates are hashed by polars and found by ``np.searchsorted``, then compared as
    strings, so a list of millions of entries (UT1's adult domains: about 4.6 million) is hashed
    once, not each time a batch asks (as ``is_in`` does)."""

    def __init__(self, table: pl.DataFrame):
        self.table = table
        hashes = table["entry"].hash(_SEED).to_numpy()
        self.order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[self.order]

    def rows(self, candidates: pl.Series) -> np.ndarray:
        """Per candidate, the row of the table holding it, or -1."""
        rows = np.full(len(candidates), -1, dtype=np.int64)
        if not len(self.hashes):
            return rows
        hashes = candidates.hash(_SEED).to_numpy()
        at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        maybe = np.flatnonzero((self.hashes[at] == hashes) & candidates.is_not_null().to_numpy())
        if len(maybe):
            row = self.order[at[maybe]]
            same = (self.table["entry"].gather(row) == candidates.gather(maybe)).fill_null(False).to_numpy()
            rows[maybe[same]] = row[same]
        return rows

    def first(self, levels: list[pl.Series], n: int) -> pl.Series:
        """Per document of ``n``, the first of its ``levels`` (candidates, most specific first)
        that a list holds: ``<list>: <entry>``, null where none is."""
        found = np.full(n, -1, dtype=np.int64)
        for level in levels:
            open_ = found < 0
            if not open_.any():
                break
            rows = self.rows(level)
            found[open_] = rows[open_]
        hit = np.flatnonzero(found >= 0)
        note = pl.Series("match", [None] * n, dtype=pl.String)
        if len(hit):
            rows = self.table[pl.Series(found[hit])]
            note = note.scatter(hit, rows["list"] + ": " + rows["entry"])
        return note


def _stamps(files: list[Path]) -> tuple[tuple[str, int, int], ...]:
    return tuple((str(p.resolve()), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


@lru_cache(maxsize=8)
def _lookup(kind: str, stamps: tuple[tuple[str, int, int], ...]) -> EntryLookup:
    """The lookup of ``kind``'s list files (their paths and stamps), made once per process while
    they are unchanged: the stage's filters and each language's share it."""
    normalize = _domain_entries if kind == "domains" else _url_entries
    return EntryLookup(_table([Path(path) for path, _, _ in stamps], normalize))


def host_levels(host: pl.Series) -> list[pl.Series]:
    """The host, then each domain above it (``a.b.c`` then ``b.c`` then ``c``), as Series of
    the batch (null where a host has fewer levels)."""
    levels, current = [], host
    for _ in range(MAX_LEVELS):
        if current.is_null().all():
            break
        levels.append(current)
        current = current.str.extract(r"^[^.]*\.(.+)$", 1)
    return levels


def url_levels(parts: pl.DataFrame) -> list[pl.Series]:
    """The URL with its query, then its host and path, then each path above it (cut at a
    ``/``), down to the host alone: the candidates a URL entry matches, most specific first."""
    host, path = parts["host"], parts["path"]
    levels = [host + path + parts["query"]]
    current = path
    for _ in range(MAX_LEVELS):
        levels.append(host + current)
        if (current.str.len_bytes().fill_null(0) == 0).all():
            break
        current = current.str.replace(r"/[^/]*$", "")
    return levels


class URLBlocklist:
    """Removes documents whose URL is on a domain or URL list or holds a banned substring
    (module docstring). ``domains``, ``urls``: list files or folders of UT1's layout (a path or a
    list of them); ``substrings``: strings banned anywhere in a URL."""

    name = "url_blocklist"
    thresholds = ()
    notes = ("match",)  # "<list>: <entry>" of the first rule that fires

    def __init__(
        self,
        domains: str | Path | Sequence[str | Path] | None = None,
        urls: str | Path | Sequence[str | Path] | None = None,
        substrings: Sequence[str] = (),
    ):
        if domains is None and urls is None and not substrings:
            raise ValueError("url_blocklist has no list: give domains, urls or substrings")
        self.domains, self.urls, self.substrings = domains, urls, tuple(substrings)
        self.domain_lookup = _lookup("domains", _stamps(list_files(domains, "domains")))
        self.url_lookup = _lookup("urls", _stamps(list_files(urls, "urls")))
        self.banned = sorted({s.lower() for s in self.substrings if s}, key=lambda s: (-len(s), s))

    def rules(self) -> list[Rule]:
        rules = []
        if self.domains is not None:
            what = "1 when the URL's host, or a domain above it, is on a domain list"
            rules.append(Rule(RULE_DOMAIN, measure="blocked_domain", op=">=", threshold=1.0, counts=what))
        if self.urls is not None:
            what = "1 when the URL, or one above it, is on a URL list"
            rules.append(Rule(RULE_URL, measure="blocked_url", op=">=", threshold=1.0, counts=what))
        if self.banned:
            what = "1 when the lowercased URL holds a banned substring"
            rules.append(Rule(RULE_SUBSTRING, measure="banned_substring", op=">=", threshold=1.0, counts=what))
        return rules

    def _substrings(self, urls: pl.Series) -> pl.Series:
        lowered = urls.cast(pl.String).str.to_lowercase()
        first = lowered.str.extract_many(self.banned, overlapping=False).list.first()
        return pl.select(pl.when(first.is_not_null()).then(pl.lit(f"{SUBSTRINGS}: ") + first)).to_series()

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        n = docs.height
        urls = docs["url"] if "url" in docs.columns else pl.Series([None] * n, dtype=pl.String)
        parts = url_parts(urls)
        read = parts["host"].is_not_null()
        found, measures = {}, []
        if self.domains is not None:
            found["blocked_domain"] = self.domain_lookup.first(host_levels(parts["host"]), n)
        if self.urls is not None:
            found["blocked_url"] = self.url_lookup.first(url_levels(parts), n)
        if self.banned:
            found["banned_substring"] = self._substrings(urls)
        for measure, notes in found.items():
            flag = notes.is_not_null().cast(pl.Float64)
            measures.append(pl.select(pl.when(read).then(flag)).to_series().alias(measure))
        match = pl.Series("match", [None] * n, dtype=pl.String)
        for notes in found.values():
            match = match.fill_null(pl.select(pl.when(read).then(notes)).to_series())
        return FilterOutput(measures=pl.DataFrame(measures), notes={"match": match})
