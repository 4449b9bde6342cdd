"""The filter stage's stored measurements: a changed threshold decides again without measuring.

Beside each document shard, the filter stage writes ``filter/attributes/<shard>.parquet`` (as
Dolma keeps attributes beside documents, and RedPajama-V2 its quality signals): one row per
document the filters measured, in input order, with every measure of every filter, each rewrite's
counts, the rewritten text where it changed and the columns the filters added
(:func:`pipeline.filters.engine.to_attributes`). Its Parquet metadata says what it was measured
from: the input shard's fingerprint and :func:`measuring_settings`.

A rerun whose config changed only thresholds (each filter's ``thresholds``: parameters that set a
rule's threshold and nothing else) keeps these files (pipeline.stages.rerun: the filter stage
"re-decides"); each unit then reads its file back and applies the new thresholds to it, and writes
the same documents, removals and counts as measuring again would. A file whose input or measuring
settings differ is measured again and replaced.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.filters.registry import FILTERS
from pipeline.formats.documents import StageDir
from pipeline.io.storage import parquet_file
from pipeline.io.writer import PARQUET_COMPRESSION, write_bytes, write_text

FOLDER = "attributes"
_METADATA = b"curate.measured_from"
# Beside each file, its sha256 (as ``sha256sum`` writes it): a file changed after the stage wrote
# it is measured again, not trusted to decide.
CHECKSUM_SUFFIX = ".sha256"

_log = logging.getLogger(__name__)


def measuring_settings(record: dict) -> dict:
    """What the filter stage's measurements depend on, from a config record
    (``RunConfig.model_dump(mode="json")``): its ``filter`` table without the parameters that are
    only thresholds, the stage's and each language's (``by_lang``), and ``batch_docs``."""
    settings = dict(record.get("filter") or {})
    settings["params"] = _without_thresholds(settings.get("params"))
    if settings.get("by_lang"):
        settings["by_lang"] = {
            code: {**override, "params": _without_thresholds(override.get("params"))}
            for code, override in settings["by_lang"].items()
        }
    return {"filter": settings, "batch_docs": record.get("batch_docs")}


def _without_thresholds(params: dict | None) -> dict:
    """Filter parameters without those that are only thresholds (a filter left with none, dropped)."""
    kept_params = {}
    for name, values in sorted((params or {}).items()):
        only_thresholds = set(getattr(FILTERS.get(name), "thresholds", ()))
        kept = {key: value for key, value in values.items() if key not in only_thresholds}
        # A table of thresholds by size (gopher_repetition's n-grams) measures its default sizes and
        # those it adds: only the added sizes are what it measured with.
        for key, defaults in getattr(FILTERS.get(name), "threshold_maps", {}).items():
            if isinstance(kept.get(key), dict):
                added = sorted(int(n) for n in kept.pop(key) if int(n) not in defaults)
                kept.update({key: added} if added else {})
        if kept:
            kept_params[name] = kept
    return kept_params


class UnitAttributes:
    """The stored measurements of one unit of the filter stage (input shard ``in_path``).

    :meth:`open` loads the stored file when it was measured from this input with these settings,
    its bytes are those its checksum (``<file>.sha256``, written with it) names, and it has every
    column in ``required`` (set by the stage's step: the columns its filters decide on); the
    stage's step then takes each batch's rows from it (:meth:`rows`) instead of measuring; a file
    that fails a check is measured again, with a warning (in the run log and in :attr:`warnings`,
    which the unit's part record carries to the stage's stats). :meth:`close` writes the unit's
    measurements and their checksum unless every batch was read back."""

    def __init__(self, stage: StageDir, in_path: Path, settings: dict):
        self.path = stage.root / FOLDER / in_path.name
        self.checksum = self.path.with_name(self.path.name + CHECKSUM_SUFFIX)
        self.settings = settings
        self.required: set[str] = set()
        self.files: list[dict] | None = None
        self.stored: pl.DataFrame | None = None
        self._next = 0
        self._measured = False  # a batch of the unit was not in the stored file
        self.warnings: list[str] = []

    def _measured_from(self) -> dict:
        # the input's contents, not its path: a run folder moved elsewhere keeps its measurements
        inputs = [{key: f.get(key) for key in ("bytes", "sha256")} for f in self.files or []]
        return {"inputs": inputs, "settings": self.settings}

    def open(self, files: list[dict]) -> None:
        """Start the unit whose input has these fingerprints (pipeline.stages.shard.fingerprint)."""
        self.files, self.stored, self._next, self._measured = files, None, 0, False
        self.warnings = []
        if not self.path.exists():
            return
        try:
            metadata = parquet_file(self.path).schema_arrow.metadata or {}
            made_from = json.loads(metadata[_METADATA])
        except Exception:  # unreadable, or rewritten by another tool: its checksum says which
            made_from = None
        if made_from is not None and made_from != self._measured_from():
            return  # measured with other settings: measured again, as the rerun plan said
        data = self.path.read_bytes()
        why = self._untrusted(data)
        if why is None and made_from is None:
            return  # this stage's bytes without its record of settings: measured again
        if why is None:
            stored = pl.read_parquet(io.BytesIO(data))
            missing = sorted(self.required - set(stored.columns))
            if not missing:
                self.stored = stored
                return
            why = f"lack {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} (written by another version)"
        warning = f"filter: the stored measurements {self.path.name} {why}; measuring its documents again"
        self.warnings.append(warning)
        # the terminal gets it as a `warning:` line from the stage's stats, at the end of the run
        _log.warning(warning, extra={"terminal": False})

    def _untrusted(self, data: bytes) -> str | None:
        """Why the stored file's bytes ``data`` are not the ones this stage wrote (None: they are)."""
        if not self.checksum.exists():
            return "have no checksum"
        expected = self.checksum.read_text(encoding="utf-8").split(" ", 1)[0].strip()
        if hashlib.sha256(data).hexdigest() != expected:
            return f"do not match their checksum ({self.checksum.name}): the file changed after it was written"
        return None

    def rows(self, docs: pl.DataFrame) -> pl.DataFrame | None:
        """The stored rows of the next batch's documents ``docs``, or None (measure them): batches
        come in the order they were measured, so the rows are the next ``docs.height``, which must
        hold the same ids."""
        rows = None if self.stored is None else self.stored.slice(self._next, docs.height)
        if rows is None or rows.height != docs.height or not rows["id"].equals(docs["id"]):
            self._measured = True
            return None
        self._next += docs.height
        return rows

    def close(self, batches: list[pl.DataFrame]) -> None:
        """Write the unit's measurements (one frame per batch, in order) and then their checksum,
        unless every one was read back from the stored file (then both stay as they are)."""
        if not self._measured and self.stored is not None and self._next == self.stored.height:
            return
        frames = batches or [pl.DataFrame({"id": pl.Series([], dtype=pl.String)})]
        table = pl.concat(frames, how="vertical_relaxed").to_arrow()
        metadata = {_METADATA: json.dumps(self._measured_from(), sort_keys=True).encode()}
        sink = pa.BufferOutputStream()
        pq.write_table(table.replace_schema_metadata(metadata), sink, compression=PARQUET_COMPRESSION)
        data = sink.getvalue().to_pybytes()
        write_bytes(data, self.path)
        write_text(f"{hashlib.sha256(data).hexdigest()}  {self.path.name}\n", self.checksum)
