"""Stages over document shards: one unit of work per input shard, with accounting.

A shard stage reads one shard of the previous stage in batches, hands each batch to its step
(a plain function over a polars DataFrame), writes what the step kept as a shard of the same name
and what it removed as ``removed/<name>``, and last writes ``parts/<name>.json``, which marks the
unit complete for resuming. Counts are kept in total, per source, per language and per licence.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config import RunConfig
from pipeline.formats.documents import LICENCE, REMOVED_SCHEMA, UNKNOWN, RunLayout, StageDir
from pipeline.formats.ledger import Ledger, LedgerError
from pipeline.formats.manifest import OUTPUT_SUFFIX, record_stage, remove_stage_outputs, stage_own_files
from pipeline.formats.stats import StageStats, docs_handed_over
from pipeline.formats.step import Step, docs_table
from pipeline.io.storage import as_path, empty_table, parquet_file, read_table
from pipeline.io.writer import parquet_stream, read_json, write_json, write_parquet
from pipeline.stages.attributes import CHECKSUM_SUFFIX, UnitAttributes
from pipeline.stages.attributes import FOLDER as ATTRIBUTES
from pipeline.stages.steps import build_step, unit_attributes


def fingerprint(path: str | Path) -> dict:
    """Size and sha256 of a file (recorded in parts to tell whether an input changed)."""
    name, path = str(path), as_path(path)
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    except OSError as error:
        return {"path": name, "bytes": None, "sha256": None, "error": f"{type(error).__name__}: {error}"}
    return {"path": name, "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


# What a document without the column (or with a null) is counted under, per grouping key.
_MISSING = {"source": "und", "lang": "und", LICENCE: UNKNOWN}


def _grouped(ledgers: dict[str, Ledger], stage: str, kept: pl.DataFrame, removed: pl.DataFrame, key: str) -> None:
    """Add a batch's counts to per-``key`` ledgers (key: source, lang or licence; as the step left
    it), counted by polars rather than document by document."""

    def values(frame: pl.DataFrame) -> pl.Series:
        if key in frame.columns:
            return frame[key].cast(pl.String).fill_null(_MISSING[key]).alias("key")
        return pl.Series("key", [_MISSING[key]] * frame.height, dtype=pl.String)

    for name, n in values(kept).value_counts().iter_rows():
        ledger = ledgers.setdefault(name, Ledger(stage))
        ledger.docs_in += n
        ledger.docs_out += n
    by_rule = pl.DataFrame({"key": values(removed), "rule": removed["rule"].cast(pl.String)}).group_by("key", "rule")
    for name, rule, n in by_rule.len().iter_rows():
        ledger = ledgers.setdefault(name, Ledger(stage))
        ledger.docs_in += n
        ledger.removed[rule] += n


def shard_unit(
    stage_name: str,
    in_path: Path,
    stage: StageDir,
    step: Step,
    batch_docs: int,
    attributes: UnitAttributes | None = None,
) -> dict:
    """Run ``step`` over one input shard; return the unit's part record (also in ``parts/``). With
    ``attributes`` (the filter stage's, given to its step too) the step's per-document measurements
    are stored, or read back where an earlier run stored them for this input
    (pipeline.stages.attributes)."""
    name = in_path.name
    part_path = stage.parts / f"{in_path.stem}.json"
    files = [fingerprint(in_path)]
    if part_path.exists():
        done = read_json(part_path)
        if done["files"] == files:
            return done
    for stale in (stage.docs / name, stage.removed / name):
        stale.unlink(missing_ok=True)
    if attributes is not None:
        attributes.open(files)
    measured: list[pl.DataFrame] = []

    ledger = Ledger(stage_name)
    by_source: dict[str, Ledger] = {}
    by_lang: dict[str, Ledger] = {}
    by_licence: dict[str, Ledger] = {}
    counts: Counter = Counter()
    removed_parts: list[pl.DataFrame] = []
    parquet = parquet_file(in_path)
    with ExitStack() as stack:
        writer = None
        for batch in parquet.iter_batches(batch_size=batch_docs):
            result = step(pl.from_arrow(pa.Table.from_batches([batch])))
            ledger.docs_in += batch.num_rows
            ledger.docs_out += result.kept.height
            ledger.removed.update(Counter(result.removed["rule"].to_list()))
            counts.update(result.counts)
            _grouped(by_source, stage_name, result.kept, result.removed, "source")
            _grouped(by_lang, stage_name, result.kept, result.removed, "lang")
            _grouped(by_licence, stage_name, result.kept, result.removed, LICENCE)
            if result.removed.height:
                removed_parts.append(result.removed)
            if result.attributes is not None:
                measured.append(result.attributes)
            table = docs_table(result.kept)
            if writer is None:
                writer = stack.enter_context(parquet_stream(stage.docs / name, table.schema))
            writer.write_table(table)
        if writer is None:  # an empty input shard still gives an (empty) output shard
            empty = step(pl.from_arrow(empty_table(parquet.schema_arrow)))
            write_parquet(docs_table(empty.kept), stage.docs / name)
            if empty.attributes is not None:
                measured.append(empty.attributes)
    if attributes is not None:
        attributes.close(measured)

    removed_file = None
    if removed_parts:
        removed_file = name
        table = pl.concat(removed_parts).to_arrow().cast(REMOVED_SCHEMA)
        write_parquet(table, stage.removed / removed_file)
    ledger.check(f"unit {in_path.stem}")
    part = {
        "unit": in_path.stem,
        "files": files,
        "shards": [{"file": name, "rows": ledger.docs_out}],
        "removed": removed_file,
        "quarantine": None,
        **({} if attributes is None else {"attributes": attributes.path.name}),
        "ledger": ledger.to_dict(),
        "by_source": {k: v.to_dict() for k, v in sorted(by_source.items())},
        "by_lang": {k: v.to_dict() for k, v in sorted(by_lang.items())},
        "by_licence": {k: v.to_dict() for k, v in sorted(by_licence.items())},
        "counts": dict(sorted(counts.items())),
    }
    write_json(part, part_path)
    if attributes is not None and attributes.warnings:
        # this run's, not the record's: a unit skipped on a later run measured nothing again
        return {**part, "warnings": attributes.warnings}
    return part


@dataclass(frozen=True, kw_only=True)
class ShardJob:
    """Shard ``in_path`` through the shard stage ``stage_name`` (lang, filter) of a run of
    ``config``, written into ``stage``."""

    stage_name: str
    in_path: Path
    stage: StageDir
    config: RunConfig


def stage_unit(job: ShardJob) -> dict:
    """One unit of a shard stage: its step built from the config, with the unit's stored
    measurements (:func:`shard_unit`)."""
    name, in_path, stage, config = job.stage_name, job.in_path, job.stage, job.config
    attributes = unit_attributes(name, stage, in_path, config)
    step = build_step(name, config, attributes)
    return shard_unit(name, in_path, stage, step, config.batch_docs, attributes)


# The files a stage writes in each of its folders (the measurements' checksums too); nothing
# else there is ever deleted.
_OUTPUT_SUFFIX = {**OUTPUT_SUFFIX, ATTRIBUTES: (OUTPUT_SUFFIX[ATTRIBUTES], CHECKSUM_SUFFIX)}


def remove_unlisted(stage: StageDir, parts: list[dict]) -> list[Path]:
    """Delete outputs no part record lists (units of inputs that are gone); return them. Only
    files of the kinds a stage writes there that the stage recorded writing are candidates: a file
    a person put in a stage's folder stays."""
    own = stage_own_files(stage.root.parent, stage.root.name)
    listed = {stage.docs / s["file"] for p in parts for s in p["shards"]}
    listed |= {stage.quarantine / p["quarantine"] for p in parts if p.get("quarantine")}
    listed |= {stage.removed / p["removed"] for p in parts if p.get("removed")}
    listed |= {stage.parts / f"{p['unit']}.json" for p in parts}
    listed |= {stage.root / ATTRIBUTES / p["attributes"] for p in parts if p.get("attributes")}
    listed |= {stage.root / ATTRIBUTES / (p["attributes"] + CHECKSUM_SUFFIX) for p in parts if p.get("attributes")}
    folders = {
        "docs": stage.docs,
        "quarantine": stage.quarantine,
        "removed": stage.removed,
        "parts": stage.parts,
        ATTRIBUTES: stage.root / ATTRIBUTES,
    }
    stale = [
        f
        for kind, folder in folders.items()
        if folder.exists()
        for f in folder.iterdir()
        if f.is_file()
        and f.name.endswith(_OUTPUT_SUFFIX[kind])
        and not f.name.startswith(".")
        and f not in listed
        and f.relative_to(stage.root).as_posix() in own
    ]
    for path in stale:
        path.unlink()
    return stale


def _rows(files: list[Path]) -> int:
    return sum(parquet_file(f).metadata.num_rows for f in files)


def check_stage_outputs(stage_name: str, stage: StageDir, parts: list[dict]) -> Ledger:
    """Sum the units' ledgers and check them against what is on disk: the rows of every docs,
    removed and quarantine file, and that no document id appears twice. Raises LedgerError."""
    total = Ledger(stage_name)
    for part in parts:
        total.merge(Ledger.from_dict(part["ledger"]))
    total.check()
    docs_files = [stage.docs / s["file"] for p in parts for s in p["shards"]]
    on_disk = {
        "docs": (_rows(docs_files), total.docs_out),
        "removed": (
            _rows([stage.removed / p["removed"] for p in parts if p.get("removed")]),
            sum(total.removed.values()),
        ),
        "quarantined records": (
            _rows([stage.quarantine / p["quarantine"] for p in parts if p.get("quarantine")]),
            sum(total.quarantined.values()),
        ),
    }
    for what, (found, counted) in on_disk.items():
        if found != counted:
            raise LedgerError(f"stage {stage_name}: ledgers count {counted} {what}, files hold {found}")
    if docs_files:
        ids = pa.concat_arrays([read_table(f, columns=["id"]).column("id").combine_chunks() for f in docs_files])
        counts = pc.value_counts(ids)
        repeated = counts.filter(pc.greater(counts.field("counts"), 1))
        if len(repeated):
            example = repeated[0]["values"].as_py()
            raise LedgerError(
                f"stage {stage_name}: {len(repeated)} document ids appear in more than one input file "
                f"(e.g. {example!r}); make the inputs' ids unique, or drop id_field from the source "
                "to derive ids from file and line"
            )
    return total


def merge_groups(parts: list[dict], key: str, stage_name: str) -> dict[str, Ledger]:
    """Sum the units' per-source, per-language or per-licence ledgers."""
    merged: dict[str, Ledger] = defaultdict(lambda: Ledger(stage_name))
    for part in parts:
        for name, counts in part.get(key, {}).items():
            merged[name].merge(Ledger.from_dict(counts))
    return dict(sorted(merged.items()))


def _made_from(inputs: list[Path], settings: dict) -> dict:
    return {"inputs": [fingerprint(p) for p in inputs], "settings": settings}


def reusable_work(stage: StageDir, inputs: list[Path], settings: dict) -> bool:
    """Whether ``<stage>/intermediate`` was made from these input shards and settings. If not, it is
    cleared, and so are the stage's part records: with other inputs, what every shard loses may
    change, so no unit of the last run can be skipped."""
    work = stage.root / "intermediate"
    if (work / "inputs.json").exists() and read_json(work / "inputs.json") == _made_from(inputs, settings):
        return True
    run_dir, name = stage.root.parent, stage.root.name
    for folder in ("intermediate", stage.parts.name):  # the stage's own files there, nothing else
        remove_stage_outputs(run_dir, name, under=folder)
    return False


def mark_work_done(stage: StageDir, inputs: list[Path], settings: dict) -> None:
    write_json(_made_from(inputs, settings), stage.root / "intermediate" / "inputs.json")


def finish_stage(stage_name: str, previous: str, config: RunConfig, parts: list[dict], **extra) -> StageStats:
    """Prune stale outputs, check the stage's ledger against its files and against what the stage
    before handed over, and write its stats (plus ``extra``) to stats.json and the manifest."""
    layout = RunLayout(config.run_dir)
    stage = layout.stage(stage_name)
    remove_unlisted(stage, parts)
    ledger = check_stage_outputs(stage_name, stage, parts)
    handed_over = docs_handed_over(layout.stage(previous).stats)
    if ledger.docs_in != handed_over:
        raise LedgerError(
            f"stage {stage_name}: {ledger.docs_in} documents in, but stage {previous} handed over {handed_over}"
        )
    counts: Counter = Counter()
    for part in parts:
        counts.update(part["counts"])
    warnings = [line for part in parts for line in part.get("warnings", [])]
    stats = StageStats.from_ledger(
        ledger,
        units=len(parts),
        sources=merge_groups(parts, "by_source", stage_name),
        languages=merge_groups(parts, "by_lang", stage_name),
        licences=merge_groups(parts, "by_licence", stage_name),
        counts=dict(sorted(counts.items())),
        **extra,
    )
    stats.write(stage.stats)
    record_stage(config, stage_name, stats.to_dict())
    # What happened in this run (stored measurements measured again), printed by the CLI as
    # `warning:` lines; not in stats.json, which stays that of a fresh run of the config.
    return replace(stats, warnings=warnings) if warnings else stats
