"""The filter stage's verdicts on documents of a finished run, as the run decided them: each
document judged with the filters and thresholds of its language (``[filter.by_lang]`` and the
built-in profiles, as :class:`pipeline.stages.steps.FilterChain` groups them) on the
measurements the run stored (``filter/attributes/``, pipeline.stages.attributes), and measured
again only where none are stored, with the same per-language filters. The views (the report,
``curate inspect``, the Python API) read verdicts from here, so none of them can disagree with
the run's ``removed/`` files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.config import FilterConfig
from pipeline.filters.engine import COLUMN, COUNT, MEASURE, NOTE, TEXT, TEXT_CHANGED, from_attributes, judge, measure
from pipeline.filters.registry import FILTERS, build_filters, filter_notes
from pipeline.formats.langcodes import lang_languages, parse_lang
from pipeline.formats.step import Rule
from pipeline.io.storage import scan_parquet
from pipeline.stages.attributes import FOLDER
from pipeline.stages.run import RunFiles

# How a document's values were found: read from the run's stored measurements, or measured again.
STORED = "stored"
MEASURED = "measured again"


@dataclass
class Verdicts:
    """Per document (rows in the order given) and rule (columns named by rule)."""

    rules: list[Rule]  # every rule of the stage's or a language's filters, the stage's first
    filter_of: dict[str, str]  # rule name -> filter name
    values: pl.DataFrame  # Float64, null where a rule does not measure a document
    thresholds: pl.DataFrame  # Float64, the threshold for the document's language; null: not its rule
    fires: pl.DataFrame  # Boolean
    rule: pl.Series  # the rule that removes the document (the first that fired), null when kept
    value: pl.Series  # its measured value
    threshold: pl.Series  # its threshold
    text_after: pl.Series  # the text as the filters' rewrites left it
    settings: pl.Series  # the by_lang code (or built-in profile) whose settings judged it; null: the stage's
    found: pl.Series  # STORED or MEASURED
    errors: list[str] = field(default_factory=list)  # filters that could not be built
    # The filters' notes (``<filter>.<note>``: the list entry a document matched), String, null: none.
    notes: pl.DataFrame = field(default_factory=pl.DataFrame)


def settings_key(settings: FilterConfig, lang: pl.Series) -> pl.Series:
    """Per document language, the code of :meth:`FilterConfig.languages` whose filters judge it
    (null: the stage's), matched by :func:`~pipeline.formats.langcodes.parse_lang`'s language as the
    filter stage matches them."""
    own = {parse_lang(code)[0]: code for code in settings.languages()}
    return lang_languages(lang).replace_strict(own, default=None, return_dtype=pl.String)


def describe_settings(settings: FilterConfig, code: str | None) -> str:
    """Which settings judge a group of documents, in words."""
    if code is None:
        return "the stage's [filter] settings"
    if code in settings.by_lang:
        return f"[filter.by_lang.{code}] over the stage's settings"
    return f"the built-in profile of {code!r} over the stage's settings"


def built_filters(settings: FilterConfig, code: str | None) -> tuple[list, list[str]]:
    """The filters for ``code``'s documents; a filter that cannot be built (a quality model that
    is gone) is left out and named in the second list."""
    names, params = settings.for_lang(code) if code is not None else (settings.filters, settings.params)
    built, errors = [], []
    for name in names:
        try:
            built.extend(build_filters([name], params))
        except Exception as error:  # whatever the reason, this filter cannot judge here
            errors.append(f"{name}: {error}")
    return built, errors


def stored_measurements(run: RunFiles, ids: list[str]) -> pl.DataFrame | None:
    """The rows of ``ids`` in the run's ``filter/attributes/`` files (None when it has none); a
    file that cannot be read is left out (its documents are measured again)."""
    frames = []
    for path in run.outputs("filter", FOLDER):
        try:
            found = scan_parquet([path]).filter(pl.col("id").is_in(ids)).collect()
        except Exception:  # damaged: measured again
            continue
        if found.height:
            frames.append(found)
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _needed(filters: list) -> list[str]:
    return [f"{MEASURE}{f.name}.{r.measure}" for f in filters for r in f.rules()]


def _measurement(docs: pl.DataFrame, stored: pl.DataFrame | None, filters: list):
    """The measurement of ``docs`` (one group): from the stored rows when they hold every document
    with every measure the filters' rules read, else measured again; and which it was."""
    if stored is not None and all(c in stored.columns for c in _needed(filters)):
        rows = docs.select("id").join(stored, on="id", how="left", maintain_order="left")
        if TEXT_CHANGED in rows.columns and rows[TEXT_CHANGED].null_count() == 0:  # every document stored
            kept = [c for c in rows.columns if c == "id" or c.startswith((MEASURE, COLUMN, COUNT, NOTE, TEXT))]
            return from_attributes(docs, rows.select(kept)), STORED
    return measure(docs, filters), MEASURED


class _Columns:
    """Per-document series of the whole frame, filled in group by group."""

    def __init__(self, n: int):
        self.n = n
        self.series: dict[str, pl.Series] = {}

    def put(self, name: str, rows: np.ndarray, values: pl.Series, dtype) -> None:
        whole = self.series.get(name, pl.Series(name, [None] * self.n, dtype=dtype))
        self.series[name] = whole.scatter(rows, values.cast(dtype))

    def get(self, name: str, dtype) -> pl.Series:
        return self.series.get(name, pl.Series(name, [None] * self.n, dtype=dtype))


def _judged_group(group: pl.DataFrame, stored, filters: list, rows: np.ndarray, out: _Columns) -> None:
    """Judge one group of documents (at ``rows`` of the whole) with its filters into ``out``."""
    measured, how = _measurement(group, stored, filters)
    verdict = judge(group, measured, filters)
    for name, series, dtype in (
        ("rule", verdict.rule, pl.String),
        ("value", verdict.value, pl.Float64),
        ("threshold", verdict.threshold, pl.Float64),
        ("text", measured.docs["text"], pl.String),
        ("found", pl.Series([how] * group.height), pl.String),
    ):
        out.put(name, rows, series, dtype)
    for name in measured.notes.columns:
        out.put(f"note|{name}", rows, measured.notes[name], pl.String)
    for f in filters:
        for r in f.rules():
            values = measured.values[f"{f.name}.{r.measure}"].cast(pl.Float64)
            fired, _ = r.fired(values)
            out.put(f"value|{r.name}", rows, values, pl.Float64)
            out.put(f"threshold|{r.name}", rows, pl.Series([float(r.threshold)] * group.height), pl.Float64)
            out.put(f"fires|{r.name}", rows, pl.Series(fired), pl.Boolean)


def filter_verdicts(run: RunFiles, docs: pl.DataFrame, settings: FilterConfig | None = None) -> Verdicts:
    """The filter stage's verdict on ``docs`` (as they entered the stage: ``id``, ``text``,
    ``source``, ``lang``, ...), each with its language's filters, from the run's stored
    measurements where they hold it (see the module docstring). ``settings``: the run's
    ``[filter]`` table (default: the run's config)."""
    settings = settings if settings is not None else run.config.filter
    lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
    keys = settings_key(settings, lang)
    stored = stored_measurements(run, docs["id"].to_list()) if docs.height else None
    out = _Columns(docs.height)
    rules: dict[str, Rule] = {}
    filter_of: dict[str, str] = {}
    errors: list[str] = []
    for code in [None, *keys.drop_nulls().unique(maintain_order=True).to_list()]:
        mask = keys.is_null() if code is None else (keys == code).fill_null(False)
        rows = np.flatnonzero(mask.to_numpy())
        filters, failed = built_filters(settings, code)
        errors += [e for e in failed if e not in errors]
        for f in filters:
            for r in f.rules():
                rules.setdefault(r.name, r)
                filter_of.setdefault(r.name, f.name)
        if len(rows):
            _judged_group(docs[pl.Series(rows, dtype=pl.Int64)], stored, filters, rows, out)

    def per_rule(part: str, dtype) -> pl.DataFrame:
        return pl.DataFrame([out.get(f"{part}|{name}", dtype).alias(name) for name in rules])

    return Verdicts(
        rules=list(rules.values()),
        filter_of=filter_of,
        values=per_rule("value", pl.Float64),
        thresholds=per_rule("threshold", pl.Float64),
        fires=per_rule("fires", pl.Boolean).fill_null(False),
        rule=out.get("rule", pl.String),
        value=out.get("value", pl.Float64),
        threshold=out.get("threshold", pl.Float64),
        text_after=out.get("text", pl.String),
        settings=keys.alias("settings"),
        found=out.get("found", pl.String),
        errors=errors,
        notes=pl.DataFrame([s.alias(k.removeprefix("note|")) for k, s in out.series.items() if k.startswith("note|")]),
    )


def removal_notes(run: RunFiles, removed: pl.DataFrame) -> dict[str, str]:
    """What the filters noted on the documents of the filter stage's ``removed`` rows (``id``,
    ``rule``) whose rule's filter records notes (:func:`pipeline.filters.registry.filter_notes`:
    the list entry a document matched), by id, as the run stored them (measured again where it
    stored none); documents with nothing noted are left out."""
    config, previous = run.config, run.previous("filter")
    noted = [name for name in FILTERS if filter_notes(name)]
    if config is None or previous is None or not removed.height:
        return {}
    rows = removed.filter(pl.col("rule").str.split(".").list.first().is_in(noted))
    if not rows.height:
        return {}
    docs = run.docs_by_id(previous, rows["id"].to_list())
    verdicts = filter_verdicts(run, docs, config.filter)
    rule_of = dict(zip(rows["id"].to_list(), rows["rule"].to_list()))
    found = {}
    for i, doc_id in enumerate(docs["id"].to_list()):
        owner = rule_of[doc_id].split(".", 1)[0]
        names = [f"{owner}.{note}" for note in filter_notes(owner)]
        said = [verdicts.notes[n][i] for n in names if n in verdicts.notes.columns and verdicts.notes[n][i] is not None]
        if said:
            found[doc_id] = "; ".join(said)
    return found


def document_texts(run: RunFiles, doc_id: str) -> list[dict] | None:
    """The document's text as each document stage left it (None when the source stage has no
    document ``doc_id``): per stage that ran, ``stage``, ``status`` (kept, removed, not reached,
    missing), ``rule`` (the rule that removed it) and ``text``: the stage's output; for a document
    the filter stage removed, the text as the filters' rewrites left it (``found`` says whether
    from the run's stored measurements or measured again); for one another stage removed, the
    text it removed."""
    entered = run.docs_by_id("source", [doc_id])
    if not entered.height:
        return None
    texts = [{"stage": "source", "status": "kept", "rule": None, "text": entered["text"][0]}]
    for stage in run.document_stages[1:]:
        if texts[-1]["status"] != "kept":
            texts.append({"stage": stage, "status": "not reached", "rule": None, "text": None})
            continue
        kept = run.docs_by_id(stage, [doc_id])
        removed = run.removed(stage).filter(pl.col("id") == doc_id)
        if kept.height:
            texts.append({"stage": stage, "status": "kept", "rule": None, "text": kept["text"][0]})
            entered = kept
        elif removed.height:
            rule = removed["rule"][0]
            entry = {"stage": stage, "status": "removed", "rule": rule, "text": entered["text"][0]}
            if stage == "filter" and run.config is not None and not rule.startswith("licence."):
                verdicts = filter_verdicts(run, entered, run.config.filter)
                entry.update(text=verdicts.text_after[0], found=verdicts.found[0])
            texts.append(entry)
        else:
            texts.append({"stage": stage, "status": "missing", "rule": None, "text": None})
    return texts


def verdict_table(run: RunFiles, ids: list[str]) -> pl.DataFrame:
    """The filter stage's verdict on the documents ``ids`` that reached it, one row per document
    and rule of its language (:func:`filter_verdicts`): ``id``, ``lang``, ``settings`` (the
    ``by_lang`` code or profile whose settings judged it; null: the stage's), ``found`` (stored or
    measured again), ``rule``, ``value``, ``threshold``, ``fires`` and ``removed_by`` (the rule
    that removed the document, null when kept). A document the stage did not measure (outside
    its sources or languages, or removed by a licence rule) has one row with ``rule`` null and
    ``removed_by`` its licence rule or null; an id that did not reach the stage has none. Rows
    come in the order of ``ids``."""
    previous = run.previous("filter")
    config = run.config
    schema = {"id": pl.String, "lang": pl.String, "settings": pl.String, "found": pl.String, "rule": pl.String}
    schema |= {"value": pl.Float64, "threshold": pl.Float64, "fires": pl.Boolean, "removed_by": pl.String}
    if previous is None or config is None or "filter" not in run.stats:
        return pl.DataFrame(schema=schema)
    docs = run.docs_by_id(previous, ids)
    if "lang" not in docs.columns:
        docs = docs.with_columns(pl.lit(None, dtype=pl.String).alias("lang"))
    licence = run.removed("filter").filter(
        pl.col("id").is_in(docs["id"].implode()) & pl.col("rule").str.starts_with("licence.")
    )
    judged = docs.filter(config.filter.scope().mask(docs) & ~pl.col("id").is_in(licence["id"].implode()))
    verdicts = filter_verdicts(run, judged, config.filter)
    frame = judged.select("id", "lang").with_columns(
        verdicts.settings, verdicts.found, verdicts.rule.alias("removed_by")
    )
    rows = [
        frame.with_columns(
            pl.lit(rule.name).alias("rule"),
            verdicts.values[rule.name].alias("value"),
            verdicts.thresholds[rule.name].alias("threshold"),
            verdicts.fires[rule.name].alias("fires"),
        ).filter(pl.col("threshold").is_not_null())  # a rule of the document's language
        for rule in verdicts.rules
    ]
    unjudged = docs.filter(~pl.col("id").is_in(judged["id"].implode())).select("id", "lang")
    unjudged = unjudged.join(licence.select("id", pl.col("rule").alias("removed_by")), on="id", how="left")
    frames = [f for f in [*rows, unjudged] if f.height]
    table = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame({"id": []}, schema={"id": pl.String})
    table = table.select(
        pl.col(c).cast(t) if c in table.columns else pl.lit(None, dtype=t).alias(c) for c, t in schema.items()
    )
    order = pl.DataFrame({"id": list(dict.fromkeys(ids))}, schema={"id": pl.String}).with_row_index("_doc")
    return table.join(order, on="id", how="left").sort("_doc", maintain_order=True).drop("_doc")
