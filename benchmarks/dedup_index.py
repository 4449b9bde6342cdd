"""Dedup against an index: crawl B deduplicated against crawl A's dedup index, side by side with
deduplicating A and B together from scratch.

``python benchmarks/dedup_index.py`` (a few minutes on 2 cores): crawl A of :data:`DOCS_A`
documents (the index: twice a crawl, as an index of two months' kept crawls against this month's)
and crawl B of :data:`DOCS_B`, made in this process (seeded; Zipf-distributed words from a
vocabulary of :data:`VOCABULARY` made-up words, 150 to 400 words a document), in Parquet shards of
:data:`SHARD_DOCS`. A holds near copies of itself (:data:`A_NEAR`); B copies A at known rates:
exact copies (:data:`B_EXACT`, upper-cased: the same normalized text), near copies
(:data:`B_NEAR`, 1 to 3 words in 100 replaced: Jaccard about 0.7 to 0.95), far copies (:data:`B_FAR`,
a third of the words replaced), near copies of B's own documents (:data:`B_SELF`), and new text.

Untimed: A's dedup (:func:`pipeline.dedup.engine.find_duplicates`, keep rule "first"), its kept
documents written as A's curated shards, and the index made from them
(:func:`pipeline.dedup.index.add_run`, timed apart as ``index_add_s``). Then, alternating,
:data:`REPEATS` times each, best of them, in this process (``--runner=process`` or ``dask``:
on a process pool or a Dask LocalCluster of ``--workers``):

* indexed: the finding over B (``find_duplicates``) and the pass against A's index
  (:func:`pipeline.dedup.indexed.match_index`);
* together: the finding over A's raw shards then B's, one corpus.

Both with the band-key partitions the stage takes (dedup.partitions 8). The removal step (each
shard less its duplicates) is left out of both: it reads B's shards on one side and A's and B's on
the other. Compared: wall and CPU seconds (``time_ratio_indexed_vs_together``, by wall, the
headline, target at most 0.6; ``cpu_ratio_indexed_vs_together``); the kept set (B's documents
each side keeps; A's curated documents against what the joint run keeps of A), a difference where
B's document is tied to A only through a document A's own dedup removed counted apart (the index
holds what A kept); and, against the truth, the documents of B removed as in the index: the truth
is every B document whose exact Jaccard (5-word shingles, as the stage's) with an A document it
kept reaches 0.8, from one sparse product (``benchmarks/dedup_stage.py``'s ``ground_truth``).
Bytes each step read come from the findings. Sizes: ``python benchmarks/dedup_index.py A B``
(``1000000 1000000``: a million documents each); ``--repeats=N`` (default :data:`REPEATS`).
"""

from __future__ import annotations

import os

for _var in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from pipeline.dedup.engine import find_duplicates, partitions_for  # noqa: E402
from pipeline.dedup.index import DedupIndex, IndexView, ShardToAdd, add_run  # noqa: E402
from pipeline.dedup.indexed import match_index  # noqa: E402
from pipeline.dedup.layout import DedupWork  # noqa: E402
from pipeline.dedup.minhash import MinHashParams  # noqa: E402

DOCS_A, DOCS_B = 80_000, 40_000
SHARD_DOCS = 5_000
VOCABULARY = 30_000
A_NEAR = 0.05
B_EXACT, B_NEAR, B_FAR, B_SELF = 0.15, 0.15, 0.05, 0.05
THRESHOLD = 0.8
PARTITIONS = 8  # dedup.partitions
REPEATS = 2
# Documents of both crawls up to which the truth is computed (its sparse product holds every
# shingle of every document: past this, several GB).
TRUTH_DOCS = 300_000
SEED = 59


def _vocabulary(rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, VOCABULARY)
    return np.array(["".join(rng.choice(letters, n)) for n in lengths])


def _texts(rng: np.random.Generator, words: np.ndarray, count: int) -> list[np.ndarray]:
    """``count`` documents as arrays of word numbers (Zipf, exponent 1.1, within the vocabulary)."""
    lengths = rng.integers(150, 400, count)
    flat = ((rng.zipf(1.1, int(lengths.sum())) - 1) % len(words)).astype(np.int32)
    return np.split(flat, np.cumsum(lengths)[:-1])


def _edited(rng: np.random.Generator, doc: np.ndarray, rate: float, vocabulary: int) -> np.ndarray:
    doc = doc.copy()
    where = rng.random(len(doc)) < rate
    doc[where] = rng.integers(0, vocabulary, int(where.sum()))
    return doc


def crawls(docs_a: int, docs: int, seed: int = SEED) -> tuple[list[str], list[str]]:
    """The texts of crawls A and B (module docstring)."""
    rng = np.random.default_rng(seed)
    words = _vocabulary(rng)
    a = _texts(rng, words, docs_a)
    for i in rng.choice(docs_a, int(docs_a * A_NEAR), replace=False):  # near copies within A
        a[i] = _edited(rng, a[rng.integers(docs_a)], rng.uniform(0.01, 0.03), len(words))
    b = _texts(rng, words, docs)
    kinds = np.cumsum([B_EXACT, B_NEAR, B_FAR, B_SELF]) * docs
    sources = rng.integers(0, docs_a, docs)
    upper = np.zeros(docs, bool)
    for i in range(int(kinds[-1])):
        if i < kinds[0]:
            b[i], upper[i] = a[sources[i]], True
        elif i < kinds[1]:
            b[i] = _edited(rng, a[sources[i]], rng.uniform(0.01, 0.03), len(words))
        elif i < kinds[2]:
            b[i] = _edited(rng, a[sources[i]], 0.33, len(words))
        else:
            b[i] = _edited(rng, b[docs - 1 - i], rng.uniform(0.01, 0.03), len(words))
    order = rng.permutation(docs)
    a_texts = [" ".join(words[d]) for d in a]
    b_texts = [" ".join(words[b[i]]).upper() if upper[i] else " ".join(words[b[i]]) for i in order]
    return a_texts, b_texts


def write_shards(texts: list[str], prefix: str, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, lo in enumerate(range(0, len(texts), SHARD_DOCS)):
        part = texts[lo : lo + SHARD_DOCS]
        path = folder / f"shard-{n:05d}.parquet"
        ids = [f"{prefix}{lo + i:08d}" for i in range(len(part))]
        pq.write_table(pa.table({"id": ids, "text": part}), path)
        paths.append(path)
    return paths


def runner(kind: str, workers: int):
    """``(run_units, close)`` for ``kind``: local (this process), process (a pool), dask."""
    if kind == "local":
        return (lambda label, fn, jobs: [fn(job) for job in jobs]), (lambda: None)
    if kind == "process":
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(workers)
        return (lambda label, fn, jobs: list(pool.map(fn, jobs))), pool.shutdown
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True)
    client = Client(cluster)

    def run(label, fn, jobs):
        return client.gather(client.map(fn, list(jobs), pure=False)) if jobs else []

    return run, lambda: (client.close(), cluster.close())


def timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def kept_ids(shards: list[Path], removed: set[str]) -> set[str]:
    ids = pl.concat([pl.read_parquet(p, columns=["id"]) for p in shards])["id"].to_list()
    return {i for i in ids if i not in removed}


def removed_ids(clusters: Path) -> set[str]:
    return set(pl.read_parquet(clusters).filter(~pl.col("kept"))["id"].to_list())


def curated(a_shards: list[Path], removed: set[str], folder: Path) -> list[Path]:
    """A's shards less the documents A's dedup removed: A's curated output."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for path in a_shards:
        table = pl.read_parquet(path)
        target = folder / path.name
        table.filter(~pl.col("id").is_in(list(removed))).write_parquet(target)
        out.append(target)
    return out


def truth_of(a_kept_texts: list[str], b_texts: list[str], b_ids: list[str]) -> set[str]:
    from dedup_stage import Shingles, ground_truth

    sets = Shingles(pa.chunked_array([pa.array(a_kept_texts + b_texts)]))
    found = ground_truth(sets, THRESHOLD)
    n = len(a_kept_texts)
    a, b = found["a"], found["b"]
    crossing = (a < n) & (b >= n)  # a < b: the A document first
    return {b_ids[i - n] for i in np.unique(b[crossing])}


def main(argv: list[str]) -> None:
    sizes = [int(x) for x in argv if not x.startswith("--")]
    docs = (sizes + [DOCS_A, DOCS_B][len(sizes) :])[:2]
    options = dict(x[2:].split("=", 1) for x in argv if x.startswith("--") and "=" in x)
    kind, workers = options.get("runner", "local"), int(options.get("workers", 2))
    repeats = int(options.get("repeats", REPEATS))
    params = MinHashParams(threshold=THRESHOLD)
    work = Path(tempfile.mkdtemp(prefix="bench-dedup-index-"))
    try:
        run_benchmark(work, docs[0], docs[1], params, kind, workers, repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def make_index(work: Path, a_shards: list[Path], params: MinHashParams, run_units) -> tuple[float, float, set]:
    """A's dedup, its curated shards and the index made from them: the seconds of the dedup and of
    the add, and the documents A's dedup removed."""
    docs = sum(pq.ParquetFile(p).metadata.num_rows for p in a_shards)
    partitions = partitions_for(docs, params, PARTITIONS)
    clusters = work / "a-clusters.parquet"
    a_dedup_s, _, _ = timed(
        lambda: find_duplicates(a_shards, work / "a-work", params, partitions, "first", clusters, run_units, PARTITIONS)
    )
    removed = removed_ids(clusters)
    a_curated = curated(a_shards, removed, work / "a-curated")
    index = DedupIndex(work / "index")
    record = {"key": "crawl-a", "name": "crawl-a", "source": str(work / "a")}
    add = [ShardToAdd(DedupWork(work / "a-work").signatures(s), p) for s, p in enumerate(a_curated)]
    index_add_s, _, _ = timed(lambda: add_run(index, record, add, partitions, run_units))
    return a_dedup_s, index_add_s, removed


def run_benchmark(
    work: Path, docs_a: int, docs_b: int, params: MinHashParams, kind: str, workers: int, repeats: int
) -> None:
    started = time.perf_counter()
    a_texts, b_texts = crawls(docs_a, docs_b)
    a_shards, b_shards = write_shards(a_texts, "a", work / "a"), write_shards(b_texts, "b", work / "b")
    made_s = time.perf_counter() - started
    run_units, close = runner(kind, workers)
    try:
        a_dedup_s, index_add_s, a_removed = make_index(work, a_shards, params, run_units)
        index = DedupIndex(work / "index")
        view = IndexView.of(index, index.opened())
        sides = {"indexed": [], "together": []}
        results = {}
        for repeat in range(repeats):
            for side in sides:
                folder = work / f"{side}-{repeat}"
                if side == "indexed":
                    job = lambda: indexed_side(folder, b_shards, view, params, docs_b, run_units)  # noqa: B023, E731
                else:
                    job = lambda: together_side(folder, a_shards + b_shards, params, docs_a + docs_b, run_units)  # noqa: B023, E731
                wall, cpu, results[side] = timed(job)
                sides[side].append((wall, cpu))
    finally:
        close()
    found = {"docs_a": docs_a, "docs_b": docs_b, "made_s": made_s, "a_dedup_s": a_dedup_s, "index_add_s": index_add_s}
    report(work, found, a_texts, b_texts, a_removed, b_shards, sides, results, kind)


def indexed_side(folder, b_shards, view, params, docs, run_units) -> dict:
    partitions = partitions_for(docs, params, PARTITIONS)
    clusters = folder / "clusters.parquet"
    finding = find_duplicates(b_shards, folder / "work", params, partitions, "first", clusters, run_units, PARTITIONS)
    finding["index"] = match_index(
        folder / "work",
        view,
        len(b_shards),
        partitions,
        THRESHOLD,
        clusters,
        folder / "matches.parquet",
        run_units,
        PARTITIONS,
    )
    return finding


def together_side(folder, shards, params, docs, run_units) -> dict:
    partitions = partitions_for(docs, params, PARTITIONS)
    clusters = folder / "clusters.parquet"
    return find_duplicates(shards, folder / "work", params, partitions, "first", clusters, run_units, PARTITIONS)


def scores(work: Path, found: dict, a_texts, b_texts, a_removed, b_shards, repeat: int) -> dict:
    """The kept sets of both sides, and the index's removals against the truth."""
    docs_a, docs_b = found["docs_a"], found["docs_b"]
    a_ids, b_ids = [f"a{i:08d}" for i in range(docs_a)], [f"b{i:08d}" for i in range(docs_b)]
    matches = pl.read_parquet(work / f"indexed-{repeat}" / "matches.parquet")
    b_removed = removed_ids(work / f"indexed-{repeat}" / "clusters.parquet") | set(matches["id"].to_list())
    b_kept = kept_ids(b_shards, b_removed)
    joint_kept = (set(a_ids) | set(b_ids)) - removed_ids(work / f"together-{repeat}" / "clusters.parquet")
    a_kept = set(a_ids) - a_removed
    direct = set(matches.filter(pl.col("via_id").is_null())["id"].to_list())
    if docs_a + docs_b <= TRUTH_DOCS:
        truth = truth_of([t for i, t in zip(a_ids, a_texts) if i in a_kept], b_texts, b_ids)
        hit = len(direct & truth)
        precision, recall = hit / max(len(direct), 1), hit / max(len(truth), 1)
    else:
        truth, precision, recall = None, float("nan"), float("nan")
    b_joint = {i for i in joint_kept if i.startswith("b")}
    a_joint = joint_kept - b_joint
    differ = (b_kept ^ b_joint) | (a_joint ^ a_kept)
    # The index holds what A kept: a B document tied to A only through a document A's own dedup
    # removed (a chain under the threshold with what A kept) stays, where one run over both drops it.
    joint = pl.read_parquet(work / f"together-{repeat}" / "clusters.parquet")
    chained = joint.filter(pl.col("id").is_in(list(a_removed)))["cluster"].unique()
    through_removed = set(joint.filter(pl.col("cluster").is_in(chained.implode()))["id"].to_list())
    return {
        "a_kept": len(a_kept),
        "removed_in_index": matches.height,
        "removed_through_clusters": matches.height - len(direct),
        "truth": None if truth is None else len(truth),
        "precision": None if truth is None else round(precision, 4),
        "recall": None if truth is None else round(recall, 4),
        "f1": None if truth is None else round(2 * precision * recall / max(precision + recall, 1e-12), 4),
        "b_kept": len(b_kept),
        "b_kept_together": len(b_joint),
        "kept_set_equal": not differ,
        "kept_differences": len(differ),
        "kept_differences_through_a_removed": len(differ & through_removed),
        "kept_set_equal_where_rule_allows": not (differ - through_removed),
    }


def report(work, found, a_texts, b_texts, a_removed, b_shards, sides, results, kind) -> None:
    best = {side: min(times) for side, times in sides.items()}
    scored = scores(work, found, a_texts, b_texts, a_removed, b_shards, len(sides["indexed"]) - 1)
    index_read = {f"index_{k}": v for k, v in results["indexed"]["index"]["bytes_read"].items()}
    out = {
        "benchmark": "dedup_index",
        "runner": kind,
        "docs_a": found["docs_a"],
        "docs_b": found["docs_b"],
        "index_add_s": round(found["index_add_s"], 2),
        "a_dedup_s": round(found["a_dedup_s"], 2),
        "indexed_s": round(best["indexed"][0], 2),
        "together_s": round(best["together"][0], 2),
        "indexed_cpu_s": round(best["indexed"][1], 2),
        "together_cpu_s": round(best["together"][1], 2),
        "time_ratio_indexed_vs_together": round(best["indexed"][0] / best["together"][0], 3),
        # This process's CPU seconds: the whole of it on the local runner only.
        "cpu_ratio_indexed_vs_together": round(best["indexed"][1] / best["together"][1], 3)
        if kind == "local"
        else None,
        "all_times_s": {side: [round(w, 2) for w, _ in times] for side, times in sides.items()},
        **scored,
        "bytes_read_indexed": {**results["indexed"]["bytes_read"], **index_read},
        "bytes_read_together": results["together"]["bytes_read"],
        "corpus_s": round(found["made_s"], 1),
    }
    print(
        f"crawl A {found['docs_a']:,} documents (keeps {scored['a_kept']:,}), B {found['docs_b']:,}; "
        f"A's dedup {found['a_dedup_s']:.1f} s, index add {found['index_add_s']:.1f} s"
    )
    print(f"{'side':<10} {'wall s (best)':>14} {'cpu s':>8}   all")
    for side in sides:
        print(f"{side:<10} {best[side][0]:>14.2f} {best[side][1]:>8.2f}   {out['all_times_s'][side]}")
    print(f"ratio indexed / together: {out['time_ratio_indexed_vs_together']}")
    print(
        f"B removed as in the index: {scored['removed_in_index']:,} ({scored['removed_through_clusters']} "
        f"through clusters); truth {scored['truth']}; precision {scored['precision']} "
        f"recall {scored['recall']} F1 {scored['f1']}"
    )
    print(
        f"kept set equal to one run over both: {scored['kept_set_equal']} ({scored['kept_differences']} differ, "
        f"{scored['kept_differences_through_a_removed']} of them tied to A through a document A removed)"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
