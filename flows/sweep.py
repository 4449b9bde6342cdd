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

from experiment.config import ExperimentConfig, budget_label
from experiment.sweep import KIND, grid, summarize_sweep, train_data
from flows.experiment import _run_models, prepare
from pipeline.config import RunConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import MANIFEST_FILE
from pipeline.io.writer import read_json, write_json


def _mixtures(config: ExperimentConfig, runs: dict[str, RunConfig]) -> dict[str, dict]:
    """Per variant of the sweep: what its curation kept (the funnel) and, per budget, the tokens its
    pool holds, the tokens its mixture takes and the most epochs of any group."""
    info = {}
    for name in config.sweep_names():
        mixtures = {budget: f"{name}-{budget_label(budget)}" for budget in config.sweep.tokens}
        layout = RunLayout(runs[mixtures[config.sweep.tokens[0]]].run_dir)
        stages = read_json(layout.manifest)["stages"]
        budgets = {}
        for budget, mixture in mixtures.items():
            manifest = read_json(layout.root / "mix" / mixture / MANIFEST_FILE)
            budgets[str(budget)] = {
                "mixture": str(layout.root / "mix" / mixture),
                "tokens_available": sum(g["tokens_available"] for g in manifest["groups"].values()),
                "tokens_taken": manifest["tokens_taken"],
                "max_epochs": max(g["epochs"] for g in manifest["groups"].values()),
            }
        info[name] = {
            "run_dir": str(layout.root),
            "funnel": {stage: {"docs_in": s["docs_in"], "docs_out": s["docs_out"]} for stage, s in stages.items()},
            "budgets": budgets,
        }
    return info


@flow(name="sweep", validate_parameters=False)
def sweep_flow(config: ExperimentConfig) -> dict:
    """Run the sweep; return results.json's content."""
    from trainer.config import parse_train_config

    config.require("sweep")
    results_path = config.out_dir / "results.json"
    if results_path.exists() and read_json(results_path).get("kind") != KIND:
        raise ConfigError(
            f"out_dir: {config.out_dir} holds an experiment's results; give the sweep an out_dir of its own"
        )
    started = time.perf_counter()
    timing: dict[str, float] = {}
    prepared = prepare(config, config.sweep_variants(), timing)

    tick = time.perf_counter()
    cells = {}
    pretraining = {}
    # The longest runs first, so that runs side by side end together (the matmuls' parameters,
    # the head's included, times the tokens).
    vocab = config.tokenizer.vocab_size
    for cell in sorted(
        grid(config), key=lambda c: -c.tokens * c.model.n_embd * (12 * c.model.n_layer * c.model.n_embd + vocab)
    ):
        mixture = RunLayout(prepared.runs[cell.mixture].run_dir).root / "mix" / cell.mixture
        train_config = parse_train_config(train_data(config, cell, mixture, prepared.heldout))
        pretraining[(cell.name, cell.seed)] = dict(variant=cell.name, seed=cell.seed, train_config=train_config)
        cells[(cell.name, cell.seed)] = cell
    trained = _run_models(config, pretraining, None, transferred=set())["pretrain"]
    timing["training_s"] = time.perf_counter() - tick

    tick = time.perf_counter()
    summaries = {cell: trained[name][seed] for (name, seed), cell in cells.items()}
    results = summarize_sweep(
        config, summaries, prepared.eval_manifest["groups"], _mixtures(config, prepared.runs), prepared.contamination
    )
    timing["fits_s"] = time.perf_counter() - tick
    timing["total_s"] = time.perf_counter() - started
    timing["training_runs_s"] = sum(s["wall_time_s"] for s in summaries.values())
    timing["parallel_runs"] = config.parallel_runs
    results["timing"] = timing
    write_json(results, results_path)
    from report.sweep import build_sweep_report

    build_sweep_report(config.out_dir)
    return results
