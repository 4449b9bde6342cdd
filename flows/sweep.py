"""The scaling-law sweep flow (``curate sweep CONFIG``): an experiment config's variants, held-out
sets, tokenizer and decontamination, and its ``[sweep]`` grid of model sizes and token budgets
(:mod:`experiment.sweep`) instead of the experiment's runs.

Steps, all under ``out_dir`` (give a sweep a folder of its own)::

    corpus, heldout/, curation/, tokenizer.json, contamination.json   as in the experiment, with one
                          mixture per variant and budget (``<variant>-<budget>``)
    train/<variant>-<budget>/<model>/seed-<s>/   each run (trainer.train), skipped when done
    results.json          every run's held-out loss, the fits and the comparisons
    report/index.html     loss against tokens per model size with the fitted curves, the iso-FLOP
                          frontier per variant, the fitted parameters with intervals

An interrupted sweep continues where it stopped: finished runs are read back (refused if their
config differs), unfinished ones resume from their checkpoint.
"""

from __future__ import annotations

import time

from prefect import flow

from experiment.config import ExperimentConfig
from experiment.sweep import refuse_experiment_folder, save_sweep_results, summarize_sweep, sweep_curation, sweep_runs
from flows.experiment import _run_models, prepare


@flow(name="sweep", validate_parameters=False)
def sweep_flow(config: ExperimentConfig) -> dict:
    """Run the sweep; return results.json's content."""
    config.require("sweep")
    refuse_experiment_folder(config)
    started = time.perf_counter()
    timing: dict[str, float] = {}
    prepared = prepare(config, config.sweep_variants(), timing)

    tick = time.perf_counter()
    runs = sweep_runs(config, prepared.runs, prepared.heldout, prepared.curve_tasks)
    pretraining = {
        key: dict(variant=cell.name, seed=cell.seed, train_config=train_config)
        for key, (cell, train_config) in runs.items()
    }
    trained = _run_models(config, pretraining, None, transferred=set())["pretrain"]
    timing["training_s"] = time.perf_counter() - tick

    tick = time.perf_counter()
    summaries = {cell: trained[name][seed] for (name, seed), (cell, _) in runs.items()}
    results = summarize_sweep(
        config,
        summaries,
        prepared.eval_manifest["groups"],
        sweep_curation(config, prepared.runs),
        prepared.contamination,
    )
    timing["fits_s"] = time.perf_counter() - tick
    timing["total_s"] = time.perf_counter() - started
    save_sweep_results(config, results, timing, summaries)
    from report.sweep import build_sweep_report

    build_sweep_report(config.out_dir)
    return results
