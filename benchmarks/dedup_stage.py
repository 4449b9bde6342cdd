"""The dedup stage: recall at the threshold by LSH layout (the default), and against datasketch
and datatrove (``peers``).

**Near copies at the threshold** (``python benchmarks/dedup_stage.py``, a few minutes). The
real BBC News articles the demo corpus uses (``demo.real_text.load_real_text``, the data
set's own near repeats dropped), each followed by :data:`NEAR_COPIES` near copies with a share of
its words substituted, deleted or inserted (``demo.noise.perturb``) drawn uniformly from
:data:`NEAR_EDIT_RATES` (3 to 10%); shuffled (seeded), :data:`SHARDS` Parquet shards, made once
under ``.cache/bench-dedup/``. At these rates the Jaccard similarity of a copy with its original
(and of two copies) spreads from about 0.4 to 0.95, so many true pairs lie just above 0.8 and
many more just below it: the pairs an LSH layout must catch, and those it makes candidates only
to have verification drop them. Ground truth as below (every pair with exact Jaccard >= 0.8 on
our shingles, clusters their connected components). Our whole clusters step
(:func:`pipeline.dedup.engine.deduplicate_shards`, one thread) runs with three LSH layouts,
in turn, :data:`LAYOUT_REPEATS` times each in the same run: ``old``, the former default
:data:`OLD_LAYOUT` (14 bands x 9 rows, chosen by weighting false negatives 0.9 and false
positives 0.1); ``low``, :func:`pipeline.dedup.minhash.recall_bands` for a candidate probability
of :data:`LOW_RECALL` at the threshold; ``new``, the default (0.998). CPU time is the best of the
repeats, verification time that of the best run. Reported per layout: pairwise precision, recall
and F1 of its clusters, recall of the true pairs by similarity (``..._recall_080_085``: the pairs
just above the threshold), candidate pairs and the false positives verification dropped, and the
missed true pairs that shared a band key (lost after LSH: ``candidate_pairs`` pairs each member
of a bucket larger than ``lsh.ALL_PAIRS_BUCKET`` with its first document only) with
``..._f1_if_buckets_all_pairs``, the F1 had those been verified. Headline ``time_ratio_new_vs_old``:
the default's CPU time over the former's.

**Against datasketch and datatrove** (``python benchmarks/dedup_stage.py peers``, much longer).
Documents: the demo corpus (:func:`demo.corpus.build_demo_corpus`, :data:`CORPUS_DOCS`
documents, seed 0): its news articles (JSON lines), dialogues (Parquet) and web pages (WARC, the
HTML turned into text by :func:`pipeline.io.warc.read_warc`), the empty ones left out, shuffled
(seeded) and written as :data:`SHARDS` Parquet shards with ``id``, ``text`` and ``source``. About
21,000 documents, half of them exact or near copies (of another source, often). Made once under
``.cache/bench-dedup/``.

**Ground truth.** Every pair of documents whose exact Jaccard similarity reaches
:data:`THRESHOLD`, on the shingles our stage compares (``shingle_hashes`` and ``shingle_sets``
with the default ``MinHashParams``: word 5-grams of the normalized text, 64-bit hashes): one
sparse product ``A @ A.T`` of the documents x shingles incidence matrix (shingles of a single
document left out: they add to no intersection) gives every intersection, and
``|A n B| / (|A| + |B| - |A n B|)`` the similarity. The true clusters are the connected components
of these pairs. A method's clusters are scored by pairs of documents: precision is the share of
the pairs it puts in one cluster that share a true cluster, recall the share of the true
cluster-mates it puts together. Pair counts come from the contingency table of (method's
cluster, true cluster) sizes, never from listing pairs.

**Three sides on the same documents**, each in its own subprocess with one thread (polars,
Arrow, BLAS pinned to one); what a side spends is its CPU time (user + system, children
included) over the timed part; docs/s per core is documents over CPU seconds.

* ours: :func:`pipeline.dedup.engine.deduplicate_shards` end to end (signature files from the
  document shards, band keys in the partitions the stage takes with :data:`PARTITIONS` as
  dedup.partitions (one per million band rows up to it), candidate pairs, exact-Jaccard
  verification, components, keep rule "first"): the clusters table. Then, timed apart, the
  stage's last step: :func:`pipeline.dedup.clusters.dedup_step` over each shard, the kept
  documents and the removed rows written as the stage's unit writes them (Arrow, zstd). Cold: a
  fresh process, so numba's import (about 0.35 CPU s) and the loading of its compiled loops from
  its cache on disk are in it (the first run after a change to the loops compiles them; the best
  of :data:`OUR_REPEATS` runs leaves that out). Warm (``ours-warm``): a process that first ran the
  stage, untimed, on :data:`WARM_UP_DOCS` documents: what a document costs once a process has
  loaded the loops, which it does once. Cold and warm runs alternate, :data:`OUR_REPEATS` each,
  then :data:`OUR_REPEATS` more warm ones alternate with warm runs on the 200,000 documents of the
  memory runs (below); the best of each, every run's figure in the JSON (``..._runs``).
* datasketch: ``MinHash.bulk(shingles, num_perm=128, seed=1)`` over the same shingles (our
  words, five by five, joined by spaces, UTF-8; built before the clock starts), then
  ``MinHashLSH(threshold=0.8, num_perm=128)``: insert every document, query every document, and
  the connected components of the candidate pairs (scipy). No verification: datasketch's
  candidates are its answer. Documents without shingles are not inserted (their empty sketches
  would all collide).
* rensa 0.5.0 (Rust, in its own virtualenv, one thread): ``RMinHash.from_token_sets`` over the
  same prebuilt shingles as datasketch, then its ``RMinHashLSH`` with :data:`RENSA_BANDS` bands
  (``insert_many``, ``query_all``), each candidate pair kept where the sketches' estimated Jaccard
  reaches the threshold (the check its ``RMinHashDeduplicator`` makes), and the connected
  components of the kept pairs (scipy).
* datatrove 0.10.1: its four MinHash stages (``MinhashDedupSignature``, ``MinhashDedupBuckets``,
  ``MinhashDedupCluster`` with ``save_cluster_id``, ``MinhashDedupFilter`` with
  ``load_cluster_ids``, kept and removed documents written as zstd Parquet) with FineWeb's
  configuration: 5-grams, 14 buckets of 8 hashes (its own threshold about (1/14)^(1/8) = 0.72), SHA-1 64-bit
  shingle hashes (``HashConfig(hash_fc="sha1")``: with xxhash 4 its default hash fails on str),
  spaCy's English word tokenizer after its ``simplify_text`` (lowercase, digits to 0, punctuation
  out). Each stage is a ``LocalPipelineExecutor`` with one worker: one task, except the buckets
  stage, which needs one task per bucket (14 tasks, run one after another in the same process).
  Its clusters are read back from the cluster ids its filter stage writes into each document's
  metadata (-1: in no cluster). Its modules are imported before the clock starts. On the
  21,510 documents it runs twice in one process, each into a fresh folder: cold (the first use of
  spaCy's tokenizer and of its stages) and warm (the second run). On the 200,000 documents of
  the memory runs, once, after an untimed run over their first :data:`WARM_UP_DOCS` documents,
  as ours-warm.

Headlines: ``warm_speed_ratio_vs_datatrove`` (both warm: ours, clusters table and filtering
step, against datatrove's four stages, on the 21,510 documents) and
``speed_ratio_200k_vs_datatrove_200k`` (the same, both warm, on the 200,000 documents);
``speed_ratio_vs_datatrove`` is the cold one (fresh processes on both sides),
``clusters_speed_ratio_vs_datatrove`` compares the clusters only (ours against datatrove's first
three stages), ``speed_ratio_vs_datasketch`` and ``speed_ratio_vs_rensa`` ours cold (the clusters
table) against each one's signatures + LSH + components; accuracy: ``ours_f1``.

**Where the errors come from.** For each side: recall of the true pairs (similar at or above
the threshold themselves, not only through their cluster) by similarity; the method's own
pairs (our verified edges, datasketch's candidates, datatrove's duplicate pairs) by exact
similarity. For ours, every missed true pair is checked for a shared LSH band key in the
signature files: a missed pair that shares a band was in one bucket and lost after it, not by
LSH (``candidate_pairs`` pairs each member of a bucket larger than ``lsh.ALL_PAIRS_BUCKET`` with
the bucket's first document only, so a member similar to others but not to the first is dropped
at verification);
``ours_recall_if_buckets_all_pairs`` is the recall with those pairs added.

**Memory.** Our whole stage (clusters table and filtering step) at 50,000, 100,000 and 200,000
documents, shards of :data:`MEMORY_SHARD_DOCS` documents, :data:`PARTITIONS` as dedup.partitions: peak
RSS of the subprocess (``VmHWM``), its RSS after imports, and each step's own peak (the peak is
started over, ``/proc/self/clear_refs``, as each step function is called). The larger corpora
repeat the documents with every word of repeat r suffixed by a tag of its own (``"word" ->
"wordzqb"``), so each repeat has the structure of duplicates of the first one and no similarity
to the others (and longer words: a document costs more than one of the 21,510 on both sides).
These runs are cold; the speed at 200,000 comes from the warm runs above.

The last line printed is one JSON object; a readable table comes before it.

Usage::

    python benchmarks/dedup_stage.py                                   # near copies, LSH layouts
    python benchmarks/dedup_stage.py peers                             # against datasketch, datatrove
    python benchmarks/dedup_stage.py ours WORK_DIR SHARD [SHARD ...]   # one timed run of ours
    python benchmarks/dedup_stage.py ours-steps WORK_DIR SHARD [...]   # the same, with step peaks
    python benchmarks/dedup_stage.py ours-warm WORK_DIR SHARD [...]    # the same, after a warm-up
    python benchmarks/dedup_stage.py tiny                              # ours on 1,500 documents (the test)
    python benchmarks/dedup_stage.py datasketch OUT_DIR SHARD [SHARD ...]
"""

from __future__ import annotations

import os

for _var in (
    "POLARS_MAX_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
):
    os.environ[_var] = "false" if _var == "TOKENIZERS_PARALLELISM" else "1"

import gc  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import orjson  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

pa.set_cpu_count(1)
pa.set_io_thread_count(1)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from peers import peer_python, rounded  # noqa: E402

CACHE = ROOT / ".cache" / "bench-dedup"
CORPUS_DOCS = 22_000
SEED = 0
SHARDS = 4
PARTITIONS = 8
THRESHOLD = 0.8
NUM_PERM = 128
OUR_REPEATS = 3
MEMORY_SIZES = (50_000, 100_000, 200_000)
MEMORY_SHARD_DOCS = 25_000
# Documents per Parquet row group of the document shards: a stage writes its shards batch by batch
# (the config's batch_docs, 4,096 by default), and the signature step reads a row group at a time.
ROW_GROUP_DOCS = 4096
# The near-copies benchmark: copies per real article, their edit rates (uniform in this range),
# runs per layout, the layout the default replaced, and a lower recall target shown beside.
NEAR_COPIES = 8
NEAR_EDIT_RATES = (0.03, 0.10)
LAYOUT_REPEATS = 3
OLD_LAYOUT = (14, 9)
LOW_RECALL = 0.99
# datatrove on all the documents unless this is set to fewer (its first documents in read order).
DATATROVE_DOCS: int | None = None
TINY_DOCS = 1_500  # the test's corpus (``tiny``)
WARM_UP_DOCS = 200  # the documents of the untimed run before ``ours-warm``'s timed one
PEER_PACKAGES = [
    "datatrove==0.10.1",
    "spacy",
    "regex",
    "tokenizers",
    f"pyarrow=={pyarrow.__version__}",
    f"orjson=={orjson.__version__}",
]
PEER_MODULES = ["datatrove.pipeline.dedup.minhash", "datatrove.pipeline.readers", "spacy", "regex", "pyarrow"]
SIMILARITY_BINS = (0.0, 0.5, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)

# Run by datatrove's interpreter: argv = [documents folder, output folder, documents limit, mode
# ("cold", "twice" or "warm-up", below), warm-up documents]; prints one JSON line with the CPU and
# wall seconds of each stage, cold and warm where measured.
PEER_SCRIPT = r"""
import json, os, re, resource, sys, time
from importlib.metadata import version

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import (MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter,
                                      MinhashDedupSignature)
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.typeshelper import Languages

docs, out, limit, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
config = MinhashConfig(hash_config=HashConfig(precision=64, hash_fc="sha1"))  # FineWeb's


def reader():
    return ParquetReader(docs, glob_pattern="shard-*.parquet", text_key="text", id_key="id", limit=limit)


def writer(folder):
    return ParquetWriter(folder, compression="zstd", use_content_defined_chunking=False, write_page_index=False)


def stages():
    return [
        ("signatures", [reader(), MinhashDedupSignature(f"{out}/signatures", config=config,
                                                        language=Languages.english)], 1),
        ("buckets", [MinhashDedupBuckets(f"{out}/signatures", f"{out}/buckets", config=config)], config.num_buckets),
        ("cluster", [MinhashDedupCluster(f"{out}/buckets", f"{out}/remove_ids", config=config,
                                         save_cluster_id=True)], 1),
        ("filter", [reader(), MinhashDedupFilter(f"{out}/remove_ids", exclusion_writer=writer(f"{out}/removed"),
                                                 load_cluster_ids=True), writer(f"{out}/kept")], 1),
    ]


def cpu():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


report = {"version": version("datatrove"), "cpu_s": {}, "wall_s": {}, "warm_cpu_s": {}, "warm_wall_s": {},
          "buckets": config.num_buckets, "hashes_per_bucket": config.hashes_per_bucket, "n_grams": config.n_grams}
# "twice": two runs over all the documents, each into a fresh folder: the first pays the first use of
# spaCy's tokenizer and datatrove's modules (cold), the second runs in a process that has done all
# that (warm). "warm-up": an untimed run over the first WARM_UP documents, then the timed (warm) one.
runs = {
    "cold": [(out, "cpu_s", "wall_s", limit)],
    "twice": [(out, "cpu_s", "wall_s", limit), (f"{out}-warm", "warm_cpu_s", "warm_wall_s", limit)],
    "warm-up": [(f"{out}-warm-up", None, None, int(sys.argv[5])), (out, "warm_cpu_s", "warm_wall_s", limit)],
}[mode]
for folder, cpu_key, wall_key, limit in runs:
    out = folder
    for name, pipeline, tasks in stages():
        executor = LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1, logging_dir=f"{out}/logs/{name}",
                                         skip_completed=False)
        c, w = cpu(), time.perf_counter()
        executor.run()
        if cpu_key:
            report[cpu_key][name], report[wall_key][name] = cpu() - c, time.perf_counter() - w
report["peak_rss_mib"] = int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) / 1024
print(json.dumps(report))
"""


RENSA_PACKAGES = ["rensa==0.5.0", "numpy", "scipy"]
RENSA_BANDS = 16  # 16 bands x 8 rows of its 128 slots: a candidate probability of 0.98 at 0.8

# Run by rensa's interpreter: argv = [JSON list of each document's words joined by spaces, output
# folder, threshold, permutations, bands]; the shingles are built before the clock starts, as
# datasketch's are; writes labels.npy and pairs.npy, prints one JSON line.
RENSA_SCRIPT = r"""
import json, re, sys, time
from importlib.metadata import version

import numpy as np
from rensa import RMinHash, RMinHashLSH
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

words, out = json.load(open(sys.argv[1], encoding="utf-8")), sys.argv[2]
threshold, num_perm, bands = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
shingles = []
for text in words:
    w = text.split()
    shingles.append([" ".join(w[i : i + 5]) for i in range(max(1, len(w) - 4))] if w else [])
present = [i for i, s in enumerate(shingles) if s]
shingles = [shingles[i] for i in present]

c, w = time.process_time(), time.perf_counter()
sketches = RMinHash.from_token_sets(shingles, num_perm, 1)
sketch_cpu = time.process_time() - c
lsh = RMinHashLSH(threshold, num_perm, bands)
lsh.insert_many(sketches, 0)
left, right, candidates = [], [], 0
for key, found in enumerate(lsh.query_all(sketches)):
    for other in found:
        if other > key:
            candidates += 1
            if sketches[key].jaccard(sketches[other]) >= threshold:  # RMinHashDeduplicator's check
                left.append(present[key])
                right.append(present[other])
a, b, n = np.array(left, np.int64), np.array(right, np.int64), len(words)
graph = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n)).tocsr()
labels = connected_components(graph, directed=False)[1]
cpu_all, wall_all = time.process_time() - c, time.perf_counter() - w
np.save(f"{out}/labels.npy", labels.astype(np.int64))
np.save(f"{out}/pairs.npy", np.stack([a, b]))
peak = int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) / 1024
print(json.dumps({"version": version("rensa"), "docs": n, "docs_with_shingles": len(present), "cpu_s": cpu_all,
                  "wall_s": wall_all, "sketch_cpu_s": sketch_cpu, "candidate_pairs": candidates,
                  "pairs_kept": len(a), "bands": bands, "rows": num_perm // bands, "peak_rss_mib": peak}))
"""


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def rss_mib(field: str = "VmHWM") -> float:
    """This process' resident memory, peak (``VmHWM``) or now (``VmRSS``), from /proc."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", status).group(1)) / 1024


def cpu_seconds() -> float:
    """CPU seconds of this process and of its waited-for children, user + system."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def last_json(done: subprocess.CompletedProcess, side: str) -> dict:
    if done.returncode:
        raise SystemExit(f"{side} failed (exit {done.returncode}):\n{done.stderr[-6000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# The documents
# --------------------------------------------------------------------------


def corpus_documents(corpus: Path) -> pa.Table:
    """``id, text, source`` of the corpus' news, dialogues and web pages, in file order; records
    that are malformed, not text, or empty are left out."""
    from pipeline.io.warc import read_warc

    ids, texts, sources = [], [], []

    def add(doc_id, text, source):
        if isinstance(doc_id, str) and isinstance(text, str) and text:
            ids.append(doc_id)
            texts.append(text)
            sources.append(source)

    for path in sorted((corpus / "news").glob("*.jsonl.gz")):
        for line in gzip.open(path, "rb"):
            try:
                record = json.loads(line)
            except ValueError:
                continue  # the corpus' deliberately broken lines
            if isinstance(record, dict):
                add(record.get("id"), record.get("text"), "news")
    for path in sorted((corpus / "dialogues").glob("*.parquet")):
        table = pq.read_table(path, columns=["id", "text"])
        for doc_id, text in zip(table.column("id").to_pylist(), table.column("text").to_pylist()):
            add(doc_id, text, "dialogues")
    for path in sorted((corpus / "web").glob("*.warc.gz")):
        for batch in read_warc(path):
            for doc_id, text, reason in zip(
                batch.column("own_id").to_pylist(), batch.column("text").to_pylist(), batch.column("reason").to_pylist()
            ):
                if reason is None:
                    add(doc_id, text, "web")
    table = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "text": pa.array(texts, pa.large_string()),
            "source": pa.array(sources, pa.string()),
        }
    )
    if len(set(ids)) != len(ids):
        raise SystemExit("the corpus' ids are not unique")
    return table


def write_shards(table: pa.Table, folder: Path) -> list[str]:
    """Write ``table`` as SHARDS zstd Parquet files of ROW_GROUP_DOCS-row groups; their names."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i, rows in enumerate(np.array_split(np.arange(table.num_rows), SHARDS)):
        name = f"shard-{i:05d}.parquet"
        pq.write_table(
            table.slice(int(rows[0]), len(rows)), folder / name, compression="zstd", row_group_size=ROW_GROUP_DOCS
        )
        names.append(name)
    return names


def base_shards(docs: int = CORPUS_DOCS, cache: Path = CACHE) -> list[Path]:
    """The benchmark's document shards (made once): the corpus' documents, shuffled."""
    folder = cache / f"docs-{docs}-{SEED}"
    manifest = folder / "manifest.json"
    if manifest.exists():
        names = json.loads(manifest.read_text())["shards"]
        if all((folder / n).exists() for n in names):
            return [folder / n for n in names]
    from demo.corpus import build_demo_corpus

    corpus = cache / f"corpus-{docs}"
    print(f"Building the demo corpus ({docs} documents) and the document shards; reused afterwards", file=sys.stderr)
    build_demo_corpus(corpus, docs=docs, seed=SEED)
    table = corpus_documents(corpus)
    order = np.random.default_rng(SEED).permutation(table.num_rows)
    table = table.take(pa.array(order))
    names = write_shards(table, folder)
    manifest.write_text(json.dumps({"docs": table.num_rows, "shards": names}, indent=2) + "\n")
    return [folder / n for n in names]


_WORD = re.compile(r"(\w+)")


def tagged(text: str, repeat: int) -> str:
    """``text`` with every word suffixed by a tag of repeat ``repeat`` (repeat 0: unchanged)."""
    if repeat == 0:
        return text
    tag = "zq" + "".join("abcdefghijklmnopqrstuvwxyz"[int(d)] for d in str(repeat))
    return _WORD.sub(rf"\g<1>{tag}", text)


def scaled_shards(base: list[Path], docs: int) -> list[Path]:
    """Shards of :data:`MEMORY_SHARD_DOCS` documents, ``docs`` in all: the base documents, then
    tagged repeats of them (made once; the first k shards of a larger set are those of a smaller
    one)."""
    largest = max(MEMORY_SIZES)
    folder = CACHE / f"docs-scaled-{CORPUS_DOCS}-{SEED}-{largest}-{MEMORY_SHARD_DOCS}"
    count = -(-largest // MEMORY_SHARD_DOCS)
    paths = [folder / f"shard-{i:05d}.parquet" for i in range(count)]
    if not (folder / "done").exists():
        print(f"Making {largest} documents for the memory runs; reused afterwards", file=sys.stderr)
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables([pq.read_table(p) for p in base])
        ids = table.column("id").to_pylist()
        texts = table.column("text").to_pylist()
        sources = table.column("source").to_pylist()
        n = len(ids)
        for i, path in enumerate(paths):
            lo, hi = i * MEMORY_SHARD_DOCS, min((i + 1) * MEMORY_SHARD_DOCS, largest)
            rows = [(k // n, k % n) for k in range(lo, hi)]
            shard = pa.table(
                {
                    "id": pa.array([ids[r] if rep == 0 else f"{ids[r]}~{rep}" for rep, r in rows], pa.string()),
                    "text": pa.array([tagged(texts[r], rep) for rep, r in rows], pa.large_string()),
                    "source": pa.array([sources[r] for _, r in rows], pa.string()),
                }
            )
            pq.write_table(shard, path, compression="zstd", row_group_size=ROW_GROUP_DOCS)
        (folder / "done").write_text("")
    return paths[: -(-docs // MEMORY_SHARD_DOCS)]


def read_texts(shards: list[Path]) -> tuple[list[str], pa.ChunkedArray]:
    table = pa.concat_tables([pq.read_table(p, columns=["id", "text"]) for p in shards])
    return table.column("id").to_pylist(), table.column("text")


# --------------------------------------------------------------------------
# Ground truth and scores
# --------------------------------------------------------------------------


class Shingles:
    """Every document's shingle set, as our stage makes them."""

    def __init__(self, texts: pa.ChunkedArray):
        from pipeline.dedup.minhash import MinHashParams, shingle_hashes, shingle_sets

        params = MinHashParams()
        hashes, offsets = shingle_hashes(texts, params.ngram, params.shingle_hash, wide=True)
        self.values, self.offsets = shingle_sets(hashes, offsets)
        self.sizes = np.diff(self.offsets)
        self.n = len(self.sizes)

    def jaccard(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact Jaccard similarity of documents ``a[i]`` and ``b[i]`` (as our verification)."""
        from pipeline.dedup.clusters import jaccard_of_pairs

        if len(a) == 0:
            return np.zeros(0)
        return jaccard_of_pairs(self.values, self.offsets, a, b)


def ground_truth(sets: Shingles, threshold: float, docs: int | None = None) -> dict:
    """True pairs (``a < b``, their similarity) and true clusters (a label per document), of the
    first ``docs`` documents (all by default)."""
    from scipy.sparse import coo_matrix, csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = sets.n if docs is None else docs
    stop = sets.offsets[n]
    values = sets.values[:stop]
    sizes = sets.sizes[:n]
    doc = np.repeat(np.arange(n, dtype=np.int64), sizes)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    shared = counts[inverse] > 1  # a shingle of one document adds to no intersection
    columns = np.unique(inverse[shared], return_inverse=True)[1]
    incidence = csr_matrix(
        (np.ones(int(shared.sum()), np.int32), (doc[shared], columns)),
        shape=(n, int(columns.max()) + 1 if len(columns) else 0),
    )
    product = (incidence @ incidence.T).tocoo()
    upper = product.row < product.col
    a, b = product.row[upper].astype(np.int64), product.col[upper].astype(np.int64)
    inter = product.data[upper].astype(np.int64)
    union = sizes[a] + sizes[b] - inter
    similarity = np.where(union > 0, inter / np.maximum(union, 1), 0.0)  # as jaccard_of_pairs computes it
    keep = similarity >= threshold
    a, b, similarity = a[keep], b[keep], similarity[keep]
    order = np.lexsort((b, a))
    a, b, similarity = a[order], b[order], similarity[order]
    graph = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=False)
    return {
        "a": a,
        "b": b,
        "similarity": similarity,
        "labels": labels.astype(np.int64),
        "sharing_pairs": int(upper.sum()),
    }


def pair_count(sizes: np.ndarray) -> int:
    sizes = sizes.astype(np.int64)
    return int((sizes * (sizes - 1) // 2).sum())


def pair_scores(predicted: np.ndarray, truth: np.ndarray) -> dict:
    """Pairwise precision, recall and F1 of a clustering (a label per document) against the true
    one, from the contingency table of (predicted, true) cluster sizes."""
    predicted = np.unique(predicted, return_inverse=True)[1].astype(np.int64)
    truth = np.unique(truth, return_inverse=True)[1].astype(np.int64)
    joint = np.unique(predicted * (int(truth.max()) + 1) + truth, return_counts=True)[1]
    together = pair_count(joint)
    said = pair_count(np.bincount(predicted))
    true = pair_count(np.bincount(truth))
    precision = together / said if said else 1.0
    recall = together / true if true else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    sizes = np.bincount(predicted)
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "pairs_predicted": said,
        "pairs_true": true,
        "pairs_both": together,
        "clusters": int((sizes > 1).sum()),
        "docs_in_clusters": int(sizes[sizes > 1].sum()),
        "removed": int((sizes[sizes > 1] - 1).sum()),
    }


def labels_from_members(n: int, members: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    """A label per document: ``members[i]`` gets ``n + cluster[i]``'s rank, the rest their own."""
    labels = np.arange(n, dtype=np.int64)
    if len(members):
        labels[members] = n + np.unique(cluster, return_inverse=True)[1]
    return labels


def bin_counts(similarity: np.ndarray, bins=SIMILARITY_BINS) -> dict[str, int]:
    """Counts by similarity: ``[lo, hi)`` for each bin, and exactly 1.0 apart."""
    out = {}
    for lo, hi in zip(bins[:-1], bins[1:]):
        out[f"{lo:.2f}-{hi:.2f}"] = int(((similarity >= lo) & (similarity < hi)).sum())
    out["1.00"] = int((similarity >= 1.0).sum())
    return {k: v for k, v in out.items() if v}


def true_pair_recall(truth: dict, labels: np.ndarray) -> dict[str, dict]:
    """Of the true pairs (similar themselves), the share a method put in one cluster, by similarity."""
    together = labels[truth["a"]] == labels[truth["b"]]
    out = {}
    bins = [b for b in SIMILARITY_BINS if b >= THRESHOLD]
    for lo, hi in zip(bins[:-1], bins[1:]):
        inside = (truth["similarity"] >= lo) & (truth["similarity"] < hi)
        out[f"{lo:.2f}-{hi:.2f}"] = {"pairs": int(inside.sum()), "found": int((together & inside).sum())}
    inside = truth["similarity"] >= 1.0
    out["1.00"] = {"pairs": int(inside.sum()), "found": int((together & inside).sum())}
    return out


# --------------------------------------------------------------------------
# The sides
# --------------------------------------------------------------------------


def reset_peak() -> None:
    """Start this process' peak RSS (``VmHWM``) over from its current RSS (Linux clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_tracking_units(peaks: dict[str, float]):
    """A ``pipeline.stages.units.RunUnits`` that runs the units in this process and records the
    peak RSS of each kind of unit: the peak is started over when each unit begins and read when it
    ends (the largest unit of each kind)."""

    def run_units(label, fn, jobs):
        results = []
        for job in jobs:
            reset_peak()
            results.append(fn(job))
            name = f"{fn.__name__}({job.pass_name})" if fn.__name__.startswith("measure_") else fn.__name__
            peaks[name] = max(peaks.get(name, 0.0), rss_mib())
        return results

    return run_units


def stage_partitions(shards: list[Path], params) -> int:
    """The band-key partitions the stage takes for ``shards`` (``partitions_for`` over their
    documents, :data:`PARTITIONS` as dedup.partitions), as ``run_dedup`` does."""
    from pipeline.dedup.engine import partitions_for

    return partitions_for(sum(pq.ParquetFile(s).metadata.num_rows for s in shards), params, PARTITIONS)


def warm_up(work_dir: Path, shard: Path, params) -> float:
    """The stage run once over the first :data:`WARM_UP_DOCS` documents of ``shard`` (what a
    process pays once: numba's import and the loading of its compiled loops, first calls); its
    CPU seconds."""
    from pipeline.dedup.engine import find_duplicates
    from pipeline.stages.units import in_process

    c = cpu_seconds()
    folder = work_dir / "warm-up"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pq.write_table(pq.read_table(shard).slice(0, WARM_UP_DOCS), folder / shard.name)
    inputs = [folder / shard.name]
    partitions = stage_partitions(inputs, params)
    find_duplicates(inputs, folder / "stage", params, partitions, "first", folder / "c.parquet", in_process, PARTITIONS)
    shutil.rmtree(folder)
    return cpu_seconds() - c


def run_ours(work_dir: Path, shards: list[Path], steps: bool = False, warm: bool = False) -> None:
    """One timed run of our stage into a fresh ``work_dir``; prints its report as a JSON line.
    With ``steps``, the peak RSS of each step is recorded too (for the memory runs); with
    ``warm``, the process first runs the stage on a few documents (:func:`warm_up`), untimed."""
    from pipeline.dedup.clusters import dedup_step
    from pipeline.dedup.engine import find_duplicates
    from pipeline.dedup.minhash import MinHashParams
    from pipeline.formats.documents import REMOVED_SCHEMA
    from pipeline.formats.step import docs_table
    from pipeline.io.writer import write_parquet
    from pipeline.stages.units import in_process

    params = MinHashParams(threshold=THRESHOLD, num_perm=NUM_PERM)
    shutil.rmtree(work_dir, ignore_errors=True)
    warm_up_cpu = warm_up(work_dir.parent / f"{work_dir.name}-warm-up", shards[0], params) if warm else None
    gc.collect()
    rss_start = rss_mib("VmRSS")
    peaks: dict[str, float] = {}
    run_units = peak_tracking_units(peaks) if steps else in_process
    partitions = stage_partitions(shards, params)
    c, w = cpu_seconds(), time.perf_counter()
    out = work_dir / "stage" / "clusters.parquet"
    find_duplicates(shards, work_dir / "stage", params, partitions, "first", out, run_units, PARTITIONS)
    clusters = pl.read_parquet(out)
    cpu_clusters, wall_clusters = cpu_seconds() - c, time.perf_counter() - w
    rss_clusters = max([rss_mib(), *peaks.values()])
    if steps:
        peaks["reading the clusters table"] = rss_mib()
        reset_peak()
    c, w = cpu_seconds(), time.perf_counter()
    kept = removed = 0
    for shard, path in enumerate(shards):
        step = dedup_step(clusters, params.threshold, shard=shard)
        result = step(pl.read_parquet(path))
        # written as the stage's unit writes them (pipeline.stages.shard.shard_unit): Arrow, zstd
        write_parquet(docs_table(result.kept), work_dir / "kept" / path.name)
        write_parquet(result.removed.to_arrow().cast(REMOVED_SCHEMA), work_dir / "removed" / path.name)
        kept += result.kept.height
        removed += result.removed.height
    cpu_apply, wall_apply = cpu_seconds() - c, time.perf_counter() - w
    if steps:
        peaks["dedup_step"] = rss_mib()
    print(
        json.dumps(
            {
                "step_peak_rss_mib": peaks,
                "warm_up_cpu_s": warm_up_cpu,
                "docs": kept + removed,
                "kept": kept,
                "removed": removed,
                "cpu_s": cpu_clusters,
                "wall_s": wall_clusters,
                "apply_cpu_s": cpu_apply,
                "apply_wall_s": wall_apply,
                "rss_after_imports_mib": rss_start,
                "peak_rss_clusters_mib": rss_clusters,
                "peak_rss_mib": max([rss_mib(), rss_clusters, *peaks.values()]),
                "bands": params.lsh[0],
                "rows": params.lsh[1],
                "partitions": partitions,
            }
        )
    )


def run_datasketch(out_dir: Path, shards: list[Path]) -> None:
    """datasketch's MinHash.bulk + MinHashLSH + components over the same shingles (prebuilt);
    writes the labels and the candidate pairs, prints its timing as a JSON line."""
    from datasketch import MinHash, MinHashLSH
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from pipeline.dedup.normalize import words

    out_dir.mkdir(parents=True, exist_ok=True)
    _, texts = read_texts(shards)
    doc_words = words(texts).strings()
    shingles = [[" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))] if w else [] for w in doc_words]
    present = [i for i, s in enumerate(shingles) if s]
    shingles = [shingles[i] for i in present]
    n = len(doc_words)
    del doc_words
    gc.collect()
    gc.freeze()  # millions of prebuilt shingles: keep the collector from walking them while timed
    c, w = cpu_seconds(), time.perf_counter()
    sketches = MinHash.bulk(shingles, num_perm=NUM_PERM, seed=1)
    cpu_sketch = cpu_seconds() - c
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    with lsh.insertion_session() as session:
        for key, sketch in zip(present, sketches):
            session.insert(key, sketch, check_duplication=False)
    left, right = [], []
    for key, sketch in zip(present, sketches):
        for other in lsh.query(sketch):
            if other > key:
                left.append(key)
                right.append(other)
    a, b = np.array(left, np.int64), np.array(right, np.int64)
    graph = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=False)
    cpu_all, wall_all = cpu_seconds() - c, time.perf_counter() - w
    np.save(out_dir / "labels.npy", labels.astype(np.int64))
    np.save(out_dir / "pairs.npy", np.stack([a, b]))
    print(
        json.dumps(
            {
                "docs": n,
                "docs_with_shingles": len(present),
                "cpu_s": cpu_all,
                "wall_s": wall_all,
                "sketch_cpu_s": cpu_sketch,
                "candidate_pairs": len(a),
                "bands": lsh.b,
                "rows": lsh.r,
                "peak_rss_mib": rss_mib(),
            }
        )
    )


def datatrove_run(shards: list[Path], out_dir: Path, limit: int | None, mode: str) -> dict:
    """datatrove's four stages over the shards' folder in its own process (``mode``: "twice", a
    cold and a warm run over the documents; "warm-up", a timed run after an untimed one over
    :data:`WARM_UP_DOCS` documents); its report."""
    python = peer_python("datatrove-minhash", PEER_PACKAGES, PEER_MODULES)
    for folder in (out_dir, f"{out_dir}-warm", f"{out_dir}-warm-up"):
        shutil.rmtree(folder, ignore_errors=True)
    command = [python, "-c", PEER_SCRIPT, str(shards[0].parent), str(out_dir), str(limit or -1), mode]
    done = subprocess.run([*command, str(WARM_UP_DOCS)], capture_output=True, text=True, cwd=ROOT)
    return last_json(done, "datatrove")


def datatrove_side(shards: list[Path], out_dir: Path, limit: int | None) -> dict:
    """datatrove's four stages over the shards' folder, twice in one process (cold, then warm: the
    second run's CPU seconds in ``warm_cpu_s``); returns its report, its clusters (a label per
    document, read order, from the first run) and its duplicate pairs."""
    report = datatrove_run(shards, out_dir, limit, "twice")
    kept = pq.read_table(sorted((out_dir / "kept").glob("*.parquet")), columns=["id", "metadata"])
    removed_files = sorted((out_dir / "removed").glob("*.parquet"))
    removed = pq.read_table(removed_files, columns=["id", "metadata"]) if removed_files else None
    both = pa.concat_tables([kept, removed]) if removed is not None else kept
    report["kept"], report["removed"] = kept.num_rows, (removed.num_rows if removed is not None else 0)
    ids = both.column("id").to_pylist()
    cluster = np.array([m.get("minhash_cluster_id", -1) for m in both.column("metadata").to_pylist()], np.int64)
    # duplicate pairs: (file, doc, file, doc) uint32, doc = position in the read order (one task)
    raw = b"".join(p.read_bytes() for p in sorted((out_dir / "buckets").glob("*.dups")))
    quads = np.frombuffer(raw, dtype="<u4").reshape(-1, 4).astype(np.int64)
    remove_files = sorted((out_dir / "remove_ids").glob("*.remove"))
    remove_idx = np.frombuffer(b"".join(p.read_bytes() for p in remove_files), dtype="<u4").astype(np.int64)
    return {
        "report": report,
        "ids": ids,
        "cluster": cluster,
        "pairs": (quads[:, 1], quads[:, 3]),
        "remove_idx": remove_idx,
        "removed_ids": set(removed.column("id").to_pylist()) if removed is not None else set(),
    }


def rensa_side(texts: pa.ChunkedArray, out_dir: Path) -> dict:
    """rensa's R-MinHash + its LSH over the same shingles as datasketch's (our words of ``texts``,
    five by five), in its own virtualenv with one thread; returns its report, its labels and its
    kept pairs."""
    from pipeline.dedup.normalize import words

    python = peer_python("rensa-stage", RENSA_PACKAGES, ["rensa", "numpy", "scipy"])
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    (out_dir / "words.json").write_text(json.dumps([" ".join(w) for w in words(texts).strings()]), encoding="utf-8")
    command = [python, "-c", RENSA_SCRIPT, str(out_dir / "words.json"), str(out_dir), str(THRESHOLD)]
    done = subprocess.run([*command, str(NUM_PERM), str(RENSA_BANDS)], capture_output=True, text=True, cwd=ROOT)
    return {
        "report": last_json(done, "rensa"),
        "labels": np.load(out_dir / "labels.npy"),
        "pairs": np.load(out_dir / "pairs.npy"),
    }


def subprocess_side(mode: str, out: Path, shards: list[Path]) -> dict:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), mode, str(out), *map(str, shards)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return last_json(done, mode)


# --------------------------------------------------------------------------
# Diagnostics of ours
# --------------------------------------------------------------------------


def verified_edges(work: Path) -> pl.DataFrame:
    """The pairs our verification found at or above the threshold (``doc_a``, ``doc_b``,
    ``jaccard``): the routed hops' measured files in the stage's work folder (the layout of
    pipeline.dedup.layout)."""
    files = sorted((work / "verify" / "measured").glob("*.parquet"))
    if not files:
        raise SystemExit(f"no verified edges under {work / 'verify' / 'measured'}")
    return pl.concat([pl.read_parquet(p, columns=["doc_a", "doc_b", "jaccard"]) for p in files])


def our_band_keys(stage_dir: Path, shard_sizes: list[int]) -> np.ndarray:
    """``(documents, bands)`` band keys from our signature files, rows in the global order."""
    starts = np.concatenate([[0], np.cumsum(shard_sizes)])
    pieces = []
    for path in sorted((stage_dir / "signatures").glob("shard-*.parquet")):
        table = pq.read_table(path, columns=["doc", "band_keys"])
        width = table.schema.field("band_keys").type.list_size
        keys = table.column("band_keys").combine_chunks().flatten().to_numpy().reshape(-1, width)
        doc = table.column("doc").to_numpy()
        pieces.append((starts[doc >> 32] + (doc & 0xFFFFFFFF), keys))
    width = pieces[0][1].shape[1]
    out = np.zeros((int(starts[-1]), width), np.uint64)
    for rows, keys in pieces:
        out[rows] = keys
    return out


# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------


def near_copy_shards() -> list[Path]:
    """The near-copies benchmark's document shards (made once): every real news article and
    :data:`NEAR_COPIES` near copies of it, shuffled."""
    folder = CACHE / f"near-copies-{NEAR_COPIES}-{NEAR_EDIT_RATES[0]}-{NEAR_EDIT_RATES[1]}-{SEED}"
    manifest = folder / "manifest.json"
    if manifest.exists():
        names = json.loads(manifest.read_text())["shards"]
        if all((folder / n).exists() for n in names):
            return [folder / n for n in names]
    from demo.noise import perturb
    from demo.real_text import load_real_text

    print("Building the near-copies corpus; reused afterwards", file=sys.stderr)
    rng = np.random.default_rng(SEED)
    ids, texts, rates = [], [], []
    for i, article in enumerate(load_real_text().news):
        ids.append(f"news-{i:05d}")
        texts.append(article.text)
        rates.append(0.0)
        for k in range(NEAR_COPIES):
            rate = float(rng.uniform(*NEAR_EDIT_RATES))
            ids.append(f"news-{i:05d}-copy-{k}")
            texts.append(perturb(article.text, rate, rng))
            rates.append(rate)
    order = rng.permutation(len(ids))
    table = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "text": pa.array(texts, pa.large_string()),
            "source": pa.array(["news"] * len(ids), pa.string()),
            "edit_rate": pa.array(rates, pa.float64()),
        }
    ).take(pa.array(order))
    names = write_shards(table, folder)
    manifest.write_text(
        json.dumps({"docs": table.num_rows, "articles": len(ids) // (NEAR_COPIES + 1), "shards": names}, indent=2)
        + "\n"
    )
    return [folder / n for n in names]


def run_layout(work_dir: Path, shards: list[Path], params) -> dict:
    """One timed run of our finding of duplicates (``find_duplicates``) in this process with
    ``params``: CPU and wall seconds, verification's share, candidate pairs and false positives."""
    from pipeline.dedup.engine import find_duplicates
    from pipeline.dedup.layout import VERIFY

    verify_cpu = 0.0

    def timed_units(label, fn, jobs):
        nonlocal verify_cpu
        c = cpu_seconds()
        results = [fn(job) for job in jobs]
        if fn.__name__.startswith("measure_") and jobs and jobs[0].pass_name == VERIFY:
            verify_cpu += cpu_seconds() - c
        return results

    shutil.rmtree(work_dir, ignore_errors=True)
    gc.collect()
    c, w = cpu_seconds(), time.perf_counter()
    partitions = stage_partitions(shards, params)
    finding = find_duplicates(
        shards, work_dir, params, partitions, "first", work_dir / "clusters.parquet", timed_units, PARTITIONS
    )
    cpu, wall = cpu_seconds() - c, time.perf_counter() - w
    counts = {key: finding[key] for key in ("candidate_pairs", "edges", "false_positives")}
    clusters = pl.read_parquet(work_dir / "clusters.parquet")
    return {"cpu_s": cpu, "wall_s": wall, **counts, "verify_cpu_s": verify_cpu, "clusters": clusters}


def near_copies_benchmark() -> None:
    from pipeline.dedup.minhash import MinHashParams

    shards = near_copy_shards()
    ids, texts = read_texts(shards)
    n = len(ids)
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    c = time.process_time()
    sets = Shingles(texts)
    truth = ground_truth(sets, THRESHOLD)
    truth_cpu = time.process_time() - c
    truth_scores = pair_scores(truth["labels"], truth["labels"])
    print(
        f"{n} documents ({n // (NEAR_COPIES + 1)} articles, {NEAR_COPIES} near copies each) in {len(shards)} "
        f"shards; {len(truth['a'])} pairs reach {THRESHOLD}, {bin_counts(truth['similarity'])}",
        file=sys.stderr,
    )

    layouts = {
        "old": MinHashParams(threshold=THRESHOLD, num_perm=NUM_PERM, bands=OLD_LAYOUT[0], rows=OLD_LAYOUT[1]),
        "low": MinHashParams(threshold=THRESHOLD, num_perm=NUM_PERM, recall=LOW_RECALL),
        "new": MinHashParams(threshold=THRESHOLD, num_perm=NUM_PERM),
    }
    shard_sizes = [pq.ParquetFile(p).metadata.num_rows for p in shards]
    runs: dict[str, list[dict]] = {name: [] for name in layouts}
    for attempt in range(LAYOUT_REPEATS):
        for name, params in layouts.items():
            runs[name].append(run_layout(CACHE / "work" / f"near-{name}", shards, params))
            print(
                f"{name} {params.lsh[0]} x {params.lsh[1]}, run {attempt + 1}: {runs[name][-1]['cpu_s']:.2f} CPU s "
                f"(verification {runs[name][-1]['verify_cpu_s']:.2f})",
                file=sys.stderr,
            )

    result = {
        "docs": n,
        "articles": n // (NEAR_COPIES + 1),
        "near_copies_per_article": NEAR_COPIES,
        "edit_rates": list(NEAR_EDIT_RATES),
        "shards": len(shards),
        "dedup_partitions": PARTITIONS,
        "threshold": THRESHOLD,
        "num_perm": NUM_PERM,
        "true_pairs_at_threshold": len(truth["a"]),
        "true_pairs_by_similarity": bin_counts(truth["similarity"]),
        "true_cluster_pairs": truth_scores["pairs_true"],
        "ground_truth_cpu_s": truth_cpu,
    }
    print()
    print(
        f"{'layout':18} {'P(cand) at 0.8':>14} {'CPU s':>7} {'verify s':>8} {'candidates':>10} {'dropped':>8} "
        f"{'precision':>9} {'recall':>7} {'F1':>7} {'recall 0.80-0.85':>17} {'missed (in a bucket)':>20}"
    )
    for name, params in layouts.items():
        best = min(runs[name], key=lambda r: r["cpu_s"])
        clusters = best["clusters"]
        members = np.array([index[i] for i in clusters["id"].to_list()], np.int64)
        labels = labels_from_members(n, members, clusters["cluster"].to_numpy())
        scores = pair_scores(labels, truth["labels"])
        bins = true_pair_recall(truth, labels)
        edge = bins["0.80-0.85"]
        bands, rows = params.lsh
        # Missed true pairs that share a band key were in one LSH bucket and lost after it:
        # candidate_pairs pairs each member of a large bucket with its first document only.
        missed = labels[truth["a"]] != labels[truth["b"]]
        keys = our_band_keys(CACHE / "work" / f"near-{name}", shard_sizes)
        miss_a, miss_b = truth["a"][missed], truth["b"][missed]
        shares_band = (keys[miss_a] == keys[miss_b]).any(axis=1)
        kept = np.array([index[i] for i in clusters["kept_id"].to_list()], np.int64)
        more_a = np.concatenate([members, miss_a[shares_band]])  # each member with its kept document
        more_b = np.concatenate([kept, miss_b[shares_band]])
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        graph = coo_matrix((np.ones(len(more_a), np.int8), (more_a, more_b)), shape=(n, n)).tocsr()
        all_pairs = pair_scores(connected_components(graph, directed=False)[1], truth["labels"])
        result.update(
            {
                f"{name}_layout": f"{bands}x{rows}",
                f"{name}_bands": bands,
                f"{name}_rows": rows,
                f"{name}_candidate_probability_at_threshold": params.candidate_probability,
                f"{name}_cpu_s": best["cpu_s"],
                f"{name}_wall_s": best["wall_s"],
                f"{name}_cpu_s_runs": [round(r["cpu_s"], 3) for r in runs[name]],
                f"{name}_verify_cpu_s": best["verify_cpu_s"],
                f"{name}_candidate_pairs": best["candidate_pairs"],
                f"{name}_false_positives": best["false_positives"],
                f"{name}_precision": scores["precision"],
                f"{name}_recall": scores["recall"],
                f"{name}_f1": scores["f1"],
                f"{name}_removed": scores["removed"],
                f"{name}_true_pair_recall_080_085": edge["found"] / edge["pairs"] if edge["pairs"] else 1.0,
                f"{name}_true_pair_recall_by_similarity": bins,
                f"{name}_true_pairs_missed": int(missed.sum()),
                f"{name}_missed_sharing_a_band": int(shares_band.sum()),
                f"{name}_f1_if_buckets_all_pairs": all_pairs["f1"],
            }
        )
        print(
            f"{name + f' {bands} x {rows}':18} {params.candidate_probability:14.4f} {best['cpu_s']:7.2f} "
            f"{best['verify_cpu_s']:8.2f} {best['candidate_pairs']:10d} {best['false_positives']:8d} "
            f"{scores['precision']:9.4f} {scores['recall']:7.4f} {scores['f1']:7.4f} "
            f"{edge['found']:>8}/{edge['pairs']:<8} {int(missed.sum()):>10} ({int(shares_band.sum())})"
        )
    result["time_ratio_new_vs_old"] = result["new_cpu_s"] / result["old_cpu_s"]
    result["verify_time_ratio_new_vs_old"] = result["new_verify_cpu_s"] / max(result["old_verify_cpu_s"], 1e-9)
    result["candidate_ratio_new_vs_old"] = result["new_candidate_pairs"] / max(result["old_candidate_pairs"], 1)
    result["time_ratio_low_vs_old"] = result["low_cpu_s"] / result["old_cpu_s"]
    print(
        f"\ntrue pairs: {result['true_pairs_by_similarity']}; the default costs "
        f"{result['time_ratio_new_vs_old']:.3f}x the former's CPU time "
        f"({result['candidate_ratio_new_vs_old']:.2f}x the candidate pairs), recall {LOW_RECALL} "
        f"{result['time_ratio_low_vs_old']:.3f}x; F1 if every pair of a bucket were verified: "
        + ", ".join(f"{k} {result[f'{k}_f1_if_buckets_all_pairs']:.4f}" for k in layouts)
    )
    print(json.dumps(rounded(result)))


def tiny_benchmark() -> None:
    """Our side only, on a small demo corpus in a temporary folder, read back as ``peers`` reads
    it (clusters table, verified edges, band keys) and scored against the exact truth: what the
    test runs, so that a change to the stage's files that ``peers`` reads fails there."""
    with tempfile.TemporaryDirectory() as scratch:
        shards = base_shards(TINY_DOCS, Path(scratch))
        shard_sizes = [pq.ParquetFile(p).metadata.num_rows for p in shards]
        ids, texts = read_texts(shards)
        index = {doc_id: i for i, doc_id in enumerate(ids)}
        sets = Shingles(texts)
        truth = ground_truth(sets, THRESHOLD)
        work = Path(scratch) / "work"
        ours = subprocess_side("ours", work / "ours", shards)
        clusters = pl.read_parquet(work / "ours" / "stage" / "clusters.parquet")
        members = np.array([index[i] for i in clusters["id"].to_list()], np.int64)
        scores = pair_scores(labels_from_members(len(ids), members, clusters["cluster"].to_numpy()), truth["labels"])
        edges = verified_edges(work / "ours" / "stage")
        starts = np.concatenate([[0], np.cumsum(shard_sizes)])
        a, b = (starts[d >> 32] + (d & 0xFFFFFFFF) for d in (edges["doc_a"].to_numpy(), edges["doc_b"].to_numpy()))
        differ = float(np.abs(sets.jaccard(a, b) - edges["jaccard"].to_numpy()).max()) if edges.height else 0.0
        keys = our_band_keys(work / "ours" / "stage", shard_sizes)
    result = {
        "benchmark": "dedup_stage",
        "mode": "tiny",
        "docs": len(ids),
        "true_pairs": len(truth["a"]),
        "edges": edges.height,
        "ours_f1": scores["f1"],
        "ours_precision": scores["precision"],
        "ours_recall": scores["recall"],
        "ours_edge_similarity_max_difference": differ,
        "band_keys_shape": list(keys.shape),
        "ours_docs_per_cpu_s": len(ids) / ours["cpu_s"],
    }
    print(json.dumps(rounded(result)))


def main() -> None:
    if len(sys.argv) == 1:
        near_copies_benchmark()
    elif sys.argv[1:] == ["peers"]:
        peers_benchmark()
    elif sys.argv[1:] == ["tiny"]:
        tiny_benchmark()
    else:
        mode, out, shards = sys.argv[1], Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]]
        if mode == "ours-steps":
            run_ours(out, shards, steps=True)
        elif mode == "ours-warm":
            run_ours(out, shards, warm=True)
        else:
            {"ours": run_ours, "datasketch": run_datasketch}[mode](out, shards)


def peers_benchmark() -> None:
    shards = base_shards()
    shard_sizes = [pq.ParquetFile(p).metadata.num_rows for p in shards]
    ids, texts = read_texts(shards)
    n = len(ids)
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    c = time.process_time()
    sets = Shingles(texts)
    truth = ground_truth(sets, THRESHOLD)
    truth_cpu = time.process_time() - c
    print(
        f"{n} documents in {len(shards)} shards; ground truth in {truth_cpu:.1f} CPU s: "
        f"{truth['sharing_pairs']} pairs share a shingle, {len(truth['a'])} reach {THRESHOLD}",
        file=sys.stderr,
    )
    truth_scores = pair_scores(truth["labels"], truth["labels"])

    # ours, best of OUR_REPEATS
    work = CACHE / "work"
    # Cold (a fresh process: numba's import and the loading of its cached loops included) and warm
    # (after the process ran the stage on a few documents, untimed: what a document costs once a
    # process has loaded the compiled loops), alternating, OUR_REPEATS each; the best of each.
    ours_runs, warm_runs = [], []
    for attempt in range(OUR_REPEATS):
        ours_runs.append(subprocess_side("ours", work / "ours", shards))
        warm_runs.append(subprocess_side("ours-warm", work / "ours-warm", shards))
        print(
            f"ours run {attempt + 1}: cold {ours_runs[-1]['cpu_s']:.2f} CPU s (+{ours_runs[-1]['apply_cpu_s']:.2f} "
            f"filtering), peak RSS {ours_runs[-1]['peak_rss_mib']:.0f} MiB; warm {warm_runs[-1]['cpu_s']:.2f} "
            f"(+{warm_runs[-1]['apply_cpu_s']:.2f}) after a warm-up of {WARM_UP_DOCS} documents "
            f"({warm_runs[-1]['warm_up_cpu_s']:.2f} CPU s)",
            file=sys.stderr,
        )
    ours = min(ours_runs, key=lambda r: r["cpu_s"])
    ours["apply_cpu_s"] = min(r["apply_cpu_s"] for r in ours_runs)
    ours_warm = min(warm_runs, key=lambda r: r["cpu_s"] + r["apply_cpu_s"])
    clusters = pl.read_parquet(work / "ours" / "stage" / "clusters.parquet")
    members = np.array([index[i] for i in clusters["id"].to_list()], np.int64)
    ours_labels = labels_from_members(n, members, clusters["cluster"].to_numpy())
    ours_scores = pair_scores(ours_labels, truth["labels"])
    edges = verified_edges(work / "ours" / "stage")

    # datasketch
    print("datasketch ...", file=sys.stderr)
    sketch = subprocess_side("datasketch", work / "datasketch", shards)
    sketch_labels = np.load(work / "datasketch" / "labels.npy")
    sketch_pairs = np.load(work / "datasketch" / "pairs.npy")
    sketch_scores = pair_scores(sketch_labels, truth["labels"])

    # rensa
    print("rensa ...", file=sys.stderr)
    rensa = rensa_side(texts, work / "rensa")  # the texts read above
    rensa_scores = pair_scores(rensa["labels"], truth["labels"])

    # datatrove (all documents, or its first DATATROVE_DOCS in read order)
    print("datatrove ...", file=sys.stderr)
    trove_docs = min(DATATROVE_DOCS or n, n)
    trove = datatrove_side(shards, work / "datatrove", DATATROVE_DOCS)
    trove_truth = truth if trove_docs == n else ground_truth(sets, THRESHOLD, trove_docs)
    trove_members = np.array([index[i] for i, cl in zip(trove["ids"], trove["cluster"]) if cl >= 0], np.int64)
    trove_labels = labels_from_members(trove_docs, trove_members, trove["cluster"][trove["cluster"] >= 0])
    trove_scores = pair_scores(trove_labels, trove_truth["labels"])
    trove_index_check = {ids[i] for i in trove["remove_idx"]} == trove["removed_ids"] and len(
        trove["ids"]
    ) == trove_docs
    trove_cpu = sum(trove["report"]["cpu_s"].values())
    trove_cpu_clusters = sum(v for k, v in trove["report"]["cpu_s"].items() if k != "filter")

    # Where the errors are
    ours_recall_bins = true_pair_recall(truth, ours_labels)
    sketch_recall_bins = true_pair_recall(truth, sketch_labels)
    rensa_recall_bins = true_pair_recall(truth, rensa["labels"])
    trove_recall_bins = true_pair_recall(trove_truth, trove_labels)
    starts = np.concatenate([[0], np.cumsum(shard_sizes)])

    def rows_of(doc: np.ndarray) -> np.ndarray:
        return starts[doc >> 32] + (doc & 0xFFFFFFFF)

    ours_edge_similarity = sets.jaccard(rows_of(edges["doc_a"].to_numpy()), rows_of(edges["doc_b"].to_numpy()))
    ours_edges_differ = float(np.abs(ours_edge_similarity - edges["jaccard"].to_numpy()).max()) if edges.height else 0.0
    sketch_similarity = sets.jaccard(sketch_pairs[0], sketch_pairs[1])
    rensa_similarity = sets.jaccard(rensa["pairs"][0], rensa["pairs"][1])
    trove_a, trove_b = trove["pairs"]
    trove_similarity = sets.jaccard(trove_a, trove_b)

    missed = ours_labels[truth["a"]] != ours_labels[truth["b"]]
    band_keys = our_band_keys(work / "ours" / "stage", shard_sizes)
    miss_a, miss_b = truth["a"][missed], truth["b"][missed]
    shares_band = (band_keys[miss_a] == band_keys[miss_b]).any(axis=1)
    missed_pairs = {
        "true_pairs_missed": int(missed.sum()),
        "missed_sharing_a_band": int(shares_band.sum()),
        "missed_by_similarity": bin_counts(truth["similarity"][missed]),
        "missed_sharing_a_band_by_similarity": bin_counts(truth["similarity"][missed][shares_band]),
        "missed_examples_sharing_a_band": [
            [ids[int(a)], ids[int(b)], round(float(s), 4)]
            for a, b, s in zip(
                miss_a[shares_band][:5], miss_b[shares_band][:5], truth["similarity"][missed][shares_band][:5]
            )
        ],
    }
    # The same edges plus the missed true pairs that share a band key: what verifying every pair
    # of each LSH bucket, not only each member of a large one with its first document, would give.
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    more_a = np.concatenate([rows_of(edges["doc_a"].to_numpy()), miss_a[shares_band]])
    more_b = np.concatenate([rows_of(edges["doc_b"].to_numpy()), miss_b[shares_band]])
    graph = coo_matrix((np.ones(len(more_a), np.int8), (more_a, more_b)), shape=(n, n)).tocsr()
    all_pairs_scores = pair_scores(connected_components(graph, directed=False)[1], truth["labels"])
    bands, rows = ours["bands"], ours["rows"]
    lsh_probability = {f"{s:.2f}": round(1 - (1 - s**rows) ** bands, 4) for s in (0.8, 0.85, 0.9, 0.95)}

    # Memory and speed at scale
    memory = {}
    for size in MEMORY_SIZES:
        scaled = scaled_shards(shards, size)
        run = subprocess_side("ours-steps", work / f"ours-{size}", scaled)
        shutil.rmtree(work / f"ours-{size}", ignore_errors=True)
        memory[size] = run
        print(
            f"ours at {size}: {run['cpu_s']:.1f} CPU s, peak RSS {run['peak_rss_mib']:.0f} MiB "
            f"(after imports {run['rss_after_imports_mib']:.0f})",
            file=sys.stderr,
        )

    # Speed at 200k, warm as above, clusters table and filtering step, alternating with the 21,510
    # documents' warm run so that both meet the same load; best of OUR_REPEATS each.
    largest = max(MEMORY_SIZES)
    scaled = scaled_shards(shards, largest)
    scaled_runs = []
    for _ in range(OUR_REPEATS):
        scaled_runs.append(subprocess_side("ours-warm", work / f"ours-warm-{largest}", scaled))
        warm_runs.append(subprocess_side("ours-warm", work / "ours-warm", shards))
        print(
            f"ours at {largest}, warm: {scaled_runs[-1]['cpu_s']:.2f} CPU s (+{scaled_runs[-1]['apply_cpu_s']:.2f} "
            f"filtering); at {n}: {warm_runs[-1]['cpu_s']:.2f} (+{warm_runs[-1]['apply_cpu_s']:.2f})",
            file=sys.stderr,
        )
    shutil.rmtree(work / f"ours-warm-{largest}", ignore_errors=True)
    scaled_best = min(scaled_runs, key=lambda r: r["cpu_s"] + r["apply_cpu_s"])
    # datatrove on the same documents, after a warm-up of WARM_UP_DOCS documents as ours (once: it
    # takes minutes)
    print(f"datatrove at {largest} ...", file=sys.stderr)
    trove_scaled = datatrove_run(scaled, work / f"datatrove-{largest}", None, "warm-up")
    for folder in (work / f"datatrove-{largest}", work / f"datatrove-{largest}-warm-up"):
        shutil.rmtree(folder, ignore_errors=True)
    ours_warm = min(warm_runs, key=lambda r: r["cpu_s"] + r["apply_cpu_s"])

    # Report
    ours_rate = n / ours["cpu_s"]
    ours_full_rate = n / (ours["cpu_s"] + ours["apply_cpu_s"])
    sketch_rate = sketch["docs"] / sketch["cpu_s"]
    rensa_rate = rensa["report"]["docs"] / rensa["report"]["cpu_s"]
    trove_rate = trove_docs / trove_cpu
    trove_clusters_rate = trove_docs / trove_cpu_clusters
    trove_warm_cpu = sum(trove["report"]["warm_cpu_s"].values())
    trove_warm_rate = trove_docs / trove_warm_cpu
    ours_warm_full = ours_warm["cpu_s"] + ours_warm["apply_cpu_s"]
    scaled_full = scaled_best["cpu_s"] + scaled_best["apply_cpu_s"]
    scaled_rate = scaled_best["docs"] / scaled_full
    trove_scaled_cpu = sum(trove_scaled["warm_cpu_s"].values())
    trove_scaled_rate = scaled_best["docs"] / trove_scaled_cpu
    rows_out = [
        (
            "ours (clusters table)",
            n,
            ours["cpu_s"],
            ours["wall_s"],
            ours_rate,
            ours["peak_rss_clusters_mib"],
            ours_scores,
        ),
        (
            "ours + filtering step",
            n,
            ours["cpu_s"] + ours["apply_cpu_s"],
            ours["wall_s"] + ours["apply_wall_s"],
            ours_full_rate,
            ours["peak_rss_mib"],
            ours_scores,
        ),
        (
            "ours, warm process",
            n,
            ours_warm["cpu_s"],
            ours_warm["wall_s"],
            n / ours_warm["cpu_s"],
            ours_warm["peak_rss_clusters_mib"],
            ours_scores,
        ),
        (
            "ours + filtering, warm",
            n,
            ours_warm_full,
            ours_warm["wall_s"] + ours_warm["apply_wall_s"],
            n / ours_warm_full,
            ours_warm["peak_rss_mib"],
            ours_scores,
        ),
        (
            f"ours + filtering, {largest // 1000}k warm",
            scaled_best["docs"],
            scaled_full,
            scaled_best["wall_s"] + scaled_best["apply_wall_s"],
            scaled_best["docs"] / scaled_full,
            scaled_best["peak_rss_mib"],
            None,
        ),
        (
            "datasketch bulk+LSH",
            sketch["docs"],
            sketch["cpu_s"],
            sketch["wall_s"],
            sketch_rate,
            sketch["peak_rss_mib"],
            sketch_scores,
        ),
        (
            "rensa R-MinHash+LSH",
            rensa["report"]["docs"],
            rensa["report"]["cpu_s"],
            rensa["report"]["wall_s"],
            rensa_rate,
            rensa["report"]["peak_rss_mib"],
            rensa_scores,
        ),
        (
            "datatrove stages 1-3",
            trove_docs,
            trove_cpu_clusters,
            sum(v for k, v in trove["report"]["wall_s"].items() if k != "filter"),
            trove_clusters_rate,
            trove["report"]["peak_rss_mib"],
            trove_scores,
        ),
        (
            "datatrove stages 1-4",
            trove_docs,
            trove_cpu,
            sum(trove["report"]["wall_s"].values()),
            trove_rate,
            trove["report"]["peak_rss_mib"],
            trove_scores,
        ),
        (
            "datatrove 1-4, warm",
            trove_docs,
            trove_warm_cpu,
            sum(trove["report"]["warm_wall_s"].values()),
            trove_warm_rate,
            trove["report"]["peak_rss_mib"],
            trove_scores,
        ),
        (
            f"datatrove 1-4, {largest // 1000}k warm",
            scaled_best["docs"],
            trove_scaled_cpu,
            sum(trove_scaled["warm_wall_s"].values()),
            trove_scaled_rate,
            trove_scaled["peak_rss_mib"],
            None,
        ),
    ]
    print()
    print(
        f"{'side':24} {'docs':>7} {'CPU s':>8} {'wall s':>8} {'docs/s/core':>12} {'peak MiB':>9} "
        f"{'clusters':>8} {'removed':>8} {'precision':>9} {'recall':>7} {'F1':>7}"
    )
    for name, docs, cpu, wall, rate, peak, sc in rows_out:
        scored = (
            f"{sc['clusters']:8d} {sc['removed']:8d} {sc['precision']:9.4f} {sc['recall']:7.4f} {sc['f1']:7.4f}"
            if sc
            else ""
        )
        print(f"{name:24} {docs:7d} {cpu:8.2f} {wall:8.2f} {rate:12,.0f} {peak:9.0f} {scored}")
    print(
        f"both warm, ours + filtering against datatrove's four stages: {n / ours_warm_full / trove_warm_rate:.1f}x "
        f"at {n} documents, {scaled_rate / trove_scaled_rate:.1f}x at {largest} ({scaled_rate / trove_warm_rate:.1f}x "
        f"ours at {largest} against datatrove at {n}); both cold at {n}: {ours_full_rate / trove_rate:.1f}x"
    )
    print(
        f"{'ground truth':24} {n:7d} {truth_cpu:8.2f} {'':8} {'':12} {'':9} {truth_scores['clusters']:8d} "
        f"{truth_scores['removed']:8d}   ({truth_scores['pairs_true']} pairs in true clusters, "
        f"{len(truth['a'])} pairs >= {THRESHOLD})"
    )
    print()
    print("true pairs (similar themselves) put in one cluster, by similarity: found/pairs")
    for name, bins in (
        ("ours", ours_recall_bins),
        ("datasketch", sketch_recall_bins),
        ("rensa", rensa_recall_bins),
        ("datatrove", trove_recall_bins),
    ):
        print(f"  {name:11} " + "  ".join(f"{k}: {v['found']}/{v['pairs']}" for k, v in bins.items()))
    print(
        f"  LSH candidate probability ({bands} bands x {rows} rows): "
        + ", ".join(f"s={k}: {v}" for k, v in lsh_probability.items())
    )
    print(
        f"ours: {missed_pairs['true_pairs_missed']} true pairs missed, {missed_pairs['missed_sharing_a_band']} "
        f"of them sharing an LSH band key; by similarity {missed_pairs['missed_by_similarity']}"
    )
    print(
        f"ours if every pair of a bucket were verified: recall {all_pairs_scores['recall']:.4f}, "
        f"F1 {all_pairs_scores['f1']:.4f}"
    )
    print("methods' own pairs by exact similarity:")
    print(f"  ours verified edges {edges.height}: {bin_counts(ours_edge_similarity)}")
    print(f"  datasketch candidates {len(sketch_similarity)}: {bin_counts(sketch_similarity)}")
    print(f"  rensa pairs kept {len(rensa_similarity)}: {bin_counts(rensa_similarity)}")
    print(f"  datatrove duplicate pairs {len(trove_similarity)}: {bin_counts(trove_similarity)}")
    print(
        f"memory, ours (clusters table + filtering step), shards of {MEMORY_SHARD_DOCS}, dedup.partitions {PARTITIONS}:"
    )
    for size, run in memory.items():
        print(
            f"  {size:7d} docs, {run['partitions']} partitions: peak RSS {run['peak_rss_mib']:6.0f} MiB "
            f"(after imports {run['rss_after_imports_mib']:.0f}, "
            f"clusters table {run['peak_rss_clusters_mib']:.0f}); {run['cpu_s']:.1f} CPU s, "
            f"{size / run['cpu_s']:,.0f} docs/s/core; removed {run['removed']}"
        )
        print("           step peaks: " + ", ".join(f"{k} {v:.0f}" for k, v in run["step_peak_rss_mib"].items()))

    result = {
        "docs": n,
        "shards": len(shards),
        "partitions": ours["partitions"],
        "dedup_partitions": PARTITIONS,
        "threshold": THRESHOLD,
        "num_perm": NUM_PERM,
        "bands": bands,
        "rows": rows,
        "corpus_docs": CORPUS_DOCS,
        "true_pairs_at_threshold": len(truth["a"]),
        "true_cluster_pairs": truth_scores["pairs_true"],
        "true_clusters": truth_scores["clusters"],
        "true_removable": truth_scores["removed"],
        "ground_truth_cpu_s": truth_cpu,
        "ours_cpu_s": ours["cpu_s"],
        "ours_wall_s": ours["wall_s"],
        "ours_docs_per_s_per_core": ours_rate,
        "ours_filter_step_cpu_s": ours["apply_cpu_s"],
        "ours_with_filter_docs_per_s_per_core": ours_full_rate,
        "ours_precision": ours_scores["precision"],
        "ours_recall": ours_scores["recall"],
        "ours_f1": ours_scores["f1"],
        "ours_clusters": ours_scores["clusters"],
        "ours_removed": ours_scores["removed"],
        "ours_peak_rss_mib": ours["peak_rss_mib"],
        "ours_warm_cpu_s": ours_warm["cpu_s"],
        "ours_warm_filter_step_cpu_s": ours_warm["apply_cpu_s"],
        "ours_warm_up_cpu_s": ours_warm["warm_up_cpu_s"],
        "ours_warm_docs_per_s_per_core": n / ours_warm["cpu_s"],
        "warm_speed_ratio_vs_rensa": (n / ours_warm["cpu_s"]) / rensa_rate,
        "datasketch_cpu_s": sketch["cpu_s"],
        "datasketch_sketch_cpu_s": sketch["sketch_cpu_s"],
        "datasketch_docs_per_s_per_core": sketch_rate,
        "datasketch_precision": sketch_scores["precision"],
        "datasketch_recall": sketch_scores["recall"],
        "datasketch_f1": sketch_scores["f1"],
        "datasketch_candidate_pairs": sketch["candidate_pairs"],
        "datasketch_candidates_below_threshold": int((sketch_similarity < THRESHOLD).sum()),
        "rensa_version": rensa["report"]["version"],
        "rensa_layout": f"{rensa['report']['bands']} bands x {rensa['report']['rows']} rows, "
        "candidates kept at estimated Jaccard >= threshold",
        "rensa_cpu_s": rensa["report"]["cpu_s"],
        "rensa_sketch_cpu_s": rensa["report"]["sketch_cpu_s"],
        "rensa_docs_per_s_per_core": rensa_rate,
        "rensa_precision": rensa_scores["precision"],
        "rensa_recall": rensa_scores["recall"],
        "rensa_f1": rensa_scores["f1"],
        "rensa_candidate_pairs": rensa["report"]["candidate_pairs"],
        "rensa_pairs_below_threshold": int((rensa_similarity < THRESHOLD).sum()),
        "rensa_peak_rss_mib": rensa["report"]["peak_rss_mib"],
        "datatrove_version": trove["report"]["version"],
        "datatrove_docs": trove_docs,
        "datatrove_config": f"{trove['report']['n_grams']}-grams, {trove['report']['buckets']} buckets x "
        f"{trove['report']['hashes_per_bucket']} hashes, sha1 64-bit",
        "datatrove_stage_cpu_s": trove["report"]["cpu_s"],
        "datatrove_cpu_s": trove_cpu,
        "datatrove_docs_per_s_per_core": trove_rate,
        "datatrove_clusters_docs_per_s_per_core": trove_clusters_rate,
        "datatrove_precision": trove_scores["precision"],
        "datatrove_recall": trove_scores["recall"],
        "datatrove_f1": trove_scores["f1"],
        "datatrove_removed": trove_scores["removed"],
        "datatrove_duplicate_pairs": len(trove_similarity),
        "datatrove_pairs_below_threshold": int((trove_similarity < THRESHOLD).sum()),
        "datatrove_read_order_check": bool(trove_index_check),
        "datatrove_peak_rss_mib": trove["report"]["peak_rss_mib"],
        "speed_ratio_vs_datasketch": ours_rate / sketch_rate,
        "speed_ratio_vs_rensa": ours_rate / rensa_rate,
        "speed_ratio_vs_datatrove": ours_full_rate / trove_rate,
        "datatrove_warm_stage_cpu_s": trove["report"]["warm_cpu_s"],
        "datatrove_warm_cpu_s": trove_warm_cpu,
        "datatrove_warm_docs_per_s_per_core": trove_warm_rate,
        "ours_warm_with_filter_cpu_s": ours_warm_full,
        "ours_warm_with_filter_cpu_s_runs": [round(r["cpu_s"] + r["apply_cpu_s"], 3) for r in warm_runs],
        "ours_cold_with_filter_cpu_s_runs": [round(r["cpu_s"] + r["apply_cpu_s"], 3) for r in ours_runs],
        "warm_speed_ratio_vs_datatrove": n / ours_warm_full / trove_warm_rate,
        f"ours_warm_with_filter_cpu_s_{largest // 1000}k": scaled_full,
        f"ours_warm_with_filter_cpu_s_{largest // 1000}k_runs": [
            round(r["cpu_s"] + r["apply_cpu_s"], 3) for r in scaled_runs
        ],
        f"ours_warm_with_filter_docs_per_s_per_core_{largest // 1000}k": scaled_rate,
        f"datatrove_warm_stage_cpu_s_{largest // 1000}k": trove_scaled["warm_cpu_s"],
        f"datatrove_warm_docs_per_s_per_core_{largest // 1000}k": trove_scaled_rate,
        f"speed_ratio_{largest // 1000}k_vs_datatrove_{largest // 1000}k": scaled_rate / trove_scaled_rate,
        f"speed_ratio_{largest // 1000}k_vs_datatrove_{n}": scaled_rate / trove_warm_rate,
        "clusters_speed_ratio_vs_datatrove": ours_rate / trove_clusters_rate,
        "ours_true_pairs_missed": missed_pairs["true_pairs_missed"],
        "ours_missed_pairs_sharing_a_band": missed_pairs["missed_sharing_a_band"],
        "ours_missed_by_similarity": missed_pairs["missed_by_similarity"],
        "ours_missed_examples_sharing_a_band": missed_pairs["missed_examples_sharing_a_band"],
        "ours_edge_similarity_max_difference": ours_edges_differ,
        "ours_recall_if_buckets_all_pairs": all_pairs_scores["recall"],
        "ours_f1_if_buckets_all_pairs": all_pairs_scores["f1"],
        "true_pair_recall_by_similarity": {
            "ours": ours_recall_bins,
            "datasketch": sketch_recall_bins,
            "rensa": rensa_recall_bins,
            "datatrove": trove_recall_bins,
        },
        "lsh_candidate_probability": lsh_probability,
        "ours_peak_rss_mib_50k": memory[50_000]["peak_rss_mib"],
        "ours_peak_rss_mib_100k": memory[100_000]["peak_rss_mib"],
        "ours_peak_rss_mib_200k": memory[200_000]["peak_rss_mib"],
        "ours_rss_after_imports_mib": memory[200_000]["rss_after_imports_mib"],
        "ours_step_peak_rss_mib_50k": memory[50_000]["step_peak_rss_mib"],
        "ours_step_peak_rss_mib_200k": memory[200_000]["step_peak_rss_mib"],
        "ours_docs_per_s_per_core_200k": 200_000 / memory[200_000]["cpu_s"],
        "ours_removed_200k": memory[200_000]["removed"],
    }
    if trove_docs != n:
        result["note"] = f"datatrove ran on the first {trove_docs} documents only"

    print(json.dumps(rounded(result)))


if __name__ == "__main__":
    main()
