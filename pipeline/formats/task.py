"""Downstream classification tasks for the transfer half of an experiment.

A task is one Parquet file with a row per labelled text::

    id     string  unique
    text   string
    label  string  the class
    split  string  "train" (labelled examples to adapt on), "test", or "dev" (optional: picks
                   settings and stops fine-tuning; without it, part of "train" is set aside)

The texts are held out from pretraining: an experiment puts the file in every run's
``mix.exclude``, so no pretraining document near one of them is trained on. :func:`task_splits`
sets a dev split aside (the file's, or a class-balanced part of the train split fixed by the task's
seed); the rest of the train split is the labelled pool. Labelled subsets of the pool are nested
and class-balanced (:func:`labelled_subsets`), so a model adapted on 50 examples saw a subset of the
200 that another was adapted on in the same draw; each draw (:func:`draw_seed`) orders the pool anew.

The built-in demo task (:func:`demo_topic_task`) is BBC News topic classification (business,
entertainment, politics, sports, tech), from the same package data the demo corpus's news comes
from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pipeline.formats.hashing import seeded_id_hash
from pipeline.io.writer import write_parquet

TASK_COLUMNS = {"id": pl.String, "text": pl.String, "label": pl.String, "split": pl.String}
SPLITS = ("train", "test")  # required; "dev" is optional
OPTIONAL_SPLITS = ("dev",)
SALT_TASK = 0x5441534B  # "TASK"
SALT_DEV = 0x00444556  # "DEV": the dev split's order, apart from the draws


def load_task(path: Path) -> pl.DataFrame:
    """A task file, checked: the columns of the module docstring, unique ids, non-empty texts and
    labels, both splits present, at least 2 classes in training and every test label seen there.
    Raises ValueError (FileNotFoundError for no file) with one line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no task file at {path}; make one with demo_topic_task() or write "
            "id, text, label, split columns to Parquet"
        )
    try:
        task = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(f"{path}: not a Parquet file of id, text, label, split columns ({first})") from None
    missing = [c for c in TASK_COLUMNS if c not in task.columns]
    if missing:
        raise ValueError(f"{path}: the task lacks columns {missing} (it has {task.columns})")
    task = task.select([pl.col(c).cast(t) for c, t in TASK_COLUMNS.items()])
    if task["id"].is_duplicated().any():
        raise ValueError(f"{path}: id {task.filter(pl.col('id').is_duplicated())['id'][0]!r} is repeated")
    empty = task.filter(pl.col("text").is_null() | (pl.col("text").str.strip_chars() == ""))
    if empty.height:
        raise ValueError(f"{path}: {empty.height} rows have no text (first: {empty['id'][0]!r})")
    found = set(task["split"].unique().to_list())
    if found - {*SPLITS, *OPTIONAL_SPLITS} or set(SPLITS) - found:
        raise ValueError(
            f"{path}: split values must be {SPLITS}, and optionally {OPTIONAL_SPLITS} "
            f"(found {sorted(task['split'].unique())})"
        )
    unlabelled = task.filter(pl.col("label").is_null() | (pl.col("label").str.strip_chars() == ""))
    if unlabelled.height:
        raise ValueError(f"{path}: {unlabelled.height} rows have no label (first: {unlabelled['id'][0]!r})")
    classes = sorted(task.filter(pl.col("split") == "train")["label"].unique().to_list())
    if len(classes) < 2:
        raise ValueError(
            f"{path}: the train split has {len(classes)} class ({', '.join(map(repr, classes))}); "
            "a classification task needs at least 2"
        )
    unseen = set(task.filter(pl.col("split") == "test")["label"]) - set(
        task.filter(pl.col("split") == "train")["label"]
    )
    if unseen:
        raise ValueError(f"{path}: test labels {sorted(unseen)} never occur in the train split")
    return task


def labels(task: pl.DataFrame) -> list[str]:
    """The classes, sorted: a label's index in this list is its class number."""
    return sorted(task["label"].unique().to_list())


def _balanced_order(frame: pl.DataFrame, seed: int, salt: int = SALT_TASK) -> pl.DataFrame:
    """Rows in a seeded order that cycles through the classes: the first k rows hold every class
    about k / classes times (round robin over classes, each class in seeded-hash order)."""
    keys = seeded_id_hash(frame["id"], seed, salt)
    return (
        frame.with_columns(key=pl.Series(keys, dtype=pl.UInt64))
        .sort(["key", "id"])
        .with_columns(turn=pl.int_range(pl.len()).over("label"))
        .sort(["turn", "label"])
        .drop("key", "turn")
    )


def task_splits(task: pl.DataFrame, dev_docs: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``(pool, dev, test)``: the task's dev split if it has one, else the first ``dev_docs`` of the
    train split in a class round robin seeded by ``seed`` (at most half of it); the pool is the rest
    of the train split. Each sorted by id."""
    train = task.filter(pl.col("split") == "train")
    dev = task.filter(pl.col("split") == "dev")
    if dev.height == 0 and dev_docs > 0:
        dev = _balanced_order(train, seed, SALT_DEV).head(min(dev_docs, train.height // 2))
        train = train.filter(~pl.col("id").is_in(dev["id"].implode()))
    test = task.filter(pl.col("split") == "test")
    return train.sort("id"), dev.sort("id"), test.sort("id")


def draw_seed(seed: int, draw: int) -> int:
    """The seed of draw ``draw`` of the labelled subsets for run seed ``seed``."""
    return seed * 1_000_003 + draw


def labelled_subsets(pool: pl.DataFrame, sizes: Sequence[int], seed: int) -> dict[int, pl.DataFrame]:
    """Nested, class-balanced subsets of the labelled pool (its "train" rows): size n -> the first n
    examples of one seeded class round robin (0 or a size above the pool: all of it)."""
    train = _balanced_order(pool.filter(pl.col("split") == "train"), seed)
    return {int(n): train.head(n if 0 < n < train.height else train.height) for n in sizes}


def topic_task_frame(
    articles: Sequence,
    train_docs: int = 500,
    test_docs: int = 300,
    seed: int = 0,
    eligible: Sequence[bool] | None = None,
) -> pl.DataFrame:
    """The demo task's rows, chosen from ``articles`` (the BBC articles, in the order
    ``demo`` reads them): ``train_docs + test_docs`` of them, class-balanced and
    seeded, as task columns plus ``index`` (the article's position in ``articles``). Only articles
    whose ``eligible`` flag is true are candidates (all when it is None)."""
    frame = pl.DataFrame(
        {
            "id": [f"bbc-{d.topic}-{i:04d}" for i, d in enumerate(articles)],
            "text": [d.text for d in articles],
            "label": [d.topic for d in articles],
            "index": list(range(len(articles))),
        },
        schema={"id": pl.String, "text": pl.String, "label": pl.String, "index": pl.Int64},
    )
    if eligible is not None:
        frame = frame.filter(pl.Series(list(eligible), dtype=pl.Boolean))
    # The seeded class round robin: its first test_docs rows are the test split, the next
    # train_docs the train split, so both are class-balanced (as far as each class has articles).
    chosen = _balanced_order(frame, seed).head(train_docs + test_docs)
    split = ["test"] * min(test_docs, chosen.height) + ["train"] * max(chosen.height - test_docs, 0)
    return chosen.with_columns(split=pl.Series(split, dtype=pl.String)).sort("id")


def write_task(task: pl.DataFrame, out_path: Path) -> dict:
    """Write the task columns of ``task`` to ``out_path``; return ``{"path", "train", "test", "labels"}``."""
    task = task.select(list(TASK_COLUMNS))
    write_parquet(task.to_arrow(), Path(out_path))
    counts = dict(task.group_by("split").len().iter_rows())
    return {
        "path": str(out_path),
        "train": int(counts.get("train", 0)),
        "test": int(counts.get("test", 0)),
        "labels": labels(task),
    }
