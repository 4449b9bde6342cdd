"""The run report: one static HTML page, ``<run_dir>/report/index.html``, built from the run's
files alone. It opens offline: the CSS is inline and the charts are inline SVG.

What it shows, section by section:

* the funnel: documents, text bytes and tokens through every stage that ran;
* per stage, every rule and reason with its count and share, five removed documents drawn at random
  (seeded) and, for measured thresholds, the five kept documents closest to the threshold,
  measured again with the pipeline's own filters and the run's config on a seeded sample of what
  the stage kept;
* dedup: the cluster-size histogram and the largest clusters, the kept document against a removed
  near-duplicate as a word-level diff;
* the repeated lines cut, the languages before the lang stage and in the curated pool, the
  mixtures (tokens available and taken, epochs, weights, validation tokens) and the quarantine.

Numbers read from ``stats.json`` files carry ``data-stat`` attributes (see :mod:`report.html`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.dedup.clusters import RULE_EXACT, RULE_NEAR, RULE_URL
from pipeline.dedup.indexed import RULE_IN_INDEX
from pipeline.filters.engine import EMPTY_AFTER_REWRITE
from pipeline.formats.documents import MIX_CAUSES, MIX_NEAR_ID, MIX_RULE, RunLayout
from pipeline.formats.ledger import Ledger
from pipeline.formats.stats import StageStats
from pipeline.io.storage import is_local
from pipeline.io.writer import write_text
from pipeline.licence import LicenceRule
from pipeline.stages.card import write_cards
from pipeline.stages.run import RunFiles
from pipeline.stages.verdicts import STORED, filter_verdicts, removal_notes
from report import plots
from report.extraction import extraction_section, has_extraction
from report.html import esc, fmt, num, share, snippet, table, word_diff
from report.inspect import licence_table, top_licences
from report.languages import (
    ENGLISH,
    ENGLISH_SHARE,
    MIN_DOCUMENTS,
    UNFAIR_SHARE,
    language_stages,
    languages_by_documents,
    unfair_rules,
)
from report.measure import filter_rules, lang_rules, measure_lang

EXAMPLES = 5  # removed and near-threshold examples per rule
MEASURE_DOCS = 2000  # kept documents measured again per stage, at most
LARGEST_CLUSTERS = 5
QUARANTINE_EXAMPLES = 3  # per reason
TOP_LANGUAGES = 15
REPORT_DIR = "report"
EXAMPLE_WIDTHS = [22, 8, 5, 7, 8, 50]

CSS = """
:root { --ink: #1d232b; --muted: #5f6b78; --line: #dde3ea; --bg: #f7f9fb; --accent: #3b6ea8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: var(--ink); background: #fff; }
header { background: var(--bg); border-bottom: 1px solid var(--line); padding: 18px 32px 10px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 2px 0; color: var(--muted); }
nav { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
nav a { color: var(--accent); text-decoration: none; }
main { max-width: 1240px; padding: 8px 32px 40px; }
section { margin-top: 28px; }
h2 { font-size: 18px; border-bottom: 2px solid var(--line); padding-bottom: 4px; margin-bottom: 10px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
h4 { font-size: 13px; margin: 12px 0 4px; color: var(--muted); font-weight: 600; }
p.note, .note { color: var(--muted); font-size: 13px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
th { font-weight: 600; color: var(--muted); }
td.r, th.r { text-align: right; padding-left: 10px; }
td.none { color: var(--muted); font-style: italic; }
tr.total td { font-weight: 600; }
table.examples { width: 100%; table-layout: fixed; }
table.examples td { word-wrap: break-word; overflow-wrap: anywhere; }
.num { font-variant-numeric: tabular-nums; }
.id { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; overflow-wrap: anywhere; }
div.text, span.text { display: block; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; max-height: 16em; overflow: auto;
  background: var(--bg); padding: 4px 6px; border-radius: 3px; margin: 0; }
div.text.short { max-height: 7em; }
details.text summary { cursor: pointer; list-style: none; }
details.text summary::-webkit-details-marker { display: none; }
details.text[open] summary span.text { max-height: none; }
details.rule { border: 1px solid var(--line); border-radius: 4px; padding: 4px 10px; margin: 6px 0; }
details.rule > summary { cursor: pointer; font-weight: 600; }
.diff { font-size: 12px; line-height: 1.6; background: var(--bg); padding: 6px 8px; border-radius: 3px;
  max-height: 20em; overflow: auto; overflow-wrap: anywhere; }
.diff del { background: #f6d5d1; color: #7a1f16; text-decoration: line-through; }
.diff ins { background: #d4edd6; color: #1d5a24; text-decoration: none; }
.diff .skip { color: var(--muted); font-style: italic; }
figure.chart { margin: 8px 0 12px; }
figure.chart svg { max-width: 100%; height: auto; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 8px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; background: var(--bg); min-width: 150px; }
.card .num { display: block; font-size: 20px; font-weight: 600; }
.card .label { color: var(--muted); font-size: 12px; }
.warn { color: #8a4b00; }
code { font-size: 12px; }
"""


def build_report(run_dir: str | Path) -> Path:
    """Write ``<run_dir>/report/index.html`` and each mixture's dataset card
    (``mix/<mixture>/README.md``, pipeline.stages.card) from the run's files; return the page's path."""
    run = RunFiles.open(run_dir)
    page = render(run)
    out = run.root / REPORT_DIR / "index.html"
    write_text(page, out)
    write_cards(run.root)
    return out


def current_report(run_dir: str | Path) -> Path | None:
    """The run's report page where it was built after the run last changed (newer than its
    manifest and every stage's stats.json: a rerun that found every stage done), else None."""
    root = Path(run_dir)
    page = root / REPORT_DIR / "index.html"
    if not is_local(run_dir) or not page.is_file():
        return None
    made = [Path(RunLayout(root).manifest), *root.glob("*/stats.json")]
    built = page.stat().st_mtime_ns
    return page if all(path.stat().st_mtime_ns <= built for path in made if path.is_file()) else None


def render(run: RunFiles) -> str:
    """The report page of ``run`` as a string."""
    sections = [("funnel", "Funnel", _funnel(run))]
    if has_extraction(run):
        sections.append(("extraction", "Extraction and repair", extraction_section(run)))
    if "lang" in run.stats:
        sections.append(("lang", "Language ID", _lang_stage(run)))
    if "filter" in run.stats:
        sections.append(("filter", "Quality filters", _filter_stage(run)))
    if "dedup" in run.stats:
        sections.append(("dedup", "Deduplication", _dedup_stage(run)))
    if "lines" in run.stats:
        sections.append(("lines", "Repeated lines", _lines_stage(run)))
    sections.append(("languages", "Languages", _languages(run)))
    sections.append(("licences", "Licences", _licences(run)))
    if "tokenize" in run.stats or "mix" in run.stats:
        sections.append(("mix", "Tokens and mixtures", _mixtures(run)))
    sections.append(("quarantine", "Quarantine", _quarantine(run)))
    nav = "".join(f'<a href="#{key}">{esc(title)}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{esc(title)}</h2>{content}</section>' for key, title, content in sections)
    name = run.root.resolve().name
    stages = ", ".join(run.stages) or "none"
    source = run.stats.get("source")
    last = run.last_document_stage
    summary = ""
    if source:
        summary = (
            f"<p>{num(source.docs_in, 'source.docs_in')} records read, "
            f"{num(run.stats[last].docs_out, f'{last}.docs_out')} curated documents "
            f"(after stage {esc(last)}); seed {esc(run.seed)}.</p>"
        )
    unfair = unfair_rules(run.stats)
    if unfair:
        summary += (
            f'<p class="warn">{fmt(len(unfair))} fairness warning{"s" if len(unfair) != 1 else ""} (a rule that '
            'removes far more of a language than of English): see <a href="#languages">Languages</a>.</p>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Curation report: {esc(name)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>Curation report: {esc(name)}</h1>"
        f"<p>Stages that ran: {esc(stages)}.</p>{summary}"
        f"<nav>{nav}</nav></header><main>{body}{_footer(run)}</main></body></html>\n"
    )


# ---- funnel ----------------------------------------------------------------------------------


def _total(counts: dict | None) -> int:
    return int(sum((counts or {}).values()))


def _ledger(ledgers: dict[str, Ledger], name: str) -> Ledger:
    """The ledger of ``name`` (a language, a licence), all zeros where the stage counted none."""
    return ledgers.get(name) or Ledger(name)


def _mix_kept(run: RunFiles) -> tuple[int | None, int | None]:
    """Text bytes and tokens of the documents the mix stage passed on (train and validation)."""
    documents = run.mix_documents()
    if documents is None:
        return None, None
    kept = documents.filter(pl.col("split") != "contaminated")
    return int(kept["bytes"].sum() or 0), int(kept["tokens"].sum() or 0)


def _funnel(run: RunFiles) -> str:
    if not run.stats:
        return '<p class="note">No stage of this run has finished (no stats.json).</p>'
    rows, chart_rows = [], []
    bytes_of: dict[str, int | None] = {}
    for stage, stats in run.stats.items():
        tokens_html = "–"
        if stage in ("tokenize", "mix"):
            bytes_out = bytes_of.get(run.previous(stage) or "")
            if stage == "tokenize":
                tokens_html = num(stats.tokens, "tokenize.tokens")
            else:
                mix_bytes, mix_tokens = _mix_kept(run)
                bytes_out = mix_bytes if mix_bytes is not None else bytes_out
                tokens_html = num(mix_tokens)
        else:
            bytes_out = run.text_bytes(stage)
        bytes_of[stage] = bytes_out
        reasons = Counter({**stats.removed, **stats.quarantined})
        top = ", ".join(f"{esc(r)} {fmt(n)}" for r, n in reasons.most_common(3)) or "–"
        rows.append(
            [
                f"<b>{esc(stage)}</b>",
                num(stats.docs_in, f"{stage}.docs_in"),
                num(stats.docs_out, f"{stage}.docs_out"),
                num(_total(stats.removed), f"{stage}.removed"),
                num(_total(stats.quarantined), f"{stage}.quarantined"),
                share(stats.docs_out, stats.docs_in),
                num(bytes_out),
                tokens_html,
                top,
            ]
        )
        chart_rows.append((stage, stats.docs_out, _total(stats.removed), _total(stats.quarantined), bytes_out))
    inputs = run.manifest.get("inputs", [])
    input_bytes = sum(int(f.get("bytes") or 0) for f in inputs)
    note = (
        f'<p class="note">Input: {fmt(len(inputs))} files, {fmt(input_bytes)} bytes as stored (compressed '
        "files count compressed). Text bytes are the UTF-8 bytes of the documents' text each stage passed on; "
        "tokens are counted from the tokenize stage on (end-of-document tokens included). "
        "Mix passes on its training and validation documents.</p>"
    )
    chart = plots.funnel_chart(
        [r[0] for r in chart_rows],
        [r[1] for r in chart_rows],
        [r[2] for r in chart_rows],
        [r[3] for r in chart_rows],
        [r[4] for r in chart_rows],
    )
    return (
        chart
        + table(
            ["stage", "in", "out", "removed", "quarantined", "kept", "text bytes out", "tokens out", "top reasons"],
            rows,
            numeric={1, 2, 3, 4, 5, 6, 7},
        )
        + note
    )


# ---- per-stage removals ----------------------------------------------------------------------


def _rule_table(run: RunFiles, stage: str, rules: list[tuple[str, str]]) -> str:
    """One row per rule: documents it removed (first rule), share, documents it would remove."""
    stats = run.stats[stage]
    removed = stats.removed
    counts = stats.counts or {}
    names = [name for name, _ in rules]
    names += [r for r in removed if r not in names]
    names += [key.split("|", 1)[1] for key in counts if key.startswith("fired|") and key.split("|", 1)[1] not in names]
    described = dict(rules)
    docs_in = stats.docs_in
    total_removed = _total(removed)
    rows = []
    for name in names:
        n = removed.get(name, 0)
        fired_key = f"fired|{name}"
        would = num(counts[fired_key], f"{stage}.counts.{fired_key}") if fired_key in counts else "–"
        rows.append(
            [
                f'<a href="#{_anchor(stage, name)}" class="id">{esc(name)}</a>',
                num(n, f"{stage}.removed.{name}") if name in removed else num(0),
                share(n, docs_in, 2),
                share(n, total_removed, 1),
                would,
                esc(described.get(name, "")),
            ]
        )
    rows.append(
        ["<b>all rules</b>", num(total_removed, f"{stage}.removed"), share(total_removed, docs_in, 2), "", "", ""]
    )
    return table(
        ["rule", "removed", "share of stage input", "share of removed", "would fire", "removes when"],
        rows,
        numeric={1, 2, 3, 4},
    )


def _anchor(stage: str, rule: str) -> str:
    return "rule-" + "".join(c if c.isalnum() else "-" for c in f"{stage}-{rule}")


def _per_source(run: RunFiles, stage: str) -> str:
    stats = run.stats[stage]
    rows = []
    for source, counts in (stats.sources or {}).items():
        base = f"{stage}.sources.{source}"
        reasons = ", ".join(f"{esc(r)} {fmt(n)}" for r, n in counts.removed.most_common(3))
        rows.append(
            [
                esc(source),
                num(counts.docs_in, f"{base}.docs_in"),
                num(counts.docs_out, f"{base}.docs_out"),
                num(_total(counts.removed), f"{base}.removed"),
                share(_total(counts.removed), counts.docs_in),
                reasons or "–",
            ]
        )
    if not rows:
        return ""
    return (
        "<details><summary>per source</summary>"
        + table(["source", "in", "out", "removed", "removed share", "top reasons"], rows, numeric={1, 2, 3, 4})
        + "</details>"
    )


def _sample(frame: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    return frame if frame.height <= n else frame.sample(n=n, seed=seed)


def _sample_each(frame: pl.DataFrame, column: str, n: int, seed: int) -> pl.DataFrame:
    """At most ``n`` seeded random rows for each value of ``column`` (a rule, a reason)."""
    if not frame.height:
        return frame
    return pl.concat(
        [
            _sample(frame.filter(pl.col(column) == value), n, seed)
            for value in frame[column].unique(maintain_order=True).to_list()
        ]
    )


def _removed_examples(
    run: RunFiles,
    stage: str,
    removed: pl.DataFrame,
    rule: str,
    texts: dict[str, str],
    partner: dict[str, tuple[str, str]] | None = None,
) -> str:
    """The sampled removed documents of ``rule``: id, source, language, value, threshold, text."""
    rows = []
    for row in removed.filter(pl.col("rule") == rule).iter_rows(named=True):
        extra = ""
        if partner and row["id"] in partner:
            label, other = partner[row["id"]]
            extra = f'<br><span class="note">{esc(label)}:</span> <span class="id">{esc(other)}</span>'
        if rule in (LicenceRule.DROPPED, LicenceRule.NOT_KEPT) and row.get("licence"):
            extra += f'<br><span class="note">licence:</span> <span class="id">{esc(row["licence"])}</span>'
        rows.append(
            [
                f'<span class="id">{esc(row["id"])}</span>{extra}',
                esc(row["source"]),
                esc(row["lang"] or "–"),
                fmt(row["value"], 3) if row["value"] is not None else "–",
                fmt(row["threshold"], 3) if row["threshold"] is not None else "–",
                snippet(texts.get(row["id"])),
            ]
        )
    return table(
        ["document", "source", "lang", "value", "threshold", "text as it entered the stage"],
        rows,
        numeric={3, 4},
        cls="examples",
        widths=EXAMPLE_WIDTHS,
    )


def _near_examples(rows: list[dict]) -> str:
    body = [
        [
            f'<span class="id">{esc(r["id"])}</span>',
            esc(r.get("source", "")),
            esc(r.get("lang") or "–"),
            fmt(r["value"], 3),
            fmt(r["threshold"], 3),
            snippet(r.get("text")),
        ]
        for r in rows
    ]
    return table(
        ["document", "source", "lang", "value", "threshold", "text as it entered the stage"],
        body,
        numeric={3, 4},
        cls="examples",
        widths=EXAMPLE_WIDTHS,
    )


def _closest(values: pl.Series, thresholds: pl.Series | float, n: int) -> list[int]:
    """Row numbers of the ``n`` non-null values closest to their threshold (ties: first rows)."""
    frame = pl.DataFrame({"value": values, "threshold": thresholds}).with_row_index("row")
    frame = frame.filter(pl.col("value").is_not_null() & pl.col("threshold").is_not_null())
    frame = frame.with_columns(distance=(pl.col("value") - pl.col("threshold")).abs())
    return frame.sort(["distance", "row"]).head(n)["row"].to_list()


def _stage_head(run: RunFiles, stage: str) -> str:
    stats = run.stats[stage]
    previous = run.previous(stage)
    return (
        f"<p>{num(stats.docs_in, f'{stage}.docs_in')} documents in (from {esc(previous or '–')}), "
        f"{num(stats.docs_out, f'{stage}.docs_out')} out, "
        f"{num(_total(stats.removed), f'{stage}.removed')} removed. "
        'A removed document counts under the first rule that fired; "would fire" counts every document a '
        "rule would have removed on its own.</p>"
    )


def _rule_blocks(
    stage: str, rules: list[str], counts: dict[str, int], removed_html: dict[str, str], near_html: dict[str, str]
) -> str:
    blocks = []
    top = max(rules, key=lambda r: counts.get(r, 0), default=None)
    for rule in rules:
        parts = []
        if rule in removed_html:
            parts.append(
                f"<h4>removed: {min(EXAMPLES, counts.get(rule, 0))} of {fmt(counts.get(rule, 0))}, "
                f"drawn at random (seeded)</h4>{removed_html[rule]}"
            )
        if rule in near_html:
            parts.append(near_html[rule])
        if not parts:
            continue
        opened = " open" if rule == top and counts.get(rule, 0) else ""
        blocks.append(
            f'<details class="rule" id="{_anchor(stage, rule)}"{opened}><summary>{esc(rule)} '
            f'<span class="note">({fmt(counts.get(rule, 0))} removed)</span></summary>{"".join(parts)}'
            "</details>"
        )
    return "".join(blocks)


def _removed_by_rule(run: RunFiles, stage: str) -> dict[str, str]:
    """Per rule, the HTML of a seeded sample of the documents ``stage`` removed by it."""
    picked = _sample_each(run.removed(stage), "rule", EXAMPLES, run.seed)
    texts = run.texts(run.previous(stage), picked["id"].to_list())
    # the list entry each one matched, for the rules of the word and URL lists
    notes = {i: ("matched", note) for i, note in removal_notes(run, picked).items()} if stage == "filter" else {}
    return {r: _removed_examples(run, stage, picked, r, texts, notes) for r in picked["rule"].unique().to_list()}


def _no_config_note(run: RunFiles) -> str:
    return (
        f'<p class="note warn">The config could not be read back ({esc(run.config_error)}); '
        "thresholds were not measured again.</p>"
    )


def _lang_stage(run: RunFiles) -> str:
    config = run.config
    rules = lang_rules(config) if config is not None else []
    out = [_stage_head(run, "lang"), _rule_table(run, "lang", rules), _per_source(run, "lang")]
    counts = run.stats["lang"].removed
    removed_html = _removed_by_rule(run, "lang")

    near_html = {}
    if config is None:
        out.append(_no_config_note(run))
    else:
        kept = run.scan_docs("lang", ["id", "source", "lang", "lang_score"])
        kept = kept.collect() if kept is not None else pl.DataFrame()
        if kept.height and "lang_score" in kept.columns:
            sample = _sample(kept, MEASURE_DOCS, run.seed)
            decisions = measure_lang(sample, config)
            rows = _closest(decisions["value"], decisions["threshold"], EXAMPLES)
            chosen = sample[rows]
            texts = run.texts("lang", chosen["id"].to_list())
            examples = [
                {
                    "id": r["id"],
                    "source": r["source"],
                    "lang": r["lang"],
                    "value": decisions["value"][i],
                    "threshold": decisions["threshold"][i],
                    "text": texts.get(r["id"]),
                }
                for i, r in zip(rows, chosen.iter_rows(named=True))
            ]
            near_html["lang.low_score"] = (
                f"<h4>kept, closest to the threshold: {len(examples)} of {fmt(sample.height)} kept documents "
                f"measured (a seeded sample of {fmt(kept.height)}); value = the language score</h4>"
                + _near_examples(examples)
            )
    names = list(dict.fromkeys([*[n for n, _ in rules], *counts]))
    out.append(_rule_blocks("lang", names, counts, removed_html, near_html))
    return "".join(out)


def _filter_stage(run: RunFiles) -> str:
    config = run.config
    stats = run.stats["filter"]
    counts = stats.removed
    described, errors = filter_rules(config) if config is not None else ([], [])
    rules = [(r.name, text) for r, text in described]
    rules.append((EMPTY_AFTER_REWRITE, "text blank after line removals"))
    licence_rule = config.filter.licence_rule() if config is not None else None
    if licence_rule is not None:
        rules[:0] = [
            *(
                [(LicenceRule.DROPPED, f"a licence matches {', '.join(licence_rule.drop)}")]
                if licence_rule.drop
                else []
            ),
            *(
                [(LicenceRule.NOT_KEPT, f"a licence matches none of {', '.join(licence_rule.keep)}")]
                if licence_rule.keep is not None
                else []
            ),
        ]
    out = [_stage_head(run, "filter")]
    if config is not None:
        scope = config.filter.scope()
        rule_note = (
            "Licence rules first, on every source (see Licences); then the filters"
            if licence_rule is not None
            else "Filters"
        )
        out.append(
            f'<p class="note">{rule_note}, in order: {esc(", ".join(config.filter.filters) or "none")}; applied to '
            f"{esc(scope.describe('all sources'))}.</p>"
        )
    out += [_rule_table(run, "filter", rules), _per_source(run, "filter")]
    pii = {k: v for k, v in (stats.counts or {}).items() if k.startswith("pii.") and "|" not in k}
    if pii:
        out.append(
            "<p>PII replaced by placeholders: "
            + ", ".join(f"{esc(k.removeprefix('pii.'))} {num(v, f'filter.counts.{k}')}" for k, v in pii.items())
            + ".</p>"
        )
    removed_html = _removed_by_rule(run, "filter")

    near_html = {}
    if config is None:
        out.append(_no_config_note(run))
    elif errors:
        out.append(f'<p class="note warn">Not measured again (could not be rebuilt): {esc("; ".join(errors))}.</p>')
    previous = run.previous("filter")
    kept = run.scan_docs("filter", ["id", "source", *(["lang"] if config is not None and config.lang.enabled else [])])
    if config is not None and kept is not None and previous is not None and described:
        note, near_html = _filter_near(run, config, kept.collect(), previous)
        out.append(note)
    names = list(dict.fromkeys([*[n for n, _ in rules], *counts]))
    out.append(_rule_blocks("filter", names, counts, removed_html, near_html))
    return "".join(out)


def _filter_near(run: RunFiles, config, kept: pl.DataFrame, previous: str) -> tuple[str, dict[str, str]]:
    """Per rule, the kept documents closest to their threshold (the one of their language), on a
    seeded sample of the kept documents, judged as the run judged them (from its stored
    measurements, pipeline.stages.verdicts); and a note saying so, with a warning for any the
    rules would remove now."""
    if not config.filter.scope().everything:
        kept = kept.filter(config.filter.scope().mask(kept))
    sample_ids = _sample(kept, MEASURE_DOCS, run.seed)["id"].to_list()
    docs = run.docs_by_id(previous, sample_ids)
    verdicts = filter_verdicts(run, docs, config.filter)
    stored = int((verdicts.found == STORED).sum()) if docs.height else 0
    how = (
        "as the run stored their measurements"
        if stored == docs.height
        else f"{fmt(docs.height - stored)} measured again with the run's settings"
    )
    head = (
        f"kept, closest to the threshold of their language, of {fmt(docs.height)} kept documents "
        f"(a seeded sample of the {fmt(kept.height)} in scope; {how})"
    )
    disagree = int(verdicts.rule.is_not_null().sum()) if docs.height else 0
    note = ""
    if disagree:
        note = (
            f'<p class="note warn">{fmt(disagree)} of the {fmt(docs.height)} kept documents would be removed '
            f"by the rules of their language now ({how}): the filters or their settings changed since the run.</p>"
        )
    near_html = {}
    for rule in verdicts.rules:
        values, thresholds = verdicts.values[rule.name], verdicts.thresholds[rule.name]
        rows = _closest(values, thresholds, EXAMPLES) if docs.height else []
        if not rows:
            why = "the rule measured none of them" if docs.height else "no kept document to measure"
            near_html[rule.name] = f'<h4>{esc(head)}</h4><p class="note">{why}</p>'
            continue
        measured_n = int((values.is_not_null() & thresholds.is_not_null()).sum())
        same = values.drop_nulls().n_unique() == 1
        examples = [
            {
                "id": docs["id"][i],
                "source": docs["source"][i],
                "lang": docs["lang"][i] if "lang" in docs.columns else None,
                "value": values[i],
                "threshold": thresholds[i],
                "text": docs["text"][i],
            }
            for i in rows
        ]
        limits = sorted(set(thresholds.drop_nulls().to_list()))
        limit = fmt(limits[0], 3) if len(limits) == 1 else "the threshold of each one's language"
        every = f"; every one measured {fmt(values.drop_nulls()[0], 3)}" if same else ""
        near_html[rule.name] = (
            f"<h4>{esc(head)}; {fmt(measured_n)} had a value; rule: remove when "
            f"{esc(rule.describe(limit))}{esc(every)}</h4>" + _near_examples(examples)
        )
    return note, near_html


# ---- dedup -----------------------------------------------------------------------------------


def _size_bins(sizes: list[int]) -> tuple[list[str], list[int]]:
    """Cluster sizes in bins 2, 3-4, 5-8, 9-16, ... (powers of two)."""
    if not sizes:
        return [], []
    bins: list[tuple[int, int]] = [(2, 2)]
    while bins[-1][1] < max(sizes):
        lo = bins[-1][1] + 1
        bins.append((lo, bins[-1][1] * 2))
    labels = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in bins]
    counts = [sum(1 for s in sizes if lo <= s <= hi) for lo, hi in bins]
    return labels, counts


def _index_note(index: dict) -> str:
    """What the run's dedup removed as in its dedup index (pipeline.dedup.indexed)."""
    return (
        f'<p class="note">Against the dedup index {esc(index["path"])} ({fmt(index["indexed_docs"])} '
        f"documents of {fmt(index['runs'])} runs): {num(index['removed'], 'dedup.dedup.index.removed')} "
        f"documents removed as in the index, {fmt(index['through_clusters'])} of them the kept document "
        "of a cluster that met it.</p>"
    )


def _dedup_stage(run: RunFiles) -> str:
    stats = run.stats["dedup"]
    finding = stats.dedup or {}
    config = run.config
    out = [_stage_head(run, "dedup")]
    cards = [
        ("documents in clusters", "docs_in_clusters"),
        ("clusters", "clusters"),
        ("exact duplicates removed", "removed_exact"),
        ("near duplicates removed", "removed_near"),
        ("URL duplicates removed", "removed_url"),
        ("candidate pairs (LSH)", "candidate_pairs"),
        ("false positives dropped", "false_positives"),
        ("verified pairs", "edges"),
    ]
    out.append(
        '<div class="cards">'
        + "".join(
            f'<div class="card">{num(finding[key], f"dedup.dedup.{key}")}<span class="label">{esc(label)}</span></div>'
            for label, key in cards
            if key in finding
        )
        + "</div>"
    )
    if finding.get("index"):
        out.append(_index_note(finding["index"]))
    if config is not None:
        settings = config.dedup
        bands = finding.get("bands_rows")
        out.append(
            f'<p class="note">Exact: {fmt(settings.exact)}; near: {fmt(settings.near)} (Jaccard of '
            f"{settings.ngram}-word shingle sets &ge; {settings.threshold}, {settings.num_perm} permutations"
            f"{f', {bands[0]} bands x {bands[1]} rows' if bands else ''})"
            f"{'; URL: documents with the same normalized URL' if settings.url else ''}"
            f"; kept: the {esc(settings.keep)} "
            "document of each cluster. Clusters are connected components, so a member can be less similar "
            "to the kept document than the threshold.</p>"
        )
    out.append(
        _rule_table(
            run,
            "dedup",
            [
                (RULE_EXACT, "same normalized text as the kept document"),
                (RULE_NEAR, "near-duplicate of the kept document"),
                *([(RULE_URL, "same normalized URL as the kept document")] if config and config.dedup.url else []),
                *([(RULE_IN_INDEX, "duplicate of a document of the dedup index")] if finding.get("index") else []),
            ],
        )
    )
    out.append(_per_source(run, "dedup"))

    clusters = run.clusters()
    previous = run.previous("dedup")
    if clusters is None or clusters.height == 0:
        out.append('<p class="note">No duplicate clusters.</p>')
    else:
        sizes = clusters.group_by("cluster").agg(pl.len().alias("size"))["size"].to_list()
        labels, values = _size_bins(sizes)
        out.append(
            plots.column_chart(
                "cluster-sizes",
                "duplicate clusters by size",
                labels,
                values,
                "documents in the cluster",
                "clusters",
                log=True,
            )
        )
        out.append(
            f'<p class="note">{fmt(len(sizes))} clusters holding {fmt(clusters.height)} documents '
            f"(from clusters.parquet); the largest has {fmt(max(sizes))}.</p>"
        )
        out.append(_largest_clusters(run, stats, clusters, previous))
    # Removed examples, with the document each one duplicates.
    removed = run.removed("dedup")
    if removed.height:
        picked = _sample_each(removed, "rule", EXAMPLES, run.seed)
        texts = run.texts(previous, picked["id"].to_list())
        partner = {}
        if clusters is not None:
            kept_of = clusters.filter(pl.col("id").is_in(picked["id"].implode())).select("id", "kept_id")
            partner = {i: ("kept", k) for i, k in kept_of.iter_rows()}
        counts = stats.removed
        removed_html = {
            r: _removed_examples(run, "dedup", picked, r, texts, partner) for r in picked["rule"].unique().to_list()
        }
        out.append(_rule_blocks("dedup", list(counts), counts, removed_html, {}))
    return "".join(out)


def _largest_clusters(run: RunFiles, stats: StageStats, clusters: pl.DataFrame, previous: str | None) -> str:
    listed = stats.largest_clusters
    if listed:
        top = [(i, c["cluster"], c["size"], c["kept_id"]) for i, c in enumerate(listed[:LARGEST_CLUSTERS])]
    else:
        sized = (
            clusters.group_by("cluster")
            .agg(pl.len().alias("size"), pl.col("kept_id").first())
            .sort(["size", "cluster"], descending=[True, False])
            .head(LARGEST_CLUSTERS)
        )
        top = [(None, c, s, k) for c, s, k in sized.iter_rows()]
    # In each, the removed member least similar to the kept one: the most telling near-duplicate.
    members = clusters.filter(pl.col("cluster").is_in([t[1] for t in top]) & ~pl.col("kept"))
    worst = members.sort(["cluster", "jaccard", "id"]).group_by("cluster", maintain_order=True).first()
    worst_of = {row["cluster"]: row for row in worst.iter_rows(named=True)}
    exact_of = dict(members.group_by("cluster").agg(pl.col("exact").sum()).iter_rows())
    ids = [t[3] for t in top] + [r["id"] for r in worst_of.values()]
    texts = run.texts(previous, ids)
    blocks = []
    for index, cluster, size, kept_id in top:
        size_html = num(size, f"dedup.largest_clusters.{index}.size") if index is not None else num(size)
        other = worst_of.get(cluster)
        head = (
            f"<h4>cluster {esc(cluster)}: {size_html} documents, {fmt(int(exact_of.get(cluster, 0)))} of the "
            f'removed ones exact copies; kept <span class="id">{esc(kept_id)}</span></h4>'
        )
        if other is None:
            blocks.append(head)
            continue
        kind = "exact copy" if other["exact"] else "near-duplicate"
        blocks.append(
            head + f'<p class="note">against the least similar removed member, <span class="id">'
            f"{esc(other['id'])}</span> ({kind}, Jaccard {fmt(other['jaccard'], 3)} with the kept one): "
            "<del>only in the kept document</del>, <ins>only in the removed one</ins></p>"
            + word_diff(texts.get(kept_id, ""), texts.get(other["id"], ""))
        )
    return f"<h3>The {len(top)} largest clusters</h3>" + "".join(blocks)


# ---- lines -----------------------------------------------------------------------------------


def _lines_stage(run: RunFiles) -> str:
    stats = run.stats["lines"]
    counts = stats.counts or {}
    out = [_stage_head(run, "lines")]
    cards = [("lines cut", "repeated_lines.lines_removed"), ("characters cut", "repeated_lines.chars_removed")]
    found = stats.lines or {}
    items = [
        f'<div class="card">{num(counts[key], f"lines.counts.{key}")}<span class="label">{esc(label)}</span></div>'
        for label, key in cards
        if key in counts
    ]
    if "frequent_lines" in found:
        items.append(
            f'<div class="card">{num(found["frequent_lines"], "lines.lines.frequent_lines")}'
            '<span class="label">distinct frequent lines</span></div>'
        )
    out.append('<div class="cards">' + "".join(items) + "</div>")
    config = run.config
    if config is not None:
        scope = config.lines.scope()
        out.append(
            f'<p class="note">A line found in more than {config.lines.max_docs} documents is cut from every '
            f"document of {esc(scope.describe('every source'))}; a document left "
            "blank is removed.</p>"
        )
    per_source = [
        f"{esc(k.split('|', 1)[1])} {num(v, f'lines.counts.{k}')}"
        for k, v in counts.items()
        if k.startswith("repeated_lines.lines_removed|")
    ]
    if per_source:
        out.append("<p>Lines cut per source: " + ", ".join(per_source) + ".</p>")
    out.append(_rule_table(run, "lines", [(EMPTY_AFTER_REWRITE, "text blank after the cut")]))
    # What the cut looks like: documents whose text changed, the lines they lost.
    previous = run.previous("lines")
    after = run.scan_docs("lines", ["id", "text"])
    before = run.scan_docs(previous, ["id", "text"]) if previous else None
    if after is not None and before is not None:
        changed = (
            before.join(after, on="id", suffix="_after")
            .filter(pl.col("text") != pl.col("text_after"))
            .sort("id")
            .collect()
        )
        sample = _sample(changed, EXAMPLES, run.seed)
        rows = []
        for doc_id, text, text_after in sample.iter_rows():
            left = Counter(text_after.split("\n"))
            cut = []
            for line in text.split("\n"):
                if left[line] > 0:
                    left[line] -= 1
                elif line.strip():
                    cut.append(line)
            rows.append(
                [
                    f'<span class="id">{esc(doc_id)}</span>',
                    "".join(f'<div class="text">{esc(line[:300])}</div>' for line in cut[:5])
                    + (f'<span class="note">and {len(cut) - 5} more</span>' if len(cut) > 5 else ""),
                ]
            )
        out.append(
            f"<h3>Documents that lost lines: {min(EXAMPLES, changed.height)} of {fmt(changed.height)}, "
            "drawn at random (seeded)</h3>" + table(["document", "lines cut"], rows, cls="examples", widths=[25, 75])
        )
    removed = run.removed("lines")
    if removed.height:
        picked = _sample(removed, EXAMPLES, run.seed)
        texts = run.texts(previous, picked["id"].to_list())
        out.append(
            _rule_blocks(
                "lines",
                list(stats.removed),
                stats.removed,
                {r: _removed_examples(run, "lines", picked, r, texts) for r in picked["rule"].unique().to_list()},
                {},
            )
        )
    return "".join(out)


# ---- languages -------------------------------------------------------------------------------


def _languages(run: RunFiles) -> str:
    if "lang" not in run.stats:
        return '<p class="note">The lang stage did not run: documents have no language.</p>'
    before = run.stats["lang"].languages or {}
    last = run.last_document_stage
    after = (run.stats[last].languages if last else None) or {}
    langs = sorted(set(before) | set(after), key=lambda code: (-_ledger(before, code).docs_in, code))
    total_before = sum(v.docs_in for v in before.values())
    total_after = sum(v.docs_out for v in after.values())
    rows = []
    for code in langs:
        b = _ledger(before, code).docs_in
        a = _ledger(after, code).docs_out
        rows.append(
            [
                esc(code),
                num(b, f"lang.languages.{code}.docs_in") if code in before else num(0),
                share(b, total_before),
                num(a, f"{last}.languages.{code}.docs_out") if code in after else num(0),
                share(a, total_after),
                share(a, b),
            ]
        )
    shown = langs[:TOP_LANGUAGES]
    rest = langs[TOP_LANGUAGES:]
    labels = shown + (["other"] if rest else [])
    series = {
        "entering lang": [_ledger(before, c).docs_in for c in shown]
        + ([sum(_ledger(before, c).docs_in for c in rest)] if rest else []),
        f"curated (after {last})": [_ledger(after, c).docs_out for c in shown]
        + ([sum(_ledger(after, c).docs_out for c in rest)] if rest else []),
    }
    chart = plots.grouped_bars("languages", "documents per language", labels, series, "documents") if labels else ""
    return (
        _fairness(run)
        + f'<p class="note">The language the lang stage detected, for the documents entering it and for the '
        f"curated documents (the output of {esc(last)}).</p>"
        + chart
        + "<details><summary>all languages</summary>"
        + table(
            ["language", "entering lang", "share", f"curated ({last})", "share", "kept"], rows, numeric={1, 2, 3, 4, 5}
        )
        + "</details>"
        + _language_funnel(run)
    )


def _fairness(run: RunFiles) -> str:
    """The warnings of report.languages.unfair_rules, or a note of what the check looks for."""
    found = unfair_rules(run.stats)
    how = (
        f"A rule is flagged when it removes more than {float(UNFAIR_SHARE):.0%} of a language's documents that entered "
        f"its stage while it removes under {float(ENGLISH_SHARE):.0%} of English's ({ENGLISH}); a language with fewer "
        f"than {MIN_DOCUMENTS} documents into the stage is too few to judge, English too."
    )
    if ENGLISH not in {code for stage in language_stages(run.stats) for code in run.stats[stage].languages}:
        how += " This run has no English documents, so no rule was checked."
    lines = "".join(f'<p class="warn">warning: {esc(u.line())}</p>' for u in found)
    return lines + f'<p class="note">{esc(how)}</p>'


def _language_funnel(run: RunFiles) -> str:
    """Per language, documents into the first stage that counts languages, out of each such stage
    and removed by each rule; the most documents first, past TOP_LANGUAGES under a toggle."""
    stages = language_stages(run.stats)
    if not stages:
        return ""
    flagged = {(u.stage, u.rule, u.lang) for u in unfair_rules(run.stats)}
    first, last = stages[0], stages[-1]
    headers = ["language", f"into {first}", *[f"out of {stage}" for stage in stages], "kept", "removed, by rule"]
    numeric = set(range(1, len(stages) + 3))

    def row(code: str) -> list[str]:
        ledgers = {stage: run.stats[stage].languages.get(code) for stage in stages}
        docs_in = ledgers[first].docs_in if ledgers[first] else 0
        outs = [
            num(ledger.docs_out, f"{stage}.languages.{code}.docs_out") if ledger else num(0)
            for stage, ledger in ledgers.items()
        ]
        removed = [
            ("<span class=warn>{}</span>" if (stage, rule, code) in flagged else "{}").format(
                f'{esc(stage)}: <span class="id">{esc(rule)}</span> '
                f"{num(n, f'{stage}.languages.{code}.removed.{rule}')}"
            )
            for stage, ledger in ledgers.items()
            for rule, n in sorted((ledger.removed if ledger else {}).items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        return [
            esc(code),
            num(docs_in, f"{first}.languages.{code}.docs_in") if ledgers[first] else num(0),
            *outs,
            share(ledgers[last].docs_out if ledgers[last] else 0, docs_in),
            "<br>".join(removed) or "–",
        ]

    codes = languages_by_documents(run.stats)
    shown = table(headers, [row(code) for code in codes[:TOP_LANGUAGES]], numeric=numeric)
    rest = codes[TOP_LANGUAGES:]
    if rest:
        into = sum(_ledger(run.stats[first].languages, code).docs_in for code in rest)
        out = sum(_ledger(run.stats[last].languages, code).docs_out for code in rest)
        shown += (
            f"<details><summary>the other {len(rest):,} languages ({fmt(into)} documents into {esc(first)}, "
            f"{fmt(out)} out of {esc(last)})</summary>"
            + table(headers, [row(code) for code in rest], numeric=numeric)
            + "</details>"
        )
    return (
        "<h3>Each language through the stages</h3>"
        '<p class="note">Documents of each language (the code the lang stage assigned, <code>und</code> for none) '
        "into the first stage that counts languages, out of every stage, and removed by each rule (a removed "
        "document counts under the first rule that fired); rules flagged above are marked"
        + (f"; the {TOP_LANGUAGES} languages with the most documents first" if rest else "")
        + ".</p>"
        + shown
    )


# ---- licences --------------------------------------------------------------------------------


def _licences(run: RunFiles) -> str:
    if "source" not in run.stats or not run.stats["source"].licences:
        return '<p class="note">The source stage recorded no licences (a run made before licences were kept).</p>'
    found = licence_table(run.stats)
    last = found["stage"]
    tokens = run.stats["tokenize"].licences if "tokenize" in run.stats else None
    mixtures = (run.stats["mix"].mixtures if "mix" in run.stats else None) or {}
    rows = {name: _licence_row(run, last, name, row) for name, row in found["licences"].items()}
    headers = ["licence", "documents read", "removed by licence rules", f"curated ({last})", "kept"]
    headers += ["curated tokens"] if tokens else []
    headers += [f"tokens in {mixture}" for mixture in mixtures]
    numeric = set(range(1, len(headers)))
    top, other = top_licences(found["licences"])
    shown = table(headers, [rows[name] for name in top], numeric=numeric)
    if other is not None:
        rest = [cells for name, cells in rows.items() if name not in top]
        shown += (
            f"<details><summary>the other {other['licences']:,} licences ({fmt(other['read'])} documents read, "
            f"{fmt(other['curated'])} curated)</summary>" + table(headers, rest, numeric=numeric) + "</details>"
        )
    return (
        '<p class="note">Every document carries the licence its source declares or its record names (an SPDX '
        "identifier, <code>LicenseRef-</code> for others, <code>unknown</code> where the input names none; never "
        "guessed). Documents read, removed by the filter stage's licence rules, curated, and the tokens of each "
        "mixture's training side"
        + (f"; the {len(top)} licences with the most documents read first" if other is not None else "")
        + ".</p>"
        + _licence_sources(run)
        + shown
    )


def _licence_row(run: RunFiles, last: str, name: str, row: dict) -> list[str]:
    """A licence's cells, each number naming the stats it comes from."""
    tokens = run.stats["tokenize"].licences if "tokenize" in run.stats else None
    by_licence = (run.stats["filter"].licences if "filter" in run.stats else None) or {}
    removed = by_licence[name].removed if name in by_licence else {}
    by_rule = [
        num(n, f"filter.licences.{name}.removed.{rule}") for rule, n in removed.items() if rule.startswith("licence.")
    ]
    cells = [
        f'<span class="id">{esc(name)}</span>',
        num(row["read"], f"source.licences.{name}.docs_out"),
        " + ".join(by_rule) or num(0),
        num(row["curated"], f"{last}.licences.{name}.docs_out") if name in (run.stats[last].licences or {}) else num(0),
        share(row["curated"], row["read"]),
    ]
    if tokens:
        cells.append(num(row["tokens"], f"tokenize.licences.{name}.tokens") if name in tokens else num(0))
    for mixture, taken in row["mixtures"].items():
        cells.append(num(taken, f"mix.mixtures.{mixture}.licences.{name}") if taken else num(0))
    return cells


def _licence_sources(run: RunFiles) -> str:
    """Where each source's licences come from, and the filter stage's licence rules."""
    config = run.config
    if config is None:
        return ""
    items = []
    for src in config.sources:
        how = f"field <code>{esc(src.licence_field)}</code>, else " if src.licence_field else ""
        items.append(f"<li>{esc(src.name)}: {how}<code>{esc(src.licence)}</code></li>")
    declared = f"<p>Where each source's licences come from:</p><ul>{''.join(items)}</ul>"
    rule = config.filter.licence_rule() if "filter" in run.stats else None
    if rule is not None:
        declared += (
            f"<p>Licence rules of the filter stage: keep {esc(', '.join(rule.keep) if rule.keep else 'any')}; "
            f"exclude {esc(', '.join(rule.drop) or 'none')}.</p>"
        )
    return declared


# ---- tokens and mixtures ---------------------------------------------------------------------


def _mixtures(run: RunFiles) -> str:
    """The tokens and mixtures section: the tokenizer, the mix stage's counts, each mixture's groups,
    the effective weights and the documents the mix dropped."""
    tok = run.stats.get("tokenize")
    out = [_tokenize_line(tok)] if tok else []
    mix = run.stats.get("mix")
    if not mix:
        out.append('<p class="note">The mix stage did not run.</p>')
        return "".join(out)
    out.append(_mix_cards(mix))
    out.append(_rehydration_line(mix))
    out.extend(f'<p class="warn">warning: {esc(line)}</p>' for line in mix.warnings or [])
    for name, summary in (mix.mixtures or {}).items():
        manifest = {}
        path = run.root / "mix" / name / "manifest.json"
        if path.is_file():
            manifest = run.mixture_manifest(name)
        out.append(_mixture_head(name, summary, manifest))
        out.append(_mixture_groups(name, summary, manifest))
    weights = _effective_weights(mix)
    if weights:
        out.append(_weights_plot(weights, list(mix.mixtures or {})))
    removed = run.removed("mix")
    if removed.height:
        out.append(_mix_removed(run, mix, removed))
    return "".join(out)


def _tokenize_line(tok: StageStats) -> str:
    """The tokenize stage's tokens, documents and tokenizer."""
    info = tok.tokenizer or {}
    return (
        f"<p>Tokenize: {num(tok.tokens, 'tokenize.tokens')} tokens in "
        f"{num(tok.docs_out, 'tokenize.docs_out')} documents, vocabulary "
        f"{num(info.get('vocab_size'), 'tokenize.tokenizer.vocab_size')} "
        f"(tokenizer sha256 <code>{esc(str(info.get('sha256', ''))[:16])}…</code>).</p>"
    )


def _mix_cards(mix: StageStats) -> str:
    """The mix stage's training and validation documents, what it dropped and the pool's tokens."""
    contaminated = _total(mix.removed)
    return (
        '<div class="cards">'
        f'<div class="card">{num(mix.train_documents, "mix.train_documents")}'
        '<span class="label">training documents</span></div>'
        f'<div class="card">{num(mix.validation_documents, "mix.validation_documents")}'
        '<span class="label">validation documents</span></div>'
        f'<div class="card">{num(contaminated, "mix.removed")}'
        '<span class="label">dropped: near-duplicates of validation</span></div>'
        f'<div class="card">{num(mix.tokens_in, "mix.tokens_in")}'
        '<span class="label">tokens in the pool</span></div></div>'
    )


def _rehydration_line(mix: StageStats) -> str:
    """Re-hydration's copies (mix.rehydrate): the training documents by copies, and the pool's
    tokens before and after; nothing when it is off."""
    found = mix.extra.get("rehydration")
    if not found:
        return ""
    by_copies = ", ".join(
        f"{num(n, f'mix.rehydration.documents_by_copies.{copies}')} x {esc(copies)}"
        for copies, n in found["documents_by_copies"].items()
    )
    return (
        '<p class="note">Re-hydration: each training document repeated by the size of the duplicate '
        f"cluster it stood for, at most {fmt(found['max_copies'])} copies. Documents by copies: {by_copies}; "
        f"{num(found['tokens'], 'mix.rehydration.tokens')} tokens count as "
        f"{num(found['rehydrated_tokens'], 'mix.rehydration.rehydrated_tokens')} in the mixtures' plans.</p>"
    )


def _mixture_head(name: str, summary: dict, manifest: dict) -> str:
    """A mixture's heading and line: its weighting, epoch cap, budget, tokens taken and shards."""
    weighting = manifest.get("weighting", {})
    how = (
        f"temperature {weighting['temperature']}"
        if "temperature" in weighting
        else f"weights {weighting.get('weights')}"
        if weighting
        else ""
    )
    base = f"mix.mixtures.{name}"
    return (
        f"<h3>mixture {esc(name)}</h3><p>{esc(how)}; epoch cap "
        f"{esc(fmt(manifest.get('max_epochs'), 2))}; budget "
        f"{num(summary.get('budget_tokens'), f'{base}.budget_tokens')} tokens, taken "
        f"{num(summary.get('tokens_taken'), f'{base}.tokens_taken')}, shortfall "
        f"{num(summary.get('shortfall_tokens'), f'{base}.shortfall_tokens')}; "
        f"{num(summary.get('train_shards'), f'{base}.train_shards')} training and "
        f"{num(summary.get('validation_shards'), f'{base}.validation_shards')} validation shards.</p>"
    )


MIXTURE_COLUMNS = [
    "group",
    "docs available",
    "tokens available",
    "docs taken",
    "tokens taken",
    "epochs",
    "target weight",
    "effective weight",
    "capped",
    "validation docs",
    "validation tokens",
    "contaminated",
]


def _mixture_groups(name: str, summary: dict, manifest: dict) -> str:
    """A mixture's table of groups: documents and tokens available and taken, epochs, weights,
    validation and contaminated documents (from the mix stats and the mixture's manifest)."""
    ref = f"mix/{name}/manifest.json#groups"
    base = f"mix.mixtures.{name}"
    rows = []
    for group, row in summary.get("groups", {}).items():
        full = manifest.get("groups", {}).get(group, {})
        g = f"{base}.groups.{group}"
        rows.append(
            [
                esc(group),
                num(full.get("documents_available"), json_ref=f"{ref}.{group}.documents_available"),
                num(row.get("tokens_available"), f"{g}.tokens_available"),
                num(full.get("documents_taken"), json_ref=f"{ref}.{group}.documents_taken"),
                num(row.get("tokens_taken"), f"{g}.tokens_taken"),
                num(row.get("epochs"), f"{g}.epochs", digits=2),
                num(full.get("target_weight"), json_ref=f"{ref}.{group}.target_weight", digits=3),
                num(row.get("effective_weight"), f"{g}.effective_weight", digits=3),
                fmt(full.get("capped")) if "capped" in full else "–",
                num(full.get("validation_documents"), json_ref=f"{ref}.{group}.validation_documents"),
                num(row.get("validation_tokens"), f"{g}.validation_tokens"),
                num(full.get("contaminated_documents"), json_ref=f"{ref}.{group}.contaminated_documents"),
            ]
        )
    return table(MIXTURE_COLUMNS, rows, numeric=set(range(1, 12)))


def _effective_weights(mix: StageStats) -> dict[str, dict[str, float]]:
    """``{group: {mixture: effective weight}}`` over the mix stage's mixtures."""
    weights: dict[str, dict[str, float]] = {}
    for name, summary in (mix.mixtures or {}).items():
        for group, row in summary.get("groups", {}).items():
            weights.setdefault(group, {})[name] = row.get("effective_weight", 0.0)
    return weights


def _weights_plot(weights: dict[str, dict[str, float]], names: list[str]) -> str:
    """Bars of each group's effective weight per mixture of ``names``."""
    groups = sorted(weights)
    return plots.grouped_bars(
        "weights",
        "effective weight per group",
        groups,
        {n: [weights[g].get(n, 0.0) for g in groups] for n in names},
        "share of the mixture's training tokens",
    )


def _mix_removed(run: RunFiles, mix: StageStats, removed: pl.DataFrame) -> str:
    """The mix stage's dropped documents per rule, with seeded examples and what caused each."""
    documents = run.mix_documents()
    picked = _sample(removed, EXAMPLES, run.seed)
    texts = run.texts(run.previous("mix"), picked["id"].to_list())
    partner = {}
    if documents is not None and MIX_NEAR_ID in documents.columns:
        near = documents.filter(pl.col("id").is_in(picked["id"].implode())).select("id", MIX_RULE, MIX_NEAR_ID)
        partner = {i: (MIX_CAUSES.get(rule, rule), other) for i, rule, other in near.iter_rows() if other}
    counts = mix.removed
    return _rule_blocks(
        "mix",
        list(counts),
        counts,
        {r: _removed_examples(run, "mix", picked, r, texts, partner) for r in picked["rule"].unique().to_list()},
        {},
    )


# ---- quarantine ------------------------------------------------------------------------------


def _quarantine(run: RunFiles) -> str:
    source = run.stats.get("source")
    if not source:
        return '<p class="note">The source stage has no stats.json.</p>'
    reasons = source.quarantined
    total = _total(reasons)
    out = [
        f"<p>{num(total, 'source.quarantined')} records could not be read "
        f"({share(total, source.docs_in, 2)} of {num(source.docs_in, 'source.docs_in')}).</p>"
    ]
    by_source = source.sources or {}
    rows = []
    for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        where = ", ".join(
            f"{esc(s)} {num(c.quarantined[reason], f'source.sources.{s}.quarantined.{reason}')}"
            for s, c in by_source.items()
            if reason in c.quarantined
        )
        rows.append([esc(reason), num(n, f"source.quarantined.{reason}"), share(n, total), where])
    out.append(table(["reason", "records", "share", "per source"], rows, numeric={1, 2}))
    records = run.quarantine()
    if records is not None:
        picked = _sample_each(records, "reason", QUARANTINE_EXAMPLES, run.seed)
        rows = [
            [
                esc(r["reason"]),
                f'<span class="id">{esc(Path(r["file"]).name)}</span>',
                fmt(r["line"]) if r["line"] is not None else "–",
                fmt(r["offset"]) if r["offset"] is not None else "–",
                esc(r["detail"] or ""),
                f'<div class="text short">{esc((r["sample"] or "")[:200])}</div>',
            ]
            for r in picked.sort("reason", maintain_order=True).iter_rows(named=True)
        ]
        out.append(
            f"<h3>Examples: up to {QUARANTINE_EXAMPLES} per reason, drawn at random (seeded)</h3>"
            + table(
                ["reason", "file", "line", "byte offset", "detail", "first bytes"],
                rows,
                numeric={2, 3},
                cls="examples",
                widths=[14, 14, 6, 9, 20, 37],
            )
        )
    return "".join(out)


def _footer(run: RunFiles) -> str:
    versions = run.manifest.get("versions", {})
    listed = ", ".join(f"{esc(k)} {esc(v)}" for k, v in versions.items() if v)
    return (
        '<section id="about"><h2>About this report</h2><p class="note">Built from the run directory alone '
        "(manifest.json, each stage's stats.json and Parquet files); rebuild it with "
        f"<code>curate report RUN</code>. Package versions of the run: {listed}.</p></section>"
    )
