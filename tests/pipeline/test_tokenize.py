"""Tokenizer training and tokenized shards: determinism, special ids, exact round trips and counts."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from pipeline.formats.tokens import (
    SHARD_FORMAT,
    decode_documents,
    export_bin,
    gather_token_shard,
    load_tokenizer,
    read_token_shard,
    special_ids,
    tokenizer_sha256,
)
from pipeline.tokenizer import train_tokenizer, write_token_shard

REPO = Path(__file__).resolve().parents[2]

WORDS = (
    "the quick brown fox jumps over lazy dogs while seven wizards quietly judge boxing matches "
    "data pipelines curate tokens shards models train evaluate"
).split()

# Texts a byte-level BPE must give back byte for byte: layout, accents, scripts, emoji, control
# characters, an empty document, and the special tokens' own spelling inside a document.
AWKWARD = [
    "",
    " ",
    "Leading and trailing spaces  ",
    "Tabs\tand\r\nWindows line ends\n\n\nand blank lines",
    "Café, crème brûlée, naïve résumé; Ærøskøbing",
    "Ελληνικά, русский, العربية, 日本語のテキスト, 한국어",
    "Emoji 🙂👍🏽 and ZWJ 👩‍👩‍👧 sequences",
    "Control \x00\x07\x1b characters and \ufeff a BOM",
    "A page about tokenizers: <|endoftext|> ends a document, <|pad|> pads, [SEP] and ##ing too.",
]

BPE_IDS = {"eod": 0, "pad": 1, "mask": 2, "cls": 3}
WORDPIECE_IDS = {"eod": 0, "pad": 1, "mask": 2, "cls": 3, "unk": 4}


def corpus(n: int = 300, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(5, 40)))
        docs.append(f"Doc {i}: " + " ".join(words) + f". Value {int(rng.integers(0, 10_000))}.")
    return docs


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> tuple[Path, Tokenizer]:
    path = train_tokenizer(corpus() + AWKWARD, tmp_path_factory.mktemp("bpe") / "tokenizer.json", vocab_size=400)
    return path, load_tokenizer(path)


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory) -> tuple[Path, Tokenizer]:
    path = train_tokenizer(corpus(), tmp_path_factory.mktemp("wp") / "tokenizer.json", kind="wordpiece", vocab_size=300)
    return path, load_tokenizer(path)


def read_with_pyarrow(path: Path) -> tuple[dict, pa.RecordBatch]:
    """A shard as someone without this project reads it."""
    with pa.memory_map(str(path), "r") as source:
        reader = ipc.open_file(source)
        assert reader.num_record_batches == 1
        batch = reader.get_batch(0)
        metadata = {k.decode(): v.decode() for k, v in reader.schema.metadata.items()}
        return metadata, batch


# ---------------------------------------------------------------------------------- tokenizers


@pytest.mark.parametrize("kind, vocab_size", [("bpe", 400), ("wordpiece", 300)])
def test_training_twice_gives_the_same_bytes(tmp_path, kind, vocab_size):
    texts = corpus()
    first = train_tokenizer(texts, tmp_path / "a.json", kind=kind, vocab_size=vocab_size)
    # A generator the second time: the input is streamed, never needed twice by the caller.
    second = train_tokenizer(iter(texts), tmp_path / "b.json", kind=kind, vocab_size=vocab_size)
    third = train_tokenizer(texts, tmp_path / "c.json", kind=kind, vocab_size=vocab_size)
    assert first.read_bytes() == second.read_bytes() == third.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "c.json"]  # no temporaries


def test_training_is_the_same_in_another_process_with_one_thread(tmp_path):
    """Another process has other hash seeds; one rayon thread splits the work differently."""
    texts = corpus()
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    for kind, vocab_size in (("bpe", 400), ("wordpiece", 300)):
        train_tokenizer(texts, tmp_path / f"{kind}-here.json", kind=kind, vocab_size=vocab_size)
    script = (
        "import json, sys; from pathlib import Path; from pipeline.tokenizer import train_tokenizer\n"
        "d = Path(sys.argv[1]); texts = json.loads((d / 'texts.json').read_text())\n"
        "train_tokenizer(texts, d / 'bpe-there.json', kind='bpe', vocab_size=400)\n"
        "train_tokenizer(texts, d / 'wordpiece-there.json', kind='wordpiece', vocab_size=300)\n"
    )
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, env=env, check=True)
    for kind in ("bpe", "wordpiece"):
        assert (tmp_path / f"{kind}-here.json").read_bytes() == (tmp_path / f"{kind}-there.json").read_bytes()


def test_wordpiece_declares_continuations_it_missed_and_stays_deterministic(tmp_path, monkeypatch):
    """If the character filter wrongly skips characters, training runs again with the ##x tokens
    it created declared, and the result is again the same every time."""
    import pipeline.tokenizer as tokenize

    monkeypatch.setattr(tokenize, "_may_continue_word", lambda char: False)
    texts = corpus()
    first = train_tokenizer(texts, tmp_path / "a.json", kind="wordpiece", vocab_size=300)
    second = train_tokenizer(texts, tmp_path / "b.json", kind="wordpiece", vocab_size=300)
    assert first.read_bytes() == second.read_bytes()
    assert load_tokenizer(first).token_to_id("##a") is not None


def test_special_tokens_have_the_documented_ids(bpe, wordpiece):
    bpe_tok, wp_tok = bpe[1], wordpiece[1]
    assert special_ids(bpe_tok) == BPE_IDS
    assert special_ids(wp_tok) == WORDPIECE_IDS
    names = {0: "<|endoftext|>", 1: "<|pad|>", 2: "<|mask|>", 3: "<|cls|>", 4: "<|unk|>"}
    for tok, count in ((bpe_tok, 4), (wp_tok, 5)):
        added = tok.get_added_tokens_decoder()
        # Only the special tokens are added tokens (WordPiece's declared ##x tokens are plain vocabulary).
        assert {i: t.content for i, t in added.items()} == {i: names[i] for i in range(count)}
        assert all(t.special for t in added.values())
    assert bpe_tok.token_to_id("<|unk|>") is None  # byte-level: nothing is unknown
    assert bpe_tok.get_vocab_size() == 400
    assert wp_tok.token_to_id("##a") is not None
    assert "##a" not in wp_tok.encode("x ##a", add_special_tokens=False).tokens


def test_tokenizer_hash_is_the_file_hash(bpe):
    path, tok = bpe
    assert tokenizer_sha256(tok) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_foreign_tokenizer_and_bad_settings_are_refused(tmp_path):
    foreign = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match="no <\\|endoftext\\|>"):
        special_ids(foreign)
    with pytest.raises(ValueError, match="unknown tokenizer kind 'unigram'"):
        train_tokenizer(["a"], tmp_path / "t.json", kind="unigram")
    with pytest.raises(ValueError, match="below the 260"):
        train_tokenizer(["a"], tmp_path / "t.json", vocab_size=100)
    with pytest.raises(FileNotFoundError, match="no tokenizer at"):
        load_tokenizer(tmp_path / "missing.json")
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------- shards


def test_bpe_shard_read_by_pyarrow_alone_decodes_to_the_exact_texts(tmp_path, bpe):
    path, tok = bpe
    texts = corpus(50, seed=1) + AWKWARD
    ids = [f"doc-{i}" for i in range(len(texts))]
    entry = write_token_shard(list(zip(ids, texts)), tok, tmp_path / "web-0000.arrow", "web", batch_size=16)

    metadata, batch = read_with_pyarrow(tmp_path / "web-0000.arrow")
    assert batch.schema.names == ["doc_id", "tokens"]
    assert batch.schema.field("tokens").type == pa.large_list(pa.field("item", pa.uint16(), nullable=False))
    assert metadata == {
        "format": SHARD_FORMAT,
        "group": "web",
        "tokenizer_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "vocab_size": "400",
        "dtype": "uint16",
        "eod_id": "0",
        "documents": str(len(texts)),
        "tokens": str(entry["tokens"]),
    }
    assert batch.column("doc_id").to_pylist() == ids
    rows = batch.column("tokens").to_pylist()
    assert all(row[-1] == 0 for row in rows)
    # Decoding needs only the tokenizers library and the tokenizer.json.
    plain = Tokenizer.from_file(str(path))
    assert [plain.decode(row[:-1], skip_special_tokens=False) for row in rows] == texts
    assert decode_documents(tmp_path / "web-0000.arrow", tok) == texts


def test_manifest_counts_are_the_shard_contents(tmp_path, bpe):
    _, tok = bpe
    texts = corpus(200, seed=2) + AWKWARD
    out = tmp_path / "s.arrow"
    entry = write_token_shard(texts, tok, out, "news", batch_size=64)

    # The shard encodes special-token spellings inside a text as text; a plain encoder would not.
    as_text = Tokenizer.from_str(tok.to_str())
    as_text.encode_special_tokens = True
    expected = [e.ids + [0] for e in as_text.encode_batch(texts, add_special_tokens=False)]
    flat = np.concatenate([np.asarray(ids) for ids in expected])
    plain = [e.ids + [0] for e in tok.encode_batch(texts, add_special_tokens=False)]
    assert sum(row.count(0) for row in plain) > len(texts)
    _, batch = read_with_pyarrow(out)
    tokens = batch.column("tokens").values.to_numpy()
    assert np.array_equal(tokens, flat)  # exactly encode_batch's ids, one end token after each
    assert entry == {
        "file": "s.arrow",
        "group": "news",
        "documents": len(texts),
        "tokens": int(flat.size),
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        "dtype": "uint16",
        "vocab_size": 400,
        "tokenizer_sha256": tokenizer_sha256(tok),
    }
    # The literal "<|endoftext|>" in a text was encoded as text: end tokens == documents.
    assert int((tokens == special_ids(tok)["eod"]).sum()) == entry["documents"]
    assert batch.column("doc_id").null_count == len(texts)  # texts alone carry no ids
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.arrow"]  # no temporaries left


def test_read_token_shard_maps_the_file_without_copying(tmp_path, bpe):
    _, tok = bpe
    texts = corpus(100, seed=3)
    entry = write_token_shard(texts, tok, tmp_path / "s.arrow", "web")
    before = pa.total_allocated_bytes()
    tokens, offsets = read_token_shard(tmp_path / "s.arrow")
    # The tokens were not read into memory: the array views the mapped file.
    assert pa.total_allocated_bytes() - before < tokens.nbytes / 10
    assert tokens.dtype == np.uint16 and tokens.size == entry["tokens"] and not tokens.flags.writeable
    assert offsets.schema == pl.Schema({"doc_id": pl.String, "doc_start": pl.Int64, "doc_tokens": pl.Int32})
    starts, counts = offsets["doc_start"].to_numpy(), offsets["doc_tokens"].to_numpy()
    assert starts[0] == 0 and int(counts.sum()) == tokens.size
    assert np.array_equal(starts[1:], np.cumsum(counts)[:-1])
    assert np.all(tokens[starts + counts - 1] == 0)
    # polars alone reads it too, one row per document.
    frame = pl.read_ipc(tmp_path / "s.arrow")
    assert frame.height == len(texts) and frame["tokens"].list.len().to_list() == counts.tolist()


def test_same_inputs_give_the_same_shard_bytes(tmp_path, bpe):
    _, tok = bpe
    texts = corpus(120, seed=4)
    a = write_token_shard(texts, tok, tmp_path / "a.arrow", "web", batch_size=32)
    b = write_token_shard(iter(texts), tok, tmp_path / "b.arrow", "web", batch_size=50)
    assert a["sha256"] == b["sha256"]


def test_arrow_document_batches_are_accepted(tmp_path, bpe):
    _, tok = bpe
    texts = corpus(70, seed=5)
    table = pa.table({"id": [f"n{i}" for i in range(70)], "text": texts, "source": ["news"] * 70})
    batches = table.to_batches(max_chunksize=25)
    entry = write_token_shard(batches, tok, tmp_path / "s.arrow", "news", batch_size=16)
    _, offsets = read_token_shard(tmp_path / "s.arrow")
    assert entry["documents"] == 70 and offsets["doc_id"].to_list() == table["id"].to_pylist()
    assert decode_documents(tmp_path / "s.arrow", tok) == texts


def test_a_document_without_text_stops_the_shard(tmp_path, bpe):
    _, tok = bpe
    with pytest.raises(TypeError, match="document b has text of type NoneType"):
        write_token_shard([("a", "fine"), ("b", None)], tok, tmp_path / "s.arrow", "web")
    assert not list(tmp_path.iterdir())


def test_wordpiece_shard_keeps_words_but_not_layout(tmp_path, wordpiece):
    _, tok = wordpiece
    texts = ["the quick  brown\nfox jumps", "lazy dogs: seven wizards.", "Value 3.14", "🙂 quick"]
    write_token_shard(texts, tok, tmp_path / "s.arrow", "web")
    assert decode_documents(tmp_path / "s.arrow", tok) == [
        "the quick brown fox jumps",  # whitespace runs and newlines: one space
        "lazy dogs : seven wizards.",  # punctuation split off; spaces around it guessed
        "Value 3. 14",
        "<|unk|> quick",  # a character never seen in training
    ]


def test_vocabulary_over_65536_is_stored_as_uint32(tmp_path):
    vocab = {"<|endoftext|>": 0, "<|pad|>": 1, "<|mask|>": 2, "<|cls|>": 3, "<|unk|>": 4}
    vocab.update({f"w{i}": i for i in range(5, 70_000)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    texts = ["w5 w65535 w65536 w69999", "w70000 w100"]
    entry = write_token_shard(texts, tok, tmp_path / "big.arrow", "web")
    assert entry["dtype"] == "uint32" and entry["tokens"] == 4 + 1 + 2 + 1
    tokens, _ = read_token_shard(tmp_path / "big.arrow")
    assert tokens.dtype == np.uint32
    assert tokens.tolist() == [5, 65535, 65536, 69999, 0, 4, 100, 0]  # ids past uint16 intact
    with pytest.raises(ValueError, match="vocabulary of 70,000 tokens, which does not fit the uint16"):
        export_bin([tmp_path / "big.arrow"], tmp_path / "train.bin")
    assert not (tmp_path / "train.bin").exists()

    small = dict(list(vocab.items())[:65_536])  # ids 0..65535: still uint16
    small_tok = Tokenizer(models.WordLevel(small, unk_token="<|unk|>"))
    small_tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    assert write_token_shard(["w65535"], small_tok, tmp_path / "edge.arrow", "web")["dtype"] == "uint16"


def test_export_bin_is_the_concatenated_tokens(tmp_path, bpe):
    _, tok = bpe
    entries = [write_token_shard(corpus(60, seed=s), tok, tmp_path / f"s{s}.arrow", "web") for s in (6, 7)]
    empty = write_token_shard([], tok, tmp_path / "empty.arrow", "web")
    assert empty["documents"] == empty["tokens"] == 0
    paths = [tmp_path / "s6.arrow", tmp_path / "empty.arrow", tmp_path / "s7.arrow"]
    out = export_bin(paths, tmp_path / "train.bin")
    data = np.memmap(tmp_path / "train.bin", dtype=np.uint16, mode="r")  # as nanoGPT's train.py reads it
    expected = np.concatenate([read_token_shard(p)[0] for p in paths])
    assert np.array_equal(data, expected)
    assert out["tokens"] == data.size == sum(e["tokens"] for e in entries)
    assert out["sha256"] == hashlib.sha256((tmp_path / "train.bin").read_bytes()).hexdigest()


def test_a_gathered_shard_holds_the_listed_documents_in_order_as_their_sources_do(tmp_path, bpe):
    _, tok = bpe
    sources = []
    for s, n in ((3, 40), (4, 25)):
        texts = corpus(n, seed=s)
        write_token_shard([(f"s{s}-{i}", t) for i, t in enumerate(texts)], tok, tmp_path / f"s{s}.arrow", "web")
        sources.append(tmp_path / f"s{s}.arrow")
    write_token_shard(["no id here"], tok, tmp_path / "anon.arrow", "web")
    rng = np.random.default_rng(0)
    # Pieces that come back to a source, repeat rows (upsampling), are empty or one row long.
    rows = [(sources[0], rng.integers(0, 40, 7)), (sources[1], np.array([24, 0, 0])), (sources[0], np.array([], int))]
    rows += [(tmp_path / "anon.arrow", np.array([0])), (sources[1], rng.integers(0, 25, 30)), (sources[0], [39])]
    entry = gather_token_shard(rows, tmp_path / "out.arrow", "mixed")

    expected_tokens, expected_ids = [], []
    for path, numbers in rows:  # the plain reading: one document at a time
        tokens, offsets = read_token_shard(path)
        for r in np.asarray(numbers, int).tolist():
            start, length = offsets["doc_start"][r], offsets["doc_tokens"][r]
            expected_tokens.append(tokens[start : start + length].tolist())
            expected_ids.append(offsets["doc_id"][r])
    metadata, batch = read_with_pyarrow(tmp_path / "out.arrow")
    assert batch.column("doc_id").to_pylist() == expected_ids and expected_ids[10] is None
    assert batch.column("tokens").to_pylist() == expected_tokens
    assert metadata["group"] == "mixed" and int(metadata["documents"]) == len(expected_ids) == 42
    assert entry["documents"] == 42 and entry["tokens"] == sum(map(len, expected_tokens))
    assert entry["sha256"] == hashlib.sha256((tmp_path / "out.arrow").read_bytes()).hexdigest()


def test_a_gather_refuses_rows_outside_a_shard_and_shards_of_two_tokenizers(tmp_path, bpe, wordpiece):
    write_token_shard(["a b", "c d"], bpe[1], tmp_path / "a.arrow", "web")
    write_token_shard(["a b"], wordpiece[1], tmp_path / "b.arrow", "web")
    with pytest.raises(ValueError, match=r"row 2 is outside a.arrow \(2 documents\)"):
        gather_token_shard([(tmp_path / "a.arrow", [0, 2, 1])], tmp_path / "out.arrow", "web")
    with pytest.raises(ValueError, match="2 tokenizers"):
        gather_token_shard([(tmp_path / "a.arrow", [0]), (tmp_path / "b.arrow", [0])], tmp_path / "out.arrow", "web")
    with pytest.raises(ValueError, match="no source shard"):
        gather_token_shard([], tmp_path / "out.arrow", "web")
    assert not (tmp_path / "out.arrow").exists()


def test_export_bin_refuses_shards_of_different_tokenizers(tmp_path, bpe, wordpiece):
    write_token_shard(["a b"], bpe[1], tmp_path / "a.arrow", "web")
    write_token_shard(["a b"], wordpiece[1], tmp_path / "b.arrow", "web")
    with pytest.raises(ValueError, match="2 different tokenizers"):
        export_bin([tmp_path / "a.arrow", tmp_path / "b.arrow"], tmp_path / "train.bin")


def test_curate_train_tokenizer_samples_the_runs_last_stage(tmp_path):
    import json

    import polars as pl
    from typer.testing import CliRunner

    from flows.cli import app

    run = tmp_path / "run"
    (run / "filter" / "docs").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"stages": {"source": {}, "lang": {}, "filter": {}}}))
    texts = [f"Document {i} talks about rivers, bridges and the weather in spring." for i in range(200)]
    pl.DataFrame({"id": [f"d{i}" for i in range(200)], "text": texts}).write_parquet(
        run / "filter" / "docs" / "a.parquet"
    )
    result = CliRunner().invoke(app, ["train-tokenizer", str(run), str(tmp_path / "tok"), "--vocab-size", "300"])
    assert result.exit_code == 0, result.output
    assert "trained on 200 documents of stage filter" in result.output
    tokenizer = load_tokenizer(tmp_path / "tok")
    assert tokenizer.decode(tokenizer.encode(texts[0]).ids) == texts[0]
    result = CliRunner().invoke(app, ["train-tokenizer", str(run), str(tmp_path / "x"), "--stage", "dedup"])
    assert result.exit_code == 2 and "pick one of source, lang, filter" in result.output


# --- the tokenizer's sample, shard by shard -------------------------------------------------


def _shards(folder, ids: list[str], shards: int) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        mine = ids[s::shards]
        path = folder / f"docs-{s:03d}.parquet"
        pl.DataFrame({"id": mine, "text": [f"text of {i}" for i in mine]}).write_parquet(path)
        paths.append(path)
    return paths


def test_the_tokenizer_sample_is_the_smallest_keys_whatever_the_shards(tmp_path, monkeypatch):
    """The sample is the documents with the smallest seeded keys: the same ids on 1 or 7 shards,
    exactly sample_docs of them, and the same again when the first pass's bound falls short."""
    from pipeline.formats.hashing import seeded_id_hash
    from pipeline.stages import tokenize as stage
    from pipeline.stages.units import in_process

    ids = [f"doc-{i:05d}" for i in range(5000)]
    keys = pl.DataFrame({"id": ids, "key": seeded_id_hash(pl.Series(ids), 3, stage._SALT)})
    expected = sorted(keys.sort("key", "id").head(300)["id"].to_list())
    for shards in (1, 7):
        sample = stage.draw_sample(_shards(tmp_path / f"s{shards}", ids, shards), 300, len(ids), 3, in_process)
        assert sample["id"].to_list() == expected
        assert sample["text"].to_list() == [f"text of {i}" for i in expected]
    # Units return a bounded share: about 300 + 10 sqrt(300) + 100 keys of 5,000, not every id.
    found = pl.concat(
        [
            stage.sample_candidates(stage.KeysJob(p, 3, stage.sample_bound(300, len(ids))))
            for p in _shards(tmp_path / "b", ids, 4)
        ]
    )
    assert 300 <= found.height < 700
    # A bound that lets too few through: the draw falls back to every key, and finds the same.
    monkeypatch.setattr(stage, "sample_bound", lambda wanted, total: 1 << 50)
    sample = stage.draw_sample(_shards(tmp_path / "short", ids, 3), 300, len(ids), 3, in_process)
    assert sample["id"].to_list() == expected
    # All of them when the sample is as large as the pool.
    assert stage.draw_sample(_shards(tmp_path / "all", ids, 3), 9000, len(ids), 3, in_process).height == 5000


def test_a_stage_shard_is_encoded_by_the_tokenizer_file_as_it_is_now(tmp_path, bpe, wordpiece):
    """The tokenize stage makes a tokenizer's encoder once per process and file content: a shard
    written with it is the shard written from the tokenizer itself, and a tokenizer file replaced
    at the same path (a rerun that trains another) encodes the next shard, not the one made before."""
    from pipeline.stages.tokenize import TokenizeJob, tokenize_shard

    docs = tmp_path / "web-00000.parquet"
    texts = corpus(90, seed=6)
    pl.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts}).write_parquet(docs)
    path = tmp_path / "tokenizer" / "tokenizer.json"
    path.parent.mkdir()
    for (source, tok), given in ((bpe, path), (wordpiece, path), (bpe, path.parent)):  # the file, or its folder
        path.write_bytes(source.read_bytes())
        out = tmp_path / f"out-{tok.get_vocab_size()}"
        entry = tokenize_shard(
            TokenizeJob(in_path=docs, tokenizer=given, out_dir=out, batch_docs=32, record=out / "record.json")
        )
        direct = write_token_shard(
            list(zip([f"d{i}" for i in range(len(texts))], texts)), tok, tmp_path / "d.arrow", docs.stem
        )
        assert entry["sha256"] == direct["sha256"] and entry["tokenizer_sha256"] == tokenizer_sha256(tok)


def test_a_tokenizer_replaced_at_its_given_path_tokenizes_the_stage_again(tmp_path, bpe, wordpiece):
    """A run given a tokenizer by path keys its token shards on the file's bytes, not its name: an
    experiment that trains its tokenizer again at the same path gets shards of the new one."""
    from pipeline.stages.tokenize import run_tokenize
    from tests.helpers import source_config, tokenized_run, write_jsonl

    write_jsonl(tmp_path / "web" / "a.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(corpus(40, seed=2))])
    given = tmp_path / "tokenizer.json"
    given.write_bytes(bpe[0].read_bytes())
    off = {"enabled": False}
    config = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "web")], "id_field": "id"}],
        lang=off, filter=off, dedup=off, lines=off, mix=off, tokenize={"tokenizer": str(given)},
    )  # fmt: skip
    tokenized_run(config)
    given.write_bytes(wordpiece[0].read_bytes())
    stats = run_tokenize("source", config)
    assert {entry["tokenizer_sha256"] for entry in stats.shards} == {tokenizer_sha256(wordpiece[1])}
