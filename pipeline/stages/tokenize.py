"""The `tokenize` stage: a tokenizer (given, or trained on a sample of the curated documents), then
each curated shard's documents written as a token shard (``pipeline.formats.tokens``), its part
record after it, handed over in blocks of 16 shards or of as many as hold 50,000 documents
(``pipeline.stages.units.jobs_per_block``):
after dedup a shard holds few documents (about 680 in the million-document benchmark), and on a
2-worker Dask cluster a task per shard cost more than its work (the stage took 26.3-35.7 s there
at a million documents, 18.0-20.5 in blocks; the encoder uses every core of its process either way).

:func:`run_tokenize` hands its units to ``run_units`` (``pipeline.stages.units``; the Prefect flow
``flows.tokenize`` submits each as a task), so the stage runs with or without Prefect and writes
the same files.

The tokenizer's training sample is ``sample_docs`` documents drawn without replacement, chosen
shard by shard: a document's key is a seeded 64-bit hash of its id, and the sample is the
documents with the smallest keys (bottom-k sampling, a uniform sample of the ids). Each shard's
unit returns only the keys under a bound that about ``sample_docs + 10 sqrt(sample_docs) + 100``
documents of the whole stage fall under (the bound comes from the document count the stage before
handed over), a second unit per shard returns the texts of the chosen ones (both short, so handed
over in blocks the same way: ``pipeline.stages.units.in_blocks``). No process holds a
row per curated document; the flow holds the sample. With ``sample_docs`` at least the number of
documents, every document is in the sample.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from tokenizers import Tokenizer

from pipeline.config import RunConfig
from pipeline.formats.documents import LICENCE, RunLayout, licence_series
from pipeline.formats.hashing import seeded_id_hash
from pipeline.formats.ledger import LedgerError, add_counts
from pipeline.formats.manifest import record_stage, remove_stage_outputs, stage_outputs, stage_own_files
from pipeline.formats.stats import StageStats, docs_handed_over
from pipeline.formats.tokens import file_sha256, load_tokenizer, read_token_shard, tokenizer_file, tokenizer_sha256
from pipeline.io.storage import parquet_file
from pipeline.io.writer import read_json, remove_temporaries, write_json
from pipeline.licence import licence_counts
from pipeline.stages.shard import mark_work_done, reusable_work
from pipeline.stages.units import RunUnits, in_blocks, in_process, jobs_per_block
from pipeline.tokenizer import ShardEncoding, shard_encoding, train_tokenizer, write_token_shard

STAGE = "tokenize"
_SALT = 0x70C3  # keys of the tokenizer sample, apart from other seeded uses of the ids
_TOP = 1 << 64
# The sample's frames when a stage has no shards to draw from (no documents).
_NO_KEYS = {"id": pl.String, "key": pl.UInt64}
_NO_TEXTS = {"id": pl.String, "text": pl.String}


def _keys(path: Path, seed: int) -> pl.DataFrame:
    ids = pl.from_arrow(parquet_file(path).read(columns=["id"]).column("id")).cast(pl.String)
    return pl.DataFrame({"id": ids, "key": seeded_id_hash(ids, seed, _SALT)})


@dataclass(frozen=True)
class KeysJob:
    """Shard ``in_path``'s sample keys (seeded by ``seed``) under ``bound``."""

    in_path: Path
    seed: int
    bound: int


def sample_candidates(job: KeysJob) -> pl.DataFrame:
    """``id, key`` of the shard's documents whose key is under ``bound`` (all of them at 2^64)."""
    keys = _keys(job.in_path, job.seed)
    return keys if job.bound >= _TOP else keys.filter(pl.col("key") < pl.lit(job.bound, dtype=pl.UInt64))


@dataclass(frozen=True)
class TextsJob:
    """Shard ``in_path``'s share of the sample: its documents up to ``last``, the sample's last
    ``(key, id)``."""

    in_path: Path
    seed: int
    last: tuple[int, str]


def sample_texts(job: TextsJob) -> pl.DataFrame:
    """``id, text`` of the shard's documents at or before ``last`` (a key and an id) in the order
    of (key, id): the shard's share of the sample."""
    in_path, (key, last_id) = job.in_path, job.last
    keys = _keys(in_path, job.seed)
    at = pl.lit(key, dtype=pl.UInt64)
    chosen = keys.filter((pl.col("key") < at) | ((pl.col("key") == at) & (pl.col("id") <= last_id)))
    if chosen.height == 0:
        return pl.DataFrame(schema=_NO_TEXTS)
    texts = pl.from_arrow(parquet_file(in_path).read(columns=["id", "text"]))
    return texts.with_columns(pl.col("id").cast(pl.String)).filter(pl.col("id").is_in(chosen["id"].implode()))


def sample_bound(wanted: int, total: int) -> int:
    """A key bound that about ``wanted + 10 sqrt(wanted) + 100`` of ``total`` uniform keys fall
    under (2^64, all of them, when that is ``total`` or more)."""
    expected = wanted + 10 * math.sqrt(wanted) + 100
    return _TOP if expected >= total else int(_TOP * (expected / total))


def draw_sample(inputs: list[Path], sample_docs: int, total: int, seed: int, run_units: RunUnits) -> pl.DataFrame:
    """``id, text`` of the ``sample_docs`` documents of ``inputs`` with the smallest keys (module
    docstring), sorted by id."""
    bound = sample_bound(sample_docs, total)
    per_block = jobs_per_block(total, len(inputs))

    def candidates(under: int) -> pl.DataFrame:
        jobs = [KeysJob(p, seed, under) for p in inputs]
        found = in_blocks(run_units, None, sample_candidates, jobs, per_block)
        return pl.concat([pl.DataFrame(schema=_NO_KEYS), *found])

    found = candidates(bound)
    if found.height < min(sample_docs, total) and bound < _TOP:  # ten standard deviations short: all
        found = candidates(_TOP)
    if found.height == 0:
        return pl.DataFrame(schema=_NO_TEXTS)
    chosen = found.sort("key", "id").head(sample_docs)
    last = (int(chosen["key"][-1]), chosen["id"][-1])
    jobs = [TextsJob(p, seed, last) for p in inputs]
    sample = pl.concat(in_blocks(run_units, None, sample_texts, jobs, per_block))
    if sample.height != chosen.height:
        raise LedgerError(f"tokenizer sample: {chosen.height} documents chosen, {sample.height} read")
    return sample.sort("id")


def _shard_encoding(tokenizer_path: Path) -> ShardEncoding:
    """The :class:`ShardEncoding` of the tokenizer at ``tokenizer_path`` (a ``tokenizer.json`` or
    a folder holding one), made once per process and tokenizer: the file is read each time, and
    its text decides (a rerun that trains another tokenizer at the same path gets its own)."""
    return _encoding_of(tokenizer_file(tokenizer_path).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=4)
def _encoding_of(tokenizer_json: str) -> ShardEncoding:
    return shard_encoding(Tokenizer.from_str(tokenizer_json))


@dataclass(frozen=True, kw_only=True)
class TrainJob:
    """A tokenizer of ``kind`` and ``vocab_size`` trained on ``texts``, saved at ``out``."""

    texts: pl.Series
    out: Path
    kind: str
    vocab_size: int


def train_on_sample(job: TrainJob) -> Path:
    """The tokenizer trained on the sample (:func:`pipeline.tokenizer.train_tokenizer`): its path."""
    return train_tokenizer(job.texts, job.out, kind=job.kind, vocab_size=job.vocab_size)


@dataclass(frozen=True, kw_only=True)
class TokenizeJob:
    """Curated shard ``in_path`` encoded by the tokenizer at ``tokenizer`` (a file, or a folder
    holding one) into ``out_dir``, ``batch_docs`` documents at a time; its part record at ``record``."""

    in_path: Path
    tokenizer: Path
    out_dir: Path
    batch_docs: int
    record: Path


def tokenize_shard(job: TokenizeJob) -> dict:
    """One curated shard as a token shard; its part record (with documents and tokens per
    licence) is written after the shard."""
    in_path, out = job.in_path, job.out_dir / f"{job.in_path.stem}.arrow"
    batches = parquet_file(in_path).iter_batches(batch_size=job.batch_docs, columns=["id", "text"])
    entry = write_token_shard(batches, _shard_encoding(job.tokenizer), out, group=in_path.stem)
    entry = {"unit": in_path.stem, **entry, "file": out.name, "licences": shard_licences(in_path, out)}
    write_json(entry, job.record)
    return entry


def shard_licences(docs_path: Path, token_path: Path) -> dict[str, dict[str, int]]:
    """Documents and tokens per licence of a curated shard and its token shard."""
    columns = [c for c in ("id", LICENCE) if c in parquet_file(docs_path).schema_arrow.names]
    docs = pl.from_arrow(parquet_file(docs_path).read(columns=columns))
    _, offsets = read_token_shard(token_path)
    return licence_counts(licence_series(docs), offsets["doc_tokens"])


def run_tokenize(previous: str, config: RunConfig, run_units: RunUnits = in_process) -> StageStats:
    """Tokenize the documents of ``previous``; write and return the stage's stats (with the
    shards' manifest)."""
    layout = RunLayout(config.run_dir)
    stage = layout.stage(STAGE).make()
    remove_temporaries(stage.root)
    inputs = stage_outputs(config.run_dir, previous)
    shards = stage.root / "shards"
    settings = config.tokenize
    made_from = settings.model_dump(mode="json")
    if settings.tokenizer is not None:  # a tokenizer given by path: its bytes decide, not its name
        made_from["tokenizer_sha256"] = file_sha256(tokenizer_file(settings.tokenizer))
    if not reusable_work(stage, inputs, made_from):  # other curated documents: start over
        remove_stage_outputs(config.run_dir, STAGE, under=shards.name)  # its own files only
        if "tokenizer.json" in stage_own_files(config.run_dir, STAGE):
            (stage.root / "tokenizer.json").unlink()
    handed_over = docs_handed_over(layout.stage(previous).stats)
    if settings.tokenizer is not None:
        tokenizer = Path(settings.tokenizer)
    else:
        tokenizer = stage.root / "tokenizer.json"
        if not tokenizer.exists():
            sample = draw_sample(inputs, settings.sample_docs, handed_over, config.seed, run_units)
            # A unit of its own: on a cluster it trains in a worker, and its time is a run's fixed
            # cost (the same sample whatever the corpus), apart from the shards'.
            job = TrainJob(texts=sample["text"], out=tokenizer, kind=settings.kind, vocab_size=settings.vocab_size)
            run_units(None, train_on_sample, [job])
    # A shard with a part record is complete (the record is written after the shard).
    todo = [p for p in inputs if not (stage.parts / f"{p.stem}.json").exists()]
    jobs = [
        TokenizeJob(
            in_path=p,
            tokenizer=tokenizer,
            out_dir=shards,
            batch_docs=config.batch_docs,
            record=stage.parts / f"{p.stem}.json",
        )
        for p in todo
    ]
    in_blocks(run_units, STAGE, tokenize_shard, jobs, jobs_per_block(handed_over, len(inputs)))
    mark_work_done(stage, inputs, made_from)
    entries = [read_json(stage.parts / f"{p.stem}.json") for p in inputs]
    for path, entry in zip(inputs, entries):  # a part written before licences were counted
        if "licences" not in entry:
            entry["licences"] = shard_licences(path, shards / entry["file"])
    documents = sum(e["documents"] for e in entries)
    if documents != handed_over:
        raise LedgerError(
            f"stage {STAGE}: {documents} documents tokenized, but stage {previous} handed over {handed_over}"
        )
    licences: dict = {}
    for entry in entries:
        add_counts(licences, entry["licences"])
    tok = load_tokenizer(tokenizer)
    stats = StageStats(
        STAGE,
        docs_in=handed_over,
        docs_out=documents,
        tokens=sum(e["tokens"] for e in entries),
        licences=dict(sorted(licences.items())),
        shards=entries,
        tokenizer={
            "path": str(tokenizer),
            "sha256": tokenizer_sha256(tok),
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        },
    )
    stats.write(stage.stats)
    record_stage(config, STAGE, stats.to_dict())
    return stats
