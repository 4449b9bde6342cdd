"""Every path under the dedup stage's work folder (``<stage>/intermediate``), in one place: the
layout's one owner, as :class:`pipeline.formats.documents.RunLayout` is the run's. The steps
(``pipeline.dedup.jobs``) and the modules below them are handed these paths; none builds one.

    finding.json                             the finding's counts (:class:`DedupWork.finding`)
    signatures/shard-<S>.parquet (+ .sets)    one per document shard
    bands/part-<P>/block-<first S>.parquet    a block of shards' band keys, per partition
    <pass>/pairs/group-<G>/<name>.parquet     a pass's pairs routed to group G (verify: part-<P>,
                                              similarity: members-<H>)
    <pass>/forward/group-<T>/from-<G>.parquet the first hop's sets sent on to group T
    <pass>/measured/first-<G>.parquet, second-<G>.parquet   what each hop measured
    components/large-<r>/unit-<U>/from-<S>.parquet, small-<r>/...   the component rounds
    components/labels/bucket-<B>.parquet      each document's component
    components/labelled/group-<G>/from-<U>.parquet   the labels sent to a group
    components/home/home-<H>/from-<G>.parquet the members with the keep rule's columns, per home
    members/group-<G>/from-<H>.parquet        the members of group G, with their kept document
    index/pairs/group-<G>/part-<P>.parquet    with a dedup index: candidate pairs (a document of
                                              group G, an indexed one) from partition P
    index/measured/first-<G>.parquet          group G's documents matched in the index

Work made under another layout is redone, not reused: :data:`WORK_FORMAT` names this one and is
part of what the stage records it made the folder from.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.io.storage import AnyPath, as_path

# Signature files with their 64-bit shingle sets in a sets file beside each, band keys unsorted,
# files routed between groups of shards. Earlier layouts (32-bit sets, files routed from shard to
# shard, sets in a Parquet column) are redone.
WORK_FORMAT = "dedup-work/4"

# The two passes routed between groups: verification of the candidate pairs, and the similarity
# of each clustered document with its kept document.
VERIFY, SIMILARITY = "verify", "similarity"
# The hops of a pass, named as their output files are.
FIRST, SECOND = "first", "second"


def _group(root: AnyPath, group: int) -> AnyPath:
    return root / f"group-{group:05d}"


def _sent(folder: AnyPath, sender: int) -> AnyPath:
    return folder / f"from-{sender:05d}.parquet"


@dataclass(frozen=True)
class PassFolders:
    """The files of one routed pass (verify or similarity): its pairs, what its first hop sends
    on, and what each hop measured."""

    root: AnyPath

    def pairs(self, group: int) -> AnyPath:
        """The folder of the pairs routed to ``group`` (one file per sender)."""
        return _group(self.root / "pairs", group)

    def pair_file(self, group: int, name: str) -> AnyPath:
        return self.pairs(group) / f"{name}.parquet"

    def forward(self, group: int) -> AnyPath:
        """The folder of the sets first hops sent to ``group``."""
        return _group(self.root / "forward", group)

    def forward_file(self, group: int, sender: int) -> AnyPath:
        return _sent(self.forward(group), sender)

    def measured(self, hop: str, group: int) -> AnyPath:
        return self.root / "measured" / f"{hop}-{group:05d}.parquet"

    def measured_files(self, group: int) -> list[AnyPath]:
        """What the hops of ``group`` measured (a hop with nothing to measure may write none)."""
        return [p for p in (self.measured(FIRST, group), self.measured(SECOND, group)) if p.exists()]


@dataclass(frozen=True)
class RoundFolder:
    """One half-round of the component rounds (``large-<r>`` or ``small-<r>``): a folder per
    receiving unit, a file per sending unit."""

    root: AnyPath

    def unit(self, unit: int) -> AnyPath:
        return self.root / f"unit-{unit:05d}"

    def file(self, unit: int, sender: int) -> AnyPath:
        return _sent(self.unit(unit), sender)


@dataclass(frozen=True)
class ComponentsFolders:
    """The files of the connected components: the rounds, the labels, and where they are sent."""

    root: AnyPath

    def round(self, star: str, round_: int) -> RoundFolder:
        """The records read by ``star`` ("large" or "small") in round ``round_``."""
        return RoundFolder(self.root / f"{star}-{round_:04d}")

    def labels(self, bucket: int) -> AnyPath:
        return self.root / "labels" / f"bucket-{bucket:05d}.parquet"

    def labels_folder(self) -> AnyPath:
        return self.root / "labels"

    def labelled(self, group: int) -> AnyPath:
        """The folder of the labels of ``group``'s documents (one file per sending unit)."""
        return _group(self.root / "labelled", group)

    def labelled_file(self, group: int, unit: int) -> AnyPath:
        return _sent(self.labelled(group), unit)

    def home(self, home: int) -> AnyPath:
        """The folder of the members sent to ``home`` (one file per sending group)."""
        return self.root / "home" / f"home-{home:05d}"

    def home_file(self, home: int, group: int) -> AnyPath:
        return _sent(self.home(home), group)


@dataclass(frozen=True)
class DedupWork:
    """The dedup stage's work folder (``root``: a local path or an fsspec URL)."""

    root: AnyPath

    def __post_init__(self):
        object.__setattr__(self, "root", as_path(self.root))

    @property
    def finding(self) -> AnyPath:
        return self.root / "finding.json"

    def signatures(self, shard: int) -> AnyPath:
        return self.root / "signatures" / f"shard-{shard:05d}.parquet"

    def band_partition(self, partition: int) -> AnyPath:
        """The folder of partition ``partition``'s band keys (one file per block of shards)."""
        return self.root / "bands" / f"part-{partition:04d}"

    def band_files(self, first: int, partitions: int) -> list[AnyPath]:
        """The band-key files of the block of shards from ``first``, one per partition."""
        return [self.band_partition(p) / f"block-{first:05d}.parquet" for p in range(partitions)]

    def routed(self, name: str) -> PassFolders:
        """The folders of pass ``name`` (:data:`VERIFY` or :data:`SIMILARITY`)."""
        return PassFolders(self.root / name)

    def against_index(self) -> PassFolders:
        """The pass against a dedup index (``pipeline.dedup.indexed``): pairs and matches by group."""
        return PassFolders(self.root / "index")

    @property
    def components(self) -> ComponentsFolders:
        return ComponentsFolders(self.root / "components")

    def members(self, group: int) -> AnyPath:
        """The folder of ``group``'s members of clusters (one file per home)."""
        return _group(self.root / "members", group)

    def members_file(self, group: int, home: int) -> AnyPath:
        return _sent(self.members(group), home)


@dataclass(frozen=True)
class LinesWork:
    """The lines stage's work folder: line counts per partition (a file per document shard,
    ``pipeline.dedup.lines``), each partition's frequent lines, all of them, and the finding."""

    root: AnyPath

    def __post_init__(self):
        object.__setattr__(self, "root", as_path(self.root))

    @property
    def counts(self) -> AnyPath:
        return self.root / "counts"

    def counts_partition(self, partition: int) -> AnyPath:
        return self.counts / f"part-{partition:04d}"

    def frequent_partition(self, partition: int) -> AnyPath:
        return self.root / "frequent" / f"part-{partition:04d}.parquet"

    @property
    def frequent(self) -> AnyPath:
        return self.root / "frequent.parquet"

    @property
    def finding(self) -> AnyPath:
        return self.root / "finding.json"
