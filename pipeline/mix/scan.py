"""The pool's scan: one row per curated document (id, source, language, licence, tokens, bytes and
where its tokens are), its group, and the groups under ``min_share`` of the pool's tokens renamed
``other``. Each scan unit works through a block of shards and writes one file per shard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import LICENCE, MIX_NEAR_ID, MIX_RULE, licence_series
from pipeline.formats.ledger import LedgerError, add_counts
from pipeline.formats.names import check_group_names
from pipeline.formats.tokens import read_token_shard
from pipeline.io.storage import parquet_file, read_parquet
from pipeline.io.writer import write_parquet
from pipeline.mix.plan import OTHER, small_groups
from pipeline.mix.shards import group_documents, group_tokens

SCAN_SCHEMA = {
    "id": pl.String,
    "source": pl.String,
    "lang": pl.String,
    LICENCE: pl.String,
    "tokens": pl.Int64,
    "bytes": pl.Int64,
    "shard": pl.Int32,
    "row": pl.Int64,
}


def scan_shard(number: int, docs_path: Path, token_path: Path) -> pl.DataFrame:
    """One row per document of a curated shard: id, source, lang, licence, tokens (its token count,
    end token included), bytes (UTF-8 bytes of its text), shard (``number``) and row."""
    columns = [c for c in ("id", "source", "lang", LICENCE, "text") if c in _columns(docs_path)]
    docs = read_parquet(docs_path, columns=columns)
    _, offsets = read_token_shard(token_path)
    if docs.height != offsets.height or not docs["id"].equals(offsets["doc_id"], check_names=False):
        raise LedgerError(
            f"stage mix: {token_path.name} does not hold the documents of {docs_path} "
            "in order; run the tokenize stage again"
        )
    lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
    return pl.DataFrame(
        {
            "id": docs["id"],
            "source": docs["source"],
            "lang": lang,
            LICENCE: licence_series(docs),
            "tokens": offsets["doc_tokens"],
            "bytes": docs["text"].str.len_bytes(),
            "shard": [number] * docs.height,
            "row": np.arange(docs.height),
        },
        schema=SCAN_SCHEMA,
    )


@dataclass(frozen=True, kw_only=True)
class ShardToScan:
    """Curated shard ``number``: its documents ``docs``, its token shard ``tokens``, and the scan
    file ``out`` to write."""

    number: int
    docs: Path
    tokens: Path
    out: Path


@dataclass(frozen=True, kw_only=True)
class ScanJob:
    """Unit ``unit``: a block of ``shards`` to scan, grouped by ``by`` and ``merge``; ``listed``:
    the ids the exclude files list."""

    unit: str
    shards: list[ShardToScan]
    by: list[str]
    merge: dict | None
    listed: pl.Series


@dataclass(frozen=True)
class Scanned:
    """What a block's scan found: its documents, tokens per group and the ids among them that an
    ``exclude`` file lists."""

    documents: int
    groups: dict[str, int]
    listed: pl.Series


def scan_block(job: ScanJob) -> Scanned:
    """Scan a block of shards: write each shard's scan rows with the group ``group_by`` and
    ``merge`` give them."""
    documents, groups, listed = 0, {}, [pl.Series("id", [], dtype=pl.String)]
    for shard in job.shards:
        scan = scan_shard(shard.number, shard.docs, shard.tokens)
        scan = scan.with_columns(group_documents(scan, job.by, job.merge))
        write_parquet(scan.to_arrow(), shard.out)
        documents += scan.height
        add_counts(groups, group_tokens(scan))
        listed.append(scan["id"].filter(scan["id"].is_in(job.listed.implode())))
    return Scanned(documents, groups, pl.concat(listed))


def _columns(path: Path) -> list[str]:
    return parquet_file(path).schema_arrow.names


def renamed_groups(scanned: Sequence[Scanned], min_share: float) -> dict[str, str]:
    """The groups under ``min_share`` of the pool's tokens (summed over the blocks' scans), renamed
    OTHER; no two groups left may share a file name (ConfigError: the groups found, whose
    languages are known only now, make distinct file names that fit the file system)."""
    totals: dict = {}
    for found in scanned:
        add_counts(totals, found.groups)
    renamed = {name: OTHER for name in small_groups(totals, min_share)}
    try:
        check_group_names(sorted({renamed.get(group, group) for group in totals}))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return renamed


def documents_schema() -> pa.Schema:
    """The columns of the stage's ``documents.parquet`` (for a pool with no shard)."""
    fields = {**SCAN_SCHEMA, "group": pl.String, "split": pl.String, MIX_RULE: pl.String, MIX_NEAR_ID: pl.String}
    return pl.DataFrame(schema={k: v for k, v in fields.items() if k not in ("shard", "row")}).to_arrow().schema
