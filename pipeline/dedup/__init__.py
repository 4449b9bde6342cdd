"""Deduplication: exact and near-duplicate documents (MinHash LSH), and repeated lines.

Glossary: the ways the finding of duplicates cuts its work, each word used for this one idea.

    shard      a document file the stage reads; a document's number is ``shard << 32 | row``
    block      consecutive shards (up to 16) signed by one unit, which writes one band-key file
               per partition for all of them
    partition  the band keys split by ``key % partitions``, so equal keys of every shard meet in
               one; a partition's keys give its candidate pairs
    group      consecutive shards of about 50,000 documents: the unit of every step that routes
               by document (the hops, the seed of the components, the members), so such a step
               writes a file per pair of groups, never per pair of shards
    pass       pairs measured where their shingle sets are, in two hops: ``verify`` (the
               candidate pairs, kept as edges when they reach the threshold) and ``similarity``
               (each clustered document with its cluster's kept document)
    hop        the first hop runs where ``doc_a`` is and sends the sets that ``doc_b``'s group
               needs on; the second hop, where ``doc_b`` is, measures those
    round      one Large-Star and one Small-Star half-round of the connected components, until a
               round changes nothing
    bucket     the documents ``doc % buckets`` of the component rounds: what one call of a
               half-round holds
    home       the components dealt by a hash of their name: where the keep rule runs over
               whole components
    unit       one task a runner runs (``pipeline.stages.units``): a block, a partition, a group,
               a home, or in the rounds a set of buckets (bucket b to unit ``b % units``)

A Parquet row group is always a "row group". The paths of the work folder are
:class:`~pipeline.dedup.layout.DedupWork`'s; the units and their typed jobs are in
:mod:`pipeline.dedup.jobs`, their order and sizes in :mod:`pipeline.dedup.engine`.

Modules, in the order the data goes through them:

    normalize   the normalized text that duplicates are judged on; word hashes; exact_hash
    urls        the normalized URL and its hash (URL dedup: one more key beside the band keys)
    minhash     shingles, minhash_signatures (datasketch-equal), recall_bands, band_keys
    lsh         signatures_for_shard, partition_band_keys, candidate_pairs
    routed      the two hops of a pass: route_pairs, first_hop, second_hop
    components  connected components in rounds of buckets (Large-Star / Small-Star)
    clusters    ShingleLookup, exact Jaccard, the keep rule, the clusters table, dedup_step
    layout      DedupWork: every path under the work folder (and LinesWork, the lines stage's)
    jobs        each unit kind: its job, its result, the function that runs it
    engine      find_duplicates: the units in order, each step sized by its work;
                deduplicate_shards, the same in this process
    reference   the same clusters table in one process, in memory: what the tests hold the
                engine to
    index       the dedup index that outlives a run: its folder, manifest, and adding a run
    indexed     a run's finding against an index: the documents it already holds, removed
    lines       repeated-line removal, staged the same way
    kernels, runs  compiled loops; runs of equal keys in sorted arrays
"""

from pipeline.dedup.clusters import ShingleLookup, choose_kept, dedup_step, removals
from pipeline.dedup.engine import deduplicate_shards, find_duplicates
from pipeline.dedup.layout import DedupWork
from pipeline.dedup.lsh import candidate_pairs, partition_band_keys, signatures_for_shard
from pipeline.dedup.minhash import (
    MinHashParams,
    band_keys,
    minhash_signatures,
    optimal_bands,
    recall_bands,
    shingle_hashes,
)
from pipeline.dedup.normalize import exact_hash, normalize_text, split_words

__all__ = [
    "DedupWork",
    "MinHashParams",
    "ShingleLookup",
    "band_keys",
    "candidate_pairs",
    "choose_kept",
    "dedup_step",
    "deduplicate_shards",
    "exact_hash",
    "find_duplicates",
    "minhash_signatures",
    "normalize_text",
    "optimal_bands",
    "partition_band_keys",
    "recall_bands",
    "removals",
    "shingle_hashes",
    "signatures_for_shard",
    "split_words",
]
