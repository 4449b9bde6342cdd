"""Applying filters to a batch: every rule measures the text as it entered the stage, rewrites apply
in order; the first rule that fires removes a document, and all are counted."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.formats.documents import blank_text
from pipeline.formats.step import DocFilter, FilterOutput, Rule, StepResult, removed_frame

STAGE = "filter"
# A document whose text the filters' rewrites (line removals) left blank is removed by this rule.
EMPTY_AFTER_REWRITE = "filter.empty_after_rewrite"


def walk_filters(
    docs: pl.DataFrame, filters: list[DocFilter]
) -> Iterator[tuple[DocFilter, FilterOutput, pl.DataFrame]]:
    """Run ``filters`` in order over ``docs``; yield each filter, its output (measures, counts,
    rewrites) and the documents after it.

    Every filter *measures* the text as it entered the filter stage, as its paper defines its
    rules on the page, so one filter's rewrite cannot hide another's rules (C4 drops blank lines
    and lines ending in "...", which Gopher's duplicate-paragraph and ellipsis-line rules count).
    *Rewrites* compose in order: each filter rewrites the text as the ones before it left it, and
    its per-document counts describe that rewrite. Columns a filter adds (``quality_score``) are
    seen by the later ones. A filter with rules that rewrites, after another filter rewrote, runs
    twice: on the stage's text for its measures and on the current text for its rewrite.
    """
    original = docs.get_column("text")
    current = docs
    rewritten = False
    for doc_filter in filters:
        output = _run_filter(doc_filter, current, original, rewritten)
        current, rewritten = _after(current, output, rewritten)
        yield doc_filter, output, current


def _run_filter(doc_filter: DocFilter, current: pl.DataFrame, original: pl.Series, rewritten: bool) -> FilterOutput:
    """One filter of :func:`walk_filters`: its measures on the stage's text (``original``), its
    rewrite of the ``current`` text (``rewritten``: some filter before it changed the text)."""
    if not rewritten or not doc_filter.rules():  # the same text, or nothing to measure (PII)
        return doc_filter.apply(current)
    output = doc_filter.apply(current.with_columns(original))
    if output.text is None:
        return output
    rewrite = doc_filter.apply(current)
    return FilterOutput(
        measures=output.measures, text=rewrite.text, counts=rewrite.counts, columns=output.columns, notes=output.notes
    )


def _after(current: pl.DataFrame, output: FilterOutput, rewritten: bool) -> tuple[pl.DataFrame, bool]:
    """The documents after a filter's rewrite and added columns, and whether the text was rewritten."""
    if output.text is not None:
        current = current.with_columns(output.text.alias("text"))
        rewritten = True
    if output.columns:
        current = current.with_columns(values.alias(name) for name, values in output.columns.items())
    return current, rewritten


def left_blank(docs: pl.DataFrame) -> pl.Series:
    """Whether the filters' rewrites left each document's text blank."""
    return blank_text(docs["text"]).fill_null(True)


@dataclass
class Measurement:
    """What the filters made of a batch, one row per document in input order: the documents as
    the rewrites left them (text, and the columns filters add), every measure of every filter
    (``<filter>.<measure>``, Float64, null where not measured) and each rewrite's per-document
    counts. The rules' thresholds are applied to it by :func:`decide`; nothing in it depends on
    a threshold, so it can be stored and decided again (:func:`to_attributes`)."""

    docs: pl.DataFrame
    values: pl.DataFrame
    counts: dict[str, pl.Series] = field(default_factory=dict)
    notes: pl.DataFrame = field(default_factory=pl.DataFrame)  # ``<filter>.<note>``, String (FilterOutput.notes)


class _BatchMemo(threading.local):
    values: dict | None = None


_BATCH_MEMO = _BatchMemo()


def batch_memo() -> dict | None:
    """While :func:`measure` runs a batch's filters on this thread, a dict in which filters keep
    what several of them compute from the same text (the Gopher filters' words); None otherwise.
    It is emptied when the batch is measured, so nothing outlives the batch."""
    return _BATCH_MEMO.values


def measure(docs: pl.DataFrame, filters: list[DocFilter]) -> Measurement:
    """Every filter's measures, rewrites and counts over ``docs`` (:func:`walk_filters`)."""
    return _memoized(_measure, docs, filters)[0]


def _memoized(run, *args):
    """``run(*args)`` with a fresh :func:`batch_memo` on this thread, emptied after."""
    outer, _BATCH_MEMO.values = _BATCH_MEMO.values, {}
    try:
        return run(*args)
    finally:
        _BATCH_MEMO.values = outer


def _measure(docs: pl.DataFrame, filters: list[DocFilter]) -> tuple[Measurement, list[FilterOutput]]:
    """:func:`measure`, and each filter's own output."""
    outputs = []
    after = docs
    for _, output, current in walk_filters(docs, filters):
        after = current
        outputs.append(output)
    return _collect(after, filters, outputs), outputs


def _collect(after: pl.DataFrame, filters: list[DocFilter], outputs: list[FilterOutput]) -> Measurement:
    """The measurement made of the filters' outputs: measures named ``<filter>.<measure>``,
    counts of the same name summed."""
    values: dict[str, pl.Series] = {}
    counts: dict[str, pl.Series] = {}
    notes: dict[str, pl.Series] = {}
    for doc_filter, output in zip(filters, outputs):
        for column in output.measures.columns:
            name = f"{doc_filter.name}.{column}"
            values[name] = output.measures[column].cast(pl.Float64).alias(name)
        for name, per_doc in output.counts.items():
            counts[name] = per_doc.alias(name) if name not in counts else counts[name] + per_doc
        for note, per_doc in output.notes.items():
            notes[f"{doc_filter.name}.{note}"] = per_doc.cast(pl.String).alias(f"{doc_filter.name}.{note}")
    return Measurement(after, pl.DataFrame(list(values.values())), counts, pl.DataFrame(list(notes.values())))


def _unjudged(n: int) -> tuple[pl.Series, pl.Series, pl.Series]:
    """``n`` documents no rule removes: null rule, value and threshold."""
    return (
        pl.Series("rule", [None] * n, dtype=pl.Utf8),
        pl.Series("value", [None] * n, dtype=pl.Float64),
        pl.Series("threshold", [None] * n, dtype=pl.Float64),
    )


def _first_fired(n: int, rules: list[tuple[Rule, pl.Series]], counts: Counter):
    first = np.full(n, len(rules), dtype=np.int64)  # each document's first rule that fired (len(rules): none)
    value = np.zeros(n)
    for k, (filter_rule, measured) in enumerate(rules):
        fired, values = filter_rule.fired(measured)
        counts[f"fired|{filter_rule.name}"] += int(fired.sum())
        now = fired & (first == len(rules))
        first[now] = k
        value[now] = values[now]
    unjudged = first == len(rules)
    if unjudged.all():
        return _unjudged(n)
    names = pl.Series("rule", [r.name for r, _ in rules] + [None], dtype=pl.Utf8)
    thresholds = pl.Series("threshold", [float(r.threshold) for r, _ in rules] + [None], dtype=pl.Float64)
    value = pl.Series("value", value, dtype=pl.Float64).scatter(np.flatnonzero(unjudged), None)
    return names.gather(first), value, thresholds.gather(first)


@dataclass
class Verdict:
    """Per document of a batch: the rule that removes it (null: kept), its measured value and
    threshold; and the stage's tallies (rules that fired, rewrite counts in all and per source)."""

    rule: pl.Series
    value: pl.Series
    threshold: pl.Series
    counts: Counter


def judge(docs: pl.DataFrame, measured: Measurement, filters: list[DocFilter]) -> Verdict:
    """Apply the rules of ``filters`` to what :func:`measure` found in ``docs``. Every rule is
    counted where it fires, so the stats can count every rule that would fire; a removed document
    records the first rule that fired (in filter order), with its measured value and threshold,
    and one that the rewrites left blank (and no rule removed) is removed by
    :data:`EMPTY_AFTER_REWRITE`. Raises KeyError for a rule whose measure is not in ``measured``."""
    counts: Counter = Counter()
    _tally_rewrites(docs, measured, counts)
    return _judge_rules(measured.values, left_blank(measured.docs), filters, counts)


def _tally_rewrites(docs: pl.DataFrame, measured: Measurement, counts: Counter) -> None:
    """Add each rewrite count of ``measured`` to ``counts``, in all and per source."""
    if not measured.counts:
        return
    names = list(measured.counts)
    per_doc = pl.DataFrame(
        [docs["source"].alias("source"), *(measured.counts[n].alias(f"c{i}") for i, n in enumerate(names))]
    )
    total = per_doc.drop("source").sum().row(0)
    by_source = per_doc.group_by("source").agg(pl.all().sum())  # every count in one pass
    for i, name in enumerate(names):
        counts[name] += int(total[i])
        counts.update({f"{name}|{src}": int(k) for src, k in zip(by_source["source"], by_source[f"c{i}"]) if k})


def _judge_rules(values: pl.DataFrame, blank: pl.Series, filters: list[DocFilter], counts: Counter) -> Verdict:
    """:func:`judge`'s rules over the measures ``values``, ``blank`` where the rewrites left a
    document blank; each rule that fires is added to ``counts``."""
    rules = [(r, values[f"{f.name}.{r.measure}"]) for f in filters for r in f.rules()]
    rule, value, threshold = _first_fired(len(blank), rules, counts)
    blank = blank & rule.is_null()
    if blank.any():
        counts[f"fired|{EMPTY_AFTER_REWRITE}"] += int(blank.sum())
        rule = pl.select(pl.when(blank).then(pl.lit(EMPTY_AFTER_REWRITE)).otherwise(rule)).to_series()
        value = pl.select(pl.when(blank).then(pl.lit(0.0)).otherwise(value)).to_series()
    return Verdict(rule, value, threshold, counts)


def result_of(docs: pl.DataFrame, measured: Measurement, verdict: Verdict, stage: str = STAGE) -> StepResult:
    """The batch's documents kept (as the rewrites left them) and removed, by ``verdict``."""
    removed = verdict.rule.is_not_null()
    return StepResult(
        kept=measured.docs.filter(~removed),
        removed=removed_frame(
            docs.filter(removed),
            stage,
            verdict.rule.filter(removed),
            verdict.value.filter(removed),
            verdict.threshold.filter(removed),
        ),
        counts=verdict.counts,
    )


def decide(docs: pl.DataFrame, measured: Measurement, filters: list[DocFilter], stage: str = STAGE) -> StepResult:
    """:func:`judge` the batch and keep or remove its documents accordingly."""
    return result_of(docs, measured, judge(docs, measured, filters), stage)


# ---------------------------------------------------------------------------------------------
# Filters per group of documents (the filter stage's rules per language): every group is
# measured and judged with its own filters, and the results put back in the batch's order.

_ROW = "__row"


def _rows_of(frame: pl.DataFrame, rows: np.ndarray) -> pl.DataFrame:
    row = pl.Series(_ROW, rows, dtype=pl.Int64)
    return frame.with_columns(row) if frame.width else row.to_frame()  # no measures: no columns, no height


def _in_order(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, how="diagonal_relaxed").sort(_ROW).drop(_ROW)


def select(measured: Measurement, rows: np.ndarray) -> Measurement:
    """The measurement of the documents at ``rows``."""
    take = pl.Series(rows, dtype=pl.Int64)
    return Measurement(
        measured.docs[take],
        measured.values[take] if measured.values.width else measured.values,
        {name: series.gather(take) for name, series in measured.counts.items()},
        measured.notes[take] if measured.notes.width else measured.notes,
    )


def measure_groups(docs: pl.DataFrame, groups: list[tuple[np.ndarray, list[DocFilter]]]) -> Measurement:
    """:func:`measure` each group of rows (every row in one group) with its filters; one
    measurement of the whole batch in its order (a measure or column a group's filters do not
    make is null there; a count, 0). Every group given is measured, an empty one too (the caller
    leaves out those it need not).

    The first group's filters measure the whole batch once; a later group takes its rows of that
    where its filters measure and rewrite as those do (:func:`measures_alike`: they differ in
    thresholds only, as the built-in Korean profile does), and runs the others on its rows
    (:func:`_measure_group`), where each group paid every filter's fixed cost (a language of one
    document in a batch took as long as a few hundred documents)."""
    if not groups:
        return measure(docs, [])
    first = groups[0][1]
    full, outputs = _memoized(_measure, docs, first)
    parts = []
    for rows, filters in groups:
        if filters is first:
            parts.append((rows, select(full, rows)))
        else:
            parts.append((rows, _memoized(_measure_group, docs, rows, filters, first, outputs)))
    after = _in_order([_rows_of(m.docs, rows) for rows, m in parts])
    values = _in_order([_rows_of(m.values, rows) for rows, m in parts])
    notes = _in_order([_rows_of(m.notes, rows) for rows, m in parts])
    counts: dict[str, pl.Series] = {}
    for rows, m in parts:
        for name, series in m.counts.items():
            total = counts.get(name, pl.Series(name, np.zeros(docs.height, dtype=np.int64)))
            counts[name] = total.scatter(rows, series.cast(total.dtype))
    return Measurement(after, values, counts, notes)


def measures_alike(a: DocFilter, b: DocFilter) -> bool:
    """Whether two filters measure, rewrite and add columns alike: the same class and name, and
    the same parameters but for those that are only thresholds (``thresholds``; of a table of
    thresholds by size, ``threshold_maps``, the sizes measured)."""
    if type(a) is not type(b) or a.name != b.name:
        return False
    only_thresholds = set(getattr(a, "thresholds", ()))
    maps = getattr(a, "threshold_maps", {})
    mine, theirs = vars(a), vars(b)
    if mine.keys() != theirs.keys():
        return False
    for key, value in mine.items():
        if key in only_thresholds:
            continue
        other = theirs[key]
        if key in maps:
            if set(value) != set(other):
                return False
            continue
        try:
            if not bool(value == other):
                return False
        except (TypeError, ValueError):  # values without a plain equality (arrays, models)
            if value is not other:
                return False
    return True


def _taken(output: FilterOutput, take: pl.Series, rewrite: bool) -> FilterOutput:
    """A filter's output at the rows ``take``: its measures, and with ``rewrite`` its rewrite,
    counts and added columns."""
    measures = output.measures[take] if output.measures.width else output.measures
    notes = {name: series.gather(take) for name, series in output.notes.items()}
    if not rewrite:
        return FilterOutput(measures=measures, notes=notes)
    return FilterOutput(
        measures=measures,
        text=None if output.text is None else output.text.gather(take),
        counts={name: series.gather(take) for name, series in output.counts.items()},
        columns={name: series.gather(take) for name, series in output.columns.items()},
        notes=notes,
    )


def _measure_group(
    docs: pl.DataFrame, rows: np.ndarray, filters: list[DocFilter], first: list[DocFilter], outputs: list[FilterOutput]
) -> Measurement:
    """:func:`measure` of the documents at ``rows`` with ``filters``, taking from ``outputs``
    (``first``'s over the whole batch) what is the same: a filter that measures alike
    (:func:`measures_alike`) reads the same stage text, so its measures are taken while no
    filter before it added other columns, and its rewrite too while no filter before it rewrote
    differently. The others run as :func:`walk_filters` runs them."""
    take = pl.Series(rows, dtype=pl.Int64)
    current = docs[take]
    if [f.name for f in filters] != [f.name for f in first]:
        return _measure(current, filters)[0]
    original = current.get_column("text")
    rewritten = text_differs = columns_differ = False
    mine = []
    for doc_filter, theirs, output in zip(filters, first, outputs):
        alike = measures_alike(doc_filter, theirs)
        if alike and not columns_differ and not text_differs:
            own = _taken(output, take, rewrite=True)
        elif alike and not columns_differ and output.text is None and not output.columns and doc_filter.rules():
            # it measures the stage's text, and rewrites nothing where that text gives no rewrite
            own = _taken(output, take, rewrite=False)
        else:
            own = _run_filter(doc_filter, current, original, rewritten)
            text_differs |= own.text is not None or output.text is not None
            columns_differ |= bool(own.columns or output.columns)
        current, rewritten = _after(current, own, rewritten)
        mine.append(own)
    return _collect(current, filters, mine)


def decide_groups(
    docs: pl.DataFrame, measured: Measurement, groups: list[tuple[np.ndarray, list[DocFilter]]], stage: str = STAGE
) -> StepResult:
    """:func:`judge` each group of rows with its filters and keep or remove every document (the
    rewrites tallied once for the batch, as the groups' tallies add up to it)."""
    rule, value, threshold = _unjudged(docs.height)
    counts: Counter = Counter()
    _tally_rewrites(docs, measured, counts)
    blank = left_blank(measured.docs)
    for rows, filters in groups:
        take = pl.Series(rows, dtype=pl.Int64)
        values = measured.values[take] if measured.values.width else measured.values
        verdict = _judge_rules(values, blank.gather(take), filters, counts)
        rule, value, threshold = (
            rule.scatter(rows, verdict.rule),
            value.scatter(rows, verdict.value),
            threshold.scatter(rows, verdict.threshold),
        )
    return result_of(docs, measured, Verdict(rule, value, threshold, counts), stage)


def apply_filters(docs: pl.DataFrame, filters: list[DocFilter], stage: str = STAGE) -> StepResult:
    """Measure ``docs`` with ``filters`` (:func:`measure`: every rule measured on the text as it
    entered the stage, rewrites applied in order) and :func:`decide` which to remove."""
    return decide(docs, measure(docs, filters), filters, stage)


# The columns of a stored measurement (:func:`to_attributes`) besides ``id``, by prefix.
MEASURE = "measure:"  # measure:<filter>.<measure>, Float64
COUNT = "count:"  # count:<name>, a rewrite's count per document
COLUMN = "column:"  # column:<name>, a column the filters added to (or changed in) the documents
NOTE = "note:"  # note:<filter>.<note>, String: why a rule fired, where a number cannot say (a list entry)
TEXT = "text"  # the rewritten text, null where unchanged ...
TEXT_CHANGED = "text_changed"  # ... as this says


def to_attributes(docs: pl.DataFrame, measured: Measurement) -> pl.DataFrame:
    """``measured`` as a frame to store beside ``docs`` (as Dolma's attributes and RedPajama-V2's
    quality signals): ``id``, every measure and count, the rewritten text where it changed and
    the columns the filters added. :func:`from_attributes` makes the measurement again from it
    and the same documents."""
    after = measured.docs
    changed = docs["text"].ne_missing(after["text"]).alias(TEXT_CHANGED)
    added = [
        after[c].alias(COLUMN + c)
        for c in after.columns
        if c not in ("id", "text") and (c not in docs.columns or not after[c].equals(docs[c]))
    ]
    return pl.DataFrame(
        [
            docs["id"],
            *(measured.values[c].alias(MEASURE + c) for c in measured.values.columns),
            *(series.alias(COUNT + name) for name, series in measured.counts.items()),
            *(measured.notes[c].alias(NOTE + c) for c in measured.notes.columns),
            changed,
            pl.select(pl.when(changed).then(after["text"])).to_series().alias(TEXT).cast(pl.String),
            *added,
        ]
    )


def attribute_columns(filters: list[DocFilter]) -> set[str]:
    """The columns of a stored measurement that deciding with ``filters`` reads: ``id``, the
    rewritten text and every rule's measure (a file without one is measured again)."""
    return {"id", TEXT, TEXT_CHANGED, *(f"{MEASURE}{f.name}.{r.measure}" for f in filters for r in f.rules())}


def from_attributes(docs: pl.DataFrame, attributes: pl.DataFrame) -> Measurement:
    """The measurement :func:`to_attributes` stored for ``docs`` (the same documents, in order)."""
    text = pl.select(pl.when(attributes[TEXT_CHANGED]).then(attributes[TEXT]).otherwise(docs["text"])).to_series()
    after = docs.with_columns(text.alias("text")) if attributes[TEXT_CHANGED].any() else docs
    added = [attributes[c].alias(c.removeprefix(COLUMN)) for c in attributes.columns if c.startswith(COLUMN)]
    if added:
        after = after.with_columns(added)
    values = [attributes[c].alias(c.removeprefix(MEASURE)) for c in attributes.columns if c.startswith(MEASURE)]
    counts = {}
    for column in attributes.columns:
        if column.startswith(COUNT):
            name = column.removeprefix(COUNT)
            counts[name] = attributes[column].alias(name)
    notes = [attributes[c].alias(c.removeprefix(NOTE)) for c in attributes.columns if c.startswith(NOTE)]
    return Measurement(after, pl.DataFrame(values), counts, pl.DataFrame(notes))
