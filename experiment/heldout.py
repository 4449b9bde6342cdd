"""The held-out sets (the user's files, the one frame of :data:`HELDOUT_COLUMNS`), their evaluation
folder and provenance, the tokenizer's sample of the raw pool, what a variant trained on (tokens,
epochs, kinds, canary views), and the texts no training document may share a token window with."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from experiment.config import EvalSetConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.hashing import seeded_id_hash

SALT_TOKENIZER = 0x544F4B53  # "TOKS"
# The held-out texts' columns (the demo corpus's heldout/texts.parquet has them too).
HELDOUT_COLUMNS = {
    "id": pl.String,
    "text": pl.String,
    "set": pl.String,
    "group": pl.String,
    "lang": pl.String,
    "kind": pl.String,
    "clean": pl.Boolean,
}
EVAL_MIXTURE = "heldout"  # the trainer's name for the evaluation folder: metrics heldout_bpb/<set>/<group>


def read_eval_set(spec: EvalSetConfig) -> pl.DataFrame:
    """A user's held-out file as :data:`HELDOUT_COLUMNS` rows (set = its name, group = its group
    column or the set's name, kind "user"); rows without text are left out."""
    path = Path(spec.path)
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_ndjson(path)
    except Exception as error:  # noqa: BLE001 - any reader error is the file's
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"eval_sets {spec.name}: {str(path)!r} cannot be read ({first}); give Parquet or JSON lines"
        ) from None
    for key, column in (
        ("text_field", spec.text_field),
        ("group_field", spec.group_field),
        ("id_field", spec.id_field),
    ):
        if column is not None and column not in frame.columns:
            raise ConfigError(
                f"eval_sets {spec.name}: {str(path)!r} has no {column!r} column (columns: "
                f"{', '.join(frame.columns)}); set {key} to one of them"
            )
    rows = pl.int_range(pl.len()).cast(pl.String)
    texts = frame.select(
        id=pl.col(spec.id_field).cast(pl.String) if spec.id_field else pl.lit(f"{spec.name}:") + rows,
        text=pl.col(spec.text_field).cast(pl.String),
        set=pl.lit(spec.name),
        group=pl.col(spec.group_field).cast(pl.String).fill_null(spec.name) if spec.group_field else pl.lit(spec.name),
        lang=pl.lit(None, dtype=pl.String),
        kind=pl.lit("user"),
        clean=pl.lit(spec.clean),
    )
    texts = texts.filter(pl.col("text").is_not_null() & (pl.col("text").str.strip_chars() != ""))
    if texts.height == 0:
        raise ConfigError(f"eval_sets {spec.name}: {str(path)!r} holds no text; point it at a file with texts")
    return texts


def heldout_texts(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The held-out sets as one frame of :data:`HELDOUT_COLUMNS`, sorted by set, group, id; ids
    must be unique across sets (an id names one text in the exclusion and in the evaluation)."""
    texts = pl.concat([f.select([pl.col(c).cast(t) for c, t in HELDOUT_COLUMNS.items()]) for f in frames])
    repeated = texts.filter(pl.col("id").is_duplicated())
    if repeated.height:
        raise ConfigError(
            f"held-out sets: the id {repeated['id'][0]!r} names more than one text (sets "
            f"{', '.join(sorted(set(repeated['set'])))}); give every held-out text its own id"
        )
    return texts.sort(["set", "group", "id"])


def eval_group(texts: pl.DataFrame) -> pl.Expr:
    """The evaluation group of a held-out text: ``<set>/<group>``."""
    return pl.concat_str([pl.col("set"), pl.col("group")], separator="/")


def write_eval_folder(texts: pl.DataFrame, tokenizer_path: Path, folder: Path, seed: int) -> dict:
    """Tokenize the held-out texts into ``folder`` in the mixture format (pipeline.formats.mixture: the
    manifest, the tokenizer, ``validation/<set>+<group>-0000.arrow``; no training side): one group
    ``<set>/<group>`` each, documents in id order, so the same texts and tokenizer give the same
    bytes. Returns the manifest (its groups say which sets are clean)."""
    from pipeline.formats.mixture import (
        MANIFEST_FILE,
        TOKENIZER_FILE,
        manifest,
        shard_entry,
        shard_file,
        tokenizer_entry,
    )
    from pipeline.formats.tokens import load_tokenizer
    from pipeline.io.writer import write_json
    from pipeline.tokenizer import write_token_shard

    tokenizer = load_tokenizer(tokenizer_path)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOKENIZER_FILE).write_bytes(Path(tokenizer_path).read_bytes())
    grouped = texts.with_columns(eval_group=eval_group(texts)).sort(["eval_group", "id"])
    entries, groups = [], {}
    for (group,), rows in grouped.group_by(["eval_group"], maintain_order=True):
        file = shard_file("validation", group, 0)
        entry = write_token_shard(zip(rows["id"].to_list(), rows["text"].to_list()), tokenizer, folder / file, group)
        size = int(rows["text"].str.len_bytes().sum())
        entries.append(shard_entry(file, group, entry["documents"], entry["tokens"], size, entry["sha256"]))
        groups[group] = {
            "validation_documents": entry["documents"],
            "validation_tokens": entry["tokens"],
            "validation_bytes": size,
            "set": rows["set"][0],
            "clean": bool(rows["clean"].all()),
        }
    found = manifest(
        EVAL_MIXTURE,
        seed,
        tokenizer_entry(tokenizer, folder / TOKENIZER_FILE),
        dict(sorted(groups.items())),
        [],
        entries,
    )
    write_json(found, folder / MANIFEST_FILE)
    return found


def heldout_provenance(texts: pl.DataFrame, origins: dict[str, dict], manifest: dict) -> dict:
    """results.json's ``heldout``: per set its origin (file, sha256, how it was chosen), whether it
    is clean, documents and bytes per group, and the evaluation folder's shards (sha256)."""
    sets = {}
    stats = (
        texts.with_columns(bytes=pl.col("text").str.len_bytes())
        .group_by(["set", "group"])
        .agg(documents=pl.len(), bytes=pl.col("bytes").sum(), clean=pl.col("clean").all())
        .sort(["set", "group"])
    )
    for (name,), rows in stats.group_by(["set"], maintain_order=True):
        sets[name] = {
            **origins.get(name, {}),
            "clean": bool(rows["clean"].all()),
            "documents": int(rows["documents"].sum()),
            "bytes": int(rows["bytes"].sum()),
            "groups": {
                g: {"documents": int(d), "bytes": int(b)}
                for g, d, b in rows.select("group", "documents", "bytes").iter_rows()
            },
        }
    clean = sorted(n for n, s in sets.items() if s["clean"])
    return {
        "sets": sets,
        "clean_sets": clean,
        "headline": f"mean of the clean sets' bits per byte ({', '.join(clean)})",
        "documents": texts.height,
        "bytes": int(texts["text"].str.len_bytes().sum()),
        "shards": {e["group"]: e["sha256"] for e in manifest["validation"]},
        "tokenizer_sha256": manifest["tokenizer"]["sha256"],
    }


def tokenizer_sample(docs: pl.DataFrame, heldout: pl.DataFrame, sample_docs: int, seed: int) -> pl.DataFrame:
    """The tokenizer's training documents: a seeded sample of the raw pool (``docs``: the source
    stage's documents), none of them a held-out text (same id or same text). The sample depends on
    the ids and the seed, not on the rows' order, and favours no variant: none has curated it."""
    pool = docs.filter(~pl.col("id").is_in(heldout["id"].implode()) & ~pl.col("text").is_in(heldout["text"].implode()))
    keys = seeded_id_hash(pool["id"], seed, SALT_TOKENIZER)
    return (
        pool.with_columns(key=pl.Series(keys, dtype=pl.UInt64))
        .sort(["key", "id"])
        .head(sample_docs)
        .drop("key")
        .sort("id")
    )


# ---------------------------------------------------------------------------------------------
# What a variant trained on


def trained_on(documents: pl.DataFrame, plan: pl.DataFrame, labels: pl.DataFrame | None = None) -> dict:
    """Training tokens and bytes of a mixture, bytes per token, epochs per group, and (with the demo
    corpus's ``labels``: ``id`` = ``<source>/<key>``, ``kind``) each kind's share of the tokens.

    ``documents`` is the mix stage's ``documents.parquet`` (id, group, tokens, bytes), ``plan`` the
    mixture's ``plan.parquet`` (id, repeats): a document trained on ``repeats`` times counts so often."""
    used = (
        plan.select("id", "repeats")
        .join(documents.select("id", "group", "tokens", "bytes"), on="id", how="inner")
        .with_columns(
            trained_tokens=pl.col("tokens") * pl.col("repeats"), trained_bytes=pl.col("bytes") * pl.col("repeats")
        )
    )
    tokens, size = int(used["trained_tokens"].sum()), int(used["trained_bytes"].sum())
    pool = documents.filter(pl.col("split") == "train") if "split" in documents.columns else documents
    available = dict(pool.group_by("group").agg(pl.col("tokens").sum()).iter_rows())
    epochs = {
        g: int(t) / available[g] if available.get(g) else 0.0
        for g, t in used.group_by("group").agg(pl.col("trained_tokens").sum()).sort("group").iter_rows()
    }
    result = {
        "tokens": tokens,
        "bytes": size,
        "bytes_per_token": size / tokens if tokens else None,
        "epochs": epochs,
        "documents": int((used["repeats"] > 0).sum()),
    }
    if labels is not None:
        kinds = (
            used.join(labels.select("id", "kind"), on="id", how="left")
            .with_columns(pl.col("kind").fill_null("unlabelled"))
            .group_by("kind")
            .agg(tokens=pl.col("trained_tokens").sum(), bytes=pl.col("trained_bytes").sum())
            .sort("kind")
        )
        result["kinds"] = {
            k: {"tokens": int(t), "bytes": int(b), "share": int(t) / tokens if tokens else 0.0}
            for k, t, b in kinds.iter_rows()
        }
    return result


TASK_SET = "task"  # the set name of the downstream task's texts in the protected texts
EVAL_TASKS_SET = "eval_tasks"  # ... and of the user's multiple-choice items


def protected_texts(heldout: pl.DataFrame, task: pl.DataFrame, items: pl.DataFrame | None = None) -> pl.DataFrame:
    """``id, text, set`` of the texts no training document may share a token window with: the
    clean held-out sets, the task's texts (ids ``task/<id>``) and the user's multiple-choice
    ``items`` (each context followed by its right answer, ids ``eval_tasks/<id>``; the built-in
    tasks are made of the held-out and task texts). Every pool is decontaminated against them
    (``mix.exclude``) and every mixture is checked against them.

    Junk sets are not among them: they are kept out of the pools by lineage (the corpus never
    writes them or their copies into a pool), while the templates they were made from are the
    pools' own junk; excluding everything that shares a template window with them would take most
    junk out of every variant and hide what curation removes. Their overlap is checked and
    reported apart (:func:`contamination_total` counts only protected sets)."""
    clean = heldout.filter(pl.col("clean")).select("id", "text", "set")
    tasks = task.select(
        id=pl.lit(f"{TASK_SET}/") + pl.col("id").cast(pl.String), text=pl.col("text"), set=pl.lit(TASK_SET)
    )
    frames = [clean, tasks]
    if items is not None and items.height:
        frames.append(
            items.select(
                id=pl.lit(f"{EVAL_TASKS_SET}/") + pl.col("id"),
                text=pl.col("context") + pl.col("choices").list.get(pl.col("gold")),
                set=pl.lit(EVAL_TASKS_SET),
            )
        )
    return pl.concat(frames).sort(["set", "id"])


def contamination_total(check: dict) -> int:
    """Training documents that share a window with protected text, in a check's result
    (:func:`pipeline.decontaminate.check_contamination`)."""
    return int(check.get("contaminated_documents", 0))


def canary_views(canaries: pl.DataFrame, plan: pl.DataFrame) -> dict[str, dict]:
    """How often a mixture (its ``plan``: id, repeats) trains on the canaries, per number of
    occurrences in the raw pool: the mean number of times a canary is trained on, and the share
    of canaries trained on at least once. ``canaries`` needs ``id``, ``occurrences``, ``pool_ids``."""
    planted = canaries.filter(pl.col("occurrences") > 0).select("id", "occurrences", "pool_ids")
    views = (
        planted.explode("pool_ids")
        .join(plan.select(pool_ids="id", repeats="repeats"), on="pool_ids", how="left")
        .group_by("id", "occurrences")
        .agg(views=pl.col("repeats").fill_null(0).sum())
    )
    return {
        str(n): {"canaries": int(count), "mean_views": float(mean), "seen_share": float(seen)}
        for n, count, mean, seen in views.group_by("occurrences")
        .agg(pl.len(), pl.col("views").mean().alias("mean"), (pl.col("views") > 0).mean().alias("seen"))
        .sort("occurrences")
        .iter_rows()
    }
