"""The `dedup` and `lines` stages' wiring: their units of work, in order, handed to ``run_units``.

:func:`run_dedup` finds the clusters of duplicates with :func:`pipeline.dedup.engine.find_duplicates`
(its steps and sizes there, its words in the ``pipeline.dedup`` glossary, its work folder,
``<stage>/intermediate``, laid out by :class:`pipeline.dedup.layout.DedupWork`), then removes every
clustered document that is not kept, shard by shard. :func:`run_lines` counts the lines of every
shard by partition, finds those in more than ``lines.max_docs`` documents, and cuts them.

Every list of units goes to ``run_units`` (``pipeline.stages.units``: by default one after the
other in this process; the Prefect flows in ``flows.dedup`` submit each as a task), so a stage
runs, and is tested, with or without Prefect, and writes the same files either way. The steps
per shard are short, so they run in blocks of shards (``pipeline.stages.units.in_blocks``). A work
folder made from the same input shards (by sha256) and settings is reused, so a rerun only redoes
what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import ConfigError, RunConfig
from pipeline.dedup.clusters import KeepRule, largest_clusters, removal_step, removals
from pipeline.dedup.engine import find_duplicates, fits_one_unit, partitions_for
from pipeline.dedup.index import DedupIndex, DedupIndexError, IndexView, check_settings, index_settings
from pipeline.dedup.indexed import in_index_removals, match_index
from pipeline.dedup.layout import WORK_FORMAT, DedupWork, LinesWork
from pipeline.dedup.lines import RepeatedLines, frequent_lines, line_counts_for_shard, line_partitions_for
from pipeline.dedup.lsh import SHARD_BITS
from pipeline.dedup.minhash import MinHashParams
from pipeline.filters.scope import Scope
from pipeline.formats.documents import RunLayout, StageDir
from pipeline.formats.manifest import stage_outputs
from pipeline.formats.stats import StageStats, docs_handed_over
from pipeline.io.storage import read_parquet, scan_parquet
from pipeline.io.writer import read_json, remove_temporaries, write_json, write_parquet
from pipeline.stages.shard import finish_stage, mark_work_done, reusable_work, shard_unit
from pipeline.stages.steps import scoped_filters
from pipeline.stages.units import RunUnits, in_blocks, in_process, jobs_per_block

STAGE = "dedup"
LINES_STAGE = "lines"


def _work_folder(stage: StageDir) -> Path:
    """The stage's work folder (``pipeline.stages.shard.reusable_work`` keeps its record there)."""
    return stage.root / "intermediate"


@dataclass(frozen=True)
class RemoveJob:
    """Shard ``shard`` (``in_path``) less its duplicates, by the clusters table ``clusters``."""

    in_path: Path
    shard: int
    stage: StageDir
    clusters: Path
    threshold: float
    batch_docs: int
    matches: Path | None = None  # the index matches table, with a dedup index


def remove_duplicates(job: RemoveJob) -> dict:
    """The shard's documents less its duplicates (its rows of the clusters table, and of the index
    matches table with an index, only: ``doc = shard << SHARD_BITS | row``), and its removed
    records: the stage's part record. A document matched in the index is removed as that."""
    lo, hi = job.shard << SHARD_BITS, ((job.shard + 1) << SHARD_BITS) - 1
    mine = scan_parquet([job.clusters]).filter(pl.col("doc").is_between(lo, hi)).collect()
    removal = removals(mine, job.threshold, shard=job.shard)
    if job.matches is not None:
        matched = scan_parquet([job.matches]).filter(pl.col("doc").is_between(lo, hi)).collect()
        indexed = in_index_removals(matched, job.threshold)
        removal = pl.concat([indexed, removal.join(indexed.select("id"), on="id", how="anti")])
    return shard_unit(STAGE, job.in_path, job.stage, removal_step(removal), job.batch_docs)


@dataclass(frozen=True, kw_only=True)
class FindJob:
    inputs: tuple[Path, ...]
    work: Path
    params: MinHashParams
    partitions: int
    keep: KeepRule
    clusters: Path
    most_units: int


def find_in_one_unit(job: FindJob) -> dict:
    """Every step of the finding in this unit (a corpus whose steps would each be one unit)."""
    return find_duplicates(
        job.inputs, job.work, job.params, job.partitions, job.keep, job.clusters, most_units=job.most_units
    )


def _finding(previous: str, config: RunConfig, stage: StageDir, inputs: list, run_units: RunUnits) -> dict:
    """The clusters table at ``<stage>/clusters.parquet`` and the finding's counts: reused when
    the work folder was made from the same inputs and settings, else found again."""
    settings = config.dedup
    work = DedupWork(_work_folder(stage))
    clusters = stage.root / "clusters.parquet"
    view = _index_view(settings)
    made_from = {**settings.model_dump(mode="json"), "work_format": WORK_FORMAT}
    if view is not None:  # a run added to the index since makes the finding again
        made_from["index_runs"] = list(view.runs)
    matches = _matches_path(stage)
    if reusable_work(stage, inputs, made_from) and clusters.exists() and (view is None or matches.exists()):
        return read_json(work.finding)
    matches.unlink(missing_ok=True)
    params = settings.minhash_params()
    documents = docs_handed_over(RunLayout(config.run_dir).stage(previous).stats)
    partitions = partitions_for(documents, params, settings.partitions)
    if fits_one_unit(documents, partitions, len(inputs)):
        job = FindJob(
            inputs=tuple(inputs),
            work=work.root,
            params=params,
            partitions=partitions,
            keep=settings.keep,
            clusters=clusters,
            most_units=settings.partitions,
        )
        (finding,) = run_units("dedup find", find_in_one_unit, [job])
    else:
        finding = find_duplicates(
            inputs, work.root, params, partitions, settings.keep, clusters, run_units, most_units=settings.partitions
        )
    finding["partitions"] = partitions
    if view is not None:
        finding["index"] = match_index(
            work.root,
            view,
            len(inputs),
            partitions,
            settings.threshold,
            clusters,
            matches,
            run_units,
            settings.partitions,
        )
    write_json(finding, work.finding)
    mark_work_done(stage, inputs, made_from)
    return finding


def _matches_path(stage: StageDir) -> Path:
    return stage.root / "index_matches.parquet"


def _index_view(settings) -> IndexView | None:
    """What the run reads of its dedup index (None without one), its settings checked."""
    if settings.index is None:
        return None
    index = DedupIndex(settings.index)
    try:
        manifest = index.opened()
        check_settings(manifest, index_settings(settings.minhash_params().to_dict()), "this run")
    except DedupIndexError as error:
        raise ConfigError(f"dedup.index: {error}") from None
    return IndexView.of(index, manifest)


def run_dedup(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> StageStats:
    """Remove exact and near duplicates from the shards of ``previous``; write and return the
    stage's stats."""
    stage = RunLayout(config.run_dir).stage(STAGE).make()
    remove_temporaries(stage.root)
    inputs = stage_outputs(config.run_dir, previous)
    finding = _finding(previous, config, stage, inputs, run_units)
    clusters = stage.root / "clusters.parquet"
    matches = _matches_path(stage) if config.dedup.index is not None else None
    jobs = [
        RemoveJob(path, shard, stage, clusters, config.dedup.threshold, config.batch_docs, matches)
        for shard, path in enumerate(inputs)
    ]
    parts = in_blocks(run_units, STAGE, remove_duplicates, jobs)
    return finish_stage(
        STAGE,
        previous,
        config,
        sorted(parts, key=lambda part: part["unit"]),
        dedup=finding,
        largest_clusters=largest_clusters(scan_parquet([clusters]), inputs),
    )


@dataclass(frozen=True)
class CountJob:
    in_path: Path
    work: LinesWork
    partitions: int


def count_lines(job: CountJob) -> dict:
    line_counts_for_shard(job.in_path, job.work.counts, job.partitions)
    return {"unit": job.in_path.stem}


@dataclass(frozen=True)
class FrequentJob:
    work: LinesWork
    partition: int
    max_docs: int


def find_frequent(job: FrequentJob) -> int:
    """The partition's lines in more than ``max_docs`` documents, written; how many."""
    counts = job.work.counts_partition(job.partition)
    # No folder: no shard had lines to count (a stage of no documents).
    frequent = frequent_lines(counts if counts.exists() else [], job.max_docs)
    write_parquet(frequent.to_arrow(), job.work.frequent_partition(job.partition))
    return frequent.height


@dataclass(frozen=True)
class CutJob:
    in_path: Path
    stage: StageDir
    frequent: Path
    scope: Scope
    batch_docs: int


def cut_lines(job: CutJob) -> dict:
    """The shard less its frequent lines (a document left blank is removed): its part record."""
    hashes = read_parquet(job.frequent)["line_hash"].to_numpy() if job.frequent.exists() else np.zeros(0, np.uint64)
    step = scoped_filters([RepeatedLines(hashes)], job.scope)
    return shard_unit(LINES_STAGE, job.in_path, job.stage, step, job.batch_docs)


def _find_frequent_lines(work: LinesWork, inputs: list, documents: int, settings, run_units: RunUnits) -> None:
    """Count the lines of every shard (of every source: lines are counted over all documents) in
    partitions sized by ``documents``, then write the frequent ones and the finding."""
    partitions = line_partitions_for(documents, settings.partitions)
    jobs = [CountJob(path, work, partitions) for path in inputs]
    in_blocks(run_units, "lines count", count_lines, jobs, jobs_per_block(documents, len(inputs)))
    jobs = [FrequentJob(work, p, settings.max_docs) for p in range(partitions)]
    found = run_units("lines frequent", find_frequent, jobs)
    tables = [read_parquet(work.frequent_partition(p)) for p in range(partitions)]
    write_parquet(pl.concat(tables).sort("line_hash").to_arrow(), work.frequent)
    write_json({"frequent_lines": sum(found), "partitions": partitions}, work.finding)


def run_lines(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> StageStats:
    """Cut lines found in more than ``lines.max_docs`` documents from the shards of ``previous``
    (only from the sources in scope); write and return the stage's stats."""
    settings = config.lines
    stage = RunLayout(config.run_dir).stage(LINES_STAGE).make()
    remove_temporaries(stage.root)
    inputs = stage_outputs(config.run_dir, previous)
    work = LinesWork(_work_folder(stage))
    documents = docs_handed_over(RunLayout(config.run_dir).stage(previous).stats)
    if not (reusable_work(stage, inputs, settings.model_dump(mode="json")) and work.frequent.exists()):
        _find_frequent_lines(work, inputs, documents, settings, run_units)
        mark_work_done(stage, inputs, settings.model_dump(mode="json"))
    jobs = [CutJob(path, stage, work.frequent, settings.scope(), config.batch_docs) for path in inputs]
    parts = in_blocks(run_units, LINES_STAGE, cut_lines, jobs, jobs_per_block(documents, len(inputs)))
    return finish_stage(
        LINES_STAGE,
        previous,
        config,
        sorted(parts, key=lambda part: part["unit"]),
        lines=read_json(work.finding),
    )
