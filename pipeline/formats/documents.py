"""The document schema, the quarantine schema and the run-directory layout.

Every stage reads and writes zstd Parquet shards of :data:`DOC_SCHEMA`. A run directory can be
opened with polars, duckdb or pyarrow alone::

    <run_dir>/
      manifest.json                 config, package versions, input checksums, counts per stage
      <stage>/docs/*.parquet        the stage's output documents (DOC_SCHEMA)
      <stage>/quarantine/*.parquet  records that could not be read (QUARANTINE_SCHEMA)
      <stage>/removed/*.parquet     documents the stage removed, with reason and score
      <stage>/parts/*.json          one record per finished unit of work (resume markers)
      <stage>/stats.json            the stage's ledger: docs in, out, removed and quarantined

The run directory is a local folder or a URL of any fsspec file system (``s3://bucket/run``); its
paths are :func:`pipeline.io.storage.as_path` objects either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.io.owner import begin_record
from pipeline.io.storage import AnyPath, as_path, is_local

LICENCE = "licence"
# The licence of a document whose input names none (never guessed).
UNKNOWN = "unknown"

DOC_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        # Line ends are "\n" only: the source stage turns "\r\n" and a lone "\r" into "\n".
        pa.field("text", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        # An SPDX licence identifier or expression, a LicenseRef-, or "unknown" (pipeline.licence).
        pa.field(LICENCE, pa.string(), nullable=False),
        pa.field("url", pa.string(), nullable=True),
        # Everything else the input said about the document, as a JSON object.
        pa.field("meta", pa.string(), nullable=True),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        # 1-based line for line formats (a JSON array file: the element's position; Parquet: the
        # row), byte offset for record formats; either may be null.
        pa.field("line", pa.int64(), nullable=True),
        pa.field("offset", pa.int64(), nullable=True),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=True),
        # The first bytes of the record, decoded with replacement, to see what it was.
        pa.field("sample", pa.string(), nullable=True),
    ]
)

# A document a stage removed on purpose: which rule, the value it measured, the threshold.
REMOVED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("lang", pa.string(), nullable=True),
        pa.field(LICENCE, pa.string(), nullable=True),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("rule", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=True),
        pa.field("threshold", pa.float64(), nullable=True),
    ]
)

# mix/documents.parquet, one row per document handed to the mix stage: its side ("split": train,
# validation, excluded, contaminated), and for a document that left the pool the rule that removed
# it and the text that caused it.
MIX_RULE = "rule"
MIX_NEAR_ID = "near_id"
# The mix stage's rules (its removed/*.parquet and documents' MIX_RULE), and what MIX_NEAR_ID is under each.
MIX_CONTAMINATED = "validation_near_duplicate"
MIX_EXCLUDED = "reference_near_duplicate"
MIX_EXCLUDED_ID = "reference_id"
MIX_EXCLUDED_WINDOW = "reference_window"
MIX_CAUSES = {
    MIX_CONTAMINATED: "near duplicate of validation document",
    MIX_EXCLUDED: "near duplicate of excluded text",
    MIX_EXCLUDED_ID: "same id as excluded text",
    MIX_EXCLUDED_WINDOW: "shares token windows with excluded text",
}


def mix_cause(rule: str | None, near_id: str | None) -> str | None:
    """What removed a document from the mix stage's pool, in words, naming the text that caused
    it (``"near duplicate of excluded text t1"``); None for a document that stayed."""
    if rule is None:
        return None
    return f"{MIX_CAUSES.get(rule, rule)} {near_id}" if near_id else MIX_CAUSES.get(rule, rule)


# Why the source stage quarantines a record whose text or id no later step could use.
EMPTY_TEXT = "empty_text"
INVALID_ID = "invalid_id"
# A text is blank when it holds no character a reader sees: nothing but whitespace, separators
# (Zs, Zl, Zp) and control or format characters (Cc: \x00-\x1f, \x7f-\x9f, so \v, \x1c-\x1f and
# U+0085; Cf: zero-width spaces and joiners, U+FEFF, soft hyphens). Python's str.isspace and
# RE2's \s miss most of them. The same pattern in Arrow (RE2) and polars (Rust regex).
BLANK_TEXT = r"^[\s\p{Z}\p{Cc}\p{Cf}]*$"
# A control character (Cc) in an id: NUL cannot be passed on a command line at all (`curate inspect
# <id>`), and the others (tabs, line breaks, escapes) break the id apart in a shell or a terminal.
CONTROL_IN_ID = r"\p{Cc}"


def blank_text(text: pa.Array | pa.ChunkedArray | pl.Series) -> pa.Array | pa.ChunkedArray | pl.Series:
    """Whether each text is blank (:data:`BLANK_TEXT`): Arrow booleans for Arrow text (the source
    stage checks every reader's records with it), a polars Series for a Series (the filter stage
    checks what its rewrites left); null stays null."""
    if isinstance(text, pl.Series):
        return text.str.contains(BLANK_TEXT)
    return pc.match_substring_regex(text, BLANK_TEXT)


# Columns the `lang` stage adds to the document schema; later stages keep them.
LANG_FIELDS = [pa.field("lang", pa.string(), nullable=True), pa.field("lang_score", pa.float32(), nullable=True)]


@dataclass(frozen=True)
class StageDir:
    """The folders of one stage inside a run directory."""

    root: AnyPath

    def __post_init__(self):
        object.__setattr__(self, "root", as_path(self.root))

    @property
    def docs(self) -> AnyPath:
        return self.root / "docs"

    @property
    def quarantine(self) -> AnyPath:
        return self.root / "quarantine"

    @property
    def removed(self) -> AnyPath:
        return self.root / "removed"

    @property
    def parts(self) -> AnyPath:
        return self.root / "parts"

    @property
    def stats(self) -> AnyPath:
        return self.root / "stats.json"

    def make(self) -> StageDir:
        """The stage's folders, made, with the record of the files it writes (pipeline.io.owner)
        begun before it writes any."""
        if is_local(self.root):
            begin_record(self.root, f"the run's {self.root.name} stage")
        for folder in (self.docs, self.quarantine, self.removed, self.parts):
            folder.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class RunLayout:
    """Paths of a run directory (``root``: a local path or an fsspec URL, as str or path)."""

    root: AnyPath

    def __post_init__(self):
        object.__setattr__(self, "root", as_path(self.root))

    @property
    def manifest(self) -> AnyPath:
        return self.root / "manifest.json"

    def stage(self, name: str) -> StageDir:
        return StageDir(self.root / name)


def string_array(values) -> pa.Array:
    """One contiguous Arrow string array (``large_string``) from a polars Series, an Arrow array
    (chunked or not) or a sequence of str."""
    if hasattr(values, "to_arrow"):  # a polars Series
        array = values.to_arrow()
    elif isinstance(values, (pa.Array, pa.ChunkedArray)):
        array = values
    else:
        array = pa.array(list(values), type=pa.large_string())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], type=pa.large_string())
    return array.cast(pa.large_string())


def licence_series(frame: pl.DataFrame) -> pl.Series:
    """The ``licence`` column of a frame of documents; :data:`UNKNOWN` for each when it has none
    (documents written before licences were recorded)."""
    if LICENCE in frame.columns:
        return frame[LICENCE].fill_null(UNKNOWN)
    return pl.Series(LICENCE, [UNKNOWN] * frame.height, dtype=pl.String)
