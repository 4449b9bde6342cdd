"""One run of an experiment, as a task runs it: pretraining a variant's model on its mixture
(:func:`pretrain`, its training config from :func:`train_config`), transfer to the downstream task
(:func:`transfer`: label-efficiency curves of a pretrained model, of the same architecture not
pretrained, or of the bag-of-words reference), memorization of the planted canaries
(:func:`measure_memorization`), every held-out document scored whole (:func:`score_documents`), and
the multiple-choice tasks scored by likelihood (:func:`score_tasks`).

Each run writes one file under ``out_dir`` (its folder: :func:`train_folder`) and returns what it
wrote; a run whose file is there already reads it back. Torch and the trainer are imported by the
run that needs them.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from experiment.config import ExperimentConfig
from experiment.heldout import EVAL_MIXTURE
from pipeline.config import RunConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.mixture import MANIFEST_FILE
from pipeline.formats.tokens import file_sha256, load_tokenizer
from pipeline.io.writer import read_json, write_json, write_parquet

RANDOM = "random"  # the transfer baseline: the same architecture, not pretrained
BAG_OF_WORDS = "bag-of-words"  # the transfer reference line: no model, TF-IDF and logistic regression


def train_folder(out: Path, model: str, seed: int) -> Path:
    """Where a variant's pretraining run of one seed writes (and its checkpoint is)."""
    return out / "train" / model / f"seed-{seed}"


def train_config(
    config: ExperimentConfig,
    mixture: Path,
    out_dir: Path,
    seed: int,
    heldout: Path,
    budget: int | None = None,
    curve_tasks: Path | None = None,
):
    """The trainer's config of one pretraining run: the experiment's ``[train]`` on ``mixture``,
    evaluated on the held-out sets (and scored on the ``curve_tasks`` items at every evaluation),
    trained to ``budget`` (default: the experiment's) tokens unless ``[train]`` names its steps or
    tokens."""
    from trainer.config import parse_train_config

    data = {
        **config.train,
        "mixture": str(mixture),
        "out_dir": str(out_dir),
        "seed": seed,
        "eval_mixtures": {EVAL_MIXTURE: str(heldout)},
        "eval_tasks": [str(curve_tasks)] if curve_tasks is not None else [],
    }
    if data.get("max_steps") is None and data.get("max_tokens") is None:
        data["max_tokens"] = budget or config.budget_tokens
    return parse_train_config(data)


def shared_model_shape(config: ExperimentConfig, heldout: Path) -> dict:
    """The model's shape every run shares (the untrained model of a transfer run is built to it)."""
    return train_config(config, heldout, config.out_dir / "unused", 0, heldout).model.model_dump()


def pretraining_configs(
    config: ExperimentConfig, runs: dict[str, RunConfig], heldout: Path, curve_tasks: Path | None = None
) -> dict:
    """Every pretraining run's training config by ``(variant, seed)``: each variant's (the
    data-efficiency runs included) on its mixture, over the seeds; the variants' own (not the
    data-efficiency runs') score ``curve_tasks`` at every evaluation."""
    own = {v.name for v in config.variants}
    configs = {}
    for variant in config.all_variants():  # the data-efficiency runs pretrain only
        mixture = RunLayout(runs[variant.name].run_dir).root / "mix" / variant.name
        for seed in config.seeds:
            folder = train_folder(config.out_dir, variant.name, seed)
            curves = curve_tasks if variant.name in own else None
            configs[(variant.name, seed)] = train_config(
                config, mixture, folder, seed, heldout, variant.budget_tokens, curves
            )
    return configs


def pretrain(training, log=None) -> dict:
    """Pretrain on ``training`` (a TrainConfig; trainer.train, given ``log``), or read back a
    finished run's summary (refused if it was trained with another config or on another mixture:
    the curation or the tokenizer changed since)."""
    from trainer.state import check_same_config
    from trainer.train import train

    summary_path = training.out_dir / "summary.json"
    if summary_path.exists():
        summary = read_json(summary_path)
        check_same_config(summary["config"], training, summary_path)
        was, now = summary.get("mixture_manifest_sha256"), file_sha256(Path(training.mixture) / MANIFEST_FILE)
        if was is not None and was != now:
            raise ConfigError(
                f"mixture: {summary_path} was trained on another mixture (manifest sha256 {was[:12]}, now "
                f"{now[:12]}: its curation or the tokenizer changed); use another out_dir, or delete "
                f"{summary_path.parent} to train it again"
            )
        return summary
    return train(training, log=log)


def transfer(
    model_name: str,
    seed: int,
    checkpoint: Path | None,
    model_shape: dict,
    tokenizer_path: Path,
    task_path: Path,
    config: ExperimentConfig,
    out_path: Path,
) -> dict:
    """The label-efficiency curves of one model on the task (trainer.transfer): the bag-of-words
    reference, the model of ``model_shape`` not pretrained (``checkpoint`` None, seeded), or the
    pretrained one at ``checkpoint``; written to ``out_path``."""
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


def measure_memorization(
    checkpoint: Path, tokenizer_path: Path, canaries_path: Path, prefix: int, suffix: int, out_path: Path
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


def score_documents(
    checkpoint: Path, tokenizer_path: Path, texts_path: Path, out_path: Path, languages: list[str] | None = None
) -> dict:
    """Every held-out document (of ``languages``, their ``lang`` codes; None: all) scored whole by
    one pretrained model (trainer.scoring): ``scores/<variant>/seed-<s>.parquet`` with
    ``id, set, lang, clean, bytes, tokens, nats``; returns ``{"path", "documents", "seconds"}``."""
    from pipeline.formats.tokens import special_ids
    from trainer.generate import load_model
    from trainer.scoring import document_losses

    if out_path.exists():
        return {"path": str(out_path), "documents": pl.scan_parquet(out_path).select(pl.len()).collect().item()}
    started = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_path)
    texts = pl.read_parquet(texts_path, columns=["id", "text", "set", "lang", "clean"])
    if languages is not None:
        texts = texts.filter(pl.col("lang").is_in(languages))
    ids = [e.ids for e in tokenizer.encode_batch(texts["text"].to_list(), add_special_tokens=False)]
    model, _, _ = load_model(checkpoint)
    nats, tokens = document_losses(model, ids, special_ids(tokenizer)["eod"])
    frame = texts.select(
        "id", "set", "lang", "clean", bytes=pl.col("text").str.len_bytes().cast(pl.Int64)
    ).with_columns(tokens=pl.Series(tokens, dtype=pl.Int64), nats=pl.Series(nats, dtype=pl.Float64))
    write_parquet(frame.to_arrow(), out_path)
    return {"path": str(out_path), "documents": frame.height, "seconds": time.perf_counter() - started}


def score_tasks(checkpoint: Path, task_paths: list[Path], batch: int, out_path: Path) -> dict:
    """Every multiple-choice item of ``task_paths`` scored by likelihood by one pretrained model
    (trainer.likelihood): ``tasks/<variant>/seed-<s>.json``, the metrics per task (and group) with
    each file's sha256, and beside it ``.parquet``, per item whether the gold choice won (by sum
    and per byte), its bits per byte and margin, which the paired bootstrap over seeds and items
    reads. A result for other items (a task file changed) is scored again."""
    from trainer.generate import load_model
    from trainer.likelihood import read_choice_files, score_choices

    items_path = out_path.with_suffix(".parquet")
    if out_path.exists() and items_path.exists():
        found = read_json(out_path)
        if [entry["sha256"] for entry in found["files"]] == [file_sha256(path) for path in task_paths]:
            return found  # scored on these very items already; other items are scored again
    started = time.perf_counter()
    loaded = read_choice_files(task_paths)
    model, tokenizer, info = load_model(checkpoint)
    results, per_item = score_choices(model, tokenizer, loaded, batch=batch)
    write_parquet(per_item.to_arrow(), items_path)
    results = {"checkpoint": str(checkpoint), "step": info.get("step"), **results}
    results["seconds"] = time.perf_counter() - started
    write_json(results, out_path)
    return results
