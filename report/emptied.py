"""Stages that removed every document that entered them: a setting that names nothing (a language
code, a licence, a threshold out of reach) ends a run with nothing to curate, and the run must say
so loudly, naming the rules that did it and the settings they come from. Read from the stages'
stats alone (docs in, docs out, removed and quarantined by rule)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.formats.stats import StageStats
from pipeline.lang import RULE_LOW_SCORE, RULE_NOT_KEPT
from pipeline.licence import LicenceRule

# The settings behind the rules that remove by a setting rather than by a measurement of the text.
SETTINGS = {
    RULE_NOT_KEPT: "lang.keep",
    RULE_LOW_SCORE: "lang.min_score and lang.min_score_by_lang",
    LicenceRule.NOT_KEPT: "filter.licences",
    LicenceRule.DROPPED: "filter.exclude_licences",
}
# Stages whose rules are named "<stage>.<rule>"; any other prefix is a filter of the filter stage.
STAGE_SECTIONS = ("source", "lang", "dedup", "lines", "tokenize", "mix")


class EmptiedStageWarning(UserWarning):
    """A stage of a run removed every document that entered it (the Python API's warning)."""


@dataclass(frozen=True)
class EmptiedStage:
    """``stage`` took ``docs_in`` documents and kept none: ``removed`` and ``quarantined`` count
    them by rule (or reason), most first."""

    stage: str
    docs_in: int
    removed: dict[str, int]
    quarantined: dict[str, int]

    def settings(self) -> list[str]:
        """The config settings behind the rules, most documents first."""
        found = []
        for rule in self.removed:
            prefix = rule.split(".", 1)[0]
            if rule in SETTINGS:
                found.append(SETTINGS[rule])
            elif prefix in STAGE_SECTIONS:
                found.append(f"[{prefix}]")
            elif "." in rule:
                found.append(f"[filter.params.{prefix}]")
        return list(dict.fromkeys(found))

    def line(self) -> str:
        """The warning as one line (without its ``warning:`` label)."""
        counts = [(rule, "removed", n) for rule, n in self.removed.items()]
        counts += [(reason, "quarantined", n) for reason, n in self.quarantined.items()]
        counts.sort(key=lambda count: -count[2])
        rules = ", ".join(f"{rule} {verb} {n:,} of {self.docs_in:,}" for rule, verb, n in counts)
        settings = self.settings()
        fix = f"; check {' and '.join(settings)} in the config" if settings else ""
        entered = f"the {self.docs_in:,} documents" if self.docs_in != 1 else "the 1 document"
        return f"the {self.stage} stage kept none of {entered} that entered it: {rules}{fix}"


def emptied_stages(stats: Mapping[str, StageStats]) -> list[EmptiedStage]:
    """The stages, in run order, that took documents and kept none."""
    return [
        EmptiedStage(stage, counts.docs_in, _most_first(counts.removed), _most_first(counts.quarantined))
        for stage, counts in stats.items()
        if counts.docs_in and counts.docs_out == 0
    ]


def print_emptied(out, stats: Mapping[str, StageStats]) -> None:
    """One loud ``warning:`` line per stage that kept no document (on ``out``, a rich Console)."""
    from report.console import print_warning

    for stage in emptied_stages(stats):
        print_warning(out, stage.line(), style="bold red")


def warn_emptied(stats: Mapping[str, StageStats]) -> None:
    """An :class:`EmptiedStageWarning` per stage that kept no document (the Python API's run)."""
    import warnings

    for stage in emptied_stages(stats):
        warnings.warn(stage.line(), EmptiedStageWarning, stacklevel=3)


def _most_first(counts: Mapping[str, int] | None) -> dict[str, int]:
    return dict(sorted((counts or {}).items(), key=lambda kv: (-kv[1], kv[0])))
