"""The trainer's input: a mixture directory, its token streams, training windows and validation.

A mixture directory (written by the ``mix`` stage) holds ``manifest.json``, ``tokenizer.json`` and
token shards (``pipeline.formats.tokens``'s format) under ``train/`` and ``validation/``.
:func:`open_mixture` checks it and memory-maps every shard (zero copy).

Training windows. The train shards, in manifest order, are one token stream. Window ``i`` is
``stream[i * block_size : i * block_size + block_size + 1]`` (causal: inputs ``w[:-1]``, targets
``w[1:]``, so consecutive windows share one token and every token is predicted once) or
``block_size`` tokens (masked LM, masked by :func:`trainer.model.mask_tokens`). Windows run across
document and shard boundaries, as in GPT-2 and nanoGPT: the end-of-document token separates
documents. Each epoch visits the windows in a permutation drawn from ``PCG64`` seeded by
``(seed, epoch)``, so the order is a function of the seed alone and the loader's whole state is
``(epoch, position)``. Each micro step takes the next ``world_size * micro_batch`` windows of the
permutation (the global micro batch) and rank ``r`` keeps slice ``r``: the global batch does not
depend on how many processes share it. The last, incomplete global micro batch of an epoch is
skipped (fewer than ``world_size * micro_batch`` windows).
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.formats.mixture import MANIFEST_FILE, MixtureError, read_manifest
from pipeline.formats.mixture import tokenizer_path as tokenizer_file
from pipeline.formats.tokens import file_sha256, read_token_shard, shard_metadata
from pipeline.io.storage import is_local
from trainer.config import COPY_MIXTURE_HERE
from trainer.model import mask_tokens

# Salts that keep the masking of training and of validation windows independent under one seed.
SALT_TRAIN_MASK = 0x4D41534B  # "MASK"
SALT_VALIDATION_MASK = 0x56414C  # "VAL"


class TokenStream:
    """Several token arrays (memory-mapped shards) read as one stream; a read copies only the
    tokens it returns."""

    def __init__(self, parts: list[np.ndarray]):
        self.parts = [part for part in parts if part.size]
        self.ends = np.cumsum([part.size for part in self.parts], dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ends[-1]) if self.parts else 0

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``start:stop`` of the stream as int64."""
        out = np.empty(stop - start, dtype=np.int64)
        part = int(np.searchsorted(self.ends, start, side="right"))
        filled = 0
        while start + filled < stop:
            part_start = int(self.ends[part]) - self.parts[part].size
            begin = start + filled - part_start
            take = min(stop - start - filled, self.parts[part].size - begin)
            out[filled : filled + take] = self.parts[part][begin : begin + take]
            filled += take
            part += 1
        return out


@dataclass(kw_only=True)
class Mixture:
    """A checked mixture directory. ``train`` and ``validation[group]`` hold the shards' token arrays
    in manifest order; ``validation_tokens`` / ``validation_bytes`` are per-group sums of the
    manifest's validation entries (the ratio that turns nats per token into bits per byte)."""

    path: Path
    manifest: dict
    manifest_sha256: str
    tokenizer_path: Path
    vocab_size: int
    special_ids: dict[str, int]  # eod, pad, mask, cls
    train: list[np.ndarray]
    validation: dict[str, list[np.ndarray]]
    validation_tokens: dict[str, int]
    validation_bytes: dict[str, int]

    @property
    def groups(self) -> list[str]:
        """Every group of the mixture, sorted."""
        return sorted(self.manifest["groups"])

    @property
    def validation_groups(self) -> list[str]:
        """The groups with something to evaluate: at least two validation tokens and one byte."""
        return [g for g in self.groups if self.validation_tokens.get(g, 0) >= 2 and self.validation_bytes.get(g, 0) > 0]

    @property
    def train_tokens(self) -> int:
        return sum(part.size for part in self.train)


def open_mixture(path: Path, verify_checksums: bool = True) -> Mixture:
    """Read and check the mixture directory at ``path``; memory-map its shards.

    Checks: the manifest's format, the tokenizer file's sha256, and for every shard that it
    exists, that its metadata names the manifest's tokenizer, group and token count, and (with
    ``verify_checksums``) that the file's sha256 is the manifest's. Any failure raises
    :class:`MixtureError` with one line naming the file and the fix.
    """
    if not is_local(path):
        raise MixtureError(f"mixture: {path} is not a local folder; {COPY_MIXTURE_HERE}")
    path = Path(path)
    manifest_path = path / MANIFEST_FILE
    manifest = read_manifest(path)
    tokenizer = manifest["tokenizer"]
    tokenizer_path = tokenizer_file(path, manifest)
    if verify_checksums and file_sha256(tokenizer_path) != tokenizer["sha256"]:
        raise MixtureError(
            f"{tokenizer_path} does not match the manifest's tokenizer sha256; "
            "the folder was changed after the mix stage, re-run it"
        )

    def load(entry: dict, split: str) -> np.ndarray:
        shard = path / entry["file"]
        if not shard.is_file():
            raise MixtureError(f"{shard} is listed in {split} of {manifest_path} but missing; re-run the mix stage")
        try:
            metadata = shard_metadata(shard)
        except (ValueError, OSError) as error:
            raise MixtureError(f"{shard} is not a token shard ({error}); re-run the mix stage") from None
        if metadata.get("tokenizer_sha256") != tokenizer["sha256"]:
            raise MixtureError(
                f"{shard} was written with tokenizer {metadata.get('tokenizer_sha256', '?')[:12]}, "
                f"not the manifest's {tokenizer['sha256'][:12]}; re-tokenize and re-mix"
            )
        if metadata.get("group") != entry["group"]:
            raise MixtureError(
                f"{shard} holds group {metadata.get('group')!r}, the manifest says "
                f"{entry['group']!r}; re-run the mix stage"
            )
        if int(metadata.get("tokens", -1)) != entry["tokens"]:
            raise MixtureError(
                f"{shard} holds {metadata.get('tokens')} tokens, the manifest says "
                f"{entry['tokens']}; re-run the mix stage"
            )
        if verify_checksums and file_sha256(shard) != entry["sha256"]:
            raise MixtureError(
                f"{shard} does not match its sha256 in {manifest_path}; the file changed after the mix stage, re-run it"
            )
        tokens, _ = read_token_shard(shard)
        return tokens

    train = [load(entry, "train") for entry in manifest["train"]]
    validation: dict[str, list[np.ndarray]] = {}
    validation_tokens: dict[str, int] = {}
    validation_bytes: dict[str, int] = {}
    for entry in manifest["validation"]:
        group = entry["group"]
        validation.setdefault(group, []).append(load(entry, "validation"))
        validation_tokens[group] = validation_tokens.get(group, 0) + int(entry["tokens"])
        validation_bytes[group] = validation_bytes.get(group, 0) + int(entry["bytes"])
    listed = set(validation) | {entry["group"] for entry in manifest["train"]}
    unknown = sorted(listed - set(manifest["groups"]))
    if unknown:
        raise MixtureError(
            f"{manifest_path} lists shards of groups {unknown} that are not in its 'groups'; re-run the mix stage"
        )
    specials = {role: int(tokenizer[f"{role}_id"]) for role in ("eod", "pad", "mask", "cls")}
    return Mixture(
        path=path,
        manifest=manifest,
        manifest_sha256=hashlib.sha256(manifest_path.read_bytes()).hexdigest(),
        tokenizer_path=tokenizer_path,
        vocab_size=int(tokenizer["vocab_size"]),
        special_ids=specials,
        train=train,
        validation=validation,
        validation_tokens=validation_tokens,
        validation_bytes=validation_bytes,
    )


def bits_per_byte(mean_nats: float, tokens: int, num_bytes: int) -> float:
    """Bits per byte of text from the mean loss in nats per predicted token: nats -> bits
    (/ ln 2), then per token -> per byte (* tokens / bytes of the group's validation text).
    Unlike loss per token, it compares models with different tokenizers."""
    return mean_nats / math.log(2) * tokens / num_bytes


def _mask_seed(*key: int) -> int:
    return int(np.random.SeedSequence(list(key)).generate_state(1)[0])


def _masked_windows(windows: np.ndarray, mixture: Mixture, seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask each window with its own generator (so a window's mask depends on its seed alone)."""
    tokens = torch.from_numpy(windows)
    inputs, targets = torch.empty_like(tokens), torch.empty_like(tokens)
    generator = torch.Generator()
    specials = list(mixture.special_ids.values())
    for row, seed in enumerate(seeds):
        generator.manual_seed(seed)
        inputs[row], targets[row] = mask_tokens(
            tokens[row], mixture.special_ids["mask"], mixture.vocab_size, specials, generator
        )
    return inputs, targets


class TrainLoader:
    """Batches of training windows in a seeded order, resumable from ``(epoch, position)``.

    ``next_batch()`` returns this rank's ``(inputs, targets)``, each ``(micro_batch, block_size)``
    int64 on the CPU. For the masked objective, window ``i`` of epoch ``e`` is masked with a
    generator seeded by ``(seed, e, i)``: a fresh mask every epoch (RoBERTa's dynamic masking),
    independent of batch size and world size.
    """

    def __init__(
        self,
        mixture: Mixture,
        block_size: int,
        micro_batch: int,
        seed: int,
        objective: str = "causal",
        rank: int = 0,
        world_size: int = 1,
    ):
        self.mixture = mixture
        self.stream = TokenStream(mixture.train)
        self.block_size = block_size
        self.micro_batch = micro_batch
        self.seed = seed
        self.objective = objective
        self.rank = rank
        self.world_size = world_size
        self.window = block_size + 1 if objective == "causal" else block_size
        length = len(self.stream)
        self.num_windows = (length - self.window) // block_size + 1 if length >= self.window else 0
        self.global_micro_batch = micro_batch * world_size
        if self.num_windows < self.global_micro_batch:
            raise MixtureError(
                f"{mixture.path} has {length:,} train tokens: {self.num_windows} windows of "
                f"{self.window}, fewer than one global micro batch ({self.global_micro_batch}); "
                "lower block_size or micro_batch, or mix more tokens"
            )
        self.epoch = 0
        self.position = 0
        self._order: tuple[int, np.ndarray] | None = None

    def order(self, epoch: int) -> np.ndarray:
        """The window indices of ``epoch``, in the order they are visited."""
        if self._order is None or self._order[0] != epoch:
            generator = np.random.Generator(np.random.PCG64([self.seed, epoch]))
            self._order = (epoch, generator.permutation(self.num_windows))
        return self._order[1]

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.position + self.global_micro_batch > self.num_windows:
            self.epoch, self.position = self.epoch + 1, 0
        start = self.position + self.rank * self.micro_batch
        ids = self.order(self.epoch)[start : start + self.micro_batch]
        self.position += self.global_micro_batch
        windows = np.stack([self.stream.read(i * self.block_size, i * self.block_size + self.window) for i in ids])
        if self.objective == "causal":
            tokens = torch.from_numpy(windows)
            return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        seeds = [_mask_seed(self.seed, SALT_TRAIN_MASK, self.epoch, int(i)) for i in ids]
        return _masked_windows(windows, self.mixture, seeds)

    @property
    def epochs_done(self) -> float:
        """Epochs of the train stream seen so far (windows consumed / windows per epoch)."""
        return self.epoch + self.position / self.num_windows

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def validation_batches(
    mixture: Mixture,
    group: str,
    block_size: int,
    max_tokens: int,
    batch_size: int,
    objective: str = "causal",
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """This rank's share of ``group``'s validation windows, as ``(inputs, targets)`` batches.

    Windows run at stride ``block_size`` from the start of the group's validation stream (its
    shards in manifest order), as many as cover ``max_tokens`` predicted tokens (at least one),
    the same every call. A stream shorter than one window is one shorter window. Rank ``r`` takes
    windows ``r, r + world_size, ...``. Masked windows are masked by a generator seeded from
    ``(seed, group, window)``, so every evaluation sees the same masks.
    """
    stream = TokenStream(mixture.validation.get(group, []))
    window = block_size + 1 if objective == "causal" else block_size
    length = len(stream)
    if length >= window:
        count = min((length - window) // block_size + 1, max(1, max_tokens // block_size))
    else:
        window, count = length, 1 if length >= 2 else 0
    group_key = zlib.crc32(group.encode("utf-8"))
    mine = list(range(rank, count, world_size))
    for first in range(0, len(mine), batch_size):
        ids = mine[first : first + batch_size]
        windows = np.stack([stream.read(i * block_size, i * block_size + window) for i in ids])
        if objective == "causal":
            tokens = torch.from_numpy(windows)
            yield tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        else:
            yield _masked_windows(windows, mixture, [_mask_seed(seed, SALT_VALIDATION_MASK, group_key, i) for i in ids])
