"""Repeated-line removal: lines found in many documents (navigation, cookie banners, share
buttons, footers) are cut from every document, as C4 and Dolma clean web text of boilerplate.

A line is compared on its normalized text (:mod:`pipeline.dedup.normalize`, so case, punctuation
and spacing do not matter) by a 64-bit hash. Its count is the number of *distinct documents* it
appears in, across the corpus; a line counted in more than ``max_docs`` documents is cut from
every document. Lines with no words (blank, or punctuation only) are never counted or cut. Run it
after document dedup, or every line of a copied document counts once per copy.

The threshold: C4 (Raffel et al. 2020, section 2.2) discards all but one of any three-sentence
span that occurs more than once, and Dolma (Soldaini et al. 2024) all but the first of repeated
paragraphs; both treat a second occurrence as a repeat and keep one copy. Cutting every copy, as
here, suits boilerplate rather than shared content, so the default :data:`DEFAULT_MAX_DOCS` (10)
leaves lines that a few documents share (a quotation, a headline) alone; set it to 1 for the
strictest cut.

Staged like the MinHash dedup, so memory is bounded by a shard or a partition::

    line_counts_for_shard(docs shard, counts/, partitions)   # per shard: (line hash, documents)
        -> counts/part-<p:04d>/<shard name>.parquet
    frequent_lines(counts/part-0003, max_docs)                # per partition: lines over the limit
    RepeatedLines(frequent hashes)                            # per shard: cut them, as a filter
                                                              # of pipeline.filters (or
    remove_repeated_lines_shard(docs shard, frequent, out)    #  this plain per-file function)

Line-count file (``part-<p:04d>/<shard>``; a hash lands in partition ``hash % partitions``):
``line_hash`` uint64, ``docs`` int64 (documents of the shard holding the line), sorted by hash.
The frequent lines of all partitions together are small (one row per boilerplate line); the cut
step takes them as an array or as files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.normalize import combine_word_hashes, word_hashes
from pipeline.formats.step import FilterOutput, Rule
from pipeline.io.storage import as_path, empty_table, is_path, parquet_files, read_parquet, read_table
from pipeline.io.writer import write_parquet

DEFAULT_MAX_DOCS = 10
# Documents whose line counts one partition gathers (docs/scale.md, "Partitions and memory per task").
DOCS_PER_PARTITION = 100_000

LINE_COUNTS_SCHEMA = pa.schema(
    [
        pa.field("line_hash", pa.uint64(), nullable=False),
        pa.field("docs", pa.int64(), nullable=False),
    ]
)


def split_lines(texts: pl.Series) -> pl.DataFrame:
    """One row per line: ``doc`` (position in ``texts``), ``line`` (the line, without its ``\\n``)."""
    frame = pl.DataFrame({"text": texts.fill_null("").cast(pl.String)}).with_row_index("doc")
    return (
        frame.select(pl.col("doc").cast(pl.Int64), pl.col("text").str.split("\n").alias("line"))
        .explode("line")
        .with_columns(pl.col("line").fill_null(""))
    )


def line_hashes(lines: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(hash, has_words)`` per line: uint64 hash of the normalized line (equal normalized lines,
    equal hashes) and whether it has any words."""
    hashes, offsets = word_hashes(lines)
    return combine_word_hashes(hashes, offsets), np.diff(offsets) > 0


def line_counts(texts: pl.Series) -> pl.DataFrame:
    """``line_hash, docs``: in how many of these documents each normalized line appears."""
    lines = split_lines(texts)
    hashes, has_words = line_hashes(lines["line"])
    pairs = pl.DataFrame({"doc": lines["doc"].to_numpy()[has_words], "line_hash": hashes[has_words]})
    return pairs.unique().group_by("line_hash").agg(docs=pl.len().cast(pl.Int64)).sort("line_hash")


def line_partitions_for(documents: int, most: int) -> int:
    """Line-count partitions for ``documents``: one per :data:`DOCS_PER_PARTITION`, at least 1
    and at most ``most`` (lines.partitions). The frequent lines do not depend on it."""
    return max(1, min(most, -(-documents // DOCS_PER_PARTITION)))


def line_counts_for_shard(docs_shard_path: Path, out_dir: Path, partitions: int) -> list[Path]:
    """Count one document shard's lines and write them split into ``partitions`` files
    ``out_dir/part-<p:04d>/<shard file name>``."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    docs_shard_path, out_dir = as_path(docs_shard_path), as_path(out_dir)
    if not docs_shard_path.exists():
        raise FileNotFoundError(f"documents shard not found: {docs_shard_path}")
    texts = pl.from_arrow(read_table(docs_shard_path, columns=["text"]).column("text"))
    counts = line_counts(texts).with_columns(partition=(pl.col("line_hash") % partitions).cast(pl.Int64))
    written = []
    for p in range(partitions):
        part = counts.filter(pl.col("partition") == p).select("line_hash", "docs")
        target = out_dir / f"part-{p:04d}" / docs_shard_path.name
        write_parquet(part.to_arrow().cast(LINE_COUNTS_SCHEMA), target)
        written.append(target)
    return written


def frequent_lines(partition_path: Path | Iterable[Path], max_docs: int = DEFAULT_MAX_DOCS) -> pl.DataFrame:
    """``line_hash, docs`` of the lines of one partition (a folder of line-count files, one file,
    or a list of files) that appear in more than ``max_docs`` documents in all."""
    if is_path(partition_path):
        path = as_path(partition_path)
        files = parquet_files(path) if path.is_dir() else [path]
    else:
        files = [as_path(p) for p in partition_path]
    if not files:
        return pl.from_arrow(empty_table(LINE_COUNTS_SCHEMA))
    counts = pl.concat([read_parquet(f) for f in files], how="vertical")
    return counts.group_by("line_hash").agg(pl.col("docs").sum()).filter(pl.col("docs") > max_docs).sort("line_hash")


def remove_repeated_lines(texts: pl.Series, frequent: np.ndarray | pl.Series) -> pl.DataFrame:
    """Cut the lines whose normalized hash is in ``frequent`` from every text.

    Returns one row per text, in order: ``text`` (kept lines joined by ``\\n``), ``lines`` (lines
    before), ``lines_removed``, ``chars_removed`` (characters of the text before minus after)."""
    frequent = np.asarray(frequent.to_numpy() if isinstance(frequent, pl.Series) else frequent, dtype=np.uint64)
    texts = texts.fill_null("").cast(pl.String)
    lines = split_lines(texts)
    hashes, has_words = line_hashes(lines["line"])
    cut = has_words & np.isin(hashes, frequent)
    lines = lines.with_columns(cut=pl.Series(cut))
    rebuilt = lines.group_by("doc", maintain_order=True).agg(
        text=pl.col("line").filter(~pl.col("cut")).str.join("\n"),
        lines=pl.len().cast(pl.Int64),
        lines_removed=pl.col("cut").sum().cast(pl.Int64),
    )
    result = (
        pl.DataFrame({"doc": np.arange(len(texts), dtype=np.int64), "before": texts})
        .join(rebuilt, on="doc", how="left", maintain_order="left")
        .with_columns(pl.col("text").fill_null(""))
        .with_columns(chars_removed=(pl.col("before").str.len_chars() - pl.col("text").str.len_chars()).cast(pl.Int64))
    )
    return result.select("text", "lines", "lines_removed", "chars_removed")


def _frequent_hashes(frequent: np.ndarray | pl.DataFrame | Sequence[Path]) -> np.ndarray:
    if isinstance(frequent, pl.DataFrame):
        return frequent["line_hash"].to_numpy()
    if isinstance(frequent, np.ndarray):
        return frequent
    frames = [read_parquet(p) for p in frequent]
    return pl.concat(frames)["line_hash"].to_numpy() if frames else np.zeros(0, np.uint64)


def remove_repeated_lines_shard(
    docs_shard_path: Path, frequent: np.ndarray | pl.DataFrame | Sequence[Path], out_path: Path
) -> pl.DataFrame:
    """Write ``docs_shard_path`` with the frequent lines cut from its texts (every other column as
    it was) to ``out_path``; return per document ``id, lines, lines_removed, chars_removed``.
    ``frequent``: hashes, a ``frequent_lines`` frame, or files of them (``line_hash`` column)."""
    table = read_table(docs_shard_path)
    texts = pl.from_arrow(table.column("text"))
    result = remove_repeated_lines(texts, _frequent_hashes(frequent))
    text_type = table.schema.field("text").type
    column = table.schema.get_field_index("text")
    cleaned = table.set_column(column, table.schema.field("text"), result["text"].to_arrow().cast(text_type))
    write_parquet(cleaned, out_path)
    return pl.DataFrame({"id": pl.from_arrow(table.column("id")).cast(pl.String)}).hstack(
        result.select("lines", "lines_removed", "chars_removed")
    )


@dataclass
class RepeatedLines:
    """Repeated-line removal as a document filter (``pipeline.formats.step.DocFilter``): it rewrites
    the text and removes no document by itself (the filter engine removes a document the rewrite
    left blank). Per-document counts: ``repeated_lines.lines_removed`` and
    ``repeated_lines.chars_removed``."""

    frequent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    name: str = "repeated_lines"

    def rules(self) -> list[Rule]:
        return []

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        result = remove_repeated_lines(docs["text"], self.frequent)
        measures = result.select(pl.col("lines_removed").cast(pl.Float64), pl.col("chars_removed").cast(pl.Float64))
        return FilterOutput(
            measures=measures,
            text=result["text"],
            counts={
                f"{self.name}.lines_removed": result["lines_removed"],
                f"{self.name}.chars_removed": result["chars_removed"],
            },
        )
