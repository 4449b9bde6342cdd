"""The stages of a curation run (:data:`REGISTRY`: name, kind, whether it writes documents, the
config keys it reads) and the lookups over it: which stages a config runs, and which stage's
documents each reads. Each shard stage's step is built in pipeline.stages.steps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.config import RunConfig


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
