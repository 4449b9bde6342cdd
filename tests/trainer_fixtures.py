"""Tiny mixture directories for the trainer's tests, written exactly as the mix stage lays them out:
``manifest.json`` ("curate.mixture/1"), ``tokenizer.json`` and token shards under ``train/`` and
``validation/``, two groups (one with a "/" in its name and two train shards)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest

from pipeline.formats.tokens import load_tokenizer, special_ids
from pipeline.tokenizer import train_tokenizer, write_token_shard

GROUPS = ("en/news", "chat")

SUBJECTS = (
    "the council",
    "a farmer",
    "the old bridge",
    "our café",
    "the river",
    "a small team",
    "the market",
    "the mayor",
    "each student",
    "the museum",
)
VERBS = ("opened", "closed", "repaired", "visited", "praised", "questioned", "moved", "built", "sold", "painted")
OBJECTS = (
    "the station",
    "three houses",
    "a new road",
    "the garden",
    "its doors",
    "the old mill",
    "a bakery",
    "the school",
    "two boats",
    "the naïve plan",
)
PLACES = ("in Zürich", "near the coast", "on Monday", "after the storm", "before noon", "in spring", "at dawn")
NAMES = ("Ana", "Ben", "Chloé", "Dev", "Eli", "Fatou", "Gus", "Hana")
FEELINGS = ("fine", "tired", "happy", "busy", "hungry", "curious", "great")
TOPICS = ("the weather", "lunch", "the game", "music", "the trip", "books", "work")


def news_text(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 6)):
        sentence = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}."
        sentences.append(sentence[0].upper() + sentence[1:])
    if rng.random() < 0.3:
        sentences.append(f"Costs rose {rng.randint(2, 97)}% to {rng.randint(10, 999)} euros.")
    return " ".join(sentences)


def chat_text(rng: random.Random) -> str:
    a, b = rng.sample(NAMES, 2)
    turns = [f"{a}: Hi {b}, how are you?", f"{b}: I'm {rng.choice(FEELINGS)}, thanks! And you?"]
    for _ in range(rng.randint(1, 4)):
        speaker = rng.choice((a, b))
        turns.append(f"{speaker}: Did you hear about {rng.choice(TOPICS)}? It was {rng.choice(FEELINGS)}.")
    return "\n".join(turns)


def group_texts(group: str, count: int, seed: int) -> list[str]:
    rng = random.Random(f"{group}-{seed}")
    make = news_text if group.endswith("news") else chat_text
    return [make(rng) for _ in range(count)]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_mixture(
    folder: Path, train_docs: int = 240, validation_docs: int = 24, vocab_size: int = 320, seed: int = 0
) -> Path:
    """Write a mixture directory at ``folder`` (``<run_dir>/mix/<name>`` in a real run); return it."""
    folder = Path(folder)
    texts = {group: group_texts(group, train_docs + validation_docs, seed) for group in GROUPS}
    tokenizer_path = train_tokenizer(
        [t for group in GROUPS for t in texts[group]], folder / "tokenizer.json", vocab_size=vocab_size
    )
    tokenizer = load_tokenizer(tokenizer_path)
    ids = special_ids(tokenizer)

    def shard(split: str, group: str, part: int, docs: list[str]) -> dict:
        name = f"{split}/{group.replace('/', '+')}-{part:04d}.arrow"
        written = write_token_shard(
            [(f"{group}-{split}-{part}-{i}", t) for i, t in enumerate(docs)], tokenizer, folder / name, group
        )
        return {
            "file": name,
            "group": group,
            "documents": written["documents"],
            "tokens": written["tokens"],
            "bytes": sum(len(t.encode("utf-8")) for t in docs),
            "sha256": written["sha256"],
        }

    train, validation, groups = [], [], {}
    for group in sorted(GROUPS):
        docs = texts[group]
        held_out, kept = docs[:validation_docs], docs[validation_docs:]
        # The first group's train documents go to two shards, so windows cross a shard boundary.
        parts = [kept[: len(kept) // 2], kept[len(kept) // 2 :]] if group == sorted(GROUPS)[0] else [kept]
        entries = [shard("train", group, part, chunk) for part, chunk in enumerate(parts)]
        val_entry = shard("validation", group, 0, held_out)
        train += entries
        validation.append(val_entry)
        tokens = sum(e["tokens"] for e in entries)
        groups[group] = {
            "documents_available": len(kept),
            "tokens_available": tokens,
            "tokens_allocated": tokens,
            "tokens_taken": tokens,
            "documents_taken": len(kept),
            "epochs": 1.0,
            "effective_weight": 0.5,
            "target_weight": 0.5,
            "capped": False,
            "validation_documents": len(held_out),
            "validation_tokens": val_entry["tokens"],
            "validation_bytes": val_entry["bytes"],
            "contaminated_documents": 0,
        }
    total = sum(e["tokens"] for e in train)
    manifest = {
        "format": "curate.mixture/1",
        "mixture": "main",
        "seed": seed,
        "tokenizer": {
            "file": "tokenizer.json",
            "sha256": _sha256(tokenizer_path),
            "vocab_size": vocab_size,
            "dtype": "uint16",
            "eod_id": ids["eod"],
            "pad_id": ids["pad"],
            "mask_id": ids["mask"],
            "cls_id": ids["cls"],
        },
        "budget_tokens": total,
        "tokens_taken": total,
        "max_epochs": None,
        "groups": groups,
        "train": train,
        "validation": validation,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return folder


_SHARED: dict[Path, Path] = {}


def shared_mixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny mixture for the whole test session (built on first use); tests that change it
    work on a copy. ``tests/trainer/conftest.py`` gives it to the trainer's tests as the
    ``mixture_dir`` fixture; the train flow's test calls it directly."""
    key = tmp_path_factory.getbasetemp()
    if key not in _SHARED:
        _SHARED[key] = build_mixture(tmp_path_factory.mktemp("mix") / "main")
    return _SHARED[key]


def copy_mixture(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def train_config_dict(mixture: Path, out_dir: Path, **overrides) -> dict:
    """A config for a model small enough to train in a second or two on a CPU."""
    config = {
        "mixture": str(mixture),
        "out_dir": str(out_dir),
        "seed": 0,
        "device": "cpu",
        "model": {"block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32},
        "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 2, "weight_decay": 0.1},
        "batch": {"micro_batch": 4, "grad_accum": 1},
        "max_steps": 8,
        "eval_interval": 4,
        "eval_tokens": 256,
        "log_interval": 1,
        "checkpoint_interval": 4,
        "keep_last": 5,
    }
    for key, value in overrides.items():
        if isinstance(value, dict):
            config[key] = {**config.get(key, {}), **value}
        else:
            config[key] = value
    return config


def toml_text(data: dict) -> str:
    """A config dict (top-level keys and one level of tables) as TOML text."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    for name, table in tables:
        lines.append(f"[{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"
