"""The demo's downstream task: BBC News topics, reserved when the demo corpus is built."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.formats.task import labels, topic_task_frame, write_task
from pipeline.io.writer import write_bytes


def demo_topic_task(
    out_path: Path, train_docs: int = 500, test_docs: int = 300, seed: int = 0, corpus_dir: Path | None = None
) -> dict:
    """BBC News topic classification: ``train_docs + test_docs`` articles (class-balanced, seeded)
    written as a task file; returns ``{"path", "train", "test", "labels"}``.

    With ``corpus_dir`` (a demo corpus), the task is the one the corpus reserved when it was built
    (``heldout/task.parquet``: those articles and every copy of them are in none of its files),
    copied byte for byte; ``seed`` is then the corpus's, and the sizes must match its task."""
    if corpus_dir is not None:
        from demo.heldout import heldout_task_path

        source = heldout_task_path(corpus_dir)
        if not source.is_file():
            raise FileNotFoundError(f"{source} is missing; rebuild the demo corpus with build_demo_corpus()")
        task = pl.read_parquet(source)
        counts = dict(task.group_by("split").len().iter_rows())
        if (counts.get("train", 0), counts.get("test", 0)) != (train_docs, test_docs):
            raise ValueError(
                f"{source} holds {counts.get('train', 0)} train and {counts.get('test', 0)} test "
                f"articles, not {train_docs} and {test_docs}; build the corpus with "
                f"task_train_docs={train_docs}, task_test_docs={test_docs}"
            )
        write_bytes(source.read_bytes(), Path(out_path))
        return {
            "path": str(out_path),
            "train": int(counts.get("train", 0)),
            "test": int(counts.get("test", 0)),
            "labels": labels(task),
        }
    from demo.real_text import read_bbc

    articles, _ = read_bbc()
    return write_task(topic_task_frame(articles, train_docs, test_docs, seed), Path(out_path))
