"""The library's Python API, without Prefect: what a Python user calls, and what stays stable.

::

    import polars as pl
    from pipeline.api import dedup_documents, filter_documents, load_config, read_run

    docs = pl.DataFrame({"id": ["a", "b"], "text": ["One page of text.", "One page of text."]})
    kept, removed = filter_documents(docs)  # the filter stage's rules on a frame of documents
    kept, removed = dedup_documents(kept)  # the dedup stage's exact and near duplicates
    run = read_run("runs/demo")  # a finished run: counts per stage, removed and curated documents

* :func:`load_config`: a run's config from a TOML file or a dict, checked as ``curate run`` checks it;
* :func:`filter_documents` and :func:`dedup_documents`: a stage's rules on a polars frame of
  documents (``id`` and ``text``), giving the kept documents and the removed ones with their rule;
* :func:`read_run`: a run directory's results (:class:`RunResults`).

Running the curation itself (every stage, or one) is in ``flows.api``, which also re-exports these
names. Everything else in ``pipeline`` may change between versions; these names and their
arguments change only with a note in the changelog.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import polars as pl

from pipeline.config import DedupConfig, FilterConfig, RunConfig, UnicodeRepairConfig, parse_config
from pipeline.config import load_config as _load_toml
from pipeline.dedup.clusters import dedup_step
from pipeline.dedup.engine import deduplicate_shards
from pipeline.formats.configfile import ConfigError, validate_model
from pipeline.formats.documents import LICENCE, QUARANTINE_SCHEMA, UNKNOWN
from pipeline.formats.step import empty_removed
from pipeline.io.owner import claim, note_written, remove_written
from pipeline.io.repair import RepairOptions, repair_texts
from pipeline.io.storage import empty_table, output_location
from pipeline.stages.registry import last_document_stage
from pipeline.stages.run import RunFiles, UnknownRule
from pipeline.stages.steps import KeptMeasurements, filter_settings_step, records_notes, with_matches
from pipeline.stages.verdicts import document_texts, verdict_table

__all__ = [
    "ConfigError",
    "Outcome",
    "RunConfig",
    "RunResults",
    "dedup_documents",
    "filter_documents",
    "load_config",
    "read_run",
    "repair_documents",
]

# The source name of documents given without a ``source`` column.
FRAME_SOURCE = "documents"


def load_config(config: str | Path | Mapping) -> RunConfig:
    """A run's config, validated before any work: from a TOML file (a path) or a dict of the same
    keys (``docs/config.md``). A problem raises :class:`ConfigError` with one line naming the key
    and the fix.

    Example::

        config = load_config({"run_dir": "runs/books", "sources": [
            {"name": "books", "reader": "jsonl", "paths": ["data/books/"]}]})
        config = load_config("configs/demo.toml")
    """
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, Mapping):
        return parse_config(dict(config))
    if isinstance(config, (str, Path)):
        return _load_toml(Path(config))
    raise TypeError(f"load_config takes a TOML path or a dict, got {type(config).__name__}")


class Outcome(NamedTuple):
    """What a stage's rules did to a frame of documents: ``kept`` (the documents that stay, with
    any text the stage rewrote and the columns it added) and ``removed`` (one row per removed
    document: ``id``, ``source``, ``lang``, ``licence``, ``stage``, ``rule``, the measured
    ``value`` and the ``threshold``; dedup adds ``kept_id``, the document of its cluster that
    stayed).

    Example::

        kept, removed = filter_documents(docs)  # it unpacks
        outcome = dedup_documents(docs)
        outcome.kept, outcome.removed, outcome.reasons()
    """

    kept: pl.DataFrame
    removed: pl.DataFrame

    def reasons(self) -> dict[str, int]:
        """Removed documents per rule, most first.

        Example::

            filter_documents(docs).reasons()  # {"gopher_quality.word_count_min": 2, ...}
        """
        counts = self.removed.group_by("rule").len().sort(["len", "rule"], descending=[True, False])
        return dict(counts.iter_rows())


def _settings(settings, model: type, section: str):
    """A stage's settings: a RunConfig's section, the section's model, a dict of its keys, or the
    defaults (None). A dict is checked as the config's ``[section]`` table is."""
    if settings is None:
        return model()
    if isinstance(settings, RunConfig):
        return getattr(settings, section)
    if isinstance(settings, model):
        return settings
    if isinstance(settings, Mapping):
        try:
            return validate_model(model, dict(settings))
        except ConfigError as error:  # the key as the config's [section] table names it
            message = str(error)
            whole = message.startswith("config: ")  # a problem of the section, not of one key
            raise ConfigError(f"{section}: {message[8:]}" if whole else f"{section}.{message}") from None
    raise TypeError(
        f"{section} settings: give a RunConfig, a {model.__name__} or a dict, got {type(settings).__name__}"
    )


def _check_types(docs: pl.DataFrame) -> None:
    """Refuse an ``id`` or ``text`` column the stages cannot read as they are: text is a string
    per document, and an id a string or an integer (read as its decimal digits); anything else
    (a list of lines, a struct, a float id) raises ValueError naming the column and its type,
    never a silent cast."""
    text, ids = docs.schema["text"], docs.schema["id"]
    if text != pl.String:
        lines = " (a list of lines: join them, pl.col('text').list.join('\\n'))" if text.is_nested() else ""
        raise ValueError(
            f"the documents' text column is {text}, not a string; give each document's text as one string{lines}"
        )
    if ids != pl.String and not ids.is_integer():
        pick = " (one field of it: pl.col('id').struct.field(NAME))" if isinstance(ids, pl.Struct) else ""
        raise ValueError(
            f"the documents' id column is {ids}; give each document an id that is a string or an integer{pick}"
        )


def _as_documents(docs: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``docs`` as the stages read documents: ``id`` and ``text`` as strings (an integer id as its
    digits), ``source`` and ``licence`` added when missing; returns the frame and the columns added."""
    if not isinstance(docs, pl.DataFrame):
        raise TypeError(f"give the documents as a polars DataFrame, got {type(docs).__name__}")
    missing = [c for c in ("id", "text") if c not in docs.columns]
    if missing:
        raise ValueError(f"the documents have no {' or '.join(missing)} column; name them id and text")
    _check_types(docs)
    if docs["id"].null_count() or docs["text"].null_count():
        raise ValueError("some documents have a null id or text; drop them or fill them in first")
    if docs["id"].cast(pl.String).n_unique() != docs.height:
        raise ValueError("document ids repeat; give each document its own id (the stages match removals by id)")
    added = {"source": FRAME_SOURCE, LICENCE: UNKNOWN}
    added = {name: value for name, value in added.items() if name not in docs.columns}
    docs = docs.with_columns(
        pl.col("id").cast(pl.String), pl.col("text").cast(pl.String), *(pl.lit(v).alias(k) for k, v in added.items())
    )
    return docs, list(added)


def repair_documents(docs: pl.DataFrame, settings: UnicodeRepairConfig | Mapping | None = None) -> pl.DataFrame:
    """``docs`` with its ``text`` repaired as a source with ``unicode_repair`` repairs it (ftfy;
    ``settings``: its fixes as the source's ``unicode_repair`` table names them, or the defaults),
    and a boolean column ``repaired``: whether a document's text changed.

    Example::

        repair_documents(docs, {"uncurl_quotes": True}).filter(pl.col("repaired"))
    """
    if not isinstance(docs, pl.DataFrame) or "text" not in docs.columns or docs.schema["text"] != pl.String:
        raise ValueError("give the documents as a polars DataFrame with a string column text")
    options = _settings(settings, UnicodeRepairConfig, "unicode_repair")
    texts, _ = repair_texts(docs["text"].to_arrow(), RepairOptions(**options.model_dump()))
    repaired = pl.Series("text", texts, dtype=pl.String)
    return docs.with_columns(repaired, repaired.ne_missing(docs["text"]).alias("repaired"))


def filter_documents(docs: pl.DataFrame, settings: RunConfig | FilterConfig | Mapping | None = None) -> Outcome:
    """The filter stage on a frame of documents (columns ``id`` and ``text``; ``source``,
    ``licence`` and ``lang`` are read when present): the licence rules, then each filter in order,
    exactly as ``curate run`` applies them to a shard. ``settings`` is the run's ``[filter]``
    table as a dict (``filters``, ``params``, ``sources``, ``licences``, ``exclude_licences``), a
    RunConfig, or None for the defaults (C4, Gopher quality and repetition, FineWeb, PII). With
    the word or URL lists (``c4_badwords``, ``url_blocklist``), ``removed`` has a ``match``
    column: the list entry each document matched.

    Example::

        docs = pl.DataFrame({"id": ["a"], "text": ["Click here. Click here. Click here."]})
        kept, removed = filter_documents(docs, {"filters": ["gopher_repetition", "c4_quality"]})
        removed.select("id", "rule", "value", "threshold")
    """
    settings = _settings(settings, FilterConfig, "filter")
    docs, added = _as_documents(docs)
    if not settings.enabled:
        return Outcome(docs.drop(added), empty_removed())
    noted = records_notes(settings)
    result = filter_settings_step(settings, KeptMeasurements() if noted else None)(docs)
    removed = with_matches(result.removed, result.attributes) if noted else result.removed
    return Outcome(result.kept.drop(added), removed)


def dedup_documents(
    docs: pl.DataFrame,
    settings: RunConfig | DedupConfig | Mapping | None = None,
    work_dir: str | Path | None = None,
) -> Outcome:
    """The dedup stage on a frame of documents (columns ``id`` and ``text``, ids unique): exact
    duplicates (the same normalized text) and near duplicates (MinHash LSH candidates verified by
    the Jaccard similarity of their word shingles) are removed, one document of each cluster kept
    (``keep``: the first in frame order, the longest, or the highest ``quality_score``).
    ``settings`` is the run's ``[dedup]`` table as a dict (``threshold``, ``ngram``, ``keep``, ...), a
    RunConfig, or None for the defaults. The stage's files go to ``work_dir`` (a temporary folder
    when None, removed after): a new or empty folder, or one an earlier call wrote; a folder of
    other files raises ``ValueError`` (``pipeline.io.owner.ForeignFolderError``), and so does a
    URL (``pipeline.io.storage.LocationError``): the work files are kept on this machine.

    Example::

        docs = pl.DataFrame({"id": ["a", "b"], "text": ["the same words here", "the same words here"]})
        kept, removed = dedup_documents(docs, {"threshold": 0.7})
        removed.select("id", "rule", "value", "kept_id")  # b, dedup.exact_duplicate, 1.0, a
    """
    settings = _settings(settings, DedupConfig, "dedup")
    docs, added = _as_documents(docs)
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="curate-dedup-") as folder:
            return _dedup(docs, added, settings, Path(folder))
    # Path(work_dir) would make memory://b/w the local folder memory:/b/w.
    local = "dedup_documents keeps its work files on this machine; give a local folder, or none for a temporary one"
    return _dedup(docs, added, settings, output_location(work_dir, folder=True, local=local))


def _dedup(docs: pl.DataFrame, added: list[str], settings: DedupConfig, work: Path) -> Outcome:
    params = settings.minhash_params()
    # A new or empty work_dir, or one an earlier call wrote (whose files go): never a folder of
    # other files, such as a run's stage folder (pipeline.io.owner).
    claim(work, "dedup_documents work_dir")
    remove_written(work)
    shard = work / "documents.parquet"
    note_written(shard)
    docs.select("id", "text", *([params.score_column] if params.score_column in docs.columns else [])).write_parquet(
        shard
    )
    clusters = deduplicate_shards([shard], work / "intermediate", params, settings.partitions, settings.keep)
    result = dedup_step(clusters, settings.threshold)(docs)
    removed = result.removed.join(clusters.select("id", "kept_id"), on="id", how="left", maintain_order="left")
    return Outcome(result.kept.drop(added), removed)


@dataclass(frozen=True)
class RunResults:
    """A run directory's results, read from its files alone (see ``docs/run-directory.md``).

    Example::

        run = read_run("runs/demo")
        run.stages                    # ["source", "lang", "filter", "dedup", "lines", ...]
        run.counts()["filter"]        # {"docs_in": ..., "docs_out": ..., "removed": {rule: n}, ...}
        run.removed("filter")         # id, source, lang, licence, stage, rule, value, threshold
        run.removed(rule="c4_quality.min_sentences")  # what one rule removed
        run.texts("news/n0")          # the document's text as each stage left it
        run.curated()                 # the curated documents as a polars frame
    """

    files: RunFiles  # the run directory's files (pipeline.stages.run), for what this class does not say

    @property
    def run_dir(self) -> Path:
        return self.files.root

    @property
    def stages(self) -> list[str]:
        """The stages that finished, in run order."""
        return self.files.stages

    @property
    def curated_stage(self) -> str:
        """The stage whose documents are the curated ones: the last document stage that ran."""
        return last_document_stage(self.stages)

    def counts(self) -> dict[str, dict]:
        """Per stage that finished, its ledger: ``docs_in``, ``docs_out``, ``removed`` and
        ``quarantined`` (each by reason); ``docs_in`` is ``docs_out`` + removed + quarantined.
        The whole of each stage's stats is in ``<run_dir>/<stage>/stats.json``.

        Example::

            {stage: c["docs_out"] for stage, c in read_run("runs/demo").counts().items()}
        """
        return {stage: stats.ledger_counts() for stage, stats in self.files.stats.items()}

    def removed(self, stage: str | None = None, rule: str | None = None) -> pl.DataFrame:
        """The documents ``stage`` removed (every stage's, in run order, when None), or those
        ``rule`` removed, one row each: ``id``, ``source``, ``lang``, ``licence``, ``stage``,
        ``rule``, ``value``, ``threshold``, as the run's ``removed/`` files hold them. A rule that
        removed nothing raises LookupError naming the rules that did.

        Example::

            read_run("runs/demo").removed().group_by("stage", "rule").len()
            read_run("runs/demo").removed(rule="c4_quality.min_sentences").select("id", "value", "threshold")
        """
        if stage is not None and stage not in self.stages:
            raise ValueError(f"stage {stage!r} did not run in {str(self.run_dir)!r} (stages: {', '.join(self.stages)})")
        if rule is not None:
            found = self.files.removed_by(rule)
            if stage is not None and found["stage"][0] != stage:
                raise UnknownRule(rule, {r: s for r, s in self.files.removed_rules().items() if s == stage})
            return found
        frames = [self.files.removed(name) for name in ([stage] if stage else self.stages)]
        return pl.concat(frames, how="vertical_relaxed")

    def texts(self, doc_id: str) -> pl.DataFrame:
        """The document's text as each document stage left it, one row per stage that ran:
        ``stage``, ``status`` (kept, removed, not reached), ``rule`` (the rule that removed it)
        and ``text`` (for a document the filter stage removed, the text as the filters' rewrites
        left it; null where it did not reach the stage). LookupError for an id not in the run.

        Example::

            read_run("runs/demo").texts("news/effdb485efc9d161").select("stage", "text")
        """
        found = document_texts(self.files, doc_id)
        if found is None:
            raise LookupError(f"no document {doc_id!r} in {str(self.run_dir)!r}; ids are as in its docs/*.parquet")
        columns = ("stage", "status", "rule", "text")
        return pl.DataFrame(
            {c: [entry.get(c) for entry in found] for c in columns}, schema=dict.fromkeys(columns, pl.String)
        )

    def filter_verdicts(self, ids: list[str]) -> pl.DataFrame:
        """The filter stage's verdict on the documents ``ids``, as the run decided it: one row per
        document and rule of its language (``[filter.by_lang]`` and the built-in profiles), with
        the run's stored measurements (measured again where the run stored none): ``id``,
        ``lang``, ``settings`` (the language code whose settings judged it; null: the stage's),
        ``found`` (``stored`` or ``measured again``), ``rule``, ``value``, ``threshold``,
        ``fires`` and ``removed_by`` (the rule that removed the document, as in ``removed/``;
        null: kept). A document the stage did not measure (out of its scope, or removed by a
        licence rule) has one row with ``rule`` null; an id that did not reach the stage, none.

        Example::

            run = read_run("runs/demo")
            run.filter_verdicts(["news/n0"]).filter(pl.col("fires"))  # the rules it breaks
        """
        if not isinstance(ids, (list, tuple)):
            raise TypeError(f"give the ids as a list of strings, got {type(ids).__name__}")
        return verdict_table(self.files, list(ids))

    def quarantined(self) -> pl.DataFrame:
        """The input records the source stage could not read, with file, line or offset and reason.

        Example::

            read_run("runs/demo").quarantined().select("file", "line", "reason")
        """
        found = self.files.quarantine()
        return found if found is not None else pl.from_arrow(empty_table(QUARANTINE_SCHEMA))

    def curated(self, columns: list[str] | None = None) -> pl.DataFrame:
        """The curated documents (the output of :attr:`curated_stage`) as a polars frame: ``id``,
        ``text``, ``source``, ``licence``, ``url``, ``meta`` and the columns stages added
        (``lang``, ``lang_score``, ...); only ``columns`` when given.

        Example::

            read_run("runs/demo").curated(["id", "text"]).head()
        """
        frame = self.files.scan_docs(self.curated_stage, columns)
        return frame.collect() if frame is not None else pl.DataFrame(schema={"id": pl.String, "text": pl.String})


def read_run(run_dir: str | Path) -> RunResults:
    """The results of the run in ``run_dir`` (a folder or an fsspec URL, as in the config's
    ``run_dir``); raises FileNotFoundError with one line when it holds no run.

    Example::

        run = read_run("runs/demo")
        print(run.counts()["dedup"]["removed"])
    """
    return RunResults(RunFiles.open(run_dir))
