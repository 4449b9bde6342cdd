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
                          pool less the held-out texts; tokenizer.made_from.json: what it was
                          trained on (trained again when that changes)
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
    tasks/items/<task>.jsonl          the built-in multiple-choice tasks (experiment.tasks), from
                          the held-out sets and the task's articles
    tasks/<variant>/seed-<s>.json     every task scored by likelihood (and .parquet, per item)
    results.json, report/index.html

Each step is skipped when its output is complete (curation runs resume; training resumes from
its checkpoint; a transfer file is written last), so an interrupted experiment continues; a
finished pretraining run on a mixture that has changed since is refused, not read back.

What each step computes and writes is in ``experiment.prepare``, ``experiment.runs`` and
``experiment.collect``; here are the flow, its tasks and how they are submitted (one after the
other, or ``parallel_runs`` at a time in processes of their own).
"""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from experiment.collect import experiment_results, refuse_sweep_folder, save_results
from experiment.config import ExperimentConfig, VariantConfig
from experiment.prepare import (
    Prepared,
    check_mixtures,
    choice_task_files,
    curve_task_file,
    eval_folder,
    gather_inputs,
    junk_texts,
    owned_tokenizer,
    pool_tokenizer,
    source_curation,
    variant_curations,
    write_protected,
)
from experiment.runs import (
    BAG_OF_WORDS,
    RANDOM,
    measure_memorization,
    pretrain,
    pretraining_configs,
    score_documents,
    score_tasks,
    shared_model_shape,
    train_folder,
    transfer,
)
from flows.curate import curate_flow
from flows.train import trainer_log
from pipeline.config import RunConfig, parse_config
from pipeline.formats.documents import RunLayout
from pipeline.stages.rerun import open_run
from pipeline.stages.source import check_quarantine, check_readers
from trainer.config import ModelSection


@task(name="experiment-pretrain", cache_policy=NO_CACHE, task_run_name="pretrain-{variant}-seed{seed}")
def pretrain_task(variant: str, seed: int, train_config) -> dict:
    """One pretraining run (experiment.runs.pretrain); the trainer's warnings (a checkpoint skipped)
    reach the log, its progress lines do not."""
    return pretrain(train_config, log=trainer_log(progress=False))


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
    """One model's transfer to the task (experiment.runs.transfer)."""
    return transfer(model_name, seed, checkpoint, model_shape, tokenizer_path, task_path, config, out_path)


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
    """The canaries' extraction and exposure for one pretrained model (experiment.runs.measure_memorization)."""
    return measure_memorization(checkpoint, tokenizer_path, canaries_path, prefix, suffix, out_path)


@task(name="experiment-scores", cache_policy=NO_CACHE, task_run_name="scores-{variant}-seed{seed}")
def scores_task(
    variant: str,
    seed: int,
    checkpoint: Path,
    tokenizer_path: Path,
    texts_path: Path,
    out_path: Path,
    languages: list[str] | None = None,
) -> dict:
    """Every held-out document (of ``languages``; None: all) scored whole by one pretrained model
    (experiment.runs.score_documents)."""
    return score_documents(checkpoint, tokenizer_path, texts_path, out_path, languages)


@task(name="experiment-tasks", cache_policy=NO_CACHE, task_run_name="tasks-{variant}-seed{seed}")
def tasks_task(variant: str, seed: int, checkpoint: Path, task_paths: list[Path], batch: int, out_path: Path) -> dict:
    """The multiple-choice tasks scored by one pretrained model (experiment.runs.score_tasks)."""
    return score_tasks(checkpoint, task_paths, batch, out_path)


def _worker_threads(threads: int) -> None:
    """A pool process's setup: its share of the cores for torch."""
    import torch

    torch.set_num_threads(threads)


def _put(results: dict, kind: str, key: tuple[str, int], result: dict) -> None:
    results[kind].setdefault(key[0], {})[key[1]] = result


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
        _run_in_turn(results, pretraining, unpretrained, transfer_parameters, after)
    else:
        _run_in_pool(config.parallel_runs, results, pretraining, unpretrained, transfer_parameters, after)
    order = list(dict.fromkeys(name for name, _ in pretraining))
    return {
        kind: {
            name: dict(sorted(runs[name].items()))
            for name in (references if kind == "transfer" else []) + order
            if name in runs
        }
        for kind, runs in results.items()
    }


def _run_in_turn(results: dict, pretraining: dict, unpretrained: list, transfer_parameters, after) -> None:
    """:func:`_run_models` in this process: every pretraining, the references' transfer, then each
    pretrained model's transfer and follow-ups."""
    for key, parameters in pretraining.items():
        _put(results, "pretrain", key, pretrain_task(**parameters))
    for key in unpretrained:
        _put(results, "transfer", key, transfer_task(**transfer_parameters(*key)))
    for key in pretraining:
        for kind, run, parameters in after(key):
            _put(results, kind, key, run(**parameters))


def _run_in_pool(
    workers: int, results: dict, pretraining: dict, unpretrained: list, transfer_parameters, after
) -> None:
    """:func:`_run_models` on ``workers`` processes, each with its share of the cores: a pretrained
    model's transfer and follow-ups are submitted as soon as its pretraining is done."""
    from prefect.futures import as_completed
    from prefect.task_runners import ProcessPoolTaskRunner

    threads = max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolTaskRunner(max_workers=workers, initializer=_worker_threads, initargs=(threads,)) as runner:
        started = {runner.submit(pretrain_task, parameters): key for key, parameters in pretraining.items()}
        later = {runner.submit(transfer_task, transfer_parameters(*key)): ("transfer", key) for key in unpretrained}
        for future in as_completed(list(started)):
            key = started[future]
            _put(results, "pretrain", key, future.result())
            for kind, run, parameters in after(key):
                later[runner.submit(run, parameters)] = (kind, key)
        for future, (kind, key) in later.items():
            _put(results, kind, key, future.result())


def _curate(data: dict) -> RunConfig:
    run = parse_config(data)
    check_readers(run.sources)
    open_run(run)
    curate_flow(run)
    check_quarantine(RunLayout(run.run_dir).stage("source"), run)
    return run


def prepare(config: ExperimentConfig, variants: list[VariantConfig], timing: dict[str, float]) -> Prepared:
    """The corpus (demo), the held-out sets, the raw pool and the tokenizer from a seeded sample of
    it that holds no held-out text, one curation run per set of stages of ``variants`` (a mixture
    per variant, the held-out sets and the task excluded), and the contamination check of every
    mixture (:class:`ContaminationError` on a leak). Adds ``curation_s`` and
    ``contamination_check_s`` to ``timing``."""
    owned_tokenizer(config)  # a tokenizer.json the experiment did not write: refused before any work
    inputs = gather_inputs(config)

    # The raw pool (source stage only) and the one tokenizer, from a seeded sample of it that
    # holds no held-out text.
    tick = time.perf_counter()
    source_run = _curate(source_curation(config, inputs))
    tokenizer_path = pool_tokenizer(config, source_run, inputs)
    heldout, eval_manifest = eval_folder(config, inputs.texts_path, inputs.texts, tokenizer_path)
    protected_path, protected = write_protected(config, inputs.texts, inputs.task_path)
    block_size = ModelSection(**(config.train.get("model") or {})).block_size
    choice_tasks = choice_task_files(config, inputs.texts, inputs.task_path, tokenizer_path, block_size)
    runs: dict[str, RunConfig] = {}
    for group, data in variant_curations(config, variants, inputs, tokenizer_path, protected_path):
        run = _curate(data)
        for variant in group:
            runs[variant.name] = run
    timing["curation_s"] = time.perf_counter() - tick

    tick = time.perf_counter()
    contamination = check_mixtures(config, variants, runs, protected, tokenizer_path, junk=junk_texts(inputs.texts))
    timing["contamination_check_s"] = time.perf_counter() - tick
    return Prepared(
        inputs.corpus, inputs.task_path, inputs.texts_path, inputs.texts, inputs.origins, inputs.canaries_path,
        tokenizer_path, heldout, eval_manifest, runs, contamination, choice_tasks,
        curve_task_file(config, choice_tasks),
    )  # fmt: skip


def _transfer_parameters(config: ExperimentConfig, prepared: Prepared, model_shape: dict, name: str, seed: int) -> dict:
    checkpoint = None if name in (RANDOM, BAG_OF_WORDS) else train_folder(config.out_dir, name, seed)
    return dict(
        model_name=name,
        seed=seed,
        checkpoint=checkpoint,
        model_shape=model_shape,
        tokenizer_path=prepared.tokenizer_path,
        task_path=prepared.task_path,
        config=config,
        out_path=config.out_dir / "transfer" / name / f"seed-{seed}.json",
    )


def _memorization_parameters(config: ExperimentConfig, prepared: Prepared, name: str, seed: int) -> dict:
    return dict(
        variant=name,
        seed=seed,
        checkpoint=train_folder(config.out_dir, name, seed),
        tokenizer_path=prepared.tokenizer_path,
        canaries_path=prepared.canaries_path,
        prefix=config.memorization.prefix_tokens,
        suffix=config.memorization.suffix_tokens,
        out_path=config.out_dir / "memorization" / name / f"seed-{seed}.json",
    )


def _scores_parameters(config: ExperimentConfig, prepared: Prepared, name: str, seed: int) -> dict:
    return dict(
        variant=name,
        seed=seed,
        checkpoint=train_folder(config.out_dir, name, seed),
        tokenizer_path=prepared.tokenizer_path,
        texts_path=prepared.texts_path,
        out_path=config.out_dir / "scores" / name / f"seed-{seed}.parquet",
    )


def _tasks_parameters(config: ExperimentConfig, prepared: Prepared, name: str, seed: int) -> dict:
    return dict(
        variant=name,
        seed=seed,
        checkpoint=train_folder(config.out_dir, name, seed),
        task_paths=prepared.choice_tasks,
        batch=config.choice_tasks.batch,
        out_path=config.out_dir / "tasks" / name / f"seed-{seed}.json",
    )


def _train_and_transfer(config: ExperimentConfig, prepared: Prepared) -> dict[str, dict[str, dict[int, dict]]]:
    """Every pretraining run (the data-efficiency runs pretrain only), then the transfer runs, the
    memorization of the canaries and the scores of the held-out documents (see :func:`_run_models`)."""
    model_shape = shared_model_shape(config, prepared.heldout)
    pretraining = {
        key: dict(variant=key[0], seed=key[1], train_config=train_config)
        for key, train_config in pretraining_configs(
            config, prepared.runs, prepared.heldout, prepared.curve_tasks
        ).items()
    }
    variants = [v.name for v in config.variants]
    followups = {}
    if prepared.canaries_path:
        followups["memorization"] = (
            memorization_task,
            partial(_memorization_parameters, config, prepared),
            set(variants),
        )
    if prepared.choice_tasks:
        followups["tasks"] = (tasks_task, partial(_tasks_parameters, config, prepared), set(variants))
    if config.languages.enabled:
        followups["scores"] = (scores_task, partial(_scores_parameters, config, prepared), set(variants))
    return _run_models(
        config,
        pretraining,
        partial(_transfer_parameters, config, prepared, model_shape),
        followups,
        transferred=set(variants if config.task.variants is None else config.task.variants),
    )


@flow(name="experiment", validate_parameters=False)
def experiment_flow(config: ExperimentConfig) -> dict:
    """Run the experiment; return results.json's content."""
    config.require("experiment")
    refuse_sweep_folder(config)
    started = time.perf_counter()
    timing: dict[str, float] = {}
    prepared = prepare(config, config.all_variants(), timing)

    tick = time.perf_counter()
    models = _train_and_transfer(config, prepared)
    timing["training_and_transfer_s"] = time.perf_counter() - tick

    results = experiment_results(config, prepared, models)
    timing["total_s"] = time.perf_counter() - started
    save_results(config, results, timing, models)
    from report.experiment import build_experiment_report

    build_experiment_report(config.out_dir)
    return results
