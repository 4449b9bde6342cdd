"""PII scrubbing: emails, IP addresses and phone numbers become typed placeholders.

Placeholders are ``<EMAIL>``, ``<IP_ADDRESS>`` and ``<PHONE_NUMBER>``, as in Dolma's PII masking
(Soldaini et al. 2024) and FineWeb's email/IP anonymization; nothing is removed, the counts per
document go to the stage's stats.

What must not match: version numbers (``1.2.3``, ``v10.0.0.1``, ``3.11.7``), dotted numbers of more
than four parts, octets over 255, dates (``2023-01-15``, ``12/05/2023``), times, prices and numbers
with thousands separators (``100 000 000``). The patterns need look-around, which polars' regex
engine lacks, so a vectorized polars pre-check picks the documents that might hold PII and
Python's ``re`` rewrites only those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from pipeline.filters.base import FilterOutput, Rule

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
PATTERNS: dict[str, re.Pattern] = {
    "email": re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w@])"),
    # Four octets, not part of a longer dotted number, not after a 'v' or a version word.
    "ip_address": re.compile(
        rf"(?<![\w.])(?<!version )(?<!Version )(?<!v\.)(?<!v ){_OCTET}(?:\.{_OCTET}){{3}}(?![\w.]\d|\.\d|\w)"),
    # North American and international numbers with separators: +1 415-555-0132, (415) 555-0132,
    # 415.555.0132, +44 20 7946 0958. The last group has four digits and the middle one does not
    # start with 0, so dates, grouped thousands and zero-padded order numbers do not match.
    "phone_number": re.compile(
        r"(?<![\w+/.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])[1-9]\d{2,3}[ .-]\d{4}(?![\w/]|[.-]\d)"),
}
PLACEHOLDERS = {"email": "<EMAIL>", "ip_address": "<IP_ADDRESS>", "phone_number": "<PHONE_NUMBER>"}
# Cheap polars checks: a document can hold a match only if it matches these.
_MAYBE = {
    "email": r"@",
    "ip_address": r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}",
    "phone_number": r"\d{3,4}[ .-]\d{4}",
}


def scrub(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with every match replaced by its placeholder, and the number of matches per kind."""
    counts = {}
    for kind, pattern in PATTERNS.items():
        text, counts[kind] = pattern.subn(PLACEHOLDERS[kind], text)
    return text, counts


@dataclass
class PIIScrubber:
    """Replaces PII with placeholders; removes nothing (it has no rules). Counts go to the stage's
    stats per kind and per source, and to each document's ``pii_replacements`` column."""

    name: str = "pii"

    def rules(self) -> list[Rule]:
        return []

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        maybe = docs.select(pl.any_horizontal(pl.col("text").str.contains(p) for p in _MAYBE.values())).to_series()
        texts = docs["text"].to_list()
        counts = {kind: [0] * docs.height for kind in PATTERNS}
        for i in maybe.arg_true().to_list():
            texts[i], found = scrub(texts[i])
            for kind, n in found.items():
                counts[kind][i] = n
        per_kind = {f"pii.{kind}": pl.Series(values, dtype=pl.Int64) for kind, values in counts.items()}
        return FilterOutput(
            measures=pl.DataFrame(schema={}),
            text=pl.Series("text", texts, dtype=pl.Utf8),
            counts=per_kind,
            # Each document says how many placeholders it got.
            columns={"pii_replacements": pl.Series([sum(c) for c in zip(*counts.values())], dtype=pl.Int32)},
        )
