"""Where each mixture's copies go: the plan's last layer per group (the one sampling bucket where
the group's remainder runs out, resolved document by document), the key ranges the copies are
routed into, the writing order of each split and group, and the output shards gathered from it.
pipeline.mix.shards explains the ranges and why the result equals the whole-pool plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.formats.ledger import LedgerError
from pipeline.formats.mixture import shard_file
from pipeline.formats.tokens import gather_token_shard
from pipeline.io.writer import write_json
from pipeline.mix.plan import EpochCaps
from pipeline.mix.shards import crossing_buckets, partial_layers, piece_rows, range_count

# A mixture's epoch caps and its training tokens per group (caps None: nothing to take).
Planned = tuple[EpochCaps | None, dict[str, int]]
BUCKET_DOCUMENTS_SCHEMA = {"id": pl.String, "group": pl.String, "tokens": pl.Int64, "bucket": pl.Int64}


def crossing_requests(planned: Mapping[str, Planned], histogram: pl.DataFrame) -> pl.DataFrame:
    """``group, bucket``: the sampling buckets where a group's remainder runs out, in any mixture
    (their documents are fetched by pipeline.mix.shards.bucket_documents; none when no mixture
    takes part of a group)."""
    wanted = set()
    for caps, sizes in planned.values():
        if caps is not None:
            rests = {g: caps.tokens_taken[g] % sizes[g] for g in sizes}
            wanted |= {(g, bucket) for g, (bucket, _) in crossing_buckets(histogram, rests).items()}
    return pl.DataFrame(sorted(wanted), schema={"group": pl.String, "bucket": pl.Int64}, orient="row")


def mixture_layers(
    planned: Mapping[str, Planned],
    histogram: pl.DataFrame,
    fetched: pl.DataFrame,
    seed: int,
    copies: Mapping[str, int] | None = None,
) -> dict[str, dict | None]:
    """Each mixture's layers per group (pipeline.mix.shards.partial_layers) from its epoch caps and
    the documents of the crossing buckets (``fetched``: BUCKET_DOCUMENTS_SCHEMA); None for a
    mixture with nothing to take. ``copies``: the most copies of a training document per group
    under re-hydration (pipeline.mix.rehydrate), kept in each layer as ``copies``."""
    layers: dict[str, dict | None] = {}
    for name, (caps, sizes) in planned.items():
        layers[name] = None if caps is None else partial_layers(caps.tokens_taken, sizes, histogram, fetched, seed)
        for group, layer in (layers[name] or {}).items() if copies else ():
            layer["copies"] = copies.get(group, 1)
    return layers


def layer_ranges(layers: Mapping[str, dict]) -> dict[tuple[str, int], int]:
    """Key ranges per (group, copy) of a mixture's training copies. Under re-hydration a document
    of ``c`` copies in ``k`` layers has copies 0 to ``k * c - 1``: each group has ranges for as
    many as its most copies allow, each sized by the group's documents (those it holds at most)."""
    ranges = {}
    for group, layer in layers.items():
        most = layer.get("copies", 1)
        if most > 1:
            layers_taken = layer["full"] + (layer["bucket"] is not None)
            ranges.update({(group, copy): range_count(layer["group_documents"]) for copy in range(layers_taken * most)})
            continue
        for copy in range(layer["full"]):
            ranges[(group, copy)] = range_count(layer["group_documents"])
        if layer["bucket"] is not None:
            ranges[(group, layer["full"])] = range_count(layer["partial_documents"])
    return ranges


@dataclass(frozen=True)
class KeyRanges:
    """The key ranges the copies are routed into: ``train`` (per mixture, per (group, copy) of its
    training copies), ``validation`` (per (group, 0) of the validation side, which every mixture
    shares) and ``held`` (the validation side's documents per group)."""

    train: dict[str, dict[tuple[str, int], int]]
    validation: dict[tuple[str, int], int]
    held: dict[str, int]


def key_ranges(layers: Mapping[str, dict | None], groups: Mapping[str, Mapping]) -> KeyRanges:
    """The key ranges of every mixture's layers and of the validation side (``groups``: documents
    per group and side, pipeline.mix.shards.shard_sides)."""
    held = {g: sides["validation"]["documents"] for g, sides in groups.items() if "validation" in sides}
    return KeyRanges(
        train={name: layer_ranges(layer) if layer else {} for name, layer in layers.items()},
        validation={(g, 0): range_count(n) for g, n in held.items()},
        held=held,
    )


def check_taken(taken: Mapping, layers: Mapping[str, dict | None]) -> None:
    """The copies routed (``taken``: per mixture and group, summed over the routing units), checked
    against each mixture's plan, group by group (LedgerError: a bug)."""
    for name, layer in layers.items():
        for group, figures in (layer or {}).items():
            counted = taken.get(name, {}).get(group, {"tokens": 0, "documents": 0})
            if (counted["tokens"], counted["documents"]) != (figures["tokens"], figures["documents"]):
                raise LedgerError(
                    f"stage mix: mixture {name}, group {group}: the plan takes {figures['tokens']} tokens of "
                    f"{figures['documents']} documents, the shards {counted['tokens']} of {counted['documents']}"
                )


def writing_orders(ranges: KeyRanges) -> list[tuple[str | None, str, list[tuple[int, int]]]]:
    """``(mixture, group, [(copy, ranges), ...])`` of each split and group to cut into output shards
    (pipeline.mix.shards.cut_ranges): each mixture's training groups, then the validation side's
    (mixture None, shared by all)."""
    orders: list[tuple[str | None, str, list[tuple[int, int]]]] = [
        (name, group, [(copy, count) for (g, copy), count in sorted(train.items()) if g == group])
        for name, train in ranges.train.items()
        for group in sorted({g for g, _ in train})
    ]
    return orders + [(None, group, [(0, ranges.validation[(group, 0)])]) for group in sorted(ranges.held)]


def shard_jobs(shards: Mapping[str, Mapping[str, Sequence[dict]]]) -> list[tuple[str, str, dict]]:
    """``(group, file, shard)`` of each output shard of a mixture (``shards[split][group]``)."""
    return [
        (group, shard_file(split, group, number), shard)
        for split in ("train", "validation")
        for group in sorted(shards[split])
        for number, shard in enumerate(shards[split][group])
    ]


@dataclass(frozen=True, kw_only=True)
class WriteJob:
    """Output shard ``out_path`` of ``group`` (part record ``record``, named ``unit``), gathered
    from its ordered ``pieces`` (pipeline.mix.shards.cut_ranges) of the pool's ``token_paths``."""

    unit: str
    pieces: list[tuple[str, int, int]]
    token_paths: list[Path]
    out_path: Path
    group: str
    record: Path


def write_shard(job: WriteJob) -> dict:
    """Gather one output shard from its ordered pieces, then write its part record (a shard with a
    record is complete, so a run killed midway redoes only the shards without one); return the
    record."""
    rows = piece_rows(job.pieces)
    entry = {"unit": job.unit, **gather_token_shard(_pieces(rows, job.token_paths), job.out_path, job.group)}
    write_json(entry, job.record)
    return entry


def _pieces(rows: pl.DataFrame, token_paths: list[Path]) -> list[tuple[Path, np.ndarray]]:
    """Runs of rows from one source shard, in order: ``(token shard path, row numbers)``."""
    shard = rows["shard"].to_numpy()
    row = rows["row"].to_numpy()
    breaks = np.flatnonzero(np.diff(shard)) + 1
    return [
        (token_paths[int(shard[lo])], row[lo:hi])
        for lo, hi in zip([0, *breaks.tolist()], [*breaks.tolist(), len(shard)])
    ]
