"""`curate export --format nanogpt|megatron|hf` on a real mixture folder, each output read back
the way the other trainer reads it, with no code of this project: nanoGPT's ``np.memmap``,
Megatron-LM's indexed dataset by its published layout (an independent reader below), and
Hugging Face ``datasets.Dataset.from_file``."""

from __future__ import annotations

import json
import os
import pickle
import struct

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from pipeline.formats.hf import write_hf_split
from pipeline.formats.megatron import write_indexed_dataset
from pipeline.formats.mixture import (
    MixtureError,
    export_mixture,
    manifest,
    shard_entry,
    shard_file,
    tokenizer_entry,
)
from pipeline.tokenizer import write_token_shard
from tests.helpers import REPO, run_curate
from tests.trainer_fixtures import copy_mixture, shared_mixture


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    return shared_mixture(tmp_path_factory)


def _documents(mixture, split: str) -> tuple[list[str], list[np.ndarray], list[str]]:
    """A split's documents in manifest order, read from its shards with pyarrow alone: ids,
    token arrays, groups."""
    manifest = json.loads((mixture / "manifest.json").read_text())
    ids, tokens, groups = [], [], []
    for entry in manifest[split]:
        with pa.memory_map(str(mixture / entry["file"]), "r") as source:
            table = ipc.open_file(source).read_all()
        ids += table.column("doc_id").to_pylist()
        tokens += [np.asarray(row, dtype=np.int64) for row in table.column("tokens").to_pylist()]
        groups += [entry["group"]] * table.num_rows
    return ids, tokens, groups


# --- Megatron-LM's indexed dataset, read by its published layout -----------------------------

MEGATRON_DTYPES = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}


def read_mmidx(prefix) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Megatron-LM's MMIDIDX index and data, from the layout of
    megatron/core/datasets/indexed_dataset.py: magic b"MMIDIDX\\x00\\x00", uint64 version 1, uint8
    dtype code, uint64 sequence count, uint64 document count, then int32 sequence lengths, int64
    sequence pointers (bytes into .bin), int64 document indices. Returns (dtype, lengths,
    pointers, document indices, the .bin as a memmap)."""
    idx = np.memmap(f"{prefix}.idx", dtype=np.uint8, mode="r")
    assert bytes(idx[:9]) == b"MMIDIDX\x00\x00"
    version, code, sequences, documents = struct.unpack("<QBQQ", bytes(idx[9:34]))
    assert version == 1
    dtype = np.dtype(MEGATRON_DTYPES[code])
    offset = 34
    lengths = np.frombuffer(idx, dtype=np.int32, count=sequences, offset=offset)
    offset += lengths.nbytes
    pointers = np.frombuffer(idx, dtype=np.int64, count=sequences, offset=offset)
    offset += pointers.nbytes
    doc_index = np.frombuffer(idx, dtype=np.int64, count=documents, offset=offset)
    assert offset + doc_index.nbytes == idx.size  # nothing after the document index
    size = os.path.getsize(f"{prefix}.bin")
    assert size == lengths.sum(dtype=np.int64) * dtype.itemsize
    data = np.memmap(f"{prefix}.bin", dtype=dtype, mode="r") if size else np.zeros(0, dtype)  # mmap needs a byte
    return dtype, lengths, pointers, doc_index, data


def _megatron_documents(prefix) -> tuple[np.dtype, list[np.ndarray]]:
    dtype, lengths, pointers, doc_index, data = read_mmidx(prefix)
    sequences = [data[p // dtype.itemsize : p // dtype.itemsize + n] for p, n in zip(pointers, lengths)]
    documents = [np.concatenate(sequences[a:b]).astype(np.int64) for a, b in zip(doc_index[:-1], doc_index[1:])]
    assert doc_index[0] == 0 and doc_index[-1] == len(sequences)
    return dtype, documents


def test_curate_export_megatron_writes_the_indexed_dataset(mixture, tmp_path):
    out = tmp_path / "megatron"
    done = run_curate(["export", str(mixture), str(out), "--format", "megatron"], REPO)
    assert done.returncode == 0, done.stderr
    assert f"--train-data-path {out / 'train'} --valid-data-path {out / 'val'}" in done.stdout
    eod = json.loads((mixture / "manifest.json").read_text())["tokenizer"]["eod_id"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["format"] == "megatron" and meta["dtype"] == "uint16"
    for prefix, split in (("train", "train"), ("val", "validation")):
        _, expected, _ = _documents(mixture, split)
        dtype, documents = _megatron_documents(out / prefix)
        assert dtype == np.uint16
        assert len(documents) == len(expected) == meta["files"][f"{prefix}.bin"]["documents"] > 0
        assert all(np.array_equal(d, e) for d, e in zip(documents, expected))
        assert all(d[-1] == eod for d in documents)  # a document ends with its end-of-document id
        assert (out / f"{prefix}.bin").stat().st_size == 2 * sum(e.size for e in expected)
    assert (out / "tokenizer.json").read_bytes() == (mixture / "tokenizer.json").read_bytes()


def test_exports_of_a_vocabulary_past_uint16_keep_every_id(tmp_path):
    vocab = {"<|endoftext|>": 0, "<|pad|>": 1, "<|mask|>": 2, "<|cls|>": 3, "<|unk|>": 4}
    vocab.update({f"w{i}": i for i in range(5, 70_000)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<|unk|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    write_token_shard(["w5 w65536 w69999", "w7"], tokenizer, tmp_path / "a.arrow", "web")
    write_token_shard([], tokenizer, tmp_path / "empty.arrow", "web")
    write_token_shard(["w70000 w65535"], tokenizer, tmp_path / "b.arrow", "web")
    entry = write_indexed_dataset([tmp_path / n for n in ("a.arrow", "empty.arrow", "b.arrow")], tmp_path / "big")
    dtype, documents = _megatron_documents(tmp_path / "big")
    assert dtype == np.int32 and entry["dtype"] == "int32"
    assert [d.tolist() for d in documents] == [[5, 65536, 69999, 0], [7, 0], [4, 65535, 0]]
    assert entry["documents"] == 3 and entry["tokens"] == 9
    write_hf_split([tmp_path / n for n in ("a.arrow", "empty.arrow", "b.arrow")], tmp_path / "big.arrow")
    with pa.memory_map(str(tmp_path / "big.arrow"), "r") as source:
        table = ipc.open_stream(source).read_all()
    assert table.schema.field("tokens").type.value_type == pa.uint32()
    assert table.column("tokens").to_pylist() == [[5, 65536, 69999, 0], [7, 0], [4, 65535, 0]]


def test_megatron_export_of_an_empty_split(tmp_path):
    entry = write_indexed_dataset([], tmp_path / "none")
    _, lengths, pointers, doc_index, data = read_mmidx(tmp_path / "none")
    assert lengths.size == pointers.size == data.size == entry["documents"] == 0 and doc_index.tolist() == [0]


# --- Hugging Face datasets ---------------------------------------------------------------------


def test_curate_export_hf_is_read_by_dataset_from_file(mixture, tmp_path):
    out = tmp_path / "hf"
    done = run_curate(["export", str(mixture), str(out), "--format", "hf"], REPO)
    assert done.returncode == 0, done.stderr
    assert f"Dataset.from_file('{out / 'train.arrow'}')" in done.stdout
    for split in ("train", "validation"):
        ids, expected, groups = _documents(mixture, split)
        with pa.memory_map(str(out / f"{split}.arrow"), "r") as source:  # the stream format
            table = ipc.open_stream(source).read_all()
        assert table.schema.names == ["doc_id", "group", "tokens"]
        assert table.schema.field("tokens").type == pa.large_list(pa.field("item", pa.uint16(), nullable=False))
        assert table.column("doc_id").to_pylist() == ids and table.column("group").to_pylist() == groups
        assert [np.asarray(t).tolist() for t in table.column("tokens").to_pylist()] == [e.tolist() for e in expected]

    datasets = pytest.importorskip("datasets")  # the reader HF users call, where it is installed
    train = datasets.Dataset.from_file(str(out / "train.arrow"))
    ids, expected, _ = _documents(mixture, "train")
    assert train.num_rows == len(ids) and list(train["doc_id"]) == ids
    assert str(train.features["tokens"]) == str(datasets.LargeList(datasets.Value("uint16")))
    assert train[len(ids) - 1]["tokens"] == expected[-1].tolist()


def test_curate_export_nanogpt_is_the_default_and_unchanged(mixture, tmp_path):
    out = tmp_path / "nano"
    done = run_curate(["export", str(mixture), str(out)], REPO)
    assert done.returncode == 0, done.stderr
    for name, split in (("train.bin", "train"), ("val.bin", "validation")):
        _, expected, _ = _documents(mixture, split)
        data = np.memmap(out / name, dtype=np.uint16, mode="r")
        assert np.array_equal(data, np.concatenate(expected))
    assert json.loads((out / "meta.json").read_text())["format"] == "nanogpt"


def test_curate_export_names_the_formats_on_an_unknown_one(mixture, tmp_path):
    done = run_curate(["export", str(mixture), str(tmp_path / "x"), "--format", "parquet"], REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("use one of nanogpt, megatron, hf")
    assert not (tmp_path / "x").exists()


# --- nanoGPT's meta.pkl, and the files an export trusts -----------------------------------------


def _nanogpt_train_py_vocab_size(data_dir) -> int | None:
    """nanoGPT's train.py, its lines that read the dataset's meta.pkl (meta_vocab_size)."""
    meta_path = os.path.join(data_dir, "meta.pkl")
    meta_vocab_size = None
    if os.path.exists(meta_path):
        with open(meta_path, "rb") as f:
            meta = pickle.load(f)
        meta_vocab_size = meta["vocab_size"]
    return meta_vocab_size


def test_nanogpt_export_has_the_meta_pkl_train_py_reads(mixture, tmp_path):
    out = tmp_path / "nano"
    done = run_curate(["export", str(mixture), str(out)], REPO)
    assert done.returncode == 0, done.stderr
    vocab_size = Tokenizer.from_file(str(mixture / "tokenizer.json")).get_vocab_size(with_added_tokens=True)
    assert _nanogpt_train_py_vocab_size(out) == vocab_size == 320
    # A BPE vocabulary is no character vocabulary: no stoi/itos for sample.py to misread.
    assert set(pickle.loads((out / "meta.pkl").read_bytes())) == {"vocab_size"}
    assert "meta.pkl" in done.stdout
    other = tmp_path / "megatron"
    assert run_curate(["export", str(mixture), str(other), "--format", "megatron"], REPO).returncode == 0
    assert not (other / "meta.pkl").exists()


def _character_mixture(folder, texts: list[str]):
    """A mixture folder whose tokenizer is a character vocabulary (as nanoGPT's shakespeare_char)."""
    chars = sorted(set("".join(texts)))
    vocab = {token: i for i, token in enumerate(["<|endoftext|>", "<|pad|>", "<|mask|>", "<|cls|>", *chars])}
    tokenizer = Tokenizer(models.BPE(vocab, merges=[]))
    tokenizer.add_special_tokens(["<|endoftext|>", "<|pad|>", "<|mask|>", "<|cls|>"])
    folder.mkdir(parents=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    entries = {}
    for split, docs in (("train", texts[1:]), ("validation", texts[:1])):
        name = shard_file(split, "web", 0)
        written = write_token_shard(docs, tokenizer, folder / name, "web")
        size = sum(len(t.encode()) for t in docs)
        entries[split] = [shard_entry(name, "web", len(docs), written["tokens"], size, written["sha256"])]
    (folder / "manifest.json").write_text(
        json.dumps(
            manifest(
                "main",
                0,
                tokenizer_entry(tokenizer, folder / "tokenizer.json"),
                {"web": {}},
                entries["train"],
                entries["validation"],
            )
        )
    )
    return folder


def test_nanogpt_export_of_a_character_vocabulary_has_stoi_and_itos(tmp_path):
    texts = ["First Citizen:\nBefore we proceed", "any further, hear me speak.", "Speak, speak."]
    folder = _character_mixture(tmp_path / "mix", texts)
    export_mixture(folder, tmp_path / "out")
    meta = pickle.loads((tmp_path / "out" / "meta.pkl").read_bytes())
    assert meta["vocab_size"] == 4 + len(set("".join(texts)))
    # nanoGPT's sample.py: encode and decode by stoi and itos.
    stoi, itos = meta["stoi"], meta["itos"]
    encode = lambda s: [stoi[c] for c in s]  # noqa: E731
    decode = lambda ids: "".join([itos[i] for i in ids])  # noqa: E731
    data = np.memmap(tmp_path / "out" / "train.bin", dtype=np.uint16, mode="r").tolist()
    assert data == encode(texts[1]) + [0] + encode(texts[2]) + [0]
    assert decode(data) == f"{texts[1]}<|endoftext|>{texts[2]}<|endoftext|>"


def test_export_refuses_a_tokenizer_that_is_not_the_manifests(mixture, tmp_path):
    folder = copy_mixture(mixture, tmp_path / "mix")
    other = Tokenizer.from_file(str(folder / "tokenizer.json"))
    other.add_tokens(["extra"])
    other.save(str(folder / "tokenizer.json"))
    with pytest.raises(MixtureError, match="tokenizer.json differs from the manifest's tokenizer"):
        export_mixture(folder, tmp_path / "out")
    assert not (tmp_path / "out" / "tokenizer.json").exists()


def test_export_reads_no_file_outside_the_mixture_folder(mixture, tmp_path):
    folder = copy_mixture(mixture, tmp_path / "runs" / "mix" / "main")
    (tmp_path / "secret").write_bytes((folder / "validation" / "chat-0000.arrow").read_bytes())
    found = json.loads((folder / "manifest.json").read_text())
    found["validation"][0]["file"] = "../../../secret"  # the right sha256: only the path is wrong
    (folder / "manifest.json").write_text(json.dumps(found))
    out = tmp_path / "out"
    done = run_curate(["export", str(folder), str(out)], REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {folder / 'manifest.json'}: validation[0].file is '../../../secret', a path outside the "
        "mixture folder; a manifest names files inside its folder, re-run the mix stage"
    ]
    assert not (out / "val.bin").exists()


def test_curate_export_refuses_a_folder_of_other_files_and_one_inside_the_run(mixture, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    (out / "train.bin").write_bytes(b"my tokens")
    done = run_curate(["export", str(mixture), str(out)], REPO)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "holds files curate did not write (README.md, train.bin)" in done.stderr
    assert (out / "README.md").read_text() == "my notes" and (out / "train.bin").read_bytes() == b"my tokens"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "train.bin"]

    before = {p: p.read_bytes() for p in mixture.rglob("*") if p.is_file()}
    for inside in (mixture / "train", mixture / "exported"):
        done = run_curate(["export", str(mixture), str(inside)], REPO)
        assert done.returncode == 2
        assert "which the export reads; export to a folder outside it" in done.stderr.strip().splitlines()[-1]
    assert {p: p.read_bytes() for p in mixture.rglob("*") if p.is_file()} == before


def test_curate_export_again_into_its_own_folder_replaces_its_files_only(mixture, tmp_path):
    out = tmp_path / "out"
    assert run_curate(["export", str(mixture), str(out)], REPO).returncode == 0
    assert (out / "train.bin").exists()
    done = run_curate(["export", str(mixture), str(out), "--format", "hf"], REPO)
    assert done.returncode == 0, done.stderr
    assert not (out / "train.bin").exists()  # the earlier export's files went
    assert (out / "train.arrow").exists() and json.loads((out / "meta.json").read_text())["format"] == "hf"
