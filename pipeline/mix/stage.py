"""The `mix` stage: the curated pool's documents in groups, a held-out validation split per group
kept clean of near-duplicates, and each configured mixture of the training side as token shards.

Nothing is encoded again: the tokenize stage wrote every curated document's tokens, so the token
counts per document are exact, and a mixture's shards are gathered from those shards (a copy per
repeat of an upsampled document). Units of work, in order::

    scan_shard      one per curated shard   ids, source, lang, tokens, bytes of each document
    shard_matches   one per curated shard   documents near-duplicating an excluded text
    shard_windows   one per token shard     documents sharing a 13-token window with an excluded text
    (split)         in the caller           groups, validation ids (pipeline.mix.plan)
    shard_matches   one per curated shard   training documents near-duplicating a validation one
    (plan)          in the caller           per mixture: weights, epoch caps, repeats per document
    write_shard     one per output shard    gather the tokens: <mixture>/{train,validation}/*.arrow

:func:`run_mix` runs the whole stage. It hands every list of units to ``run_units`` (by default one
after the other in this process; the Prefect flow, flows.mix, submits each as a task), so the stage
runs, and is tested, with or without Prefect, and writes the same files either way.

Before the split, documents that are, near-duplicate or contain text of the configured ``exclude``
files (a downstream task, an evaluation set shared by several runs) leave the pool, by three rules
in this order: the same id as a row of a file with an ``id`` column (``reference_id``); MinHash and
exact Jaccard at ``contamination_threshold`` (``reference_near_duplicate``); a shared window of
``exclude_ngram`` tokens that is not common text, or half of one text's windows (``reference_window``;
see :mod:`pipeline.decontaminate`). A document leaves by the first rule that takes it. The windows
judged common go into every mixture folder, so that the check of the mixture
(:func:`pipeline.decontaminate.check_contamination`) judges as the exclusion did.

Outputs in ``<run>/mix/``: ``documents.parquet`` (every document's group and side: train,
validation, contaminated or excluded, the rule and the validation or reference text that put it there),
``removed/{contaminated,excluded}.parquet`` (REMOVED_SCHEMA), and per mixture a
self-contained folder ``<mixture>/`` (pipeline.mix.mixture) with ``manifest.json``,
``tokenizer.json``, ``plan.parquet`` (repeats per training document) and the shards.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.config import RESERVED_MIXTURE_NAMES, ConfigError, MixtureConfig, RunConfig
from pipeline.core.ledger import LedgerError
from pipeline.core.manifest import record_stage
from pipeline.core.schema import (
    MIX_CONTAMINATED,
    MIX_EXCLUDED,
    MIX_EXCLUDED_ID,
    MIX_EXCLUDED_WINDOW,
    MIX_NEAR_ID,
    MIX_RULE,
    REMOVED_SCHEMA,
    RunLayout,
)
from pipeline.decontaminate import WindowIndex, window_containment
from pipeline.dedup.contamination import ReferenceIndex, read_reference_ids, read_reference_texts
from pipeline.dedup.minhash import MinHashParams
from pipeline.io.storage import as_path, parquet_file, read_parquet, remove_tree, scan_parquet
from pipeline.io.writer import read_json, remove_temporaries, write_bytes, write_json, write_parquet
from pipeline.mix.mixture import (
    COMMON_WINDOWS_FILE,
    MANIFEST_FILE,
    PLAN_FILE,
    TOKENIZER_FILE,
    group_file_stem,
    manifest,
    shard_entry,
    shard_file,
    tokenizer_entry,
)
from pipeline.mix.plan import (
    SALT_SAMPLE,
    assign_groups,
    cap_epochs,
    explicit_weights,
    group_sizes,
    mixture_report,
    sample_plan,
    seeded_id_hash,
    split_validation,
    temperature_weights,
)
from pipeline.stages.shard import mark_work_done, removed_frame, reusable_work
from pipeline.stages.units import RunUnits, in_process
from pipeline.tokenize import file_sha256, gather_token_shard, load_tokenizer, read_token_shard

STAGE = "mix"
_EMPTY_MATCHES = pl.DataFrame(schema={"id": pl.String, "reference_id": pl.String, "jaccard": pl.Float64})
# Why a document left the pool: the rule, the text that put it there, and the rule's measure
# (Jaccard; shared windows; null for an id).
CAUSES_SCHEMA = {"id": pl.String, "reference_id": pl.String, "value": pl.Float64, "rule": pl.String}
SCAN_SCHEMA = {
    "id": pl.String,
    "source": pl.String,
    "lang": pl.String,
    "tokens": pl.Int64,
    "bytes": pl.Int64,
    "shard": pl.Int32,
    "row": pl.Int64,
}
# Salt of the order in which a group's documents are written (copy k of an upsampled document
# uses salt + k, so the copies of one document land far apart).
SALT_ORDER = SALT_SAMPLE ^ 0x4F52444552  # "ORDER"


def scan_shard(number: int, docs_path: Path, token_path: Path) -> pl.DataFrame:
    """One row per document of a curated shard: id, source, lang, tokens (its token count, end
    token included), bytes (UTF-8 bytes of its text), shard (``number``) and row."""
    columns = [c for c in ("id", "source", "lang", "text") if c in _columns(docs_path)]
    docs = read_parquet(docs_path, columns=columns)
    _, offsets = read_token_shard(token_path)
    if docs.height != offsets.height or not docs["id"].equals(offsets["doc_id"], check_names=False):
        raise LedgerError(
            f"stage {STAGE}: {token_path.name} does not hold the documents of {docs_path} "
            "in order; run the tokenize stage again"
        )
    lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
    return pl.DataFrame(
        {
            "id": docs["id"],
            "source": docs["source"],
            "lang": lang,
            "tokens": offsets["doc_tokens"],
            "bytes": docs["text"].str.len_bytes(),
            "shard": [number] * docs.height,
            "row": np.arange(docs.height),
        },
        schema=SCAN_SCHEMA,
    )


def _columns(path: Path) -> list[str]:
    return parquet_file(path).schema_arrow.names


def shard_matches(docs_path: Path, index: ReferenceIndex, skip: pl.Series) -> pl.DataFrame:
    """The documents of a shard (but those in ``skip``) that near-duplicate a text of ``index``."""
    docs = read_parquet(docs_path, columns=["id", "text"]).filter(~pl.col("id").is_in(skip.implode()))
    return index.matches(docs["id"], docs["text"])


def _matches(run_units: RunUnits, inputs: list[Path], index: ReferenceIndex, skip: pl.Series) -> pl.DataFrame:
    return pl.concat([_EMPTY_MATCHES, *run_units(None, shard_matches, [(p, index, skip) for p in inputs])])


def shard_windows(token_path: Path, index: WindowIndex) -> pl.DataFrame:
    """``id, window``: every window of the shard's documents that is in ``index``."""
    tokens, offsets = read_token_shard(token_path)
    hits = index.hits(tokens, offsets["doc_start"].to_numpy(), offsets["doc_tokens"].to_numpy().astype(np.int64) - 1)
    return pl.DataFrame({"id": offsets["doc_id"].gather(hits["doc"].to_numpy()), "window": hits["window"]})


def _causes(frame: pl.DataFrame, rule: str, value: str | None) -> pl.DataFrame:
    return frame.select(
        pl.col("id"),
        pl.col("reference_id"),
        (pl.col(value) if value else pl.lit(None)).cast(pl.Float64).alias("value"),
        pl.lit(rule, pl.String).alias("rule"),
    )


def _exclusions(
    run_units: RunUnits,
    config: RunConfig,
    documents: pl.DataFrame,
    inputs: list[Path],
    token_paths: list[Path],
    tokenizer_path: Path,
    params: MinHashParams,
) -> tuple[pl.DataFrame, dict, pl.DataFrame | None]:
    """The pool documents that leave before the split (CAUSES_SCHEMA), by id, by near-duplicate,
    then by shared window; what the rules found, for the stats; and the windows judged common
    (``hash, documents``; None without the window rule), recorded in every mixture folder."""
    settings = config.mix
    reference = read_reference_texts(settings.exclude)
    listed = read_reference_ids(settings.exclude)
    by_id = documents.select("id").filter(pl.col("id").is_in(listed.implode())).with_columns(reference_id=pl.col("id"))
    causes = [_causes(by_id, MIX_EXCLUDED_ID, None)]
    index = ReferenceIndex(reference["id"], reference["text"], params)
    near = _best_match(_matches(run_units, inputs, index, by_id["id"]))
    causes.append(_causes(near, MIX_EXCLUDED, "jaccard"))
    summary = {"texts": reference.height, "by_id": by_id.height, "near_duplicate": near.height}
    if settings.exclude_ngram:
        windows = WindowIndex.from_texts(
            reference["id"], reference["text"], load_tokenizer(tokenizer_path), settings.exclude_ngram
        )
        found_windows = run_units(None, shard_windows, [(path, windows) for path in token_paths])
        hits = pl.concat([pl.DataFrame(schema={"id": pl.String, "window": pl.Int64}), *found_windows])
        found, counts, common = window_containment(hits, windows, settings.common_window_docs)
        taken = pl.concat([by_id["id"], near["id"]])
        contained = found.filter((pl.col("windows") > 0) & ~pl.col("id").is_in(taken.implode()))
        causes.append(_causes(contained, MIX_EXCLUDED_WINDOW, "windows"))
        summary.update(
            {
                **windows.summary(),
                "common_window_docs": settings.common_window_docs,
                **counts,
                "window": contained.height,
            }
        )
    else:
        common = None
    return pl.concat(causes), summary, common


def _best_match(matches: pl.DataFrame) -> pl.DataFrame:
    """One row per document: its most similar reference text (ties: the smallest reference id)."""
    return matches.sort(["id", "jaccard", "reference_id"], descending=[False, True, False]).unique(
        "id", keep="first", maintain_order=True
    )


def write_shard(unit: str, pieces: list[tuple[Path, np.ndarray]], out_path: Path, group: str, record: Path) -> dict:
    """Gather one output shard, then write its part record ``record`` (a shard with a record is
    complete, so a run killed midway redoes only the shards without one); return the record."""
    entry = {"unit": unit, **gather_token_shard(pieces, out_path, group)}
    write_json(entry, record)
    return entry


def _cut(tokens: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive ``(start, end)`` row ranges of at most ``limit`` tokens each (a document longer
    than ``limit`` makes a shard of its own)."""
    ends = np.cumsum(tokens)
    ranges, start = [], 0
    while start < len(tokens):
        before = ends[start - 1] if start else 0
        end = max(int(np.searchsorted(ends, before + limit, side="right")), start + 1)
        ranges.append((start, end))
        start = end
    return ranges


def _pieces(rows: pl.DataFrame, token_paths: list[Path]) -> list[tuple[Path, np.ndarray]]:
    """Runs of rows from one source shard, in order: ``(token shard path, row numbers)``."""
    shard = rows["shard"].to_numpy()
    row = rows["row"].to_numpy()
    breaks = np.flatnonzero(np.diff(shard)) + 1
    return [
        (token_paths[int(shard[lo])], row[lo:hi])
        for lo, hi in zip([0, *breaks.tolist()], [*breaks.tolist(), len(shard)])
    ]


def _ordered_copies(docs: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Every copy of every document (``repeats`` of them), in writing order: per group, copy 0 of
    every document, then copy 1 of those taken twice or more, and so on; within a copy in the order
    of a seeded hash of the id."""
    copies = []
    most = int(docs["repeats"].max() or 0) if docs.height else 0
    for copy in range(most):
        chosen = docs.filter(pl.col("repeats") > copy)
        keys = seeded_id_hash(chosen["id"], seed, SALT_ORDER + copy)
        copies.append(chosen.with_columns(copy=pl.lit(copy, pl.Int32), key=pl.Series(keys, dtype=pl.UInt64)))
    if not copies:
        return docs.clear().with_columns(copy=pl.lit(0, pl.Int32), key=pl.lit(0, pl.UInt64))
    return pl.concat(copies).sort(["group", "copy", "key", "id"])


def _weights(mixture: MixtureConfig, sizes: dict[str, int]) -> dict[str, float]:
    try:
        if mixture.weights is not None:
            return explicit_weights(mixture.weights, sizes, mixture.default_weight)
        return temperature_weights(sizes, mixture.temperature or 1.0)
    except ValueError as error:
        raise ConfigError(f"mix.mixtures[{mixture.name}]: {error}") from None


def _shard_jobs(copies: pl.DataFrame, split: str, limit: int) -> list[tuple[str, str, pl.DataFrame]]:
    """``(group, file relative to the mixture folder, rows)`` of every output shard of a split."""
    jobs = []
    for (group,), rows in copies.group_by(["group"], maintain_order=True):
        for number, (lo, hi) in enumerate(_cut(rows["tokens"].to_numpy(), limit)):
            jobs.append((group, shard_file(split, group, number), rows.slice(lo, hi - lo)))
    return jobs


def _unit(mixture: str, file: str) -> str:
    """The part-record name of a mixture's output file: ``main.train.news-0000``."""
    return f"{mixture}.{file.replace('/', '.').removesuffix('.arrow')}"


def _check_group_files(groups: list[str]) -> None:
    stems: dict[str, str] = {}
    for group in groups:
        other = stems.setdefault(group_file_stem(group), group)
        if other != group:
            raise ConfigError(
                f"mix: groups {other!r} and {group!r} would share the file name "
                f"{group_file_stem(group)!r}; rename one with mix.merge"
            )


def _write_mixture(
    run_units: RunUnits,
    mixture: MixtureConfig,
    documents: pl.DataFrame,
    config: RunConfig,
    stage_root: Path,
    parts: Path,
    token_paths: list[Path],
    tokenizer_path: Path,
    common: pl.DataFrame | None = None,
) -> dict:
    """Plan one mixture and write its folder; return its manifest. ``common``: the windows the
    exclusion judged common text, written as ``common_windows.parquet`` for the contamination
    check (pipeline.decontaminate.check_contamination)."""
    folder = stage_root / mixture.name
    train = documents.filter(pl.col("split") == "train")
    sizes = group_sizes(train)
    if sum(sizes.values()):
        weights = _weights(mixture, sizes)
        budget = mixture.budget_tokens or sum(sizes.values())
        caps = cap_epochs(weights, sizes, budget, mixture.max_epochs)
        plan = sample_plan(train.select("id", "group", "tokens"), caps.tokens_taken, config.seed)
        report = mixture_report(train.select("id", "group", "tokens"), caps, plan)
        train = train.with_columns(repeats=plan["repeats"])
    else:  # nothing reached training (an empty pool, or all of it held out): an empty mixture, said so
        report = {
            "budget_tokens": mixture.budget_tokens or 0,
            "max_epochs": mixture.max_epochs,
            "tokens_allocated": 0,
            "tokens_taken": 0,
            "shortfall_tokens": mixture.budget_tokens or 0,
            "groups": {},
        }
        train = train.with_columns(repeats=pl.lit(0, pl.Int64))
    folder.mkdir(parents=True, exist_ok=True)
    write_parquet(train.select("id", "group", "tokens", "repeats").to_arrow(), folder / PLAN_FILE)

    validation = documents.filter(pl.col("split") == "validation").with_columns(repeats=pl.lit(1, pl.Int64))
    jobs = _shard_jobs(
        _ordered_copies(train.filter(pl.col("repeats") > 0), config.seed), "train", config.mix.shard_tokens
    ) + _shard_jobs(_ordered_copies(validation, config.seed), "validation", config.mix.shard_tokens)
    todo = []
    for group, file, rows in jobs:
        unit = _unit(mixture.name, file)
        if not (parts / f"{unit}.json").exists():
            todo.append((unit, _pieces(rows, token_paths), folder / file, group, parts / f"{unit}.json"))
    run_units(f"{STAGE} {mixture.name}", write_shard, todo)
    entries = {}
    for group, file, rows in jobs:
        entry = read_json(parts / f"{_unit(mixture.name, file)}.json")
        if entry["documents"] != rows.height or entry["tokens"] != int(rows["tokens"].sum()):
            raise LedgerError(
                f"stage {STAGE}: {mixture.name}/{file} holds {entry['documents']} documents and "
                f"{entry['tokens']} tokens; the plan has {rows.height} and {int(rows['tokens'].sum())}"
            )
        entries[file] = shard_entry(
            file, group, entry["documents"], entry["tokens"], int(rows["bytes"].sum()), entry["sha256"]
        )

    tokenizer = load_tokenizer(tokenizer_path)
    write_bytes(as_path(tokenizer_path).read_bytes(), folder / TOKENIZER_FILE)
    held = validation.group_by("group").agg(
        documents=pl.len(), tokens=pl.col("tokens").sum(), bytes=pl.col("bytes").sum()
    )
    held_of = {row["group"]: row for row in held.iter_rows(named=True)}
    dropped = documents.filter(pl.col("split") == "contaminated").group_by("group").len()
    dropped_of = dict(zip(dropped["group"].to_list(), dropped["len"].to_list()))
    groups = {}
    for name in sorted(set(report["groups"]) | set(held_of)):
        groups[name] = {
            **report["groups"].get(
                name,
                {
                    "documents_available": 0,
                    "tokens_available": 0,
                    "tokens_allocated": 0,
                    "tokens_taken": 0,
                    "documents_taken": 0,
                    "epochs": 0.0,
                    "effective_weight": 0.0,
                    "target_weight": 0.0,
                    "capped": False,
                },
            ),
            "validation_documents": int(held_of.get(name, {}).get("documents", 0)),
            "validation_tokens": int(held_of.get(name, {}).get("tokens", 0)),
            "validation_bytes": int(held_of.get(name, {}).get("bytes", 0)),
            "contaminated_documents": int(dropped_of.get(name, 0)),
        }
    found = manifest(
        mixture.name,
        config.seed,
        tokenizer_entry(tokenizer, folder / TOKENIZER_FILE),
        groups,
        [entries[file] for _, file, _ in jobs if file.startswith("train/")],
        [entries[file] for _, file, _ in jobs if file.startswith("validation/")],
        weighting=(
            {"weights": mixture.weights, "default_weight": mixture.default_weight}
            if mixture.weights is not None
            else {"temperature": mixture.temperature or 1.0}
        ),
        **{key: value for key, value in report.items() if key != "groups"},
    )
    if common is not None:
        write_parquet(common.to_arrow(), folder / COMMON_WINDOWS_FILE)
        found["decontamination"] = {
            "ngram": config.mix.exclude_ngram,
            "common_window_docs": config.mix.common_window_docs,
            "common_windows": common.height,
            "common_windows_file": COMMON_WINDOWS_FILE,
        }
    write_json(found, folder / MANIFEST_FILE)
    return found


def run_mix(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> dict:
    """Split, decontaminate and mix the documents of stage ``previous`` (tokenized by the tokenize
    stage) into ``<run>/mix``; write and return the stage's stats."""
    settings = config.mix
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE)
    for folder in (stage.root, stage.removed, stage.parts):
        folder.mkdir(parents=True, exist_ok=True)
    remove_temporaries(stage.root)
    inputs = sorted(layout.stage(previous).docs.glob("*.parquet"))
    tokenize_stats = read_json(layout.stage("tokenize").stats)
    token_paths = [layout.stage("tokenize").root / "shards" / f"{p.stem}.arrow" for p in inputs]
    tokenizer_path = as_path(tokenize_stats["tokenizer"]["path"])
    made_from = {
        "mix": settings.model_dump(mode="json"),
        "seed": config.seed,
        "tokenizer": tokenize_stats["tokenizer"]["sha256"],
        "minhash": [config.dedup.ngram, config.dedup.num_perm, config.dedup.seed],
        "exclude": [file_sha256(Path(path)) for path in settings.exclude],
    }  # their content, not their names
    if not reusable_work(stage, inputs, made_from):  # other inputs or settings: no mixture is reusable
        configured = {m.name for m in settings.mixtures}
        for child in stage.root.iterdir():  # mixture folders only: a configured name, or one with a plan
            if (
                child.is_dir()
                and child.name not in RESERVED_MIXTURE_NAMES
                and (child.name in configured or (child / PLAN_FILE).exists())
            ):
                remove_tree(child)

    scans = run_units(None, scan_shard, [(number, path, token_paths[number]) for number, path in enumerate(inputs)])
    documents = pl.concat(scans) if scans else pl.DataFrame(schema=SCAN_SCHEMA)
    handed_over = read_json(layout.stage(previous).stats)["docs_out"]
    if documents.height != handed_over:
        raise LedgerError(
            f"stage {STAGE}: found {documents.height} tokenized documents, "
            f"but stage {previous} handed over {handed_over}"
        )
    try:
        documents = documents.with_columns(
            assign_groups(documents, settings.group_by, settings.merge, settings.min_share, size_column="tokens")
        )
    except ValueError as error:
        raise ConfigError(f"mix.group_by: {error}") from None
    _check_group_files(documents["group"].unique().sort().to_list())
    params = MinHashParams(
        ngram=config.dedup.ngram,
        num_perm=config.dedup.num_perm,
        seed=config.dedup.seed,
        threshold=settings.contamination_threshold,
    )
    # Documents near a reference text (a downstream task, a shared evaluation set) leave the pool
    # before anything else, so that neither side of the split holds them.
    excluded, exclusion, common = pl.DataFrame(schema=CAUSES_SCHEMA), {}, None
    if settings.exclude:
        excluded, exclusion, common = _exclusions(
            run_units, config, documents, inputs, token_paths, tokenizer_path, params
        )
    is_excluded = documents["id"].is_in(excluded["id"].implode())
    _, validation_ids = split_validation(
        documents.filter(~is_excluded), settings.validation_fraction, settings.validation_max_docs, config.seed
    )
    held_out = documents["id"].is_in(validation_ids.implode())

    contaminated = _EMPTY_MATCHES
    if settings.decontaminate and len(validation_ids):
        held_docs = (
            scan_parquet(inputs).select("id", "text").filter(pl.col("id").is_in(validation_ids.implode())).collect()
        )
        index = ReferenceIndex(held_docs["id"], held_docs["text"], params)
        contaminated = _best_match(_matches(run_units, inputs, index, pl.concat([validation_ids, excluded["id"]])))
    documents = documents.with_columns(
        split=pl.when(is_excluded)
        .then(pl.lit("excluded"))
        .when(held_out)
        .then(pl.lit("validation"))
        .when(pl.col("id").is_in(contaminated["id"].implode()))
        .then(pl.lit("contaminated"))
        .otherwise(pl.lit("train"))
    )
    causes = pl.concat([excluded, _causes(contaminated, MIX_CONTAMINATED, "jaccard")])
    documents = documents.join(
        causes.select("id", pl.col("rule").alias(MIX_RULE), pl.col("reference_id").alias(MIX_NEAR_ID)),
        on="id",
        how="left",
        maintain_order="left",
    )
    write_parquet(documents.drop("shard", "row").to_arrow(), stage.root / "documents.parquet")
    thresholds = {
        MIX_EXCLUDED_ID: None,
        MIX_EXCLUDED: settings.contamination_threshold,
        MIX_EXCLUDED_WINDOW: 1.0,
        MIX_CONTAMINATED: settings.contamination_threshold,
    }
    for side in ("excluded", "contaminated"):
        dropped = documents.filter(pl.col("split") == side).join(causes.select("id", "value"), on="id", how="left")
        threshold = dropped["rule"].replace_strict(thresholds, return_dtype=pl.Float64)
        removed = removed_frame(dropped, STAGE, dropped["rule"], dropped["value"], threshold)
        write_parquet(removed.to_arrow().cast(REMOVED_SCHEMA), stage.removed / f"{side}.parquet")

    manifests = {
        m.name: _write_mixture(
            run_units, m, documents, config, stage.root, stage.parts, token_paths, tokenizer_path, common
        )
        for m in settings.mixtures
    }
    mark_work_done(stage, inputs, made_from)

    counts = {side: 0 for side in ("train", "validation", "contaminated", "excluded")}
    counts.update(documents.group_by("split").len().iter_rows())
    if sum(counts.values()) != handed_over:
        raise LedgerError(f"stage {STAGE}: {counts} documents by side != {handed_over} handed over")
    train, held = counts["train"], counts["validation"]
    removed_counts = dict(
        documents.filter(pl.col("rule").is_not_null()).group_by("rule").len().sort("rule").iter_rows()
    )
    if sum(removed_counts.values()) != counts["contaminated"] + counts["excluded"]:
        raise LedgerError(
            f"stage {STAGE}: {removed_counts} documents by rule != "
            f"{counts['contaminated'] + counts['excluded']} removed"
        )
    stats = {
        "stage": STAGE,
        "docs_in": handed_over,
        "docs_out": train + held,
        "removed": removed_counts,
        "quarantined": {},
        "train_documents": train,
        "validation_documents": held,
        "exclusion": exclusion,
        "tokens_in": int(documents["tokens"].sum()),
        "groups": sorted(documents["group"].unique().to_list()),
        "mixtures": {
            name: {
                "folder": str(stage.root / name),
                "budget_tokens": m["budget_tokens"],
                "tokens_taken": m["tokens_taken"],
                "shortfall_tokens": m["shortfall_tokens"],
                "train_shards": len(m["train"]),
                "validation_shards": len(m["validation"]),
                "groups": {
                    g: {
                        k: v[k]
                        for k in ("tokens_available", "tokens_taken", "epochs", "effective_weight", "validation_tokens")
                    }
                    for g, v in m["groups"].items()
                },
            }
            for name, m in manifests.items()
        },
    }
    write_json(stats, stage.stats)
    record_stage(config, STAGE, stats)
    return stats
