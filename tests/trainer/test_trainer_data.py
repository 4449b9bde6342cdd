"""The mixture reader and the loader: checks, windows, seeded order, ranks, resumable state."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import torch

from pipeline.formats.tokens import load_tokenizer, read_token_shard
from pipeline.tokenizer import train_tokenizer, write_token_shard
from tests.trainer_fixtures import copy_mixture, group_texts
from trainer.data import MixtureError, TokenStream, TrainLoader, bits_per_byte, open_mixture, validation_batches
from trainer.model import IGNORE_INDEX


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def _write_manifest(path, manifest):
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_open_mixture_reads_groups_and_validation_sizes(mixture_dir):
    mixture = open_mixture(mixture_dir)
    manifest = _manifest(mixture_dir)
    assert mixture.groups == ["chat", "en/news"] == mixture.validation_groups
    assert mixture.vocab_size == 320 and mixture.special_ids == {"eod": 0, "pad": 1, "mask": 2, "cls": 3}
    for group in mixture.groups:
        entries = [e for e in manifest["validation"] if e["group"] == group]
        assert mixture.validation_tokens[group] == sum(e["tokens"] for e in entries)
        assert mixture.validation_bytes[group] == sum(e["bytes"] for e in entries)
    assert mixture.train_tokens == sum(e["tokens"] for e in manifest["train"])
    assert mixture.manifest_sha256 == hashlib.sha256((mixture_dir / "manifest.json").read_bytes()).hexdigest()
    # Zero copy: the arrays map the files.
    assert all(not part.flags.owndata for part in mixture.train)


def test_token_stream_reads_across_parts():
    parts = [
        np.arange(0, 5, dtype=np.uint16),
        np.arange(5, 7, dtype=np.uint16),
        np.zeros(0, np.uint16),
        np.arange(7, 12, dtype=np.uint16),
    ]
    stream = TokenStream(parts)
    whole = np.arange(12)
    assert len(stream) == 12
    for start in range(12):
        for stop in range(start, 13):
            assert np.array_equal(stream.read(start, stop), whole[start:stop])


def test_windows_are_the_stream_at_stride_block_size(mixture_dir):
    mixture = open_mixture(mixture_dir)
    stream = np.concatenate([part.astype(np.int64) for part in mixture.train])
    loader = TrainLoader(mixture, block_size=16, micro_batch=8, seed=3)
    assert loader.num_windows == (stream.size - 17) // 16 + 1
    order = loader.order(0)
    inputs, targets = loader.next_batch()
    assert inputs.shape == targets.shape == (8, 16) and inputs.dtype == torch.int64
    for row, window in enumerate(order[:8]):
        assert np.array_equal(inputs[row].numpy(), stream[window * 16 : window * 16 + 16])
        assert np.array_equal(targets[row].numpy(), stream[window * 16 + 1 : window * 16 + 17])


def test_order_is_seeded_and_each_epoch_visits_every_window_once(mixture_dir):
    mixture = open_mixture(mixture_dir)
    one, two = (TrainLoader(mixture, 64, 4, seed=7) for _ in range(2))
    assert np.array_equal(one.order(0), two.order(0))
    assert np.array_equal(np.sort(one.order(0)), np.arange(one.num_windows))
    assert not np.array_equal(one.order(0), one.order(1))
    assert not np.array_equal(one.order(0), TrainLoader(mixture, 64, 4, seed=8).order(0))
    batches = one.num_windows // 4
    for _ in range(batches):
        a, b = one.next_batch(), two.next_batch()
        assert torch.equal(a[0], b[0])
    assert one.epoch == 0
    one.next_batch()  # the rest (< one batch) is skipped: a new epoch starts
    assert one.state_dict() == {"epoch": 1, "position": 4}
    assert one.epochs_done == pytest.approx(1 + 4 / one.num_windows)


def test_ranks_split_the_global_batch(mixture_dir):
    mixture = open_mixture(mixture_dir)
    single = TrainLoader(mixture, 32, micro_batch=6, seed=1)
    ranks = [TrainLoader(mixture, 32, micro_batch=2, seed=1, rank=r, world_size=3) for r in range(3)]
    for _ in range(25):  # past an epoch boundary too
        inputs, targets = single.next_batch()
        parts = [loader.next_batch() for loader in ranks]
        assert torch.equal(torch.cat([p[0] for p in parts]), inputs)
        assert torch.equal(torch.cat([p[1] for p in parts]), targets)
        assert all(loader.state_dict() == single.state_dict() for loader in ranks)


def test_loader_state_round_trip(mixture_dir):
    mixture = open_mixture(mixture_dir)
    loader = TrainLoader(mixture, 32, 8, seed=2)
    for _ in range(200):
        loader.next_batch()
    state = loader.state_dict()
    expected = [loader.next_batch() for _ in range(3)]
    restored = TrainLoader(mixture, 32, 8, seed=2)
    restored.load_state_dict(state)
    for (a, b), (c, d) in zip(expected, (restored.next_batch() for _ in range(3))):
        assert torch.equal(a, c) and torch.equal(b, d)


def test_masked_windows_are_seeded_by_epoch_and_window(mixture_dir):
    mixture = open_mixture(mixture_dir)
    loader = TrainLoader(mixture, 32, 4, seed=0, objective="masked")
    inputs, targets = loader.next_batch()
    assert inputs.shape == (4, 32)
    chosen = targets != IGNORE_INDEX
    assert chosen.any() and (inputs[chosen] == 2).any()
    again = TrainLoader(mixture, 32, 4, seed=0, objective="masked").next_batch()
    assert torch.equal(again[0], inputs) and torch.equal(again[1], targets)
    # Rank 1 of 2 masks its windows exactly as one process does.
    wide = TrainLoader(mixture, 32, 8, seed=0, objective="masked").next_batch()
    half = TrainLoader(mixture, 32, 4, seed=0, objective="masked", rank=1, world_size=2).next_batch()
    assert torch.equal(wide[0][4:], half[0]) and torch.equal(wide[1][4:], half[1])


def test_validation_windows_are_capped_and_fixed(mixture_dir):
    mixture = open_mixture(mixture_dir)
    group = "chat"
    stream = np.concatenate([p.astype(np.int64) for p in mixture.validation[group]])
    batches = list(validation_batches(mixture, group, block_size=16, max_tokens=100, batch_size=4))
    inputs = torch.cat([b[0] for b in batches])
    targets = torch.cat([b[1] for b in batches])
    assert inputs.shape == (6, 16)  # 100 // 16 windows
    assert np.array_equal(inputs.flatten().numpy(), stream[:96])
    assert np.array_equal(targets.flatten().numpy(), stream[1:97])
    # Ranks take alternate windows; together they are the whole set.
    shares = [
        torch.cat([b[0] for b in validation_batches(mixture, group, 16, 100, 4, rank=r, world_size=2)])
        for r in range(2)
    ]
    assert torch.equal(torch.stack([shares[0], shares[1]], dim=1).reshape(6, 16), inputs)
    # Everything when the cap is above the stream.
    everything = torch.cat([b[0] for b in validation_batches(mixture, group, 16, 10**9, 64)])
    assert everything.shape[0] == (stream.size - 17) // 16 + 1


def test_bits_per_byte_by_hand():
    # 2.0 nats per token is 2 / ln 2 = 2.885 bits per token; at 100 tokens for 400 bytes, a
    # quarter of that per byte.
    assert bits_per_byte(2.0, 100, 400) == pytest.approx(2.0 / math.log(2) / 4)
    assert bits_per_byte(math.log(2), 1, 1) == pytest.approx(1.0)


def test_bad_format_is_one_line(mixture_dir, tmp_path):
    folder = copy_mixture(mixture_dir, tmp_path / "mix")
    manifest = _manifest(folder)
    manifest["format"] = "curate.mixture/0"
    _write_manifest(folder, manifest)
    with pytest.raises(MixtureError, match="format 'curate.mixture/0'") as error:
        open_mixture(folder)
    assert "\n" not in str(error.value)
    with pytest.raises(MixtureError, match="no manifest.json"):
        open_mixture(tmp_path / "nowhere")


def test_changed_shard_is_named(mixture_dir, tmp_path):
    folder = copy_mixture(mixture_dir, tmp_path / "mix")
    manifest = _manifest(folder)
    manifest["train"][1]["sha256"] = "0" * 64
    _write_manifest(folder, manifest)
    with pytest.raises(MixtureError, match=r"train/chat-0001\.arrow does not match its sha256"):
        open_mixture(folder)


def test_shard_of_another_tokenizer_is_named(mixture_dir, tmp_path):
    """A shard re-written with another tokenizer (manifest checksum updated to match) is refused
    by the tokenizer hash in its metadata."""
    folder = copy_mixture(mixture_dir, tmp_path / "mix")
    other = load_tokenizer(train_tokenizer(group_texts("chat", 50, seed=9), tmp_path / "other.json", vocab_size=280))
    manifest = _manifest(folder)
    entry = manifest["validation"][1]
    written = write_token_shard(group_texts("en/news", 5, seed=9), other, folder / entry["file"], entry["group"])
    entry.update(tokens=written["tokens"], sha256=written["sha256"])
    _write_manifest(folder, manifest)
    with pytest.raises(MixtureError, match=r"validation/en\+news-0000\.arrow was written with tokenizer"):
        open_mixture(folder)


def test_too_few_windows_is_explained(mixture_dir):
    mixture = open_mixture(mixture_dir)
    with pytest.raises(MixtureError, match="fewer than one global micro batch"):
        TrainLoader(mixture, block_size=4096, micro_batch=64, seed=0)


def test_validation_stream_matches_the_shards(mixture_dir):
    mixture = open_mixture(mixture_dir)
    tokens, offsets = read_token_shard(mixture_dir / "validation" / "chat-0000.arrow")
    assert np.array_equal(mixture.validation["chat"][0], tokens)
    assert tokens[offsets["doc_start"].to_numpy() + offsets["doc_tokens"].to_numpy() - 1].tolist() == [0] * len(offsets)
