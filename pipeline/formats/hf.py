"""A split of a mixture as one Arrow IPC *stream* file, the format Hugging Face ``datasets``
memory-maps (``Dataset.from_file`` opens its files with ``pyarrow.ipc.open_stream``): its one
writer here, for ``curate export --format hf``.

The token shards themselves are Arrow IPC *files* (a footer after the stream, which
``pl.read_ipc`` and ``pl.scan_ipc`` need); ``datasets.load_dataset("arrow", data_files=...)``
reads those, ``Dataset.from_file`` does not. The export is the same rows in the other container::

    doc_id  string, nullable               the document's id
    group   string, not null               its mixture group
    tokens  large_list<item: uint16|uint32 not null>, not null
                                           its tokens, ending with <|endoftext|>

    one record batch per source shard (zero copy from the shard); schema metadata (UTF-8):
      format            "curate.hf-tokens/1"
      tokenizer_sha256, vocab_size, dtype, eod_id   as in the shards
      documents, tokens                             of the whole file

No ``huggingface`` schema metadata is written: it is optional, and ``datasets`` infers
``{"doc_id": Value("string"), "group": Value("string"), "tokens": LargeList(Value("uint16"))}``
from the Arrow schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.formats.tokens import file_sha256, read_shard_batch, shards_of_one_tokenizer
from pipeline.io.storage import as_path
from pipeline.io.writer import atomic_path

HF_FORMAT = "curate.hf-tokens/1"


def hf_schema(dtype_name: str, metadata: dict[str, str]) -> pa.Schema:
    """The export's schema for tokens of ``dtype_name`` (``uint16`` or ``uint32``)."""
    value_type = pa.from_numpy_dtype(np.dtype(dtype_name))
    return pa.schema(
        [
            pa.field("doc_id", pa.string(), nullable=True),
            pa.field("group", pa.string(), nullable=False),
            pa.field("tokens", pa.large_list(pa.field("item", value_type, nullable=False)), nullable=False),
        ],
        metadata=metadata,
    )


def write_hf_split(shard_paths: Sequence[Path], out_path: Path) -> dict:
    """Write the shards' documents, in order, as one uncompressed Arrow stream file at the local
    ``out_path`` (atomically). Refuses shards of different tokenizers. Returns ``{"file",
    "tokens", "documents", "dtype", "sha256", "shards"}``."""
    out_path = Path(out_path)
    paths = [as_path(p) for p in shard_paths]
    metadata = shards_of_one_tokenizer(paths)
    first = metadata[0] if metadata else {"dtype": "uint16"}
    documents = sum(int(m["documents"]) for m in metadata)
    tokens = sum(int(m["tokens"]) for m in metadata)
    schema = hf_schema(
        first["dtype"],
        {
            "format": HF_FORMAT,
            **{key: first[key] for key in ("tokenizer_sha256", "vocab_size", "eod_id") if key in first},
            "dtype": first["dtype"],
            "documents": str(documents),
            "tokens": str(tokens),
        },
    )
    options = ipc.IpcWriteOptions(compression=None)
    with atomic_path(out_path) as tmp, ipc.new_stream(str(tmp), schema, options=options) as writer:
        for path, shard in zip(paths, metadata):
            batch = read_shard_batch(path)
            group = pa.repeat(pa.scalar(shard["group"], pa.string()), batch.num_rows)
            writer.write_batch(pa.record_batch([batch.column("doc_id"), group, batch.column("tokens")], schema=schema))
    return {
        "file": out_path.name,
        "tokens": tokens,
        "documents": documents,
        "dtype": first["dtype"],
        "sha256": file_sha256(out_path),
        "shards": [path.name for path in paths],
    }
