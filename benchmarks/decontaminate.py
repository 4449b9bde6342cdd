"""Token-window decontamination: its cost, and what it catches that near-duplicate search misses.

Input: the demo corpus' news (``demo``, built into a temporary folder; or
``--corpus DIR`` for one already built), whose ``labels.parquet`` records each copy's original and
edit rate. A seeded sample of :data:`HELD` clean original articles that have copies in the corpus
plays the held-out set; the pool is every other document of the news source (junk included), so
every copy of a held-out article is a leak the exclusion should catch (ground truth by lineage).
Other documents that share a 13-token passage with a held-out article count against precision here,
though some are real overlaps lineage does not record.

Measured, on one byte-level BPE tokenizer trained on the pool (8,192 tokens), the pool already
tokenized (as the mix stage finds it):

* the window index (:meth:`WindowIndex.from_texts`: encode the held-out texts, hash, sort);
* the window lookup over the pool's tokens (:meth:`WindowIndex.hits` + :func:`window_containment`),
  in seconds per million pool tokens;
* :func:`check_contamination` on a mixture folder holding the pool as one training shard;
* the peer: today's rule, MinHash + exact Jaccard at 0.8 (:class:`ReferenceIndex`), on the same
  texts.

Accuracy against lineage: precision and recall (documents) of each rule, and of both together.
The last line is one JSON object; ``time_ratio_windows_vs_minhash`` is the headline.

Usage::

    python benchmarks/decontaminate.py [--docs 20000] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from demo.corpus import build_demo_corpus  # noqa: E402
from pipeline.decontaminate import WindowIndex, check_contamination, window_containment  # noqa: E402
from pipeline.dedup.contamination import ReferenceIndex  # noqa: E402
from pipeline.dedup.minhash import MinHashParams  # noqa: E402
from pipeline.formats.tokens import load_tokenizer, read_token_shard, tokenizer_sha256  # noqa: E402
from pipeline.tokenizer import train_tokenizer, write_token_shard  # noqa: E402

HELD = 150
SEED = 0


def news(corpus: Path) -> pl.DataFrame:
    """``id, text, original, edit_rate`` of every news article of the corpus (malformed lines left out)."""
    labels = pl.read_parquet(corpus / "labels.parquet").filter(pl.col("source") == "news")
    rows = []
    for path in sorted((corpus / "news").glob("*.jsonl.gz")):
        rel = path.relative_to(corpus).as_posix()
        for line_no, line in enumerate(gzip.open(path, "rb"), start=1):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("text"), str) and record["text"].strip():
                rows.append((rel, line_no, record["text"]))
    texts = pl.DataFrame(rows, schema={"file": pl.String, "line": pl.Int64, "text": pl.String}, orient="row")
    return texts.join(labels, on=["file", "line"], how="inner").select(
        pl.col("key").alias("id"), "text", "original", "edit_rate", "kind"
    )


def scores(found: set[str], truth: set[str]) -> dict:
    hit = len(found & truth)
    return {
        "found": len(found),
        "true": hit,
        "precision": round(hit / len(found), 4) if found else 1.0,
        "recall": round(hit / len(truth), 4) if truth else 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--corpus", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        corpus = args.corpus or scratch / "corpus"
        started = time.perf_counter()
        if args.corpus is None:
            build_demo_corpus(corpus, docs=args.docs, seed=SEED)
        built = time.perf_counter() - started
        articles = news(corpus)
        copied = articles.filter(pl.col("original").is_not_null())["original"].unique().sort()
        originals = articles.filter(
            pl.col("original").is_null() & (pl.col("kind") == "clean") & pl.col("id").is_in(copied.implode())
        )
        held_ids = sorted(random.Random(SEED).sample(originals["id"].to_list(), min(HELD, originals.height)))
        held = articles.filter(pl.col("id").is_in(held_ids)).unique("id").sort("id")
        pool = articles.filter(~pl.col("id").is_in(held_ids)).unique("id", keep="first", maintain_order=True)
        truth = set(pool.filter(pl.col("original").is_in(held_ids))["id"].to_list())

        tokenizer_path = train_tokenizer(pool["text"].head(5000).to_list(), scratch / "tokenizer.json", vocab_size=8192)
        tokenizer = load_tokenizer(tokenizer_path)
        mixture = scratch / "mixture"
        shard = mixture / "train" / "news-0000.arrow"
        shard.parent.mkdir(parents=True)
        entry = write_token_shard(zip(pool["id"].to_list(), pool["text"].to_list()), tokenizer, shard, "news")
        (mixture / "tokenizer.json").write_bytes(Path(tokenizer_path).read_bytes())
        (mixture / "manifest.json").write_text(
            json.dumps(
                {
                    "format": "curate.mixture/1",
                    "tokenizer": {"file": "tokenizer.json", "sha256": tokenizer_sha256(tokenizer)},
                    "train": [
                        {
                            "file": "train/news-0000.arrow",
                            "group": "news",
                            "documents": entry["documents"],
                            "tokens": entry["tokens"],
                            "sha256": entry["sha256"],
                        }
                    ],
                    "validation": [],
                }
            )
        )
        tokens, offsets = read_token_shard(shard)
        pool_tokens = int(offsets["doc_tokens"].sum()) - offsets.height

        t0 = time.perf_counter()
        index = WindowIndex.from_texts(held["id"], held["text"], tokenizer)
        t_index = time.perf_counter() - t0
        t0 = time.perf_counter()
        hits = index.hits(tokens, offsets["doc_start"].to_numpy(), offsets["doc_tokens"].to_numpy() - 1)
        hits = hits.with_columns(id=offsets["doc_id"].gather(hits["doc"].to_numpy()))
        found, summary, _ = window_containment(hits, index)
        t_lookup = time.perf_counter() - t0
        window_found = set(found.filter(pl.col("windows") > 0)["id"].to_list())

        t0 = time.perf_counter()
        checked = check_contamination(mixture, held.select("id", "text"), tokenizer)
        t_check = time.perf_counter() - t0

        t0 = time.perf_counter()
        minhash = ReferenceIndex(held["id"], held["text"], MinHashParams(threshold=0.8))
        near = minhash.matches(pool["id"], pool["text"])
        t_minhash = time.perf_counter() - t0
        near_found = set(near["id"].to_list())

        copies = pool.filter(pl.col("id").is_in(list(truth)))
        by_rate = (
            copies.with_columns(
                window=pl.col("id").is_in(list(window_found)), near=pl.col("id").is_in(list(near_found))
            )
            .group_by(pl.col("edit_rate").round(3))
            .agg(copies=pl.len(), window=pl.col("window").sum(), near=pl.col("near").sum())
            .sort("edit_rate")
        )
        print(
            f"corpus: {args.docs} documents built in {built:.1f} s; news {articles.height}, held out "
            f"{held.height} originals with copies, pool {pool.height} documents, {pool_tokens:,} tokens; "
            f"{len(truth)} pool documents copy a held-out article"
        )
        print(by_rate)
        beyond = (
            pool.filter(pl.col("id").is_in(list(window_found - truth)))
            .group_by("kind")
            .len()
            .sort("len", descending=True)
        )
        print("removed by windows beyond lineage, by kind:", dict(beyond.iter_rows()))
        million = pool_tokens / 1e6
        result = {
            "pool_documents": pool.height,
            "pool_tokens": pool_tokens,
            "held_out_texts": held.height,
            "held_out_windows": len(index),
            "lineage_copies_in_pool": len(truth),
            "window_index_seconds": round(t_index, 3),
            "window_lookup_seconds_per_million_tokens": round(t_lookup / million, 3),
            "check_seconds_per_million_tokens": round(t_check / million, 3),
            "minhash_seconds_per_million_tokens": round(t_minhash / million, 3),
            "time_ratio_windows_vs_minhash": round((t_index + t_lookup) / t_minhash, 3),
            "window_common_windows": summary["common_windows"],
            "window_copies": summary["copies"],
            "window_common_window_documents": summary["common_window_documents"],
            "check_contaminated_documents": checked["contaminated_documents"],
            "window_removed": len(window_found),
            "minhash_removed": len(near_found),
            "window_precision": scores(window_found, truth)["precision"],
            "window_recall": scores(window_found, truth)["recall"],
            "minhash_precision": scores(near_found, truth)["precision"],
            "minhash_recall": scores(near_found, truth)["recall"],
            "both_recall": scores(window_found | near_found, truth)["recall"],
            "by_edit_rate": by_rate.to_dicts(),
            "window_beyond_lineage_by_kind": dict(beyond.iter_rows()),
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
