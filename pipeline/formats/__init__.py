"""One module per thing on disk: each is the one reader and writer of its files and the one place
their column names and keys live.

    documents   the document, quarantine and removed schemas; a run folder's layout (RunLayout)
    step        what a shard stage's step returns (StepResult, FilterOutput, Rule, removed rows)
    ledger      the accounting of every document (Ledger) and the sum of counts (add_counts)
    manifest    a run's manifest.json: config, versions, counts per stage; the run lock
    configfile  a TOML config read and validated, with one-line errors (ConfigError)
    tokens      token shards: the special tokens, dtype, shard metadata, checksums, .bin export
    mixture     a mixture folder: its manifest, shard files, tokenizer, export (nanoGPT, megatron, hf)
    nanogpt     nanoGPT's meta.pkl (vocab_size; stoi/itos of a character vocabulary) for the export
    megatron    Megatron-LM's indexed dataset (.bin + .idx, MMIDIDX) written by the export
    hf          a split as one Arrow stream for Hugging Face datasets' Dataset.from_file
    task        a downstream task's items: the file, its splits, class-balanced subsets
    hashing     stable hashes shared by every stage (fmix64, seeded_id_hash)
    escape      names from the data as Markdown (inline text, code spans, table cells) and with
                their control characters visible: the one escaper of each medium
"""
