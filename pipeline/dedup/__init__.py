"""Deduplication: exact and near-duplicate documents (MinHash LSH), and repeated lines.

Modules, in the order the data goes through them:

    normalize  the normalized text that duplicates are judged on; word hashes; exact_hash
    minhash    shingles, minhash_signatures (datasketch-equal), recall_bands, band_keys
    lsh        signatures_for_shard, partition_band_keys, candidate_pairs  (files per shard/partition)
    clusters   verify_pairs, connected_components, choose_kept, cluster_table, dedup_step
    lines      repeated-line removal, staged the same way

A flow runs, with one task per shard or partition::

    signatures_for_shard(docs shard i, signatures/shard-i, params, shard=i)     for each shard
    partition_band_keys([signatures/shard-i], bands/, partitions)              for each shard
    verify_partition(bands/part-p, ShingleLookup(all signature files), params.threshold,
                     edges/part-p)                                             for each partition
    clusters_from_edges(all edge files, lookup, rule, clusters.parquet)        once
    shard_unit("dedup", docs shard i, stage_dir, dedup_step(clusters, params.threshold, shard=i),
               batch_docs)                 (pipeline.stages.shard: kept docs and removed rows; for each shard)

``clusters.deduplicate_shards`` runs the first four in order in one process and returns the
clusters table. Repeated lines (``lines``) follow the same pattern: counts per shard, frequent
lines per partition, then the ``lines.RepeatedLines`` filter (or a per-file function) per shard.
"""

from pipeline.dedup.clusters import (
    ShingleLookup,
    choose_kept,
    cluster_table,
    clusters_from_edges,
    connected_components,
    dedup_step,
    deduplicate_shards,
    removals,
    verify_pairs,
    verify_partition,
)
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
    "MinHashParams",
    "ShingleLookup",
    "band_keys",
    "candidate_pairs",
    "choose_kept",
    "cluster_table",
    "clusters_from_edges",
    "connected_components",
    "deduplicate_shards",
    "exact_hash",
    "minhash_signatures",
    "normalize_text",
    "optimal_bands",
    "partition_band_keys",
    "recall_bands",
    "removals",
    "shingle_hashes",
    "signatures_for_shard",
    "split_words",
    "dedup_step",
    "verify_pairs",
    "verify_partition",
]
