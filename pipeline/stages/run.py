"""A finished run directory, read back for the report and for inspection.

Only the run's own files are read: ``manifest.json`` (the config and the stages that ran), each
stage's ``stats.json``, ``docs/``, ``removed/`` and ``quarantine/`` Parquet files, the dedup
clusters and the mix stage's documents and plans. A stage whose folder is missing did not run
(it was disabled); nothing here assumes any stage besides ``source``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

from pipeline.config import RunConfig
from pipeline.formats.configfile import ConfigError, validate_model
from pipeline.formats.documents import REMOVED_SCHEMA, RunLayout
from pipeline.formats.manifest import MANIFEST_KEYS, stage_outputs, stage_own_files
from pipeline.formats.mixture import MANIFEST_FILE, PLAN_FILE
from pipeline.formats.stats import StageStats
from pipeline.io.storage import LocationError, as_path, empty_table, is_file, parquet_file, read_parquet, scan_parquet
from pipeline.stages.registry import STAGES, document_stages

# Every stage a run can have, in run order.
ALL_STAGES = ("source", *STAGES)


class NotARunError(FileNotFoundError):
    """The folder is not a run directory (no manifest.json)."""


class UnknownRule(LookupError):
    """No document of the run was removed by that rule; the message lists the rules that removed some."""

    def __init__(self, rule: str, rules: dict[str, str]):
        self.rule, self.rules = rule, rules
        known = ", ".join(rules) if rules else "none: the run removed no document"
        super().__init__(f"no document of this run was removed by {rule!r}; the rules that removed some: {known}")


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _manifest_shape(manifest) -> str | None:
    """What makes ``manifest`` (read from JSON) not a run's record, or None when it is one: an
    object whose ``stages`` is an object (and ``config``, which views do without, one too)."""
    if not isinstance(manifest, dict):
        return f"it holds a JSON {type(manifest).__name__}, not an object"
    if "stages" not in manifest:
        return "it lacks 'stages'"
    wrong = [key for key in MANIFEST_KEYS if key in manifest and not isinstance(manifest[key], dict)]
    if wrong:
        return f"its {' and '.join(repr(k) for k in wrong)} is not an object"
    return None


class RunFileError(ValueError):
    """A file of the run cannot be read (truncated or damaged); the message names it and the fix."""


def damaged_file(run_dir: str | Path) -> RunFileError | None:
    """The first file of the run directory that cannot be read back, as an error naming it and
    the stage that wrote it (None when every one reads): ``manifest.json``, each stage's
    ``stats.json`` and the footer of every Parquet file the run recorded writing (a file put in
    a stage's folder by someone else is no view's concern). Called after a view fails, to say why."""
    root = as_path(run_dir)
    manifest_path = root / "manifest.json"
    try:
        manifest = _read_json(manifest_path)
        shape = _manifest_shape(manifest)
        if shape is not None:
            raise ValueError(shape)
    except Exception as error:
        return RunFileError(_damaged_line(root, manifest_path, None, error))
    for stage in ALL_STAGES:
        folder = root / stage
        if not folder.is_dir():
            continue
        own = sorted(rel for rel in stage_own_files(root, stage, manifest) if rel.endswith(".parquet"))
        for path in [folder / "stats.json", *(folder / rel for rel in own)]:
            try:
                if path.suffix == ".json":
                    if path.is_file():
                        StageStats.read(path)
                else:
                    parquet_file(path).metadata  # noqa: B018 (reading the footer is the check)
            except Exception as error:
                parts = stage_outputs(root, stage, "parts", manifest=manifest)
                return RunFileError(_damaged_line(root, path, stage, error, _unit_record(parts, stage, path)))
    return None


def _unit_record(parts: list[Path], stage: str, path: Path) -> str | None:
    """The part record (``<stage>/parts/<unit>.json``, relative to the run) of the unit that wrote
    ``path``, among the stage's recorded ``parts``, when one names it: a unit whose record is gone
    is done again."""
    for part_path in parts:
        try:
            part = _read_json(part_path)
        except ValueError:
            continue
        folder = path.parent.name
        named = {
            "docs": [s.get("file") for s in part.get("shards", [])],
            "removed": [part.get("removed")],
            "quarantine": [part.get("quarantine")],
            "attributes": [part.get("attributes")],
        }.get(folder, [])
        if path.name in named:
            return f"{stage}/parts/{part_path.name}"
    return None


def _damaged_line(root: Path, path: Path, stage: str | None, error: Exception, unit: str | None = None) -> str:
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    why = str(error).splitlines()[0] if str(error) else type(error).__name__
    # Never "delete the folder": a stage's folder may hold files the run did not write, which stay.
    if stage is None:
        fix = "the run's record is lost: run its config again into an empty run_dir"
    elif path.name == "stats.json":
        fix = f"run `curate run CONFIG` again: the {stage} stage writes it anew from its files"
    elif unit is not None:
        fix = (
            f"delete it and {unit} (the record that its unit is done), then run `curate run CONFIG` "
            f"again: the {stage} stage writes both anew"
        )
    else:
        fix = f"delete it (a file the run wrote) and run `curate run CONFIG` again: the {stage} stage writes it anew"
    return f"{str(root)!r}: {where} is damaged or truncated ({why}); {fix}"


@dataclass
class RunFiles:
    """The files of one run directory, loaded lazily."""

    root: Path
    manifest: dict = field(default_factory=dict)
    _outputs: dict = field(default_factory=dict, repr=False)  # (stage, kind) -> its files

    @classmethod
    def open(cls, run_dir: str | Path) -> RunFiles:
        root = as_path(run_dir)
        layout = RunLayout(root)
        try:
            found = is_file(layout.manifest, str(run_dir))
        except LocationError as error:
            raise NotARunError(str(error)) from None
        if not found:
            raise NotARunError(f"{str(root)!r} holds no manifest.json; pass the run directory of `curate run`")
        try:
            manifest = _read_json(layout.manifest)
        except ValueError as error:  # truncated or not JSON
            raise RunFileError(_damaged_line(root, layout.manifest, None, error)) from None
        shape = _manifest_shape(manifest)
        if shape is not None:  # JSON, but not a run's record: no view of it would be true
            raise RunFileError(_damaged_line(root, layout.manifest, None, ValueError(shape)))
        return cls(root, manifest)

    def _read(self, stage: str, path: Path) -> pl.DataFrame:
        """One of the stage's Parquet files; RunFileError with one line naming it when it cannot
        be read (the Python API's callers get no polars error)."""
        try:
            return read_parquet(path)
        except Exception as error:
            unit = _unit_record(self.outputs(stage, "parts"), stage, path)
            raise RunFileError(_damaged_line(self.root, path, stage, error, unit)) from None

    def outputs(self, stage: str, kind: str) -> list[Path]:
        """The files of ``kind`` (docs, removed, quarantine, attributes, parts) the stage recorded
        writing (pipeline.formats.manifest.stage_outputs): a file put in its folder by someone
        else is never read."""
        key = (stage, kind)
        if key not in self._outputs:
            self._outputs[key] = stage_outputs(self.root, stage, kind, manifest=self.manifest)
        return self._outputs[key]

    # ---- what ran ---------------------------------------------------------------------------

    @cached_property
    def stats(self) -> dict[str, StageStats]:
        """Each finished stage's stats.json, in run order."""
        found = {}
        for stage in ALL_STAGES:
            path = self.root / stage / "stats.json"
            if path.is_file():
                try:
                    found[stage] = StageStats.read(path)
                except ValueError as error:  # truncated or not JSON: one line naming it and the fix
                    raise RunFileError(_damaged_line(self.root, path, stage, error)) from None
        return found

    @property
    def stages(self) -> list[str]:
        return list(self.stats)

    @property
    def document_stages(self) -> list[str]:
        """The stages that wrote documents, in run order."""
        return document_stages(self.stats)

    def previous(self, stage: str) -> str | None:
        """The document stage whose output ``stage`` read (None for source)."""
        if stage == "source":
            return None
        order = list(ALL_STAGES)
        before = [s for s in self.document_stages if order.index(s) < order.index(stage)]
        return before[-1] if before else None

    @property
    def last_document_stage(self) -> str | None:
        stages = self.document_stages
        return stages[-1] if stages else None

    @cached_property
    def _config(self) -> tuple[RunConfig | None, str | None]:
        record = dict(self.manifest.get("config", {}))
        mix, tokenize = record.get("mix"), record.get("tokenize")
        if isinstance(mix, dict) and isinstance(tokenize, dict) and not tokenize.get("enabled", True):
            # The record names every table, so a default [mix] reads as set: off, as the run left it.
            record["mix"] = {**mix, "enabled": False}
        try:
            return validate_model(RunConfig, record), None
        except (ConfigError, ValueError) as error:
            return None, str(error)

    @property
    def config(self) -> RunConfig | None:
        """The run's config as recorded in the manifest (None if it no longer validates, e.g. a
        model file named there is gone; :attr:`config_error` says why)."""
        return self._config[0]

    @property
    def config_error(self) -> str | None:
        return self._config[1]

    @property
    def seed(self) -> int:
        return int(self.manifest.get("config", {}).get("seed", 0) or 0)

    # ---- files ------------------------------------------------------------------------------

    def docs_files(self, stage: str) -> list[Path]:
        return self.outputs(stage, "docs")

    def doc_columns(self, stage: str) -> list[str]:
        files = self.docs_files(stage)
        return parquet_file(files[0]).schema_arrow.names if files else []

    def scan_docs(self, stage: str, columns: list[str] | None = None) -> pl.LazyFrame | None:
        """The stage's output documents, lazily (None when it has no docs file)."""
        files = self.docs_files(stage)
        if not files:
            return None
        frame = scan_parquet(files)
        if columns is not None:
            present = set(self.doc_columns(stage))
            frame = frame.select([c for c in columns if c in present])
        return frame

    def docs_by_id(self, stage: str, ids: list[str], columns: list[str] | None = None) -> pl.DataFrame:
        """The documents of ``ids`` in the stage's output (those it kept), in file order."""
        frame = self.scan_docs(stage, columns)
        if frame is None or not ids:
            return pl.DataFrame(schema={"id": pl.String, "text": pl.String})
        return frame.filter(pl.col("id").is_in(list(ids))).collect()

    def texts(self, stage: str | None, ids: list[str]) -> dict[str, str]:
        """``{id: text}`` of documents in the output of ``stage``."""
        if stage is None or not ids:
            return {}
        found = self.docs_by_id(stage, ids, ["id", "text"])
        return dict(zip(found["id"].to_list(), found["text"].to_list()))

    def removed(self, stage: str) -> pl.DataFrame:
        """Every document the stage removed (REMOVED_SCHEMA), in file order."""
        frames = [self._read(stage, f) for f in self.outputs(stage, "removed")]
        frames = [f for f in frames if f.height]
        if not frames:
            return pl.from_arrow(empty_table(REMOVED_SCHEMA))
        return pl.concat(frames, how="vertical_relaxed")

    def removed_rules(self) -> dict[str, str]:
        """Each rule that removed a document in this run, with its stage (in run order; within a
        stage, the rules by name)."""
        found = {}
        for stage in self.stages:
            files = self.outputs(stage, "removed")
            if files:
                try:
                    rules = scan_parquet(files).select(pl.col("rule").unique()).collect()["rule"]
                except Exception:  # the file that cannot be read, named
                    for path in files:
                        self._read(stage, path)
                    raise
                found.update(dict.fromkeys(sorted(rules.drop_nulls().to_list()), stage))
        return found

    def removed_by(self, rule: str) -> pl.DataFrame:
        """Every document ``rule`` removed (REMOVED_SCHEMA), in file order; :class:`UnknownRule`
        when it removed none."""
        rules = self.removed_rules()
        if rule not in rules:
            raise UnknownRule(rule, rules)
        return self.removed(rules[rule]).filter(pl.col("rule") == rule)

    def quarantine(self) -> pl.DataFrame | None:
        frames = [self._read("source", f) for f in self.outputs("source", "quarantine")]
        frames = [f for f in frames if f.height]
        return pl.concat(frames, how="vertical_relaxed") if frames else None

    def clusters(self) -> pl.DataFrame | None:
        path = self.root / "dedup" / "clusters.parquet"
        return read_parquet(path) if path.is_file() else None

    def index_matches(self) -> pl.DataFrame | None:
        """The documents dedup removed as in its dedup index (pipeline.dedup.indexed)."""
        path = self.root / "dedup" / "index_matches.parquet"
        return read_parquet(path) if path.is_file() else None

    def mix_documents(self) -> pl.DataFrame | None:
        path = self.root / "mix" / "documents.parquet"
        return read_parquet(path) if path.is_file() else None

    def mixture_names(self) -> list[str]:
        mix = self.stats.get("mix")
        names = list(mix.mixtures or {}) if mix else []
        return [n for n in names if (self.root / "mix" / n / MANIFEST_FILE).is_file()]

    def mixture_manifest(self, name: str) -> dict:
        return _read_json(self.root / "mix" / name / MANIFEST_FILE)

    def plan(self, name: str) -> pl.DataFrame | None:
        path = self.root / "mix" / name / PLAN_FILE
        return read_parquet(path) if path.is_file() else None

    def text_bytes(self, stage: str) -> int | None:
        """UTF-8 bytes of the text of the stage's output documents (None: no docs files)."""
        frame = self.scan_docs(stage, ["text"])
        if frame is None:
            return None
        return int(frame.select(pl.col("text").str.len_bytes().sum()).collect().item() or 0)
