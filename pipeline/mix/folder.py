"""A mixture folder's own files (pipeline.formats.mixture): the manifest over the shards written,
checked against the plan, with the tokenizer beside it and, where the exclusion judged token
windows common text, those windows for the contamination check
(pipeline.decontaminate.check_contamination)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from pipeline.formats.ledger import LedgerError
from pipeline.formats.mixture import (
    COMMON_WINDOWS_FILE,
    MANIFEST_FILE,
    TOKENIZER_FILE,
    manifest,
    shard_entry,
    tokenizer_entry,
)
from pipeline.formats.tokens import load_tokenizer
from pipeline.io.storage import as_path
from pipeline.io.writer import write_bytes, write_json, write_parquet
from pipeline.mix.licences import licences_in_all


def shard_entries(
    name: str, jobs: Sequence[tuple[str, str, dict]], records: Mapping[str, dict]
) -> dict[str, list[dict]]:
    """Each split's entries of mixture ``name``'s manifest, in order. ``jobs``: ``(group, file,
    shard)`` of each output shard as planned (pipeline.mix.routing.shard_jobs); ``records``: what
    writing each file recorded (pipeline.mix.routing.write_shard), by file, checked against the
    plan (LedgerError: a bug)."""
    entries: dict[str, list[dict]] = {"train": [], "validation": []}
    for group, file, shard in jobs:
        entry = records[file]
        if entry["documents"] != shard["documents"] or entry["tokens"] != shard["tokens"]:
            raise LedgerError(
                f"stage mix: {name}/{file} holds {entry['documents']} documents and "
                f"{entry['tokens']} tokens; the plan has {shard['documents']} and {shard['tokens']}"
            )
        split = "train" if file.startswith("train/") else "validation"
        entries[split].append(
            shard_entry(file, group, entry["documents"], entry["tokens"], shard["bytes"], entry["sha256"])
        )
    return entries


def write_mixture_folder(
    folder: Path,
    name: str,
    *,
    seed: int,
    tokenizer_path: Path,
    groups: dict[str, dict],
    entries: Mapping[str, list[dict]],
    report: Mapping,
    weighting: dict,
    common: pl.DataFrame | None = None,
    decontamination: Mapping | None = None,
) -> dict:
    """Write mixture ``name``'s tokenizer and manifest in ``folder``; return the manifest.
    ``groups``: its figures per group (pipeline.mix.figures.mixture_groups); ``entries``: its
    shards per split (:func:`shard_entries`); ``report``: the plan's figures
    (pipeline.mix.figures.mixture_report); ``weighting``: how the weights were set. ``common``:
    the windows the exclusion judged common, written as ``common_windows.parquet`` and described
    in the manifest with ``decontamination`` (the window settings)."""
    tokenizer = load_tokenizer(tokenizer_path)
    write_bytes(as_path(tokenizer_path).read_bytes(), folder / TOKENIZER_FILE)
    found = manifest(
        name,
        seed,
        tokenizer_entry(tokenizer, folder / TOKENIZER_FILE),
        groups,
        entries["train"],
        entries["validation"],
        weighting=weighting,
        **{key: value for key, value in report.items() if key != "groups"},
        licences=licences_in_all({group: figures["licences"] for group, figures in groups.items()}),
    )
    if common is not None:
        write_parquet(common.to_arrow(), folder / COMMON_WINDOWS_FILE)
        found["decontamination"] = {
            **(decontamination or {}),
            "common_windows": common.height,
            "common_windows_file": COMMON_WINDOWS_FILE,
        }
    write_json(found, folder / MANIFEST_FILE)
    return found
