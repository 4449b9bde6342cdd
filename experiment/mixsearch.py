"""The mixture search (``curate mixsearch``): which mixture of the pool's groups to train on, by
regression over small proxy runs (RegMix, Liu et al. 2025), validated at the experiment's size.

Steps (``flows.mixsearch`` runs them; every mixture is one of the pool variant's curation run)::

    baseline proxies      natural shares, temperatures and UniMax (``mixsearch.baselines``) at
                          ``proxy_tokens``: their mixtures give the groups and the tokens each holds
    sampled proxies       ``proxies`` mixtures drawn inside the constraints (experiment.mixfit)
    proxy runs            one small model per mixture (``mixsearch.proxy_train``), one seed, under
                          ``proxies/<name>/``: the name is the hash of everything the run is made
                          from (:func:`proxy_name`), so a stopped search resumes and a larger
                          ``proxies`` reuses the runs it has
    fits                  per target, trees, the mixing law and a log-linear model, each
                          cross-validated; the best one's optimum inside the constraints at the
                          validation budget is the proposal, with bootstrap intervals
    validation            the proposals and the baselines at the experiment's ``[train]`` and
                          ``budget_tokens`` over ``seeds`` (``train/<name>/seed-<s>/``), compared
                          seed by seed; the proxies' predicted order against the measured one
    results.json, report/index.html

The regression reads each proxy's effective token shares (its mixture's manifest: what the run
trained on), not the shares asked for.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from experiment.config import ExperimentConfig, MixsearchTarget, VariantConfig
from experiment.heldout import EVAL_MIXTURE
from experiment.results import language_metrics, run_metrics
from experiment.statistics import PRIMARY, compare, holm, sentence, spread
from experiment.task_results import final_task_metrics
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import MANIFEST_FILE
from pipeline.io.writer import read_json, write_json

KIND = "mixsearch"  # results.json's "kind": a search, an experiment and a sweep never share a folder
PROXIES = "proxies"  # out_dir/proxies/<name>/seed-<s>/: the proxy runs
PROPOSAL = "proposal-"  # the validation run of a target's proposal: proposal-<target>
SECONDARY = "secondary"  # each proposal against the other baselines on its own target
WEIGHT_DIGITS = 6  # a mixture's weights as hashed and as written in the mix config


@dataclass(frozen=True)
class Proxy:
    """One proxy run: its mixture (a variant of the pool's curation at ``proxy_tokens``), the
    label it is shown under (a baseline's name, or ``sample-<k>``) and its folder's name."""

    name: str
    label: str
    variant: VariantConfig

    def folder(self, out_dir: Path, seed: int) -> Path:
        return out_dir / PROXIES / self.name / f"seed-{seed}"


def pool_variant(config: ExperimentConfig) -> VariantConfig:
    """The variant whose curation run every mixture of the search re-samples."""
    chosen = config.mixsearch.pool or config.variants[0].name
    return next(v for v in config.variants if v.name == chosen)


def weighting(name: str) -> dict:
    """A baseline's weighting as variant fields: ``natural`` (T = 1), ``t<T>``, ``unimax``."""
    if name == "natural":
        return {"temperature": 1.0}
    if name == "unimax":
        return {"uniform": True}
    return {"temperature": float(name[1:])}


def mixture_variant(config: ExperimentConfig, name: str, budget: int, **weights) -> VariantConfig:
    """A mixture of the pool's curation: ``name``, ``budget`` tokens, the search's epoch cap, and
    ``weights`` (variant fields: temperature, uniform or weights)."""
    return pool_variant(config).model_copy(
        update={
            "name": name,
            "budget_tokens": budget,
            "max_epochs": config.mixsearch.max_epochs or config.max_epochs,
            "ablation_of": None,
            "temperature": None,
            "weights": None,
            "uniform": False,
            **weights,
        }
    )


def proxy_name(config: ExperimentConfig, weights: dict) -> str:
    """``p-<12 hex>``: the hash of what a proxy run is made from (its weighting, the pool's
    curation, the proxies' trainer config and tokens, the epoch cap, the seeds), so that a run
    found under that name is the run these settings would make."""
    search = config.mixsearch
    made_from = {
        "weights": weights,
        "pool": pool_variant(config).curation_key,
        "curation_seed": config.seed,
        "demo": [config.demo, config.demo_docs] if config.demo else str(config.curation),
        "group_by": [config.group_by, config.group_merge, config.group_min_share],
        "tokenizer": config.tokenizer.model_dump(),
        "train": config.proxy_train(seed=proxy_seed(config)),
        "max_epochs": search.max_epochs or config.max_epochs,
    }
    digest = hashlib.sha256(json.dumps(made_from, sort_keys=True, default=str).encode()).hexdigest()
    return f"p-{digest[:12]}"


def proxy_seed(config: ExperimentConfig) -> int:
    """The one seed every proxy trains with (the first of ``seeds``)."""
    return config.seeds[0]


def baseline_proxies(config: ExperimentConfig) -> list[Proxy]:
    """The baselines at ``proxy_tokens``, each a proxy run."""
    proxies = []
    for label in config.mixsearch.baselines:
        name = proxy_name(config, {"baseline": label})
        proxies.append(
            Proxy(name, label, mixture_variant(config, name, config.mixsearch.proxy_tokens, **weighting(label)))
        )
    return proxies


def sampled_proxies(config: ExperimentConfig, groups: list[str], weights: np.ndarray) -> list[Proxy]:
    """A proxy per row of ``weights`` (shares of ``groups``), labelled ``sample-<k>``."""
    proxies = []
    for k, row in enumerate(weights):
        shares = {group: round(float(w), WEIGHT_DIGITS) for group, w in zip(groups, row)}
        name = proxy_name(config, shares)
        variant = mixture_variant(config, name, config.mixsearch.proxy_tokens, weights=shares)
        proxies.append(Proxy(name, f"sample-{k}", variant))
    return proxies


def mixture_folder(run_dir: Path, name: str) -> Path:
    return RunLayout(run_dir).root / "mix" / name


def mixture_shares(folder: Path) -> dict[str, float]:
    """The token shares a mixture took per group (its manifest's ``tokens_taken``): what a run on
    it trained on."""
    groups = read_json(folder / MANIFEST_FILE)["groups"]
    total = sum(g["tokens_taken"] for g in groups.values())
    return {name: g["tokens_taken"] / total if total else 0.0 for name, g in sorted(groups.items())}


def pool_tokens(folder: Path) -> dict[str, int]:
    """The training tokens each group of the pool holds (a mixture's ``tokens_available``)."""
    return {name: int(g["tokens_available"]) for name, g in sorted(read_json(folder / MANIFEST_FILE)["groups"].items())}


def constraints(config: ExperimentConfig, tokens: dict[str, int], budget: int):
    """The search's constraints over the pool's groups (experiment.mixfit.Constraints); a
    :class:`ConfigError` naming the groups when ``min_share`` or ``max_share`` names none of them,
    or when no mixture can meet them."""
    from experiment.mixfit import Constraints

    search = config.mixsearch
    for key, named in (("min_share", search.min_share), ("max_share", search.max_share)):
        unknown = sorted(set(named) - set(tokens))
        if unknown:
            raise ConfigError(
                f"mixsearch.{key}: {unknown[0]!r} is not a group of the pool; the groups are {', '.join(tokens)}"
            )
    try:
        return Constraints.of(
            tokens,
            budget,
            search.max_epochs or config.max_epochs,
            min_share=dict(search.min_share),
            max_share=dict(search.max_share),
        )
    except ValueError as error:
        raise ConfigError(f"mixsearch: {error}") from None


def proxy_train_config(config: ExperimentConfig, proxy: Proxy, run_dir: Path, heldout: Path, curve_tasks: Path | None):
    """The trainer's config of a proxy run (ExperimentConfig.proxy_train), on its mixture."""
    from trainer.config import parse_train_config

    seed = proxy_seed(config)
    return parse_train_config(
        config.proxy_train(
            mixture=str(mixture_folder(run_dir, proxy.name)),
            out_dir=str(proxy.folder(config.out_dir, seed)),
            seed=seed,
            eval_mixtures={EVAL_MIXTURE: str(heldout)},
            eval_tasks=[str(curve_tasks)] if curve_tasks is not None else [],
        )
    )


def needs_scores(config: ExperimentConfig) -> bool:
    """Whether a target weighs a language's held-out text (every document scored whole)."""
    return any(target.uses("lang_bpb/") for target in config.mixsearch.targets)


def target_languages(config: ExperimentConfig) -> list[str] | None:
    """The languages a proxy's held-out documents are scored in: those the targets name (a
    proxy needs no other), or None (all) when a target weighs a macro-average over languages."""
    codes = {key.split("/", 1)[1] for t in config.mixsearch.targets for key in t.metrics if key.startswith("lang_bpb/")}
    return None if codes & {"low-resource", "high-resource"} else sorted(codes)


def run_measures(
    summary: dict, eval_groups: dict[str, dict], scores: pl.DataFrame | None, high_resource: list[str]
) -> dict[str, float]:
    """Every bits-per-byte measure of one run: held-out sets and groups, the curve items' tasks at
    its last evaluation, and with ``scores`` each language's held-out text."""
    measures = {**run_metrics(summary, eval_groups), **final_task_metrics(summary)}
    if scores is not None:
        measures.update(language_metrics(scores, high_resource))
    return {key: value for key, value in measures.items() if value is not None and math.isfinite(value)}


def target_value(target: MixsearchTarget, measures: dict[str, float]) -> float | None:
    """The target's weighted sum of measures; None when a run lacks one of them."""
    if any(key not in measures for key in target.metrics):
        return None
    return float(sum(weight * measures[key] for key, weight in target.metrics.items()))


def check_targets(config: ExperimentConfig, measures: dict[str, dict[str, float]]) -> None:
    """A :class:`ConfigError` naming a target's measure that no proxy run recorded, with the
    measures they did record."""
    recorded = set.intersection(*(set(m) for m in measures.values())) if measures else set()
    for target in config.mixsearch.targets:
        missing = [key for key in target.metrics if key not in recorded]
        if missing:
            shown = ", ".join(sorted(k for k in recorded if "/" not in k or k.count("/") == 1))
            raise ConfigError(
                f"mixsearch.targets {target.name}: no proxy run measured {missing[0]!r}; they measured {shown}"
            )


def validation_variants(config: ExperimentConfig, proposals: dict[str, dict[str, float]]) -> dict[str, VariantConfig]:
    """The runs at the experiment's size by label: each baseline (its run named after it), then
    each target's proposal (``proposal-<target>``, its run ``proposal-<target>-<8 hex>``, the hash
    of its weights: a search that proposes another mixture trains it again beside the first)."""
    budget = config.budget_tokens
    variants = {
        label: mixture_variant(config, label, budget, **weighting(label)) for label in config.mixsearch.baselines
    }
    for target, proposed in proposals.items():
        weights = {g: round(w, WEIGHT_DIGITS) for g, w in proposed.items()}
        digest = hashlib.sha256(json.dumps(weights, sort_keys=True).encode()).hexdigest()[:8]
        variants[PROPOSAL + target] = mixture_variant(config, f"{PROPOSAL}{target}-{digest}", budget, weights=weights)
    return variants


# ---------------------------------------------------------------------------------------------
# What the runs measured, gathered


def proxy_table(config: ExperimentConfig, proxies: list[Proxy], run_dir: Path, measures: dict[str, dict]) -> list[dict]:
    """Each proxy run: its name, label, the shares it trained on and its measures."""
    return [
        {
            "name": proxy.name,
            "label": proxy.label,
            "shares": mixture_shares(mixture_folder(run_dir, proxy.name)),
            "measures": measures[proxy.name],
            "targets": {t.name: target_value(t, measures[proxy.name]) for t in config.mixsearch.targets},
        }
        for proxy in proxies
    ]


def search_target(
    config: ExperimentConfig, target: MixsearchTarget, table: list[dict], groups: list[str], bounds
) -> dict:
    """One target's fits (every family, cross-validated) and the proposal of the best one."""
    from experiment.mixfit import choose_fit, propose

    rows = [row for row in table if row["targets"][target.name] is not None]
    weights = np.array([[row["shares"].get(g, 0.0) for g in groups] for row in rows])
    values = np.array([row["targets"][target.name] for row in rows])
    search = config.mixsearch
    chosen = choose_fit(weights, values, config.seed)
    proposal = propose(
        chosen["family"],
        weights,
        values,
        bounds,
        config.seed,
        candidates=search.candidates,
        top_k=search.top_k,
        resamples=search.resamples,
    )
    return {
        "target": target.model_dump(),
        "proxies": len(rows),
        "fit": chosen,
        "proposal": proposal,
        "natural": dict(zip(groups, map(float, bounds.natural))),
    }


def proxy_validity(
    config: ExperimentConfig, target: str, fits: dict, table: list[dict], groups: list[str], validated: dict
) -> dict:
    """The chosen model's predicted order of the validated mixtures (from the proxies) against the
    order their runs at the experiment's size measured (Spearman over the mixtures' means)."""
    from experiment.mixfit import predict_order

    rows = [row for row in table if row["targets"][target] is not None]
    weights = np.array([[row["shares"].get(g, 0.0) for g in groups] for row in rows])
    values = np.array([row["targets"][target] for row in rows])
    names = [name for name, entry in validated.items() if entry["targets"][target]["mean"] is not None]
    mixtures = np.array([[validated[name]["shares"].get(g, 0.0) for g in groups] for name in names])
    predicted = predict_order(fits[target]["fit"]["family"], weights, values, mixtures, config.seed)
    measured = [validated[name]["targets"][target]["mean"] for name in names]
    rho = float(stats.spearmanr(predicted, measured).statistic) if len(names) >= 3 else None
    return {
        "mixtures": names,
        "predicted": [float(p) for p in predicted],
        "measured": measured,
        "spearman": None if rho is None or math.isnan(rho) else rho,
    }


def validation_table(
    config: ExperimentConfig, runs: dict[str, dict[int, dict]], names: dict[str, str], run_dir: Path
) -> dict[str, dict]:
    """Per validated mixture by label: its runs' name, the shares it trained on, the spread over
    seeds of every measure and of every target (``runs[label][seed]``: the measures of one run,
    ``names[label]``: the name of its runs and mixture)."""
    table = {}
    for label, seeds in runs.items():
        keys = set.intersection(*(set(m) for m in seeds.values()))
        table[label] = {
            "run": names[label],
            "shares": mixture_shares(mixture_folder(run_dir, names[label])),
            "measures": {key: spread({str(s): m[key] for s, m in seeds.items()}) for key in sorted(keys)},
            "targets": {
                t.name: spread({str(s): target_value(t, m) for s, m in seeds.items()}) for t in config.mixsearch.targets
            },
        }
    return table


def validation_comparisons(config: ExperimentConfig, table: dict[str, dict]) -> list[dict]:
    """Each target's proposal against each baseline on that target, paired by seed: against
    ``mixsearch.primary`` the primary family (Holm over the targets, named before the run), the
    others secondary; with the sentence each supports."""
    search = config.mixsearch
    made = []
    for target in search.targets:
        a = PROPOSAL + target.name
        for baseline in search.baselines:
            family = PRIMARY if baseline == search.primary else SECONDARY
            sides = table[a]["targets"][target.name], table[baseline]["targets"][target.name]
            made.append({"target": target.name, "a": a, "b": baseline, "family": family, **compare(*sides, True)})
    for family in (PRIMARY, SECONDARY):
        holm([c for c in made if c["family"] == family])
    for c in made:
        sides = table[c["a"]]["targets"][c["target"]], table[c["b"]]["targets"][c["target"]]
        c["sentence"] = sentence(f"target {c['target']}", c["a"], c["b"], *sides, c, True)
    return made


def group_tradeoff(config: ExperimentConfig, table: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """What each proposal gains or pays on every held-out set and group, every language and the
    tasks, against ``mixsearch.primary`` (paired by seed; descriptive: no correction)."""
    primary = config.mixsearch.primary
    found: dict[str, dict[str, dict]] = {}
    for target in config.mixsearch.targets:
        a = PROPOSAL + target.name
        keys = sorted(set(table[a]["measures"]) & set(table[primary]["measures"]))
        found[a] = {
            key: compare(table[a]["measures"][key], table[primary]["measures"][key], True)
            for key in keys
            if key.endswith("bpb") or "_bpb/" in key
        }
    return found


def search_results(
    config: ExperimentConfig, bounds, run_dir: Path, table: list[dict], fits: dict, contamination: dict, sampling: dict
) -> dict:
    """results.json of a search before its validation: the groups and the pool's tokens, the
    constraints at the validation size, the draws (``sampling``: drawn, and rejected by a
    constraint and drawn again), every proxy run and each target's fits and proposal."""
    groups = list(bounds.groups)
    return {
        "kind": KIND,
        "config": config.model_dump(mode="json"),
        "groups": groups,
        "pool": {"run_dir": str(run_dir), "tokens": dict(zip(groups, map(int, bounds.available)))},
        "constraints": {
            "budget": int(bounds.budget),
            "max_epochs": float(bounds.max_epochs),
            "min_share": dict(zip(groups, map(float, bounds.min_share))),
            "upper": dict(zip(groups, map(float, bounds.upper))),
        },
        "sampling": sampling,
        "proxies": table,
        "fits": fits,
        "contamination": contamination,
    }


def validation_results(
    config: ExperimentConfig, runs: dict, names: dict[str, str], run_dir: Path, table: list[dict], fits: dict
) -> dict:
    """results.json's ``validation``: every validated mixture over seeds, the comparisons (primary
    first), each proposal's trade-off per set, group and language, and the proxies' validity."""
    groups = list(next(iter(fits.values()))["natural"])
    validated = validation_table(config, runs, names, run_dir)
    return {
        "runs": validated,
        "comparisons": validation_comparisons(config, validated),
        "tradeoff": group_tradeoff(config, validated),
        "validity": {t: proxy_validity(config, t, fits, table, groups, validated) for t in fits},
    }


def refuse_other_results(config: ExperimentConfig) -> None:
    """A :class:`ConfigError` when ``out_dir`` holds an experiment's or a sweep's results."""
    path = config.out_dir / "results.json"
    if path.exists() and read_json(path).get("kind") != KIND:
        raise ConfigError(
            f"out_dir: {config.out_dir} holds another study's results; give the search an out_dir of its own"
        )


def save_search_results(config: ExperimentConfig, results: dict, timing: dict) -> None:
    results["timing"] = timing
    write_json(results, config.out_dir / "results.json")
