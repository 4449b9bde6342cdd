"""Mixing: the curated pool into groups, a held-out validation split, and weighted mixtures of
token shards. Plain functions over Arrow and polars data and the paths they are given; the mix
stage (pipeline.stages.mix) runs them as units of work and keeps the run's files.

Modules:

    plan           groups, temperature and explicit weights, UniMax epoch caps, the sampling plan
                   (repeats per document), the validation split, seeded id hashes: over one table
    shards         the same plan computed block by block of shards, with per-shard files
    scan           the pool's scan: each document's tokens and group; small groups renamed other
    contamination  which documents leave the pool and why: excluded texts (by id, near-duplicate,
                   shared token window) and near-duplicates of validation documents
    split          the validation split over blocks of shards, and the warning of a thin one
    routing        each mixture's last layer per group, the key ranges its copies are routed
                   into, the writing order and the output shards
    figures        counts per side and rule, each mixture's report and figures per group
    licences       what each mixture takes and holds out per licence
    folder         a mixture folder's manifest, tokenizer and common windows
    work           the names of the units' files in the stage's work folder
"""
