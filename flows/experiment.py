"""The experiment flow (pipeline.experiment): curated vs raw mixtures of one raw pool, trained
alike over several seeds, compared on a clean reference set and on transfer to a downstream task.

Steps, all under ``out_dir``::

    corpus (demo)         the demo corpus, unless there is one                .cache/demo-corpus
    task.parquet          the downstream task (demo: BBC News topics)
    quality/              the fastText quality model, when a variant uses it (demo: trained here)
    curation/reference/   the most curated variant's documents, no tokens
    reference/            texts.parquet: the clean reference set sampled from them; its token
                          shards and manifest (mixture format, validation only)
    tokenizer.json        one tokenizer for every variant, trained on the reference run's
                          documents less the reference set
    curation/<stages>/    one curation run per distinct set of stages, one mixture per variant,
                          the task and the reference set excluded (near-duplicates too)
    train/<variant>/seed-<s>/     pretraining (trainer.train), reference set evaluated throughout
    transfer/<model>/seed-<s>.json  probe and fine-tuning scores (model: random or a variant)
    results.json, report/index.html

Each step is skipped when its output is complete (curation runs resume; training resumes from
its checkpoint; a transfer file is written last), so an interrupted experiment continues.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.curate import curate_flow
from pipeline.config import RunConfig, load_config, parse_config
from pipeline.experiment import ExperimentConfig, curation_config, reference_sample
from pipeline.io.writer import read_json, write_json, write_parquet
from pipeline.manifest import open_run
from pipeline.schema import RunLayout
from pipeline.steps import DOCUMENT_STAGES
from pipeline.tokenize import (file_sha256, load_tokenizer, special_ids, token_dtype, train_tokenizer,
                               write_token_shard)

RANDOM = "random"  # the transfer baseline: the same architecture, not pretrained


def _base_curation(config: ExperimentConfig) -> tuple[dict, Path | None]:
    """The curation settings variants derive from, and the demo corpus folder (demo only)."""
    if config.demo:
        from flows.demo import DEMO_CORPUS_DIR, demo_config
        from pipeline.demo_corpus import build_demo_corpus

        corpus = config.corpus_dir or (DEMO_CORPUS_DIR if config.demo_docs == 20_000 else DEMO_CORPUS_DIR.with_name(
            f"demo-corpus-{config.demo_docs}-0"))
        build_demo_corpus(corpus, docs=config.demo_docs, seed=0)
        return demo_config(corpus), corpus
    return load_config(config.curation).model_dump(mode="json", exclude={"run_dir"}), None


def _task_file(config: ExperimentConfig) -> Path:
    if config.task.path is not None:
        return config.task.path
    from pipeline.tasks import demo_topic_task

    path = config.out_dir / "task.parquet"
    if not path.exists():
        demo_topic_task(path, config.task.train_docs, config.task.test_docs, seed=config.seed)
    return path


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
    stages = [s for s in DOCUMENT_STAGES if s in read_json(layout.manifest)["stages"]]
    return pl.scan_parquet(sorted(layout.stage(stages[-1]).docs.glob("*.parquet"))).collect()


def _reference_set(config: ExperimentConfig, tokenizer_path: Path) -> Path:
    """Write the reference set's token shards and manifest (mixture format, validation only)."""
    folder = config.out_dir / "reference"
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        return folder
    texts = pl.read_parquet(folder / "texts.parquet")
    tokenizer = load_tokenizer(tokenizer_path)
    (folder / "tokenizer.json").write_bytes(tokenizer_path.read_bytes())
    entries, groups = [], {}
    for (group,), rows in texts.group_by(["group"], maintain_order=True):
        stem = group.replace("/", "+")
        entry = write_token_shard(zip(rows["id"].to_list(), rows["text"].to_list()), tokenizer,
                                  folder / "validation" / f"{stem}-0000.arrow", group)
        size = int(rows["text"].str.len_bytes().sum())
        entries.append({"file": f"validation/{entry['file']}", "group": group, "documents": entry["documents"],
                        "tokens": entry["tokens"], "bytes": size, "sha256": entry["sha256"]})
        groups[group] = {"validation_documents": entry["documents"], "validation_tokens": entry["tokens"],
                         "validation_bytes": size}
    ids = special_ids(tokenizer)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    write_json({
        "format": "curate.mixture/1", "mixture": "reference", "seed": config.seed,
        "tokenizer": {"file": "tokenizer.json", "sha256": file_sha256(tokenizer_path),
                      "vocab_size": vocab_size, "dtype": token_dtype(vocab_size).name, "eod_id": ids["eod"],
                      "pad_id": ids["pad"], "mask_id": ids["mask"], "cls_id": ids["cls"]},
        "groups": dict(sorted(groups.items())), "train": [], "validation": entries,
    }, manifest_path)
    return folder


def _train_config(config: ExperimentConfig, mixture: Path, out_dir: Path, seed: int, reference: Path):
    from trainer.config import parse_train_config

    data = {**config.train, "mixture": str(mixture), "out_dir": str(out_dir), "seed": seed,
            "eval_mixtures": {"reference": str(reference)}}
    if data.get("max_steps") is None and data.get("max_tokens") is None:
        data["max_tokens"] = config.budget_tokens
    return parse_train_config(data)


@task(name="experiment-pretrain", cache_policy=NO_CACHE, task_run_name="pretrain-{variant}-seed{seed}")
def pretrain_task(variant: str, seed: int, train_config) -> dict:
    from trainer.train import train

    summary_path = train_config.out_dir / "summary.json"
    if summary_path.exists():
        return read_json(summary_path)
    return train(train_config, log=None)


@task(name="experiment-transfer", cache_policy=NO_CACHE, task_run_name="transfer-{model_name}-seed{seed}")
def transfer_task(model_name: str, seed: int, checkpoint: Path | None, model_shape: dict, tokenizer_path: Path,
                  task_path: Path, config: ExperimentConfig, out_path: Path) -> dict:
    import torch

    from pipeline.tasks import load_task
    from trainer.generate import load_model
    from trainer.model import GPT, GPTConfig
    from trainer.transfer import TransferSettings, evaluate_transfer

    if out_path.exists():
        return read_json(out_path)
    tokenizer = load_tokenizer(tokenizer_path)
    if checkpoint is None:
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), **model_shape))
    else:
        model, _, _ = load_model(checkpoint)
    settings = TransferSettings(max_tokens=config.task.max_tokens, probe_l2=config.task.probe_l2,
                                finetune_steps=config.task.finetune_steps, finetune_batch=config.task.finetune_batch,
                                finetune_lr=config.task.finetune_lr)
    started = time.perf_counter()
    results = evaluate_transfer(model, tokenizer, load_task(task_path), config.task.sizes, seed, settings,
                                finetuning=config.task.finetune)
    results["seconds"] = time.perf_counter() - started
    write_json(results, out_path)
    return results


def _curation_summary(run: RunConfig, variant: str) -> dict:
    layout = RunLayout(run.run_dir)
    manifest = read_json(layout.root / "mix" / variant / "manifest.json")
    stages = read_json(layout.manifest)["stages"]
    documents = [name for name in DOCUMENT_STAGES if name in stages]
    return {"run_dir": str(run.run_dir),
            "funnel": {name: {"docs_in": s["docs_in"], "docs_out": s["docs_out"]} for name, s in stages.items()},
            "documents_in": stages["source"]["docs_out"], "documents_curated": stages[documents[-1]]["docs_out"],
            "documents_mixed": stages["mix"]["train_documents"],
            "mixture": str(layout.root / "mix" / variant),
            "tokens_available": sum(g["tokens_available"] for g in manifest["groups"].values()),
            "tokens_taken": manifest["tokens_taken"],
            "groups": {name: {key: g[key] for key in ("tokens_available", "tokens_taken", "epochs",
                                                       "effective_weight", "documents_available")}
                       for name, g in manifest["groups"].items()}}


@flow(name="experiment", validate_parameters=False)
def experiment_flow(config: ExperimentConfig) -> dict:
    """Run the experiment; return results.json's content."""
    from pipeline.experiment import summarize

    started = time.perf_counter()
    timing: dict[str, float] = {}
    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    base, corpus = _base_curation(config)
    task_path = _task_file(config)
    quality = _quality_model(config, corpus)

    # The reference run: the most curated variant's documents; the clean reference set from them;
    # the shared tokenizer from the rest.
    tick = time.perf_counter()
    most = config.most_curated()
    reference_run = _curate(curation_config(base, [most], config, out / "curation" / "reference", None, [], quality))
    texts_path = out / "reference" / "texts.parquet"
    docs = _final_documents(reference_run)
    if not texts_path.exists():
        write_parquet(reference_sample(docs, list(config.group_by), config.reference, config.seed).to_arrow(),
                      texts_path)
    tokenizer_path = out / "tokenizer.json"
    if not tokenizer_path.exists():
        held = pl.read_parquet(texts_path)["id"]
        pool = docs.filter(~pl.col("id").is_in(held.implode()))
        sample = pool.sample(n=min(config.tokenizer.sample_docs, pool.height), seed=config.seed).sort("id")
        train_tokenizer(sample["text"], tokenizer_path, vocab_size=config.tokenizer.vocab_size)
    reference = _reference_set(config, tokenizer_path)
    del docs

    runs: dict[str, RunConfig] = {}
    for key, variants in config.curations().items():
        run = _curate(curation_config(base, variants, config, out / "curation" / key, tokenizer_path,
                                      [texts_path, task_path], quality))
        for variant in variants:
            runs[variant.name] = run
    timing["curation_s"] = time.perf_counter() - tick

    tick = time.perf_counter()
    summaries: dict[str, dict[int, dict]] = {}
    futures = {}
    for variant in config.variants:
        mixture = RunLayout(runs[variant.name].run_dir).root / "mix" / variant.name
        for seed in config.seeds:
            train_config = _train_config(config, mixture, out / "train" / variant.name / f"seed-{seed}", seed,
                                         reference)
            futures[(variant.name, seed)] = pretrain_task(variant.name, seed, train_config)
    for (name, seed), summary in futures.items():
        summaries.setdefault(name, {})[seed] = summary
    timing["training_s"] = time.perf_counter() - tick

    tick = time.perf_counter()
    model_shape = _train_config(config, reference, out / "unused", 0, reference).model.model_dump()
    transfer: dict[str, dict[int, dict]] = {}
    for name in [RANDOM, *(v.name for v in config.variants)]:
        for seed in config.seeds:
            checkpoint = None if name == RANDOM else out / "train" / name / f"seed-{seed}"
            transfer.setdefault(name, {})[seed] = transfer_task(
                name, seed, checkpoint, model_shape, tokenizer_path, task_path, config,
                out / "transfer" / name / f"seed-{seed}.json")
    timing["transfer_s"] = time.perf_counter() - tick

    curation = {v.name: {"stages": list(v.stages) + (["quality"] if v.quality else []),
                         **_curation_summary(runs[v.name], v.name)} for v in config.variants}
    from trainer.train import read_metrics

    curves = {name: {str(seed): [{key: row.get(key) for key in ("step", "tokens_seen", "train_loss", "val_bpb",
                                                                 "reference_bpb")}
                                 for row in read_metrics(out / "train" / name / f"seed-{seed}")]
                     for seed in config.seeds} for name in summaries}
    results = summarize(config, curation, summaries, transfer, read_json(reference / "manifest.json"), curves)
    timing["total_s"] = time.perf_counter() - started
    # What the runs took when they ran (an invocation that resumes reuses finished runs untimed).
    timing["pretraining_runs_s"] = sum(s["wall_time_s"] for runs in summaries.values() for s in runs.values())
    timing["transfer_runs_s"] = sum(t.get("seconds", 0.0) for runs in transfer.values() for t in runs.values())
    results["timing"] = timing
    write_json(results, out / "results.json")
    from pipeline.report.experiment import build_experiment_report

    build_experiment_report(out)
    return results
