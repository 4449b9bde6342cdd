"""The build: :func:`build_demo_corpus` sets the held-out sets and the task aside, plans the
corpus, writes its files, labels and held-out files, removes what an earlier build left, and
writes the summary ``corpus.json`` last."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from demo.heldout import (
    HELDOUT_CANARIES,
    HELDOUT_MANIFEST,
    HELDOUT_TASK,
    HELDOUT_TEXTS,
    heldout_manifest,
    heldout_table,
    reserve,
)
from demo.plan import Doc, assign_keys, make_plan, random_streams
from demo.real_text import load_real_text
from demo.writers import (
    VERSION,
    Written,
    atomic_write,
    canaries_table,
    labels_table,
    write_dialogues,
    write_news,
    write_notes,
    write_web,
)
from pipeline.io.owner import claim, remove_written

MAX_DOCS_PER_FILE = 10_000
SOURCES = ("news", "dialogues", "web", "notes")
LABELS_NOTE = "labels.parquet is ground truth for evaluation; the pipeline never reads it"


def _shards(docs: list[Doc], rng: np.random.Generator) -> list[list[Doc]]:
    """The documents in a random order, split evenly into files of at most MAX_DOCS_PER_FILE."""
    if not docs:
        return []
    shuffled = [docs[i] for i in rng.permutation(len(docs)).tolist()]
    count = -(-len(shuffled) // MAX_DOCS_PER_FILE)
    bounds = np.linspace(0, len(shuffled), count + 1).round().astype(int).tolist()
    return [shuffled[a:b] for a, b in zip(bounds, bounds[1:])]


def _claim(out_dir: Path) -> None:
    """Take ``out_dir`` for the corpus (pipeline.io.owner): a new or empty folder, or one this
    project built a corpus in before (by its record, or the file list of its ``corpus.json``).
    Raises ForeignFolderError with one line for a folder of other files."""
    try:
        earlier = orjson.loads((out_dir / "corpus.json").read_bytes())
        adopt = [*earlier["files"], "corpus.json"] if "version" in earlier else []
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        adopt = []
    claim(out_dir, "demo corpus", adopt=[rel for rel in adopt if isinstance(rel, str)])


def _remove_stale(out_dir: Path, keep: Iterable[str]) -> None:
    """Delete the corpus files of an earlier build (other size or seed) this one did not write,
    and temporaries a killed build left of the files this one wrote: never another file."""
    keep = set(keep)
    remove_written(out_dir, keep=keep)
    for rel in keep:
        (out_dir / f"{rel}.tmp").unlink(missing_ok=True)


def _counts(docs: list[Doc]) -> dict:
    """Documents per source, per kind, and per kind within each source."""
    by_source: dict[str, Counter] = {}
    for doc in docs:
        by_source.setdefault(doc.source, Counter())[doc.kind] += 1
    return {
        "source": {source: sum(kinds.values()) for source, kinds in sorted(by_source.items())},
        "kind": dict(sorted(Counter(doc.kind for doc in docs).items())),
        "source_kind": {source: dict(sorted(kinds.items())) for source, kinds in sorted(by_source.items())},
    }


def duplication_shape(labels: pa.Table) -> dict:
    """Copies per kind, the largest clusters (copies of one original), the share of copies by
    kind and by copy kind: what corpus.json says about the corpus's duplication."""
    frame = pl.from_arrow(labels.select(["key", "kind", "original", "copy_kind", "copies", "canary"]))
    originals = frame.filter(pl.col("original").is_null()).select("key", base="kind")
    copies = frame.filter(pl.col("original").is_not_null()).join(
        originals, left_on="original", right_on="key", how="left"
    )
    total = max(1, copies.height)
    per_kind = {}
    for (kind,), part in sorted(copies.group_by(["base"]), key=lambda item: item[0]):
        clusters = part.group_by("original").len()["len"]
        per_kind[kind] = {
            "originals": int(originals.filter(pl.col("base") == kind).height),
            "copies": part.height,
            "share_of_copies": round(part.height / total, 4),
            "originals_copied": clusters.len(),
            "largest_cluster": int(clusters.max()),
            "copy_kinds": dict(sorted(Counter(part["copy_kind"].to_list()).items())),
        }
    largest = copies.group_by("original", "base").len().sort(["len", "original"], descending=[True, False]).head(10)
    canaries = (
        frame.filter(pl.col("canary") & pl.col("original").is_null())
        .select(occurrences=pl.col("copies") + 1)["occurrences"]
        .to_list()
    )
    return {
        "copies": copies.height,
        "copy_share": round(copies.height / max(1, frame.height), 4),
        "by_kind": per_kind,
        "largest_clusters": [{"original": o, "kind": k, "copies": int(n)} for o, k, n in largest.iter_rows()],
        "canaries": {str(n): count for n, count in sorted(Counter(canaries).items())},
    }


def _cached_summary(out_dir: Path, docs: int, seed: int, task: dict) -> dict | None:
    try:
        summary = orjson.loads((out_dir / "corpus.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if (
        summary.get("version") == VERSION
        and summary.get("docs") == docs
        and summary.get("seed") == seed
        and summary.get("task_docs") == task
        and all((out_dir / rel).is_file() for rel in summary.get("files", []))
    ):
        return summary
    return None


def build_demo_corpus(
    out_dir: Path, docs: int = 20_000, seed: int = 0, task_train_docs: int = 500, task_test_docs: int = 300
) -> dict:
    """Build the demo corpus of ``docs`` documents into ``out_dir``; return its summary.

    Before anything is planned, the held-out sets (``heldout/texts.parquet``, described by
    ``heldout/manifest.json``) and the downstream task's articles (``heldout/task.parquet``, in
    pipeline.formats.task' format: ``task_train_docs`` + ``task_test_docs`` BBC articles) are set aside:
    no data file holds them or any copy of them. ``heldout/canaries.parquet`` lists the canaries
    planted in the news pool (:data:`CANARIES`) with the ids of their occurrences, and the control
    canaries planted nowhere.

    The summary is also written to ``out_dir/corpus.json``, last, so that its presence means a
    complete corpus; a corpus already there for the same arguments is returned as is.
    """
    from pipeline.formats.task import write_task

    out_dir = Path(out_dir)
    task_docs = {"train": task_train_docs, "test": task_test_docs}
    cached = _cached_summary(out_dir, docs, seed, task_docs)
    if cached is not None:
        return cached
    _claim(out_dir)
    (out_dir / "corpus.json").unlink(missing_ok=True)  # its own (the claim says so): written last, again

    streams = random_streams(seed)
    real = load_real_text()
    reserved = reserve(real, seed, streams["heldout"], task_train_docs, task_test_docs)
    plan = make_plan(docs, streams, reserved.pool)
    assign_keys(plan, streams["keys"])
    by_source = {source: [d for d in plan.docs if d.source == source] for source in SOURCES}
    shard_rng = streams["shards"]
    written = Written()
    write_news(_shards(by_source["news"], shard_rng), out_dir, written)
    write_dialogues(_shards(by_source["dialogues"], shard_rng), out_dir, written)
    write_web(_shards(by_source["web"], shard_rng), out_dir, written, plan.sites, seed, streams["pages"])
    write_notes(by_source["notes"], out_dir, written)

    labels = labels_table(written, plan)
    atomic_write(out_dir / "labels.parquet", lambda stream: pq.write_table(labels, stream, compression="zstd"))
    written.files.append("labels.parquet")

    texts, extra = heldout_table(reserved, plan, streams["heldout"])
    atomic_write(out_dir / HELDOUT_TEXTS, lambda stream: pq.write_table(texts, stream, compression="zstd"))
    canaries = canaries_table(plan)
    atomic_write(out_dir / HELDOUT_CANARIES, lambda stream: pq.write_table(canaries, stream, compression="zstd"))
    task_info = write_task(reserved.task, out_dir / HELDOUT_TASK)
    task_info = {"train": task_info["train"], "test": task_info["test"], "labels": task_info["labels"]}
    manifest = heldout_manifest(texts, reserved, seed, task_info, extra)
    atomic_write(
        out_dir / HELDOUT_MANIFEST, lambda stream: stream.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    )
    written.files += [HELDOUT_TEXTS, HELDOUT_TASK, HELDOUT_MANIFEST, HELDOUT_CANARIES]
    _remove_stale(out_dir, written.files)

    summary = {
        "version": VERSION,
        "seed": seed,
        "docs": docs,
        "task_docs": task_docs,
        "written": len(written.rows),
        "counts": _counts([doc for doc, *_ in written.rows]),
        "duplication": duplication_shape(labels),
        "heldout": {
            "texts": HELDOUT_TEXTS,
            "task": HELDOUT_TASK,
            "manifest": HELDOUT_MANIFEST,
            "canaries": HELDOUT_CANARIES,
            "documents": {name: entry["documents"] for name, entry in manifest["sets"].items()},
            "task_documents": {"train": task_info["train"], "test": task_info["test"]},
        },
        "real_text": plan.stats,
        "files": sorted(written.files),
        "labels": LABELS_NOTE,
    }
    atomic_write(
        out_dir / "corpus.json", lambda stream: stream.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    )
    return summary
