"""Mixing: the curated pool into groups, a held-out validation split, and weighted mixtures of
token shards.

Modules:

    plan     groups, temperature and explicit weights, UniMax epoch caps, the sampling plan (repeats
             per document), the validation split, seeded id hashes
    mixture  the mixture folder format's one owner: file names, the manifest, its checks
    stage    the mix stage (run_mix): scan, exclusions, split, decontamination, plan, write; its
             units run in process or, through flows.mix, as Prefect tasks
"""
