"""Tokenizer training, and documents encoded into token shards.

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

The special tokens and their ids, and the layout of a shard, are :mod:`pipeline.formats.tokens`'s.

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

Writing shards
--------------
The writer holds two batches of texts and each document's id and length in memory, never the
shard's tokens: those are spooled to a raw temporary file and memory-mapped back when the record
batch is written.

Writing a shard runs at bare ``encode_batch``'s speed (``benchmarks/tokenize_throughput.py``,
figures in ``benchmarks/README.md``): encoding dominates, and turning ids into numpy, about 5% of
one core's encoding time, runs while the next batch encodes.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from pipeline.formats.tokens import (
    SPECIAL_TOKENS,
    UNK_TOKEN,
    file_sha256,
    shard_encoder,
    special_ids,
    token_dtype,
    token_shard_entry,
    tokenizer_sha256,
    write_shard,
)
from pipeline.io.storage import as_path
from pipeline.io.writer import atomic_sink, scratch_file, write_text

WORDPIECE_PREFIX = "##"

TEXT_BATCH = 1024  # texts handed to the tokenizer's trainer or encoder at a time

TokenizerKind = Literal["bpe", "wordpiece"]


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


@dataclass(frozen=True)
class ShardEncoding:
    """What writing a token shard takes from a tokenizer, made once (:func:`shard_encoding`): the
    encoder (:func:`pipeline.formats.tokens.shard_encoder`), the vocabulary's size, the id type,
    the end-of-document id and the tokenizer's sha256. Making it costs about 0.03 s for an
    8,192-token BPE (copying and hashing the tokenizer's JSON), which a curated shard of a few
    hundred documents took again and again."""

    encoder: Tokenizer
    vocab_size: int
    dtype: np.dtype
    eod: int
    tokenizer_sha256: str


def shard_encoding(tokenizer: Tokenizer) -> ShardEncoding:
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    return ShardEncoding(
        shard_encoder(tokenizer),
        vocab_size,
        token_dtype(vocab_size),
        special_ids(tokenizer)["eod"],
        tokenizer_sha256(tokenizer),
    )


def write_token_shard(
    texts: Iterable, tokenizer: Tokenizer | ShardEncoding, out_path: Path, group: str, batch_size: int = 1024
) -> dict:
    """Encode ``texts`` and write them as one tokenized shard at ``out_path``, atomically.

    ``texts`` yields texts, ``(id, text)`` pairs or Arrow batches with ``text`` (and ``id``)
    columns; ``tokenizer`` is a tokenizer or its :class:`ShardEncoding`, made once for many
    shards. Documents are encoded in batches of ``batch_size`` with ``encode_batch_fast`` (the
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
    made = tokenizer if isinstance(tokenizer, ShardEncoding) else shard_encoding(tokenizer)
    encoder, vocab_size, dtype, eod = made.encoder, made.vocab_size, made.dtype, made.eod
    tokenizer_hash = made.tokenizer_sha256
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
            write_shard(out, doc_ids, offsets, values, group, tokenizer_hash, vocab_size, eod)
            del values
        digest = file_sha256(out)
    return token_shard_entry(out_path, group, len(doc_ids), total, digest, dtype, vocab_size, tokenizer_hash)


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
