"""Deduplication: exact and near-duplicate documents (MinHash LSH), and repeated lines.

Modules, in the order the data goes through them:

    normalize  the normalized text that duplicates are judged on; word hashes; exact_hash
    minhash    shingles, minhash_signatures (datasketch-equal), recall_bands, band_keys
    lsh        signatures_for_shard, partition_band_keys, candidate_pairs  (files per shard/partition)
    routed     pairs measured where their shingle sets are: route_pairs, first_hop, second_hop
    components connected components in rounds of units per shard (Large-Star / Small-Star)
    clusters   verify_pairs, connected_components, choose_kept, cluster_members, finish_clusters,
               cluster_table, dedup_step
    lines      repeated-line removal, staged the same way
    stage      the dedup and lines stages: their units, in order (run_dedup, run_lines), and
               deduplicate_shards, the finding of duplicates on any list of document files

``stage.deduplicate_shards`` runs every unit of the finding in order in one process and returns
the clusters table; the dedup flow runs the same units as Prefect tasks.
"""

from pipeline.dedup.clusters import (
    ShingleLookup,
    choose_kept,
    cluster_members,
    cluster_table,
    connected_components,
    dedup_step,
    finish_clusters,
    removals,
    verify_pairs,
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
    "cluster_members",
    "cluster_table",
    "connected_components",
    "exact_hash",
    "finish_clusters",
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
]
