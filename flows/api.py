"""Curation from Python: the whole run (:func:`curate`) or one stage (:func:`run_stage`), on the
same Prefect flows as ``curate run``, and the library's API (``pipeline.api``) under the same roof.

::

    from flows.api import curate, load_config

    run = curate(load_config("configs/demo.toml"))  # every stage; a RunResults
    run.counts()["filter"]  # docs_in, docs_out, removed by rule, quarantined
    run.curated()  # the curated documents as a polars frame

Without ``PREFECT_API_URL`` the flows run on Prefect's temporary local server, offline, with its
database under ``<run_dir>/.prefect`` (``flows.runtime``); Prefect is imported on the first call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

from flows.runners import LOCAL, Runner, check_storage, running_on
from flows.runtime import LOADING, begin_server, configure_prefect, load_for, temporary_server
from pipeline.api import (
    ConfigError,
    Outcome,
    RunConfig,
    RunResults,
    dedup_documents,
    filter_documents,
    load_config,
    read_run,
    repair_documents,
)
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import check_run_dir, run_lock
from pipeline.formats.stats import StageStats
from pipeline.stages.registry import REGISTRY, enabled_stages, input_stage
from pipeline.stages.rerun import finished, open_run, plan_run, redone_before
from pipeline.stages.run import RunFiles
from pipeline.stages.source import check_quarantine, check_readers
from report.emptied import warn_emptied

__all__ = [
    "ConfigError",
    "Outcome",
    "RunConfig",
    "RunResults",
    "curate",
    "dedup_documents",
    "filter_documents",
    "load_config",
    "mixsearch",
    "read_run",
    "repair_documents",
    "run_stage",
]


@contextmanager
def _prepared(
    config: RunConfig, runner: Runner, quiet: bool, progress: bool, whole_run: bool
) -> Iterator[Runner | None]:
    """What a run needs before its first flow: the run directory checked, locked and its manifest
    made (a source whose reader does not fit its files, or a folder that is not a run, stops
    here, before Prefect starts; a changed config's stages to redo are cleared, see
    pipeline.stages.rerun), Prefect configured, and ``runner`` ready; None instead where
    ``whole_run`` finds every stage done (nothing to run, so nothing of Prefect started).
    ``progress``: the steps and their units on stderr, as ``curate run`` shows them."""
    check_readers(config.sources)
    check_storage(runner, config.run_dir)
    check_run_dir(config.run_dir)
    with run_lock(config.run_dir):
        manifest = open_run(config)
        if whole_run and finished(config, manifest):
            yield None
            return
        from rich.console import Console

        from flows.display import RunDisplay

        err = Console(stderr=True)
        with RunDisplay(err, live=err.is_terminal, quiet=not progress) as display, ExitStack() as run:
            with display.step("importing Prefect"):
                configure_prefect(config.run_dir, quiet=quiet, progress=progress)
                begun = begin_server()  # it starts while Prefect is imported here
                if begun is not None:
                    run.callback(begun.stop)  # (a failure before the server is waited for)
                from flows.progress import reporting
            # The temporary server in a session of its own, stopped on leaving (flows.runtime), as
            # `curate run` starts it: Ctrl-C in the caller's terminal does not kill it under the run.
            with display.step(f"starting Prefect's temporary server{LOADING if begun is not None else ''}"):
                run.enter_context(temporary_server(begun, lambda: load_for(config)))
            ready = run.enter_context(running_on(runner))
            run.enter_context(reporting(display))
            yield ready


def curate(
    config: RunConfig | str | Path | Mapping, runner: Runner | None = None, quiet: bool = True, progress: bool = True
) -> RunResults:
    """Run every stage of ``config`` (a RunConfig, a TOML path or a dict: :func:`load_config`), as
    ``curate run`` does, and return the run's results. A finished stage is not run again, so a
    second call resumes; a call that finds every stage done returns at once, starting nothing.
    ``runner`` (``flows.runners.Runner``) says where tasks run: local threads by default;
    ``quiet`` keeps Prefect's log to warnings; ``progress`` shows each step and its units on
    stderr as ``curate run`` does. A source whose quarantined share passes its
    ``max_quarantine_fraction`` raises QuarantineError after the source stage, which is kept.

    Example::

        run = curate({"run_dir": "runs/books", "sources": [
            {"name": "books", "reader": "jsonl", "paths": ["data/books/"]}]})
        run.counts()["dedup"]["removed"]  # {"dedup.exact_duplicate": ..., "dedup.near_duplicate": ...}
    """
    config = load_config(config)
    with _prepared(config, runner or LOCAL, quiet, progress, whole_run=True) as ready:
        if ready is None:  # every stage done: its stats as written (a run's own warnings are its own)
            stats = RunFiles.open(config.run_dir).stats
        else:
            from flows.curate import curate_flow

            stats = {stage: StageStats.from_dict(found) for stage, found in curate_flow(config, ready).items()}
    check_quarantine(RunLayout(config.run_dir).stage("source"), config)  # a source past its limit
    run = read_run(config.run_dir)
    warn_emptied(run.files.stats)  # a stage that kept no document: loud, not a silent success
    _warn_stages(stats)
    return run


class StageWarning(UserWarning):
    """A warning a stage gave in its stats (``curate run`` prints it as a ``warning:`` line): stored
    measurements measured again, a validation split too small to measure."""


def _warn_stages(stats: Mapping[str, StageStats]) -> None:
    import warnings

    for counts in stats.values():
        for line in counts.warnings or []:
            warnings.warn(line, StageWarning, stacklevel=3)


def _check_inputs_current(stage: str, config: RunConfig) -> None:
    """Refuse to run ``stage`` alone where ``config`` changes a stage before it: opening the run
    would delete that stage's outputs (pipeline.stages.rerun), which this call does not make."""
    if stage == "source" or not RunLayout(config.run_dir).manifest.exists():
        return
    stale = redone_before(plan_run(config), stage)
    if not stale:
        return
    from flows.display import listed

    names = [step.stage for step in stale]
    named = listed(names)
    first = next((step.stage for step in stale if step.action != "removed"), None)
    fix = f"run_stage({first!r}, config) first, or curate(config)" if first else "run curate(config)"
    raise ConfigError(
        f"{stage}: the {named} stage{'s' if len(names) > 1 else ''} in {str(config.run_dir)!r} "
        f"{'are' if len(names) > 1 else 'is'} out of date for this config ({'; '.join(map(str, stale))}); {fix}"
    )


def run_stage(
    stage: str,
    config: RunConfig | str | Path | Mapping,
    runner: Runner | None = None,
    quiet: bool = True,
    progress: bool = True,
) -> dict:
    """Run one stage of ``config`` on the documents of the stage before it (which must have run:
    ``source`` first) and return the stage's stats (as its ``stats.json``). Stages, in order:
    source, lang, filter, dedup, lines, tokenize, mix; a stage the config turns off is refused.

    Example::

        config = load_config("configs/demo.toml")
        run_stage("source", config)
        run_stage("lang", config)
        run_stage("filter", config)["removed"]  # {rule: documents removed}
    """
    config = load_config(config)
    if stage not in REGISTRY:
        raise ValueError(f"unknown stage {stage!r}; the stages are {', '.join(REGISTRY)}")
    if stage != "source" and stage not in enabled_stages(config):
        raise ConfigError(f"{stage}: the stage is off in this config; set {stage}.enabled = true to run it")
    previous = input_stage(stage, config) if stage != "source" else None
    if previous is not None and not RunLayout(config.run_dir).stage(previous).stats.is_file():
        raise ConfigError(
            f"{stage} reads the documents of {previous}, which has not run in {str(config.run_dir)!r}; "
            f"run_stage({previous!r}, config) first, or curate(config)"
        )
    _check_inputs_current(stage, config)
    with _prepared(config, runner or LOCAL, quiet, progress, whole_run=False) as ready:
        from flows.curate import stage_flow

        stats = stage_flow(stage, config, ready)
    if stage == "source":
        check_quarantine(RunLayout(config.run_dir).stage("source"), config)  # a source past its limit
    typed = {stage: StageStats.from_dict(stats)}
    warn_emptied(typed)
    _warn_stages(typed)
    return stats


def mixsearch(config, quiet: bool = True) -> dict:
    """Search which mixture of the pool's groups to train on, as ``curate mixsearch`` does:
    ``config`` an experiment config with a ``[mixsearch]`` section (an ExperimentConfig, a TOML
    path or a dict). Returns results.json's content; a second call reads back every run it finds.

    Example::

        results = mixsearch("configs/mixsearch-demo.toml")
        results["fits"]["heldout"]["proposal"]["weights"]  # {"news/en": ..., "dialogues/uk": ...}
        [c["sentence"] for c in results["validation"]["comparisons"] if c["family"] == "primary"]
    """
    from experiment.config import ExperimentConfig, load_experiment, parse_experiment

    if not isinstance(config, ExperimentConfig):
        config = load_experiment(Path(config)) if isinstance(config, (str, Path)) else parse_experiment(dict(config))
    config.require("mixsearch")
    configure_prefect(config.out_dir, quiet=quiet, command="mixsearch")
    from flows.mixsearch import mixsearch_flow
    from flows.runners import shared_api

    # With runs in processes of their own, the flow and every worker report to one Prefect API.
    with shared_api() if config.parallel_runs > 1 else temporary_server():
        return mixsearch_flow(config)
