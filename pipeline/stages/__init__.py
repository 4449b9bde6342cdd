"""The stages of a curation run: which exist and in what order, with the step each shard stage
applies (registry), and how a shard stage runs its step over one shard with the ledger's
accounting (shard)."""
