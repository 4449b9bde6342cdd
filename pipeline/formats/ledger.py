"""Per-stage accounting: every document that enters a stage leaves it counted.

    docs_in == docs_out + sum(removed.values()) + sum(quarantined.values())

``removed`` counts documents a stage dropped on purpose (by reason: a filter, a duplicate);
``quarantined`` counts records it could not process (by reason: malformed, unreadable). A mismatch
is a bug in the stage and raises :class:`LedgerError`; it is never a warning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field


class LedgerError(RuntimeError):
    """A stage's counts do not add up: some document was lost or counted twice."""


@dataclass
class Ledger:
    stage: str
    docs_in: int = 0
    docs_out: int = 0
    removed: Counter = field(default_factory=Counter)
    quarantined: Counter = field(default_factory=Counter)
    files: int | None = None  # the input files a source read (the source stage's ledger per source)

    @property
    def accounted(self) -> int:
        return self.docs_out + sum(self.removed.values()) + sum(self.quarantined.values())

    def merge(self, other: Ledger) -> Ledger:
        self.docs_in += other.docs_in
        self.docs_out += other.docs_out
        self.removed.update(other.removed)
        self.quarantined.update(other.quarantined)
        return self

    def check(self, where: str = "") -> Ledger:
        if self.docs_in != self.accounted:
            raise LedgerError(
                f"stage {self.stage}{' ' + where if where else ''}: {self.docs_in} documents in, but "
                f"{self.docs_out} out + {sum(self.removed.values())} removed + "
                f"{sum(self.quarantined.values())} quarantined = {self.accounted}"
            )
        return self

    def to_dict(self) -> dict:
        files = {} if self.files is None else {"files": self.files}
        return {
            "stage": self.stage,
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "removed": dict(sorted(self.removed.items())),
            "quarantined": dict(sorted(self.quarantined.items())),
            **files,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Ledger:
        return cls(
            data["stage"],
            data["docs_in"],
            data["docs_out"],
            Counter(data.get("removed", {})),
            Counter(data.get("quarantined", {})),
            data.get("files"),
        )


def add_counts(total: dict, found: Mapping) -> dict:
    """Add ``found``'s numbers into ``total`` (nested dicts key by key)."""
    for key, value in found.items():
        if isinstance(value, Mapping):
            add_counts(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value
    return total
