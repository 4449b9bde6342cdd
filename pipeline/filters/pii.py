"""PII scrubbing: emails, IP addresses and phone numbers become typed placeholders.

Placeholders are ``<EMAIL>``, ``<IP_ADDRESS>`` and ``<PHONE_NUMBER>``, as in Dolma's PII masking
(Soldaini et al. 2024) and FineWeb's email/IP anonymization; nothing is removed, the counts per
document go to the stage's stats.

What is replaced:

* **Emails**: a local part of letters (any script), digits and ``. _ % + -`` (no leading,
  trailing or doubled dot), ``@``, and a domain of dotted labels ending in a top-level domain of
  two or more letters (``josé@example.com``, ``почта@пример.рф``), or an address literal in
  brackets (``email@[123.123.123.123]``, replaced whole). Not when the "domain" ends in an image
  or web-asset file extension: ``logo@2x.png`` is a retina image, ``lodash@4.17.21`` a package.
* **IP addresses**: IPv4 dotted quads and IPv6 addresses (full or ``::``-compressed), **public
  ones only**, as FineWeb does: an address is replaced when Python's ``ipaddress`` calls it
  global. Private (``10/8``, ``172.16/12``, ``192.168/16``, ``fc00::/7``), loopback
  (``127.0.0.1``, ``::1``), link-local, shared (``100.64/10``), reserved (netmasks such as
  ``255.255.255.0``) and documentation (``192.0.2.0/24``, ``2001:db8::/32``) addresses name no
  one on the internet and are common in technical text, so they are kept.
* **Phone numbers**: North American numbers (``+1 415-555-0132``, ``(415) 555-0132``,
  ``415.555.0132``; area code and exchange start with 2-9); international numbers written with
  ``+`` and 8 to 15 digits in any grouping (``+14155550132``, ``+44 (0)20 7946 0958``,
  ``+33 1 23 45 67 89``); national numbers with a trunk ``0`` and an area code, 9 to 12 digits
  (``030 12345678``, ``020 7946 0958``, ``03-1234-5678``); and French-style pairs
  (``01 23 45 67 89``).

What must not match: version numbers (``1.2.3``, ``v10.0.0.1``), dotted numbers of more than four
parts, octets over 255, times and MAC addresses, dates (``2023-01-15``, ``12/05/2023``), years in
a row (``2019 2020 2021``), card numbers (``4111 1111 1111 1111``), IBANs and ISBNs, prices and
numbers with thousands separators (``100 000 000``). A number that continues a run of digit
groups (``... 0044 0532 0130 00``) is not a phone number.

The patterns need look-around, which polars' regex engine lacks, so a vectorized polars pre-check
picks, per kind, the documents that might hold one, and Python's ``re`` rewrites only those. The
labelled set in ``tests/pii_cases.py`` measures precision and recall per kind
(``benchmarks/pii_scrub.py`` prints them).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from pipeline.formats.step import FilterOutput, Rule

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
# Extensions after an "@" that make it a file name (logo@2x.png), not an email's domain.
_FILE_EXTENSIONS = (
    r"png|jpe?g|gif|svg|webp|bmp|ico|tiff?|avif|heic|css|js|mjs|json|xml|html?|php|pdf|txt"
    r"|zip|gz|tar|mp[34]|mov|wav|woff2?|ttf|eot|map"
)
_EMAIL = re.compile(
    r"(?<![\w.%+-])[\w%+-]+(?:\.[\w%+-]+)*@"
    r"(?:(?:[^\W_](?:[\w-]*[^\W_])?\.)+"
    rf"(?!(?i:{_FILE_EXTENSIONS})(?![\w-]))[^\W\d_]{{2,}}(?![\w-]|\.[^\W\d_])"
    rf"|\[(?:{_IPV4}|IPv6:[0-9A-Fa-f:.]+)\])"
)
# Four octets, not part of a longer dotted number, not after a 'v' or a version word.
_IP_V4 = re.compile(rf"(?<![\w.])(?<!version )(?<!Version )(?<!v\.)(?<!v ){_IPV4}(?![\w.]\d|\.\d|\w)")
# Global unicast IPv6 lies in 2000::/3, so its first group is four hex digits starting with 2 or 3;
# the candidate must parse as an address (ipaddress) to count.
_IP_V6 = re.compile(r"(?<![\w:.])[23][0-9A-Fa-f]{3}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:]|\.\d)")
_PHONE = re.compile(
    r"(?<![\w+/.,-])(?<!\d[ .,-])(?:"
    # North American Numbering Plan: [+]1, area code and exchange starting with 2-9, 4 digits
    r"(?P<nanp>(?:\+?1[ .-]?)?(?:\([2-9]\d\d\)[ .-]?|[2-9]\d\d[ .-])[2-9]\d\d[ .-]\d{4})"
    # international: + country code, then digits in any grouping (8-15 digits, checked below)
    r"|(?P<intl>\+[1-9](?:[ .-]?(?:\(\d{1,4}\)|\d)){6,16})"
    # French style: 0X and four pairs, one separator throughout
    r"|(?P<pairs>0[1-9](?P<sep>[ .-])\d\d(?:(?P=sep)\d\d){3})"
    # national: trunk 0, area code, subscriber groups (9-12 digits, checked below)
    r"|(?P<national>(?:\(0[1-9]\d{0,3}\)|0[1-9]\d{0,3})[ -]\d{3,8}(?:[ -]\d{2,4}){0,2})"
    r")(?!\w|[.,/-]\d| \d)"
)
PLACEHOLDERS = {"email": "<EMAIL>", "ip_address": "<IP_ADDRESS>", "phone_number": "<PHONE_NUMBER>"}
# Cheap polars checks: a document can hold a match of a kind only if it matches that kind's.
_MAYBE = {
    "email": r"@",
    "ip_address": r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|[23][0-9A-Fa-f]{3}:[0-9A-Fa-f]{0,4}:",
    "phone_number": r"\d{3,4}[ .-]\d{4}|\+\d[\d .()-]{6}|\d\d[ .-]\d\d[ .-]\d\d[ .-]\d\d|0\d{1,4}\)?[ -]\d{3}",
}
_ANY_MAYBE = "|".join(f"(?:{pattern})" for pattern in _MAYBE.values())


def _is_public(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return ip.is_global and not ip.is_multicast


def _phone_digits_ok(match: re.Match) -> bool:
    digits = sum(c.isdigit() for c in match.group(0))
    if match.group("intl"):
        return 8 <= digits - match.group(0).count("(0)") <= 15
    if match.group("national"):
        return 9 <= digits <= 12
    return True


def _replace_where(
    pattern: re.Pattern, placeholder: str, keep: Callable[[re.Match], bool]
) -> Callable[[str], tuple[str, int]]:
    """``pattern.subn`` that replaces only the matches ``keep(match)`` accepts."""

    def sub(text: str) -> tuple[str, int]:
        count = 0

        def one(match: re.Match) -> str:
            nonlocal count
            if keep(match):
                count += 1
                return placeholder
            return match.group(0)

        return pattern.sub(one, text), count

    return sub


_sub_v6 = _replace_where(_IP_V6, PLACEHOLDERS["ip_address"], lambda m: _is_public(m.group(0)))
_sub_v4 = _replace_where(_IP_V4, PLACEHOLDERS["ip_address"], lambda m: _is_public(m.group(0)))


def _scrub_ip(text: str) -> tuple[str, int]:
    text, n6 = _sub_v6(text)
    text, n4 = _sub_v4(text)
    return text, n4 + n6


SCRUBBERS = {
    "email": lambda text: _EMAIL.subn(PLACEHOLDERS["email"], text),
    "ip_address": _scrub_ip,
    "phone_number": _replace_where(_PHONE, PLACEHOLDERS["phone_number"], _phone_digits_ok),
}


def scrub(text: str, kinds=None) -> tuple[str, dict[str, int]]:
    """``text`` with every match replaced by its placeholder, and the number of matches per kind
    (of ``kinds``, default all, applied in the order email, IP address, phone number)."""
    counts = {}
    for kind, scrub_kind in SCRUBBERS.items():
        if kinds is None or kind in kinds:
            text, counts[kind] = scrub_kind(text)
        else:
            counts[kind] = 0
    return text, counts


@dataclass
class PIIScrubber:
    """Replaces PII with placeholders; removes nothing (it has no rules). Counts go to the stage's
    stats per kind and per source, and to each document's ``pii_replacements`` column."""

    name: str = "pii"
    thresholds: ClassVar[tuple[str, ...]] = ()

    def rules(self) -> list[Rule]:
        return []

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        # One pass for every kind finds the few candidates (half the time of a pass per kind);
        # which kinds each holds, and the scrubbing, then run on those documents only.
        candidates = docs.select(pl.col("text").str.contains(_ANY_MAYBE).fill_null(False)).to_series()
        rows = candidates.arg_true()
        found_in = docs.filter(candidates).select(
            pl.col("text").str.contains(pattern).fill_null(False).alias(kind) for kind, pattern in _MAYBE.items()
        )
        texts = docs["text"].filter(candidates).to_list()
        counts = {kind: [0] * docs.height for kind in SCRUBBERS}
        for j, (i, row) in enumerate(zip(rows.to_list(), found_in.iter_rows())):
            texts[j], found = scrub(texts[j], [kind for kind, hit in zip(_MAYBE, row) if hit])
            for kind, n in found.items():
                counts[kind][i] = n
        scrubbed = docs["text"].cast(pl.Utf8).alias("text")
        if len(rows):
            scrubbed = scrubbed.scatter(rows, pl.Series(texts, dtype=pl.Utf8))
        per_kind = {f"pii.{kind}": pl.Series(values, dtype=pl.Int64) for kind, values in counts.items()}
        return FilterOutput(
            measures=pl.DataFrame(schema={}),
            text=scrubbed,
            counts=per_kind,
            # Each document says how many placeholders it got.
            columns={"pii_replacements": pl.Series([sum(c) for c in zip(*counts.values())], dtype=pl.Int32)},
        )
