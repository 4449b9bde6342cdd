"""The dedup index: a folder that outlives a run, holding the documents runs kept, as the dedup
stage stores them, so that a later run's dedup treats them as already kept
(``pipeline.dedup.indexed``). This module is the format's one owner: its paths, its manifest, and
adding a run's documents.

    index.json                                  the manifest (:data:`INDEX_FORMAT`)
    docs/<run key>/shard-<S>.parquet (+ .sets)  signature files of the kept documents, in the
                                                stage's own format (``pipeline.dedup.lsh``): S is
                                                the index's shard number, a document's number in
                                                the index is ``S << 32 | row``
    bands/part-<P>/<run key>/block-<S>.parquet  band keys and exact hashes of a block of shards,
                                                a key in partition ``key % partitions`` as in the
                                                stage (``BAND_KEYS_SCHEMA``: band, key, doc)
    pending/<run key>.json                      the plan of an add not yet published

The manifest holds the settings that decide signatures and band keys (:data:`SETTINGS_KEYS` and
the normalization), the partitions, the key kinds its band files hold (of :data:`KEYS`: a
normalized URL's hash is one more band, ``pipeline.dedup.lsh.URL_BAND``, where the runs dedup
by URL), and each run: its key, name, source, first shard, shards, blocks and documents.

Adding writes every file of the run first (each one atomically), then the manifest, last and
atomically: a reader sees a run only once the manifest names it, and reads only the files the
manifest names, so an add killed in the middle leaves the index as it was (an add of the same
run again resumes it: the blocks already written are kept). Adds must not run at the same time on
one index; reads may, with each other and with an add.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.dedup.lsh import (
    ROW_GROUP_ROWS,
    SHARD_BITS,
    SHARD_KEY,
    SIGNATURE_COMPRESSION,
    doc_numbers,
    partition_band_keys,
    read_params,
    read_sets,
    sets_path,
)
from pipeline.io.storage import AnyPath, as_path, is_local, parquet_file, read_table
from pipeline.io.writer import PARQUET_COMPRESSION, atomic_sink, read_json, write_json

INDEX_FORMAT = "dedup-index/1"
# The words and exact hash of pipeline.dedup.normalize: a change there makes other band keys.
NORMALIZATION = "dedup.normalize/1"
# What decides a document's band keys and shingle sets: an index is read only with these equal.
SETTINGS_KEYS = ("ngram", "num_perm", "seed", "scheme", "shingle_hash", "bands", "rows", "exact", "near", "url")
# The kinds of key the band files can hold: the exact hash, the LSH bands, the normalized URL's
# hash (pipeline.dedup.lsh.URL_BAND).
KEYS = ("exact", "near", "url")
# Shards per block of an add, as the stage's blocks: one band-key file per partition per block.
SHARDS_PER_BLOCK = 16


class DedupIndexError(ValueError):
    """An index that cannot be used as asked (other settings, not an index): one line with the fix."""


def index_settings(params: dict) -> dict:
    """The settings of :data:`SETTINGS_KEYS` from a signature file's parameters
    (``MinHashParams.to_dict``), and the normalization."""
    settings = {k: params.get(k) for k in SETTINGS_KEYS}
    settings["url"] = bool(params.get("url", False))  # MinHashParams.to_dict leaves a false url out
    return {**settings, "normalization": NORMALIZATION}


@dataclass(frozen=True)
class DedupIndex:
    """The paths of an index folder (``root``: a local path or an fsspec URL)."""

    root: AnyPath

    def __post_init__(self):
        object.__setattr__(self, "root", as_path(self.root))

    @property
    def manifest_path(self) -> AnyPath:
        return self.root / "index.json"

    def signatures(self, key: str, shard: int) -> AnyPath:
        return self.root / "docs" / key / f"shard-{shard:06d}.parquet"

    def band_file(self, partition: int, key: str, first: int) -> AnyPath:
        return self.root / "bands" / f"part-{partition:04d}" / key / f"block-{first:06d}.parquet"

    def pending(self, key: str) -> AnyPath:
        return self.root / "pending" / f"{key}.json"

    def manifest(self) -> dict | None:
        """The manifest, or None where there is no index yet; an unreadable one is refused."""
        if not self.manifest_path.exists():
            return None
        try:
            found = read_json(self.manifest_path)
        except ValueError:
            raise DedupIndexError(f"{self.manifest_path} is not JSON; point at a dedup index folder") from None
        if not isinstance(found, dict) or found.get("format") != INDEX_FORMAT:
            raise DedupIndexError(
                f"{self.root} is not a dedup index ({INDEX_FORMAT}); give a folder `curate index add` made"
            )
        return found

    def opened(self) -> dict:
        """The manifest of an index that must exist."""
        found = self.manifest()
        if found is None:
            raise DedupIndexError(f"no dedup index at {self.root}; make one with `curate index add {self.root} RUN`")
        return found


def check_settings(manifest: dict, settings: dict, what: str) -> None:
    """Refuse, in one line, ``what`` (a run) whose settings differ from the index's."""
    held = manifest["settings"]
    differ = [k for k in sorted(set(held) | set(settings)) if held.get(k) != settings.get(k)]
    if differ:
        shown = ", ".join(f"{k} {held.get(k)!r} in the index, {settings.get(k)!r} in {what}" for k in differ)
        raise DedupIndexError(f"the dedup index was made with other settings ({shown}); use an index of these settings")


def new_manifest(settings: dict, partitions: int) -> dict:
    return {
        "format": INDEX_FORMAT,
        "settings": settings,
        "partitions": partitions,
        "keys": [k for k in KEYS if settings.get(k)],
        "runs": [],
        "docs": 0,
        "shards": 0,
    }


def meeting_partitions(mine: int, theirs: int, partition: int) -> list[int]:
    """The partitions of ``theirs`` partitions that can hold a key of partition ``partition`` of
    ``mine`` (``key % mine == partition``): those equal to it modulo gcd(mine, theirs)."""
    step = math.gcd(mine, theirs)
    return list(range(partition % step, theirs, step))


# --- adding a run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardToAdd:
    """A shard of a run: its signature file, and the curated file whose ids it keeps (None: none
    of its documents was kept)."""

    signatures: Path
    kept: Path | None


@dataclass(frozen=True)
class BlockJob:
    index: DedupIndex
    key: str
    first: int  # the index shard of the block's first shard
    shards: tuple[ShardToAdd, ...]
    partitions: int


def _kept_rows(source: Path, kept: Path | None) -> tuple[pa.Table, np.ndarray]:
    table = read_table(source)
    if kept is None:
        return table, np.zeros(0, np.int64)
    ids = read_table(kept, columns=["id"]).column("id").cast(pa.string())
    return table, np.flatnonzero(pc.is_in(table.column("id"), value_set=ids.combine_chunks()).to_numpy(False))


def copy_kept(source: Path, kept: Path | None, target: AnyPath, shard: int) -> int:
    """The rows of signature file ``source`` whose ids are in ``kept``, as index shard ``shard``:
    numbered again (``shard << 32 | row``), with their shingle sets beside them. Returns the rows."""
    table, rows = _kept_rows(source, kept)
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), SHARD_KEY: str(shard).encode()})
    out = table.take(pa.array(rows, pa.int64())).set_column(0, "doc", pa.array(doc_numbers(shard, len(rows))))
    near = "shingles" in table.column_names
    compression = {name: SIGNATURE_COMPRESSION.get(name, PARQUET_COMPRESSION) for name in schema.names}
    with ExitStack() as files:
        sink = files.enter_context(atomic_sink(target))  # entered first: renamed after the sets file
        if near:
            sizes = table.column("shingles").to_numpy()
            offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
            values, _ = read_sets(sets_path(source), offsets[rows], offsets[rows + 1])
            sets = files.enter_context(atomic_sink(sets_path(target)))
            if isinstance(sets, Path):
                sets = files.enter_context(open(sets, "wb"))
            sets.write(memoryview(values.astype("<u8")))
        with pq.ParquetWriter(
            sink, schema, compression=compression, use_dictionary=False, column_encoding={"doc": "DELTA_BINARY_PACKED"}
        ) as writer:
            writer.write_table(out.cast(schema), row_group_size=ROW_GROUP_ROWS)
    return len(rows)


def add_block(job: BlockJob) -> int:
    """The block's index signature files and its band keys by partition; skipped when its band
    files (written last) are all there. Returns the documents the block holds."""
    targets = [job.index.signatures(job.key, job.first + i) for i in range(len(job.shards))]
    bands = [job.index.band_file(p, job.key, job.first) for p in range(job.partitions)]
    if all(path.exists() for path in bands + targets):
        return sum(parquet_file(t).metadata.num_rows for t in targets)
    docs = sum(copy_kept(s.signatures, s.kept, t, job.first + i) for i, (s, t) in enumerate(zip(job.shards, targets)))
    partition_band_keys(targets, bands)
    return docs


RunUnits = Callable[[str | None, Callable[[Any], Any], Sequence], list]


def _here(label: str | None, fn: Callable[[Any], Any], jobs: Sequence) -> list:
    return [fn(job) for job in jobs]


def _plan(index: DedupIndex, key: str, first: int, shards: int, partitions: int) -> dict:
    """The add's plan: its index shards from ``first``, in ``partitions`` partitions. A plan left by
    an add killed before another one was published (or made with other partitions) numbers its
    files otherwise: they are deleted, and the add starts again."""
    plan = {"key": key, "first": first, "shards": shards, "partitions": partitions}
    path = index.pending(key)
    if path.exists() and read_json(path) != plan:
        for folder in [index.root / "docs" / key, *(index.root / "bands").glob(f"part-*/{key}")]:
            _remove_folder(folder)
    write_json(plan, path)
    return plan


def _remove_folder(folder: AnyPath) -> None:
    """Delete a folder of the index's own files (a stale plan's)."""
    if is_local(folder):
        shutil.rmtree(folder, ignore_errors=True)
    elif folder.exists():
        folder.fs.rm(folder.path, recursive=True)


def _check_new_folder(index: DedupIndex) -> None:
    """A new index goes into a new or empty folder (or one an add began): never among others' files."""
    if index.root.exists() and not index.root.is_dir():
        raise DedupIndexError(f"{index.root} is a file; give a folder for the dedup index")
    found = sorted(p.name for p in index.root.iterdir()) if index.root.exists() else []
    foreign = [name for name in found if name not in ("docs", "bands", "pending")]
    if foreign:
        raise DedupIndexError(
            f"{index.root} holds {foreign[0]} and no index.json; give a new or empty folder for the dedup index"
        )


def add_run(
    index: DedupIndex,
    run: dict,
    shards: Sequence[ShardToAdd],
    partitions: int | None,
    run_units: RunUnits = _here,
    default_partitions: int = 8,
) -> dict:
    """Add a run's kept documents (``run``: its ``key``, ``name`` and ``source``; ``shards`` in its
    order) to the index, made with ``partitions`` partitions if new (None: those of an add of the
    run that was killed, else ``default_partitions``). Returns the run's record in the manifest,
    with ``added`` false where the index held it already."""
    if not shards:
        raise DedupIndexError(f"run {run['name']} has no dedup signatures to add; run it with dedup enabled")
    settings = index_settings(read_params(shards[0].signatures))
    if partitions is None and index.pending(run["key"]).exists():
        partitions = read_json(index.pending(run["key"])).get("partitions")
    manifest = index.manifest()
    if manifest is None:
        _check_new_folder(index)
        manifest = new_manifest(settings, partitions or default_partitions)
    check_settings(manifest, settings, f"run {run['name']}")
    held = next((r for r in manifest["runs"] if r["key"] == run["key"]), None)
    if held is not None:
        if index.pending(run["key"]).exists():  # published, killed before the plan was cleared
            index.pending(run["key"]).unlink()
        return {**held, "added": False}
    plan = _plan(index, run["key"], manifest["shards"], len(shards), manifest["partitions"])
    spans = [range(lo, min(lo + SHARDS_PER_BLOCK, len(shards))) for lo in range(0, len(shards), SHARDS_PER_BLOCK)]
    jobs = [
        BlockJob(index, run["key"], plan["first"] + span.start, tuple(shards[s] for s in span), manifest["partitions"])
        for span in spans
    ]
    docs = sum(run_units("index add", add_block, jobs))
    record = {
        **run,
        "first_shard": plan["first"],
        "shards": len(shards),
        "blocks": [j.first for j in jobs],
        "docs": docs,
    }
    manifest = {**manifest, "runs": [*manifest["runs"], record]}
    manifest["docs"] += docs
    manifest["shards"] += len(shards)
    write_json(manifest, index.manifest_path)  # published: from here on, readers see the run
    index.pending(run["key"]).unlink()
    return {**record, "added": True}


# --- what a run's dedup reads ---------------------------------------------------------------------


@dataclass(frozen=True)
class IndexView:
    """What a run's dedup reads of an index, from its manifest once (picklable, handed to units):
    the band files of each partition, and each index shard's signature file and run."""

    root: AnyPath
    partitions: int
    band_files: tuple[tuple[AnyPath, ...], ...]
    signature_files: tuple[AnyPath, ...]
    run_of_shard: tuple[str, ...]
    runs: tuple[str, ...]
    docs: int
    url: bool = False  # the band files hold URL keys, the signature files url_hash

    @classmethod
    def of(cls, index: DedupIndex, manifest: dict) -> IndexView:
        runs = manifest["runs"]
        bands = tuple(
            tuple(index.band_file(p, r["key"], first) for r in runs for first in r["blocks"])
            for p in range(manifest["partitions"])
        )
        shards = [
            (index.signatures(r["key"], r["first_shard"] + i), r["name"]) for r in runs for i in range(r["shards"])
        ]
        return cls(
            index.root,
            manifest["partitions"],
            bands,
            tuple(s for s, _ in shards),
            tuple(n for _, n in shards),
            tuple(r["key"] for r in runs),
            manifest["docs"],
            bool(manifest["settings"].get("url", False)),
        )

    def signatures_of(self, docs: np.ndarray) -> list[AnyPath]:
        """The signature files of the index shards that hold ``docs`` (index document numbers)."""
        return [self.signature_files[int(s)] for s in np.unique(np.asarray(docs, np.int64) >> SHARD_BITS)]

    def run_names(self, docs: np.ndarray) -> list[str]:
        return [self.run_of_shard[int(s)] for s in np.asarray(docs, np.int64) >> SHARD_BITS]
