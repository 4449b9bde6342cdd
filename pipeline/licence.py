"""Licences of documents: SPDX identifiers, read from what the input says, never guessed.

Every document carries a ``licence`` (:data:`pipeline.formats.documents.LICENCE`): an SPDX licence
identifier (``CC-BY-SA-4.0``), an SPDX expression (``MIT AND BSD-3-Clause`` where the input names
several licences), a ``LicenseRef-...`` for a licence the SPDX list lacks, or :data:`UNKNOWN` where
the input names none. A source declares one for all its documents (``licence``) or names a field
that holds it per document (``licence_field``, read from the record's ``meta``; a WARC page's
``rel="license"`` links are in its ``meta`` as ``licence_links``); a document whose field is empty
gets the source's declared licence, or :data:`UNKNOWN`.

What a field may hold, and what it becomes (:func:`licence_of`):

- an SPDX identifier or expression, in any case (``mit``, ``cc-by-sa-4.0``, ``MIT OR
  LicenseRef-x``) -> its canonical form;
- a Creative Commons URL (``https://creativecommons.org/licenses/by-nc/3.0/de/``,
  ``.../publicdomain/zero/1.0/`` -> ``CC0-1.0``, the Public Domain Mark ->
  ``LicenseRef-CC-PDM-1.0``) -> the SPDX identifier. The path after the version names a port
  (``de``, ``igo``), kept as the SPDX port where the list has it (``CC-BY-NC-3.0-DE``) and as
  ``LicenseRef-CC-BY-2.0-scotland`` where it does not; a deed's page (``deed.en``) is no port;
- a Creative Commons name (``CC BY-SA 4.0 International``, ``cc-by-sa-3.0``, Dolma's ``cc_re``
  attribute names such as ``cc_re__cc_re__cc_by_sa_3_0``) -> the SPDX identifier. A 4.0 licence
  has no ports, so a suffix there is a deed's language and is dropped; an earlier version's
  suffix may be a port or a deed's language, which the name does not tell, so it is kept as
  ``LicenseRef-CC-BY-SA-3.0-de``;
- an ``spdx.org/licenses/`` or ``opensource.org/licenses/`` URL -> the identifier it names;
- ``AND`` / ``OR`` between any of these (``GPL-3.0-only AND CC BY-NC 3.0``) -> the expression;
- a list of any of these, or an object whose keys are (Dolma's ``attributes``): each recognised
  one, joined by ``AND`` when there are several. An object's other keys, and keys whose value is
  null, are ignored;
- any other text -> ``LicenseRef-<the text>``, kept as the input said it, for a person to read.

Rules (:class:`LicenceRule`) keep documents whose licence satisfies an allow list and drop those
whose licence satisfies a deny list, reading ``AND`` and ``OR`` as SPDX means them; patterns are
shell-style and case-insensitive (``cc-by-*``).
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Sequence
from functools import lru_cache

import polars as pl
import pyarrow as pa

from pipeline.formats.documents import UNKNOWN

_REF = "LicenseRef-"
_CC_KINDS = ("BY", "BY-SA", "BY-ND", "BY-NC", "BY-NC-SA", "BY-NC-ND")
# Words that may follow a licence's name without changing it ("CC BY-SA 4.0 International").
_TRAILING = r"(?:[\s_-]+(?:international|unported|universal|generic|public|license|licence|deed|legal\s*code))*"
# A licence or deed URL: the path after the version is a port (de, igo, scotland) or a deed's
# page (deed.en, legalcode), which is not.
_CC_URL = re.compile(
    r"^(?:https?:)?(?://)?(?:www\.)?creativecommons\.org/licen[cs]es/(by(?:-(?:nc|nd|sa))*)/(\d\.\d)"
    r"(?:/(?!deed|legalcode)([a-z]+(?:-[a-z]+)?)(?=/|$|[?#]))?",
    re.I,
)
_CC_ZERO = re.compile(
    r"^(?:https?:)?(?://)?(?:www\.)?creativecommons\.org/publicdomain/zero/1\.0|"
    rf"(?:^|__)cc[\s_-]*(?:0|zero|publicdomain[\s_-]*zero)(?:[\s_-]*1[._]0)?(?:[_-][a-z]{{2}})?{_TRAILING}$",
    re.I,
)
# The Public Domain Mark labels a work free of known copyright; it is no licence, and SPDX lists none.
_CC_MARK = re.compile(
    r"^(?:https?:)?(?://)?(?:www\.)?creativecommons\.org/publicdomain/mark/1\.0|"
    r"(?:^|__)cc[\s_-]*publicdomain[\s_-]*mark[\s_-]*1[._]0(?:[_-][a-z]{2})?$",
    re.I,
)
PUBLIC_DOMAIN_MARK = "LicenseRef-CC-PDM-1.0"
# A name: "CC BY-SA 4.0", "cc-by-sa-3.0-de", Dolma's "cc_re__cc_re__cc_by_sa_3_0_de". A suffix there
# may be a port or a deed's language: nothing in the name tells which.
_CC_NAME = re.compile(
    rf"(?:^|__)cc[\s_-]*(by(?:[\s_-]*(?:nc|nd|sa))*)[\s_-]*(\d)[._](\d)(?:[_-]([a-z]{{2,}}))?{_TRAILING}$", re.I
)
_LICENCE_URL = re.compile(
    r"^(?:https?:)?(?://)?(?:www\.)?(?:spdx\.org|opensource\.org)/licenses/([A-Za-z0-9.+-]+?)(?:\.html|\.php)?/?"
    r"(?:[?#].*)?$"
)
_REF_ID = re.compile(r"^LicenseRef-[A-Za-z0-9.-]+$")
_REF_CHARS = re.compile(r"[^A-Za-z0-9.-]+")
_OPERATOR = re.compile(r"\s+(AND|OR)\s+", re.I)


# license_expression's parser is not thread-safe: threads that parse at once with a fresh
# Licensing (its tokenizer is built on first use) got wrong answers, 78 of 480 in a test, and the
# caches below kept them for the process (a source stage on local threads once wrote
# "LicenseRef-BSD-3-Clause-AND-MIT" for "BSD-3-Clause AND MIT", where Dask's processes did not).
_PARSING = threading.Lock()


@lru_cache(maxsize=1)
def _licensing():
    from license_expression import get_spdx_licensing

    return get_spdx_licensing()


def _parse(value: str):
    """``value`` as a parsed SPDX expression whose every licence is on the SPDX list or a
    ``LicenseRef-``; None otherwise. One thread at a time (:data:`_PARSING`)."""
    with _PARSING:
        licensing = _licensing()
        try:
            parsed = licensing.parse(value, validate=False)
        except Exception:  # a string the expression parser cannot read
            return None
        if parsed is None or any(not _REF_ID.match(key) for key in licensing.unknown_license_keys(parsed)):
            return None
        return parsed


@lru_cache(maxsize=65536)
def spdx(value: str) -> str | None:
    """The canonical form of an SPDX licence identifier or expression (any case; ``LicenseRef-``
    references included); None when ``value`` is neither."""
    value = value.strip()
    if not value or value.lower() == UNKNOWN:
        return None
    parsed = _parse(value)
    return None if parsed is None else str(parsed.render())


def _cc(kind: str, version: str, suffix: str | None, port: bool) -> str:
    """The SPDX id of a Creative Commons licence; ``suffix``: what followed the version, a port
    when ``port`` (a URL's path), else a port or a deed's language (a name)."""
    kind = "-".join(re.split(r"[\s_-]+", kind.strip())).upper()
    if kind not in _CC_KINDS:
        kind = "-".join(sorted(kind.split("-"), key=lambda part: ("BY", "NC", "ND", "SA").index(part)))
    name = f"CC-{kind}-{version}"
    if suffix is None or version == "4.0":  # 4.0 has no ports: a suffix is a deed's language
        return name
    if port and (found := spdx(f"{name}-{suffix}")):
        return found
    return f"{_REF}{name}-{suffix.lower()}"


@lru_cache(maxsize=65536)
def recognise(value: str) -> str | None:
    """The SPDX identifier (or expression, or ``LicenseRef-``) that one string names, or None
    when it names none this module knows (see the module docstring). An expression whose
    operands are recognised one by one (``GPL-3.0-only AND CC BY-NC 3.0``) is one too."""
    value = value.strip()
    if not value:
        return None
    if found := spdx(value):
        return found
    if _CC_ZERO.search(value):
        return "CC0-1.0"
    if _CC_MARK.search(value):
        return PUBLIC_DOMAIN_MARK
    if match := _CC_URL.search(value):
        return _cc(match[1], match[2], match[3], port=True)
    if match := _CC_NAME.search(value):
        return _cc(match[1], f"{match[2]}.{match[3]}", match[4], port=False)
    if match := _LICENCE_URL.search(value):
        return spdx(match[1])
    pieces = _OPERATOR.split(value)
    if len(pieces) > 1 and "(" not in value:
        operands = [recognise(piece) for piece in pieces[::2]]
        if all(operands):
            joined = operands[0]
            for operator, operand in zip(pieces[1::2], operands[1:]):
                joined += (
                    f" {operator.upper()} ({operand})"
                    if _OPERATOR.search(operand)
                    else f" {operator.upper()} {operand}"
                )
            return spdx(joined)
    return None


def combine(licences: Sequence[str]) -> str | None:
    """Several licences as one SPDX expression (``A AND B``, sorted, each once); None for none."""
    unique = sorted(set(licences))
    if len(unique) <= 1:
        return unique[0] if unique else None
    return " AND ".join(f"({item})" if " OR " in item else item for item in unique)


@lru_cache(maxsize=65536)
def licence_of(raw: str | None) -> str | None:
    """What a licence field holds (its JSON text when it is a list or an object) as one licence
    string; None when it holds nothing (see the module docstring)."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if text[0] in "[{":
        try:
            value = json.loads(text)
        except ValueError:
            value = text
    else:
        value = text
    if isinstance(value, dict):  # the keys that name a licence, and hold a value
        return combine([found for key, held in value.items() if held is not None and (found := recognise(str(key)))])
    items = value if isinstance(value, list) else [value]
    named = []
    for item in items:
        if item is None or not str(item).strip() or str(item).strip().lower() == UNKNOWN:
            continue
        item = str(item)
        named.append(recognise(item) or f"{_REF}{_REF_CHARS.sub('-', item.strip()).strip('-')[:64] or 'empty'}")
    return combine(named)


def declared(value: str) -> str:
    """A licence a config declares, in canonical form; raises ValueError naming the fix."""
    if value.strip().lower() == UNKNOWN:
        return UNKNOWN
    found = recognise(value)
    if found is None:
        raise ValueError(
            "not an SPDX licence identifier or expression; write one from "
            "https://spdx.org/licenses (e.g. 'CC-BY-4.0', 'MIT'), 'LicenseRef-<name>' for another "
            f"licence, or {UNKNOWN!r}"
        )
    return found


def json_path(field: str) -> list[str]:
    """JSONPaths that find ``field`` in a record's ``meta``: the dotted path (``a.b`` -> ``a`` then
    ``b``), then the key ``a.b`` itself (as ``meta_fields`` keeps a dotted field)."""
    parts = "".join(f"['{part}']" for part in field.split("."))
    return [f"${parts}"] + ([f"$['{field}']"] if "." in field else [])


def licence_column(meta: pa.Array, field: str | None, default: str) -> pa.Array:
    """The licence of each document: what ``field`` of its ``meta`` names (:func:`licence_of`),
    else ``default`` (the source's declared licence, or :data:`UNKNOWN`). Objects (Dolma's
    ``attributes``, whose values differ from page to page) are read by their keys at once
    (:func:`_object_licences`); other distinct values are read once each."""
    n = len(meta)
    if field is None or n == 0:
        return pa.array([default] * n, pa.string())
    frame = pl.DataFrame({"meta": pl.from_arrow(meta)}).select(
        pl.coalesce([pl.col("meta").str.json_path_match(path) for path in json_path(field)]).alias("raw")
    )
    raw = frame["raw"]
    objects = raw.str.starts_with("{").fill_null(False)
    found = pl.Series("licence", [None] * n, dtype=pl.String)
    if objects.any():
        by_keys = _object_licences(raw.filter(objects))
        if by_keys is not None:
            found = found.scatter(objects.arg_true(), by_keys)
            raw = pl.select(pl.when(objects).then(None).otherwise(raw)).to_series()
    values = {value: licence_of(value) for value in raw.drop_nulls().unique().to_list()}
    if values:
        found = found.fill_null(raw.replace_strict(values, default=None, return_dtype=pl.String))
    return found.fill_null(default).cast(pl.String).to_arrow().cast(pa.string())


def _object_licences(objects: pl.Series) -> pl.Series | None:
    """:func:`licence_of` of JSON objects, by their keys: each object's keys that name a licence,
    joined by ``AND`` (null for none). The keys are read by decoding the column once, so a value
    of every page's own (Dolma's spans) costs nothing; None where the objects do not decode into
    one struct (mixed value types), for :func:`licence_of` to read one by one."""
    try:
        decoded = objects.str.json_decode(infer_schema_length=None)
    except Exception:  # polars cannot type the objects as one struct
        return None
    if not isinstance(decoded.dtype, pl.Struct):
        return None
    by_licence: dict[str, list[str]] = {}
    for key in (f.name for f in decoded.dtype.fields):
        if licence := recognise(key):
            by_licence.setdefault(licence, []).append(key)
    if not by_licence:
        return pl.Series([None] * len(objects), dtype=pl.String)
    # Each licence once, in sorted order (as combine() writes them), " AND " between.
    parts = [
        pl.when(pl.any_horizontal(pl.col(key).is_not_null() for key in keys)).then(
            pl.lit(f"({licence}) AND " if " OR " in licence else f"{licence} AND ")
        )
        for licence, keys in sorted(by_licence.items())
    ]
    joined = decoded.struct.unnest().select(pl.concat_str(parts, ignore_nulls=True).alias("licence"))["licence"]
    return pl.select(
        pl.when(joined == "").then(None).otherwise(joined.str.strip_suffix(" AND ")).alias("licence")
    ).to_series()


def licence_parts(licence: str) -> list[str]:
    """Every licence an expression names, in order, each once (``MIT OR (Apache-2.0 AND
    BSD-3-Clause)`` -> three; a licence with an exception counts as the licence); ``[licence]``
    for a value that is no expression (``unknown``)."""
    parsed = _parse(licence) if licence and licence != UNKNOWN else None
    if parsed is None:
        return [licence or UNKNOWN]
    keys = [symbol.key for symbol in _licensing().license_symbols(parsed, decompose=True)]
    exceptions = {
        symbol.exception_symbol.key
        for symbol in _licensing().license_symbols(parsed, decompose=False)
        if hasattr(symbol, "exception_symbol")
    }
    return [key for key in dict.fromkeys(keys) if key not in exceptions]


class LicenceRule:
    """Keep a document when its licence satisfies ``keep`` (None: any licence) and not ``drop``;
    patterns are shell-style and match case-insensitively (``cc-by-*``, ``unknown``). Removal
    rules: ``licence.excluded`` (tried first) and ``licence.not_kept``.

    An expression listed as it is (``BSD-3-Clause AND MIT``) decides it; otherwise the patterns
    match its licences, and the expression is read as SPDX means it: ``A AND B`` applies both
    licences, so it is kept when both are and excluded when either is; ``A OR B`` lets the user
    choose, so it is kept when either is and excluded only when both are. A licence with an
    exception (``GPL-2.0-only WITH Classpath-exception-2.0``) is judged by its licence, or by the
    whole."""

    NOT_KEPT = "licence.not_kept"
    DROPPED = "licence.excluded"

    def __init__(self, keep: Sequence[str] | None = None, drop: Sequence[str] = ()):
        self.keep = list(keep) if keep is not None else None
        self.drop = list(drop)

    @staticmethod
    def _matches(licence: str, patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(licence.lower(), pattern.lower()) for pattern in patterns)

    def _holds(self, node, patterns: Sequence[str], every: bool) -> bool:
        """Whether ``patterns`` match ``node``: AND needs all of its terms when ``every`` (keeping),
        any when not (excluding); OR the other way round."""
        licensing = _licensing()
        if isinstance(node, (licensing.AND, licensing.OR)):
            terms = [self._holds(arg, patterns, every) for arg in node.args]
            return all(terms) if isinstance(node, licensing.AND) == every else any(terms)
        if hasattr(node, "license_symbol"):  # a licence WITH an exception
            return self._matches(str(node.render()), patterns) or self._matches(node.license_symbol.key, patterns)
        return self._matches(node.key, patterns)

    def _decides(self, licence: str, patterns: Sequence[str], every: bool) -> bool:
        parsed = _parse(licence) if licence != UNKNOWN else None
        if parsed is None:
            return self._matches(licence, patterns)
        whole = any(licence.lower() == pattern.lower() for pattern in patterns)  # a listed expression
        return whole or self._holds(parsed, patterns, every)

    def rule(self, licence: str) -> str | None:
        """The rule that removes a document of ``licence``, or None when it stays."""
        if self.drop and self._decides(licence, self.drop, every=False):
            return self.DROPPED
        if self.keep is not None and not self._decides(licence, self.keep, every=True):
            return self.NOT_KEPT
        return None

    def rules(self, licences: pl.Series) -> pl.Series:
        """:meth:`rule` of each value (distinct values decided once each)."""
        decided = {value: self.rule(value) for value in licences.unique().to_list()}
        return licences.replace_strict(decided, return_dtype=pl.String)


def licence_counts(licences: pl.Series, tokens: pl.Series | None = None) -> dict[str, dict[str, int]]:
    """Documents (and tokens, given each document's ``tokens``) per licence, sorted by licence."""
    frame = pl.DataFrame({"licence": licences.fill_null(UNKNOWN).cast(pl.String)})
    aggs = [pl.len().alias("documents")]
    if tokens is not None:
        frame = frame.with_columns(tokens=tokens.cast(pl.Int64))
        aggs.append(pl.col("tokens").sum())
    counted = frame.group_by("licence").agg(aggs).sort("licence")
    return {row.pop("licence"): {k: int(v) for k, v in row.items()} for row in counted.iter_rows(named=True)}
