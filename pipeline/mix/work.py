"""The files the mix stage's units write in its work folder (``<run>/mix/intermediate/``), named
in one place: per input shard its scan, its pool rows and each mixture's plan rows; per routing
unit each mixture's copies and the validation side's; per split and group the ordered ranges."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.formats.mixture import group_file_stem
from pipeline.mix.shards import shard_file_name


@dataclass(frozen=True)
class WorkFiles:
    """The work folder ``root`` of a pool of ``shards`` input shards routed by ``units`` units."""

    root: Path
    shards: int
    units: int

    def scans(self) -> list[Path]:
        return [self.root / "scan" / shard_file_name(s) for s in range(self.shards)]

    def pools(self) -> list[Path]:
        return [self.root / "pool" / shard_file_name(s) for s in range(self.shards)]

    def plans(self, mixture: str) -> list[Path]:
        return [self.root / "plan" / mixture / shard_file_name(s) for s in range(self.shards)]

    def copies(self, mixture: str | None) -> list[Path]:
        """Each routing unit's copies of a mixture's training side (None: of the validation side)."""
        folder = self.root / "copies" / mixture if mixture else self.root / "copies-validation"
        return [folder / f"unit-{u:04d}.parquet" for u in range(self.units)]

    def ordered(self, mixture: str | None, group: str) -> Path:
        """The ordered ranges of a mixture's training group (None: of the validation side's)."""
        folder = self.root / "ordered" / mixture if mixture else self.root / "ordered-validation"
        return folder / group_file_stem(group)
