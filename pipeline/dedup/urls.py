"""URL normalization for URL dedup (``[dedup] url = true``): two documents are URL duplicates when
their normalized URLs are equal. The rules, in order (docs/config.md lists them too):

1. Surrounding whitespace is stripped; an empty or missing URL is no URL (never a duplicate).
2. w3lib's ``canonicalize_url``: scheme and host lower-cased, an international host in IDNA
   (punycode), ``.`` and ``..`` path segments resolved, percent-encoding in one case (``%2f`` is
   ``%2F``) with unreserved characters decoded (``%7E`` is ``~``) and non-ASCII characters encoded,
   query parameters sorted by name then value (``?b=1&a=2`` is ``?a=2&b=1``), a parameter without
   a value the same as one with an empty value (``?a`` is ``?a=``), the fragment dropped
   (``#section``), an empty query dropped.
3. ``http`` and ``https`` are one scheme (a page served both ways is one page).
4. A default port is dropped (``:80`` for http, ``:443`` for https, ``:21`` for ftp), as are a
   host's trailing dot and a leading ``www.`` (``www.example.com`` is ``example.com``).
5. A trailing slash is dropped (``/a/`` is ``/a``; ``http://example.com/`` is ``http://example.com``).
6. Tracking parameters are dropped: any parameter whose name starts with ``utm_`` and those in
   :data:`TRACKING_PARAMETERS` (names matched in any case).

The path keeps its case (servers tell ``/A`` from ``/a``), and other query parameters are kept,
values too. A URL that does not parse (a port that is not a number) is compared as its stripped
text. The result is a comparison key, not a link: a web URL's key has no scheme
(``example.com/a?x=1``), other schemes keep theirs (``ftp://host/file``).

:func:`normalize_url` takes one URL; :func:`normalize_urls` a column (each distinct value
normalized once); :func:`url_hashes` the 64-bit hash of each normalized URL, what the dedup stage
routes and compares (``key % partitions``, as the band keys), null where there is no URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

import numpy as np
import polars as pl
import pyarrow as pa
from w3lib.url import canonicalize_url

from pipeline.formats.hashing import seeded_id_hash

# Click and campaign identifiers that name how a visitor came, not what the page is; with any
# parameter starting "utm_" (Google Analytics' campaign tags).
TRACKING_PARAMETERS = frozenset(
    {
        "gclid",  # Google Ads
        "gclsrc",
        "dclid",  # Google Display
        "gbraid",
        "wbraid",
        "_ga",  # Google Analytics cross-domain
        "_gl",
        "fbclid",  # Facebook
        "msclkid",  # Microsoft Ads
        "yclid",  # Yandex
        "twclid",  # Twitter/X
        "ttclid",  # TikTok
        "li_fat_id",  # LinkedIn
        "igshid",  # Instagram
        "mc_cid",  # Mailchimp
        "mc_eid",
        "_hsenc",  # HubSpot
        "_hsmi",
        "mkt_tok",  # Marketo
        "vero_id",  # Vero
        "oly_anon_id",  # Omeda
        "oly_enc_id",
        "rb_clickid",  # Rakuten
        "s_cid",  # Adobe
        "srsltid",  # Google Merchant Center
    }
)
TRACKING_PREFIX = "utm_"
# http and https are one scheme: their URLs' keys carry none.
WEB_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}
# The seed and salt of the URL hash (pipeline.formats.hashing.seeded_id_hash): fixed, so a URL has
# one hash in every run and every index.
URL_HASH_SEED = 0x75726C
URL_HASH_SALT = 0x646564757075726C


def _tracking(parameter: str) -> bool:
    name = parameter.split("=", 1)[0].lower()
    return name.startswith(TRACKING_PREFIX) or name in TRACKING_PARAMETERS


def normalize_url(url: str | None) -> str | None:
    """The comparison key of ``url`` by the module's rules; None when there is no URL."""
    if url is None or not url.strip():
        return None
    url = url.strip()
    try:
        canonical = canonicalize_url(url, keep_fragments=False)
        parts = urlsplit(canonical)
        port = parts.port
    except ValueError:  # a port that is not a number, a bad IPv6 host: compared as written
        return url
    if not parts.netloc:  # no host (mailto:, a relative path): the canonical form as it is
        return canonical
    host = (parts.hostname or "").rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    if "@" in parts.netloc:
        host = parts.netloc.rpartition("@")[0] + "@" + host
    if port is not None and DEFAULT_PORTS.get(parts.scheme) != port:
        host = f"{host}:{port}"
    query = "&".join(p for p in parts.query.split("&") if p and not _tracking(p))
    key = host + parts.path.rstrip("/") + (f"?{query}" if query else "")
    return key if parts.scheme in WEB_SCHEMES else f"{parts.scheme}://{key}"


def normalize_urls(urls: pl.Series | pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pl.Series:
    """:func:`normalize_url` of each value of a column (null where there is no URL), each distinct
    value normalized once."""
    series = urls if isinstance(urls, pl.Series) else pl.Series(values=urls, dtype=pl.String)
    series = series.cast(pl.String).rename("url")
    distinct = series.drop_nulls().unique()
    keys = pl.Series("key", [normalize_url(u) for u in distinct.to_list()], dtype=pl.String)
    table = pl.DataFrame({"url": distinct, "key": keys})
    return series.to_frame().join(table, on="url", how="left", maintain_order="left")["key"].rename("url_key")


def url_hashes(urls: pl.Series | pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pa.UInt64Array:
    """The uint64 hash of each normalized URL (:func:`normalize_urls`), null where there is no URL:
    equal keys, equal hashes, in any process and run."""
    keys = normalize_urls(urls)
    present = keys.is_not_null().to_numpy()
    hashes = np.zeros(len(keys), np.uint64)
    if present.any():
        hashes[present] = seeded_id_hash(keys.filter(keys.is_not_null()), URL_HASH_SEED, URL_HASH_SALT)
    return pa.array(hashes, pa.uint64(), mask=~present)
