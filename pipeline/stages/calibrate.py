"""``curate calibrate``: the filter stage's thresholds per language from reference documents, as a
config fragment the user reads and keeps (pipeline.filters.calibrate says how a value is chosen).

Every reference document is measured with the filters its language gets in the run's settings
(``[filter.by_lang.<code>]`` and the built-in profiles included), English with English's; then
each threshold parameter English sets is calibrated for every other language with enough
reference documents. Only the filters both run are calibrated, and only the parameters that are
thresholds (``thresholds`` of each filter); a rule the language's settings turn off stays off.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.config import FilterConfig, LangFilterConfig, RunConfig
from pipeline.filters.calibrate import Setting, calibrated, most_lenient, removed, threshold_settings
from pipeline.filters.engine import measure
from pipeline.filters.registry import build_filters
from pipeline.formats.configfile import ConfigError, validate_model
from pipeline.formats.langcodes import code_language, lang_languages, parse_lang
from pipeline.stages.run import RunFiles

DEFAULT_MIN_DOCS = 50


@dataclass(frozen=True)
class RuleShare:
    """One rule of a calibrated parameter: how many documents it removes."""

    rule: str
    english_removed: int  # of English's reference, at English's threshold
    before: int  # of the language's, at the language's threshold until now
    after: int  # of the language's, at the calibrated threshold


@dataclass(frozen=True)
class Calibrated:
    """A threshold parameter of one filter for one language."""

    lang: str
    filter: str
    param: str
    english: float  # English's value
    current: float  # the language's value until now
    value: float  # the calibrated value
    integer: bool
    rules: tuple[RuleShare, ...]

    @property
    def changed(self) -> bool:
        return self.value != self.current

    @property
    def shown(self) -> int | float:
        return int(self.value) if self.integer else self.value


@dataclass
class Calibration:
    english: str
    docs: dict[str, int]  # reference documents per language, English first
    results: list[Calibrated] = field(default_factory=list)
    min_docs: int = DEFAULT_MIN_DOCS
    skipped: list[str] = field(default_factory=list)  # languages with fewer reference documents
    unlabelled: int = 0  # reference documents without a language

    def changes(self, lang: str | None = None) -> list[Calibrated]:
        return [r for r in self.results if r.changed and lang in (None, r.lang)]


def _measured(docs: pl.DataFrame, settings: FilterConfig, lang: str) -> tuple[list[str], dict, pl.DataFrame]:
    names, params = settings.for_lang(lang)
    return names, params, measure(docs, build_filters(names, params)).values


def _values(frame: pl.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        return np.empty(0)
    values = frame[column].drop_nulls().to_numpy().astype(np.float64)
    return values[~np.isnan(values)]


def _calibrate_setting(
    lang: str, setting: Setting, current: Setting, english: pl.DataFrame, measured: pl.DataFrame
) -> Calibrated | None:
    """``setting`` (English's) for ``lang``, whose own is ``current``; None when the language's
    documents have none of its measures."""
    own = {rule.name: rule for rule in current.rules}
    found, shares = [], []
    for rule in setting.rules:
        column = f"{setting.filter}.{rule.measure}"
        ours, theirs = _values(english, column), _values(measured, column)
        if not len(theirs) or rule.name not in own:
            continue
        value = calibrated(rule, ours, english.height, theirs, measured.height, setting)
        if value is None:
            continue
        found.append(value)
        shares.append((rule, ours, theirs, own[rule.name]))
    if not found:
        return None
    value = most_lenient(setting.rules[0].op, found)
    rules = tuple(
        RuleShare(
            rule.name,
            removed(ours, rule.op, rule.threshold),
            removed(theirs, rule.op, before.threshold),
            removed(theirs, rule.op, value),
        )
        for rule, ours, theirs, before in shares
    )
    return Calibrated(lang, setting.filter, setting.param, setting.value, current.value, value, setting.integer, rules)


def calibrate(
    reference: pl.DataFrame, settings: FilterConfig, english: str = "en", min_docs: int = DEFAULT_MIN_DOCS
) -> Calibration:
    """Calibrate ``settings``' thresholds for every language of ``reference`` (documents with
    ``id``, ``text`` and ``lang``, as the lang stage writes them) against English's
    (``english``: its code), each language with at least ``min_docs`` documents."""
    try:
        english = code_language(english, "--english")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    langs = lang_languages(reference["lang"]) if "lang" in reference.columns else pl.Series([None] * reference.height)
    reference = reference.with_columns(_language=langs)
    counts = reference["_language"].drop_nulls().value_counts(sort=True)
    docs = dict(zip(counts["_language"].to_list(), counts["count"].to_list()))
    order = [english] + sorted((lang for lang in docs if lang != english), key=lambda lang: (-docs[lang], lang))
    result = Calibration(
        english, {lang: docs.get(lang, 0) for lang in order}, min_docs=min_docs, unlabelled=langs.null_count()
    )
    if docs.get(english, 0) < min_docs:
        raise ConfigError(
            f"the reference has {docs.get(english, 0)} documents in {english}, the language every other is "
            f"calibrated against (--english), fewer than {min_docs}; add reference text in it or lower --min-docs"
        )
    group = {lang: reference.filter(pl.col("_language") == lang).drop("_language") for lang in order}
    names_en, params_en, english_values = _measured(group[english], settings, english)
    for lang in order[1:]:
        if docs[lang] < min_docs:
            result.skipped.append(lang)
            continue
        names, params, values = _measured(group[lang], settings, lang)
        for name in [n for n in names_en if n in names]:
            theirs = {s.param: s for s in threshold_settings(name, params.get(name, {}))}
            for setting in threshold_settings(name, params_en.get(name, {})):
                if setting.param not in theirs:  # off for this language: it stays off
                    continue
                found = _calibrate_setting(lang, setting, theirs[setting.param], english_values, values)
                if found is not None:
                    result.results.append(found)
    return result


# ---------------------------------------------------------------------------------------------
# The config fragment


def _toml_value(value) -> str:
    if isinstance(value, Mapping):  # a table parameter: thresholds by n-gram size, stop words by language
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value, ensure_ascii=False)  # numbers, booleans, strings and lists of them


def _share(n: int, docs: int) -> str:
    return f"{n} of {docs} ({n / docs:.1%})" if docs else f"{n} of 0"


def _comment(item: Calibrated, calibration: Calibration) -> str:
    english_docs, docs = calibration.docs[calibration.english], calibration.docs[item.lang]
    parts = []
    for share in item.rules:
        rule = share.rule.split(".", 1)[1]
        parts.append(
            f"{rule}: {calibration.english} removes {_share(share.english_removed, english_docs)} "
            f"at {_shown(item.english, item.integer)}; {item.lang} {_share(share.before, docs)} at "
            f"{_shown(item.current, item.integer)}, {_share(share.after, docs)} at {item.shown}"
        )
    return "; ".join(parts)


def _shown(value: float, integer: bool) -> str:
    return str(int(value)) if integer else f"{value:g}"


def _by_lang_key(settings: FilterConfig, lang: str) -> tuple[str, LangFilterConfig]:
    """The ``by_lang`` key (and table) that names ``lang``, or ``lang`` itself."""
    for code, table in settings.by_lang.items():
        if parse_lang(code)[0] == lang:
            return code, table
    return lang, LangFilterConfig()


def fragment(calibration: Calibration, settings: FilterConfig, header: list[str]) -> str:
    """The calibrated thresholds as TOML tables ``[filter.by_lang.<code>.params.<filter>]``,
    each holding the parameters the run's own ``by_lang`` table of that name already sets, so that
    it replaces that table with nothing lost; every calibrated line says the shares it removes."""
    lines = [f"# {part}" for line in header for part in textwrap.wrap(line, 98) or [""]]
    for lang in calibration.docs:
        changes = calibration.changes(lang)
        if not changes:
            continue
        code, table = _by_lang_key(settings, lang)
        for name in dict.fromkeys(c.filter for c in changes):
            lines += ["", f"[filter.by_lang.{code}.params.{name}]"]
            ours = {c.param: c for c in changes if c.filter == name}
            for key, value in table.params.get(name, {}).items():
                if key not in ours:
                    lines.append(f"{key} = {_toml_value(value)}  # the run's own")
            for key, item in ours.items():
                lines.append(f"{key} = {_toml_value(item.shown)}  # {_comment(item, calibration)}")
    return "\n".join(lines) + "\n"


def merged(config: Mapping, text: str) -> dict:
    """``config`` (a run's config as a dict) with the fragment ``text``'s tables over its own."""

    def over(base: Mapping, top: Mapping) -> dict:
        out = dict(base)
        for key, value in top.items():
            out[key] = over(out.get(key) or {}, value) if isinstance(value, Mapping) else value
        return out

    return over(config, tomllib.loads(text))


def checked(settings: FilterConfig, text: str) -> FilterConfig:
    """``settings`` with the fragment ``text`` over them, checked as a run's config is (ConfigError
    with one line where the fragment would not load)."""
    return validate_model(FilterConfig, merged({"filter": settings.model_dump(mode="json")}, text)["filter"])


# ---------------------------------------------------------------------------------------------
# From a run


@dataclass
class RunCalibration:
    calibration: Calibration
    text: str  # the config fragment
    stage: str
    sources: list[str]


def reference_documents(run: RunFiles, stage: str, sources: list[str] | None) -> tuple[pl.DataFrame, list[str]]:
    """The documents of ``sources`` (None: every source) that ``stage`` of ``run`` wrote, and the
    sources they come from. Raises ConfigError naming what is missing."""
    if stage not in run.document_stages:
        raise ConfigError(
            f"--stage: {stage!r} wrote no documents in this run; pick one of {', '.join(run.document_stages)}"
        )
    scan = run.scan_docs(stage)
    present = sorted(scan.select(pl.col("source").unique()).collect()["source"].to_list()) if scan is not None else []
    unknown = [name for name in sources or [] if name not in present]
    if unknown:
        raise ConfigError(
            f"--reference: no documents of source {unknown[0]!r} in stage {stage}; sources: {', '.join(present)}"
        )
    chosen = sources or present
    docs = scan.filter(pl.col("source").is_in(chosen)).collect() if scan is not None else pl.DataFrame()
    if "lang" not in docs.columns:
        raise ConfigError(f"--stage: the documents of stage {stage} have no language; use a stage after lang")
    return docs, chosen


def calibrate_run(
    run_dir, sources: list[str] | None = None, stage: str = "lang", english: str = "en",
    min_docs: int = DEFAULT_MIN_DOCS, config: RunConfig | None = None,
) -> RunCalibration:  # fmt: skip
    """Calibrate the filter settings of ``config`` (default: the run's own) on the reference
    documents ``sources`` of ``run_dir``'s ``stage``: the calibration and its config fragment,
    checked against the config it is for."""
    run = RunFiles.open(run_dir)
    config = config or run.config
    if config is None:
        raise ConfigError(f"{run_dir}: the run's config does not load ({run.config_error}); pass --config")
    docs, chosen = reference_documents(run, stage, sources)
    calibration = calibrate(docs, config.filter, english, min_docs)
    text = fragment(calibration, config.filter, header(calibration, str(run_dir), stage, chosen))
    checked(config.filter, text)
    return RunCalibration(calibration, text, stage, chosen)


def header(calibration: Calibration, run_dir: str, stage: str, sources: list[str]) -> list[str]:
    """The fragment's opening comment: where its reference came from and how to use it."""
    en = calibration.english
    calibrated = [lang for lang in list(calibration.docs)[1:] if lang not in calibration.skipped]
    lines = [
        "Filter thresholds per language, written by `curate calibrate`: each one removes from its",
        "language's reference documents the share that English's threshold removes from English's",
        "(FineWeb-2's way). Only the thresholds that change are listed.",
        f"Reference: stage {stage} of {run_dir}, sources {', '.join(sources)}: "
        f"{en} {calibration.docs[en]} documents; "
        + (", ".join(f"{lang} {calibration.docs[lang]}" for lang in calibrated) or "no other language calibrated"),
    ]
    if calibration.skipped:
        lines.append(
            f"Not calibrated, with fewer than {calibration.min_docs} reference documents: "
            + ", ".join(f"{lang} {calibration.docs[lang]}" for lang in calibration.skipped)
        )
    if calibration.unlabelled:
        lines.append(f"{calibration.unlabelled} reference documents have no language and were not used.")
    lines += [
        "Add these tables to the run's config: one of the same name as a table there replaces it",
        "(it holds that table's values too).",
    ]
    return lines
