"""The `source` stage: raw inputs -> normalized document shards, bad records -> quarantine.

The unit of work is one input file (or, for folders of `.txt` files, a group of files). A unit
reads its files in Arrow batches, checks every record at once with Arrow compute, writes its
documents as zstd Parquet shards and its bad records as one quarantine file, checks its ledger,
and last writes ``parts/<unit>.json``, which marks it complete: a re-run skips a unit whose part
record names the same input bytes.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config import RunConfig, SourceConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import (
    CONTROL_IN_ID,
    DOC_SCHEMA,
    EMPTY_TEXT,
    INVALID_ID,
    LICENCE,
    QUARANTINE_SCHEMA,
    UNKNOWN,
    RunLayout,
    StageDir,
    blank_text,
)
from pipeline.formats.extraction import Extraction, merged
from pipeline.formats.ledger import Ledger
from pipeline.formats.manifest import record_stage, stage_outputs, stage_own_files
from pipeline.formats.stats import StageStats
from pipeline.io.jsonl import read_jsonl
from pipeline.io.parquet import read_parquet
from pipeline.io.records import (
    SAMPLE_BYTES,
    RawBatchBuilder,
    ReadLimits,
    bad_file_name,
    is_utf8_name,
    printable_name,
    shown_path,
)
from pipeline.io.repair import RepairOptions, repair_texts
from pipeline.io.sniff import reader_mismatch, sniff
from pipeline.io.storage import read_table
from pipeline.io.text import read_text_files
from pipeline.io.warc import HTML_BYTES, read_warc
from pipeline.io.writer import ShardWriter, read_json, write_json, write_parquet
from pipeline.licence import licence_column
from pipeline.stages.shard import check_stage_outputs, fingerprint, merge_groups, remove_unlisted

STAGE = "source"
# Part-record key: documents a unit lost to ids an earlier input file holds (drop_repeated_ids).
REPEATED_IDS = "repeated_ids_dropped"
# Part-record and stats key: each WARC source's HTML extraction (pipeline.formats.extraction).
EXTRACTION = "extraction"
# Part-record and stats key: the documents of each source that Unicode repair changed.
REPAIRED = "repaired"
# Folders of small text files are read this many files to a unit.
TEXT_FILES_PER_UNIT = 2000
# Files of a source whose heads are read to check that its reader fits them (check_readers): every
# file up to this many, else this many spread evenly over the sorted files, first and last included.
SNIFFED_FILES = 1000


@dataclass(frozen=True)
class Unit:
    """One task's work: some input files of one source."""

    source: str
    index: int
    files: tuple[str, ...]
    base: str  # derived ids and quarantine paths are relative to this folder

    @property
    def name(self) -> str:
        return f"{self.source}-{self.index:05d}"


def plan_units(source: SourceConfig) -> list[Unit]:
    files = source.input_files()
    base = source.base_dir()
    step = TEXT_FILES_PER_UNIT if source.reader == "text" else 1
    return [
        Unit(source.name, i, tuple(str(f) for f in files[start : start + step]), str(base))
        for i, start in enumerate(range(0, len(files), step))
    ]


def sniffed_files(files: list[Path], most: int = SNIFFED_FILES) -> list[Path]:
    """The files whose heads :func:`check_readers` reads: all, or ``most`` spread evenly."""
    if len(files) <= most:
        return files
    step = (len(files) - 1) / (most - 1)
    return [files[round(i * step)] for i in range(most)]


def check_readers(sources: list[SourceConfig]) -> None:
    """Stop, before any work, where a source's reader does not fit its files: the first few KB of
    each file (of :func:`sniffed_files`) say what it is (pipeline.io.sniff). Raises ConfigError
    with one line naming the source, the first such file, how many more there are, and the fix."""
    for source in sources:
        misfits = []
        checked = sniffed_files(source.input_files())
        for path in checked:
            problem = reader_mismatch(source.reader, sniff(path), path.name)
            if problem is not None:
                misfits.append((path, problem))
        if misfits:
            path, problem = misfits[0]
            more = f" ({len(misfits)} of the {len(checked)} files checked do not fit)" if len(misfits) > 1 else ""
            raise ConfigError(f"source {source.name!r}: {shown_path(path)} {problem}{more}")


def read_unit(unit: Unit, source: SourceConfig, limits: ReadLimits) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Yield ``(relative file, raw batch)`` for the unit's files with the source's reader."""
    base = Path(unit.base)
    if source.reader == "text":
        for batch in read_text_files([Path(f) for f in unit.files], base, limits=limits):
            yield "", batch
        return
    fields = dict(
        text_field=source.text_field,
        id_field=source.id_field,
        url_field=source.url_field,
        meta_fields=source.kept_meta_fields(),
        limits=limits,
    )
    for file in unit.files:
        path = Path(file)
        rel = path.relative_to(base).as_posix()
        if not is_utf8_name(rel):  # no id or path could name its records: one record for the file
            failure = RawBatchBuilder(1)
            failure.bad(*bad_file_name(rel), offset=0)
            yield printable_name(rel), failure.flush()
            continue
        if source.reader == "jsonl":
            batches = read_jsonl(path, **fields)
        elif source.reader == "parquet":
            batches = read_parquet(path, **fields)
        else:  # warc, wet
            batches = read_warc(path, html=source.html_options(), limits=limits, header_fields=source.header_fields())
        for batch in batches:
            yield rel, batch


def split_batch(
    batch: pa.RecordBatch,
    source: str,
    rel: str,
    base: str,
    max_doc_bytes: int,
    seen_ids: set[str],
    licence_field: str | None = None,
    licence: str = UNKNOWN,
) -> tuple[pa.Table, pa.Table]:
    """Check every record of a raw batch; return (documents, quarantine records). A document's
    licence is what ``licence_field`` of its meta names, else ``licence`` (pipeline.licence)."""
    text = normalize_line_endings(batch.column("text"))
    reason = batch.column("reason")
    checks = [
        (pc.is_null(text), "missing_text"),
        (pc.greater(pc.binary_length(text), max_doc_bytes), "too_large"),
        (blank_text(text), EMPTY_TEXT),
        (pc.match_substring(text, "\x00"), "nul_bytes"),
    ]
    for failed, why in checks:
        reason = pc.if_else(pc.and_(pc.is_null(reason), pc.fill_null(failed, False)), why, reason)
    file_col = pc.fill_null(batch.column("file"), rel)
    ids = _document_ids(batch, source, file_col)
    reason, detail = _unusable_ids(ids, reason, batch.column("detail"))

    # An input id seen before in this unit: quarantine the repeat, never overwrite silently.
    # (Ids derived from file and position cannot repeat.)
    if batch.column("own_id").null_count < batch.num_rows:
        ok = pc.is_null(reason).to_pylist()
        repeated = [False] * len(ok)
        for i, (doc_id, good) in enumerate(zip(ids.to_pylist(), ok)):
            if good:
                repeated[i] = doc_id in seen_ids
                seen_ids.add(doc_id)
        repeated = pa.array(repeated)
        reason = pc.if_else(repeated, "duplicate_id", reason)
        detail = pc.if_else(repeated, pc.binary_join_element_wise("id ", ids, " seen before", ""), detail)

    keep = pc.is_null(reason)
    sample = pc.coalesce(batch.column("sample"), pc.utf8_slice_codeunits(text, 0, SAMPLE_BYTES))
    constant_source = pa.array([source] * batch.num_rows, pa.string())
    kept = pa.Table.from_arrays(
        [ids, text, constant_source, batch.column("url"), batch.column("meta")],
        names=["id", "text", "source", "url", "meta"],
    ).filter(keep)
    licences = licence_column(kept.column("meta").combine_chunks(), licence_field, licence)
    docs = kept.append_column(LICENCE, licences).select(DOC_SCHEMA.names).cast(DOC_SCHEMA)
    files = pc.binary_join_element_wise(printable_name(base).rstrip("/") + "/", file_col, "")
    quarantine = (
        pa.Table.from_arrays(
            [constant_source, files, batch.column("line"), batch.column("offset"), reason, detail, sample],
            names=QUARANTINE_SCHEMA.names,
        )
        .filter(pc.invert(keep))
        .cast(QUARANTINE_SCHEMA)
    )
    return docs, quarantine


def normalize_line_endings(text: pa.Array) -> pa.Array:
    """``\\r\\n`` and a lone ``\\r`` as ``\\n``, so that every later rule sees one kind of line end.

    Most batches hold no ``\\r`` at all: one scan of the string bytes finds that, about four
    times faster than Arrow's replace, which then runs only where it has work."""
    data = text.buffers()[2]
    if data is None or not (np.frombuffer(data, np.uint8) == ord("\r")).any():
        return text
    return pc.replace_substring(pc.replace_substring(text, "\r\n", "\n"), "\r", "\n")


def _unusable_ids(ids: pa.Array, reason: pa.Array, detail: pa.Array) -> tuple[pa.Array, pa.Array]:
    """``reason`` and ``detail`` with :data:`INVALID_ID` for each record not yet quarantined whose
    id holds a control character (a NUL, a tab, a line break, an escape, U+0085: see
    pipeline.formats.documents.CONTROL_IN_ID), which an id a person types or passes on a command
    line (``curate inspect <id>``) cannot hold. Such records are rare: only theirs are looked at
    one by one, to name the character."""
    bad = pc.and_(pc.is_null(reason), pc.fill_null(pc.match_substring_regex(ids, CONTROL_IN_ID), False))
    if not pc.any(bad).as_py():
        return reason, detail
    why: list[str | None] = [None] * len(ids)
    for i in np.flatnonzero(bad.to_numpy(zero_copy_only=False)):
        doc_id = ids[i].as_py()
        char = next(c for c in doc_id if unicodedata.category(c) == "Cc")
        why[i] = (
            f"id {doc_id!r} holds the control character U+{ord(char):04X}, which no id may hold (it cannot "
            "be typed or passed to curate inspect); remove it from the input's ids, or from the file name "
            "for ids made of it"
        )
    return pc.if_else(bad, INVALID_ID, reason), pc.coalesce(pa.array(why, pa.string()), detail)


def _document_ids(batch: pa.RecordBatch, source: str, file_col: pa.Array) -> pa.Array:
    """``<source>/<own id>`` where the input has ids, else ``<source>/<file>:<line>`` (or
    ``@<byte offset>`` for record formats): stable across runs and unique within a source."""
    own = batch.column("own_id")
    line = pc.cast(batch.column("line"), pa.string())
    offset = pc.binary_join_element_wise("@", pc.cast(batch.column("offset"), pa.string()), "")
    position = pc.coalesce(pc.binary_join_element_wise(":", line, ""), offset)
    derived = pc.binary_join_element_wise(file_col, position, "")
    return pc.binary_join_element_wise(f"{source}/", pc.coalesce(own, derived), "")


@dataclass(frozen=True, kw_only=True)
class SourceJob:
    """Unit ``unit`` of source ``source`` in a run of ``config``, read into ``stage``."""

    unit: Unit
    source: SourceConfig
    config: RunConfig
    stage: StageDir


def source_jobs(config: RunConfig, stage: StageDir) -> list[SourceJob]:
    """The source stage's jobs: every unit of every source (:func:`plan_units`), in order."""
    return [
        SourceJob(unit=unit, source=source, config=config, stage=stage)
        for source in config.sources
        for unit in plan_units(source)
    ]


def source_unit(job: SourceJob) -> dict:
    """Run one unit of the source stage; return its part record (also written to ``parts/``)."""
    unit, source, config, stage = job.unit, job.source, job.config, job.stage
    part_path = stage.parts / f"{unit.name}.json"
    files = [{**fingerprint(f), "path": printable_name(f)} for f in unit.files]
    if part_path.exists():
        done = read_json(part_path)
        # A unit that lost documents to an earlier file's ids is read again: those files may
        # have changed since (see drop_repeated_ids).
        if done["files"] == files and REPEATED_IDS not in done:
            return done

    # Outputs of an earlier, different reading of this unit must not outlive it: those the stage
    # recorded writing, not a person's file whose name begins with the unit's.
    stale = [*stage.docs.glob(f"{unit.name}-*.parquet"), *stage.quarantine.glob(f"{unit.name}.parquet")]
    own = stage_own_files(stage.root.parent, stage.root.name) if stale else set()  # a listing: only when needed
    for path in stale:
        if path.relative_to(stage.root).as_posix() in own:
            path.unlink()
    # The readers (pipeline.io, below the config) take this plain set of limits, which has defaults
    # for callers without a run config and a JSON-document limit that no config sets.
    limits = ReadLimits(batch_docs=config.batch_docs, max_doc_bytes=config.max_doc_bytes)
    ledger = Ledger(STAGE)
    writer = ShardWriter(stage.docs, unit.name, DOC_SCHEMA, config.shard_docs, config.shard_bytes)
    quarantined: list[pa.Table] = []
    seen_ids: set[str] = set()
    by_licence: Counter = Counter()
    extraction = Extraction() if source.reader == "warc" else None
    repair, repaired = source.repair_options(), 0
    for rel, batch in read_unit(unit, source, limits):
        ledger.docs_in += batch.num_rows
        if extraction is not None:
            extraction.add_batch(batch, rel, HTML_BYTES)
        if repair is not None:
            batch, changed = _repaired(batch, repair)
            repaired += changed
        docs, bad = split_batch(
            batch, unit.source, rel, unit.base, config.max_doc_bytes, seen_ids, source.licence_field, source.licence
        )
        counted = pc.value_counts(docs.column(LICENCE).combine_chunks())
        by_licence.update(dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())))
        for doc_batch in docs.to_batches():
            writer.add(doc_batch)
        if bad.num_rows:
            quarantined.append(bad)
    shards = writer.close()
    ledger.docs_out = writer.rows_written

    quarantine_file = None
    if quarantined:
        table = pa.concat_tables(quarantined)
        quarantine_file = f"{unit.name}.parquet"
        write_parquet(table, stage.quarantine / quarantine_file)
        ledger.quarantined = Counter(table.column("reason").to_pylist())
    ledger.check(f"unit {unit.name}")

    part = {
        "unit": unit.name,
        "source": unit.source,
        "files": files,
        "shards": shards,
        "quarantine": quarantine_file,
        "ledger": ledger.to_dict(),
        "by_source": {unit.source: ledger.to_dict()},
        "by_licence": licence_ledgers(by_licence, ledger),
    }
    if extraction is not None and extraction.pages:
        part[EXTRACTION] = {unit.source: extraction.to_dict()}
    if repair is not None:
        part[REPAIRED] = {unit.source: repaired}
    write_json(part, part_path)
    return part


def _repaired(batch: pa.RecordBatch, repair: RepairOptions) -> tuple[pa.RecordBatch, int]:
    """The raw batch with its text repaired (before any check reads it), and how many texts changed."""
    at = batch.schema.get_field_index("text")
    texts, changed = repair_texts(batch.column(at), repair)
    return batch.set_column(at, batch.schema.field(at), texts), changed


def _repaired_per_source(parts: list[dict]) -> dict[str, int] | None:
    """Each repairing source's changed documents over its units; None where no source repairs."""
    total: dict[str, int] = {}
    for part in parts:
        for source, changed in part.get(REPAIRED, {}).items():
            total[source] = total.get(source, 0) + changed
    return total or None


def licence_ledgers(docs_out: Counter, ledger: Ledger) -> dict[str, dict]:
    """A unit's ledger per licence: its documents under theirs, and the records it quarantined
    under ``unknown`` (a record that could not be read names no licence)."""
    found = {name: Ledger(STAGE, n, n) for name, n in docs_out.items()}
    if ledger.quarantined:
        unknown = found.setdefault(UNKNOWN, Ledger(STAGE))
        unknown.quarantined.update(ledger.quarantined)
        unknown.docs_in += sum(ledger.quarantined.values())
    return {name: found[name].to_dict() for name in sorted(found)}


def drop_repeated_ids(stage: StageDir, parts: list[dict], sources: list[SourceConfig]) -> list[dict]:
    """Keep the first document of an id that more than one input file holds, in input-file order
    (the units' order), and quarantine the others as ``duplicate_id``; return the parts.

    Units run in parallel, each checking only its own ids, so this runs once all are done. Only
    sources whose ids come from the input (``id_field``, a WARC's record ids) are checked: ids
    derived from file and position cannot repeat. A unit that loses documents here has its
    shards and quarantine rewritten and its part record marked, so that a re-run reads it again
    rather than trust a verdict that depended on other files."""
    checked = {s.name for s in sources if s.id_field is not None or s.reader in ("warc", "wet")}
    # Units in input-file order (their names number a source's files in sorted order).
    order = sorted((i for i, part in enumerate(parts) if part["source"] in checked), key=lambda i: parts[i]["unit"])
    pieces = []
    for rank, i in enumerate(order):
        for shard in parts[i]["shards"]:
            column = read_table(stage.docs / shard["file"], columns=["id"]).column("id")
            pieces.append(pa.table({"id": column, "unit": pa.repeat(pa.scalar(rank, pa.int32()), len(column))}))
    if not pieces:
        return parts
    ids = pa.concat_tables(pieces)
    counts = pc.value_counts(ids.column("id"))
    repeated = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")
    if not len(repeated):
        return parts
    copies = ids.filter(pc.is_in(ids.column("id"), value_set=repeated))
    first = copies.group_by("id").aggregate([("unit", "min")])
    copies = copies.join(first, "id")
    later = copies.filter(pc.greater(copies.column("unit"), copies.column("unit_min")))
    parts = list(parts)
    for rank in sorted(set(later.column("unit").to_pylist())):
        mine = later.filter(pc.equal(later.column("unit"), rank))
        kept_in = dict(
            zip(mine.column("id").to_pylist(), (parts[order[r]]["unit"] for r in mine.column("unit_min").to_pylist()))
        )
        parts[order[rank]] = _drop_from_unit(stage, parts[order[rank]], kept_in, {p["unit"]: p for p in parts})
    return parts


def _drop_from_unit(stage: StageDir, part: dict, kept_in: dict[str, str], by_unit: dict[str, dict]) -> dict:
    """Remove ``kept_in``'s ids (id -> the unit that keeps it) from a unit's shards into its
    quarantine; rewrite its part record."""
    part_path = stage.parts / f"{part['unit']}.json"
    # Marked first: killed in what follows, the unit is read again on the next run.
    part = {**part, REPEATED_IDS: part.get(REPEATED_IDS, 0)}
    write_json(part, part_path)
    drop = pa.array(list(kept_in), pa.string())
    source = part["source"]
    file = part["files"][0]["path"] if len(part["files"]) == 1 else part["unit"]
    shards, quarantined = [], []
    moved: Counter = Counter()  # documents quarantined here, by licence
    for shard in part["shards"]:
        path = stage.docs / shard["file"]
        table = read_table(path)
        gone = pc.is_in(table.column("id"), value_set=drop)
        if not pc.any(gone).as_py():
            shards.append(shard)
            continue
        removed = table.filter(gone)
        if LICENCE in removed.column_names:
            moved.update(removed.column(LICENCE).to_pylist())
        first_files = [
            ", ".join(f["path"] for f in by_unit[kept_in[doc_id]]["files"])
            for doc_id in removed.column("id").to_pylist()
        ]
        quarantined.append(
            pa.table(
                {
                    "source": removed.column("source"),
                    "file": pa.array([file] * removed.num_rows, pa.string()),
                    "line": pa.nulls(removed.num_rows, pa.int64()),
                    "offset": pa.nulls(removed.num_rows, pa.int64()),
                    "reason": pa.array(["duplicate_id"] * removed.num_rows, pa.string()),
                    "detail": pc.binary_join_element_wise(
                        pc.binary_join_element_wise("id ", removed.column("id"), ""),
                        pa.array(first_files, pa.string()),
                        " is kept from an earlier input file: ",
                    ),
                    "sample": pc.utf8_slice_codeunits(removed.column("text"), 0, SAMPLE_BYTES),
                }
            ).cast(QUARANTINE_SCHEMA)
        )
        kept = table.filter(pc.invert(gone))
        if kept.num_rows:
            write_parquet(kept, path)
            shards.append({**shard, "rows": kept.num_rows})
        else:
            path.unlink()
    table = pa.concat_tables(quarantined)
    n = table.num_rows
    if part["quarantine"]:
        table = pa.concat_tables([read_table(stage.quarantine / part["quarantine"]), table])
    quarantine_file = f"{part['unit']}.parquet"
    write_parquet(table, stage.quarantine / quarantine_file)

    def less(counts: dict, n: int = n) -> dict:
        ledger = Ledger.from_dict(counts)
        ledger.docs_out -= n
        ledger.quarantined["duplicate_id"] += n
        return ledger.check(f"unit {part['unit']}").to_dict()

    by_licence = dict(part.get("by_licence", {}))  # (none in a part written before licences were kept)
    for name, k in moved.items():
        if name in by_licence:
            by_licence[name] = less(by_licence[name], k)

    part = {
        **part,
        "shards": shards,
        "quarantine": quarantine_file,
        "ledger": less(part["ledger"]),
        "by_source": {**part["by_source"], source: less(part["by_source"][source])},
        "by_licence": by_licence,
        REPEATED_IDS: part[REPEATED_IDS] + n,
    }
    write_json(part, part_path)
    return part


def per_source_counts(parts: list[dict]) -> dict[str, Ledger]:
    """Each source's ledger, and how many input files it read."""
    files = Counter(part["source"] for part in parts for _ in part["files"])
    return {
        name: replace(ledger, files=files[name]) for name, ledger in merge_groups(parts, "by_source", STAGE).items()
    }


def finish_source(config: RunConfig, stage: StageDir, parts: list[dict]) -> StageStats:
    """The source stage after its units (:func:`source_unit`, one per :func:`plan_units` unit):
    repeated ids dropped, the ledger checked against the files, ``stats.json`` (with the counts
    per source and per licence) written and recorded in the manifest; return the stats."""
    parts = drop_repeated_ids(stage, parts, config.sources)
    remove_unlisted(stage, parts)
    ledger = check_stage_outputs(STAGE, stage, parts)
    stats = StageStats.from_ledger(
        ledger,
        units=len(parts),
        sources=per_source_counts(parts),
        licences=merge_groups(parts, "by_licence", STAGE),
        extraction={name: found.to_dict() for name, found in merged(parts, EXTRACTION).items()} or None,
        repaired=_repaired_per_source(parts),
    )
    stats.write(stage.stats)
    record_stage(config, STAGE, stats.to_dict(), inputs=[f for part in parts for f in part["files"]])
    return stats


def inputs_as_read(config: RunConfig, manifest: dict) -> bool:
    """Whether the source stage would skip every unit of ``config`` (:func:`source_unit`'s check):
    its sources hold the files the manifest's ``inputs`` record (path, size and sha256) and no unit
    is to be read again for ids an earlier file took (REPEATED_IDS)."""
    files = [
        {**fingerprint(f), "path": printable_name(f)}
        for source in config.sources
        for unit in plan_units(source)
        for f in unit.files
    ]
    key = lambda record: record["path"]  # noqa: E731
    if sorted(files, key=key) != sorted(manifest.get("inputs", []), key=key):
        return False
    parts = RunLayout(config.run_dir).stage(STAGE).parts
    return not any(REPEATED_IDS in read_json(path) for path in sorted(parts.glob("*.json")))


class QuarantineError(ValueError):
    """A source lost more of its records to quarantine than its max_quarantine_fraction allows."""


# Reasons (most records first) that a QuarantineError names, each with a file and line of its own.
NAMED_REASONS = 3


def quarantine_problem(stage: StageDir, config: RunConfig) -> str | None:
    """After the source stage: the one line that fails the run for the first source whose
    quarantined share of its records is more than its ``max_quarantine_fraction`` (the source's,
    else the run's), naming the share, the top reasons each with a file and line, and the setting;
    None when every source is within its limit. The stage's outputs are left as they are, so a run
    with the limit raised resumes from them."""
    parts = [read_json(path) for path in stage_outputs(stage.root.parent, STAGE, "parts")]  # a stray .json: not one
    ledgers = merge_groups(parts, "by_source", STAGE)
    for source in config.sources:
        limit = source.max_quarantine_fraction
        limit = config.max_quarantine_fraction if limit is None else limit
        ledger = ledgers.get(source.name)
        quarantined = sum(ledger.quarantined.values()) if ledger else 0
        if not quarantined or quarantined / ledger.docs_in <= limit:
            continue
        reasons = ledger.quarantined.most_common(NAMED_REASONS)
        where = _first_records(stage, [p for p in parts if p["source"] == source.name], [r for r, _ in reasons])
        named = ", ".join(f"{reason} {n:,} (e.g. {where.get(reason, '?')})" for reason, n in reasons)
        return (
            f"source {source.name!r}: {quarantined:,} of its {ledger.docs_in:,} records were quarantined "
            f"({quarantined / ledger.docs_in:.1%}), more than max_quarantine_fraction = {limit}; "
            f"reasons: {named}; fix the inputs (or the source's reader), or raise max_quarantine_fraction in "
            "its [[sources]] table (1.0 turns the check off) and run again: the source stage is kept"
        )
    return None


def check_quarantine(stage: StageDir, config: RunConfig) -> None:
    """Raise QuarantineError with :func:`quarantine_problem`'s line, if it has one."""
    problem = quarantine_problem(stage, config)
    if problem is not None:
        raise QuarantineError(problem)


def _first_records(stage: StageDir, parts: list[dict], reasons: list[str]) -> dict[str, str]:
    """For each of ``reasons``, where its first quarantined record is (``file:line``, or
    ``file@offset`` for record formats), from the units' quarantine files in unit order."""
    found: dict[str, str] = {}
    for part in sorted(parts, key=lambda p: p["unit"]):
        if part["quarantine"] is None:
            continue
        table = read_table(stage.quarantine / part["quarantine"], columns=["file", "line", "offset", "reason"])
        for reason in reasons:
            at = pc.index(table.column("reason"), reason).as_py()
            if reason not in found and at >= 0:
                row = table.slice(at, 1).to_pylist()[0]
                position = f":{row['line']}" if row["line"] is not None else ""
                if not position and row["offset"] is not None:
                    position = f"@{row['offset']}"
                found[reason] = shown_path(row["file"]) + position
        if len(found) == len(reasons):
            break
    return found
