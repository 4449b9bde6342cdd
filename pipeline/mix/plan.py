"""Mixing: groups of documents, their weights, epoch caps, the held-out split and the sampling plan.

The mix stage decides how many tokens of the training mixture each group of documents supplies and
which documents supply them. In run order::

    docs = docs.with_columns(assign_groups(docs, ["lang"], min_share=0.005))   # a group per document
    train_ids, validation_ids = split_validation(docs, 0.001, 1_000, seed)    # held out first
    train_ids = drop_contaminated(train_ids, near_duplicate_pairs)             # (train, validation) pairs
    train = docs.filter(pl.col("id").is_in(train_ids.implode()))
    sizes = group_sizes(train)                                                 # tokens per group
    weights = temperature_weights(sizes, 3.33)           # or explicit_weights(config_weights, sizes)
    caps = cap_epochs(weights, sizes, budget_tokens, max_epochs=4)
    plan = sample_plan(train, caps.tokens_taken, seed)                         # repeats per document
    report = mixture_report(train, caps, plan)                                 # for manifest.json

Units. Sizes, budgets and targets are counted in one unit throughout: tokens, the ``tokens``
column of the documents (from the tokenizer, or an estimate such as UTF-8 bytes / 4). Where token
counts are unknown, give every document ``tokens = 1``: every size, budget, target and report
figure is then a number of documents, and nothing else changes. Temperature weights computed from
document counts and applied to a token budget are a valid choice too (mT5 counted examples); the
functions do not care, as long as :func:`cap_epochs` gets sizes in the unit of its budget and of
the ``tokens`` column that :func:`sample_plan` reads.

Randomness. Every random choice (the validation split, the order in which a group's documents are
sampled) comes from :func:`seeded_id_hash`, a 64-bit hash of the document id under the seed, never
from the documents' order or a random generator's state: the same ids and seed give the same
answer whatever the order of the rows, on any machine and any library version. A document's side
of the validation split depends on its id and the seed alone (but for the per-group cap and
minimum), so it stays put when other documents come or go. The split and the sampling use different salts, so
the two are independent.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.formats.hashing import _U64, seeded_id_hash
from pipeline.formats.langcodes import language_of

GROUP_SEPARATOR = "/"
OTHER = "other"
# The code the lang stage gives a document whose language it could not determine (BCP 47 "und");
# a null language is grouped under it too.
UNDETERMINED = "und"

# Salts that make the validation split and the sampling order independent under one seed.
SALT_VALIDATION = 0x56414C4944415445  # "VALIDATE"
SALT_SAMPLE = 0x53414D504C494E47  # "SAMPLING"


# ---------------------------------------------------------------------------------------------
# Stable hashes of document ids


def seeded_id_uniform(ids: pl.Series | pa.Array | Sequence[str], seed: int, salt: int = 0) -> np.ndarray:
    """A float64 in [0, 1) per id: the top 53 bits of :func:`seeded_id_hash`."""
    return _uniform(seeded_id_hash(ids, seed, salt))


def _uniform(keys: np.ndarray) -> np.ndarray:
    return (keys >> _U64(11)).astype(np.float64) * 2.0**-53


# ---------------------------------------------------------------------------------------------
# Groups


def assign_groups(
    docs: pl.DataFrame,
    by: Sequence[str],
    merge: Mapping[str, str] | None = None,
    min_share: float = 0.0,
    other: str = OTHER,
    size_column: str | None = None,
) -> pl.Series:
    """The mixing group of each document, as a String series named ``group``.

    Naming: the values of the ``by`` columns (usually ``source`` and/or ``lang``), in the order
    given, joined by ``/``: ``by=["source"]`` gives ``news``, ``by=["lang"]`` gives ``en``,
    ``by=["source", "lang"]`` gives ``news/en``. A null ``lang`` counts as ``und`` (undetermined,
    the lang stage's own code); a null in another column, or a value that contains ``/`` (the
    names would be ambiguous), is an error.

    Merging small groups, in this order:

    1. ``merge`` maps whole group names to new names (``{"news/sw": "news/other", "web/sw":
       "web/other"}``); names it does not list stay as they are, keys that match no group are ignored.
    2. ``min_share``: every group whose share of the corpus is below it becomes ``other``. The share
       is of documents, or of the sum of ``size_column`` (such as ``"tokens"``) when given. With
       ``by=["lang"]`` and ``min_share=0.01``, languages under 1% of the documents mix as ``other``.
    """
    if not by:
        raise ValueError("assign_groups: `by` is empty; name the columns that make a group, e.g. ['source', 'lang']")
    missing = [column for column in by if column not in docs.columns]
    if missing:
        raise ValueError(
            f"assign_groups: the documents have no column {missing[0]!r} (they have {docs.columns}); "
            "run the stage that adds it first or group by other columns"
        )
    if not 0.0 <= min_share < 1.0:
        raise ValueError(f"assign_groups: min_share={min_share} is outside [0, 1); it is a share of the corpus")
    parts = []
    for column in by:
        values = docs[column].cast(pl.String)
        if column == "lang":
            values = values.fill_null(UNDETERMINED)
        elif values.null_count():
            raise ValueError(
                f"assign_groups: column {column!r} has {values.null_count()} null values; "
                "fill them before grouping by it"
            )
        bad = values.unique().filter(values.unique().str.contains(GROUP_SEPARATOR, literal=True))
        if len(bad):
            raise ValueError(
                f"assign_groups: {column} value {bad[0]!r} contains {GROUP_SEPARATOR!r}, which joins the "
                "parts of a group name; rename it"
            )
        parts.append(values)
    frame = pl.DataFrame({f"_{i}": part for i, part in enumerate(parts)})
    groups = frame.select(pl.concat_str(frame.columns, separator=GROUP_SEPARATOR).alias("group")).to_series()
    if merge:
        named = named_groups(merge, groups.unique().to_list(), by, "merge")
        groups = groups.replace({group: merge[key] for key, group in named.items()})
    if min_share > 0.0 and len(groups):
        if size_column is None:
            sizes = groups.value_counts(name="size")
        else:
            sizes = (
                pl.DataFrame({"group": groups, "size": docs[size_column]}).group_by("group").agg(pl.col("size").sum())
            )
        small = small_groups(dict(zip(sizes["group"].to_list(), sizes["size"].to_list())), min_share)
        if small:
            groups = groups.replace({name: other for name in small})
    return groups.alias("group")


def named_groups(keys: Iterable[str], groups: Iterable[str], by: Sequence[str], setting: str) -> dict[str, str]:
    """The group each of ``keys`` (a config's ``merge`` or ``weights`` keys) names among ``groups``:
    the group of that name, else the one whose parts a ``by`` of ``lang`` makes name the same
    language (pipeline.formats.langcodes: ``eng`` and ``news/eng_Latn`` name the groups ``en`` and
    ``news/en``) and whose other parts are the key's. A key that names no group is left out.
    ValueError (naming ``setting``) for a key of several groups, and for two keys of one group."""
    groups = list(groups)
    found: dict[str, str] = {}
    for key in keys:
        if key in groups:
            found[key] = key
            continue
        parts = key.split(GROUP_SEPARATOR)
        matches = [group for group in groups if _same_group(parts, group.split(GROUP_SEPARATOR), by)]
        if len(matches) > 1:
            raise ValueError(
                f"mix {setting}: {key!r} names the groups {matches} (one language in several spellings); "
                "name one of them as it is written"
            )
        if matches:
            found[key] = matches[0]
    by_group: dict[str, str] = {}
    for key, group in found.items():
        if group in by_group:
            raise ValueError(
                f"mix {setting}: {by_group[group]!r} and {key!r} name one group ({group!r}); keep one of them"
            )
        by_group[group] = key
    return found


def _same_group(key: list[str], group: list[str], by: Sequence[str]) -> bool:
    if len(key) != len(group) or len(group) != len(by):
        return False
    return all(
        k == g or (column == "lang" and language_of(k) == language_of(g)) for k, g, column in zip(key, group, by)
    )


def small_groups(sizes: Mapping[str, int | float], min_share: float) -> list[str]:
    """The groups whose share of the sum of ``sizes`` is below ``min_share`` (sorted; none when
    the sizes sum to 0): those :func:`assign_groups` merges into ``other``. A stage that counts the
    groups shard by shard calls it with the summed sizes."""
    total = sum(sizes.values())
    if min_share <= 0.0 or total <= 0:
        return []
    return sorted(name for name, size in sizes.items() if size / total < min_share)


def group_sizes(docs: pl.DataFrame, group: str = "group", tokens: str | None = "tokens") -> dict[str, int]:
    """Tokens per group (the sum of the ``tokens`` column), or documents per group when ``tokens``
    is None; sorted by group name."""
    if tokens is None:
        counted = docs.group_by(group).agg(pl.len().alias("size"))
    else:
        _check_tokens(docs[tokens], "group_sizes")
        counted = docs.group_by(group).agg(pl.col(tokens).cast(pl.Int64).sum().alias("size"))
    counted = counted.sort(group)
    return dict(zip(counted[group].to_list(), (int(v) for v in counted["size"].to_list())))


def _is_number(value) -> bool:
    """A real number (Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_tokens(tokens: pl.Series, where: str) -> None:
    if missing := tokens.null_count():
        raise ValueError(
            f"{where}: {_counted(missing, 'document')} {'has' if missing == 1 else 'have'} no token count; "
            "count their tokens (or give every document tokens = 1 to count documents)"
        )
    if len(tokens) and tokens.min() < 0:
        raise ValueError(f"{where}: negative token counts (min {tokens.min()}); token counts are >= 0")


# ---------------------------------------------------------------------------------------------
# Weights


def temperature_weights(sizes: Mapping[str, int | float], temperature: float) -> dict[str, float]:
    """Temperature sampling: q_i proportional to n_i^(1/T), normalized to sum to 1.

    ``sizes`` are the groups' sizes in tokens, or in documents when tokens are unknown (the caller
    decides; the weights are the same function of either). T = 1 keeps the natural proportions,
    T -> infinity (``math.inf`` is accepted) gives every non-empty group the same weight, and T in
    between upsamples small groups. The usual choice is the exponent alpha = 1/T = 0.3, T ~ 3.33:
    XLM-R (Conneau et al. 2020, "Unsupervised Cross-lingual Representation Learning at Scale") and
    mT5 (Xue et al. 2021, "mT5: A Massively Multilingual Pre-trained Text-to-Text Transformer",
    section 3.2, p(L) proportional to |L|^alpha over examples) both sample languages with
    alpha = 0.3. A group of size 0 gets
    weight 0.

    Sizes {a: 900, b: 100}: T = 1 gives 0.9 / 0.1, T = 2 gives 30/40 = 0.75 / 10/40 = 0.25.
    """
    if not (_is_number(temperature) and temperature > 0):
        raise ValueError(
            f"temperature_weights: temperature={temperature!r}; it must be > 0 (1 keeps the "
            "proportions, larger flattens them, math.inf is uniform)"
        )
    if not sizes:
        raise ValueError("temperature_weights: no groups; give the size of each group")
    for name, size in sizes.items():
        if not (_is_number(size) and math.isfinite(size) and size >= 0):
            raise ValueError(f"temperature_weights: group {name!r} has size {size!r}; sizes are counts >= 0")
    total = float(sum(sizes.values()))
    if total <= 0:
        raise ValueError("temperature_weights: every group has size 0; there is nothing to mix")
    exponent = 0.0 if math.isinf(temperature) else 1.0 / temperature
    raw = {name: (size / total) ** exponent if size > 0 else 0.0 for name, size in sizes.items()}
    norm = sum(raw.values())
    return {name: value / norm for name, value in raw.items()}


def explicit_weights(
    weights: Mapping[str, float], groups: Iterable[str], default: float | None = None, by: Sequence[str] = ()
) -> dict[str, float]:
    """Weights given in the config, checked against the groups and normalized to sum to 1.

    Every group needs a weight: one listed in ``weights``, or ``default`` for those not listed
    (``default=None`` makes a missing group an error). A weight of 0 leaves a group out of the
    mixture. A name in ``weights`` that is not a group, a negative or non-finite weight, or weights
    that are all 0 raise ValueError with the group's name and the fix. The result has the order of
    ``groups``. With ``by`` (the columns that made the groups), a name whose language part is
    another code of a group's language names that group (:func:`named_groups`)."""
    groups = list(groups)
    known = set(groups)
    named = named_groups(weights, groups, by, "weights")
    weights = {named.get(name, name): weight for name, weight in weights.items()}
    for name, weight in weights.items():
        if name not in known:
            raise ValueError(
                f"mix weights: unknown group {name!r}; the groups are {sorted(known)}; "
                "fix the name in the config or remove it"
            )
        if not _is_number(weight) or not math.isfinite(weight):
            raise ValueError(f"mix weights: group {name!r} has weight {weight!r}; a weight is a finite number >= 0")
        if weight < 0:
            raise ValueError(
                f"mix weights: group {name!r} has negative weight {weight}; weights must be >= 0 "
                "(0 leaves the group out)"
            )
    if default is not None and (not _is_number(default) or not math.isfinite(default) or default < 0):
        raise ValueError(f"mix weights: default weight {default!r}; it must be a finite number >= 0")
    missing = [name for name in groups if name not in weights]
    if missing and default is None:
        raise ValueError(
            f"mix weights: no weight for group {missing[0]!r}"
            f"{f' (and {len(missing) - 1} more: {missing[1:]})' if len(missing) > 1 else ''}; "
            "give it a weight in the config (0 leaves it out) or set a default weight"
        )
    chosen = {name: float(weights[name]) if name in weights else float(default) for name in groups}
    total = sum(chosen.values())
    if total <= 0:
        raise ValueError(f"mix weights: every weight is 0 (groups {groups}); give at least one group a positive weight")
    return {name: value / total for name, value in chosen.items()}


# ---------------------------------------------------------------------------------------------
# Epoch caps


@dataclass(frozen=True)
class EpochCaps:
    """What :func:`cap_epochs` allocated. All token figures are integers.

    ``tokens_taken[g]``: the group's share of the budget; ``epochs[g]``: tokens_taken / size (how
    many times the group is seen, fractional); ``effective_weights[g]``: tokens_taken / total taken;
    ``capped``: the groups held at ``max_epochs`` x size; ``shortfall_tokens``: budget minus total
    taken, 0 unless every group with a positive weight is capped (the data cannot fill the budget,
    and none is invented)."""

    tokens_taken: dict[str, int]
    epochs: dict[str, float]
    effective_weights: dict[str, float]
    target_weights: dict[str, float]
    sizes: dict[str, int]
    budget_tokens: int
    max_epochs: float | None
    capped: tuple[str, ...] = ()
    shortfall_tokens: int = 0
    total_tokens: int = 0

    def __iter__(self):
        """Unpacks as ``tokens_taken, epochs, effective_weights``."""
        return iter((self.tokens_taken, self.epochs, self.effective_weights))


def _as_integer(value, what: str) -> int:
    if not _is_number(value) or not math.isfinite(value) or value < 0 or float(value) != int(value):
        raise ValueError(f"cap_epochs: {what}={value!r}; it must be a whole number >= 0")
    return int(value)


def cap_epochs(
    weights: Mapping[str, float], sizes: Mapping[str, int], budget_tokens: int, max_epochs: float | None
) -> EpochCaps:
    """Split ``budget_tokens`` among the groups by ``weights``, no group taking more than
    ``max_epochs`` x its size; unpacks as ``(tokens_taken, epochs, effective_weights)``.

    This is UniMax's allocation (Chung et al. 2023, "UniMax: Fairer and More Effective Language
    Sampling for Large-Scale Multilingual Pretraining", Algorithm 1) generalized from a uniform
    split to any weights: a group whose share of the budget exceeds its cap takes its cap, and the
    excess goes to the other groups in proportion to their weights, until no share exceeds a cap.
    Equivalently, group g takes ``min(cap_g, lambda * w_g)`` with the one lambda that spends the
    budget. It is computed as UniMax does, in one pass: groups in increasing order of
    cap / weight (for uniform weights, of size, as in UniMax), each taking the smaller of its cap
    and its weight's share of what is left. Uniform weights give UniMax exactly; temperature
    weights give temperature sampling with an epoch cap.

    The arithmetic is exact (fractions); shares are then rounded to whole tokens by largest
    remainder (ties to the smaller group name), so the total is the budget exactly, and no group
    exceeds ``floor(max_epochs x size)``. When every group with a positive weight is capped the
    total falls short of the budget: ``shortfall_tokens`` says by how much.

    ``weights`` need not be normalized, and must name exactly the groups of ``sizes``; a group of
    weight 0 takes nothing. ``max_epochs=None`` (or infinity) means no cap. ``sizes`` and
    ``budget_tokens`` are in one unit (see the module's note on units)."""
    if set(weights) != set(sizes):
        extra = sorted(set(weights) - set(sizes))
        lacking = sorted(set(sizes) - set(weights))
        raise ValueError(
            f"cap_epochs: weights and sizes name different groups (weights only: {extra}, sizes only: "
            f"{lacking}); compute both from the same groups"
        )
    budget = _as_integer(budget_tokens, "budget_tokens")
    size_of = {name: _as_integer(sizes[name], f"sizes[{name!r}]") for name in sizes}
    for name, weight in weights.items():
        if not _is_number(weight) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"cap_epochs: group {name!r} has weight {weight!r}; weights are finite numbers >= 0")
    if sum(weights.values()) <= 0:
        raise ValueError("cap_epochs: every weight is 0; give at least one group a positive weight")
    unlimited = max_epochs is None or math.isinf(max_epochs)
    if not unlimited and (not _is_number(max_epochs) or not max_epochs > 0):
        raise ValueError(f"cap_epochs: max_epochs={max_epochs!r}; it must be > 0, or None for no cap")
    names = sorted(sizes)
    weight = {name: Fraction(weights[name]) for name in names}
    cap = {name: None if unlimited else Fraction(math.floor(Fraction(max_epochs) * size_of[name])) for name in names}

    share: dict[str, Fraction] = {name: Fraction(0) for name in names}
    capped: list[str] = []
    active = [name for name in names if weight[name] > 0]
    if not unlimited:
        active.sort(key=lambda name: (cap[name] / weight[name], name))
    left = Fraction(budget)
    left_weight = sum((weight[name] for name in active), Fraction(0))
    for i, name in enumerate(active):
        wanted = left * weight[name] / left_weight
        if cap[name] is not None and wanted >= cap[name]:
            share[name] = cap[name]
            capped.append(name)
            left -= cap[name]
            left_weight -= weight[name]
            continue
        # No later group is capped: they all have a larger cap / weight, and what is left per unit
        # of weight does not change.
        per_weight = left / left_weight
        for rest in active[i:]:
            share[rest] = per_weight * weight[rest]
        break

    taken = _largest_remainder(share, names)
    total = sum(taken.values())
    shortfall = budget - total
    return EpochCaps(
        tokens_taken=taken,
        epochs={name: taken[name] / size_of[name] if size_of[name] else 0.0 for name in names},
        effective_weights={name: taken[name] / total if total else 0.0 for name in names},
        target_weights={name: float(weight[name] / sum(weight.values())) for name in names},
        sizes=size_of,
        budget_tokens=budget,
        max_epochs=None if unlimited else float(max_epochs),
        capped=tuple(sorted(capped)),
        shortfall_tokens=shortfall,
        total_tokens=total,
    )


def _largest_remainder(share: Mapping[str, Fraction], names: Sequence[str]) -> dict[str, int]:
    """Whole numbers that sum to round(sum(share)): floors, then one more to the largest remainders."""
    floors = {name: math.floor(share[name]) for name in names}
    extra = round(sum(share.values())) - sum(floors.values())
    by_remainder = sorted(names, key=lambda name: (-(share[name] - floors[name]), name))
    for name in by_remainder[: max(extra, 0)]:
        floors[name] += 1
    return {name: int(floors[name]) for name in names}


# ---------------------------------------------------------------------------------------------
# Sampling plan


def sample_plan(docs: pl.DataFrame, tokens_taken: Mapping[str, int], seed: int) -> pl.DataFrame:
    """How many times each document is used: ``id, group, repeats`` (Int64), one row per input
    row, in the input's order (so it lines up with ``docs``); 0 means not taken.

    ``docs`` has columns ``id`` (unique), ``group`` and ``tokens``. Per group, with size S (its
    tokens) and target T (``tokens_taken[group]``; 0 for a group not listed):

    * ``T // S`` whole epochs: every document of the group is repeated that many times;
    * the remaining ``R = T - (T // S) * S`` tokens come from a random subset of whole documents:
      the group's documents in the order of :func:`seeded_id_hash` of (seed, id) (ties by id) are
      taken while the running total stays at or below R, and the first document that would pass R
      is taken too when that lands nearer to R than stopping before it (ties: taken). A group's
      total is thus within half of one document's tokens of its target.

    Documents are never cut: an upsampled document repeats whole. The plan depends on the ids,
    groups, tokens and seed only, never on the rows' order."""
    for column in ("id", "group", "tokens"):
        if column not in docs.columns:
            raise ValueError(f"sample_plan: the documents have no {column!r} column; they need id, group and tokens")
    _check_tokens(docs["tokens"], "sample_plan")
    for name, target in tokens_taken.items():
        if isinstance(target, bool) or not isinstance(target, numbers.Integral) or target < 0:
            raise ValueError(f"sample_plan: group {name!r} has target {target!r}; targets are whole numbers >= 0")
    frame = docs.select(pl.col("id").cast(pl.String), pl.col("group").cast(pl.String), pl.col("tokens").cast(pl.Int64))
    sizes = frame.group_by("group").agg(pl.col("tokens").sum().alias("size"))
    size_of = dict(zip(sizes["group"].to_list(), sizes["size"].to_list()))
    for name, target in tokens_taken.items():
        if target > 0 and not size_of.get(name):
            raise ValueError(
                f"sample_plan: group {name!r} should supply {target} tokens but has "
                f"{'no documents' if name not in size_of else 'only documents of 0 tokens'}; "
                "allocate with sizes from these same documents"
            )
    keys = seeded_id_hash(frame["id"], seed, SALT_SAMPLE)
    _check_unique_ids(frame["id"], keys, "sample_plan")
    order = _hash_order(frame["id"], keys)
    targets = pl.DataFrame(
        {"group": list(tokens_taken), "target": [int(v) for v in tokens_taken.values()]},
        schema={"group": pl.String, "target": pl.Int64},
    )
    # Rows in hash order: a running sum per group (over() keeps the order within each group).
    ordered = (
        frame[order]
        .join(targets, on="group", how="left", maintain_order="left")
        .join(sizes, on="group", how="left", maintain_order="left")
        .select(
            full=pl.col("target").fill_null(0) // pl.col("size").clip(lower_bound=1),
            target=pl.col("target").fill_null(0),
            size=pl.col("size"),
            tokens=pl.col("tokens"),
            after=pl.col("tokens").cum_sum().over("group"),
        )
        .with_columns(
            rest=pl.col("target") - pl.col("full") * pl.col("size"), before=pl.col("after") - pl.col("tokens")
        )
        .select(
            repeats=pl.col("full")
            + (
                (pl.col("before") < pl.col("rest"))
                & (
                    (pl.col("after") <= pl.col("rest"))
                    | (pl.col("after") - pl.col("rest") <= pl.col("rest") - pl.col("before"))
                )
            ).cast(pl.Int64)
        )
    )
    repeats = np.empty(frame.height, dtype=np.int64)
    repeats[order] = ordered["repeats"].to_numpy()
    return frame.select("id", "group").with_columns(pl.Series("repeats", repeats, dtype=pl.Int64))


def _check_unique_ids(ids: pl.Series, keys: np.ndarray, where: str) -> None:
    """Equal ids have equal hashes, so the ids are compared only when two hashes are equal."""
    ordered = np.sort(keys)
    if len(ordered) > 1 and (ordered[1:] == ordered[:-1]).any():
        repeated = ids.filter(ids.is_duplicated())
        if len(repeated):
            raise ValueError(f"{where}: id {repeated[0]!r} appears more than once; deduplicate ids first")


def _hash_order(ids: pl.Series, keys: np.ndarray) -> np.ndarray:
    """Row numbers in order of (hash, id): the id settles the order of two ids of equal hash."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if len(ordered) > 1 and (ordered[1:] == ordered[:-1]).any():
        order = (
            pl.DataFrame({"key": pl.Series(keys, dtype=pl.UInt64), "id": ids})
            .with_row_index("row")
            .sort(["key", "id"])["row"]
            .to_numpy()
            .astype(np.int64)
        )
    return order


# ---------------------------------------------------------------------------------------------
# Held-out validation split and decontamination


# The most of a group's documents that its minimum of held-out documents (``min_docs``) takes: the
# rest, three quarters at least, stays for training.
MIN_DOCS_SHARE = 0.25


def validation_counts(
    held: Mapping[str, int], sizes: Mapping[str, int | None], min_docs: int, max_docs: int | None
) -> dict[str, int]:
    """Per group of ``sizes`` (its documents; None: as many as its minimum needs), the documents it
    holds out: the ``held[group]`` the fraction holds out, raised to ``min_docs`` where the group has
    the documents for it (at most :data:`MIN_DOCS_SHARE` of them), capped at ``max_docs``."""
    counts = {}
    for group, size in sizes.items():
        floor = min_docs if size is None else min(min_docs, math.floor(size * MIN_DOCS_SHARE))
        count = max(held.get(group, 0), floor)
        counts[group] = count if max_docs is None else min(count, max_docs)
    return counts


# Fewer held-out tokens than this, every group together, is too little text to measure a model on
# (the trainer evaluates up to 65,536 tokens per group).
MIN_VALIDATION_TOKENS = 10_000


def validation_warning(groups: Mapping[str, Mapping[str, int]], min_docs: int) -> str | None:
    """One line when a validation split is too small to measure: fewer than
    :data:`MIN_VALIDATION_TOKENS` tokens in all, a group without held-out text, or a group under
    ``min_docs`` held-out documents; None when it is not. ``groups``: per group its ``documents``
    (the pool's, to split) and its ``validation_documents`` and ``validation_tokens``."""
    problems = []
    documents = sum(g["validation_documents"] for g in groups.values())
    tokens = sum(g["validation_tokens"] for g in groups.values())
    if tokens < MIN_VALIDATION_TOKENS:
        problems.append(
            f"{_counted(documents, 'document')} and {_counted(tokens, 'token')} in all "
            f"(under {MIN_VALIDATION_TOKENS:,})"
        )
    ordered = sorted(groups.items())
    none = [f"{name} ({_counted(g['documents'], 'document')})" for name, g in ordered if not g["validation_documents"]]
    if none:
        problems.append(f"no held-out text in {', '.join(none)}")
    few = [
        f"{name} ({g['validation_documents']:,} of {g['documents']:,})"
        for name, g in ordered
        if 0 < g["validation_documents"] < min_docs
    ]
    if few:
        problems.append(f"under {_counted(min_docs, 'held-out document')} in {', '.join(few)}")
    if not problems:
        return None
    return (
        f"the validation split is too small to measure: {'; '.join(problems)}; raise mix.validation_fraction "
        "or mix.validation_min_docs, or add documents"
    )


def _counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless it is one: ``1 document``, ``1,495 tokens``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _check_split_settings(fraction: float, max_docs: int | None, min_docs: int) -> None:
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"split_validation: fraction={fraction}; it is the held-out share of each group, in [0, 1)")
    for name, value in (("max_docs", max_docs), ("min_docs", min_docs)):
        if (value is not None or name == "min_docs") and (
            isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0
        ):
            shown = "a whole number >= 0, or None" if name == "max_docs" else "a whole number >= 0"
            raise ValueError(f"split_validation: {name}={value!r}; it must be {shown}")


def split_validation(
    docs: pl.DataFrame,
    fraction: float,
    max_docs: int | None,
    seed: int,
    group: str = "group",
    min_docs: int = 0,
    sizes: Mapping[str, int] | None = None,
) -> tuple[pl.Series, pl.Series]:
    """``(train ids, validation ids)``: a held-out validation set per group, made before sampling.

    A document goes to validation when ``u(seed, id) < fraction``, where u is
    :func:`seeded_id_uniform` with the validation salt (uniform in [0, 1), independent of the
    sampling order); so each group holds out about ``fraction`` of its documents (binomially: a
    group of n documents holds out fraction x n +- sqrt(fraction x n) or so), and a document's side
    depends on its id and the seed only. A group the fraction leaves with fewer than ``min_docs``
    held-out documents holds out ``min_docs`` where it has the documents (at most
    :data:`MIN_DOCS_SHARE` of them; with ``fraction`` 0 there is no split and no minimum), so a
    small group still has text to measure. ``max_docs`` caps a group's validation documents (None:
    no cap). Either way a group holds out its documents of smallest hash (so of smallest u; ties by
    id): the documents ``u < fraction`` selects, and the next ones past them for the minimum.

    ``sizes``: the documents of each group in the whole pool, when ``docs`` are a part of it (the
    mix stage's candidates); a group it lacks counts as large enough for its whole minimum, so an
    empty mapping gives every document that any pool holding ``docs`` could hold out. None: the
    rows of ``docs``.
    Both series are named ``id`` and keep the input's order; every id is in exactly one."""
    _check_split_settings(fraction, max_docs, min_docs)
    for column in ("id", group):
        if column not in docs.columns:
            raise ValueError(f"split_validation: the documents have no {column!r} column; assign groups first")
    ids = docs["id"].cast(pl.String).alias("id")
    keys = seeded_id_hash(ids, seed, SALT_VALIDATION)
    _check_unique_ids(ids, keys, "split_validation")
    held = _uniform(keys) < fraction
    if len(ids) and fraction > 0 and (max_docs is not None or min_docs > 0):
        frame = pl.DataFrame(
            {
                "group": docs[group].cast(pl.String).fill_null(""),
                "key": pl.Series(keys, dtype=pl.UInt64),
                "id": ids,
                "held": held,
            }
        ).with_row_index("row")
        found = frame.group_by("group").agg(pl.col("held").sum(), pl.len().alias("size"))
        in_pool = dict(zip(found["group"], found["size"])) if sizes is None else sizes
        counts = validation_counts(
            dict(zip(found["group"], found["held"])),
            {g: in_pool.get(g) for g in found["group"]},
            min_docs,
            max_docs,
        )
        rank = pl.int_range(pl.len()).over("group")
        limit = pl.col("group").replace_strict(counts, return_dtype=pl.Int64)
        chosen = frame.sort(["key", "id"]).filter(rank < limit)["row"].to_numpy()
        held = np.zeros(len(ids), dtype=bool)
        held[chosen] = True
    mask = pl.Series(held)
    return ids.filter(~mask), ids.filter(mask)


def drop_contaminated(
    train_ids: pl.Series | Sequence[str],
    pairs: pl.DataFrame | Iterable[tuple[str, str]],
    validation_ids: pl.Series | Sequence[str] | None = None,
) -> pl.Series:
    """The training ids that have no near duplicate in the validation set (input order kept).

    ``pairs`` are near-duplicate pairs ``(train id, validation id)`` (from the dedup machinery run
    over training and validation documents together): a DataFrame whose columns ``train_id`` and
    ``validation_id`` (or else its first two columns) hold them, or an iterable of 2-tuples. Every
    training id that appears as the train side of a pair is removed. When ``validation_ids`` is
    given, the pairs may come in either order (as dedup's edges do): a training id is removed when
    it is paired with a validation id on either side, and pairs of two training ids are ignored."""
    train = (
        pl.Series("id", train_ids, dtype=pl.String)
        if not isinstance(train_ids, pl.Series)
        else train_ids.cast(pl.String).alias("id")
    )
    if isinstance(pairs, pl.DataFrame):
        if {"train_id", "validation_id"} <= set(pairs.columns):
            left, right = pairs["train_id"], pairs["validation_id"]
        elif pairs.width >= 2:
            left, right = pairs.to_series(0), pairs.to_series(1)
        else:
            raise ValueError(
                f"drop_contaminated: pairs have columns {pairs.columns}; they need two (train_id, validation_id)"
            )
    else:
        listed = list(pairs)
        left = pl.Series([str(a) for a, _ in listed], dtype=pl.String)
        right = pl.Series([str(b) for _, b in listed], dtype=pl.String)
    left, right = left.cast(pl.String), right.cast(pl.String)
    if validation_ids is None:
        contaminated = left
    else:
        held = (
            pl.Series(validation_ids, dtype=pl.String)
            if not isinstance(validation_ids, pl.Series)
            else validation_ids.cast(pl.String)
        )
        edges = pl.DataFrame({"a": left, "b": right})
        contaminated = pl.concat(
            [
                edges.filter(pl.col("b").is_in(held.implode()))["a"],
                edges.filter(pl.col("a").is_in(held.implode()))["b"],
            ]
        )
    return train.filter(~train.is_in(contaminated.unique().implode()))


# ---------------------------------------------------------------------------------------------
# Report


def mixture_report(docs: pl.DataFrame, caps: EpochCaps, plan: pl.DataFrame | None = None) -> dict:
    """The mixture for the run manifest: totals and, per group (sorted by name), documents and
    tokens available, tokens allocated by :func:`cap_epochs`, tokens and documents taken, epochs,
    effective weight (share of the tokens taken), target weight (the weights given) and whether
    the group is capped.

    ``docs`` (columns ``group``, ``tokens``; and ``id`` with a plan) are the documents the sizes
    were computed from: their tokens per group must equal ``caps.sizes``. With ``plan`` (from
    :func:`sample_plan`) the tokens and documents taken are counted from it; without, tokens taken
    are the allocation and documents taken are null."""
    available = docs.group_by("group").agg(documents=pl.len(), tokens=pl.col("tokens").cast(pl.Int64).sum())
    docs_of = dict(zip(available["group"].to_list(), available["documents"].to_list()))
    tokens_of = dict(zip(available["group"].to_list(), available["tokens"].to_list()))
    for name in sorted(set(tokens_of) | set(caps.sizes)):
        if tokens_of.get(name, 0) != caps.sizes.get(name, 0):
            raise ValueError(
                f"mixture_report: group {name!r} has {tokens_of.get(name, 0)} tokens in the documents "
                f"but {caps.sizes.get(name, 0)} in the allocation; report on the documents the sizes "
                "came from"
            )
    taken_tokens: dict[str, int] | None = None
    taken_docs: dict[str, int] | None = None
    if plan is not None:
        if plan.height == docs.height and plan["id"].equals(docs["id"]):  # rows line up: no join needed
            used = pl.DataFrame({"tokens": docs["tokens"], "group": plan["group"], "repeats": plan["repeats"]})
        else:
            used = docs.select("id", "tokens").join(plan.select("id", "group", "repeats"), on="id", how="inner")
        used = used.group_by("group").agg(
            tokens=(pl.col("tokens").cast(pl.Int64) * pl.col("repeats")).sum(), documents=(pl.col("repeats") > 0).sum()
        )
        taken_tokens = {name: 0 for name in caps.sizes}
        taken_docs = {name: 0 for name in caps.sizes}
        for name, tokens, documents in used.iter_rows():
            taken_tokens[name] = int(tokens)
            taken_docs[name] = int(documents)
    return report_from_counts(docs_of, caps, taken_tokens, taken_docs)


def report_from_counts(
    documents: Mapping[str, int],
    caps: EpochCaps,
    taken_tokens: Mapping[str, int] | None = None,
    taken_docs: Mapping[str, int] | None = None,
) -> dict:
    """:func:`mixture_report` from counts: ``documents`` available per group (their tokens are
    ``caps.sizes``), and the tokens and documents taken per group (None: the allocation, and
    unknown documents). A stage that counts shard by shard calls it with the summed counts."""
    docs_of = documents
    if taken_tokens is None:
        taken_tokens = dict(caps.tokens_taken)
    taken_docs = {name: (taken_docs.get(name, 0) if taken_docs is not None else None) for name in caps.sizes}
    taken_tokens = {name: int(taken_tokens.get(name, 0)) for name in caps.sizes}
    total_taken = sum(taken_tokens.values())
    groups = {}
    for name in sorted(caps.sizes):
        size = caps.sizes[name]
        groups[name] = {
            "documents_available": int(docs_of.get(name, 0)),
            "tokens_available": int(size),
            "tokens_allocated": int(caps.tokens_taken[name]),
            "tokens_taken": int(taken_tokens[name]),
            "documents_taken": taken_docs[name],
            "epochs": taken_tokens[name] / size if size else 0.0,
            "effective_weight": taken_tokens[name] / total_taken if total_taken else 0.0,
            "target_weight": caps.target_weights[name],
            "capped": name in caps.capped,
        }
    return {
        "budget_tokens": caps.budget_tokens,
        "max_epochs": caps.max_epochs,
        "tokens_allocated": caps.total_tokens,
        "tokens_taken": total_taken,
        "shortfall_tokens": caps.shortfall_tokens,
        "groups": groups,
    }
