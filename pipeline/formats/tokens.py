"""Token shards, the tokenized Arrow files the trainer memory-maps, and the special tokens every
tokenizer of :mod:`pipeline.tokenizer` shares: this module reads them, checks them, gathers
documents from them into new shards and exports them for nanoGPT.

Special tokens
--------------
Both kinds of tokenizer (BPE and WordPiece) share the special tokens and their ids, so code that
needs the end-of-document or padding id never asks which kind it has:

====  =================  =========================================================
 id   token              role
====  =================  =========================================================
 0    ``<|endoftext|>``  end of document: written after every document in a shard
 1    ``<|pad|>``        padding
 2    ``<|mask|>``       masked position (masked-LM objective)
 3    ``<|cls|>``        class / summary position
 4    ``<|unk|>``        unknown word (WordPiece only; byte-level BPE needs none)
====  =================  =========================================================

The ``<|...|>`` spelling (GPT-2's) was chosen over BERT's ``[SEP]`` style for both kinds because
one table is simpler than two and ``<|`` hardly occurs in prose. It may still occur (a page about
tokenizers): shards are encoded with ``encode_special_tokens`` on, so a literal
``<|endoftext|>`` in a document is encoded as ordinary text and the end-of-document id appears
in a shard only where this module put it.

Shard layout
------------
A shard is ONE uncompressed Arrow IPC file (``pa.ipc.new_file``) holding ONE record batch with
one row per document::

    doc_id  string, nullable               the document's id (null when only texts were given)
    tokens  large_list<item: uint16|uint32 not null>, not null
                                           the document's tokens, ending with <|endoftext|>

    schema metadata (UTF-8 strings):
      format            "curate.tokens/1"
      group             the mixture group the documents belong to
      tokenizer_sha256  sha256 of the tokenizer's JSON (= of the tokenizer.json file written here)
      vocab_size        vocabulary size, added tokens included
      dtype             "uint16" if vocab_size <= 65,536, else "uint32"
      eod_id            id of <|endoftext|>
      documents         number of rows
      tokens            number of tokens, end-of-document tokens included

The list column's child array is the training stream: every document's tokens followed by the
end-of-document id, documents in input order, as one contiguous buffer in the file. Its
``large_list`` offsets (int64) are the documents' starts; a row's length includes its end token.
Why one batch of lists, rather than fixed token chunks plus a second offsets file:

* Batches of an IPC file are separated by message headers, so chunked tokens could be presented
  as one array only by copying. One batch gives one buffer that ``pa.memory_map`` +
  ``ipc.open_file`` turn into a zero-copy, read-only ``np.ndarray`` (:func:`read_token_shard`);
  the trainer samples windows from it as nanoGPT does from its ``np.memmap``.
* The per-document offsets then come for free (the list offsets), in the same file: one file,
  one sha256, nothing to keep in step. ``pl.read_ipc(path)``, ``pyarrow.ipc.open_file(path)`` or
  ``datasets.load_dataset("arrow", data_files=path)`` read it as a plain table, one row per
  document, with no project code. (``datasets.Dataset.from_file`` reads only the IPC stream
  format: :mod:`pipeline.formats.hf` writes that, for ``curate export --format hf``.)
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
from tokenizers import Tokenizer

from pipeline.io.storage import as_path, is_local, open_arrow_file
from pipeline.io.writer import atomic_path, atomic_sink

SHARD_FORMAT = "curate.tokens/1"

EOD_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
MASK_TOKEN = "<|mask|>"
CLS_TOKEN = "<|cls|>"
UNK_TOKEN = "<|unk|>"
# Role -> token, in id order: these get ids 0, 1, 2, 3 in every tokenizer trained here.
SPECIAL_TOKENS = {"eod": EOD_TOKEN, "pad": PAD_TOKEN, "mask": MASK_TOKEN, "cls": CLS_TOKEN}

UINT16_VOCAB = 1 << 16  # ids 0..65535 fit uint16


# --------------------------------------------------------------------------------------------
# Inputs


# --------------------------------------------------------------------------------------------
# Tokenizers


def tokenizer_file(path: Path) -> Path:
    """The ``tokenizer.json`` at ``path`` (or the one inside the folder ``path``); raises
    FileNotFoundError where there is none."""
    path = as_path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer at {path}; train one with train_tokenizer()")
    return path


def load_tokenizer(path: Path) -> Tokenizer:
    """Load a ``tokenizer.json`` (or the one inside the folder ``path``)."""
    path = tokenizer_file(path)
    if not is_local(path):
        return Tokenizer.from_str(path.read_text(encoding="utf-8"))
    return Tokenizer.from_file(str(path))


def special_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """Role -> id of the special tokens: ``eod``, ``pad``, ``mask``, ``cls``, and ``unk`` for
    WordPiece. Raises if the tokenizer lacks one (it was not trained by :func:`train_tokenizer`)."""
    ids = {}
    for role, token in SPECIAL_TOKENS.items():
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"the tokenizer has no {token} ({role}) token; use one made by train_tokenizer()")
        ids[role] = token_id
    unk = tokenizer.token_to_id(UNK_TOKEN)
    if unk is not None:
        ids["unk"] = unk
    return ids


def tokenizer_sha256(tokenizer: Tokenizer) -> str:
    """sha256 of the tokenizer's pretty JSON: equal to the sha256 of the ``tokenizer.json`` that
    :func:`train_tokenizer` wrote, and of any file saved with ``Tokenizer.save``."""
    return hashlib.sha256(tokenizer.to_str(pretty=True).encode("utf-8")).hexdigest()


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (``vocab_size <= 65,536``), else uint32."""
    return np.dtype(np.uint16 if vocab_size <= UINT16_VOCAB else np.uint32)


# --------------------------------------------------------------------------------------------
# Shards


def write_shard(
    sink: Path | io.BytesIO,
    doc_ids: list | pa.Array,
    offsets: np.ndarray,
    values: np.ndarray,
    group: str,
    tokenizer_hash: str,
    vocab_size: int,
    eod: int,
) -> None:
    """Write one shard (layout in the module docstring) to ``sink`` (a local path or a file
    object), uncompressed."""
    dtype = token_dtype(vocab_size)
    table = _shard_batch(
        doc_ids,
        offsets,
        values,
        dtype,
        {
            "format": SHARD_FORMAT,
            "group": group,
            "tokenizer_sha256": tokenizer_hash,
            "vocab_size": str(vocab_size),
            "dtype": dtype.name,
            "eod_id": str(eod),
            "documents": str(len(doc_ids)),
            "tokens": str(int(offsets[-1])),
        },
    )
    where = str(sink) if isinstance(sink, Path) else sink
    with ipc.new_file(where, table.schema, options=ipc.IpcWriteOptions(compression=None)) as writer:
        writer.write_batch(table)


def file_sha256(path: Path | io.BytesIO) -> str:
    """sha256 of a file's bytes, read in blocks (a local or remote file, or the in-memory buffer
    of :func:`pipeline.io.writer.atomic_sink`)."""
    if isinstance(path, io.BytesIO):
        return hashlib.file_digest(path, "sha256").hexdigest()
    with as_path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def token_shard_entry(
    out_path: Path,
    group: str,
    documents: int,
    tokens: int,
    digest: str,
    dtype: np.dtype,
    vocab_size: int,
    tokenizer_hash: str,
) -> dict:
    return {
        "file": out_path.name,
        "group": group,
        "documents": documents,
        "tokens": tokens,
        "sha256": digest,
        "dtype": dtype.name,
        "vocab_size": vocab_size,
        "tokenizer_sha256": tokenizer_hash,
    }


class _Source:
    """One shard a gather reads from: its tokens (memory-mapped), its documents' token offsets
    (``n + 1``), its ids (an Arrow string array) and the tokenizer it was written with."""

    def __init__(self, path: Path):
        metadata = shard_metadata(path)
        self.path = path
        self.tokenizer = (metadata["tokenizer_sha256"], int(metadata["vocab_size"]), int(metadata["eod_id"]))
        batch = read_shard_batch(path)
        column = batch.column("tokens")
        self.tokens = column.values.to_numpy(zero_copy_only=True)
        self.offsets = column.offsets.to_numpy()
        self.doc_ids = batch.column("doc_id")

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1


def _gathered_rows(
    rows: Sequence[tuple[Path, np.ndarray]], out_name: str
) -> tuple[list[_Source], np.ndarray, np.ndarray]:
    """The sources of a gather, each opened once, and per output document its source (index into
    them) and its row there; a row outside its shard is an error."""
    opened: dict[Path, int] = {}
    piece_source, piece_rows = [], []
    for path, numbers in rows:
        path = as_path(path)
        piece_source.append(opened.setdefault(path, len(opened)))
        piece_rows.append(np.asarray(numbers, dtype=np.int64).reshape(-1))
    if not opened:
        raise ValueError(f"gather_token_shard: no source shard given for {out_name}")
    sources = [_Source(path) for path in opened]
    tokenizers = {source.tokenizer for source in sources}
    if len(tokenizers) > 1:
        raise ValueError(
            f"gather_token_shard: {out_name} would mix shards of {len(tokenizers)} tokenizers; "
            "gather shards of one tokenizer"
        )
    source = np.repeat(np.asarray(piece_source, np.int64), [len(r) for r in piece_rows])
    row = np.concatenate(piece_rows)
    documents = np.asarray([s.documents for s in sources], np.int64)
    outside = np.flatnonzero((row < 0) | (row >= documents[source]))
    if len(outside):
        bad = sources[int(source[outside[0]])]
        raise ValueError(
            f"gather_token_shard: row {int(row[outside[0]])} is outside {bad.path.name} ({bad.documents} documents)"
        )
    return sources, source, row


def gather_token_shard(rows: Sequence[tuple[Path, np.ndarray]], out_path: Path, group: str) -> dict:
    """Write a shard of documents taken from other shards, without encoding anything again.

    ``rows`` lists ``(shard path, row numbers)`` pieces in output order; the documents are
    written in that order, a row as often as it is listed (an upsampled document repeats whole),
    each with its end-of-document token. Every source shard must come from one tokenizer.
    Returns the same manifest entry as :func:`write_token_shard`.

    Each source is opened once, however many pieces name it; offsets and ids are gathered for
    all documents at once (numpy, Arrow's ``take``), and the tokens by one slice copy per
    document: no index array the size of the output."""
    out_path = as_path(out_path)
    sources, source, row = _gathered_rows(rows, out_path.name)
    tokenizer_hash, vocab_size, eod = sources[0].tokenizer
    dtype = token_dtype(vocab_size)
    first = np.zeros(len(sources), np.int64)  # each source's first row in the concatenation
    np.cumsum([s.documents for s in sources[:-1]], out=first[1:])
    index = first[source] + row
    starts = np.concatenate([s.offsets[:-1] for s in sources]).astype(np.int64)[index]
    lengths = np.concatenate([np.diff(s.offsets) for s in sources]).astype(np.int64)[index]
    doc_ids = pa.concat_arrays([s.doc_ids for s in sources]).take(pa.array(index, pa.int64()))
    out_offsets = np.zeros(len(index) + 1, np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    values = np.empty(int(out_offsets[-1]), dtype)
    tokens = [s.tokens for s in sources]
    for k, start, length, position in zip(source.tolist(), starts.tolist(), lengths.tolist(), out_offsets.tolist()):
        values[position : position + length] = tokens[k][start : start + length]
    with atomic_sink(out_path) as out:
        write_shard(out, doc_ids, out_offsets, values, group, tokenizer_hash, vocab_size, eod)
        digest = file_sha256(out)
    return token_shard_entry(
        out_path, group, len(doc_ids), int(out_offsets[-1]), digest, dtype, vocab_size, tokenizer_hash
    )


def _shard_batch(
    doc_ids: list | pa.Array, offsets: np.ndarray, values: np.ndarray, dtype: np.dtype, metadata: dict[str, str]
) -> pa.RecordBatch:
    value_type = pa.from_numpy_dtype(dtype)
    token_values = pa.Array.from_buffers(value_type, values.size, [None, pa.py_buffer(values)])
    tokens = pa.LargeListArray.from_arrays(
        pa.array(offsets, pa.int64()), token_values, type=pa.large_list(pa.field("item", value_type, nullable=False))
    )
    schema = pa.schema(
        [pa.field("doc_id", pa.string(), nullable=True), pa.field("tokens", tokens.type, nullable=False)],
        metadata=metadata,
    )
    ids = doc_ids.cast(pa.string()) if isinstance(doc_ids, pa.Array) else pa.array(doc_ids, pa.string())
    return pa.record_batch([ids, tokens], schema=schema)


def shard_metadata(path: Path) -> dict[str, str]:
    """A shard's schema metadata as ``str -> str`` (reads only the file's footer and schema)."""
    with open_arrow_file(path) as source:
        raw = ipc.open_file(source).schema.metadata or {}
    metadata = {key.decode(): value.decode() for key, value in raw.items()}
    if metadata.get("format") != SHARD_FORMAT:
        raise ValueError(f"{path} is not a tokenized shard ({SHARD_FORMAT}); write it with write_token_shard()")
    return metadata


def read_shard_batch(path: Path) -> pa.RecordBatch:
    """A shard's one record batch (``doc_id``, ``tokens``), checked: a shard's metadata, one
    batch, token lists that cover the token buffer. Zero copy from the memory-mapped file (a
    remote file is read into memory)."""
    shard_metadata(path)
    reader = ipc.open_file(open_arrow_file(path))
    if reader.num_record_batches != 1:
        raise ValueError(f"{path} has {reader.num_record_batches} record batches; a shard has exactly one")
    batch = reader.get_batch(0)
    column = batch.column("tokens")
    starts = column.offsets.to_numpy()
    if starts[0] != 0 or starts[-1] != len(column.values):
        raise ValueError(f"{path}: the token lists do not cover the token buffer; the file is not a shard")
    return batch


def read_token_shard(path: Path) -> tuple[np.ndarray, pl.DataFrame]:
    """Return ``(tokens, offsets)`` of a shard.

    ``tokens`` is the whole token stream as a read-only ``np.ndarray`` that maps the file (zero
    copy; it keeps the mapping open; a remote file is read into memory). ``offsets`` has one row
    per document: ``doc_id`` (str or null), ``doc_start`` (int64 index into ``tokens``) and
    ``doc_tokens`` (int32, end token included).
    """
    batch = read_shard_batch(path)
    column = batch.column("tokens")
    starts = column.offsets.to_numpy()
    tokens = column.values.to_numpy(zero_copy_only=True)
    offsets = pl.DataFrame(
        {
            "doc_id": pl.from_arrow(batch.column("doc_id")),
            "doc_start": starts[:-1],
            "doc_tokens": np.diff(starts).astype(np.int32),
        },
        schema={"doc_id": pl.String, "doc_start": pl.Int64, "doc_tokens": pl.Int32},
    )
    return tokens, offsets


def decode_documents(path: Path, tokenizer: Tokenizer) -> list[str]:
    """Decode every document of a shard back to text (without its end-of-document token)."""
    tokens, offsets = read_token_shard(path)
    eod = special_ids(tokenizer)["eod"]
    starts = offsets["doc_start"].to_numpy()
    ends = starts + offsets["doc_tokens"].to_numpy()
    if ends.size and (tokens[ends - 1] != eod).any():
        raise ValueError(
            f"{path}: a document does not end with the end-of-document id {eod}; "
            "decode with the tokenizer that wrote the shard"
        )
    documents = [tokens[start : end - 1].tolist() for start, end in zip(starts, ends)]
    return tokenizer.decode_batch(documents, skip_special_tokens=False)


def shards_of_one_tokenizer(shard_paths: Sequence[Path], max_vocab: int | None = None, target: str = "") -> list[dict]:
    """The metadata of each shard (read from its schema only), checked to come from one
    tokenizer and, with ``max_vocab``, to have a vocabulary of at most that many tokens (the
    limit of ``target``, an export format). Raises ValueError naming the shard and the fix."""
    found, tokenizers = [], set()
    for path in shard_paths:
        metadata = shard_metadata(path)
        vocab_size = int(metadata["vocab_size"])
        if max_vocab is not None and vocab_size > max_vocab:
            raise ValueError(
                f"{path} has a vocabulary of {vocab_size:,} tokens, which does not fit the uint16 "
                f"of {target} (at most {max_vocab:,}); train a smaller vocabulary or "
                "export another format (curate export --format megatron or hf)"
            )
        tokenizers.add(metadata["tokenizer_sha256"])
        found.append(metadata)
    if len(tokenizers) > 1:
        raise ValueError(
            f"the shards were written with {len(tokenizers)} different tokenizers; "
            "export shards of one tokenizer at a time"
        )
    return found


def export_bin(shard_paths: Sequence[Path], out_path: Path) -> dict:
    """Concatenate the shards' tokens into one flat uint16 ``.bin`` (nanoGPT's ``prepare.py``
    format: ``np.memmap(path, dtype=np.uint16, mode="r")`` reads it back), atomically.

    Refuses shards whose vocabulary does not fit uint16 and shards of different tokenizers.
    Returns ``{"file", "tokens", "dtype", "sha256", "shards"}``. The shards may be remote;
    ``out_path`` is a local file (it is written memory-mapped).
    """
    out_path = Path(out_path)
    paths = [as_path(p) for p in shard_paths]
    metadata = shards_of_one_tokenizer(paths, UINT16_VOCAB, "nanoGPT's .bin")
    total = sum(int(m["tokens"]) for m in metadata)
    with atomic_path(out_path) as tmp:
        if total == 0:
            tmp.write_bytes(b"")
        else:
            out = np.memmap(tmp, dtype=np.uint16, mode="w+", shape=(total,))
            start = 0
            for path in paths:
                tokens, _ = read_token_shard(path)
                out[start : start + tokens.size] = tokens  # a uint32 shard's ids are < 65,536 here
                start += tokens.size
            out.flush()
            del out
        digest = file_sha256(tmp)
    return {
        "file": out_path.name,
        "tokens": total,
        "dtype": "uint16",
        "sha256": digest,
        "shards": [path.name for path in paths],
    }


def shard_encoder(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of ``tokenizer`` that encodes special-token strings in the text as plain text, and
    neither pads nor truncates."""
    encoder = Tokenizer.from_str(tokenizer.to_str())
    encoder.encode_special_tokens = True
    encoder.no_padding()
    encoder.no_truncation()
    return encoder
