"""The stages of a curation run, each the wiring of algorithms below it.

registry    which stages exist and in what order, with each shard stage's step
shard       how a shard stage runs its step over one shard with the ledger; resume
attributes  the filter stage's stored measurements, from which a changed threshold decides again
rerun       reruns of a changed config: each stage's identity, what to keep and what to redo
units       how a stage hands its units to whoever runs them (this process, or Prefect tasks)
source      the source stage: read, validate, quarantine, shard
dedup       the dedup and lines stages
tokenize    the tokenize stage: the tokenizer's sample, token shards
mix         the mix stage: groups, the validation split, mixtures, decontamination
card        each mixture's dataset card, written by the mix stage
run         a finished run folder read back (RunFiles)
"""
