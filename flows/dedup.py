"""The `dedup` and `lines` stages as Prefect flows: tasks per shard and per partition, staged
through files.

    dedup:
    signatures + band keys      one task per input shard    dedup/intermediate/signatures, .../bands
    candidates, exact Jaccard   one task per partition      dedup/intermediate/edges
    components, keep rule       one task                    dedup/clusters.parquet
    removal                     one task per input shard    dedup/docs, dedup/removed

    lines (repeated-line removal, after dedup):
    line counts                 one task per input shard    lines/intermediate/counts
    lines over max_docs         one task per partition      lines/intermediate/frequent
    cut them                    one task per input shard    lines/docs (and removed: documents left blank)

Memory is bounded by a shard or a partition, never the corpus. The intermediate folder is reused when
it was made from the same input shards (by sha256) and settings, so a re-run only redoes what
changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from flows.artifacts import publish_stage
from flows.progress import gather_parts
from flows.stages import finish_stage
from pipeline.core.config import RunConfig
from pipeline.core.schema import RunLayout, StageDir
from pipeline.dedup.clusters import ShingleLookup, clusters_from_edges, dedup_step, verify_partition
from pipeline.dedup.lines import RepeatedLines, frequent_lines, line_counts_for_shard
from pipeline.dedup.lsh import SHARD_BITS, partition_band_keys, signatures_for_shard
from pipeline.dedup.minhash import MinHashParams
from pipeline.io.storage import read_parquet, scan_parquet
from pipeline.io.writer import read_json, remove_temporaries, write_json, write_parquet
from pipeline.stages.registry import scoped_filters
from pipeline.stages.shard import mark_work_done, reusable_work, shard_unit

STAGE = "dedup"
LINES_STAGE = "lines"
LARGEST_CLUSTERS = 10
EXAMPLE_CHARS = 300


@task(name="dedup-signatures", cache_policy=NO_CACHE, task_run_name="signatures-{shard}")
def signatures_task(in_path: Path, shard: int, work: Path, params: MinHashParams, partitions: int) -> dict:
    signatures = work / "signatures" / f"shard-{shard:05d}.parquet"
    counts = signatures_for_shard(in_path, signatures, params, shard=shard)
    partition_band_keys([signatures], work / "bands", partitions)
    return {"unit": f"signatures-{shard:05d}", **counts}


@task(name="dedup-verify", cache_policy=NO_CACHE, task_run_name="verify-{partition}")
def verify_task(partition: int, work: Path, signatures: list[Path], threshold: float) -> dict:
    counts = verify_partition(
        work / "bands" / f"part-{partition:04d}",
        ShingleLookup(signatures),
        threshold,
        work / "edges" / f"part-{partition:04d}.parquet",
    )
    return {"unit": f"verify-{partition:04d}", **counts}


@task(name="dedup-remove", cache_policy=NO_CACHE, task_run_name="remove-{shard}")
def remove_task(in_path: Path, shard: int, stage: StageDir, clusters: Path, threshold: float, batch_docs: int) -> dict:
    # Only this shard's rows of the corpus-wide clusters table (doc = shard << SHARD_BITS | row).
    mine = (
        scan_parquet([clusters])
        .filter(pl.col("doc").is_between(shard << SHARD_BITS, ((shard + 1) << SHARD_BITS) - 1))
        .collect()
    )
    return shard_unit(STAGE, in_path, stage, dedup_step(mine, threshold, shard=shard), batch_docs)


def _sum(parts: list[dict]) -> dict:
    total: dict[str, int] = {}
    for part in parts:
        for key, value in part.items():
            if key != "unit":
                total[key] = total.get(key, 0) + value
    return total


def largest_clusters(clusters: pl.LazyFrame, inputs: list[Path], n: int = LARGEST_CLUSTERS) -> list[dict]:
    """The ``n`` largest clusters: size, the kept document and one removed one, with their text
    (read lazily: only the cluster column of the whole table, and the rows of the top clusters)."""
    top = (
        clusters.group_by("cluster")
        .agg(pl.len().alias("size"))
        .sort(["size", "cluster"], descending=[True, False])
        .head(n)
        .collect()
    )
    if top.height == 0:
        return []
    members = clusters.join(top.lazy(), on="cluster").sort("cluster", "doc").collect()
    wanted = members.group_by("cluster", maintain_order=True).agg(
        pl.col("kept_id").first(),
        pl.col("id").filter(~pl.col("kept")).first().alias("removed_id"),
        pl.col("jaccard").filter(~pl.col("kept")).min().alias("min_jaccard"),
        pl.col("size").first(),
    )
    ids = set(wanted["kept_id"].to_list()) | set(wanted["removed_id"].drop_nulls().to_list())
    texts = dict(scan_parquet(inputs).filter(pl.col("id").is_in(list(ids))).select("id", "text").collect().iter_rows())
    return [
        {
            "cluster": row["cluster"],
            "size": row["size"],
            "kept_id": row["kept_id"],
            "kept_text": texts.get(row["kept_id"], "")[:EXAMPLE_CHARS],
            "removed_id": row["removed_id"],
            "removed_text": texts.get(row["removed_id"], "")[:EXAMPLE_CHARS],
            "min_jaccard": row["min_jaccard"],
        }
        for row in wanted.sort("size", "cluster", descending=[True, False]).iter_rows(named=True)
    ]


@flow(name="dedup", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def dedup_flow(previous: str, config: RunConfig) -> dict:
    """Remove exact and near duplicates from the shards of ``previous``; return the stage's stats."""
    settings = config.dedup
    params = settings.minhash_params()
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE).make()
    remove_temporaries(stage.root)
    inputs = sorted(layout.stage(previous).docs.glob("*.parquet"))
    work = stage.root / "intermediate"
    clusters = stage.root / "clusters.parquet"

    if reusable_work(stage, inputs, settings.model_dump(mode="json")) and clusters.exists():
        finding = read_json(work / "finding.json")
    else:
        signed = gather_parts(
            "dedup signatures",
            [
                signatures_task.submit(path, shard, work, params, settings.partitions)
                for shard, path in enumerate(inputs)
            ],
        )
        signatures = sorted((work / "signatures").glob("*.parquet"))
        verified = gather_parts(
            "dedup verify",
            [verify_task.submit(p, work, signatures, settings.threshold) for p in range(settings.partitions)],
        )
        edges = sorted((work / "edges").glob("*.parquet"))
        found = clusters_from_edges(edges, ShingleLookup(signatures), settings.keep, clusters)
        finding = {**_sum(signed), **_sum(verified), **found, "bands_rows": list(params.lsh) if params.near else None}
        write_json(finding, work / "finding.json")
        mark_work_done(stage, inputs, settings.model_dump(mode="json"))

    parts = gather_parts(
        STAGE,
        [
            remove_task.submit(path, shard, stage, clusters, settings.threshold, config.batch_docs)
            for shard, path in enumerate(inputs)
        ],
    )
    return publish_stage(
        STAGE,
        finish_stage(
            STAGE,
            previous,
            config,
            parts,
            dedup=finding,
            largest_clusters=largest_clusters(scan_parquet([clusters]), inputs),
        ),
    )


@task(name="lines-count", cache_policy=NO_CACHE, task_run_name="count-{in_path.stem}")
def line_counts_task(in_path: Path, work: Path, partitions: int) -> dict:
    line_counts_for_shard(in_path, work / "counts", partitions)
    return {"unit": in_path.stem}


@task(name="lines-frequent", cache_policy=NO_CACHE, task_run_name="frequent-{partition}")
def frequent_task(partition: int, work: Path, max_docs: int) -> dict:
    frequent = frequent_lines(work / "counts" / f"part-{partition:04d}", max_docs)
    write_parquet(frequent.to_arrow(), work / "frequent" / f"part-{partition:04d}.parquet")
    return {"unit": f"frequent-{partition:04d}", "frequent_lines": frequent.height}


@task(name="lines-cut", cache_policy=NO_CACHE, task_run_name="cut-{in_path.stem}")
def cut_task(in_path: Path, stage: StageDir, frequent: Path, sources: list[str] | None, batch_docs: int) -> dict:
    hashes = read_parquet(frequent)["line_hash"].to_numpy() if frequent.exists() else np.zeros(0, np.uint64)
    step = scoped_filters([RepeatedLines(hashes)], sources, LINES_STAGE)
    return shard_unit(LINES_STAGE, in_path, stage, step, batch_docs)


@flow(name="lines", validate_parameters=False, task_runner=ThreadPoolTaskRunner(max_workers=os.cpu_count()))
def lines_flow(previous: str, config: RunConfig) -> dict:
    """Cut lines found in more than ``lines.max_docs`` documents from the shards of ``previous``."""
    settings = config.lines
    layout = RunLayout(config.run_dir)
    stage = layout.stage(LINES_STAGE).make()
    remove_temporaries(stage.root)
    inputs = sorted(layout.stage(previous).docs.glob("*.parquet"))
    work = stage.root / "intermediate"
    frequent = work / "frequent.parquet"
    scope = settings.sources
    if not (reusable_work(stage, inputs, settings.model_dump(mode="json")) and frequent.exists()):
        # Lines are counted over all documents; they are cut only from the sources in scope.
        gather_parts("lines count", [line_counts_task.submit(path, work, settings.partitions) for path in inputs])
        found = gather_parts(
            "lines frequent", [frequent_task.submit(p, work, settings.max_docs) for p in range(settings.partitions)]
        )
        tables = [read_parquet(work / "frequent" / f"part-{p:04d}.parquet") for p in range(settings.partitions)]
        write_parquet(pl.concat(tables).sort("line_hash").to_arrow(), frequent)
        write_json({"frequent_lines": sum(f["frequent_lines"] for f in found)}, work / "finding.json")
        mark_work_done(stage, inputs, settings.model_dump(mode="json"))
    parts = gather_parts(
        LINES_STAGE, [cut_task.submit(path, stage, frequent, scope, config.batch_docs) for path in inputs]
    )
    return publish_stage(
        LINES_STAGE, finish_stage(LINES_STAGE, previous, config, parts, lines=read_json(work / "finding.json"))
    )
