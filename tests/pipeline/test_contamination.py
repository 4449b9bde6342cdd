"""Token-window decontamination: window hashes worked out by hand, containment with common text
apart, the mix stage's three exclusion rules (id, near-duplicate, shared window) in the ledger,
and the check of a written mixture that a planted leak trips."""

from __future__ import annotations

import json
import random

import numpy as np
import polars as pl
import pytest

from pipeline.decontaminate import (
    WindowIndex,
    _window_table,
    check_contamination,
    encode_texts,
    window_containment,
    window_hashes,
)
from pipeline.dedup.contamination import ReferenceIndex
from pipeline.dedup.minhash import MinHashParams
from pipeline.formats.hashing import fmix64
from pipeline.formats.tokens import file_sha256, load_tokenizer
from pipeline.tokenizer import train_tokenizer, write_token_shard
from tests.helpers import mix_config, write_jsonl

WORDS = (
    "river council budget market school harbour winter garden station bridge museum library "
    "farmers teachers doctors engineers voted opened closed repaired planned announced quietly "
    "early late new old small large northern southern"
).split()
LICENCE = (
    "This page is licensed under the Creative Commons Attribution Share Alike licence; you may copy "
    "and redistribute the material in any medium or format provided you give appropriate credit."
)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def _edit(text: str, rate: float, rng: random.Random) -> str:
    """Replace about ``rate`` of the words by another word: a near copy."""
    words = text.split()
    for i in range(len(words)):
        if rng.random() < rate:
            words[i] = rng.choice(["changed", "altered", "different", "other"])
    return " ".join(words)


def _by_hand(tokens: np.ndarray, start: int, length: int, n: int) -> list[int]:
    table = _window_table(n, 1 << 13)
    out = []
    with np.errstate(over="ignore"):
        for p in range(start, start + length - n + 1):
            total = np.uint64(0)
            for j in range(n):
                total = total + table[j][tokens[p + j]]
            out.append(int(fmix64(np.array([total + np.uint64(n)], dtype=np.uint64))[0]))
    return out


def test_window_hashes_by_hand_per_document():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 5000, size=200).astype(np.uint16)
    # Three documents with gaps between them (a shard's end tokens), one shorter than a window.
    starts, lengths = np.array([0, 31, 45]), np.array([30, 5, 150])
    hashes, doc = window_hashes(tokens, starts, lengths, 13)
    assert doc.tolist() == [0] * 18 + [2] * 138
    assert hashes[doc == 0].tolist() == _by_hand(tokens, 0, 30, 13)
    assert hashes[doc == 2].tolist() == _by_hand(tokens, 45, 150, 13)
    # Windows depend on the tokens only: the same document elsewhere hashes the same.
    moved, _ = window_hashes(np.concatenate([np.zeros(7, np.uint16), tokens[45:195]]), [7], [150], 13)
    assert moved.tolist() == hashes[doc == 2].tolist()
    # Chunking does not change the result.
    import pipeline.decontaminate as module

    chunk = module.CHUNK_TOKENS
    try:
        module.CHUNK_TOKENS = 20
        again, again_doc = window_hashes(tokens, starts, lengths, 13)
    finally:
        module.CHUNK_TOKENS = chunk
    assert again.tolist() == hashes.tolist() and again_doc.tolist() == doc.tolist()
    assert len(window_hashes(tokens, [0], [12], 13)[0]) == 0
    with pytest.raises(ValueError, match="overlap"):
        window_hashes(tokens, [0, 10], [20, 20], 13)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    rng = random.Random(1)
    texts = [_text(rng, 80) for _ in range(200)] + [LICENCE] * 5
    return load_tokenizer(train_tokenizer(texts, tmp_path_factory.mktemp("tok") / "tokenizer.json", vocab_size=400))


def test_windows_find_near_copies_and_passages_minhash_misses(tokenizer):
    rng = random.Random(2)
    held = [_text(rng, 150) for _ in range(3)]
    pool = {
        "copy10": _edit(held[0], 0.10, rng),  # a near copy at 10% word edits
        "passage": _text(rng, 100) + " " + " ".join(held[1].split()[40:80]) + " " + _text(rng, 100),
        "unrelated": _text(rng, 150),
    }
    index = WindowIndex.from_texts(["h0", "h1", "h2"], held, tokenizer)
    assert index.texts == 3 and index.short_texts == 0 and len(index) > 300
    tokens, offsets = encode_texts(list(pool.values()), tokenizer)
    hits = index.hits(tokens, offsets[:-1], np.diff(offsets))
    per_doc = hits.group_by("doc").len().sort("doc")
    assert per_doc["doc"].to_list() == [0, 1]  # the copy and the passage; not the unrelated text
    assert per_doc["len"].min() >= 10
    # MinHash at the mix stage's threshold misses both: the leak the window rule closes.
    minhash = ReferenceIndex(["h0", "h1", "h2"], held, MinHashParams(threshold=0.8))
    assert minhash.matches(list(pool), list(pool.values())).height == 0

    found, summary, _ = window_containment(hits.with_columns(id=pl.Series(list(pool)).gather(hits["doc"])), index)
    assert dict(zip(found["id"], found["reference_id"])) == {"copy10": "h0", "passage": "h1"}
    assert summary["contaminated_documents"] == 2 and summary["common_windows"] == 0


def test_common_windows_are_reported_not_excluded(tokenizer):
    rng = random.Random(3)
    held = [_text(rng, 250) + " " + LICENCE]
    pool = [f"{_text(rng, 60)} {LICENCE}" for _ in range(12)] + [_text(rng, 50) + " " + " ".join(held[0].split()[:30])]
    index = WindowIndex.from_texts(["h0"], held, tokenizer)
    tokens, offsets = encode_texts(pool, tokenizer)
    hits = index.hits(tokens, offsets[:-1], np.diff(offsets))
    hits = hits.with_columns(id=pl.Series([f"d{i}" for i in range(len(pool))]).gather(hits["doc"]))
    found, summary, _ = window_containment(hits, index, common_window_docs=10)
    # The licence's windows are in 12 documents (> 10): common. Only the document quoting the text's
    # own words is contaminated.
    assert summary["contaminated_documents"] == 1 and summary["copies"] == 0
    assert found["coverage"].max() < 0.5
    assert found.filter(pl.col("windows") > 0)["id"].to_list() == ["d12"]
    assert summary["common_window_documents"] == 12 and summary["common_windows"] > 20
    assert found.filter(pl.col("id") == "d0")["reference_id"].to_list() == [None]
    # With a higher bar the licence counts as contamination: nothing is dropped silently.
    _, strict, _ = window_containment(hits, index, common_window_docs=20)
    assert strict["contaminated_documents"] == 13 and strict["common_windows"] == 0
    # A text copied into many documents makes its own windows frequent: its copies are still
    # contaminated (they hold at least half of its windows), whatever the frequency.
    copies = [held[0]] * 15
    tokens, offsets = encode_texts(copies, tokenizer)
    hits = index.hits(tokens, offsets[:-1], np.diff(offsets))
    hits = hits.with_columns(id=pl.Series([f"c{i}" for i in range(15)]).gather(hits["doc"]))
    found, summary, _ = window_containment(hits, index, common_window_docs=10)
    assert summary["copies"] == 15 and summary["contaminated_documents"] == 15
    assert found["coverage"].to_list() == [1.0] * 15 and set(found["reference_id"]) == {"h0"}


# ---------------------------------------------------------------------------------------------
# The mix stage and the check of its mixture


def _pool(tmp_path, **mix):
    """A pool and an exclude file that each rule catches a document of; the run's config."""
    rng = random.Random(4)
    news = {f"n{i}": _text(rng, 120) for i in range(60)}
    held = {"t2": _text(rng, 150), "t4": _text(rng, 150), "t6": _text(rng, 150)}
    news["n2"] = _edit(held["t2"], 0.10, rng)  # a near copy MinHash misses
    news["n4"] = _text(rng, 80) + " " + " ".join(held["t4"].split()[30:70]) + " " + _text(rng, 80)  # a passage
    for i in range(30):  # the licence in 30 pool documents: common text
        news[f"lic{i}"] = _text(rng, 60) + " " + LICENCE
    # t3 holds the licence after a word no pool document has (so no window across the boundary is
    # shared by chance).
    texts = {
        "news/n5": "",
        "t1": news["n1"],
        "t2": held["t2"],
        "t3": _text(rng, 250) + " zebra. " + LICENCE,
        "t4": held["t4"],
        "t6": held["t6"],
    }
    exclude = tmp_path / "heldout.parquet"
    pl.DataFrame({"id": list(texts), "text": list(texts.values())}).write_parquet(exclude)
    write_jsonl(tmp_path / "news" / "a.jsonl", [{"id": k, "text": v} for k, v in news.items()])
    config = mix_config(
        tmp_path,
        [{"name": "news", "reader": "jsonl", "paths": [str(tmp_path / "news")], "id_field": "id"}],
        vocab_size=400,
        mix={
            "group_by": ["source"],
            "validation_fraction": 0.05,
            "exclude": [str(exclude)],
            "mixtures": [{"name": "main"}],
            **mix,
        },
    )
    return config, {"texts": texts, "news": news, "held": held}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, prefect_server):
    from flows.curate import curate_flow

    tmp_path = tmp_path_factory.mktemp("mixed")
    config, made = _pool(tmp_path)
    return {"root": tmp_path / "run" / "mix", "stats": curate_flow(config)["mix"], **made}


def test_exclude_ngram_zero_turns_the_window_rule_off(tmp_path, prefect_server):
    from flows.curate import curate_flow

    config, _ = _pool(tmp_path, exclude_ngram=0)
    stats = curate_flow(config)["mix"]
    documents = pl.read_parquet(tmp_path / "run" / "mix" / "documents.parquet")
    assert sorted(documents.filter(pl.col("split") == "excluded")["id"]) == ["news/n1", "news/n5"]
    assert "reference_window" not in stats["removed"] and "windows" not in stats["exclusion"]
    assert "decontamination" not in json.loads((tmp_path / "run" / "mix" / "main" / "manifest.json").read_text())
    with pytest.raises(Exception, match="exclude_ngram"):
        _pool(tmp_path, exclude_ngram=-1)


def test_mix_excludes_by_id_near_duplicate_and_window(mixed):
    stats, root = mixed["stats"], mixed["root"]
    documents = pl.read_parquet(root / "documents.parquet")
    excluded = documents.filter(pl.col("split") == "excluded").sort("id")
    assert dict(zip(excluded["id"], zip(excluded["rule"], excluded["near_id"]))) == {
        "news/n5": ("reference_id", "news/n5"),
        "news/n1": ("reference_near_duplicate", "t1"),
        "news/n2": ("reference_window", "t2"),
        "news/n4": ("reference_window", "t4"),
    }
    assert stats["removed"]["reference_id"] == 1
    assert stats["removed"]["reference_near_duplicate"] == 1
    assert stats["removed"]["reference_window"] == 2
    removed = pl.read_parquet(root / "removed" / "excluded.parquet").sort("id")
    assert removed["id"].to_list() == excluded["id"].to_list()
    assert removed.filter(pl.col("rule") == "reference_window")["value"].min() >= 10
    # The licence documents stay: their shared windows are common, and they are reported.
    exclusion = stats["exclusion"]
    assert exclusion["common_window_documents"] == 30 and exclusion["common_windows"] > 20
    assert exclusion["ngram"] == 13 and exclusion["common_window_docs"] == 10 and exclusion["texts"] == 5
    assert documents.filter(pl.col("id").str.starts_with("news/lic"))["split"].is_in(["train", "validation"]).all()
    # The ledger: every document on one side.
    assert stats["train_documents"] + stats["validation_documents"] + sum(stats["removed"].values()) == len(
        mixed["news"]
    )


def test_check_contamination_zero_when_clean_and_trips_on_a_planted_leak(mixed):
    folder = mixed["root"] / "main"
    texts = pl.DataFrame({"id": list(mixed["texts"]), "text": list(mixed["texts"].values())})
    clean = check_contamination(folder, texts)
    assert clean["contaminated_documents"] == 0 and clean["contaminated_windows"] == 0
    assert clean["groups"]["news"]["contaminated_documents"] == 0
    assert clean["common_window_documents"] >= 11 and clean["common_windows"] > 0
    assert clean["documents_checked"] == mixed["stats"]["train_documents"] and clean["tokens_checked"] > 0
    # The windows the exclusion judged common over the whole pool are recorded with the mixture.
    recorded = json.loads((folder / "manifest.json").read_text())["decontamination"]
    assert recorded["common_windows"] == mixed["stats"]["exclusion"]["common_windows"]
    assert pl.read_parquet(folder / recorded["common_windows_file"]).height == recorded["common_windows"]

    # Plant a leak that bypasses the exclusion: a near copy of a held-out text in a training shard.
    tokenizer = load_tokenizer(folder / "tokenizer.json")
    leak = _edit(mixed["held"]["t6"], 0.05, random.Random(9))
    written = write_token_shard([("planted/leak", leak)], tokenizer, folder / "train" / "leak-0000.arrow", "news")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["train"].append(
        {
            "file": "train/leak-0000.arrow",
            "group": "news",
            "documents": 1,
            "tokens": written["tokens"],
            "bytes": len(leak.encode()),
            "sha256": file_sha256(folder / "train" / "leak-0000.arrow"),
        }
    )
    (folder / "manifest.json").write_text(json.dumps(manifest))
    try:
        dirty = check_contamination(
            folder, texts.with_columns(set=pl.Series(["task" if i == "t6" else "held" for i in texts["id"]])), tokenizer
        )
    finally:
        manifest["train"].pop()
        (folder / "manifest.json").write_text(json.dumps(manifest))
        (folder / "train" / "leak-0000.arrow").unlink()
    assert dirty["contaminated_documents"] == 1 and dirty["contaminated_windows"] >= 10
    assert dirty["groups"]["news"]["contaminated_documents"] == 1
    assert dirty["examples"][0]["id"] == "planted/leak" and dirty["examples"][0]["reference_id"] == "t6"
    assert dirty["sets"]["task"] == {
        "texts": 1,
        "contaminated_documents": 1,
        "contaminated_windows": dirty["contaminated_windows"],
    }
    assert dirty["sets"]["held"]["contaminated_documents"] == 0

    # Another tokenizer's windows would never match: refused, not a false zero.
    other = train_tokenizer(
        [_text(random.Random(5), 50) for _ in range(50)], folder.parent / "other.json", vocab_size=300
    )
    with pytest.raises(ValueError, match="not the mixture's"):
        check_contamination(folder, texts, other)
