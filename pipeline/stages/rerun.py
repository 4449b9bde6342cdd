"""Reruns: a run directory opened again with a changed config keeps the stages the change does not
reach and redoes the others.

A stage's identity is the part of the config it reads (``StageSpec.reads`` in the registry) and
the identity of the stage before it, so a change to a key reaches the stages that read it and every
stage after them. The manifest records each stage's identity and the files it wrote
(pipeline.formats.manifest); :func:`open_run` removes the files of the stages to redo (and of
stages no longer enabled) and nothing else, so the run then ends byte-identical to a fresh run of
the new config. A stage that is kept still runs: its units find their outputs complete and skip
them (and redo those whose inputs changed). :func:`plan_run` says what :func:`open_run` will do.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from pipeline.config import RunConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import (
    MADE,
    RECORDED,
    check_run_dir,
    config_record,
    new_manifest,
    own_files,
    package_versions,
    remove_own_outputs,
    stage_files,
    what_is_made,
)
from pipeline.io.writer import read_json, write_json
from pipeline.stages.attributes import FOLDER as ATTRIBUTES
from pipeline.stages.digests import file_contents, measured_with
from pipeline.stages.registry import REGISTRY, enabled_stages
from pipeline.stages.source import inputs_as_read

# Keys that say where the run is, not what it makes.
_NOT_READ = ("run_dir",)

KEPT = "kept (same config)"


def _value_at(record: dict, path: str):
    value = record
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _digest(made_of: dict) -> str:
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()


def stage_contents(config: RunConfig) -> dict[str, dict[str, list[str]]]:
    """Each stage that runs with ``config``, by the contents of the files it loads
    (pipeline.stages.digests.file_contents)."""
    return {stage: file_contents(stage, config) for stage in ("source", *enabled_stages(config))}


def stage_identities(config: RunConfig, contents: dict[str, dict[str, list[str]]] | None = None) -> dict[str, str]:
    """Each stage that runs with ``config`` (source first), by its identity: a digest of the config
    keys it reads, of the contents of the files it loads (``contents``: :func:`stage_contents`,
    when known already), and of the identity of the stage before it."""
    record = what_is_made(config_record(config))
    identities, before = {}, None
    for stage, files in (stage_contents(config) if contents is None else contents).items():
        reads = {path: _value_at(record, path) for path in REGISTRY[stage].reads}
        made_of = {"stage": stage, "reads": reads, "after": before, **({"files": files} if files else {})}
        identities[stage] = before = _digest(made_of)
    return identities


# The stage whose measurements are stored apart from its decisions (pipeline.stages.attributes).
MEASURING = "filter"


def measures_identity(config: RunConfig, identities: dict[str, str], contents: dict | None = None) -> str | None:
    """The identity of what the filter stage measures with ``config``: its identity without the
    parameters that only set thresholds (None when the stage does not run, or stores no
    measurements: ``filter.store_measures``). Two configs with the same one differ only in
    thresholds, and the stage decides again from what it stored. (``contents``: the contents of
    the files the stage loads, when known already.)"""
    if MEASURING not in identities or not config.filter.store_measures:
        return None
    order = list(identities)
    before = identities[order[order.index(MEASURING) - 1]]
    return _digest({"stage": MEASURING, "measures": measured_with(config, contents), "after": before})


@dataclass(frozen=True)
class Change:
    """A config key whose value differs, as a dotted path (``filter.params.gopher_quality.max_symbol_ratio``)."""

    path: str
    old: object
    new: object

    def __str__(self) -> str:
        return f"{self.path}: {json.dumps(self.old)} -> {json.dumps(self.new)}"


def config_changes(old, new, path: str = "") -> list[Change]:
    """Every key whose value differs between two config records, as deep as both are the same
    kind of thing (tables key by key, lists of the same length item by item)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            if not path and key in _NOT_READ:
                continue
            found += config_changes(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [c for i, (a, b) in enumerate(zip(old, new)) for c in config_changes(a, b, f"{path}[{i}]")]
    return [] if old == new else [Change(path, old, new)]


def _covers(read: str, path: str) -> bool:
    return path == read or path.startswith((f"{read}.", f"{read}[")) or read.startswith(f"{path}.")


def readers(path: str) -> list[str]:
    """The stages that read the config key ``path``, in run order."""
    return [name for name, spec in REGISTRY.items() if any(_covers(read, path) for read in spec.reads)]


def _read_by(change: Change) -> str:
    return f"{change} (read by {', '.join(readers(change.path)) or 'no stage'})"


@dataclass(frozen=True)
class StagePlan:
    stage: str
    action: str  # kept | resumes | redecides | reruns | runs | removed
    why: str

    def __str__(self) -> str:
        return f"{self.stage}: {self.why}"


@dataclass
class RunPlan:
    """What opening the run directory with a config does: the config keys that changed, and per
    stage whether its outputs are kept or redone, and why."""

    stages: list[StagePlan]
    changes: list[Change] = field(default_factory=list)
    new: bool = False  # no run in the folder yet
    # What the plan was made from, for open_run to record: each stage's identity and the contents
    # of the files it loads, and the filter stage's measures' identity.
    identities: dict[str, str] = field(default_factory=dict)
    contents: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    measures: str | None = None

    def action(self, stage: str) -> str | None:
        return next((p.action for p in self.stages if p.stage == stage), None)

    def lines(self) -> list[str]:
        return [f"changed: {_read_by(change)}" for change in self.changes] + [str(plan) for plan in self.stages]


def _legacy_refusal(run_dir, changes: list[Change]) -> ConfigError:
    named = "; ".join(_read_by(c) for c in changes[:5])
    more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""
    return ConfigError(
        f"run_dir: {str(run_dir)!r} holds a run made with another config ({named}{more}), from before "
        "reruns were recorded; choose a new run_dir, or delete that folder to start over"
    )


def _changed_contents(record: dict, contents: dict[str, list[str]], read: list[str]) -> list[str]:
    """Why the files a stage loads differ from those it was made with, one phrase per key (``read``:
    the changed config keys the stage reads)."""
    if "contents" not in record:  # made before the contents were recorded, or with no such file
        return ["the contents of the files it loads were not recorded"] if contents and not read else []
    made = record["contents"]
    return [
        f"the contents of {key} changed"
        for key in sorted(set(made) | set(contents))
        if made.get(key) != contents.get(key)
    ]


def _stage_plan(stage: str, record: dict | None, identity: str, changes: list[Change], upstream: str | None, now):
    """The plan of one stage (``now``: the contents of the files it loads, and for the filter
    stage its measures' identity)."""
    contents, measures = now
    if record is None:
        return StagePlan(stage, "runs", "runs (not run here before)")
    if record["identity"] == identity:
        if "files" in record:
            return StagePlan(stage, "kept", KEPT)
        return StagePlan(stage, "resumes", "resumes (same config; it had not finished)")
    read = [str(c) for c in changes if stage in readers(c.path)]
    read += _changed_contents(record, contents, read)
    if measures is not None and record.get("measures") == measures:
        return StagePlan(stage, "redecides", f"re-decides from its stored measurements ({', '.join(read)})")
    if read:
        return StagePlan(stage, "reruns", f"reruns ({', '.join(read)})")
    return StagePlan(stage, "reruns", f"reruns (its input changes: {upstream or 'the stages before it'})")


def plan_run(config: RunConfig) -> RunPlan:
    """What :func:`open_run` will do with the run directory, changing nothing. Raises ConfigError
    with one line for a folder that is not a run, or a run of another config made before reruns
    were recorded."""
    check_run_dir(config.run_dir)
    layout = RunLayout(config.run_dir)
    contents = stage_contents(config)
    identities = stage_identities(config, contents)
    made_from = {
        "identities": identities,
        "contents": contents,
        "measures": measures_identity(config, identities, contents.get(MEASURING)),
    }
    if not layout.manifest.exists():
        return RunPlan([StagePlan(s, "runs", "runs (a new run)") for s in identities], new=True, **made_from)
    manifest = read_json(layout.manifest)
    changes = config_changes(what_is_made(manifest["config"]), what_is_made(config_record(config)))
    made = manifest.get(MADE)
    if made is None:  # made before reruns were recorded: only the same config resumes it
        if changes:
            raise _legacy_refusal(config.run_dir, changes)
        return RunPlan([StagePlan(s, "kept", KEPT) for s in identities if s in manifest["stages"]], **made_from)
    plans, upstream = [], None
    for stage in REGISTRY:
        record = made.get(stage)
        if stage not in identities:
            if record is not None or stage in manifest["stages"]:
                plans.append(StagePlan(stage, "removed", "removed (no longer enabled)"))
                upstream = upstream or f"{stage} is no longer enabled"
            continue
        now = (contents[stage], made_from["measures"] if stage == MEASURING else None)
        plan = _stage_plan(stage, record, identities[stage], changes, upstream, now)
        if plan.action in ("reruns", "runs", "redecides"):
            upstream = upstream or f"{stage} {'re-decides' if plan.action == 'redecides' else plan.action}"
        plans.append(plan)
    return RunPlan(plans, changes, **made_from)


def redone_before(plan: RunPlan, stage: str) -> list[StagePlan]:
    """The stages before ``stage`` that opening the run with the plan's config redoes or removes
    (all but those kept), in run order: what running ``stage`` alone would delete and not make."""
    order = list(REGISTRY)
    return [p for p in plan.stages if order.index(p.stage) < order.index(stage) and p.action != "kept"]


def _stored_measurements(run_dir, stage: str, record: dict) -> list[str]:
    """The files of the stage's stored measurements (pipeline.stages.attributes) it wrote."""
    return [f for f in own_files(run_dir, stage, record) if f.startswith(f"{ATTRIBUTES}/")]


def finished(config: RunConfig, manifest: dict) -> bool:
    """Whether a run of ``config`` would find every stage done, as opened (``manifest``: what
    :func:`open_run` returned): each stage the config runs finished and kept, and the source
    stage's input files what it read (pipeline.stages.source.inputs_as_read). Such a run has
    nothing to do."""
    stages = ("source", *enabled_stages(config))
    return all(stage in manifest["stages"] for stage in stages) and inputs_as_read(config, manifest)


def open_run(config: RunConfig) -> dict:
    """Create the run directory's manifest, or open an existing run with ``config``: the outputs of
    the stages :func:`plan_run` redoes or drops are removed (the files the manifest says they
    wrote, nothing else), and every stage that runs is recorded with its identity and the files
    its folder holds before it writes there (the manifest is written only where it changes).
    Returns the manifest."""
    plan = plan_run(config)
    layout = RunLayout(config.run_dir)
    if plan.new:
        layout.root.mkdir(parents=True, exist_ok=True)
        manifest = new_manifest(config)
    else:
        manifest = read_json(layout.manifest)
    before = None if plan.new else json.dumps(manifest, sort_keys=True)
    made = manifest.get(MADE)
    if made is not None:
        stored: dict[str, list[str]] = {}  # per stage that re-decides, the measurements it keeps
        for step in plan.stages:
            if step.action in ("reruns", "removed", "redecides"):
                record = made.pop(step.stage, None)
                if record is not None:  # a stage never begun here wrote nothing to remove
                    if step.action == "redecides":
                        stored[step.stage] = _stored_measurements(config.run_dir, step.stage, record)
                    remove_own_outputs(config.run_dir, step.stage, record, keep=stored.get(step.stage, ()))
                manifest["stages"].pop(step.stage, None)
                if step.stage == "source":
                    manifest["inputs"] = []
        for stage, identity in plan.identities.items():
            if stage not in made:
                here = stage_files(config.run_dir, stage)
                made[stage] = {"identity": identity, "foreign": sorted(set(here) - set(stored.get(stage, ())))}
                if plan.contents[stage]:
                    made[stage]["contents"] = plan.contents[stage]
                if stage == MEASURING:
                    made[stage]["measures"] = plan.measures
                # Its folder keeps a record of the files it writes (StageDir.make): only those are its own.
                made[stage][RECORDED] = True
    manifest["config"] = config_record(config)
    manifest["versions"] = package_versions()
    if json.dumps(manifest, sort_keys=True) != before:  # a run opened again unchanged writes nothing
        write_json(manifest, layout.manifest)
    return manifest
