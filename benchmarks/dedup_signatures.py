"""MinHash signatures per second on one core: ours against datasketch ``MinHash.bulk``.

The input is the demo corpus' news articles (``demo``, built once under
``.cache/demo-corpus``), repeated to :data:`DOCS` documents (about 2 KB each): repeats cost the
same as new text, since every document is processed on its own.

* ours: :func:`pipeline.dedup.lsh.signature_batch` from the raw texts, so everything a signature
  file holds: normalization, word hashes, exact hash, 64-bit shingle hashes, sorted shingle sets,
  128 signatures (datasketch's affine32 scheme, over the hashes' 32-bit low halves) and the LSH
  band keys. Twice: with the default
  polynomial shingle hash, and with datasketch's SHA-1 shingle hash.
* datasketch: ``MinHash.bulk(shingles, num_perm=128, seed=1)`` (its defaults: affine32, SHA-1)
  over the same shingles (our words, joined by spaces, UTF-8), built beforehand and not timed.

Both run in this process with one thread, the prebuilt shingles frozen out of the garbage
collector's sight (``gc.freeze``) (polars and BLAS pinned to one); best of
:data:`REPEATS`, alternating. The SHA-1 run's signatures are checked equal to datasketch's. The
last line printed is one JSON object; the headline is ``speed_ratio_vs_datasketch``.

Usage::

    python benchmarks/dedup_signatures.py [DOCS]
"""

from __future__ import annotations

import os

for _var in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import gc  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from datasketch import MinHash  # noqa: E402

from demo.corpus import build_demo_corpus  # noqa: E402
from pipeline.dedup.lsh import signature_batch  # noqa: E402
from pipeline.dedup.minhash import (  # noqa: E402
    MinHashParams,
    band_keys,
    minhash_signatures,
    polynomial_shingle_hashes,
    sha1_shingle_hashes,
    shingle_sets,
    signature_hashes,
)
from pipeline.dedup.normalize import combine_word_hashes, prepare_texts, words  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = 20_000
REPEATS = 3


def news_texts(docs: int) -> list[str]:
    corpus = ROOT / ".cache" / "demo-corpus"
    build_demo_corpus(corpus, docs=20_000, seed=0)
    texts = []
    for path in sorted((corpus / "news").glob("*.jsonl.gz")):
        for line in gzip.open(path, "rb"):
            try:
                text = json.loads(line)["text"]
            except (ValueError, KeyError, TypeError):
                continue  # the corpus' deliberately malformed lines
            if isinstance(text, str):
                texts.append(text)
    return (texts * (docs // len(texts) + 1))[:docs]


def best(run, repeats: int) -> tuple[float, float, object]:
    """Best wall time and best CPU time (this process' user + system time: what the work cost,
    whatever else the machine was running) of ``repeats`` runs, and the last output."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        out = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), out


def main() -> None:
    docs = int(sys.argv[1]) if len(sys.argv) > 1 else DOCS
    texts = pa.array(news_texts(docs), pa.large_string())
    params = MinHashParams()
    bands, rows = params.lsh
    found = words(texts)
    doc_words = found.strings()
    shingles = [[" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))] if w else [] for w in doc_words]

    # The prebuilt shingles are millions of Python objects: keep the garbage collector from
    # walking them again and again while either side is timed.
    gc.collect()
    gc.freeze()
    runs = {
        "ours": lambda: signature_batch(texts, params),
        "ours_sha1": lambda: signature_batch(texts, MinHashParams(shingle_hash="sha1")),
        "datasketch": lambda: MinHash.bulk(shingles, num_perm=128, seed=1),
    }
    wall = dict.fromkeys(runs, float("inf"))
    cpu = dict.fromkeys(runs, float("inf"))
    for _ in range(REPEATS):  # alternate, keep the best of each
        for name, run in runs.items():
            w, c, _ = best(run, 1)
            wall[name], cpu[name] = min(wall[name], w), min(cpu[name], c)

    # Where our time goes (default path), step by step (CPU seconds), on the whole batch at once
    # (signature_batch works DOCS_PER_BATCH documents at a time, which is somewhat faster).
    steps = {}
    steps["normalize"], prepared = best(lambda: prepare_texts(texts), REPEATS)[1:]
    steps["word_hashes"], found = best(lambda: words(texts, prepared), REPEATS)[1:]
    steps["exact_hash"], _ = best(lambda: combine_word_hashes(found.hashes, found.doc_offsets), REPEATS)[1:]
    steps["shingle_hashes"], (hashes, offsets) = best(
        lambda: polynomial_shingle_hashes(found.hashes, found.doc_offsets, params.ngram, wide=True), REPEATS
    )[1:]
    steps["shingle_sets"], (sets, set_offsets) = best(lambda: shingle_sets(hashes, offsets), REPEATS)[1:]
    low = signature_hashes(sets)
    steps["permutations"], signatures = best(lambda: minhash_signatures(low, set_offsets, 128, 1), REPEATS)[1:]
    steps["band_keys"], _ = best(lambda: band_keys(signatures, bands, rows), REPEATS)[1:]
    steps["sha1_shingle_hashes"], (sha1_hashes, sha1_offsets) = best(lambda: sha1_shingle_hashes(found, 5), 1)[1:]

    check = 200
    ours_check = minhash_signatures(sha1_hashes, sha1_offsets, 128, 1)[:check]
    peer_check = np.array([m.hashvalues for m in MinHash.bulk(shingles[:check], num_perm=128, seed=1)])
    equal = bool(np.array_equal(ours_check, peer_check))

    characters = sum(len(t) for t in texts.to_pylist()) / docs
    print(f"{docs} documents, {len(hashes) / docs:.0f} shingles each, {characters:.0f} characters each")
    for label, times in (("wall", wall), ("CPU", cpu)):
        print(
            f"{label:>4} time, docs/s: datasketch MinHash.bulk (shingles prebuilt) {docs / times['datasketch']:7.0f} | "
            f"ours from raw text: polynomial {docs / times['ours']:7.0f} "
            f"({times['datasketch'] / times['ours']:.1f}x), sha1 {docs / times['ours_sha1']:7.0f} "
            f"({times['datasketch'] / times['ours_sha1']:.1f}x)"
        )
    print("our steps (CPU s): " + "  ".join(f"{k} {v:.3f}" for k, v in steps.items()))
    print(f"sha1 signatures equal to datasketch's on the first {check} documents: {equal}")
    print(
        json.dumps(
            {
                "docs": docs,
                "num_perm": 128,
                "bands": bands,
                "rows": rows,
                "ours_docs_per_s": round(docs / wall["ours"]),
                "ours_sha1_docs_per_s": round(docs / wall["ours_sha1"]),
                "datasketch_docs_per_s": round(docs / wall["datasketch"]),
                "speed_ratio_vs_datasketch": round(wall["datasketch"] / wall["ours"], 2),
                "cpu_speed_ratio_vs_datasketch": round(cpu["datasketch"] / cpu["ours"], 2),
                "sha1_speed_ratio_vs_datasketch": round(wall["datasketch"] / wall["ours_sha1"], 2),
                "steps_cpu_s": {k: round(v, 4) for k, v in steps.items()},
                "sha1_signatures_equal": equal,
            }
        )
    )


if __name__ == "__main__":
    main()
