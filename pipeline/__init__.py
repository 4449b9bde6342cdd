"""The library: curation as plain functions over Arrow and polars data, with neither Prefect nor
torch, so every step can be called, tested and benchmarked on its own.

Layers, top to bottom (an import only points down; ``make lint`` checks it):

    stages      each stage's wiring (source, lang, filter, dedup, lines, tokenize, mix): units of
                work, the ledger, resume; the registry of stages; a run folder read back; cards
    config      the run config (pydantic), validated before any work
    filters, dedup, mix, lang, licence, decontaminate
                the algorithms, independent of one another
    tokenizer   tokenizer training and encoding documents into token shards
    formats     one module per thing on disk: its reader, writer and names; shared hashing
    io          readers of raw inputs, atomic writers, storage (local or fsspec)
"""
