"""Tokenizer training and tokenized Arrow shards the trainer memory-maps.

Tokenizers
----------
:func:`train_tokenizer` trains one of two kinds with the ``tokenizers`` library and saves its
``tokenizer.json``:

* ``"bpe"`` (the default, for causal language models): byte-level BPE as in GPT-2: the GPT-2
  split regex and byte-to-unicode mapping (``ByteLevel`` pre-tokenizer, no prefix space) and the
  ``ByteLevel`` decoder, no normalizer. All 256 byte symbols are in the vocabulary, so there is no
  unknown token and every text decodes back to exactly itself.
* ``"wordpiece"`` (for a masked-LM objective): BERT's cleanup normalizer (cased: no lowercasing,
  no accent stripping), BERT's pre-tokenizer (whitespace and punctuation), ``##`` continuations
  and ``<|unk|>`` for words it cannot spell. It loses the text's layout: runs of whitespace and
  newlines become one space, control characters are dropped, every punctuation mark is split
  off and the decoder guesses the spaces around it (``"3.14 (twice)"`` comes back as
  ``"3. 14 ( twice )"``), and a word longer than 100 characters or holding a character never seen
  in training becomes ``<|unk|>``.

Both kinds share the special tokens and their ids, so code that needs the end-of-document or
padding id never asks which kind it has:

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

Determinism. The same texts and settings give the same ``tokenizer.json`` bytes, in any process
and with any number of threads (checked with ``RAYON_NUM_THREADS=1`` and 2; no setting is
needed): BPE training sorts its alphabet and breaks ties between merges by token id. WordPiece
training in ``tokenizers`` (up to at least 0.23) is *not* deterministic on its own
(huggingface/tokenizers#1794): it creates the ``##x`` continuation tokens while iterating a hash
map with a per-process random seed, so their ids, and through tie-breaking even the merges,
change from run to run, and no setting or environment variable fixes it. :func:`train_tokenizer`
therefore declares every ``##x`` token in sorted order before training (as special tokens, which
fixes their ids, then turns them back into ordinary vocabulary entries). That needs the texts'
characters before training starts, so the texts are spooled to a temporary Arrow file beside
``out_path`` while their characters are collected, and the trainer reads the spool.

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
  one sha256, nothing to keep in step. ``pl.read_ipc(path)`` or ``pyarrow.ipc.open_file(path)``
  read it as a plain table, one row per document, with no project code.

The writer holds two batches of texts and each document's id and length in memory, never the
shard's tokens: those are spooled to a raw temporary file and memory-mapped back when the record
batch is written.

Throughput (20,000 demo-corpus news documents, 40 MB, 9.8M tokens, 8,192-token BPE, two
cores): writing the shard ran at 7.0 MB/s, bare ``encode_batch`` at 6.6 MB/s (ratio 1.05-1.07)
and bare ``encode_batch_fast`` at 7.3 MB/s (ratio 0.93-0.97). Encoding dominates; turning ids
into numpy costs about 5% of one core's encoding time and runs while the next batch encodes.
"""

from __future__ import annotations

import hashlib
import io
import json
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, repeat
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from pipeline.io.storage import as_path, is_local, open_arrow_file
from pipeline.io.writer import atomic_path, atomic_sink, scratch_file, write_text

SHARD_FORMAT = "curate.tokens/1"

EOD_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
MASK_TOKEN = "<|mask|>"
CLS_TOKEN = "<|cls|>"
UNK_TOKEN = "<|unk|>"
# Role -> token, in id order: these get ids 0, 1, 2, 3 in every tokenizer trained here.
SPECIAL_TOKENS = {"eod": EOD_TOKEN, "pad": PAD_TOKEN, "mask": MASK_TOKEN, "cls": CLS_TOKEN}
WORDPIECE_PREFIX = "##"

UINT16_VOCAB = 1 << 16  # ids 0..65535 fit uint16
TEXT_BATCH = 1024  # texts handed to the tokenizer's trainer or encoder at a time

TokenizerKind = Literal["bpe", "wordpiece"]


# --------------------------------------------------------------------------------------------
# Inputs


def _documents(items: Iterable, batch_size: int) -> Iterator[tuple[list, list[str]]]:
    """Regroup documents into ``(ids, texts)`` chunks of at most ``batch_size``.

    An item is a text (``str``, id null), an ``(id, text)`` pair, or an Arrow ``RecordBatch`` or
    ``Table`` with a ``text`` column and optionally an ``id`` column (the document schema).
    """
    ids: list = []
    texts: list = []
    position = 0
    for item in items:
        if isinstance(item, str):
            ids.append(None)
            texts.append(item)
        elif isinstance(item, (pa.RecordBatch, pa.Table)):
            if "text" not in item.schema.names:
                raise ValueError(f"an Arrow batch of documents needs a 'text' column; it has {item.schema.names}")
            batch_texts = item.column("text").to_pylist()
            texts.extend(batch_texts)
            ids.extend(item.column("id").to_pylist() if "id" in item.schema.names else [None] * len(batch_texts))
        elif isinstance(item, tuple) and len(item) == 2:
            ids.append(None if item[0] is None else str(item[0]))
            texts.append(item[1])
        else:
            raise TypeError(
                f"document {position}: expected a str, an (id, text) pair or an Arrow batch, got {type(item).__name__}"
            )
        while len(texts) >= batch_size:
            chunk_ids, chunk_texts = ids[:batch_size], texts[:batch_size]
            del ids[:batch_size], texts[:batch_size]
            _check_texts(chunk_ids, chunk_texts, position)
            position += len(chunk_texts)
            yield chunk_ids, chunk_texts
    if texts:
        _check_texts(ids, texts, position)
        yield ids, texts


def _check_texts(ids: list, texts: list, position: int) -> None:
    for offset, text in enumerate(texts):
        if not isinstance(text, str):
            doc = ids[offset] if ids[offset] is not None else f"at position {position + offset}"
            raise TypeError(f"document {doc} has text of type {type(text).__name__}; drop or fix it before tokenizing")


# --------------------------------------------------------------------------------------------
# Tokenizers


def train_tokenizer(
    texts: Iterable, out_path: Path, kind: TokenizerKind = "bpe", vocab_size: int = 8192, min_frequency: int = 2
) -> Path:
    """Train a tokenizer on ``texts`` and save it atomically as JSON at ``out_path``.

    ``texts`` is streamed (see :func:`_documents` for the accepted items), so memory holds one
    batch of texts and the trainer's word counts, never the corpus. ``kind`` is ``"bpe"``
    (byte-level BPE) or ``"wordpiece"``; ``vocab_size`` counts special tokens and the alphabet;
    a pair seen fewer than ``min_frequency`` times is never merged. The same texts and settings
    give the same bytes (see the module docstring for how WordPiece is made so).
    Returns ``out_path``.
    """
    out_path = as_path(out_path)
    if kind == "bpe":
        floor = len(SPECIAL_TOKENS) + 256
        if vocab_size < floor:
            raise ValueError(
                f"vocab_size {vocab_size} is below the {floor} a byte-level BPE needs "
                f"(256 bytes + {len(SPECIAL_TOKENS)} special tokens); raise vocab_size"
            )
        tokenizer = _train_bpe(texts, vocab_size, min_frequency)
    elif kind == "wordpiece":
        if vocab_size <= len(SPECIAL_TOKENS) + 1:
            raise ValueError(f"vocab_size {vocab_size} leaves no room beside the special tokens; raise it")
        tokenizer = _train_wordpiece(texts, out_path, vocab_size, min_frequency)
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}; use 'bpe' or 'wordpiece'")
    write_text(tokenizer.to_str(pretty=True), out_path)
    return out_path


def _train_bpe(texts: Iterable, vocab_size: int, min_frequency: int) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((chunk for _, chunk in _documents(texts, TEXT_BATCH)), trainer)
    return tokenizer


def _train_wordpiece(texts: Iterable, out_path: Path, vocab_size: int, min_frequency: int) -> Tokenizer:
    """WordPiece, made deterministic by declaring the ``##x`` tokens up front (module docstring).

    The texts go to a temporary Arrow stream (beside ``out_path`` when it is local) while their
    characters are collected; training then reads them back. If training still created a ``##x``
    token that was not declared (a character the filter below wrongly assumed is never inside a
    word), it is trained once more with that token declared too.
    """
    specials = [*SPECIAL_TOKENS.values(), UNK_TOKEN]
    chars: set[str] = set()
    schema = pa.schema([pa.field("text", pa.string(), nullable=False)])
    with scratch_file(out_path, ".texts") as spool:
        with ipc.new_stream(str(spool), schema) as sink:
            for _, chunk in _documents(texts, TEXT_BATCH):
                for text in chunk:
                    chars.update(text)
                sink.write_batch(pa.record_batch([pa.array(chunk, pa.string())], schema=schema))
        continuations = sorted(WORDPIECE_PREFIX + c for c in chars if _may_continue_word(c))
        while True:
            tokenizer = Tokenizer(models.WordPiece(unk_token=UNK_TOKEN, continuing_subword_prefix=WORDPIECE_PREFIX))
            tokenizer.normalizer = normalizers.BertNormalizer(
                clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
            )
            tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            tokenizer.decoder = decoders.WordPiece(prefix=WORDPIECE_PREFIX, cleanup=True)
            trainer = trainers.WordPieceTrainer(
                vocab_size=vocab_size,
                min_frequency=min_frequency,
                special_tokens=specials + continuations,
                continuing_subword_prefix=WORDPIECE_PREFIX,
                show_progress=False,
            )
            tokenizer.train_from_iterator(_read_spool(spool), trainer)
            declared = set(continuations)
            undeclared = sorted(
                token
                for token in tokenizer.get_vocab(with_added_tokens=False)
                if token.startswith(WORDPIECE_PREFIX)
                and len(token) == len(WORDPIECE_PREFIX) + 1
                and token not in declared
            )
            if not undeclared:
                break
            continuations = sorted(declared.union(undeclared))
    # The declared continuations were added as special tokens only to fix their ids; keep them as
    # plain vocabulary entries so that "##a" in a text is not matched as a token.
    state = json.loads(tokenizer.to_str())
    keep = set(specials)
    state["added_tokens"] = [token for token in state["added_tokens"] if token["content"] in keep]
    return Tokenizer.from_str(json.dumps(state))


def _may_continue_word(char: str) -> bool:
    """False for characters BERT's normalizer and pre-tokenizer never leave inside a word
    (whitespace, punctuation, control characters); a wrong True only costs a vocabulary entry."""
    if char.isspace():
        return False
    category = unicodedata.category(char)
    if category.startswith("P") or category in ("Cc", "Cf"):
        return False
    code = ord(char)
    return not (33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126)


def _read_spool(spool: Path) -> Iterator[list[str]]:
    with pa.memory_map(str(spool), "r") as source:
        for batch in ipc.open_stream(source):
            yield batch.column(0).to_pylist()


def load_tokenizer(path: Path) -> Tokenizer:
    """Load a ``tokenizer.json`` (or the one inside the folder ``path``)."""
    path = as_path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer at {path}; train one with train_tokenizer()")
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


def _shard_encoder(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of ``tokenizer`` that encodes special-token strings in the text as plain text, and
    neither pads nor truncates."""
    encoder = Tokenizer.from_str(tokenizer.to_str())
    encoder.encode_special_tokens = True
    encoder.no_padding()
    encoder.no_truncation()
    return encoder


def write_token_shard(
    texts: Iterable, tokenizer: Tokenizer, out_path: Path, group: str, batch_size: int = 1024
) -> dict:
    """Encode ``texts`` and write them as one tokenized shard at ``out_path``, atomically.

    ``texts`` yields texts, ``(id, text)`` pairs or Arrow batches with ``text`` (and ``id``)
    columns. Documents are encoded in batches of ``batch_size`` with ``encode_batch_fast`` (the
    ids of ``encode_batch``, without the character offsets a shard does not keep; plain
    ``encode_batch`` where the library lacks it), no special tokens added by the tokenizer, and
    the end-of-document id is appended to each. The layout is in the module docstring. Returns
    the manifest entry::

        {"file", "group", "documents", "tokens", "sha256", "dtype", "vocab_size",
         "tokenizer_sha256"}

    where ``tokens`` counts every token in the file, one end-of-document token per document
    included, and ``sha256`` is the file's. Same inputs, same bytes.
    """
    out_path = as_path(out_path)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    dtype = token_dtype(vocab_size)
    eod = special_ids(tokenizer)["eod"]
    tokenizer_hash = tokenizer_sha256(tokenizer)
    encoder = _shard_encoder(tokenizer)
    # The same ids as encode_batch, a little sooner (5-10% less encoding time here).
    encode = getattr(encoder, "encode_batch_fast", encoder.encode_batch)
    doc_ids: list = []
    doc_lengths: list[np.ndarray] = []
    total = 0
    with atomic_sink(out_path) as out:
        with scratch_file(out_path, ".tokens") as spool:
            with open(spool, "wb") as sink, ThreadPoolExecutor(max_workers=1) as encoding:
                # The tokenizer encodes batch k+1 (in Rust, without the GIL) while this thread
                # turns batch k into numpy and reads the next input.
                pending = None
                for ids, chunk in _documents(texts, batch_size):
                    upcoming = (ids, encoding.submit(encode, chunk, add_special_tokens=False))
                    if pending is not None:
                        total += _spool_batch(pending, sink, doc_ids, doc_lengths, dtype, eod)
                    pending = upcoming
                if pending is not None:
                    total += _spool_batch(pending, sink, doc_ids, doc_lengths, dtype, eod)
            lengths = np.concatenate(doc_lengths) if doc_lengths else np.zeros(0, np.int64)
            offsets = np.zeros(lengths.size + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            values = np.memmap(spool, dtype=dtype, mode="r") if total else np.zeros(0, dtype)
            _write_shard(out, doc_ids, offsets, values, group, tokenizer_hash, vocab_size, eod)
            del values
        digest = file_sha256(out)
    return _entry(out_path, group, len(doc_ids), total, digest, dtype, vocab_size, tokenizer_hash)


def _write_shard(
    sink: Path | io.BytesIO,
    doc_ids: list,
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


def _entry(
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


def gather_token_shard(rows: Sequence[tuple[Path, np.ndarray]], out_path: Path, group: str) -> dict:
    """Write a shard of documents taken from other shards, without encoding anything again.

    ``rows`` lists ``(shard path, row numbers)`` pieces in output order; the documents are
    written in that order, a row as often as it is listed (an upsampled document repeats whole),
    each with its end-of-document token. Every source shard must come from one tokenizer.
    Returns the same manifest entry as :func:`write_token_shard`."""
    out_path = as_path(out_path)
    opened: dict[Path, tuple[np.ndarray, pl.DataFrame]] = {}
    tokenizers = set()
    pieces = []
    for path, numbers in rows:
        path = as_path(path)
        if path not in opened:
            metadata = shard_metadata(path)
            tokenizers.add((metadata["tokenizer_sha256"], int(metadata["vocab_size"]), int(metadata["eod_id"])))
            opened[path] = read_token_shard(path)
        pieces.append((path, np.asarray(numbers, dtype=np.int64)))
    if not tokenizers:
        raise ValueError(f"gather_token_shard: no source shard given for {out_path.name}")
    if len(tokenizers) > 1:
        raise ValueError(
            f"gather_token_shard: {out_path.name} would mix shards of {len(tokenizers)} tokenizers; "
            "gather shards of one tokenizer"
        )
    tokenizer_hash, vocab_size, eod = tokenizers.pop()
    dtype = token_dtype(vocab_size)
    starts, lengths, doc_ids = [], [], []
    for path, numbers in pieces:
        _, offsets = opened[path]
        if numbers.size and (numbers.min() < 0 or numbers.max() >= offsets.height):
            raise ValueError(
                f"gather_token_shard: row {int(numbers.max())} is outside {path.name} ({offsets.height} documents)"
            )
        starts.append(offsets["doc_start"].to_numpy()[numbers])
        lengths.append(offsets["doc_tokens"].to_numpy()[numbers].astype(np.int64))
        doc_ids.extend(offsets["doc_id"].gather(numbers).to_list())
    out_offsets = np.zeros(len(doc_ids) + 1, np.int64)
    if doc_ids:
        np.cumsum(np.concatenate(lengths), out=out_offsets[1:])
    values = np.empty(int(out_offsets[-1]), dtype)
    position = 0
    for (path, _), piece_starts, piece_lengths in zip(pieces, starts, lengths):
        tokens = opened[path][0]
        # A slice copy per document: no index arrays the size of the shard.
        for start, length in zip(piece_starts.tolist(), piece_lengths.tolist()):
            values[position : position + length] = tokens[start : start + length]
            position += length
    with atomic_sink(out_path) as out:
        _write_shard(out, doc_ids, out_offsets, values, group, tokenizer_hash, vocab_size, eod)
        digest = file_sha256(out)
    return _entry(out_path, group, len(doc_ids), int(out_offsets[-1]), digest, dtype, vocab_size, tokenizer_hash)


def _spool_batch(pending: tuple, sink, doc_ids: list, doc_lengths: list, dtype: np.dtype, eod: int) -> int:
    """Append one encoded batch to the token spool: each document's ids, then the end id."""
    ids, future = pending
    token_lists = [encoding.ids for encoding in future.result()]
    lengths = np.fromiter(map(len, token_lists), np.int64, len(token_lists)) + 1
    count = int(lengths.sum())
    # One pass over the Python ints: ids of document 1, eod, ids of document 2, eod, ...
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(zip(token_lists, repeat([eod])))), dtype, count)
    sink.write(flat.data)
    doc_ids.extend(ids)
    doc_lengths.append(lengths)
    return count


def _shard_batch(
    doc_ids: list, offsets: np.ndarray, values: np.ndarray, dtype: np.dtype, metadata: dict[str, str]
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
    return pa.record_batch([pa.array(doc_ids, pa.string()), tokens], schema=schema)


def shard_metadata(path: Path) -> dict[str, str]:
    """A shard's schema metadata as ``str -> str`` (reads only the file's footer and schema)."""
    with open_arrow_file(path) as source:
        raw = ipc.open_file(source).schema.metadata or {}
    metadata = {key.decode(): value.decode() for key, value in raw.items()}
    if metadata.get("format") != SHARD_FORMAT:
        raise ValueError(f"{path} is not a tokenized shard ({SHARD_FORMAT}); write it with write_token_shard()")
    return metadata


def read_token_shard(path: Path) -> tuple[np.ndarray, pl.DataFrame]:
    """Return ``(tokens, offsets)`` of a shard.

    ``tokens`` is the whole token stream as a read-only ``np.ndarray`` that maps the file (zero
    copy; it keeps the mapping open; a remote file is read into memory). ``offsets`` has one row
    per document: ``doc_id`` (str or null), ``doc_start`` (int64 index into ``tokens``) and
    ``doc_tokens`` (int32, end token included).
    """
    shard_metadata(path)
    source = open_arrow_file(path)
    reader = ipc.open_file(source)
    if reader.num_record_batches != 1:
        raise ValueError(f"{path} has {reader.num_record_batches} record batches; a shard has exactly one")
    batch = reader.get_batch(0)
    column = batch.column("tokens")
    starts = column.offsets.to_numpy()
    values = column.values
    if starts[0] != 0 or starts[-1] != len(values):
        raise ValueError(f"{path}: the token lists do not cover the token buffer; the file is not a shard")
    tokens = values.to_numpy(zero_copy_only=True)
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


def export_bin(shard_paths: Sequence[Path], out_path: Path) -> dict:
    """Concatenate the shards' tokens into one flat uint16 ``.bin`` (nanoGPT's ``prepare.py``
    format: ``np.memmap(path, dtype=np.uint16, mode="r")`` reads it back), atomically.

    Refuses shards whose vocabulary does not fit uint16 and shards of different tokenizers.
    Returns ``{"file", "tokens", "dtype", "sha256", "shards"}``. The shards may be remote;
    ``out_path`` is a local file (it is written memory-mapped).
    """
    out_path = Path(out_path)
    paths = [as_path(p) for p in shard_paths]
    tokenizers = set()
    total = 0
    for path in paths:
        metadata = shard_metadata(path)
        vocab_size = int(metadata["vocab_size"])
        if vocab_size > UINT16_VOCAB:
            raise ValueError(
                f"{path} has a vocabulary of {vocab_size:,} tokens, which does not fit the uint16 "
                f"of nanoGPT's .bin (at most {UINT16_VOCAB:,}); train a smaller vocabulary or "
                "read the Arrow shards directly"
            )
        tokenizers.add(metadata["tokenizer_sha256"])
        total += int(metadata["tokens"])
    if len(tokenizers) > 1:
        raise ValueError(
            f"the shards were written with {len(tokenizers)} different tokenizers; "
            "export shards of one tokenizer at a time"
        )
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


def export_mixture(mixture_dir: Path, out_dir: Path, verify: bool = True) -> dict:
    """Write a mixture folder (the mix stage's ``<run>/mix/<mixture>/``) as nanoGPT's files:
    ``train.bin`` and ``val.bin`` (flat uint16 tokens, documents separated by the end-of-document
    id), ``tokenizer.json``, ``meta.json`` (vocabulary size, special ids, what each file holds,
    the documents and tokens per licence) and the mixture's dataset card ``README.md``.

    With ``verify``, every shard's sha256 is checked against the mixture's manifest first, so a
    changed or truncated shard stops the export. The mixture folder may be remote (an fsspec URL);
    ``out_dir`` is a local folder. Returns the content of ``meta.json``."""
    if not is_local(out_dir):
        raise ValueError(
            f"{out_dir}: the export writes memory-mapped .bin files to a local folder; "
            "export to a local folder, then copy it (e.g. with your object store's CLI)"
        )
    mixture_dir, out_dir = as_path(mixture_dir), as_path(out_dir)
    from pipeline.mix.mixture import CARD_FILE, read_manifest, tokenizer_path

    manifest = read_manifest(mixture_dir)
    if verify:
        for entry in [*manifest["train"], *manifest["validation"]]:
            path = mixture_dir / entry["file"]
            if not path.is_file() or file_sha256(path) != entry["sha256"]:
                raise ValueError(f"{path} is missing or differs from the manifest (sha256); run the mix stage again")
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, split in (("train.bin", "train"), ("val.bin", "validation")):
        files[name] = export_bin([mixture_dir / e["file"] for e in manifest[split]], out_dir / name)
        files[name]["bytes_of_text"] = sum(e["bytes"] for e in manifest[split])
    with atomic_path(out_dir / "tokenizer.json") as tmp:
        tmp.write_bytes(tokenizer_path(mixture_dir, manifest).read_bytes())
    card = mixture_dir / CARD_FILE
    if card.is_file():  # the dataset card goes with the data
        with atomic_path(out_dir / CARD_FILE) as tmp:
            tmp.write_bytes(card.read_bytes())
    meta = {
        "mixture": manifest["mixture"],
        "dtype": "uint16",
        **{k: v for k, v in manifest["tokenizer"].items() if k not in ("file", "dtype")},
        "files": files,
        **({"licences": manifest["licences"]} if "licences" in manifest else {}),
    }
    with atomic_path(out_dir / "meta.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return meta
