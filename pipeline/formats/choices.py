"""Multiple-choice items scored by likelihood: one row per item, in JSON lines or Parquet.

    id        string, unique            the item's id
    task      string                    the task it belongs to (a file may hold several)
    context   string                    the text the choices continue (may be empty)
    choices   list of strings, >= 2     the candidate continuations, as they follow the context
    gold      integer, 0-based          the index of the right choice
    group     string, optional          a subset to report apart (a topic, a source)
    lang      string, optional          the language of the item

A choice is written as it follows the context, with its leading space where one belongs
(``context = "The capital of France is"``, ``choices = [" Paris", " Rome"]``): the evaluator scores
it as the continuation of the context, the cloze formulation of OLMES and lighteval, which small
models can do (the lettered multiple-choice one works only at scale).

:func:`read_choice_items` is the one reader: it checks every item and raises
:class:`ChoiceItemsError` with one line naming the file and the item on the first problem.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import polars as pl

from pipeline.formats.configfile import ConfigError
from pipeline.io.storage import as_path
from pipeline.io.writer import write_bytes, write_parquet

REQUIRED = {"id": pl.String, "task": pl.String, "context": pl.String, "choices": pl.List(pl.String), "gold": pl.Int64}
OPTIONAL = {"group": pl.String, "lang": pl.String}
SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".parquet")


class ChoiceItemsError(ConfigError):
    """A file of multiple-choice items that cannot be scored; the message is one line (a user's
    error: a ConfigError, so every command stops on it with that line)."""


# What each column's values must be: a JSON value of another type (1.7, "1" or true as a gold index,
# 5 as a context) is refused where it is, never cast.
TYPE_RULES = {
    "gold": "the 0-based index of the right choice, an integer",
    "choices": "a list of strings",
    **{name: "a string" for name in ("id", "task", "context", "group", "lang")},
}


def _type_problem(name: str, value) -> str | None:
    """What ``value`` of column ``name`` should be, where it is not that (None: it is, or null)."""
    if value is None or name not in TYPE_RULES:
        return None
    if name == "gold":
        fits = isinstance(value, int) and not isinstance(value, bool)
    elif name == "choices":
        fits = isinstance(value, list) and all(v is None or isinstance(v, str) for v in value)
    else:
        fits = isinstance(value, str)
    return None if fits else TYPE_RULES[name]


def _wrong_type(path: Path, where: str, name: str, value, wanted: str) -> ChoiceItemsError:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ChoiceItemsError(f"{path}: {where}: {name} is {shown}; it must be {wanted}")


def _read_json_lines(path: Path) -> pl.DataFrame:
    """The items of a JSON-lines file, each value's type checked where it is (file and line)."""
    rows, columns = [], {}
    try:
        with path.open("rb") as raw:
            handle = gzip.GzipFile(fileobj=raw) if path.name.lower().endswith(".gz") else raw
            for number, line in enumerate(io.TextIOWrapper(handle, encoding="utf-8"), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ChoiceItemsError(
                        f"{path}: cannot be read as JSON lines: line {number}: {error.msg}"
                    ) from None
                if not isinstance(row, dict):
                    raise ChoiceItemsError(f"{path}: cannot be read as JSON lines: line {number} is not an object")
                for name, value in row.items():
                    wanted = _type_problem(name, value)
                    if wanted is not None:
                        raise _wrong_type(path, f"line {number}", name, value, wanted)
                    columns.setdefault(name, None)
                rows.append(row)
    except (OSError, UnicodeDecodeError, EOFError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ChoiceItemsError(f"{path}: cannot be read as JSON lines: {first}") from None
    schema = {name: dtype for name, dtype in {**REQUIRED, **OPTIONAL}.items() if name in columns}
    try:
        return pl.DataFrame(rows, schema=schema)
    except (pl.exceptions.PolarsError, OverflowError):
        raise ChoiceItemsError(f"{path}: a gold index is too large for a 64-bit integer") from None


def _read_frame(path: Path) -> pl.DataFrame:
    name = path.name.lower()
    if name.endswith((".jsonl", ".json", ".jsonl.gz")):
        return _read_json_lines(path)
    if not name.endswith(".parquet"):
        raise ChoiceItemsError(f"{path}: give a JSON lines ({', '.join(SUFFIXES[:3])}) or Parquet file of items")
    try:
        frame = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ChoiceItemsError(f"{path}: cannot be read as Parquet: {first}") from None
    for column in [c for c in TYPE_RULES if c in frame.columns]:
        # a column holds one type: its first value that is not null says it
        first = frame.select(pl.col(column)).with_row_index("row").drop_nulls().head(1).to_dicts()
        wanted = _type_problem(column, first[0][column]) if first else None
        if wanted is not None:
            raise _wrong_type(path, f"row {first[0]['row'] + 1}", column, first[0][column], wanted)
    return frame


def _typed(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    missing = [column for column in REQUIRED if column not in frame.columns]
    if missing:
        raise ChoiceItemsError(
            f"{path}: the items lack the column(s) {', '.join(missing)}; every item needs {', '.join(REQUIRED)}"
        )
    wanted = {**REQUIRED, **{k: v for k, v in OPTIONAL.items() if k in frame.columns}}
    return frame.select([pl.col(name).cast(dtype, strict=True) for name, dtype in wanted.items()])


def _check_items(items: pl.DataFrame, path: Path) -> None:
    """The first item that cannot be scored, named by its row and id."""
    checks = [
        (pl.col("id").is_null(), "has no id"),
        (pl.col("id").is_duplicated(), "repeats an id of another item"),
        (pl.col("task").is_null() | (pl.col("task").str.len_chars() == 0), "names no task"),
        (pl.col("context").is_null(), "has no context (use an empty string for none)"),
        (pl.col("choices").is_null() | (pl.col("choices").list.len() < 2), "has fewer than 2 choices"),
        (
            pl.col("choices").list.eval(pl.element().is_null() | (pl.element().str.len_chars() == 0)).list.any(),
            "has an empty choice",
        ),
        (
            pl.col("gold").is_null() | (pl.col("gold") < 0) | (pl.col("gold") >= pl.col("choices").list.len()),
            "has a gold index outside its choices",
        ),
    ]
    for condition, problem in checks:
        bad = items.with_row_index("row").filter(condition.fill_null(True))
        if bad.height:
            row, item = bad["row"][0], bad["id"][0]
            gold = (
                f" (gold {bad['gold'][0]}, {bad['choices'][0].len() if bad['choices'][0] is not None else 0} choices)"
            )
            raise ChoiceItemsError(
                f"{path}: item {item!r} (line {row + 1}) {problem}" + (gold if "gold" in problem else "")
            )


def read_choice_items(path) -> pl.DataFrame:
    """The items of ``path`` (JSON lines or Parquet), checked: the columns of the module docstring,
    ``group`` and ``lang`` null where the file has none. Raises :class:`ChoiceItemsError`."""
    path = as_path(path)
    if not path.is_file():
        raise ChoiceItemsError(f"{path}: no such file of items")
    frame = _read_frame(path)
    if frame.height == 0:
        raise ChoiceItemsError(f"{path}: holds no items")
    items = _typed(frame, path)
    _check_items(items, path)
    for name, dtype in OPTIONAL.items():
        if name not in items.columns:
            items = items.with_columns(pl.lit(None, dtype=dtype).alias(name))
    return items.select([*REQUIRED, *OPTIONAL])


def write_choice_items(items: pl.DataFrame, path: Path) -> Path:
    """Write ``items`` (the columns of the module docstring) atomically, as Parquet when the name
    ends with ``.parquet``, else as JSON lines."""
    path = Path(path)
    frame = items.select([c for c in [*REQUIRED, *OPTIONAL] if c in items.columns])
    if path.name.endswith(".parquet"):
        write_parquet(frame.to_arrow(), path)
    else:
        write_bytes(frame.write_ndjson().encode("utf-8"), path)
    return path


def lm_eval_task_yaml(items_path: Path, task: str) -> str:
    """An lm-evaluation-harness task YAML that scores the items file ``items_path`` as
    ``task``: each item's context, its choices as written (the delimiter is empty: a choice
    carries its own leading space), the gold index; accuracy, accuracy normalized by length, and
    the accuracy of each choice's log-likelihood over its own without the context (lm-eval's
    ``acc_mutual_info``, :mod:`trainer.likelihood`'s ``acc_pmi``)."""
    data = json.dumps(str(Path(items_path).resolve()))
    split = "train"  # lm-eval reads the file as one split of the json builder
    return (
        f"task: {json.dumps(task)}\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        f"  data_files:\n    {split}: {data}\n"
        f"test_split: {split}\n"
        "output_type: multiple_choice\n"
        "doc_to_text: context\n"
        "doc_to_choice: choices\n"
        "doc_to_target: gold\n"
        'target_delimiter: ""\n'
        "metric_list:\n"
        "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n"
        "  - metric: acc_mutual_info\n    aggregation: mean\n    higher_is_better: true\n"
    )


def lm_eval_task_name(items_path: Path) -> str:
    """The lm-eval task name of an items file: ``curate_`` and its name without the suffix."""
    return "curate_" + Path(items_path).name.split(".")[0].replace("-", "_")


def write_lm_eval_task(items_path: Path, out_path: Path, task: str | None = None) -> Path:
    """:func:`lm_eval_task_yaml` of a JSON-lines items file, written to ``out_path``; ``task``
    defaults to ``curate_`` and the file's name without its suffix."""
    items_path = Path(items_path)
    if not items_path.name.endswith((".jsonl", ".json")):
        raise ChoiceItemsError(f"{items_path}: lm-eval reads JSON lines here; write the items as .jsonl")
    name = task or lm_eval_task_name(items_path)
    write_bytes(lm_eval_task_yaml(items_path, name).encode("utf-8"), Path(out_path))
    return Path(out_path)
