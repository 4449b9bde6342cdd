"""The mix stage's work over the curated shards, so that no table of every document is built in one
process: each unit reads a block of shards one at a time and returns only figures that grow with
the groups (token totals, a histogram of sampling keys, the validation candidates), and the rows of
every document stay in per-shard files under ``mix/intermediate/``.

The plan is the one :mod:`pipeline.mix.plan` defines over the whole pool, computed in pieces:

* groups: the ``min_share`` merge needs each group's share of the tokens, so the scan returns the
  tokens of each group as named by ``group_by`` and ``merge``, and the caller decides which go to
  ``other`` (:func:`pipeline.mix.plan.small_groups`);
* the validation split: a document's side depends on its id alone but for the per-group cap, and
  the cap keeps the held-out documents of smallest hash, so each block returns its own smallest
  ``validation_max_docs`` per group and the caller caps their union
  (:func:`pipeline.mix.plan.split_validation` at both levels);
* the sample plan: a group's documents are taken in hash order while the running total stays
  within its remainder, which takes a prefix of that order. The blocks return each group's tokens
  by the top :data:`BUCKET_BITS` bits of the hash; the caller finds the one bucket where the
  running total passes the remainder, fetches that bucket's documents, and applies
  :func:`pipeline.mix.plan.sample_plan` to them alone (every earlier bucket is taken, every later
  one is not);
* the writing order: copies of documents are routed by the top bits of their order hash into
  key ranges of at most :data:`RANGE_ROWS` documents; one unit per group and split sorts its ranges
  in order and cuts them into output shards, carrying the open shard from range to range. Memory
  is bounded by a range.

Every function here returns the same files and figures as the whole-table computation (the
stage's tests compare the two).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import LICENCE, MIX_CONTAMINATED, MIX_NEAR_ID, MIX_RULE
from pipeline.formats.hashing import seeded_id_hash
from pipeline.formats.ledger import add_counts
from pipeline.io.storage import empty_table, parquet_file, read_parquet, read_table, scan_parquet
from pipeline.io.writer import parquet_stream, write_parquet
from pipeline.mix.plan import SALT_SAMPLE, assign_groups, sample_plan, split_validation
from pipeline.mix.rehydrate import copies_by_cluster_size

# Salt of the order in which a group's documents are written (copy k of an upsampled document
# uses salt + k, so the copies of one document land far apart).
SALT_ORDER = SALT_SAMPLE ^ 0x4F52444552  # "ORDER"
# Sampling keys are counted in 2^16 buckets per group: a unit returns at most that many rows per
# group, and the bucket the caller resolves holds about 1/65,536 of a group's documents.
BUCKET_BITS = 16
# Rows per row group of the routed copies (a shard's copies are sorted by group, copy and range, so
# a range skips the row groups whose statistics cannot hold it).
COPY_ROW_GROUP = 1 << 16
# At most this many copies in one key range of the writing order (the memory of an ordering unit).
RANGE_ROWS = 1 << 20
# Rows per row group of the files written here and of documents.parquet and plan.parquet (Arrow's
# default for a whole table, so that the files are the same as a table written at once).
ROW_GROUP_ROWS = 1 << 20
COPY_SCHEMA = {
    "group": pl.String,
    "copy": pl.Int32,
    "range": pl.Int32,
    "key": pl.UInt64,
    "id": pl.String,
    "tokens": pl.Int64,
    "bytes": pl.Int64,
    "shard": pl.Int32,
    "row": pl.Int64,
}
PLAN_SCHEMA = pa.schema(
    [("id", pa.large_string()), ("group", pa.large_string()), ("tokens", pa.int64()), ("repeats", pa.int64())]
)
HISTOGRAM_SCHEMA = {"group": pl.String, "bucket": pl.Int64, "tokens": pl.Int64, "documents": pl.Int64}
SPLITS = ("train", "validation", "contaminated", "excluded")


def shard_file_name(shard: int) -> str:
    return f"shard-{shard:05d}.parquet"


# ---------------------------------------------------------------------------------------------
# Scan and groups


def group_documents(scan: pl.DataFrame, by: Sequence[str], merge: Mapping[str, str] | None) -> pl.Series:
    """Each document's group as ``group_by`` and ``merge`` name it (before the ``min_share`` merge,
    which needs the whole pool's totals)."""
    try:
        return assign_groups(scan, by, merge)
    except ValueError as error:
        said = str(error)  # named_groups names the setting (mix merge) itself
        raise ConfigError(said if said.startswith("mix ") else f"mix.group_by: {said}") from None


def group_tokens(frame: pl.DataFrame, group: str = "group") -> dict[str, int]:
    counted = frame.group_by(group).agg(pl.col("tokens").sum())
    return dict(zip(counted[group].to_list(), (int(v) for v in counted["tokens"].to_list())))


# ---------------------------------------------------------------------------------------------
# The validation split


@dataclass(frozen=True, kw_only=True)
class SplitJob:
    """Unit ``unit``: the validation candidates of a block of shards (their ``scans``, groups
    ``renamed``, the ``excluded`` ids apart) under the split's settings."""

    unit: str
    scans: list[Path]
    renamed: Mapping[str, str]
    excluded: pl.Series
    fraction: float
    max_docs: int | None
    seed: int
    min_docs: int = 0


@dataclass(frozen=True)
class Candidates:
    """A block's validation candidates (``id, group, shard``) and its documents per group that the
    split chooses from."""

    candidates: pl.DataFrame
    documents: dict[str, int]


def split_candidates(job: SplitJob) -> Candidates:
    """``id, group, shard`` of the documents of a block of shards that can be in the validation set
    (per group, those the fraction holds out up to the cap and the ``min_docs`` of smallest hash,
    over the block so far; the caller splits their union the same way, knowing the groups' sizes),
    and the documents per group that the split chooses from (the excluded ones apart)."""
    found = pl.DataFrame(schema={"id": pl.String, "group": pl.String, "shard": pl.Int32})
    documents: dict[str, int] = {}
    for path in job.scans:
        scan = read_parquet(path, columns=["id", "group", "shard"]).with_columns(pl.col("group").replace(job.renamed))
        scan = scan.filter(~pl.col("id").is_in(job.excluded.implode()))
        for group, count in scan.group_by("group").len().iter_rows():
            documents[group] = documents.get(group, 0) + count
        scan = pl.concat([found, scan])
        # sizes={}: a block does not know its groups' sizes in the pool, so it keeps every minimum
        _, held = split_validation(scan, job.fraction, job.max_docs, job.seed, min_docs=job.min_docs, sizes={})
        found = scan.filter(pl.col("id").is_in(held.implode()))
    return Candidates(found, documents)


@dataclass(frozen=True)
class TextsJob:
    """Unit ``unit``: the texts of the documents of a block of curated shards (``docs_paths``)
    whose id is in ``ids``."""

    unit: str
    docs_paths: list[Path]
    ids: pl.Series


def block_texts(job: TextsJob) -> pl.DataFrame:
    """``id, text`` of the job's documents."""
    found = [pl.DataFrame(schema={"id": pl.String, "text": pl.String})]
    for path in job.docs_paths:
        found.append(read_parquet(path, columns=["id", "text"]).filter(pl.col("id").is_in(job.ids.implode())))
    return pl.concat(found)


# ---------------------------------------------------------------------------------------------
# Each document's side


def _bucket(keys: np.ndarray) -> np.ndarray:
    return (keys >> np.uint64(64 - BUCKET_BITS)).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class SidesJob:
    """Unit ``unit``: the sides of the documents of a block of shards (their ``scans``, and the
    ``pools`` files to write), by their groups ``renamed``, the ``causes`` that took documents out
    and the ``validation`` ids; sampling keys seeded by ``seed``. With ``rehydrate`` (bins, max
    copies; pipeline.mix.rehydrate), each document's copies by the size of its duplicate cluster,
    which ``cluster_sizes`` gives for a column of ids."""

    unit: str
    scans: list[Path]
    pools: list[Path]
    renamed: Mapping[str, str]
    causes: pl.DataFrame
    validation: pl.Series
    seed: int
    rehydrate: tuple[Mapping[int, int] | None, int] | None = None
    cluster_sizes: Callable[[pl.Series], pl.Series] | None = None


@dataclass(frozen=True)
class Sides:
    """A block's ``counts`` (documents per side and rule, figures per group and licence, tokens in:
    pipeline.mix.figures.side_counts sums them), its training documents' sampling keys by group
    (HISTOGRAM_SCHEMA) and its ``removed`` documents (None: a block of no shard)."""

    counts: dict
    histogram: pl.DataFrame
    removed: pl.DataFrame | None


def _block_copies(job: SidesJob) -> pl.DataFrame | None:
    """``id, copies`` of the block's documents under re-hydration (None without): the clusters
    table is read once for the block."""
    if job.rehydrate is None:
        return None
    ids = pl.concat([pl.Series("id", [], dtype=pl.String), *(read_parquet(p, columns=["id"])["id"] for p in job.scans)])
    bins, most = job.rehydrate
    copies = copies_by_cluster_size(job.cluster_sizes(ids).to_numpy(), bins, most)
    return pl.DataFrame({"id": ids, "copies": copies}, schema={"id": pl.String, "copies": pl.Int64})


def _copies(docs: pl.DataFrame, block: pl.DataFrame | None) -> pl.Series:
    """Each document's copies in the re-hydrated pool (1 without re-hydration)."""
    if block is None:
        return pl.Series("copies", np.ones(docs.height, dtype=np.int64))
    return docs.select("id").join(block, on="id", how="left", maintain_order="left")["copies"].fill_null(1)


def _count_rehydration(counts: dict, docs: pl.DataFrame) -> None:
    """The training documents by copies (``rehydration``), and each group's re-hydrated tokens."""
    train = docs.filter(pl.col("split") == "train")
    by_copies = train.group_by("copies").agg(documents=pl.len(), tokens=pl.col("tokens").sum())
    for copies, documents, tokens in by_copies.iter_rows():
        add_counts(counts, {"rehydration": {str(copies): {"documents": documents, "tokens": tokens}}})
    per_group = train.group_by("group", "copies").agg(
        documents=pl.len(), tokens=(pl.col("tokens") * pl.col("copies")).sum()
    )
    for group, copies, documents, tokens in per_group.iter_rows():
        figures = {"rehydrated_tokens": tokens, "by_copies": {str(copies): documents}}
        add_counts(counts["groups"], {group: {"train": figures}})


def shard_sides(job: SidesJob) -> Sides:
    """Each document's final group and side (train, validation, contaminated, excluded), the rule
    and the text that took it out, written per shard (the rows of ``documents.parquet``, with the
    shard, row, sampling key and copies); return the block's counts, its removed documents and the
    histogram of its training documents' sampling keys by group (tokens times copies)."""
    counts: dict = {"splits": dict.fromkeys(SPLITS, 0), "rules": {}, "groups": {}, "licences": {}, "tokens_in": 0}
    removed, histogram = [], pl.DataFrame(schema=HISTOGRAM_SCHEMA)
    block = _block_copies(job)
    for scan_path, pool_path in zip(job.scans, job.pools):
        docs = read_parquet(scan_path).with_columns(pl.col("group").replace(job.renamed))
        cause = job.causes.filter(pl.col("id").is_in(docs["id"].implode()))
        docs = docs.with_columns(
            split=pl.when(pl.col("id").is_in(cause.filter(pl.col("rule") != MIX_CONTAMINATED)["id"].implode()))
            .then(pl.lit("excluded"))
            .when(pl.col("id").is_in(job.validation.implode()))
            .then(pl.lit("validation"))
            .when(pl.col("id").is_in(cause["id"].implode()))
            .then(pl.lit("contaminated"))
            .otherwise(pl.lit("train"))
        ).join(
            cause.select("id", pl.col("rule").alias(MIX_RULE), pl.col("reference_id").alias(MIX_NEAR_ID)),
            on="id",
            how="left",
            maintain_order="left",
        )
        keys = seeded_id_hash(docs["id"], job.seed, SALT_SAMPLE)
        docs = docs.with_columns(sample_key=pl.Series(keys, dtype=pl.UInt64), copies=_copies(docs, block))
        write_parquet(docs.to_arrow(), pool_path)
        counts["tokens_in"] += int(docs["tokens"].sum())
        add_counts(counts["splits"], dict(docs.group_by("split").len().iter_rows()))
        add_counts(
            counts["rules"], dict(docs.filter(pl.col(MIX_RULE).is_not_null()).group_by(MIX_RULE).len().iter_rows())
        )
        per_group = docs.group_by("group", "split").agg(
            documents=pl.len(), tokens=pl.col("tokens").sum(), bytes=pl.col("bytes").sum()
        )
        for group, split, documents, tokens, size in per_group.iter_rows():
            add_counts(counts["groups"], {group: {split: {"documents": documents, "tokens": tokens, "bytes": size}}})
        per_licence = docs.group_by("group", "split", LICENCE).agg(documents=pl.len(), tokens=pl.col("tokens").sum())
        for group, split, licence, documents, tokens in per_licence.iter_rows():
            add_counts(counts["licences"], {group: {split: {licence: {"documents": documents, "tokens": tokens}}}})
        if block is not None:
            _count_rehydration(counts, docs)
        removed.append(docs.filter(pl.col("split").is_in(["excluded", "contaminated"])))
        train = docs.filter(pl.col("split") == "train")
        found = train.select(
            "group",
            tokens=pl.col("tokens") * pl.col("copies"),
            bucket=pl.Series(_bucket(train["sample_key"].to_numpy()), dtype=pl.Int64),
        ).with_columns(documents=pl.lit(1, pl.Int64))
        histogram = sum_histograms([histogram, found])
    return Sides(counts, histogram, pl.concat(removed) if removed else None)


# ---------------------------------------------------------------------------------------------
# The sample plan in pieces


def sum_histograms(histograms: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Tokens and documents per (group, sampling-key bucket), summed over ``histograms``."""
    return (
        pl.concat(
            [
                pl.DataFrame(schema=HISTOGRAM_SCHEMA),
                *(h.select(list(HISTOGRAM_SCHEMA)).cast(HISTOGRAM_SCHEMA) for h in histograms),
            ]
        )
        .group_by("group", "bucket")
        .agg(pl.col("tokens").sum(), pl.col("documents").sum())
    )


def crossing_buckets(histogram: pl.DataFrame, rests: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """For each group with a remainder ``rests[group] > 0``: the bucket where the running total
    of tokens in hash order first passes the remainder, and the tokens of the buckets before it.
    (The remainder is below the group's tokens, so that bucket exists.)"""
    found = {}
    for group, rest in rests.items():
        if rest <= 0:
            continue
        rows = histogram.filter(pl.col("group") == group).sort("bucket")
        after = np.cumsum(rows["tokens"].to_numpy())
        at = int(np.searchsorted(after, rest, side="right"))
        if at >= len(after):
            raise ValueError(
                f"sample plan: group {group!r} has {int(after[-1]) if len(after) else 0} tokens, "
                f"fewer than its remainder {rest}"
            )
        found[group] = (int(rows["bucket"][at]), int(after[at - 1]) if at else 0)
    return found


@dataclass(frozen=True)
class BucketJob:
    """Unit ``unit``: the training documents of a block of shards (their ``pools`` files) in the
    ``wanted`` (group, sampling-key bucket) pairs."""

    unit: str
    pools: list[Path]
    wanted: pl.DataFrame


def bucket_documents(job: BucketJob) -> pl.DataFrame:
    """``id, group, tokens, bucket``: the job's documents (tokens times copies, as the plan counts
    them)."""
    found = []
    for path in job.pools:
        docs = read_parquet(path, columns=["id", "group", "tokens", "split", "sample_key", "copies"])
        docs = docs.filter(pl.col("split") == "train").with_columns(pl.col("tokens") * pl.col("copies"))
        docs = docs.with_columns(bucket=pl.Series(_bucket(docs["sample_key"].to_numpy()), dtype=pl.Int64))
        found.append(
            docs.join(job.wanted, on=["group", "bucket"], how="semi").select("id", "group", "tokens", "bucket")
        )
    schema = {"id": pl.String, "group": pl.String, "tokens": pl.Int64, "bucket": pl.Int64}
    return pl.concat([pl.DataFrame(schema=schema), *found])


def partial_layers(
    taken: Mapping[str, int], sizes: Mapping[str, int], histogram: pl.DataFrame, fetched: pl.DataFrame, seed: int
) -> dict[str, dict]:
    """Per group, what :func:`pipeline.mix.plan.sample_plan` gives it: ``full`` whole epochs, then
    every document of sampling bucket below ``bucket`` and those of ``ids`` in that bucket (none when
    ``bucket`` is None); with the tokens and documents taken, the group's training documents and
    those of the partial layer. ``fetched`` holds the documents of each crossing bucket
    (:func:`bucket_documents`)."""
    layers = {}
    fulls = {group: (taken.get(group, 0) // sizes[group] if sizes[group] else 0) for group in sizes}
    rests = {group: taken.get(group, 0) - fulls[group] * sizes[group] for group in sizes}
    crossing = crossing_buckets(histogram, rests)
    for group, size in sizes.items():
        rows = histogram.filter(pl.col("group") == group)
        documents = int(rows["documents"].sum())
        layer = {"full": fulls[group], "bucket": None, "ids": [], "tokens": fulls[group] * size}
        layer["group_documents"] = documents
        layer["documents"] = documents if fulls[group] else 0
        if group in crossing:
            bucket, before = crossing[group]
            inside = fetched.filter((pl.col("group") == group) & (pl.col("bucket") == bucket))
            plan = sample_plan(inside, {group: rests[group] - before}, seed)
            chosen = inside.filter(plan["repeats"] > 0)
            below = rows.filter(pl.col("bucket") < bucket)
            layer.update(
                bucket=bucket, ids=chosen["id"].to_list(), tokens=layer["tokens"] + before + int(chosen["tokens"].sum())
            )
            if not fulls[group]:
                layer["documents"] = int(below["documents"].sum()) + chosen.height
            layer["partial_documents"] = int(below["documents"].sum()) + chosen.height
        layers[group] = layer
    return layers


def repeats_of(docs: pl.DataFrame, layers: Mapping[str, dict] | None) -> pl.Series:
    """Repeats of each training document of ``docs`` (columns group, sample_key, id, and copies
    under re-hydration) under :func:`partial_layers`' plan (all 0 without one): the layers it is
    in times its copies."""
    if not layers:
        return pl.Series("repeats", np.zeros(docs.height, dtype=np.int64))
    bucket = _bucket(docs["sample_key"].to_numpy())
    repeats = np.zeros(docs.height, dtype=np.int64)
    groups = docs["group"].to_numpy()
    ids = docs["id"]
    for group, layer in layers.items():
        mine = groups == group
        if not mine.any():
            continue
        extra = np.zeros(docs.height, dtype=bool)
        if layer["bucket"] is not None:
            extra = (bucket < layer["bucket"]) | (
                (bucket == layer["bucket"]) & ids.is_in(pl.Series(layer["ids"], dtype=pl.String).implode()).to_numpy()
            )
        repeats[mine] = layer["full"] + extra[mine]
    if "copies" in docs.columns:
        repeats *= docs["copies"].to_numpy()
    return pl.Series("repeats", repeats)


# ---------------------------------------------------------------------------------------------
# The writing order


def range_count(documents: int) -> int:
    return max(1, -(-documents // RANGE_ROWS))


def _ranges(keys: np.ndarray, count: int) -> np.ndarray:
    """The key range of each key among ``count`` equal ranges of the hash space (monotone in the
    key, so ranges in order hold the keys in order)."""
    if count == 1:
        return np.zeros(len(keys), dtype=np.int32)
    scaled = np.floor((keys >> np.uint64(11)).astype(np.float64) * (count * 2.0**-53))
    return np.minimum(scaled, count - 1).astype(np.int32)


def copies_of(docs: pl.DataFrame, seed: int, ranges: Mapping[tuple[str, int], int]) -> pl.DataFrame:
    """Every copy of every document of ``docs`` (columns of COPY_SCHEMA but copy, range and key, and
    ``repeats``), with its order key and key range (``ranges[(group, copy)]`` of them)."""
    copies = []
    most = int(docs["repeats"].max() or 0) if docs.height else 0
    for copy in range(most):
        chosen = docs.filter(pl.col("repeats") > copy)
        keys = seeded_id_hash(chosen["id"], seed, SALT_ORDER + copy)
        counts = chosen["group"].replace_strict(
            {g: n for (g, c), n in ranges.items() if c == copy}, default=1, return_dtype=pl.Int64
        )
        where = np.zeros(chosen.height, dtype=np.int32)
        for count in set(counts.to_list()):
            mine = (counts == count).to_numpy()
            where[mine] = _ranges(keys[mine], count)
        copies.append(
            chosen.with_columns(
                copy=pl.lit(copy, pl.Int32),
                range=pl.Series(where, dtype=pl.Int32),
                key=pl.Series(keys, dtype=pl.UInt64),
            )
        )
    if not copies:
        return pl.DataFrame(schema=COPY_SCHEMA)
    return pl.concat(copies).select(list(COPY_SCHEMA)).sort(["group", "copy", "range", "key", "id"])


@dataclass(frozen=True, kw_only=True)
class RouteJob:
    """Unit ``unit``: the copies of a block of shards (their ``pools`` files) under each mixture's
    ``plans`` (its layers per group), routed into the mixture's key ``ranges`` (orders seeded by
    ``seed``); each mixture's plan rows per shard go to ``plan_paths[mixture]``, its copies to
    ``copy_paths[mixture]``, and the validation side's to ``validation_path`` (its ranges
    ``validation_ranges``)."""

    unit: str
    pools: list[Path]
    plans: Mapping[str, Mapping[str, dict] | None]
    ranges: Mapping[str, Mapping[tuple[str, int], int]]
    seed: int
    plan_paths: Mapping[str, list[Path]]
    copy_paths: Mapping[str, Path]
    validation_path: Path
    validation_ranges: Mapping[tuple[str, int], int]


def route_copies(job: RouteJob) -> dict:
    """For a block of shards: each mixture's plan rows (``id, group, tokens, repeats`` of every
    training document, per shard) and every copy to write, routed by key range into one file per
    mixture, and the validation documents into one file (the same for every mixture). Returns
    tokens and documents taken per mixture and group, and per licence within each group
    (``licences``)."""
    taken: dict = {}
    schema = pl.DataFrame(schema=COPY_SCHEMA).to_arrow().schema
    with ExitStack() as stack:
        # Each shard's copies, sorted, go on as row groups of their own: the unit holds one shard,
        # and a key range reads only the row groups whose statistics can hold it.
        sinks = {name: stack.enter_context(parquet_stream(job.copy_paths[name], schema)) for name in job.plans}
        held_sink = stack.enter_context(parquet_stream(job.validation_path, schema))
        for number, path in enumerate(job.pools):
            docs = read_parquet(path)
            train = docs.filter(pl.col("split") == "train")
            for name, layers in job.plans.items():
                planned = train.with_columns(repeats_of(train, layers))
                write_parquet(
                    planned.select("id", "group", "tokens", "repeats").to_arrow(), job.plan_paths[name][number]
                )
                used = planned.group_by("group", LICENCE).agg(
                    tokens=(pl.col("tokens") * pl.col("repeats")).sum(), documents=(pl.col("repeats") > 0).sum()
                )
                for group, licence, tokens, documents in used.iter_rows():
                    figures = {"tokens": tokens, "documents": documents}
                    add_counts(taken, {name: {group: {**figures, "licences": {licence: figures}}}})
                chosen = planned.filter(pl.col("repeats") > 0)
                _write_copies(sinks[name], copies_of(chosen, job.seed, job.ranges[name]))
            held = docs.filter(pl.col("split") == "validation").select(
                "id", "group", "tokens", "bytes", "shard", "row", repeats=pl.lit(1, pl.Int64)
            )
            _write_copies(held_sink, copies_of(held, job.seed, job.validation_ranges))
    return taken


def _write_copies(sink: pq.ParquetWriter, copies: pl.DataFrame) -> None:
    if copies.height:
        sink.write_table(copies.to_arrow(), row_group_size=COPY_ROW_GROUP)


@dataclass(frozen=True, kw_only=True)
class CutJob:
    """Unit ``unit``: group ``group``'s copies of one split, ``layers`` ``(copy, key ranges)`` in
    order, from the ``routed`` files (:func:`route_copies`), ordered into the folder ``ordered``
    and cut into output shards of at most ``limit`` tokens."""

    unit: str
    group: str
    layers: list[tuple[int, int]]
    routed: list[Path]
    ordered: Path
    limit: int


def cut_ranges(job: CutJob) -> list[dict]:
    """One group's copies of one split in writing order (copy 0 of every document, then copy 1,
    ...; within a copy by order key, then id), cut into output shards of at most ``limit`` tokens
    (a document is never cut; one longer than ``limit`` makes a shard of its own). Each range is
    read, sorted and written to the ``ordered`` folder in turn; the shard still open at its end
    goes on into the next. Returns each output shard: its pieces ``(ordered file, first row, end
    row)``, documents, tokens and bytes."""
    group, routed, ordered, limit = job.group, job.routed, job.ordered, job.limit
    shards: list[dict] = []
    current: dict = {"pieces": [], "documents": 0, "tokens": 0, "bytes": 0}
    for copy, count in job.layers:
        for where in range(count):
            rows = (
                scan_parquet(routed)
                .filter((pl.col("group") == group) & (pl.col("copy") == copy) & (pl.col("range") == where))
                .select("key", "id", "tokens", "bytes", "shard", "row")
                .collect()
                .sort(["key", "id"])
            )
            if not rows.height:
                continue
            path = ordered / f"copy-{copy:03d}-range-{where:05d}.parquet"
            write_parquet(rows.select("shard", "row").to_arrow(), path)
            tokens, sizes = rows["tokens"].to_numpy(), rows["bytes"].to_numpy()
            ends = np.cumsum(tokens)
            start = 0
            while start < len(tokens):
                before = int(ends[start - 1]) if start else 0
                stop = int(np.searchsorted(ends, before + limit - current["tokens"], side="right"))
                if stop == start:
                    if current["documents"]:  # the next document does not fit: close the open shard
                        shards.append(current)
                        current = {"pieces": [], "documents": 0, "tokens": 0, "bytes": 0}
                        continue
                    stop = start + 1  # an empty shard takes one document, however long
                current["pieces"].append((str(path), start, stop))
                current["documents"] += stop - start
                current["tokens"] += int(ends[stop - 1]) - before
                current["bytes"] += int(sizes[start:stop].sum())
                if stop < len(tokens):
                    shards.append(current)
                    current = {"pieces": [], "documents": 0, "tokens": 0, "bytes": 0}
                start = stop
    if current["documents"]:
        shards.append(current)
    return shards


def piece_rows(pieces: Sequence[tuple[str, int, int]]) -> pl.DataFrame:
    """``shard, row`` of an output shard's documents, in order, from its ordered pieces."""
    return pl.concat([read_parquet(path, columns=["shard", "row"]).slice(lo, hi - lo) for path, lo, hi in pieces])


@dataclass(frozen=True, kw_only=True)
class ConcatJob:
    """Unit ``unit``: the rows of ``pieces`` in order (the columns of ``schema``) into ``out``."""

    unit: str
    pieces: list[Path]
    schema: pa.Schema
    out: Path


def concat_files(job: ConcatJob) -> int:
    """The job's rows as one Parquet file, written a row group at a time, so that it is the file
    one table of those rows would give; returns the rows written."""
    pieces, schema, out = job.pieces, job.schema, job.out
    columns = schema.names
    buffer: list[pa.Table] = []
    buffered = written = 0
    with parquet_stream(out, _schema(pieces[0], columns) if pieces else schema) as sink:
        for path in pieces:
            buffer.append(read_table(path, columns=columns))
            buffered += buffer[-1].num_rows
            while buffered >= ROW_GROUP_ROWS:
                whole = pa.concat_tables(buffer).combine_chunks()
                sink.write_table(whole.slice(0, ROW_GROUP_ROWS))
                buffer, buffered = [whole.slice(ROW_GROUP_ROWS)], buffered - ROW_GROUP_ROWS
                written += ROW_GROUP_ROWS
        if buffered or not written:
            sink.write_table(pa.concat_tables(buffer).combine_chunks() if buffer else empty_table(schema))
            written += buffered
    return written


def _schema(path: Path, columns: list[str] | None) -> pa.Schema:
    schema = parquet_file(path).schema_arrow
    if columns is None:
        return schema
    return pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)
