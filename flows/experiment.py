"""The experiment flow (experiment): curated vs raw mixtures of one raw pool, trained
alike over several seeds, compared on held-out sets no curation chose and on transfer to a
downstream task.

Steps, all under ``out_dir``::

    corpus (demo)         the demo corpus with its held-out sets and task, unless there is one
    quality/              the fastText quality model, when a variant uses it (demo: trained here)
    heldout/              texts.parquet: the held-out sets (the demo's and the user's eval_sets),
                          raw; their token shards and manifest (mixture format, validation only)
    curation/source/      the source stage alone: the raw pool
    tokenizer.json        one tokenizer for every variant, trained on a seeded sample of the raw
                          pool less the held-out texts
    curation/<stages>/    one curation run per distinct set of stages, one mixture per variant,
                          the task and the held-out sets excluded (by id, near-duplicates, windows)
    contamination.json    per variant, training documents sharing a 13-token window with a
                          held-out or task text; the run stops if any does
    train/<variant>/seed-<s>/     pretraining (trainer.train), held-out sets evaluated throughout
    transfer/<model>/seed-<s>.json  label-efficiency curves: probe and fine-tuning scores per size
                          and draw (model: random, bag-of-words or a variant)
    memorization/<variant>/seed-<s>.json  extraction and exposure of the planted canaries
    scores/<variant>/seed-<s>.parquet     every held-out document's loss, scored whole (per
                          language bits per byte; the bootstrap over test items)
    results.json, report/index.html

Each step is skipped when its output is complete (curation runs resume; training resumes from
its checkpoint; a transfer file is written last), so an interrupted experiment continues.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from experiment.config import ExperimentConfig, VariantConfig, curation_config
from experiment.heldout import (
    EVAL_MIXTURE,
    canary_views,
    contamination_total,
    heldout_provenance,
    heldout_texts,
    protected_texts,
    read_eval_set,
    tokenizer_sample,
    trained_on,
    write_eval_folder,
)
from experiment.results import heldout_scores
from flows.curate import curate_flow
from pipeline.config import RunConfig, load_config, parse_config
from pipeline.decontaminate import check_contamination
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import open_run
from pipeline.formats.mixture import MANIFEST_FILE, PLAN_FILE
from pipeline.formats.tokens import file_sha256, load_tokenizer
from pipeline.io.writer import read_json, write_json, write_parquet
from pipeline.stages.registry import last_document_stage
from pipeline.tokenizer import train_tokenizer

RANDOM = "random"  # the transfer baseline: the same architecture, not pretrained
BAG_OF_WORDS = "bag-of-words"  # the transfer reference line: no model, TF-IDF and logistic regression


class ContaminationError(RuntimeError):
    """A training mixture shares token windows with held-out or task text."""


def _build_corpus(corpus: Path, config: ExperimentConfig) -> dict:
    """Build (or find) the demo corpus, its held-out sets and its task."""
    from demo.corpus import build_demo_corpus

    return build_demo_corpus(
        corpus,
        docs=config.demo_docs,
        seed=0,
        task_train_docs=config.task.train_docs,
        task_test_docs=config.task.test_docs,
    )


def _base_curation(config: ExperimentConfig) -> tuple[dict, Path | None]:
    """The curation settings variants derive from, and the demo corpus folder (demo only)."""
    if config.demo:
        from demo.config import DEMO_CORPUS_DIR, demo_config

        corpus = config.corpus_dir or (
            DEMO_CORPUS_DIR
            if config.demo_docs == 20_000
            else DEMO_CORPUS_DIR.with_name(f"demo-corpus-{config.demo_docs}-0")
        )
        _build_corpus(corpus, config)
        return demo_config(corpus), corpus
    return load_config(config.curation).model_dump(mode="json", exclude={"run_dir"}), None


def _corpus_file(corpus: Path, name: str) -> Path:
    path = corpus / "heldout" / name
    if not path.is_file():
        raise ConfigError(
            f"the demo corpus at {corpus} has no heldout/{name}; it was built by an older version: "
            "delete the folder and run again to rebuild it"
        )
    return path


def _task_file(config: ExperimentConfig, corpus: Path | None) -> Path | None:
    """The downstream task: the user's file, or the demo corpus's (its articles and their copies
    entered no pool); None for a sweep of the user's corpus that names none."""
    if config.task.path is not None:
        return config.task.path
    return _corpus_file(corpus, "task.parquet") if corpus is not None else None


def _heldout(config: ExperimentConfig, corpus: Path | None) -> tuple[Path, pl.DataFrame, dict]:
    """``out_dir/heldout/texts.parquet``: the demo corpus's held-out sets and the user's; their
    texts and where each set came from."""
    frames, origins = [], {}
    if corpus is not None:
        path = _corpus_file(corpus, "texts.parquet")
        frames.append(pl.read_parquet(path))
        manifest = corpus / "heldout" / "manifest.json"
        chosen = read_json(manifest) if manifest.is_file() else {}
        for name in frames[0]["set"].unique().sort().to_list():
            origins[name] = {
                "file": str(path),
                "sha256": file_sha256(path),
                "origin": "demo corpus",
                "how": chosen.get("how", "fixed when the corpus was built, before any curation"),
                "seed": chosen.get("seed"),
            }
    for spec in config.eval_sets:
        frames.append(read_eval_set(spec))
        origins[spec.name] = {
            "file": str(spec.path),
            "sha256": file_sha256(Path(spec.path)),
            "origin": "eval_sets",
            "how": "the user's file, as given",
        }
    texts = heldout_texts(frames)
    path = config.out_dir / "heldout" / "texts.parquet"
    if not path.exists() or not pl.read_parquet(path).equals(texts):
        write_parquet(texts.to_arrow(), path)
    return path, texts, origins


def _canaries(config: ExperimentConfig, corpus: Path | None) -> Path | None:
    """The canaries whose memorization is measured: the user's file, the demo corpus's, or none."""
    if not config.memorization.enabled:
        return None
    if config.memorization.canaries is not None:
        path = config.memorization.canaries
        try:
            columns = pl.read_parquet_schema(path)
        except (OSError, pl.exceptions.PolarsError) as error:
            raise ConfigError(f"memorization.canaries: {path} is not a Parquet file ({error})") from None
        missing = [c for c in ("id", "text", "occurrences") if c not in columns]
        if missing:
            raise ConfigError(
                f"memorization.canaries: {path} lacks the column(s) {', '.join(missing)}; it needs id, "
                "text and occurrences (0 for a control canary), and optionally pool_ids"
            )
        return path
    return _corpus_file(corpus, "canaries.parquet") if corpus is not None else None


def _canary_info(path: Path, runs: dict[str, RunConfig], memorization: dict) -> dict:
    """results.json's ``memorization`` header: the canaries (file, how many per occurrence count),
    the cut, and how often each variant's mixture trains on them (with ``pool_ids``)."""
    canaries = pl.read_parquet(path)
    counts = canaries.group_by("occurrences").len().sort("occurrences")
    some = next(result for seeds in memorization.values() for result in seeds.values())  # the cut is the same for all
    info = {
        "file": str(path),
        "sha256": file_sha256(path),
        "canaries": {("control" if n == 0 else str(n)): int(k) for n, k in counts.iter_rows()},
        "prefix_tokens": some["prefix_tokens"],
        "suffix_tokens": some["suffix_tokens"],
        "too_short": some["too_short"],
        "reference": "control canaries (each control against the others)",
    }
    if "pool_ids" in canaries.columns:
        info["trained"] = {
            name: canary_views(canaries, pl.read_parquet(RunLayout(run.run_dir).root / "mix" / name / PLAN_FILE))
            for name, run in runs.items()
        }
    return info


def _quality_model(config: ExperimentConfig, corpus: Path | None) -> Path | None:
    if not any(v.quality for v in config.variants):
        return None
    if config.quality_model is not None:
        return config.quality_model
    from pipeline.filters.quality import demo_training_texts, train_quality_classifier

    out = config.out_dir / "quality"
    if not (out / "model.json").exists() and not any(out.glob("*.bin")):
        positives, negatives = demo_training_texts(corpus, config.seed)
        train_quality_classifier(positives, negatives, out, seed=config.seed)
    return out


def _curate(data: dict) -> RunConfig:
    run = parse_config(data)
    open_run(run)
    curate_flow(run)
    return run


def _final_documents(run: RunConfig) -> pl.DataFrame:
    layout = RunLayout(run.run_dir)
    last = last_document_stage(read_json(layout.manifest)["stages"])
    return pl.scan_parquet(sorted(layout.stage(last).docs.glob("*.parquet"))).collect()


def _eval_folder(
    config: ExperimentConfig, texts_path: Path, texts: pl.DataFrame, tokenizer_path: Path
) -> tuple[Path, dict]:
    """The held-out sets' token shards and manifest (mixture format, validation only), written
    once for these texts and this tokenizer."""
    folder = config.out_dir / "heldout"
    manifest_path = folder / "manifest.json"
    made_from = {"texts_sha256": file_sha256(texts_path), "tokenizer_sha256": file_sha256(tokenizer_path)}
    if manifest_path.exists():
        manifest = read_json(manifest_path)
        if manifest.get("made_from") == made_from:
            return folder, manifest
    manifest = write_eval_folder(texts, tokenizer_path, folder, config.seed)
    manifest["made_from"] = made_from
    write_json(manifest, manifest_path)
    return folder, manifest


def _protected(config: ExperimentConfig, texts: pl.DataFrame, task_path: Path | None) -> tuple[Path, pl.DataFrame]:
    """``out_dir/heldout/protected.parquet``: the clean held-out sets and the task's texts
    (:func:`experiment.heldout.protected_texts`), every pool's ``mix.exclude``."""
    task = (
        pl.read_parquet(task_path, columns=["id", "text"])
        if task_path is not None
        else pl.DataFrame(schema={"id": pl.String, "text": pl.String})
    )
    protected = protected_texts(texts, task)
    path = config.out_dir / "heldout" / "protected.parquet"
    if not path.exists() or not pl.read_parquet(path).equals(protected):
        write_parquet(protected.to_arrow(), path)
    return path, protected


def _check_contamination(
    config: ExperimentConfig,
    variants: list[VariantConfig],
    runs: dict[str, RunConfig],
    protected: pl.DataFrame,
    tokenizer_path: Path,
    junk: pl.DataFrame | None = None,
) -> dict:
    """The contamination check on each of ``variants``' training mixture against the protected texts
    (and, reported apart, against the junk sets); ``contamination.json``; a
    :class:`ContaminationError` naming the variants when any training document shares a window
    with a protected text."""
    tokenizer = load_tokenizer(tokenizer_path)
    settings = {
        "ngram": config.decontamination.window_tokens or 13,
        "common_window_docs": config.decontamination.common_window_docs,
    }
    counts = {}
    for variant in variants:
        mixture = RunLayout(runs[variant.name].run_dir).root / "mix" / variant.name
        counts[variant.name] = check_contamination(mixture, protected, tokenizer, **settings)
        if junk is not None and junk.height:
            found = check_contamination(mixture, junk, tokenizer, **settings)
            counts[variant.name]["junk"] = {
                key: found[key] for key in ("texts", "contaminated_documents", "contaminated_windows", "common_windows")
            }
    write_json(counts, config.out_dir / "contamination.json")
    leaks = {name: contamination_total(check) for name, check in counts.items()}
    if any(leaks.values()):
        named = ", ".join(f"{name} {n}" for name, n in leaks.items() if n)
        raise ContaminationError(
            f"training documents share a {settings['ngram']}-token window with held-out or task text "
            f"({named}); see {config.out_dir / 'contamination.json'} and fix the exclusion before training"
        )
    return counts


def _train_config(
    config: ExperimentConfig, mixture: Path, out_dir: Path, seed: int, heldout: Path, budget: int | None = None
):
    from trainer.config import parse_train_config

    data = {
        **config.train,
        "mixture": str(mixture),
        "out_dir": str(out_dir),
        "seed": seed,
        "eval_mixtures": {EVAL_MIXTURE: str(heldout)},
    }
    if data.get("max_steps") is None and data.get("max_tokens") is None:
        data["max_tokens"] = budget or config.budget_tokens
    return parse_train_config(data)


@task(name="experiment-pretrain", cache_policy=NO_CACHE, task_run_name="pretrain-{variant}-seed{seed}")
def pretrain_task(variant: str, seed: int, train_config) -> dict:
    from trainer.train import check_same_config, train

    summary_path = train_config.out_dir / "summary.json"
    if summary_path.exists():
        summary = read_json(summary_path)
        check_same_config(summary["config"], train_config, summary_path)
        return summary
    return train(train_config, log=None)


@task(name="experiment-transfer", cache_policy=NO_CACHE, task_run_name="transfer-{model_name}-seed{seed}")
def transfer_task(
    model_name: str,
    seed: int,
    checkpoint: Path | None,
    model_shape: dict,
    tokenizer_path: Path,
    task_path: Path,
    config: ExperimentConfig,
    out_path: Path,
) -> dict:
    import torch

    from pipeline.formats.task import load_task
    from trainer.generate import load_model
    from trainer.model import GPT, GPTConfig
    from trainer.transfer import bag_of_words, evaluate_transfer

    if out_path.exists():
        return read_json(out_path)
    tokenizer = load_tokenizer(tokenizer_path)
    settings = transfer_settings(config)
    task = load_task(task_path)
    started = time.perf_counter()
    if model_name == BAG_OF_WORDS:
        results = bag_of_words(tokenizer, task, config.task.sizes, seed, settings)
    else:
        if checkpoint is None:
            torch.manual_seed(seed)
            model = GPT(GPTConfig(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), **model_shape))
        else:
            model, _, _ = load_model(checkpoint)
        results = evaluate_transfer(model, tokenizer, task, config.task.sizes, seed, settings)
    results["seconds"] = time.perf_counter() - started
    write_json(results, out_path)
    return results


def transfer_settings(config: ExperimentConfig):
    """The trainer's transfer settings from the experiment's ``[task]``."""
    from trainer.transfer import TransferSettings

    task, tune = config.task, config.task.finetune
    return TransferSettings(
        max_tokens=task.max_tokens,
        draws=task.draws,
        dev_docs=task.dev_docs,
        dev_seed=config.seed,
        probe_l2=tuple(task.probe_l2),
        bow_c=tuple(task.bow_c),
        finetune_sizes=None if tune.sizes is None else tuple(tune.sizes),
        finetune_draws=tune.draws,
        finetune_lrs=tuple(tune.lrs),
        finetune_batch=tune.batch,
        finetune_epochs=tune.epochs,
        finetune_min_steps=tune.min_steps,
        finetune_max_steps=tune.max_steps,
        finetune_warmup_steps=tune.warmup_steps,
        finetune_eval_every=tune.eval_every,
        finetune_patience=tune.patience,
        finetune_weight_decay=tune.weight_decay,
    )


@task(name="experiment-memorization", cache_policy=NO_CACHE, task_run_name="memorization-{variant}-seed{seed}")
def memorization_task(
    variant: str,
    seed: int,
    checkpoint: Path,
    tokenizer_path: Path,
    canaries_path: Path,
    prefix: int,
    suffix: int,
    out_path: Path,
) -> dict:
    """Extraction and exposure of every canary for one pretrained model (trainer.memorization):
    ``memorization/<variant>/seed-<s>.json``, per canary its occurrences in the raw pool, the
    leading suffix tokens greedy decoding gets right, exact extraction, the suffix loss, and
    exposure against the control canaries (each control against the other controls)."""
    import math

    from pipeline.formats.tokens import special_ids
    from trainer.generate import load_model
    from trainer.memorization import cut, exposure, extraction

    if out_path.exists():
        return read_json(out_path)
    started = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_path)
    canaries = pl.read_parquet(canaries_path, columns=["id", "text", "occurrences"])
    ids = [e.ids for e in tokenizer.encode_batch(canaries["text"].to_list(), add_special_tokens=False)]
    windows, kept = cut(ids, special_ids(tokenizer)["eod"], prefix, suffix)
    model, _, _ = load_model(checkpoint)
    scores = extraction(model, windows, prefix)
    occurrences = canaries["occurrences"].to_numpy()[kept]
    controls = scores["suffix_loss"][occurrences == 0]
    bits = exposure(scores["suffix_loss"], controls)
    # A control against the other C - 1: it is never strictly below itself, so its rank among all C
    # is its rank among the others, and only the ceiling changes, log2(C + 1) -> log2(C).
    bits[occurrences == 0] -= math.log2(len(controls) + 1) - math.log2(len(controls))
    result = {
        "prefix_tokens": prefix,
        "suffix_tokens": suffix,
        "controls": int((occurrences == 0).sum()),
        "too_short": canaries.height - len(kept),
        "canaries": {
            "id": canaries["id"].to_numpy()[kept].tolist(),
            "occurrences": occurrences.tolist(),
            "matched": scores["matched"].tolist(),
            "exact": scores["exact"].tolist(),
            "suffix_loss": scores["suffix_loss"].tolist(),
            "exposure": bits.tolist(),
        },
        "seconds": time.perf_counter() - started,
    }
    write_json(result, out_path)
    return result


@task(name="experiment-scores", cache_policy=NO_CACHE, task_run_name="scores-{variant}-seed{seed}")
def scores_task(
    variant: str, seed: int, checkpoint: Path, tokenizer_path: Path, texts_path: Path, out_path: Path
) -> dict:
    """Every held-out document scored whole by one pretrained model (trainer.scoring):
    ``scores/<variant>/seed-<s>.parquet`` with ``id, set, lang, clean, bytes, tokens, nats``; returns
    ``{"path", "documents", "seconds"}``."""
    from pipeline.formats.tokens import special_ids
    from trainer.generate import load_model
    from trainer.scoring import document_losses

    if out_path.exists():
        return {"path": str(out_path), "documents": pl.scan_parquet(out_path).select(pl.len()).collect().item()}
    started = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_path)
    texts = pl.read_parquet(texts_path, columns=["id", "text", "set", "lang", "clean"])
    ids = [e.ids for e in tokenizer.encode_batch(texts["text"].to_list(), add_special_tokens=False)]
    model, _, _ = load_model(checkpoint)
    nats, tokens = document_losses(model, ids, special_ids(tokenizer)["eod"])
    frame = texts.select(
        "id", "set", "lang", "clean", bytes=pl.col("text").str.len_bytes().cast(pl.Int64)
    ).with_columns(tokens=pl.Series(tokens, dtype=pl.Int64), nats=pl.Series(nats, dtype=pl.Float64))
    write_parquet(frame.to_arrow(), out_path)
    return {"path": str(out_path), "documents": frame.height, "seconds": time.perf_counter() - started}


def _curation_summary(run: RunConfig, variant: str, labels: pl.DataFrame | None) -> dict:
    layout = RunLayout(run.run_dir)
    manifest = read_json(layout.root / "mix" / variant / MANIFEST_FILE)
    pool = pl.read_parquet(layout.root / "mix" / "documents.parquet")
    plan = pl.read_parquet(layout.root / "mix" / variant / PLAN_FILE)
    stages = read_json(layout.manifest)["stages"]
    return {
        "run_dir": str(run.run_dir),
        "funnel": {name: {"docs_in": s["docs_in"], "docs_out": s["docs_out"]} for name, s in stages.items()},
        "documents_in": stages["source"]["docs_out"],
        "documents_curated": stages[last_document_stage(stages)]["docs_out"],
        "documents_mixed": stages["mix"]["train_documents"],
        "mixture": str(layout.root / "mix" / variant),
        "tokenizer_sha256": manifest["tokenizer"]["sha256"],
        "trained_on": trained_on(pool, plan, labels),
        "tokens_available": sum(g["tokens_available"] for g in manifest["groups"].values()),
        "tokens_taken": manifest["tokens_taken"],
        # Training tokens per licence (every copy of a repeated document) and their share.
        "licences": {
            licence: {"tokens": v["tokens_taken"], "share": v["tokens_taken"] / max(1, manifest["tokens_taken"])}
            for licence, v in manifest.get("licences", {}).items()
            if v["tokens_taken"]
        },
        "groups": {
            name: {
                key: g[key]
                for key in ("tokens_available", "tokens_taken", "epochs", "effective_weight", "documents_available")
            }
            for name, g in manifest["groups"].items()
        },
    }


def _curve_row(row: dict, summary: dict, eval_groups: dict) -> dict:
    """A metrics.csv row for the curves: step, tokens, training loss, own validation and held-out
    bits per byte (the headline: every evaluation reads the same tokens of each group as the last,
    whose token counts weigh the groups)."""
    final = summary.get("final_eval", {}).get(EVAL_MIXTURE, {}).get("groups", {})
    groups = {
        g: {"bpb": row.get(f"{EVAL_MIXTURE}_bpb/{g}"), "tokens": v.get("tokens")}
        for g, v in final.items()
        if row.get(f"{EVAL_MIXTURE}_bpb/{g}") is not None
    }
    scores = heldout_scores(groups, eval_groups) if groups else {}
    return {
        **{key: row.get(key) for key in ("step", "tokens_seen", "train_loss", "val_bpb")},
        "heldout_bpb": scores.get("heldout_bpb"),
    }


def _worker_threads(threads: int) -> None:
    """A pool process's setup: its share of the cores for torch."""
    import torch

    torch.set_num_threads(threads)


def _run_models(
    config: ExperimentConfig,
    pretraining: dict[tuple[str, int], dict],
    transfer_parameters,
    followups: dict[str, tuple] | None = None,
    transferred: set[str] | None = None,
) -> dict[str, dict[str, dict[int, dict]]]:
    """Every pretraining run (``pretrain_task``'s parameters per variant and seed), every
    transfer run (``transfer_parameters(model, seed)``; random init and the bag-of-words reference
    first, then each variant's in ``transferred`` (default: all) as soon as its pretraining is
    done), and every follow-up ``followups[kind] = (task, parameters(variant, seed), variants)`` of
    a pretrained model: in this process one after the other, or with ``parallel_runs`` > 1 that
    many at a time, each in a process of its own with its share of the cores.
    Returns ``{"pretrain": ..., "transfer": ..., <kind>: ...}``, each ``{model: {seed: result}}``."""
    followups = followups or {}
    results: dict[str, dict[str, dict[int, dict]]] = {"pretrain": {}, "transfer": {}, **{k: {} for k in followups}}
    references = [RANDOM, *([BAG_OF_WORDS] if config.task.bag_of_words else [])]
    if transferred is not None and not transferred:
        references = []  # no variant is transferred: no line to compare with
    unpretrained = [(name, seed) for name in references for seed in config.seeds]

    def after(key: tuple[str, int]) -> list:
        runs = []
        if transferred is None or key[0] in transferred:
            runs.append(("transfer", transfer_task, transfer_parameters(*key)))
        for kind, (run, parameters, names) in followups.items():
            if key[0] in names:
                runs.append((kind, run, parameters(*key)))
        return runs

    if config.parallel_runs == 1:
        for key, parameters in pretraining.items():
            results["pretrain"].setdefault(key[0], {})[key[1]] = pretrain_task(**parameters)
        for key in unpretrained:
            results["transfer"].setdefault(key[0], {})[key[1]] = transfer_task(**transfer_parameters(*key))
        for key in pretraining:
            for kind, run, parameters in after(key):
                results[kind].setdefault(key[0], {})[key[1]] = run(**parameters)
    else:
        from prefect.futures import as_completed
        from prefect.task_runners import ProcessPoolTaskRunner

        threads = max(1, (os.cpu_count() or 1) // config.parallel_runs)
        with ProcessPoolTaskRunner(
            max_workers=config.parallel_runs, initializer=_worker_threads, initargs=(threads,)
        ) as runner:
            started = {runner.submit(pretrain_task, parameters): key for key, parameters in pretraining.items()}
            later = {runner.submit(transfer_task, transfer_parameters(*key)): ("transfer", key) for key in unpretrained}
            for future in as_completed(list(started)):
                key = started[future]
                results["pretrain"].setdefault(key[0], {})[key[1]] = future.result()
                for kind, run, parameters in after(key):
                    later[runner.submit(run, parameters)] = (kind, key)
            for future, (kind, key) in later.items():
                results[kind].setdefault(key[0], {})[key[1]] = future.result()
    order = list(dict.fromkeys(name for name, _ in pretraining))
    return {
        kind: {
            name: dict(sorted(runs[name].items()))
            for name in (references if kind == "transfer" else []) + order
            if name in runs
        }
        for kind, runs in results.items()
    }


@dataclass
class Prepared:
    """What every training run of an experiment or a sweep starts from: the held-out sets and
    their token shards, the one tokenizer, each variant's curation run (its mixture within), and
    the contamination check of every mixture."""

    corpus: Path | None
    task_path: Path | None  # None: a sweep of the user's corpus with no task
    texts_path: Path
    texts: pl.DataFrame
    origins: dict
    canaries_path: Path | None
    tokenizer_path: Path
    heldout: Path
    eval_manifest: dict
    runs: dict[str, RunConfig]
    contamination: dict


def prepare(config: ExperimentConfig, variants: list[VariantConfig], timing: dict[str, float]) -> Prepared:
    """The corpus (demo), the held-out sets, the raw pool and the tokenizer from a seeded sample of
    it that holds no held-out text, one curation run per set of stages of ``variants`` (a mixture
    per variant, the held-out sets and the task excluded), and the contamination check of every
    mixture (:class:`ContaminationError` on a leak). Adds ``curation_s`` and
    ``contamination_check_s`` to ``timing``."""
    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    base, corpus = _base_curation(config)
    task_path = _task_file(config, corpus)
    texts_path, texts, origins = _heldout(config, corpus)
    quality = _quality_model(config, corpus)
    canaries_path = _canaries(config, corpus)

    # The raw pool (source stage only) and the one tokenizer, from a seeded sample of it that
    # holds no held-out text.
    tick = time.perf_counter()
    source_run = _curate(
        curation_config(base, [VariantConfig(name="source")], config, out / "curation" / "source", None, [], None)
    )
    tokenizer_path = out / "tokenizer.json"
    if not tokenizer_path.exists():
        # The canaries are probes, not text to learn merges from: left out like the held-out texts.
        left_out = (
            texts
            if canaries_path is None
            else pl.concat([texts.select("id", "text"), pl.read_parquet(canaries_path, columns=["id", "text"])])
        )
        sample = tokenizer_sample(_final_documents(source_run), left_out, config.tokenizer.sample_docs, config.seed)
        train_tokenizer(sample["text"], tokenizer_path, vocab_size=config.tokenizer.vocab_size)
    heldout, eval_manifest = _eval_folder(config, texts_path, texts, tokenizer_path)
    protected_path, protected = _protected(config, texts, task_path)

    runs: dict[str, RunConfig] = {}
    for key, group in config.curations(variants).items():
        run = _curate(
            curation_config(base, group, config, out / "curation" / key, tokenizer_path, [protected_path], quality)
        )
        for variant in group:
            runs[variant.name] = run
    timing["curation_s"] = time.perf_counter() - tick

    tick = time.perf_counter()
    contamination = _check_contamination(
        config,
        variants,
        runs,
        protected,
        tokenizer_path,
        junk=texts.filter(~pl.col("clean")).select("id", "text", "set"),
    )
    timing["contamination_check_s"] = time.perf_counter() - tick
    return Prepared(
        corpus, task_path, texts_path, texts, origins, canaries_path, tokenizer_path, heldout, eval_manifest, runs,
        contamination,
    )  # fmt: skip


@flow(name="experiment", validate_parameters=False)
def experiment_flow(config: ExperimentConfig) -> dict:
    """Run the experiment; return results.json's content."""
    from experiment.results import summarize

    config.require("experiment")
    if (config.out_dir / "results.json").exists() and read_json(config.out_dir / "results.json").get("kind"):
        raise ConfigError(
            f"out_dir: {config.out_dir} holds a sweep's results; give the experiment an out_dir of its own"
        )
    started = time.perf_counter()
    timing: dict[str, float] = {}
    out = config.out_dir
    prepared = prepare(config, config.all_variants(), timing)
    corpus, task_path, texts_path, texts = prepared.corpus, prepared.task_path, prepared.texts_path, prepared.texts
    canaries_path, tokenizer_path, runs = prepared.canaries_path, prepared.tokenizer_path, prepared.runs
    heldout, eval_manifest = prepared.heldout, prepared.eval_manifest

    tick = time.perf_counter()
    model_shape = _train_config(config, heldout, out / "unused", 0, heldout).model.model_dump()

    def transfer_parameters(name: str, seed: int) -> dict:
        checkpoint = None if name in (RANDOM, BAG_OF_WORDS) else out / "train" / name / f"seed-{seed}"
        return dict(
            model_name=name,
            seed=seed,
            checkpoint=checkpoint,
            model_shape=model_shape,
            tokenizer_path=tokenizer_path,
            task_path=task_path,
            config=config,
            out_path=out / "transfer" / name / f"seed-{seed}.json",
        )

    def memorization_parameters(name: str, seed: int) -> dict:
        return dict(
            variant=name,
            seed=seed,
            checkpoint=out / "train" / name / f"seed-{seed}",
            tokenizer_path=tokenizer_path,
            canaries_path=canaries_path,
            prefix=config.memorization.prefix_tokens,
            suffix=config.memorization.suffix_tokens,
            out_path=out / "memorization" / name / f"seed-{seed}.json",
        )

    def scores_parameters(name: str, seed: int) -> dict:
        return dict(
            variant=name,
            seed=seed,
            checkpoint=out / "train" / name / f"seed-{seed}",
            tokenizer_path=tokenizer_path,
            texts_path=texts_path,
            out_path=out / "scores" / name / f"seed-{seed}.parquet",
        )

    pretraining = {}
    for variant in config.all_variants():  # the data-efficiency runs pretrain only
        mixture = RunLayout(runs[variant.name].run_dir).root / "mix" / variant.name
        for seed in config.seeds:
            folder = out / "train" / variant.name / f"seed-{seed}"
            train_config = _train_config(config, mixture, folder, seed, heldout, variant.budget_tokens)
            pretraining[(variant.name, seed)] = dict(variant=variant.name, seed=seed, train_config=train_config)
    variants = [v.name for v in config.variants]
    followups = {}
    if canaries_path:
        followups["memorization"] = (memorization_task, memorization_parameters, set(variants))
    if config.languages.enabled:
        followups["scores"] = (scores_task, scores_parameters, set(variants))
    models = _run_models(
        config,
        pretraining,
        transfer_parameters,
        followups,
        transferred=set(variants if config.task.variants is None else config.task.variants),
    )
    summaries, transfer = models["pretrain"], models["transfer"]
    memorization, scores = models.get("memorization", {}), models.get("scores", {})
    timing["training_and_transfer_s"] = time.perf_counter() - tick

    labels = None
    if corpus is not None:  # the demo corpus's ground truth: a document's id is "<source>/<key>"
        labels = pl.read_parquet(corpus / "labels.parquet", columns=["source", "key", "kind"]).select(
            id=pl.col("source") + "/" + pl.col("key"), kind="kind"
        )
    curation = {
        v.name: {
            "stages": list(v.stages) + (["quality"] if v.quality else []),
            **_curation_summary(runs[v.name], v.name, labels),
        }
        for v in config.variants
    }
    from trainer.train import read_metrics

    curves = {
        name: {
            str(seed): [
                _curve_row(row, summaries[name][seed], eval_manifest["groups"])
                for row in read_metrics(out / "train" / name / f"seed-{seed}")
            ]
            for seed in config.seeds
        }
        for name in summaries
    }
    results = summarize(
        config,
        curation,
        summaries,
        transfer,
        eval_manifest,
        heldout_provenance(texts, prepared.origins, eval_manifest),
        prepared.contamination,
        curves,
        memorization=memorization or None,
        canaries=_canary_info(canaries_path, runs, memorization) if memorization else None,
        scores={
            name: {seed: pl.read_parquet(result["path"]) for seed, result in seeds.items()}
            for name, seeds in scores.items()
        },
    )
    timing["total_s"] = time.perf_counter() - started
    # What the runs took when they ran (an invocation that resumes reuses finished runs untimed).
    timing["pretraining_runs_s"] = sum(s["wall_time_s"] for runs in summaries.values() for s in runs.values())
    timing["transfer_runs_s"] = sum(t.get("seconds", 0.0) for runs in transfer.values() for t in runs.values())
    timing["memorization_runs_s"] = sum(m.get("seconds", 0.0) for runs in memorization.values() for m in runs.values())
    timing["scoring_runs_s"] = sum(m.get("seconds", 0.0) for runs in scores.values() for m in runs.values())
    timing["parallel_runs"] = config.parallel_runs
    results["timing"] = timing
    write_json(results, out / "results.json")
    from report.experiment import build_experiment_report

    build_experiment_report(out)
    return results
