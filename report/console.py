"""What the CLI prints on a terminal: the run's tables (documents through the stages, the mixtures,
the documents per source, the licences) and its warnings of rules unfair to a language, a
document's inspection (:mod:`report.inspect`), the training's held-out losses, and the
experiment's and the sweep's results.

Every printer takes the data and the rich :class:`~rich.console.Console` to print on. Text that
comes from the data or the config (ids, texts, reasons, file, group, source and licence names)
reaches the terminal as :func:`shown` (a table's cells and titles) or through :func:`say` (a line):
rich's markup (``[g]``) and emoji codes stay text, and no control character reaches the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pipeline.formats.escape import CONTROL, visible
from pipeline.formats.extraction import Extraction
from pipeline.formats.stats import StageStats


def printable(text: str) -> str:
    """``text`` safe to show: control characters (newlines and tabs aside) written as escapes, ``\\x1b``."""
    return visible(text, keep="\n\t")


def shown(text) -> Text:
    """A name, id, reason or title from the data as a table cell, header or title shows it: a rich
    Text (never read as markup or emoji), its control characters, line breaks too, as escapes."""
    return Text(visible(text))


def say(out: Console, text: str) -> None:
    """Print ``text`` (a line with names or text from the data in it) as it is: no markup, no
    emoji, no highlighting, control characters (but line breaks and tabs) as escapes."""
    out.print(Text(printable(text)), highlight=False, soft_wrap=True)


def printable_data(value):
    """``value`` (a lookup's dict, list or scalar) with every string made :func:`printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_data(v) for v in value]
    return value


def printable_json(value) -> str:
    """``value`` (a lookup) as indented JSON with every character a terminal acts on escaped."""
    # JSON escapes C0 controls itself; DEL, C1 controls and bidi overrides become \uXXXX too.
    text = json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return CONTROL.sub(lambda m: m[0] if m[0] == "\n" else f"\\u{ord(m[0]):04x}", text)


def _value(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{int(value):,}" if value.is_integer() and abs(value) < 1e15 else f"{value:.{digits}g}"
    return str(value)


def print_run_plan(out: Console, config, new_run: bool = False) -> None:
    """What a run of ``config`` does with its run directory (pipeline.stages.rerun.plan_run): each
    config key that changed, with the stages that read it, then one line per stage, kept or redone
    and why. A new run prints nothing unless ``new_run``."""
    from pipeline.stages.rerun import plan_run

    plan = plan_run(config)
    if plan.new and not new_run:
        return
    for line in plan.lines():
        say(out, line)


def print_funnel(out: Console, stats: dict[str, StageStats]) -> None:
    """Documents in and out of each stage of a run, with the top reasons for what left."""
    table = Table(title="documents through the stages")
    for column in ("stage", "in", "out", "removed", "quarantined", "top reasons"):
        table.add_column(column, justify="left" if column in ("stage", "top reasons") else "right")
    for stage, counts in stats.items():
        reasons = sorted({**counts.removed, **counts.quarantined}.items(), key=lambda kv: -kv[1])
        table.add_row(
            shown(stage),
            str(counts.docs_in),
            str(counts.docs_out),
            str(sum(counts.removed.values())),
            str(sum(counts.quarantined.values())),
            shown(", ".join(f"{r} {n}" for r, n in reasons[:3]) or "-"),
            style="bold red" if counts.docs_in and not counts.docs_out else None,  # kept nothing
        )
    out.print(table)


def print_warning(out: Console, line: str, style: str = "yellow") -> None:
    """``line`` labelled ``warning:`` (in ``style``), as the CLI's warnings are."""
    out.print(Text.assemble(("warning:", style), " ", shown(line)), highlight=False, soft_wrap=True)


def print_language_warnings(out: Console, stats: dict[str, StageStats]) -> None:
    """One line per rule that removes far more of a language than of English
    (report.languages.unfair_rules), labelled ``warning:`` as the CLI's warnings are."""
    from report.languages import unfair_rules

    for unfair in unfair_rules(stats):
        print_warning(out, unfair.line())


def print_stage_warnings(out: Console, stats: dict[str, StageStats]) -> None:
    """The ``warnings`` of every stage's stats but the mix stage's (:func:`print_mixtures` prints
    those), one ``warning:`` line each: stored measurements that were measured again."""
    for stage, counts in stats.items():
        if stage == "mix":
            continue
        for line in counts.warnings or []:
            print_warning(out, line)


def print_mixtures(out: Console, stats: StageStats) -> None:
    """Per mixture and group: tokens available and taken, epochs, effective weight, held-out tokens;
    then the stage's warnings (a validation split too small to measure)."""
    removed = stats.removed
    table = Table(
        title=f"mixtures ({stats.train_documents} training and {stats.validation_documents} "
        f"validation documents; dropped: {removed.get('validation_near_duplicate', 0)} "
        f"near-duplicates of validation; for excluded texts {removed.get('reference_id', 0)} "
        f"by id, {removed.get('reference_near_duplicate', 0)} near-duplicates, "
        f"{removed.get('reference_window', 0)} by a shared window)"
    )
    for column in ("mixture", "group", "tokens available", "tokens taken", "epochs", "weight", "validation tokens"):
        table.add_column(column, justify="left" if column in ("mixture", "group") else "right")
    for name, mixture in (stats.mixtures or {}).items():
        for group, row in mixture["groups"].items():
            table.add_row(
                shown(name),
                shown(group),
                f"{row['tokens_available']:,}",
                f"{row['tokens_taken']:,}",
                f"{row['epochs']:.2f}",
                f"{row['effective_weight']:.3f}",
                f"{row['validation_tokens']:,}",
            )
        table.add_row(shown(name), "all", "", f"{mixture['tokens_taken']:,}", "", "", "", style="bold")
    out.print(table)
    for line in stats.warnings or []:
        print_warning(out, line)


def print_sources(out: Console, stats: StageStats) -> None:
    """The source stage's documents per source: files, in, out and quarantined by reason."""
    table = Table(title="source stage: documents per source")
    for column in ("source", "files", "in", "out", "quarantined", "quarantined by reason"):
        table.add_column(column, justify="left" if column in ("source", "quarantined by reason") else "right")
    for name, counts in (stats.sources or {}).items():
        reasons = ", ".join(f"{reason} {n}" for reason, n in counts.quarantined.items())
        table.add_row(
            shown(name),
            str(counts.files),
            str(counts.docs_in),
            str(counts.docs_out),
            str(sum(counts.quarantined.values())),
            shown(reasons or "-"),
        )
    table.add_row(
        "all",
        "",
        str(stats.docs_in),
        str(stats.docs_out),
        str(sum(stats.quarantined.values())),
        "",
        style="bold",
    )
    out.print(table)
    for name, changed in (stats.repaired or {}).items():
        say(out, f"{name}: Unicode repair changed {changed:,} records")
    for name, data in (stats.extraction or {}).items():
        found = Extraction.from_dict(data)
        say(
            out,
            f"{name}: {found.pages:,} HTML pages gave {found.text_chars:,} characters of text, "
            f"{100 * found.kept_share:.1f}% of their {found.html_bytes:,} bytes; {found.bands[0]:,} gave none "
            "(the report names the pages that kept least)",
        )


def print_licences(out: Console, found: dict, every: bool = False) -> None:
    """The run's counts per licence (report.inspect.run_licences), as a table: every licence, or
    (``every`` False) the top ones by documents read and a row summing the others."""
    from report.inspect import TOP_LICENCES, top_licences

    rows, other = top_licences(found["licences"], None if every else TOP_LICENCES)
    if not rows:
        say(out, "This run recorded no licences (made before licences were kept).")
        return
    mixtures = sorted({m for row in found["licences"].values() for m in row["mixtures"]})
    tokens = any(row["tokens"] is not None for row in found["licences"].values())
    title = f"licences (curated: the output of {found['stage']})"
    if other is not None:
        title += f"; the top {len(rows)} of {len(found['licences'])} by documents read"
    table = Table(title=shown(title))
    table.add_column("licence")
    for column in ["read", "removed by rule", "curated", *(["tokens"] if tokens else [])]:
        table.add_column(column, justify="right")
    for mixture in mixtures:
        table.add_column(shown(f"{mixture} tokens"), justify="right")

    def cells(row: dict) -> list[str]:
        values = [row["read"], row["removed_by_rule"], row["curated"], *([row["tokens"]] if tokens else [])]
        return [_value(v) for v in values + [row["mixtures"].get(m, 0) for m in mixtures]]

    for name, row in rows.items():
        table.add_row(shown(name), *cells(row))
    if other is not None:
        table.add_row(f"other ({other['licences']} licences)", *cells(other), style="dim")
        table.caption = "every licence: curate inspect RUN_DIR (--json), or each stage's stats.json"
    out.print(table)


def print_inspection(out: Console, found: dict) -> None:
    """A document's way through the stages, for a person (see report.inspect)."""
    found = printable_data(found)  # ids, texts and reasons come from the data: no escapes reach the terminal
    out.print(Panel(Text("\n".join(_document_lines(found))), title="document", expand=False), highlight=False)
    out.print(_stages_table(found.get("stages", [])))
    if found.get("lang"):
        _print_lang(out, found["lang"])
    if found.get("filter"):
        _print_filter(out, found["filter"])
    if found.get("dedup") is not None:
        _print_dedup(out, found["dedup"])
    if found.get("lines") is not None:
        _print_lines(out, found["lines"])
    if found.get("tokens") is not None:
        say(out, f"tokenize: {found['tokens']:,} tokens")
    if found.get("mix"):
        _print_mix(out, found["mix"])


def print_rule_removals(out: Console, found: dict) -> None:
    """The documents a rule removed (see report.inspect.rule_removals)."""
    found = printable_data(found)
    count = found["count"]
    say(out, f"{found['rule']} ({found['stage']} stage): {count:,} document{'' if count == 1 else 's'} removed")
    table = Table()
    matched = any("match" in row for row in found["documents"])  # the list entry (word and URL lists)
    for column in ("id", "source", "lang", "value", "threshold", *(["matched"] if matched else [])):
        table.add_column(column, justify="right" if column in ("value", "threshold") else "left")
    for row in found["documents"]:
        table.add_row(
            shown(row["id"]),
            shown(row["source"]),
            shown(row["lang"] or ""),
            _value(row["value"]),
            _value(row["threshold"]),
            *([shown(row.get("match") or "")] if matched else []),
        )
    out.print(table)
    if len(found["documents"]) < found["count"]:
        say(out, f"the first {len(found['documents']):,}; --limit N for more, --json for every field")


def print_document_texts(out: Console, found: dict) -> None:
    """A document's text as each stage left it (see report.inspect.document_texts); a stage that
    left it as the one before is one line."""
    found = printable_data(found)
    say(out, found["id"])
    before = None
    for entry in found["stages"]:
        head = f"{entry['stage']}: {entry['status']}" + (f" by {entry['rule']}" if entry.get("rule") else "")
        text = entry.get("text")
        if text is None:
            say(out, head)
            continue
        if entry["status"] == "removed":
            how = {"stored": "as the run stored it", "measured again": "measured again"}.get(entry.get("found"))
            head += f"; the text as the filters' rewrites left it ({how})" if how else "; the text it removed"
        if text == before:
            say(out, f"{head}; text unchanged")
            continue
        out.print(Panel(Text(text), title=Text(head), expand=False), highlight=False)
        before = text


def _document_lines(found: dict) -> list[str]:
    """The document's panel: its id, fate, licence, where it was read and stored, its quarantine."""
    source = found.get("source") or {}
    where = source.get("path") or source.get("file") or ""
    position = (
        f" line {source['line']}"
        if source.get("line") is not None
        else f" byte {source['offset']}"
        if source.get("offset") is not None
        else ""
    )
    lines = [
        found["id"],
        f"fate: {found['fate']}",
        f"licence: {found.get('licence', 'unknown')}",
        f"source: {source.get('source')}  input: {where}{position}"
        + (f"  (own id {source['own_id']!r}, field {source.get('id_field')})" if source.get("own_id") else ""),
    ]
    if source.get("shard"):
        lines.append(
            f"stored: {source['shard']} row {source.get('row')}; {source.get('chars', 0):,} characters, "
            f"{source.get('bytes', 0):,} bytes" + (f"; url {source['url']}" if source.get("url") else "")
        )
    if source.get("meta"):
        lines.append(f"meta: {source['meta']}")
    if found.get("quarantine"):
        record = found["quarantine"]
        lines.append(
            f"quarantined: {record.get('reason')} {record.get('detail') or ''}; "
            f"first bytes: {(record.get('sample') or '')[:120]!r}"
        )
    return lines


def _stages_table(entries: list[dict]) -> Table:
    stages = Table(title="stages")
    for column in ("stage", "status", "detail"):
        stages.add_column(column)
    for entry in entries:
        style = {"removed": "red", "quarantined": "red", "not reached": "dim"}.get(entry["status"], "")
        stages.add_row(shown(entry["stage"]), shown(entry["status"]), shown(entry.get("detail", "")), style=style)
    return stages


def _print_lang(out: Console, lang: dict) -> None:
    say(
        out,
        f"lang: {lang.get('lang')} score {_value(lang.get('score'))} (minimum {_value(lang.get('threshold'))}"
        f"{', keep ' + ', '.join(lang['keep']) if lang.get('keep') else ''})"
        + (f" -> removed: {lang['rule']}" if lang.get("rule") else " -> kept"),
    )


def _print_filter(out: Console, flt: dict) -> None:
    if not flt.get("in_scope", True):
        why = flt.get("outside", "its source is not in filter.sources")
        say(out, f"filter: the document passed through: {why}")
        return
    out.print(_rules_table(flt))
    for error in flt.get("errors", []):
        say(out, f"filter: {error}")
    if flt.get("first_rule") and not any(r["rule"] == flt["first_rule"] for r in flt.get("rules", [])):
        say(out, f"filter: removed as {flt['first_rule']}")
    if flt.get("match"):
        say(out, f"filter: {flt['first_rule']} matched {flt['match']!r}")
    if flt.get("text_changed"):
        say(
            out,
            f"filter: the filters rewrote the text ({flt.get('chars_in', 0):,} -> "
            f"{flt.get('chars_after', 0):,} characters; PII replacements: "
            f"{flt.get('pii_replacements', 0)})",
        )


def _rules_table(flt: dict) -> Table:
    """Every filter rule of the document's language: its value, when it removes, whether it fires."""
    found = "as the run stored them" if flt.get("measured") == "stored" else "measured again"
    rules = Table(  # a Text: the settings' "[filter.by_lang.de]" is no rich markup
        title=Text(
            f"filter rules ({flt.get('settings', 'the stage settings')}), {found}, "
            "on the text as it entered the filter stage"
        )
    )
    for column in ("rule", "value", "removes when", "verdict"):
        rules.add_column(column, justify="right" if column == "value" else "left")
    for rule in flt.get("rules", []):
        verdict = (
            "fires" + (" (first: removes it)" if rule["rule"] == flt.get("first_rule") else "")
            if rule["fires"]
            else "passes"
        )
        rules.add_row(
            shown(rule["rule"]),
            _value(rule["value"]),
            shown(
                f"{rule['measure']} {rule['op']} {_value(rule['threshold'])}"
                + (f" ({rule['counts']})" if rule.get("counts") else "")
            ),
            verdict,
            style="red" if rule["fires"] else "",
        )
    return rules


def _index_kind(found: dict) -> str:
    if found["exact"]:
        return "an exact"
    return "a same-URL" if found.get("url") else "a near"


def _print_in_index(out: Console, found: dict) -> None:
    via = f", through {found['via_id']} of its cluster" if found.get("via_id") else ""
    say(
        out,
        f"dedup: removed as in the index: {_index_kind(found)} duplicate of "
        f"{found['matched_id']} of run {found['matched_run']} (Jaccard {_value(found['jaccard'], 3)}{via})",
    )


def _print_dedup(out: Console, dedup: dict) -> None:
    if dedup.get("in_index"):
        _print_in_index(out, dedup["in_index"])
        if not dedup.get("in_cluster"):
            return
    if not dedup.get("in_cluster"):
        say(out, "dedup: unique (in no duplicate cluster)")
        return
    role = (
        "the kept document"
        if dedup["kept"]
        else (
            f"{'an exact' if dedup['exact'] else 'a URL' if dedup.get('url') else 'a near'} duplicate of "
            f"{dedup['kept_id']} (Jaccard {_value(dedup['jaccard'], 3)})"
        )
    )
    url_copies = f", {dedup['removed_url']} URL" if dedup.get("removed_url") else ""
    say(
        out,
        f"dedup: cluster {dedup['cluster']} of {dedup['cluster_size']} documents "
        f"({dedup['removed_exact']} exact{url_copies} and {dedup['removed_near']} near copies removed); "
        f"this is {role}",
    )


def _print_lines(out: Console, lines_cut: dict) -> None:
    if not lines_cut.get("in_scope", True):
        why = lines_cut.get("outside", "its source is not in lines.sources")
        say(out, f"lines: the document is unchanged: {why}")
        return
    say(
        out,
        f"lines: {lines_cut['lines_cut']} repeated lines cut ({lines_cut['chars_cut']:,} characters)"
        + (", leaving it blank: removed" if lines_cut.get("left_blank") else ""),
    )
    for line in lines_cut.get("cut", []):
        say(out, f"  - {line[:120]}")


def _print_mix(out: Console, mix: dict) -> None:
    say(
        out,
        f"mix: group {mix['group']}, {mix['side']} side" + (f" ({mix['cause']})" if mix.get("cause") else ""),
    )
    for name, taken in mix.get("mixtures", {}).items():
        repeats = taken.get("repeats")
        say(
            out,
            f"  mixture {name}: "
            + (f"taken {repeats} time{'s' if repeats != 1 else ''}" if repeats is not None else taken.get("note", "")),
        )


def print_training(out: Console, summary: dict) -> None:
    """A training run's final held-out loss and bits per byte, per group and overall."""
    final = summary["final"]
    table = Table(
        title=f"held-out loss after {summary['steps']} steps, {summary['tokens']:,} tokens "
        f"({summary['parameters']:,} parameters, {summary['tokens_per_s'] or 0:,.0f} tokens/s)"
    )
    for column in ("group", "loss", "bits per byte", "tokens evaluated"):
        table.add_column(column, justify="left" if column == "group" else "right")
    for group, result in final["groups"].items():
        table.add_row(shown(group), f"{result['loss']:.4f}", f"{result['bpb']:.4f}", f"{result['tokens']:,}")
    table.add_row("all", f"{final['loss']:.4f}", f"{final['bpb']:.4f}", "", style="bold")
    out.print(table)


def print_outputs(out: Console, out_dir: Path) -> None:
    """Where an experiment's or a sweep's results.json and report are."""
    say(
        out,
        f"results: {out_dir / 'results.json'}\nreport: {out_dir / 'report' / 'index.html'}",
    )


def print_experiment(out: Console, results: dict) -> None:
    """The experiment's results.json in short: mean ± std over seeds of the headline metrics per
    model, then the primary comparison named in the config (when one is), the other held-out
    comparisons and any that contradict the expectation."""
    out.print(_experiment_table(results))
    comparisons = sorted(results["comparisons"], key=lambda c: c.get("role") != "primary")  # primary first
    for comparison in comparisons:
        primary = comparison.get("role") == "primary"
        if primary or comparison["metric"] == "heldout_bpb" or comparison["contradicts_expectation"]:
            say(
                out,
                ("[primary] " if primary else "")
                + ("[contradicts the expectation] " if comparison["contradicts_expectation"] else "")
                + comparison["sentence"],
            )


def _experiment_metrics(results: dict) -> list[str]:
    """The metrics the table shows: held-out bits per byte, each junk set's, the low-resource
    languages', and transfer at the fewest and the most labels of each method."""
    junk = [f"heldout_bpb/{name}" for name, info in results["heldout"]["sets"].items() if not info["clean"]]
    # Transfer at the fewest and the most labels of each method (the report has every size).
    sizes = (results.get("task") or {}).get("sizes", {})
    ends = [
        f"{method}_accuracy@{size}"
        for method in ("probe", "finetune", "bow")
        for size in dict.fromkeys(sizes.get(method, [])[:1] + sizes.get(method, [])[-1:])
    ]
    return [
        "heldout_bpb",
        *junk,
        *[m for m in ("lang_bpb/low-resource",) if m in results["metrics"]],
        *[m for m in ends if m in results["metrics"]],
    ]


def _experiment_table(results: dict) -> Table:
    table = Table(
        title=f"experiment: mean ± std over {len(results['seeds'])} seeds ({results['timing']['total_s'] / 60:.1f} min)"
    )
    metrics = _experiment_metrics(results)
    table.add_column("model")
    for metric in metrics:
        header = metric.replace("_accuracy@", " acc @").replace("lang_bpb/low-resource", "low-resource bpb")
        table.add_column(
            shown(header.replace("heldout_bpb/", "").replace("heldout_bpb", "held-out bpb")), justify="right"
        )
    models = [name for name in ("random", "bag-of-words") if name in results.get("transfer", {})]
    for name in [*models, *results["variants"]]:
        cells = []
        for metric in metrics:
            value = results["metrics"].get(metric, {}).get(name)
            cells.append("-" if not value or value["mean"] is None else f"{value['mean']:.3f} ± {value['std']:.3f}")
        table.add_row(shown(name), *cells)
    return table


def print_sweep(out: Console, results: dict) -> None:
    """The sweep's results.json in short: each variant's fitted E, alpha and beta with their
    intervals and the fit's RMS residual, then each variant against the reference, over the cells
    and along the compute-optimal frontier."""
    out.print(_fit_table(results))
    fits = results["fits"][results["headline"]]
    for variant, entry in fits["comparisons"].items():
        _print_sweep_comparison(out, variant, entry, fits["reference"])


def _fit_table(results: dict) -> Table:
    from experiment.sweep import residuals, rms

    count = results["headline"]
    fits = results["fits"][count]
    table = Table(title=f"sweep: {len(results['runs'])} runs ({results['timing']['total_s'] / 60:.1f} min), N {count}")
    for column in ("variant", "E", "alpha", "beta", "RMS residual"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for variant in results["variants"]:
        entry = fits["variants"][variant]
        fitted = residuals(entry["fit"], results["cells"], variant, count, results["metric"])
        table.add_row(
            shown(variant),
            *(
                f"{entry['fit'][name]:.3f} ({entry['intervals'][name][0]:.3f} to {entry['intervals'][name][1]:.3f})"
                + (" undetermined" if name in entry["at_bounds"] else "")
                for name in ("E", "alpha", "beta")
            ),
            f"{rms(r['residual'] for r in fitted):.4f}",
        )
    return table


def _print_sweep_comparison(out: Console, variant: str, entry: dict, reference: str) -> None:
    from report.sweep import multiple

    cells = entry["cells"]
    say(
        out,
        f"{variant} - {reference} over the {cells['cells']} cells: {cells['mean_difference']:+.4f} "
        f"({cells['interval'][0]:+.4f} to {cells['interval'][1]:+.4f}), lower in {cells['better']}; tokens "
        f"{reference} needs for its loss at {entry['data_multiplier'][0]['tokens']:,.0f}: "
        + ", ".join(f"N={row['params']:,.0f} {multiple(row['multiplier'])}" for row in entry["data_multiplier"]),
    )
    for point in entry["frontier"]:
        low, high = (multiple(v) for v in point["multiplier_interval"])
        say(
            out,
            f"{variant} vs {reference} at {point['flops']:.2g} FLOPs: frontier loss "
            f"{point['loss_difference']:+.4f} ({point['loss_interval'][0]:+.4f} to "
            f"{point['loss_interval'][1]:+.4f}), "
            f"{reference} needs {multiple(point['compute_multiplier'])} the compute ({low} to {high})"
            + (" (extrapolated)" if point["multiplier_extrapolated"] else ""),
        )


def _with_interval(value: float, interval: list[float] | None) -> str:
    return f"{value:.3f}" if interval is None else f"{value:.3f} ({interval[0]:.3f} to {interval[1]:.3f})"


def print_choice_results(results: dict, out) -> None:
    """The table of ``curate eval``: each task's accuracies (centred: 0 is chance), the gold
    choice's bits per byte and its margin, with 95% intervals; CORE's aggregate below."""
    table = Table(title=shown(f"{results['checkpoint']} (step {results['step']}): likelihood-scored tasks"))
    for column in (
        "task",
        "items",
        "chance",
        "acc",
        "acc_norm",
        "acc_pmi",
        "centred acc_norm",
        "gold bpb",
        "margin bpb",
    ):
        table.add_column(column, justify="left" if column == "task" else "right")
    for task, m in results["tasks"].items():
        table.add_row(
            shown(task),
            f"{m['items']:,}" + (f" ({m['truncated']} cut)" if m["truncated"] else ""),
            f"{m['chance']:.3f}",
            *(
                _with_interval(m[key], m[key + "_ci"])
                for key in ("acc", "acc_norm", "acc_pmi", "centred_acc_norm", "gold_bpb", "margin_bpb")
            ),
        )
    out.print(table)
    aggregate = results["aggregate"]
    say(
        out,
        f"CORE (mean centred acc_norm over {aggregate['tasks']} tasks): {aggregate['core']:.3f}; "
        f"mean gold bits per byte: {aggregate['gold_bpb']:.3f}",
    )


def print_lm_eval_results(results: dict, out) -> None:
    """The lm-eval part of ``curate eval``: each task's samples and its metrics (value ± standard
    error) as lm-eval reports them."""
    table = Table(title="lm-evaluation-harness tasks (on this checkpoint, through trainer.harness)")
    for column in ("task", "samples", "metric", "value"):
        table.add_column(column, justify="left" if column in ("task", "metric") else "right")
    for task, metrics in results["results"].items():
        for key, value in metrics.items():
            if not isinstance(value, (int, float)) or "_stderr" in key or key == "sample_len":
                continue
            name = key.split(",")[0]
            stderr = metrics.get(key.replace(name, f"{name}_stderr", 1))
            value_text = f"{value:.4f}" + (f" ± {stderr:.4f}" if isinstance(stderr, (int, float)) else "")
            table.add_row(shown(task), f"{metrics.get('sample_len', '')}", shown(name), value_text)
    out.print(table)


def print_mixsearch(out: Console, results: dict) -> None:
    """The search's results.json in short: per target, the chosen fit's cross-validated Spearman
    and the proposed weights beside natural shares (with intervals), then the primary comparisons'
    sentences."""
    groups = results["groups"]
    table = Table(
        title=f"mixsearch: {len(results['proxies'])} proxy runs ({results['timing']['total_s'] / 60:.1f} min)"
    )
    table.add_column("group")
    table.add_column("natural", justify="right")
    for name in results["fits"]:
        table.add_column(shown(f"proposal for {name}"), justify="right")
    for group in groups:
        cells = [f"{results['fits'][next(iter(results['fits']))]['natural'][group]:.3f}"]
        for fit in results["fits"].values():
            proposal = fit["proposal"]
            cells.append(_with_interval(proposal["weights"][group], proposal["interval"][group]))
        table.add_row(shown(group), *cells)
    out.print(table)
    for name, fit in results["fits"].items():
        scores = ", ".join(
            f"{family}{' (chosen)' if family == fit['fit']['family'] else ''} "
            f"{'–' if cv['spearman'] is None else format(cv['spearman'], '.2f')} / {cv['mae']:.4f}"
            for family, cv in fit["fit"]["families"].items()
        )
        say(
            out,
            f"{name}: cross-validated Spearman / mean absolute error over {fit['proxies']} proxy runs: {scores}; "
            f"predicted at the proposal {fit['proposal']['predicted']:.4f}",
        )
    for comparison in (results.get("validation") or {}).get("comparisons", []):
        if comparison["family"] == "primary":
            say(out, comparison["sentence"])
