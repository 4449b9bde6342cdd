"""Prefect artifacts of each stage, shown on its flow run in the Prefect UI: a markdown summary
(documents in, out, removed by reason, quarantined) and a table of counts per rule.

Publishing never fails a run: an artifact that cannot be created (no API, a server error) only
logs a warning.
"""

from __future__ import annotations

import logging
import re

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from pipeline.formats.stats import StageStats

KEY_PREFIX = "curate"


def artifact_key(stage: str, what: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes): ``curate-filter-summary``."""
    raw = f"{KEY_PREFIX}-{stage}-{what}".lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", raw)).strip("-")


def _n(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _share(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "-"


def stage_markdown(stage: str, stats: StageStats) -> str:
    """The stage's ledger as markdown."""
    docs_in, docs_out = stats.docs_in, stats.docs_out
    removed, quarantined = stats.removed, stats.quarantined
    lines = [
        f"### Stage `{stage}`",
        "",
        "| documents in | out | removed | quarantined |",
        "|---:|---:|---:|---:|",
        f"| {_n(docs_in)} | {_n(docs_out)} | {_n(sum(removed.values()))} | {_n(sum(quarantined.values()))} |",
    ]
    for title, counts in (("Removed by reason", removed), ("Quarantined by reason", quarantined)):
        if counts:
            lines += ["", f"**{title}**", "", "| reason | documents | share of input |", "|---|---:|---:|"]
            lines += [
                f"| `{reason}` | {_n(n)} | {_share(n, docs_in)} |"
                for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            ]
    extra = _stage_figures(stats)
    if extra:
        lines += [""] + [f"- {item}" for item in extra]
    return "\n".join(lines) + "\n"


def _stage_figures(stats: StageStats) -> list[str]:
    """What else the stage counted: tokens, the split and mixtures, duplicate clusters, lines cut."""
    extra = []
    if stats.tokens is not None:
        extra.append(f"{_n(stats.tokens)} tokens")
    if stats.train_documents is not None:
        extra.append(f"{_n(stats.train_documents)} training and {_n(stats.validation_documents)} validation documents")
        extra += [
            f"mixture `{name}`: {_n(m.get('tokens_taken', 0))} tokens taken"
            for name, m in (stats.mixtures or {}).items()
        ]
    if stats.dedup is not None:
        found = stats.dedup
        extra.append(
            f"{_n(found.get('clusters', 0))} duplicate clusters holding "
            f"{_n(found.get('docs_in_clusters', 0))} documents"
        )
    if stats.lines is not None:
        counts = stats.counts or {}
        extra.append(f"{_n(counts.get('repeated_lines.lines_removed', 0))} repeated lines cut")
    return extra


# The columns of the table of counts per rule.
RULE_COLUMNS = ("rule", "removed", "would_fire", "quarantined", "share_of_input")


def stage_rule_rows(stats: StageStats) -> list[dict]:
    """One row per rule or reason: documents removed (first rule), would fire, quarantined."""
    removed, quarantined = stats.removed, stats.quarantined
    fired = {key.split("|", 1)[1]: n for key, n in (stats.counts or {}).items() if key.startswith("fired|")}
    docs_in = stats.docs_in
    rows = [
        (rule, removed.get(rule, 0), fired.get(rule, removed.get(rule, 0)), 0, _share(removed.get(rule, 0), docs_in))
        for rule in sorted(set(removed) | set(fired))
    ]
    rows += [(reason, 0, 0, n, _share(n, docs_in)) for reason, n in sorted(quarantined.items())]
    return [dict(zip(RULE_COLUMNS, row)) for row in rows]


def publish_stage(stage: str, stats: StageStats) -> dict:
    """Create the stage's markdown and table artifacts on the current flow run; return ``stats``
    as its ``stats.json`` holds them (so a flow can ``return publish_stage(name, stats)``).
    Failures are logged, never raised."""
    try:
        create_markdown_artifact(
            markdown=stage_markdown(stage, stats),
            key=artifact_key(stage, "summary"),
            description=f"stage {stage}: documents in, out, removed and quarantined",
        )
        rows = stage_rule_rows(stats) or [dict(zip(RULE_COLUMNS, ("-", 0, 0, 0, "-")))]
        create_table_artifact(
            table=rows, key=artifact_key(stage, "rules"), description=f"stage {stage}: documents per rule and reason"
        )
    except Exception as error:  # an artifact is a view of the run, never a reason to stop it
        _logger().warning(
            "stage %s: could not publish its Prefect artifacts (%s: %s)", stage, type(error).__name__, error
        )
    return stats.to_dict()


def _logger():
    try:
        from prefect.logging import get_run_logger

        return get_run_logger()
    except Exception:  # outside a flow run
        return logging.getLogger("flows.artifacts")
