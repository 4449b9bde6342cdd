"""What HTML extraction kept: each WARC source's pages, their bytes and the characters of text
the extractor took from them, as the source stage's ``stats.json`` records it under ``extraction``.

A page's *kept share* is its text's characters over its HTML's bytes (the markup, scripts and
styles are most of a page's bytes, so a well extracted article keeps a few per cent). The record
holds the totals, the pages per band of kept share, and the pages that kept the smallest share,
each with its file, offset and url, so that a user can open them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

# The lower edges of the bands of kept share after "no text" (the last band is open).
SHARE_EDGES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
SHARE_LABELS = ("no text", "< 1%", "1-2%", "2-5%", "5-10%", "10-20%", "20-50%", ">= 50%")
# How many of the pages that kept the smallest share the record names.
LEAST_PAGES = 20


@dataclass
class Extraction:
    """One source's HTML extraction (a unit's, or the stage's once merged)."""

    pages: int = 0
    html_bytes: int = 0
    text_chars: int = 0
    bands: list[int] = field(default_factory=lambda: [0] * len(SHARE_LABELS))
    # {"file", "offset", "url", "html_bytes", "text_chars"}, the smallest kept share first.
    least: list[dict] = field(default_factory=list)

    def add_batch(self, batch: pa.RecordBatch, file: str, html_bytes_key: str) -> None:
        """Count the HTML pages of a reader's raw batch: its rows with no reason set whose ``meta``
        holds ``html_bytes_key``."""
        frame = (
            pl.from_arrow(pa.Table.from_batches([batch]).select(["text", "url", "meta", "offset", "reason"]))
            .filter(pl.col("reason").is_null())
            .select(
                "url",
                "offset",
                pl.col("meta").str.json_path_match(f"$.{html_bytes_key}").cast(pl.Int64).alias("html_bytes"),
                pl.col("text").str.len_chars().cast(pl.Int64).alias("text_chars"),
            )
            .drop_nulls("html_bytes")
        )
        if frame.is_empty():
            return
        self.pages += frame.height
        self.html_bytes += int(frame["html_bytes"].sum())
        self.text_chars += int(frame["text_chars"].sum())
        counts = np.bincount(
            bands_of(frame["text_chars"].to_numpy(), frame["html_bytes"].to_numpy()), minlength=len(self.bands)
        )
        self.bands = [a + int(b) for a, b in zip(self.bands, counts, strict=True)]
        least = (
            frame.with_columns(share=pl.col("text_chars") / pl.max_horizontal(pl.col("html_bytes"), 1))
            .sort(["share", "html_bytes"], descending=[False, True])
            .head(LEAST_PAGES)
        )
        found = [{"file": file, **row} for row in least.drop("share").to_dicts()]
        self.least = _least([*self.least, *found])

    def merge(self, other: Extraction) -> None:
        self.pages += other.pages
        self.html_bytes += other.html_bytes
        self.text_chars += other.text_chars
        self.bands = [a + b for a, b in zip(self.bands, other.bands, strict=True)]
        self.least = _least([*self.least, *other.least])

    @property
    def kept_share(self) -> float:
        """The text's characters over the HTML's bytes, over every page."""
        return self.text_chars / self.html_bytes if self.html_bytes else 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Extraction:
        return cls(**data)


def bands_of(text_chars: np.ndarray, html_bytes: np.ndarray) -> np.ndarray:
    """The band of :data:`SHARE_LABELS` of each page's kept share: "no text", else the band whose
    lower edge (:data:`SHARE_EDGES`) is the largest at or below its share."""
    text_chars = np.asarray(text_chars, np.int64)
    shares = text_chars / np.maximum(np.asarray(html_bytes, np.int64), 1)
    return np.where(text_chars == 0, 0, np.searchsorted(SHARE_EDGES, shares, side="right"))


def band(text_chars: int, html_bytes: int) -> int:
    """The band of one page (:func:`bands_of`)."""
    return int(bands_of(np.array([text_chars]), np.array([html_bytes]))[0])


def share_of(page: dict) -> float:
    return page["text_chars"] / max(page["html_bytes"], 1)


def _least(pages: list[dict]) -> list[dict]:
    return sorted(pages, key=lambda p: (share_of(p), -p["html_bytes"], p["file"], p["offset"] or 0))[:LEAST_PAGES]


def merged(parts: list[dict], key: str = "extraction") -> dict[str, Extraction]:
    """Each source's extraction over the part records that hold one under ``key``."""
    out: dict[str, Extraction] = {}
    for part in parts:
        for source, found in (part.get(key) or {}).items():
            out.setdefault(source, Extraction()).merge(Extraction.from_dict(found))
    return out
