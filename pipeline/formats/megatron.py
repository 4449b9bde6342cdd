"""Megatron-LM's indexed dataset (``MMIDIDX``, the format of ``megatron/core/datasets/
indexed_dataset.py``, which NeMo reads too): its one writer here, for ``curate export --format
megatron``.

A dataset is a pair of files with one prefix, ``<prefix>.bin`` and ``<prefix>.idx``:

``.bin``
    every sequence's tokens, one after another, in the index's dtype (no header).
``.idx``, little-endian::

    9 bytes   b"MMIDIDX\\x00\\x00"        magic
    uint64    1                        version
    uint8     dtype code               1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
                                       6 float64, 7 float32, 8 uint16
    uint64    sequence count           S
    uint64    document count           D = documents + 1 (the length of the document index)
    int32[S]  sequence lengths         tokens per sequence
    int64[S]  sequence pointers        byte offset of each sequence in the .bin
    int64[D]  document indices         0, then the sequence index after each document's last

Here one document is one sequence (its tokens and its end-of-document id, as Megatron's
``preprocess_data.py --append-eod`` writes them), so the document indices are ``0, 1, ..., S``.
Tokens are uint16 when the tokenizer's vocabulary fits (code 8), else int32 (code 4: Megatron has
no uint32; every id of a tokenizer trained here is far below 2**31).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.formats.tokens import file_sha256, read_token_shard, shards_of_one_tokenizer
from pipeline.io.storage import as_path
from pipeline.io.writer import atomic_path

INDEX_MAGIC = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}
BIN_SUFFIX = ".bin"
IDX_SUFFIX = ".idx"


def megatron_dtype(shard_dtype: str) -> np.dtype:
    """The dtype of the .bin for shards of ``shard_dtype`` (``uint16`` or ``uint32``)."""
    return np.dtype(np.uint16) if shard_dtype == "uint16" else np.dtype(np.int32)


def index_header(dtype: np.dtype, sequences: int, documents: int) -> bytes:
    """The .idx header: magic, version, dtype code, sequence count, length of the document index."""
    return INDEX_MAGIC + struct.pack("<QBQQ", INDEX_VERSION, DTYPE_CODES[dtype], sequences, documents + 1)


def write_indexed_dataset(shard_paths: Sequence[Path], prefix: Path) -> dict:
    """Write the shards' documents, in order, as ``<prefix>.bin`` and ``<prefix>.idx``
    (atomically; ``prefix`` is local, the shards may be remote), one sequence per document.

    Refuses shards of different tokenizers. Returns ``{"file", "index", "tokens", "documents",
    "dtype", "sha256", "index_sha256", "shards"}``."""
    prefix = Path(prefix)
    paths = [as_path(p) for p in shard_paths]
    metadata = shards_of_one_tokenizer(paths)
    dtype = megatron_dtype(metadata[0]["dtype"] if metadata else "uint16")
    bin_path, idx_path = prefix.with_name(prefix.name + BIN_SUFFIX), prefix.with_name(prefix.name + IDX_SUFFIX)
    lengths = []
    with atomic_path(bin_path) as tmp, open(tmp, "wb") as out:
        for path in paths:
            tokens, offsets = read_token_shard(path)
            # uint16 as is; uint32 ids (< 2**31) reinterpreted as int32: no copy either way.
            out.write(memoryview(np.ascontiguousarray(tokens).view(dtype)))
            lengths.append(offsets["doc_tokens"].to_numpy())
    sequence_lengths = np.concatenate(lengths).astype(np.int32) if lengths else np.zeros(0, np.int32)
    pointers = np.zeros(sequence_lengths.size, np.int64)
    np.cumsum(sequence_lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    documents = sequence_lengths.size
    with atomic_path(idx_path) as tmp:
        with open(tmp, "wb") as out:
            out.write(index_header(dtype, sequence_lengths.size, documents))
            out.write(sequence_lengths.tobytes())
            out.write(pointers.tobytes())
            out.write(np.arange(documents + 1, dtype=np.int64).tobytes())
    return {
        "file": bin_path.name,
        "index": idx_path.name,
        "tokens": int(sequence_lengths.sum(dtype=np.int64)),
        "documents": documents,
        "dtype": dtype.name,
        "sha256": file_sha256(bin_path),
        "index_sha256": file_sha256(idx_path),
        "shards": [path.name for path in paths],
    }
