"""The mixture search flow (``curate mixsearch CONFIG``): an experiment config's pool variant,
held-out sets, tokenizer and decontamination, and its ``[mixsearch]`` section
(:mod:`experiment.mixsearch`): proxy runs on sampled mixtures, a regression per target, its
proposal, and the proposals validated against the baselines at the experiment's size.

Steps, all under ``out_dir`` (give a search a folder of its own)::

    corpus, heldout/, curation/, tokenizer.json, contamination.json   as in the experiment, with one
                          mixture per proxy and per validated mixture
    proxies/<name>/seed-<s>/   each proxy run (and its document scores), found by name when done
    train/<name>/seed-<s>/     each validation run: the baselines and proposal-<target>
    results.json          the proxies, the fits, the proposals, the validation and its comparisons
    report/index.html

An interrupted search continues where it stopped: finished runs are read back (refused if their
config differs), unfinished ones resume from their checkpoint.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import polars as pl
from prefect import flow

from experiment.config import ExperimentConfig, VariantConfig
from experiment.mixfit import sample_mixtures
from experiment.mixsearch import (
    Proxy,
    baseline_proxies,
    check_targets,
    constraints,
    mixture_folder,
    needs_scores,
    pool_tokens,
    proxy_seed,
    proxy_table,
    proxy_train_config,
    refuse_other_results,
    run_measures,
    sampled_proxies,
    save_search_results,
    search_results,
    search_target,
    target_languages,
    validation_results,
    validation_variants,
)
from experiment.prepare import Prepared
from experiment.runs import train_config, train_folder
from flows.experiment import _run_models, prepare, scores_task


def _scores_parameters(
    prepared: Prepared, folders: dict[tuple[str, int], Path], languages: list[str] | None, name: str, seed: int
) -> dict:
    folder = folders[(name, seed)]
    return dict(
        variant=name,
        seed=seed,
        checkpoint=folder,
        tokenizer_path=prepared.tokenizer_path,
        texts_path=prepared.texts_path,
        # named by what it holds, so that a target in another language scores the documents again
        out_path=folder / ("scores.parquet" if languages is None else f"scores-{'+'.join(languages)}.parquet"),
        languages=languages,
    )


def _train(
    config: ExperimentConfig, prepared: Prepared, configs: dict[tuple[str, int], object], languages=None
) -> dict:
    """Every run of ``configs`` (by name and seed), with its held-out documents (of ``languages``;
    None: all) scored whole when a target weighs a language; returns ``{name: {seed: measures}}``."""
    pretraining = {key: dict(variant=key[0], seed=key[1], train_config=c) for key, c in configs.items()}
    folders = {key: c.out_dir for key, c in configs.items()}
    followups = {}
    if needs_scores(config):
        names = {name for name, _ in configs}
        followups["scores"] = (scores_task, partial(_scores_parameters, prepared, folders, languages), names)
    done = _run_models(config, pretraining, None, followups, transferred=set())
    measures: dict[str, dict[int, dict]] = {}
    for (name, seed), _ in configs.items():
        scores = done.get("scores", {}).get(name, {}).get(seed)
        frame = pl.read_parquet(scores["path"]) if scores else None
        summary = done["pretrain"][name][seed]
        measures.setdefault(name, {})[seed] = run_measures(
            summary, prepared.eval_manifest["groups"], frame, config.languages.high_resource
        )
    return measures


def _prepare(config: ExperimentConfig, variants: list[VariantConfig], timing: dict) -> Prepared:
    """flows.experiment.prepare, its times added to ``timing``'s (the search prepares three times:
    each step's mixtures join the curation run's)."""
    spent: dict[str, float] = {}
    prepared = prepare(config, variants, spent)
    for key, seconds in spent.items():
        timing[key] = timing.get(key, 0.0) + seconds
    return prepared


def _proxies(config: ExperimentConfig, timing: dict) -> tuple[list[Proxy], object, Prepared]:
    """The baseline proxies' curation (it gives the pool's groups and tokens), the sampled mixtures
    inside the constraints, and every proxy's mixture made; returns the proxies, the constraints
    at the validation size and what was prepared."""
    search = config.mixsearch
    baselines = baseline_proxies(config)
    prepared = _prepare(config, [p.variant for p in baselines], timing)
    run_dir = prepared.runs[baselines[0].name].run_dir
    tokens = pool_tokens(mixture_folder(run_dir, baselines[0].name))
    sampled = sample_mixtures(constraints(config, tokens, search.proxy_tokens), search.proxies, config.seed,
                              search.concentration)  # fmt: skip
    timing["sampling"] = {"drawn": search.proxies, "rejected": sampled.rejected}
    proxies = baselines + sampled_proxies(config, list(tokens), sampled.weights)
    prepared = _prepare(config, [p.variant for p in proxies], timing)
    return proxies, constraints(config, tokens, config.budget_tokens or search.proxy_tokens), prepared


def _validate(
    config: ExperimentConfig, proxies: list[Proxy], fits: dict, timing: dict
) -> tuple[dict, dict[str, str], Prepared]:
    """The proposals and the baselines at the experiment's size over ``seeds``: each one's
    measures per seed and the name of its runs, by label."""
    variants = validation_variants(config, {name: fit["proposal"]["weights"] for name, fit in fits.items()})
    prepared = _prepare(config, [p.variant for p in proxies] + list(variants.values()), timing)
    run_dir = prepared.runs[proxies[0].name].run_dir
    configs = {
        (variant.name, seed): train_config(
            config,
            mixture_folder(run_dir, variant.name),
            train_folder(config.out_dir, variant.name, seed),
            seed,
            prepared.heldout,
            variant.budget_tokens,
            prepared.curve_tasks,
        )
        for variant in variants.values()
        for seed in config.seeds
    }
    trained = _train(config, prepared, configs)
    names = {label: variant.name for label, variant in variants.items()}
    return {label: trained[name] for label, name in names.items()}, names, prepared


@flow(name="mixsearch", validate_parameters=False)
def mixsearch_flow(config: ExperimentConfig) -> dict:
    """Run the search; return results.json's content."""
    config.require("mixsearch")
    refuse_other_results(config)
    started = time.perf_counter()
    timing: dict[str, float] = {}
    proxies, bounds, prepared = _proxies(config, timing)
    run_dir = prepared.runs[proxies[0].name].run_dir

    tick = time.perf_counter()
    seed = proxy_seed(config)
    configs = {
        (p.name, seed): proxy_train_config(config, p, run_dir, prepared.heldout, prepared.curve_tasks) for p in proxies
    }
    trained = _train(config, prepared, configs, target_languages(config))  # a proxy scores what targets weigh
    measures = {name: seeds[seed] for name, seeds in trained.items()}
    timing["proxies_s"] = time.perf_counter() - tick
    check_targets(config, measures)

    tick = time.perf_counter()
    groups = list(bounds.groups)
    table = proxy_table(config, proxies, run_dir, measures)
    fits = {t.name: search_target(config, t, table, groups, bounds) for t in config.mixsearch.targets}
    timing["fits_s"] = time.perf_counter() - tick
    results = search_results(config, bounds, run_dir, table, fits, prepared.contamination, timing.pop("sampling"))
    if config.mixsearch.validation:  # the proposals on disk (and on the page) before the long part
        _save(config, results, {**timing, "total_s": time.perf_counter() - started})
        tick = time.perf_counter()
        runs, names, prepared = _validate(config, proxies, fits, timing)
        results["validation"] = validation_results(config, runs, names, run_dir, table, fits)
        results["contamination"] = prepared.contamination
        timing["validation_s"] = time.perf_counter() - tick
    timing["total_s"] = time.perf_counter() - started
    _save(config, results, timing)
    return results


def _save(config: ExperimentConfig, results: dict, timing: dict) -> None:
    """results.json and the report."""
    from report.mixsearch import build_mixsearch_report

    save_search_results(config, results, timing)
    build_mixsearch_report(config.out_dir)
