"""Tokenized-shard writing against bare ``tokenizers`` ``encode_batch`` on the same texts.

Texts: the demo corpus's news articles (``demo``, built once under
``.cache/demo-corpus``), cycled to :data:`DOCS` documents. A byte-level BPE of 8,192 tokens is
trained once on them (``.cache/bench-tokenize/tokenizer.json``). Then, alternating,
:data:`REPEATS` times each, on all cores (the tokenizers library's own threads):

* bare: ``tokenizer.encode_batch`` over the texts in batches of 1,024, ids discarded;
* ours: :func:`pipeline.formats.tokens.write_token_shard`, which encodes, appends the end-of-document
  token, and writes the memory-mappable Arrow IPC shard.

The best run of each counts. The last line printed is one JSON object; the headline is
``speed_ratio_vs_encode_batch`` (ours over bare; the target is at least 0.9).
"""

from __future__ import annotations

import gzip
import json
import time
from itertools import cycle, islice
from pathlib import Path

import orjson

from demo.corpus import build_demo_corpus
from pipeline.formats.tokens import load_tokenizer
from pipeline.tokenizer import train_tokenizer, write_token_shard

DOCS = 20_000
REPEATS = 3
BATCH = 1024
ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / ".cache" / "demo-corpus"
WORK = ROOT / ".cache" / "bench-tokenize"


def news_texts() -> list[str]:
    build_demo_corpus(CORPUS, docs=20_000, seed=0)
    texts = []
    for path in sorted((CORPUS / "news").glob("*.jsonl.gz")):
        for line in gzip.open(path):
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("text"), str) and record["text"].strip():
                texts.append(record["text"])
    return list(islice(cycle(texts), DOCS))


def bare(tokenizer, texts: list[str]) -> float:
    start = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        tokenizer.encode_batch(texts[i : i + BATCH], add_special_tokens=False)
    return time.perf_counter() - start


def ours(tokenizer, texts: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    entry = write_token_shard(texts, tokenizer, WORK / "shard.arrow", group="news", batch_size=BATCH)
    return time.perf_counter() - start, entry


def main() -> None:
    texts = news_texts()
    WORK.mkdir(parents=True, exist_ok=True)
    tokenizer_path = WORK / "tokenizer.json"
    if not tokenizer_path.exists():
        train_tokenizer(texts[:5000], tokenizer_path, kind="bpe", vocab_size=8192)
    tokenizer = load_tokenizer(tokenizer_path)
    megabytes = sum(len(t.encode()) for t in texts) / 1e6

    bare_times, our_times, entry = [], [], {}
    for _ in range(REPEATS):
        bare_times.append(bare(tokenizer, texts))
        seconds, entry = ours(tokenizer, texts)
        our_times.append(seconds)
    best_bare, best_ours = min(bare_times), min(our_times)
    print(f"{len(texts)} docs, {megabytes:.1f} MB, {entry['tokens']} tokens")
    print(f"bare encode_batch: best {best_bare:.2f} s ({megabytes / best_bare:.2f} MB/s)")
    print(f"write_token_shard: best {best_ours:.2f} s ({megabytes / best_ours:.2f} MB/s)")
    print(
        json.dumps(
            {
                "docs": len(texts),
                "input_mb": round(megabytes, 3),
                "tokens": entry["tokens"],
                "repeats": REPEATS,
                "bare_seconds": round(best_bare, 4),
                "ours_seconds": round(best_ours, 4),
                "bare_mb_per_s": round(megabytes / best_bare, 3),
                "ours_mb_per_s": round(megabytes / best_ours, 3),
                "speed_ratio_vs_encode_batch": round(best_bare / best_ours, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
