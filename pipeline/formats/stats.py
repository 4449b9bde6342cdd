"""A stage's ``stats.json``: its ledger and what else the stage counted, the one reader and writer.

Every stage writes one (``<run_dir>/<stage>/stats.json``, also recorded under the manifest's
``stages``); later stages, the report, the experiment and the benchmarks read it back. The file is
the :class:`StageStats` fields that are set, as key-sorted JSON (:func:`pipeline.io.writer.write_json`):
a field left ``None`` is not written, so each stage's file holds only what that stage counts.

- every stage: ``stage``, ``docs_in``, ``docs_out``, ``removed`` and ``quarantined`` (by reason;
  :mod:`pipeline.formats.ledger`);
- the document stages: ``units``, ``counts`` (extra tallies, e.g. ``fired|<rule>``), and a ledger
  per ``sources``, ``languages`` and ``licences``;
- source: ``extraction``, each WARC source's HTML pages against the text taken from them, and
  ``repaired``, the documents of each source with ``unicode_repair`` that it changed;
- dedup: ``dedup`` (the engine's figures) and ``largest_clusters``; lines: ``lines``;
- tokenize: ``tokens``, ``tokenizer``, ``shards`` and ``licences`` as documents and tokens;
- mix: ``tokens_in``, ``train_documents``, ``validation_documents``, ``exclusion``, ``groups``,
  ``mixtures``, ``warnings`` and ``licences`` as documents and tokens per split.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.formats.ledger import Ledger
from pipeline.io.writer import read_json, write_json

# Keys of the file that other records copy (the experiment's funnel); a licence's ledger holds
# DOCS_IN where tokenize and mix count documents and tokens.
DOCS_IN = "docs_in"
DOCS_OUT = "docs_out"


@dataclass
class StageStats:
    """One stage's stats, as its ``stats.json`` holds them (``None``: a field the stage does not write)."""

    stage: str
    docs_in: int = 0
    docs_out: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    # The document stages (source: units, sources with their files, licences).
    units: int | None = None
    counts: dict[str, int] | None = None
    sources: dict[str, Ledger] | None = None
    languages: dict[str, Ledger] | None = None
    # source: each WARC source's HTML extraction (pipeline.formats.extraction.Extraction), and
    # the documents of each source that Unicode repair changed.
    extraction: dict[str, dict] | None = None
    repaired: dict[str, int] | None = None
    # A ledger per licence in the document stages; documents and tokens (per split in mix) after.
    licences: dict[str, Any] | None = None
    # dedup
    dedup: dict[str, Any] | None = None
    largest_clusters: list[dict] | None = None
    # lines
    lines: dict[str, int] | None = None
    # tokenize
    tokens: int | None = None
    tokenizer: dict[str, Any] | None = None
    shards: list[dict] | None = None
    # mix
    tokens_in: int | None = None
    train_documents: int | None = None
    validation_documents: int | None = None
    exclusion: dict[str, Any] | None = None
    groups: list[str] | None = None
    mixtures: dict[str, dict] | None = None
    # What a run measured again (the document stages return it, not written to their file) or a
    # mixture's warnings (mix writes them).
    warnings: list[str] | None = None
    # Keys of a stats.json this version does not know, kept so that a rewrite loses nothing.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_ledger(cls, ledger: Ledger, **more) -> StageStats:
        return cls(
            ledger.stage, ledger.docs_in, ledger.docs_out, _counts(ledger.removed), _counts(ledger.quarantined), **more
        )

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.stage, self.docs_in, self.docs_out, Counter(self.removed), Counter(self.quarantined))

    def funnel(self) -> dict[str, int]:
        """Documents in and out, as the experiment's funnel records them."""
        return {DOCS_IN: self.docs_in, DOCS_OUT: self.docs_out}

    def ledger_counts(self) -> dict:
        """The ledger alone, as a plain dict: ``docs_in``, ``docs_out``, ``removed`` and ``quarantined``."""
        return {**self.funnel(), "removed": self.removed, "quarantined": self.quarantined}

    def to_dict(self) -> dict:
        """The stats as ``stats.json`` holds them."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or value is None:
                continue
            out[f.name] = _ledgers_out(value) if f.name in _LEDGER_MAPS else value
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, data: dict) -> StageStats:
        """Raises ValueError where ``data`` is no stage's stats (not an object, or no ``stage``)."""
        if not isinstance(data, dict) or "stage" not in data:
            raise ValueError("it is not a stage's stats (a JSON object with its 'stage')")
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {
            key: _ledgers_in(value) if key in _LEDGER_MAPS else value for key, value in data.items() if key in known
        }
        return cls(**values, extra={key: value for key, value in data.items() if key not in known})

    @classmethod
    def read(cls, path: Path) -> StageStats:
        return cls.from_dict(read_json(path))

    def write(self, path: Path) -> None:
        """Write ``stats.json`` atomically."""
        write_json(self.to_dict(), path)


# The fields that hold a ledger per name (source, language or licence).
_LEDGER_MAPS = ("sources", "languages", "licences")


def _counts(counter) -> dict[str, int]:
    return dict(sorted(counter.items()))


def _ledgers_out(found: dict) -> dict:
    return {name: value.to_dict() if isinstance(value, Ledger) else value for name, value in found.items()}


def _ledgers_in(found: dict) -> dict:
    return {
        name: Ledger.from_dict(value) if isinstance(value, dict) and DOCS_IN in value else value
        for name, value in found.items()
    }


def recorded_stats(manifest: dict) -> dict[str, StageStats]:
    """Each finished stage's stats as a run's ``manifest.json`` records them (under ``stages``)."""
    return {stage: StageStats.from_dict(found) for stage, found in manifest["stages"].items()}


def docs_handed_over(stats_path: Path) -> int:
    """How many documents the stage whose ``stats.json`` is ``stats_path`` handed to the next one."""
    return StageStats.read(stats_path).docs_out
