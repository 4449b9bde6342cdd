"""What every training run of an experiment or a sweep starts from, step by step (the flow runs the
curation runs between them): the demo corpus, the held-out sets and where they came from, the
task, the quality model and the canaries (:func:`gather_inputs`); the curation config of the raw
pool and of each set of stages (:func:`source_curation`, :func:`variant_curations`); the one
tokenizer, trained on a seeded sample of the raw pool that holds no held-out text
(:func:`pool_tokenizer`); the held-out sets' token shards (:func:`eval_folder`); the protected texts
every pool excludes (:func:`write_protected`); and the contamination check of every training
mixture (:func:`check_mixtures`, :class:`ContaminationError` on a leak). :class:`Prepared` holds
what they made.

Each step writes its file under ``out_dir`` once and finds it there when it runs again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from experiment.config import ExperimentConfig, VariantConfig, curation_config
from experiment.heldout import (
    contamination_total,
    heldout_texts,
    protected_texts,
    read_eval_set,
    tokenizer_sample,
    write_eval_folder,
)
from experiment.tasks import write_built_tasks
from pipeline.config import RunConfig, load_config
from pipeline.decontaminate import check_contamination
from pipeline.formats.choices import (
    lm_eval_task_name,
    lm_eval_task_yaml,
    read_choice_items,
    write_choice_items,
    write_lm_eval_task,
)
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.hashing import seeded_id_hash
from pipeline.formats.manifest import stage_outputs
from pipeline.formats.mixture import MANIFEST_FILE
from pipeline.formats.task import load_task
from pipeline.formats.tokens import file_sha256, load_tokenizer
from pipeline.io.writer import read_json, write_json, write_parquet
from pipeline.stages.registry import last_document_stage
from pipeline.tokenizer import train_tokenizer

SALT_CURVES = 0x43555256  # "CURV": the curve items' sample


class ContaminationError(RuntimeError):
    """A training mixture shares token windows with held-out or task text."""


@dataclass
class Inputs:
    """What the curation runs start from: the curation settings variants derive from, the demo
    corpus (demo only), the task, the held-out sets, the quality model and the canaries."""

    base: dict
    corpus: Path | None
    task_path: Path | None  # None: a sweep of the user's corpus with no task
    texts_path: Path
    texts: pl.DataFrame
    origins: dict
    quality: Path | None
    canaries_path: Path | None


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
    choice_tasks: list[Path]  # the multiple-choice items files every pretrained model is scored on
    curve_tasks: Path | None  # the items every pretraining run scores at each evaluation


def gather_inputs(config: ExperimentConfig) -> Inputs:
    """``out_dir`` made; the corpus (demo), the task, the held-out sets, the quality model and the
    canaries, in that order."""
    config.out_dir.mkdir(parents=True, exist_ok=True)
    base, corpus = base_curation(config)
    task_path = task_file(config, corpus)
    texts_path, texts, origins = heldout_sets(config, corpus)
    quality = quality_model(config, corpus)
    canaries_path = canaries_file(config, corpus)
    return Inputs(base, corpus, task_path, texts_path, texts, origins, quality, canaries_path)


def build_corpus(corpus: Path, config: ExperimentConfig) -> dict:
    """Build (or find) the demo corpus, its held-out sets and its task."""
    from demo.corpus import build_demo_corpus

    return build_demo_corpus(
        corpus,
        docs=config.demo_docs,
        seed=0,
        task_train_docs=config.task.train_docs,
        task_test_docs=config.task.test_docs,
    )


def base_curation(config: ExperimentConfig) -> tuple[dict, Path | None]:
    """The curation settings variants derive from, and the demo corpus folder (demo only)."""
    if config.demo:
        from demo.config import DEMO_CORPUS_DIR, demo_config

        corpus = config.corpus_dir or (
            DEMO_CORPUS_DIR
            if config.demo_docs == 20_000
            else DEMO_CORPUS_DIR.with_name(f"demo-corpus-{config.demo_docs}-0")
        )
        build_corpus(corpus, config)
        return demo_config(corpus), corpus
    return load_config(config.curation).model_dump(mode="json", exclude={"run_dir"}), None


def corpus_file(corpus: Path, name: str) -> Path:
    path = corpus / "heldout" / name
    if not path.is_file():
        raise ConfigError(
            f"the demo corpus at {corpus} has no heldout/{name}; it was built by an older version: "
            "delete the folder and run again to rebuild it"
        )
    return path


def task_file(config: ExperimentConfig, corpus: Path | None) -> Path | None:
    """The downstream task: the user's file, or the demo corpus's (its articles and their copies
    entered no pool); None for a sweep of the user's corpus that names none."""
    if config.task.path is not None:
        return config.task.path
    return corpus_file(corpus, "task.parquet") if corpus is not None else None


def heldout_sets(config: ExperimentConfig, corpus: Path | None) -> tuple[Path, pl.DataFrame, dict]:
    """``out_dir/heldout/texts.parquet``: the demo corpus's held-out sets and the user's; their
    texts and where each set came from."""
    frames, origins = [], {}
    if corpus is not None:
        path = corpus_file(corpus, "texts.parquet")
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


def canaries_file(config: ExperimentConfig, corpus: Path | None) -> Path | None:
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
    return corpus_file(corpus, "canaries.parquet") if corpus is not None else None


def quality_model(config: ExperimentConfig, corpus: Path | None) -> Path | None:
    """The fastText quality model, when a variant uses it: the config's ``quality_model``, or with
    the demo one trained here (``out_dir/quality``) on the demo corpus (demo_training_texts)."""
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


def source_curation(config: ExperimentConfig, inputs: Inputs) -> dict:
    """The curation config of the raw pool: the source stage alone, in ``curation/source``."""
    return curation_config(
        inputs.base, [VariantConfig(name="source")], config, config.out_dir / "curation" / "source", None, [], None
    )


def variant_curations(
    config: ExperimentConfig,
    variants: list[VariantConfig],
    inputs: Inputs,
    tokenizer_path: Path,
    protected_path: Path,
) -> Iterator[tuple[list[VariantConfig], dict]]:
    """Per set of stages of ``variants``, in config order: the variants it serves and its curation
    config (``curation/<stages>``, a mixture per variant, the protected texts excluded), each made
    when the one before has run."""
    for key, group in config.curations(variants).items():
        yield (
            group,
            curation_config(
                inputs.base,
                group,
                config,
                config.out_dir / "curation" / key,
                tokenizer_path,
                [protected_path],
                inputs.quality,
            ),
        )


def final_documents(run: RunConfig) -> pl.DataFrame:
    """The documents of a curation run's last document stage."""
    layout = RunLayout(run.run_dir)
    last = last_document_stage(read_json(layout.manifest)["stages"])
    return pl.scan_parquet(stage_outputs(run.run_dir, last)).collect()


TOKENIZER_RECORD = "tokenizer.made_from.json"  # beside tokenizer.json: what it was trained on


def pool_tokenizer(config: ExperimentConfig, source_run: RunConfig, inputs: Inputs) -> Path:
    """``out_dir/tokenizer.json``, trained on a seeded sample of the raw pool (``source_run``'s
    documents) that holds no held-out text and no canary, with what it was trained on recorded
    beside it (:data:`TOKENIZER_RECORD`): trained again when the settings or the sample differ, and
    a tokenizer.json the experiment did not write is refused (ConfigError), never used."""
    tokenizer_path = config.out_dir / "tokenizer.json"
    record_path = config.out_dir / TOKENIZER_RECORD
    # The canaries are probes, not text to learn merges from: left out like the held-out texts.
    left_out = (
        inputs.texts
        if inputs.canaries_path is None
        else pl.concat(
            [inputs.texts.select("id", "text"), pl.read_parquet(inputs.canaries_path, columns=["id", "text"])]
        )
    )
    sample = tokenizer_sample(final_documents(source_run), left_out, config.tokenizer.sample_docs, config.seed)
    made_from = {
        "vocab_size": config.tokenizer.vocab_size,
        "sample_docs": config.tokenizer.sample_docs,
        "seed": config.seed,
        "documents": sample.height,
        "sample_sha256": _texts_sha256(sample),
    }
    record = owned_tokenizer(config)
    current = record and file_sha256(tokenizer_path) == record.get("tokenizer_sha256")
    if current and record.get("made_from") == made_from:
        return tokenizer_path
    # Trained beside, recorded as written, then moved in: a stop at any point leaves a tokenizer.json
    # that is either absent or one the record names.
    with tempfile.TemporaryDirectory(dir=config.out_dir, prefix=".tokenizer-") as folder:
        trained = train_tokenizer(sample["text"], Path(folder) / "tokenizer.json", vocab_size=made_from["vocab_size"])
        sha256 = file_sha256(trained)
        written = [*record.get("written", []), sha256]
        write_json({"made_from": made_from, "tokenizer_sha256": sha256, "written": written}, record_path)
        os.replace(trained, tokenizer_path)
    return tokenizer_path


def owned_tokenizer(config: ExperimentConfig) -> dict:
    """The record of ``out_dir/tokenizer.json`` ({} when there is none), checked: a tokenizer.json
    that the record does not name as written by the experiment is refused (ConfigError)."""
    tokenizer_path, record_path = config.out_dir / "tokenizer.json", config.out_dir / TOKENIZER_RECORD
    record = read_json(record_path) if record_path.is_file() else {}
    if tokenizer_path.exists() and file_sha256(tokenizer_path) not in record.get("written", []):
        raise ConfigError(
            f"{tokenizer_path}: a tokenizer this experiment did not write (its {TOKENIZER_RECORD} "
            f"{'names other files' if record else 'is missing'}); move it out of out_dir, or use another out_dir"
        )
    return record if tokenizer_path.exists() else {}


def _texts_sha256(documents: pl.DataFrame) -> str:
    """The sha256 of documents' ids and texts, in their order (each length-prefixed)."""
    digest = hashlib.sha256()
    for column in ("id", "text"):
        for value in documents[column].to_list():
            data = value.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def eval_folder(
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


def choice_task_files(
    config: ExperimentConfig, texts: pl.DataFrame, task_path: Path | None, tokenizer_path: Path, block_size: int
) -> list[Path]:
    """The multiple-choice items every pretrained model is scored on: the built-in tasks
    (experiment.tasks, from the held-out ``texts`` and the task; ``out_dir/tasks/items/<task>.jsonl``
    and the lm-eval task YAML beside it), each choice at most half of ``block_size`` tokens, then
    the user's ``[[eval_tasks]]``; none when ``choice_tasks.enabled`` is false. An item id in two
    files is a :class:`ConfigError`."""
    if not config.choice_tasks.enabled:
        return []
    tasks = config.choice_tasks
    paths = []
    if tasks.builtin:
        tokenizer = load_tokenizer(tokenizer_path)

        def fits(choice: str) -> bool:
            return len(tokenizer.encode(" " + choice, add_special_tokens=False).ids) <= block_size // 2

        task = load_task(task_path) if task_path is not None else None
        folder = config.out_dir / "tasks" / "items"
        built = write_built_tasks(folder, texts, task, tasks.items, tasks.shots, config.seed, fits)
        for path in built:  # the same tasks for lm-evaluation-harness (curate eval --tasks <task>.yaml)
            yaml = path.with_suffix(".yaml")
            if not yaml.exists() or yaml.read_text() != lm_eval_task_yaml(path, lm_eval_task_name(path)):
                write_lm_eval_task(path, yaml, lm_eval_task_name(path))
        paths += built
    paths += [Path(spec.path) for spec in config.eval_tasks]
    seen: dict[str, Path] = {}
    for path in paths:
        for item in read_choice_items(path)["id"].to_list():
            if item in seen:
                raise ConfigError(
                    f"eval_tasks: the item id {item!r} is in {seen[item]} and in {path}; give every item its own id"
                )
            seen[item] = path
    return paths


def curve_task_file(config: ExperimentConfig, task_files: list[Path]) -> Path | None:
    """``out_dir/tasks/curve-items.jsonl``: ``choice_tasks.curve_items`` items of each task of
    ``task_files``, a seeded sample (by the hash of each item's id, so a file in label order gives
    every label its share), which every pretraining run scores at each evaluation (None: no
    curves)."""
    if not task_files or not config.choice_tasks.curve_items:
        return None
    items = pl.concat([read_choice_items(path) for path in task_files])
    order = pl.Series(seeded_id_hash(items["id"], config.seed, SALT_CURVES))
    chosen = (
        items.with_columns(_order=order)
        .filter(pl.col("_order").rank("ordinal").over("task") <= config.choice_tasks.curve_items)
        .drop("_order")
    )
    path = config.out_dir / "tasks" / "curve-items.jsonl"
    if not path.exists() or not read_choice_items(path).equals(chosen):
        write_choice_items(chosen, path)
    return path


def write_protected(config: ExperimentConfig, texts: pl.DataFrame, task_path: Path | None) -> tuple[Path, pl.DataFrame]:
    """``out_dir/heldout/protected.parquet``: the clean held-out sets, the task's texts and the
    user's multiple-choice items (:func:`experiment.heldout.protected_texts`), every pool's
    ``mix.exclude``."""
    task = (
        pl.read_parquet(task_path, columns=["id", "text"])
        if task_path is not None
        else pl.DataFrame(schema={"id": pl.String, "text": pl.String})
    )
    items = [read_choice_items(spec.path) for spec in config.eval_tasks]
    protected = protected_texts(texts, task, pl.concat(items) if items else None)
    path = config.out_dir / "heldout" / "protected.parquet"
    if not path.exists() or not pl.read_parquet(path).equals(protected):
        write_parquet(protected.to_arrow(), path)
    return path, protected


def junk_texts(texts: pl.DataFrame) -> pl.DataFrame:
    """The held-out sets that are not clean (the junk), which the check reports apart."""
    return texts.filter(~pl.col("clean")).select("id", "text", "set")


CHECKED_FOLDER = "contamination"  # out_dir/contamination/<mixture>.json: each check and what it read


def _check_mixture(
    mixture: Path, protected: pl.DataFrame, junk: pl.DataFrame | None, tokenizer, settings: dict
) -> dict:
    """One mixture checked against the protected texts, and against the junk sets reported apart."""
    found = check_contamination(mixture, protected, tokenizer, **settings)
    if junk is not None and junk.height:
        against_junk = check_contamination(mixture, junk, tokenizer, **settings)
        found["junk"] = {
            key: against_junk[key]
            for key in ("texts", "contaminated_documents", "contaminated_windows", "common_windows")
        }
    return found


def check_mixtures(
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
    with a protected text. A mixture checked before against the same texts and settings, its
    manifest unchanged, is read back from its record (:data:`CHECKED_FOLDER`), not checked again:
    a study that adds mixtures to a curation run (a search's proxies) checks the new ones only."""
    tokenizer = load_tokenizer(tokenizer_path)
    settings = {
        "ngram": config.decontamination.window_tokens or 13,
        "common_window_docs": config.decontamination.common_window_docs,
    }
    checked_against = {
        "protected_sha256": _texts_sha256(protected),
        "junk_sha256": _texts_sha256(junk) if junk is not None and junk.height else None,
        "tokenizer_sha256": file_sha256(tokenizer_path) if Path(tokenizer_path).is_file() else None,
        **settings,
    }
    counts = {}
    for variant in variants:
        mixture = RunLayout(runs[variant.name].run_dir).root / "mix" / variant.name
        record_path = config.out_dir / CHECKED_FOLDER / f"{variant.name}.json"
        manifest = mixture / MANIFEST_FILE
        made_from = {**checked_against, "manifest_sha256": file_sha256(manifest) if manifest.is_file() else None}
        record = read_json(record_path) if record_path.is_file() else {}
        if made_from["manifest_sha256"] is not None and record.get("made_from") == made_from:
            counts[variant.name] = record["counts"]
            continue
        counts[variant.name] = _check_mixture(mixture, protected, junk, tokenizer, settings)
        if made_from["manifest_sha256"] is not None:
            write_json({"made_from": made_from, "counts": counts[variant.name]}, record_path)
    write_json(counts, config.out_dir / "contamination.json")
    leaks = {name: contamination_total(check) for name, check in counts.items()}
    if any(leaks.values()):
        named = ", ".join(f"{name} {n}" for name, n in leaks.items() if n)
        raise ContaminationError(
            f"training documents share a {settings['ngram']}-token window with held-out or task text "
            f"({named}); see {config.out_dir / 'contamination.json'} and fix the exclusion before training"
        )
    return counts
