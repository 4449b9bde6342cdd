"""The stages of a curation run (:data:`REGISTRY`: name, kind, whether it writes documents, the
config keys it reads) and the lookups over it: which stages a config runs, and which stage's
documents each reads. Each shard stage's step is built in pipeline.stages.steps."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import RunConfig, filter_path_parameters
from pipeline.formats.manifest import config_record
from pipeline.lang.model import lid_model_path
from pipeline.stages.attributes import measuring_settings


@dataclass(frozen=True)
class StageSpec:
    """A stage of a curation run: its name (also its folder in the run directory, see
    pipeline.formats.documents.RunLayout), how its flow works (``kind``), and whether it writes documents
    (``docs/*.parquet``) that the next stage reads."""

    name: str
    kind: str  # source | shard (a step per shard) | corpus (counts over the corpus first) | tokens | mixtures
    documents: bool
    # The config keys (dotted paths) whose values the stage's outputs depend on: with the identity
    # of the stage before it, they are the stage's identity (pipeline.stages.rerun).
    reads: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        return self.name


# Every stage, in run order: source reads the inputs; lang and filter are plain shard stages
# (flows.stages); dedup and lines first count over the whole corpus (flows.dedup); tokenize writes
# token shards of the documents the stages before it kept (flows.tokenize); mix gathers those
# tokens into training mixtures with held-out validation shards (flows.mix).
REGISTRY = {
    spec.name: spec
    for spec in (
        StageSpec("source", "source", True, ("sources", "batch_docs", "max_doc_bytes", "shard_docs", "shard_bytes")),
        StageSpec("lang", "shard", True, ("lang", "batch_docs")),
        StageSpec("filter", "shard", True, ("filter", "batch_docs")),
        StageSpec("dedup", "corpus", True, ("dedup", "batch_docs")),
        StageSpec("lines", "corpus", True, ("lines", "batch_docs")),
        StageSpec("tokenize", "tokens", False, ("tokenize", "seed", "batch_docs")),
        # mix measures near copies with dedup's shingles and permutations (pipeline.stages.mix).
        StageSpec("mix", "mixtures", False, ("mix", "seed", "dedup.ngram", "dedup.num_perm", "dedup.seed")),
    )
}
STAGES = tuple(name for name in REGISTRY if name != "source")  # the stages a config turns on or off
DOCUMENT_STAGES = tuple(name for name, spec in REGISTRY.items() if spec.documents)


def document_stages(ran: Iterable[str]) -> list[str]:
    """The stages among ``ran`` that wrote documents, in run order."""
    ran = set(ran)
    return [name for name in DOCUMENT_STAGES if name in ran]


def last_document_stage(ran: Iterable[str]) -> str:
    """The stage whose documents are a run's curated documents: the last document stage that ran
    (at least ``source``)."""
    return (document_stages(ran) or ["source"])[-1]


def enabled_stages(config: RunConfig) -> list[str]:
    """The stages after `source` that run, in order; mix needs tokenize (without it, and without a
    [mix] section, the run ends at the curated documents)."""
    return [name for name in STAGES if getattr(config, name).enabled and (name != "mix" or config.tokenize.enabled)]


def input_stage(stage: str, config: RunConfig) -> str:
    """The stage whose documents ``stage`` reads in a run of ``config``: the last document stage
    that runs before it (``source`` for the first)."""
    order = list(REGISTRY)
    return last_document_stage(["source", *(s for s in enabled_stages(config) if order.index(s) < order.index(stage))])


def named_files(stage: str, config: RunConfig) -> dict[str, list[Path]]:
    """The files a stage loads whose contents its outputs depend on, by the config key that names
    them: the language-ID model (``lang.model``, or the default one it finds), each filter's
    path parameters (the quality model; a folder stands for the files in it), the tokenizer
    (``tokenize.tokenizer``) and the exclusion lists (``mix.exclude``). A missing file is left out
    (the run stops on it before any work, pipeline.config.check_files)."""
    named: dict[str, list[Path]] = {}
    if stage == "lang":
        try:
            named["lang.model"] = [lid_model_path(config.lang.model)]
        except FileNotFoundError:
            named["lang.model"] = []
    elif stage == "filter":
        for name in config.filter.filters:
            for key in sorted(filter_path_parameters(name)):
                value = config.filter.params.get(name, {}).get(key)
                if value is not None:
                    path = Path(value)
                    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
                    named[f"filter.params.{name}.{key}"] = [p for p in files if p.is_file()]
    elif stage == "tokenize" and config.tokenize.tokenizer is not None:
        named["tokenize.tokenizer"] = [Path(config.tokenize.tokenizer)]
    elif stage == "mix" and config.mix.exclude:
        named["mix.exclude"] = [Path(p) for p in config.mix.exclude if Path(p).is_file()]
    return named


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256, for this process


def _content_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        with path.open("rb") as handle:
            _DIGESTS[key] = hashlib.file_digest(handle, "sha256").hexdigest()
    return _DIGESTS[key]


def file_contents(stage: str, config: RunConfig) -> dict[str, list[str]]:
    """The sha256 of each of :func:`named_files`, by key (in the stage's identity, so that a model
    or tokenizer replaced at the same path redoes the stages that loaded it)."""
    return {key: [_content_digest(p) for p in paths] for key, paths in named_files(stage, config).items()}


def measured_with(config: RunConfig, contents: dict[str, list[str]] | None = None) -> dict:
    """What the filter stage's measurements depend on (pipeline.stages.attributes.measuring_settings)
    with the contents of the files its filters load (``contents``: :func:`file_contents`, when
    known already)."""
    contents = file_contents("filter", config) if contents is None else contents
    return {**measuring_settings(config_record(config)), "contents": contents}
