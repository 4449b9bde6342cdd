"""Which documents leave the pool, and why: those of an excluded text (a downstream task, an
evaluation set shared by several runs) before the split, and the training documents that
near-duplicate a validation document after it.

The units here find matches in a block of shards with an index built elsewhere (a MinHash index of
reference texts, pipeline.dedup.contamination; a token-window index, pipeline.decontaminate); the
functions below turn what they found into causes (CAUSES_SCHEMA): the rule, the text that put a
document there, and the rule's measure. An excluded document leaves by the first rule that takes
it: the same id (``reference_id``), then a near-duplicate (``reference_near_duplicate``), then a
shared token window (``reference_window``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.formats.documents import (
    MIX_CONTAMINATED,
    MIX_EXCLUDED,
    MIX_EXCLUDED_ID,
    MIX_EXCLUDED_WINDOW,
    MIX_RULE,
    REMOVED_SCHEMA,
)
from pipeline.formats.step import removed_frame
from pipeline.formats.tokens import read_token_shard
from pipeline.io.storage import read_parquet

MATCHES_SCHEMA = {"id": pl.String, "reference_id": pl.String, "jaccard": pl.Float64}
WINDOWS_SCHEMA = {"id": pl.String, "window": pl.Int64}
# Why a document left the pool: the rule, the text that put it there, and the rule's measure
# (Jaccard; shared windows; null for an id).
CAUSES_SCHEMA = {"id": pl.String, "reference_id": pl.String, "value": pl.Float64, "rule": pl.String}


class NearDuplicateIndex(Protocol):
    """A MinHash index of texts (pipeline.dedup.contamination.ReferenceIndex)."""

    def matches(self, ids: pl.Series, texts: pl.Series) -> pl.DataFrame: ...


class WindowLookup(Protocol):
    """An index of token windows (pipeline.decontaminate.WindowIndex)."""

    def hits(self, tokens: np.ndarray, starts, lengths) -> pl.DataFrame: ...


@dataclass(frozen=True, kw_only=True)
class MatchJob:
    """Unit ``unit``: the documents of a block of shards (``docs_paths``, but those in ``skip``)
    near-duplicating a text of ``index``."""

    unit: str
    docs_paths: list[Path]
    index: NearDuplicateIndex
    skip: pl.Series


def block_matches(job: MatchJob) -> pl.DataFrame:
    """The documents of the job's block that near-duplicate a text of its index (MATCHES_SCHEMA:
    every match)."""
    found = [pl.DataFrame(schema=MATCHES_SCHEMA)]
    for path in job.docs_paths:
        docs = read_parquet(path, columns=["id", "text"]).filter(~pl.col("id").is_in(job.skip.implode()))
        found.append(job.index.matches(docs["id"], docs["text"]))
    return pl.concat(found)


@dataclass(frozen=True)
class WindowsJob:
    """Unit ``unit``: the windows of a block of token shards (``token_paths``) in ``index``."""

    unit: str
    token_paths: list[Path]
    index: WindowLookup


def block_windows(job: WindowsJob) -> pl.DataFrame:
    """``id, window``: every window of the block's documents that is in the job's index."""
    found = [pl.DataFrame(schema=WINDOWS_SCHEMA)]
    for path in job.token_paths:
        tokens, offsets = read_token_shard(path)
        ends = offsets["doc_tokens"].to_numpy().astype(np.int64) - 1
        hits = job.index.hits(tokens, offsets["doc_start"].to_numpy(), ends)
        found.append(pl.DataFrame({"id": offsets["doc_id"].gather(hits["doc"].to_numpy()), "window": hits["window"]}))
    return pl.concat(found)


def best_match(matches: pl.DataFrame) -> pl.DataFrame:
    """One row per document: its most similar reference text (ties: the smallest reference id)."""
    return matches.sort(["id", "jaccard", "reference_id"], descending=[False, True, False]).unique(
        "id", keep="first", maintain_order=True
    )


def causes_under(frame: pl.DataFrame, rule: str, value: str | None) -> pl.DataFrame:
    """CAUSES_SCHEMA rows of ``frame`` (``id``, ``reference_id``) under ``rule``, its measure the
    column ``value`` (None: null)."""
    return frame.select(
        pl.col("id"),
        pl.col("reference_id"),
        (pl.col(value) if value else pl.lit(None)).cast(pl.Float64).alias("value"),
        pl.lit(rule, pl.String).alias("rule"),
    )


@dataclass(frozen=True)
class Exclusion:
    """The documents that leave the pool before the split: ``causes`` (CAUSES_SCHEMA), ``summary``
    (what each rule found, for the stage's stats) and ``common`` (the windows judged common text,
    ``hash, documents``; None without the window rule), recorded in every mixture folder."""

    causes: pl.DataFrame
    summary: dict
    common: pl.DataFrame | None = None


def nothing_excluded() -> Exclusion:
    """The exclusion of a run without exclude files."""
    return Exclusion(pl.DataFrame(schema=CAUSES_SCHEMA), {})


def excluded_by_reference(listed: pl.Series, near: pl.DataFrame, texts: int) -> Exclusion:
    """The documents of the same id as an excluded text (``listed``), then those near-duplicating
    one (``near``: :func:`best_match` over the others); ``texts``: how many texts were excluded."""
    by_id = pl.DataFrame({"id": listed}).with_columns(reference_id=pl.col("id"))
    return Exclusion(
        pl.concat([causes_under(by_id, MIX_EXCLUDED_ID, None), causes_under(near, MIX_EXCLUDED, "jaccard")]),
        {"texts": texts, "by_id": by_id.height, "near_duplicate": near.height},
    )


def excluded_by_window(
    before: Exclusion,
    containment: tuple[pl.DataFrame, dict, pl.DataFrame],
    index_summary: dict,
    common_window_docs: int,
) -> Exclusion:
    """``before`` and the documents sharing an uncommon window with an excluded text that it did
    not take. ``containment``: what pipeline.decontaminate.window_containment found over the whole
    pool (documents, counts, common windows); ``index_summary``: the window index's own figures."""
    found, counts, common = containment
    contained = found.filter((pl.col("windows") > 0) & ~pl.col("id").is_in(before.causes["id"].implode()))
    summary = {
        **before.summary,
        **index_summary,
        "common_window_docs": common_window_docs,
        **counts,
        "window": contained.height,
    }
    taken = pl.concat([before.causes, causes_under(contained, MIX_EXCLUDED_WINDOW, "windows")])
    return Exclusion(taken, summary, common)


def removed_tables(
    removed_rows: list[pl.DataFrame], all_causes: pl.DataFrame, stage: str, contamination_threshold: float
) -> dict[str, pa.Table]:
    """The removed documents of each side (``excluded``, ``contaminated``) in REMOVED_SCHEMA, each
    with its rule, the rule's measure and its threshold. ``removed_rows``: the removed documents
    (``id, source, lang, split, rule``) of each shard."""
    thresholds = {
        MIX_EXCLUDED_ID: None,
        MIX_EXCLUDED: contamination_threshold,
        MIX_EXCLUDED_WINDOW: 1.0,
        MIX_CONTAMINATED: contamination_threshold,
    }
    tables = {}
    for side in ("excluded", "contaminated"):
        dropped = (
            pl.concat(removed_rows).filter(pl.col("split") == side)
            if removed_rows
            else pl.DataFrame(schema={"id": pl.String, "source": pl.String, "lang": pl.String, MIX_RULE: pl.String})
        ).join(all_causes.select("id", "value"), on="id", how="left")
        threshold = dropped[MIX_RULE].replace_strict(thresholds, return_dtype=pl.Float64)
        removed = removed_frame(dropped, stage, dropped[MIX_RULE], dropped["value"], threshold)
        tables[side] = removed.to_arrow().cast(REMOVED_SCHEMA)
    return tables
