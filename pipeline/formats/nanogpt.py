"""nanoGPT's ``meta.pkl``, written beside the ``train.bin`` and ``val.bin`` of the nanoGPT export
(the ``.bin`` files themselves: :func:`pipeline.formats.tokens.export_bin`).

nanoGPT's ``train.py`` reads the model's vocabulary size from ``<data_dir>/meta.pkl`` and nothing
else of it; without the file it builds GPT-2's 50,304-entry head. Its ``sample.py`` also reads
``stoi`` and ``itos`` (``encode = [stoi[c] for c in s]``, ``decode = ''.join(itos[i] ...)``), which
describe a character vocabulary only, as ``data/shakespeare_char/prepare.py`` writes them. So
``meta.pkl`` holds::

    vocab_size   the tokenizer's vocabulary size, added tokens included
    stoi, itos   token -> id and id -> token, every id of the vocabulary; only when the tokenizer
                 is a character vocabulary (:func:`character_vocabulary`)
"""

from __future__ import annotations

import pickle
from pathlib import Path

from tokenizers import Tokenizer

from pipeline.io.writer import atomic_path

META_PKL = "meta.pkl"
# Protocol 4 (Python 3.4+) rather than the running Python's default, so the bytes do not change
# with the interpreter.
PICKLE_PROTOCOL = 4


def character_vocabulary(tokenizer: Tokenizer) -> dict[str, int] | None:
    """``stoi`` (token -> id, every token) when ``tokenizer`` is a character vocabulary, else None.

    A character vocabulary is one where every token but the added (special) ones is one character,
    and the tokenizer encodes any string of them one id per character: then nanoGPT's
    ``[stoi[c] for c in s]`` gives the ids the shards were written with. A byte-level BPE (whose
    one-character tokens stand for bytes, ``Ġ`` for a space), a normalizer that changes the text or
    a pre-tokenizer that drops spaces each fail the round trip."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    added = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    chars = sorted((token for token in vocab if token not in added), key=vocab.__getitem__)
    if not chars or any(len(token) != 1 for token in chars):
        return None
    text = "".join(chars)
    if tokenizer.encode(text, add_special_tokens=False).ids != [vocab[c] for c in chars]:
        return None
    return dict(sorted(vocab.items(), key=lambda item: item[1]))


def nanogpt_meta(tokenizer: Tokenizer) -> dict:
    """The content of ``meta.pkl`` for shards written with ``tokenizer``: nanoGPT's own keys."""
    meta: dict = {"vocab_size": tokenizer.get_vocab_size(with_added_tokens=True)}
    stoi = character_vocabulary(tokenizer)
    if stoi is not None:
        meta["itos"] = {i: s for s, i in stoi.items()}
        meta["stoi"] = stoi
    return meta


def write_meta_pkl(tokenizer: Tokenizer, out_dir: Path) -> Path:
    """Write ``out_dir/meta.pkl`` (:func:`nanogpt_meta`) atomically; return its path."""
    path = Path(out_dir) / META_PKL
    with atomic_path(path) as tmp:
        tmp.write_bytes(pickle.dumps(nanogpt_meta(tokenizer), protocol=PICKLE_PROTOCOL))
    return path
