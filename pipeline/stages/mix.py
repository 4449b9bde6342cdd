"""The `mix` stage: the curated pool's documents in groups, a held-out validation split per group
kept clean of near-duplicates, and each configured mixture of the training side as token shards.

Nothing is encoded again: the tokenize stage wrote every curated document's tokens, so a mixture's
shards are gathered from those shards (a copy per repeat of an upsampled document). No table of
every document is built in one process: the units work through blocks of shards (one per 16
shards, at most ``mix.partitions``) and write per-shard files under ``mix/intermediate/``; this
module keeps only figures per group, and wires the algorithms of :mod:`pipeline.mix` in order::

    scan.scan_block                 per block   each document's ids, licence, tokens, group
    contamination.block_matches     per block   documents near-duplicating an excluded text
    contamination.block_windows     per block   documents sharing a token window with one
    shards.split_candidates         per block   held-out candidates per group; split.split_blocks
                                                splits their union
    shards.block_texts              per block   the validation documents' texts
    contamination.block_matches     per block   training documents near-duplicating a validation one
    shards.shard_sides              per block   each document's group and side; counts per group; a
                                                histogram of the training side's sampling keys
    (plan)                          here        per mixture: weights, epoch caps
    shards.bucket_documents         per block   the documents of the buckets where a group's
                                                remainder runs out (routing.crossing_requests)
    shards.route_copies             per block   each mixture's repeats per document; every copy,
                                                routed by key range (routing.key_ranges)
    shards.concat_files             per file    documents.parquet, each plan.parquet; in the same
    shards.cut_ranges               per group   step, the writing order cut into output shards
    routing.write_shard             per shard   <mixture>/{train,validation}/*.arrow (every
                                                mixture's in one step, 16 shards per unit)

Outputs in ``<run>/mix/``: ``documents.parquet`` (every document's group and side: train,
validation, contaminated or excluded, the rule and the validation or reference text that put it
there), ``removed/{contaminated,excluded}.parquet`` (REMOVED_SCHEMA), and per mixture a
self-contained folder ``<mixture>/`` (pipeline.formats.mixture) with ``manifest.json``,
``tokenizer.json``, ``plan.parquet`` (repeats per training document), the shards and, written
last, the dataset card ``README.md`` (pipeline.stages.card). The units' per-shard files in
``intermediate/`` (scan, pool, plan, copies, ordered ranges) are made again by every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import RESERVED_MIXTURE_NAMES, MixConfig, MixtureConfig, RunConfig
from pipeline.decontaminate import WindowIndex, window_containment
from pipeline.dedup.clusters import kept_cluster_sizes
from pipeline.dedup.contamination import ReferenceIndex, read_reference_ids, read_reference_texts
from pipeline.dedup.minhash import MinHashParams
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import MIX_CONTAMINATED, RunLayout, StageDir
from pipeline.formats.ledger import LedgerError, add_counts
from pipeline.formats.manifest import record_stage, remove_stage_outputs, stage_outputs
from pipeline.formats.mixture import PLAN_FILE, group_file_stem
from pipeline.formats.stats import StageStats, docs_handed_over
from pipeline.formats.tokens import file_sha256, load_tokenizer
from pipeline.io.owner import begin_record
from pipeline.io.storage import as_path, is_local
from pipeline.io.writer import read_json, remove_temporaries, write_parquet
from pipeline.mix import contamination, figures, routing, shards, split
from pipeline.mix.folder import shard_entries, write_mixture_folder
from pipeline.mix.licences import mixture_licences, pool_licences
from pipeline.mix.plan import cap_epochs, explicit_weights, temperature_weights
from pipeline.mix.routing import KeyRanges, Planned
from pipeline.mix.scan import ScanJob, Scanned, ShardToScan, documents_schema, renamed_groups, scan_block
from pipeline.mix.work import WorkFiles
from pipeline.stages.card import write_cards
from pipeline.stages.shard import mark_work_done, reusable_work
from pipeline.stages.units import BLOCK_DOCS, JOBS_PER_BLOCK, Block, RunUnits, blocks, in_blocks, in_process, run_block

STAGE = "mix"


def _unit_count(shards: int, shard_docs: float, partitions: int) -> int:
    """Units of a step across ``shards`` shards of ``shard_docs`` documents on average: one per
    JOBS_PER_BLOCK shards, or per BLOCK_DOCS documents where that is more shards, at most
    ``mix.partitions`` (each step's units pay a cluster's fixed cost per task, about 0.1 CPU s:
    pipeline.stages.units; a unit's memory is that of a shard)."""
    per_unit = max(JOBS_PER_BLOCK, math.ceil(BLOCK_DOCS / max(shard_docs, 1.0)))
    return min(partitions, -(-shards // per_unit))


@dataclass(frozen=True)
class _Pool:
    """The stage's input shards and the files its units write: ``inputs`` (the curated documents),
    ``token_paths`` (their token shards), the tokenize stage's tokenizer, ``work`` (the files of
    the units, pipeline.mix.work), ``scans`` and ``pools`` (its per-shard files the steps read),
    ``units`` (the blocks of shards each step's units work through)."""

    inputs: list[Path]
    token_paths: list[Path]
    tokenizer_path: Path
    tokenizer_sha256: str
    work: WorkFiles
    scans: list[Path]
    pools: list[Path]
    units: list[range]
    shard_docs: float  # the documents of an input shard, on average

    def each_block(self, run_units: RunUnits, unit: Callable, what: str, job: Callable[[str, int, range], Any]) -> list:
        """``unit`` once per block of shards: ``job(name, u, block)`` is block ``u``'s job, its
        unit named ``<what>-0000`` on."""
        return run_units(None, unit, [job(f"{what}-{u:04d}", u, block) for u, block in enumerate(self.units)])


def _open_stage(layout: RunLayout) -> StageDir:
    """The stage's folders, made, without the temporary files of a run that was killed."""
    stage = layout.stage(STAGE)
    if is_local(stage.root):  # before any file: what the stage writes is recorded (pipeline.io.owner)
        begin_record(stage.root, f"the run's {STAGE} stage")
    for folder in (stage.root, stage.removed, stage.parts):
        folder.mkdir(parents=True, exist_ok=True)
    remove_temporaries(stage.root)
    return stage


def _pool_files(layout: RunLayout, stage: StageDir, previous: str, partitions: int) -> _Pool:
    """The curated shards of stage ``previous``, their token shards and tokenizer (the tokenize
    stage's), and the per-shard files of this stage's units."""
    inputs = stage_outputs(layout.root, previous)
    tokenizer = StageStats.read(layout.stage("tokenize").stats).tokenizer
    shard_docs = docs_handed_over(layout.stage(previous).stats) / max(len(inputs), 1)
    units = blocks(len(inputs), _unit_count(len(inputs), shard_docs, partitions))
    work = WorkFiles(stage.root / "intermediate", len(inputs), len(units))
    return _Pool(
        inputs=inputs,
        token_paths=[layout.stage("tokenize").root / "shards" / f"{p.stem}.arrow" for p in inputs],
        tokenizer_path=as_path(tokenizer["path"]),
        tokenizer_sha256=tokenizer["sha256"],
        work=work,
        scans=work.scans(),
        pools=work.pools(),
        units=units,
        shard_docs=shard_docs,
    )


def _work_made_from(config: RunConfig, tokenizer_sha256: str) -> dict:
    """What the stage's work is made from besides its input shards: the settings, the seed, the
    tokenizer, the MinHash parameters and the exclude files."""
    settings = config.mix
    return {
        "mix": settings.model_dump(mode="json", exclude={"partitions"}),
        "seed": config.seed,
        "tokenizer": tokenizer_sha256,
        "minhash": [config.dedup.ngram, config.dedup.num_perm, config.dedup.seed],
        "exclude": [file_sha256(Path(path)) for path in settings.exclude],
    }  # their content, not their names


def _remove_stale_mixtures(stage: StageDir, inputs: list[Path], made_from: dict) -> None:
    """Remove the mixtures of an earlier run made from other inputs or settings: the files the
    stage wrote in its mixture folders, never a copy someone made beside them."""
    if not reusable_work(stage, inputs, made_from):  # other inputs or settings: no mixture is reusable
        for child in stage.root.iterdir():
            if child.is_dir() and not child.is_symlink() and child.name not in RESERVED_MIXTURE_NAMES:
                remove_stage_outputs(stage.root.parent, STAGE, under=child.name)


def _scan_pool(run_units: RunUnits, pool: _Pool, settings: MixConfig) -> tuple[list[Scanned], pl.Series]:
    """Scan: each shard's documents, token counts and groups, in a file of its own. Return what
    each block found and the ids that the exclude files list."""
    listed = read_reference_ids(settings.exclude) if settings.exclude else pl.Series("id", [], dtype=pl.String)
    files = [
        ShardToScan(number=s, docs=pool.inputs[s], tokens=pool.token_paths[s], out=pool.scans[s])
        for s in range(len(pool.inputs))
    ]
    scanned = pool.each_block(
        run_units,
        scan_block,
        "scan",
        lambda name, u, b: ScanJob(
            unit=name, shards=[files[s] for s in b], by=settings.group_by, merge=settings.merge, listed=listed
        ),
    )
    return scanned, listed


def _documents_handed_over(layout: RunLayout, previous: str, scanned: list[Scanned]) -> int:
    """The documents stage ``previous`` handed over, checked against those the scan found."""
    handed_over = docs_handed_over(layout.stage(previous).stats)
    found_docs = sum(found.documents for found in scanned)
    if found_docs != handed_over:
        raise LedgerError(
            f"stage {STAGE}: found {found_docs} tokenized documents, but stage {previous} handed over {handed_over}"
        )
    return handed_over


def _contamination_params(config: RunConfig) -> MinHashParams:
    """The MinHash parameters of the near-duplicate rules: the dedup stage's shingles and
    permutations, at ``mix.contamination_threshold``."""
    # Not the dedup config's minhash_params(): these rules share only dedup's shingles and
    # permutations, at their own threshold with the LSH layout derived for it (dedup's recall,
    # bands, rows, exact and near would change what they find); ReferenceIndex, below the config,
    # takes this plain parameter set.
    return MinHashParams(
        ngram=config.dedup.ngram,
        num_perm=config.dedup.num_perm,
        seed=config.dedup.seed,
        threshold=config.mix.contamination_threshold,
    )


def _best_matches(run_units: RunUnits, what: str, pool: _Pool, index: ReferenceIndex, skip: pl.Series) -> pl.DataFrame:
    """The pool's documents (but those in ``skip``) near-duplicating a text of ``index``, with their
    best match each."""
    found = pool.each_block(
        run_units,
        contamination.block_matches,
        what,
        lambda name, u, b: contamination.MatchJob(
            unit=name, docs_paths=[pool.inputs[s] for s in b], index=index, skip=skip
        ),
    )
    return contamination.best_match(pl.concat([pl.DataFrame(schema=contamination.MATCHES_SCHEMA), *found]))


def _exclude_references(
    run_units: RunUnits,
    config: RunConfig,
    pool: _Pool,
    scanned: list[Scanned],
    listed: pl.Series,
    params: MinHashParams,
) -> contamination.Exclusion:
    """Documents of a reference text (a downstream task, a shared evaluation set) leave the pool
    before anything else, so that neither side of the split holds them: by id (the ids the
    exclude files list that the scan found), near-duplicate, then shared window
    (pipeline.mix.contamination). The windows judged common go into every mixture folder, so that
    the mixture's check (pipeline.decontaminate.check_contamination) judges as the exclusion did."""
    settings = config.mix
    if not settings.exclude:
        return contamination.nothing_excluded()
    listed = pl.concat([found.listed for found in scanned]) if scanned else listed.clear()
    reference = read_reference_texts(settings.exclude)
    index = ReferenceIndex(reference["id"], reference["text"], params)
    found = contamination.excluded_by_reference(
        listed, _best_matches(run_units, "exclude", pool, index, listed), reference.height
    )
    if not settings.exclude_ngram:
        return found
    tokenizer = load_tokenizer(pool.tokenizer_path)
    windows = WindowIndex.from_texts(reference["id"], reference["text"], tokenizer, settings.exclude_ngram)
    hits = pool.each_block(
        run_units,
        contamination.block_windows,
        "windows",
        lambda name, u, b: contamination.WindowsJob(name, [pool.token_paths[s] for s in b], windows),
    )
    hits = pl.concat([pl.DataFrame(schema=contamination.WINDOWS_SCHEMA), *hits])
    containment = window_containment(hits, windows, settings.common_window_docs)
    return contamination.excluded_by_window(found, containment, windows.summary(), settings.common_window_docs)


def _validation_split(
    run_units: RunUnits, config: RunConfig, pool: _Pool, renamed: dict[str, str], excluded: pl.DataFrame
) -> tuple[pl.DataFrame, pl.Series]:
    """The validation split (pipeline.mix.split.split_blocks over each block's candidates). Return
    the candidates (``id, group, shard``) and the ids held out."""
    settings, seed = config.mix, config.seed
    fraction, cap, least = settings.validation_fraction, settings.validation_max_docs, settings.validation_min_docs
    found = pool.each_block(
        run_units,
        shards.split_candidates,
        "split",
        lambda name, u, b: shards.SplitJob(
            unit=name,
            scans=[pool.scans[s] for s in b],
            renamed=renamed,
            excluded=excluded["id"],
            fraction=fraction,
            max_docs=cap,
            seed=seed,
            min_docs=least,
        ),
    )
    return split.split_blocks(found, fraction, cap, seed, least)


def _validation_near_duplicates(
    run_units: RunUnits,
    settings: MixConfig,
    pool: _Pool,
    candidates: pl.DataFrame,
    validation_ids: pl.Series,
    excluded: pl.DataFrame,
    params: MinHashParams,
) -> pl.DataFrame:
    """The documents that near-duplicate a validation document (its best match each), which leave
    the training side; none without ``mix.decontaminate`` or a validation document."""
    if not (settings.decontaminate and len(validation_ids)):
        return pl.DataFrame(schema=contamination.MATCHES_SCHEMA)
    holding = split.holding_shards(candidates, validation_ids)
    jobs = [
        shards.TextsJob(f"texts-{u:04d}", [pool.inputs[holding[i]] for i in block], validation_ids)
        for u, block in enumerate(blocks(len(holding), _unit_count(len(holding), pool.shard_docs, settings.partitions)))
    ]
    held_docs = pl.concat(run_units(None, shards.block_texts, jobs))
    index = ReferenceIndex(held_docs["id"], held_docs["text"], params)
    return _best_matches(run_units, "contaminated", pool, index, pl.concat([validation_ids, excluded["id"]]))


def _rehydration(config: RunConfig) -> dict:
    """The SidesJob settings of re-hydration (pipeline.mix.rehydrate): the bins and cap, and the
    sizes of the duplicate clusters from the dedup stage's clusters table; none when it is off."""
    settings = config.mix.rehydrate
    if settings is None:
        return {}
    clusters = RunLayout(config.run_dir).stage("dedup").root / "clusters.parquet"
    if not clusters.exists():
        raise ConfigError(f"mix.rehydrate needs the dedup stage's clusters table, and {clusters} is missing; run dedup")
    return {"rehydrate": (settings.bins, settings.max_copies), "cluster_sizes": partial(kept_cluster_sizes, clusters)}


def _shard_sides(
    run_units: RunUnits,
    pool: _Pool,
    renamed: dict[str, str],
    causes: pl.DataFrame,
    validation_ids: pl.Series,
    seed: int,
    rehydration: dict,
) -> list[shards.Sides]:
    """Each document's group and side, per shard (see pipeline.mix.shards.shard_sides)."""
    return pool.each_block(
        run_units,
        shards.shard_sides,
        "sides",
        lambda name, u, b: shards.SidesJob(
            unit=name,
            scans=[pool.scans[s] for s in b],
            pools=[pool.pools[s] for s in b],
            renamed=renamed,
            causes=causes,
            validation=validation_ids,
            seed=seed,
            **rehydration,
        ),
    )


def _write_removed(
    sides: list[shards.Sides], causes: pl.DataFrame, contamination_threshold: float, removed_dir: Path
) -> None:
    """``removed/{excluded,contaminated}.parquet`` (REMOVED_SCHEMA): each removed document with its
    rule, the rule's measure and its threshold."""
    removed_rows = [side.removed for side in sides if side.removed is not None]
    for side, table in contamination.removed_tables(removed_rows, causes, STAGE, contamination_threshold).items():
        write_parquet(table, removed_dir / f"{side}.parquet")


def _plan_mixture(mixture: MixtureConfig, by_group: dict, by: list[str]) -> Planned:
    """A mixture's epoch caps over the training tokens per group (None when there are none), the
    re-hydrated tokens under re-hydration."""
    sizes = {
        g: sides["train"].get("rehydrated_tokens", sides["train"]["tokens"])
        for g, sides in sorted(by_group.items())
        if "train" in sides
    }
    if not sum(sizes.values()):
        return None, sizes
    try:
        if mixture.weights is not None:
            weights = explicit_weights(mixture.weights, sizes, mixture.default_weight, by)
        else:
            weights = temperature_weights(sizes, mixture.temperature or 1.0)
    except ValueError as error:
        raise ConfigError(f"mix.mixtures[{mixture.name}]: {error}") from None
    return cap_epochs(weights, sizes, mixture.budget_tokens or sum(sizes.values()), mixture.max_epochs), sizes


def _plan_layers(
    run_units: RunUnits, planned: dict[str, Planned], histogram: pl.DataFrame, pool: _Pool, seed: int, groups: dict
) -> dict[str, dict | None]:
    """Each mixture's layers per group (pipeline.mix.routing.mixture_layers), with the documents of
    the sampling buckets where a group's remainder runs out fetched from the pool, and each group's
    most copies of a document under re-hydration."""
    ask = routing.crossing_requests(planned, histogram)
    fetched = pl.DataFrame(schema=routing.BUCKET_DOCUMENTS_SCHEMA)
    if ask.height:
        found = pool.each_block(
            run_units,
            shards.bucket_documents,
            "bucket",
            lambda name, u, b: shards.BucketJob(name, [pool.pools[s] for s in b], ask),
        )
        fetched = pl.concat([fetched, *found])
    copies = {
        g: max(map(int, sides["train"]["by_copies"]))
        for g, sides in groups.items()
        if "by_copies" in sides.get("train", {})
    }
    return routing.mixture_layers(planned, histogram, fetched, seed, copies)


def _route_copies(
    run_units: RunUnits, pool: _Pool, layers: dict[str, dict | None], groups: dict, seed: int
) -> tuple[KeyRanges, dict]:
    """Route every copy to write by key range (pipeline.mix.routing.key_ranges), and write each
    mixture's plan per shard; return the key ranges and what each mixture takes, per group (and
    licence)."""
    ranges, work = routing.key_ranges(layers, groups), pool.work
    plans, copies, held = {n: work.plans(n) for n in layers}, {n: work.copies(n) for n in layers}, work.copies(None)
    taken_by = pool.each_block(
        run_units,
        shards.route_copies,
        "route",
        lambda unit, u, b: shards.RouteJob(
            unit=unit,
            pools=[pool.pools[s] for s in b],
            plans=layers,
            ranges=ranges.train,
            seed=seed,
            plan_paths={name: [paths[s] for s in b] for name, paths in plans.items()},
            copy_paths={name: paths[u] for name, paths in copies.items()},
            validation_path=held[u],
            validation_ranges=ranges.validation,
        ),
    )
    taken = {}
    for found in taken_by:
        add_counts(taken, found)
    return ranges, taken


def _write_documents_and_plans(
    run_units: RunUnits, pool: _Pool, stage_root: Path, ranges: KeyRanges, shard_tokens: int
) -> dict[str | None, dict[str, list[dict]]]:
    """documents.parquet and each plan.parquet, one file each from the per-shard pieces, and beside
    them (one step of units: each step waits for the one before, on a cluster a round of its tasks'
    fixed cost) the writing order of each split and group (pipeline.mix.routing.writing_orders) cut
    into output shards. Return the output shards per mixture (None: validation) and group."""
    concat = [
        shards.ConcatJob(
            unit="documents", pieces=pool.pools, schema=documents_schema(), out=stage_root / "documents.parquet"
        )
    ] + [
        shards.ConcatJob(
            unit=f"plan-{name}",
            pieces=pool.work.plans(name),
            schema=shards.PLAN_SCHEMA,
            out=stage_root / name / PLAN_FILE,
        )
        for name in ranges.train
    ]
    orders = routing.writing_orders(ranges)
    cuts = [
        shards.CutJob(
            unit=f"order-{name or 'validation'}-{group_file_stem(group)}",
            group=group,
            layers=copies,
            routed=pool.work.copies(name),
            ordered=pool.work.ordered(name, group),
            limit=shard_tokens,
        )
        for name, group, copies in orders
    ]
    # A file to concatenate is a task of its own (the documents' file grows with the pool); the
    # cuts, a few hundredths of a second each, go in blocks.
    cut_blocks = blocks(len(cuts), -(-len(cuts) // JOBS_PER_BLOCK))
    done = run_units(
        None,
        run_block,
        [Block(shards.concat_files, [job], n) for n, job in enumerate(concat)]
        + [Block(shards.cut_ranges, [cuts[i] for i in span], span.start) for span in cut_blocks],
    )
    output: dict[str | None, dict[str, list[dict]]] = {name: {} for name in ranges.train} | {None: {}}
    for (name, group, _), cut in zip(orders, [cut for block in done[len(concat) :] for cut in block]):
        output[name][group] = cut
    return output


def _unit(mixture: str, file: str) -> str:
    """The part-record name of a mixture's output file: ``main.train.news-0000``."""
    return f"{mixture}.{file.replace('/', '.').removesuffix('.arrow')}"


def _write_shards(run_units: RunUnits, config: RunConfig, stage: StageDir, pool: _Pool, output: dict) -> None:
    """Write the shards of every mixture that have no part record yet, as one step of units (each
    step waits for the one before, on a cluster a round of its tasks' fixed cost), in blocks of
    up to 16 shards (a shard's write is short: a task of its own would cost more than its work)."""
    todo = []
    for m in config.mix.mixtures:
        for group, file, shard in routing.shard_jobs({"train": output[m.name], "validation": output[None]}):
            unit, folder = _unit(m.name, file), stage.root / m.name
            if not (stage.parts / f"{unit}.json").exists():
                job = routing.WriteJob(
                    unit=unit,
                    pieces=shard["pieces"],
                    token_paths=pool.token_paths,
                    out_path=folder / file,
                    group=group,
                    record=stage.parts / f"{unit}.json",
                )
                todo.append(job)
    in_blocks(run_units, STAGE, routing.write_shard, todo)


def _write_mixtures(
    config: RunConfig,
    stage: StageDir,
    pool: _Pool,
    planned: dict[str, Planned],
    layers: dict[str, dict | None],
    counts: dict,
    taken: dict,
    output: dict,
    common: pl.DataFrame | None,
) -> dict[str, dict]:
    """Each mixture's folder over its shards (each with its part record), with its figures
    (pipeline.mix.figures, pipeline.mix.licences); return their manifests by name."""
    settings, manifests = config.mix, {}
    for mixture in settings.mixtures:
        name = mixture.name
        report = figures.mixture_report(
            planned[name], layers[name], counts["groups"], mixture.budget_tokens, mixture.max_epochs
        )
        licences = mixture_licences(taken.get(name, {}), counts["licences"])
        jobs = routing.shard_jobs({"train": output[name], "validation": output[None]})
        records = {file: read_json(stage.parts / f"{_unit(name, file)}.json") for _, file, _ in jobs}
        weighting = {"temperature": mixture.temperature or 1.0}
        if mixture.weights is not None:
            weighting = {"weights": mixture.weights, "default_weight": mixture.default_weight}
        manifests[name] = write_mixture_folder(
            stage.root / name,
            name,
            seed=config.seed,
            tokenizer_path=pool.tokenizer_path,
            groups=figures.mixture_groups(report, counts["groups"], licences),
            entries=shard_entries(name, jobs, records),
            report=report,
            weighting=weighting,
            common=common,
            decontamination={"ngram": settings.exclude_ngram, "common_window_docs": settings.common_window_docs},
        )
    return manifests


def _mixture_stats(folder: Path, found: dict) -> dict:
    """What the stage's stats say of one mixture, from its manifest."""
    return {
        "folder": str(folder),
        "budget_tokens": found["budget_tokens"],
        "tokens_taken": found["tokens_taken"],
        "shortfall_tokens": found["shortfall_tokens"],
        "train_shards": len(found["train"]),
        "validation_shards": len(found["validation"]),
        "licences": {licence: figures["tokens_taken"] for licence, figures in found["licences"].items()},
        "groups": {
            g: {
                k: v[k] for k in ("tokens_available", "tokens_taken", "epochs", "effective_weight", "validation_tokens")
            }
            for g, v in found["groups"].items()
        },
    }


def _stage_stats(
    handed_over: int,
    counts: dict,
    removed_counts: dict[str, int],
    exclusion: dict,
    manifests: dict[str, dict],
    stage_root: Path,
    settings: MixConfig,
) -> StageStats:
    """The stage's stats: its ledger, the exclusion's findings, the pool's groups and licences,
    each mixture's figures, and ``warnings``: lines for the user (a validation split too small to
    measure, :func:`_split_warnings`)."""
    by_side = counts["splits"]
    train, held = by_side["train"], by_side["validation"]
    return StageStats(
        STAGE,
        docs_in=handed_over,
        docs_out=train + held,
        removed=removed_counts,
        train_documents=train,
        validation_documents=held,
        exclusion=exclusion,
        tokens_in=counts["tokens_in"],
        groups=sorted(counts["groups"]),
        licences=pool_licences(counts["licences"]),
        mixtures={name: _mixture_stats(stage_root / name, m) for name, m in manifests.items()},
        warnings=_split_warnings(counts["groups"], settings),
        extra={"rehydration": _rehydration_stats(counts, settings)} if settings.rehydrate else {},
    )


def _rehydration_stats(counts: dict, settings: MixConfig) -> dict:
    """What re-hydration did: the training documents and their tokens by copies, the tokens of the
    re-hydrated pool, and the settings."""
    by_copies = dict(sorted(counts.get("rehydration", {}).items(), key=lambda item: int(item[0])))
    return {
        "bins": {str(size): copies for size, copies in (settings.rehydrate.bins or {}).items()} or None,
        "max_copies": settings.rehydrate.max_copies,
        "documents_by_copies": {copies: found["documents"] for copies, found in by_copies.items()},
        "tokens": sum(found["tokens"] for found in by_copies.values()),
        "rehydrated_tokens": sum(int(copies) * found["tokens"] for copies, found in by_copies.items()),
    }


def _split_warnings(groups: dict, settings: MixConfig) -> list[str]:
    """The warning of a validation split too small to measure (pipeline.mix.split.split_warning)."""
    found = split.split_warning(
        groups, settings.validation_fraction, settings.validation_max_docs, settings.validation_min_docs
    )
    return [f"{STAGE}: {found}"] if found else []


def run_mix(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> StageStats:
    """Split, decontaminate and mix the documents of stage ``previous`` (tokenized by the tokenize
    stage) into ``<run>/mix``; write and return the stage's stats."""
    settings = config.mix
    layout = RunLayout(config.run_dir)
    stage = _open_stage(layout)
    pool = _pool_files(layout, stage, previous, settings.partitions)
    made_from = _work_made_from(config, pool.tokenizer_sha256)
    _remove_stale_mixtures(stage, pool.inputs, made_from)
    remove_stage_outputs(config.run_dir, STAGE, under=pool.work.root.name)  # its own files of an earlier run

    scanned, listed = _scan_pool(run_units, pool, settings)
    handed_over = _documents_handed_over(layout, previous, scanned)
    renamed = renamed_groups(scanned, settings.min_share)
    params = _contamination_params(config)
    exclusion = _exclude_references(run_units, config, pool, scanned, listed, params)
    excluded = exclusion.causes
    candidates, validation_ids = _validation_split(run_units, config, pool, renamed, excluded)
    contaminated = _validation_near_duplicates(run_units, settings, pool, candidates, validation_ids, excluded, params)
    causes = pl.concat([excluded, contamination.causes_under(contaminated, MIX_CONTAMINATED, "jaccard")])

    sides = _shard_sides(run_units, pool, renamed, causes, validation_ids, config.seed, _rehydration(config))
    counts = figures.side_counts([side.counts for side in sides])
    histogram = shards.sum_histograms([side.histogram for side in sides])
    _write_removed(sides, causes, settings.contamination_threshold, stage.removed)

    planned = {m.name: _plan_mixture(m, counts["groups"], settings.group_by) for m in settings.mixtures}
    layers = _plan_layers(run_units, planned, histogram, pool, config.seed, counts["groups"])
    for mixture in settings.mixtures:
        (stage.root / mixture.name).mkdir(parents=True, exist_ok=True)
    ranges, taken = _route_copies(run_units, pool, layers, counts["groups"], config.seed)
    routing.check_taken(taken, layers)
    output = _write_documents_and_plans(run_units, pool, stage.root, ranges, settings.shard_tokens)
    _write_shards(run_units, config, stage, pool, output)
    manifests = _write_mixtures(config, stage, pool, planned, layers, counts, taken, output, exclusion.common)
    mark_work_done(stage, pool.inputs, made_from)

    removed_counts = figures.removed_by_rule(counts, handed_over)
    stats = _stage_stats(handed_over, counts, removed_counts, exclusion.summary, manifests, stage.root, settings)
    stats.write(stage.stats)
    write_cards(config.run_dir)  # each mixture's README.md, from the files written above
    record_stage(config, STAGE, stats.to_dict())  # last: it records every file the stage wrote
    return stats
