"""Documents per language through the stages, and the rules that remove far more of one language
than of English: what the run report (report.build) and the console after a run (report.console)
both show, read from the stages' stats alone (each stage's ``languages``: a ledger per language
code the lang stage assigned, ``und`` for none, with ``removed`` per rule).

A rule is *unfair to* a language when, in its stage, it removes more than :data:`UNFAIR_SHARE` of
that language's documents while it removes under :data:`ENGLISH_SHARE` of English's, both counted
against the documents of the language that entered the stage. A language (English too) with fewer
than :data:`MIN_DOCUMENTS` documents into the stage is not judged, and without English nothing is.
Only the rules of the stages that judge text (:data:`JUDGED_STAGES`) are judged, and of those
neither the rules that remove by the user's choice (the licence rules, the word and URL lists, whose
entries the user chose per language) nor those that flag content
(:data:`FLAGS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from pipeline.dedup.clusters import RULE_EXACT
from pipeline.filters.urls import RULE_DOMAIN, RULE_SUBSTRING, RULE_URL
from pipeline.filters.wordlists import RULE_LISTED_WORD
from pipeline.formats.ledger import Ledger
from pipeline.formats.stats import StageStats
from pipeline.lang import RULE_NOT_KEPT
from pipeline.licence import LicenceRule

# Exact fractions: a share exactly at a bound is compared without float rounding.
UNFAIR_SHARE = Fraction(1, 2)  # a rule removing more than this share of a language's documents...
ENGLISH_SHARE = Fraction(1, 5)  # ...while removing under this share of English's is flagged
MIN_DOCUMENTS = 5  # fewer documents of a language into a stage: too few to judge
ENGLISH = "en"  # the language compared with, as lid.176 names it
CHOSEN = frozenset({RULE_NOT_KEPT, LicenceRule.DROPPED, LicenceRule.NOT_KEPT, RULE_EXACT})
CHOSEN |= {RULE_LISTED_WORD, RULE_DOMAIN, RULE_URL, RULE_SUBSTRING}  # the user's lists
# The stages whose rules judge the quality of text, which may suit one language and not another;
# the lang stage's score judges the identification itself (gibberish gets a low score in whatever
# language lid.176 guesses), and dedup counts copies.
JUDGED_STAGES = ("filter", "lines")
# Rules that flag content, not a measure with a threshold: lorem ipsum and code braces are not
# any language's prose (lid.176 calls lorem ipsum Latin).
FLAGS = frozenset({"c4_quality.lorem_ipsum", "c4_quality.curly_bracket"})
CONFIG_DOCS = "docs/config.md"


@dataclass(frozen=True)
class UnfairRule:
    """A rule of ``stage`` that removed ``removed`` of the ``docs_in`` documents of ``lang`` that
    entered the stage, and ``english_removed`` of ``english_in`` English ones."""

    stage: str
    rule: str
    lang: str
    removed: int
    docs_in: int
    english_removed: int
    english_in: int

    @property
    def share(self) -> float:
        return self.removed / self.docs_in

    @property
    def english_share(self) -> float:
        return self.english_removed / self.english_in

    def line(self) -> str:
        """The warning as one line (without its ``warning:`` label); names as the data has them,
        for the caller to escape."""
        return (
            f"{self.rule} removes {self.share:.0%} of {self.lang} ({self.removed:,} of {self.docs_in:,} documents) "
            f"but {self.english_share:.0%} of {ENGLISH}; its threshold may not suit {self.lang} (see {CONFIG_DOCS})"
        )


def language_stages(stats: Mapping[str, StageStats]) -> list[str]:
    """The stages, in run order, whose stats count documents per language."""
    return [stage for stage, counts in stats.items() if counts.languages]


def languages_by_documents(stats: Mapping[str, StageStats]) -> list[str]:
    """Every language code of the run, most documents into the first stage that counts them first
    (then by code)."""
    stages = language_stages(stats)
    if not stages:
        return []
    first = stats[stages[0]].languages
    codes = {code for stage in stages for code in stats[stage].languages}
    return sorted(codes, key=lambda code: (-(first[code].docs_in if code in first else 0), code))


def unfair_rules(stats: Mapping[str, StageStats]) -> list[UnfairRule]:
    """The (rule, language) pairs of the run's ``stats`` (stage name -> its stats.json) that a rule
    removes far more of than of English (module docstring), in stage order, the largest share first."""
    found = []
    for stage in language_stages(stats):
        if stage not in JUDGED_STAGES:
            continue
        languages = stats[stage].languages
        english = languages.get(ENGLISH, Ledger(stage))
        english_in = english.docs_in
        if english_in < MIN_DOCUMENTS:
            continue
        flagged = []
        for lang, ledger in languages.items():
            docs_in = ledger.docs_in
            if lang == ENGLISH or docs_in < MIN_DOCUMENTS:
                continue
            for rule, removed in ledger.removed.items():
                english_removed = english.removed.get(rule, 0)
                if (
                    rule not in CHOSEN | FLAGS
                    and removed > UNFAIR_SHARE * docs_in
                    and english_removed < ENGLISH_SHARE * english_in
                ):
                    flagged.append(UnfairRule(stage, rule, lang, removed, docs_in, english_removed, english_in))
        found += sorted(flagged, key=lambda u: (-u.share, u.rule, u.lang))
    return found
