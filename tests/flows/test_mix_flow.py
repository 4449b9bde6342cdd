"""The mix stage: held-out validation per group kept clean of near-duplicates, mixtures with exact
token counts, shards readable by pyarrow alone, deterministic and resumable, and the .bin export."""

from __future__ import annotations

import hashlib
import html
import json
import random
from collections import Counter

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.curate import curate_flow
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import MIX_CAUSES, RunLayout
from pipeline.formats.mixture import export_mixture
from pipeline.formats.tokens import decode_documents, load_tokenizer
from pipeline.stages.mix import run_mix
from pipeline.stages.registry import enabled_stages, last_document_stage
from report.build import build_report
from report.inspect import inspect_document
from tests.helpers import mix_config, source_config, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")

OFF = {"enabled": False}
WORDS = (
    "river council budget market school harbour winter garden station bridge museum library "
    "farmers teachers doctors engineers voted opened closed repaired planned announced quietly "
    "early late new old small large northern southern"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def _corpus(tmp_path):
    """Two sources: 'news' (long documents, 10 of them with a near copy under another id) and
    'chat' (short ones). Returns {id: text} and the near-copy pairs (ids as the run gives them:
    source/id)."""
    rng = random.Random(7)
    news = {f"n{i}": _text(rng, 120) for i in range(50)}
    pairs = []
    for i in range(10):
        words = news[f"n{i}"].split()
        words[60] = "changed"
        news[f"n{i}-copy"] = " ".join(words)
        pairs.append((f"news/n{i}", f"news/n{i}-copy"))
    chat = {f"c{i}": _text(rng, 12) for i in range(40)}
    write_jsonl(tmp_path / "news" / "a.jsonl", [{"id": k, "text": v} for k, v in news.items()])
    write_jsonl(tmp_path / "chat" / "a.jsonl", [{"id": k, "text": v} for k, v in chat.items()])
    return {**{f"news/{k}": v for k, v in news.items()}, **{f"chat/{k}": v for k, v in chat.items()}}, pairs


def _config(tmp_path, run="run", **mix):
    settings = {
        "group_by": ["source"],
        "validation_fraction": 0.25,
        "validation_max_docs": 100,
        "mixtures": [
            {"name": "natural"},
            {"name": "flat", "temperature": float("inf"), "max_epochs": 2.0, "budget_tokens": 5_000},
        ],
    }
    settings.update(mix)
    config = mix_config(
        tmp_path,
        [
            {"name": "news", "reader": "jsonl", "paths": [str(tmp_path / "news")], "id_field": "id"},
            {"name": "chat", "reader": "jsonl", "paths": [str(tmp_path / "chat")], "id_field": "id"},
        ],
        vocab_size=400,
        mix=settings,
    )
    return config.model_copy(update={"run_dir": tmp_path / run})


def _shard(path) -> tuple[list[str], list[np.ndarray], dict]:
    """A shard read with pyarrow alone: doc ids, each document's tokens, metadata."""
    with pa.memory_map(str(path), "r") as source:
        table = pa.ipc.open_file(source).read_all()
    tokens = table.column("tokens").combine_chunks()
    lists = [
        np.asarray(tokens.values[tokens.offsets[i].as_py() : tokens.offsets[i + 1].as_py()]) for i in range(len(tokens))
    ]
    metadata = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    return table.column("doc_id").to_pylist(), lists, metadata


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_mixtures_are_exact_clean_and_deterministic(tmp_path):
    texts, pairs = _corpus(tmp_path)
    config = _config(tmp_path)
    stats = curate_flow(config)["mix"]
    root = RunLayout(config.run_dir).stage("mix").root
    documents = pl.read_parquet(root / "documents.parquet")
    sides = dict(zip(documents["id"], documents["split"]))

    # Ledger: every document is training, validation or dropped as contaminated.
    assert stats["docs_in"] == len(texts) == documents.height
    assert stats["train_documents"] + stats["validation_documents"] + sum(stats["removed"].values()) == len(texts)
    # Decontamination: no near-copy pair straddles the split, and the pairs that did lost their
    # training side (the corpus has 10 pairs; at a 25% split several straddle).
    straddling = [(a, b) for a, b in pairs if {sides[a], sides[b]} & {"validation"} and sides[a] != sides[b]]
    assert straddling, "the test corpus should put some near-copy pairs across the split"
    for a, b in straddling:
        assert {sides[a], sides[b]} == {"validation", "contaminated"}
    removed = pl.read_parquet(root / "removed" / "contaminated.parquet")
    assert sorted(removed["id"]) == sorted(i for i, s in sides.items() if s == "contaminated")
    assert removed["value"].min() >= 0.8 and set(removed["rule"]) == {"validation_near_duplicate"}

    tokenizer = load_tokenizer(root / "natural" / "tokenizer.json")
    validation_ids = {i for i, s in sides.items() if s == "validation"}
    for name in ("natural", "flat"):
        folder = root / name
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["format"] == "curate.mixture/1" and manifest["tokenizer"]["eod_id"] == 0
        plan = pl.read_parquet(folder / "plan.parquet")
        taken = Counter()
        per_group = Counter()
        for entry in manifest["train"]:
            path = folder / entry["file"]
            ids, lists, metadata = _shard(path)
            assert entry["sha256"] == _sha256(path) and metadata["group"] == entry["group"]
            assert entry["tokens"] == sum(len(t) for t in lists) == int(metadata["tokens"])
            assert entry["documents"] == len(ids) and all(t[-1] == 0 for t in lists)
            assert entry["bytes"] == sum(len(texts[i].encode()) for i in ids)
            assert not validation_ids & set(ids)
            taken.update(ids)
            per_group[entry["group"]] += entry["tokens"]
        # Every training document appears as often as the plan says; each group supplies exactly
        # the tokens its manifest entry states.
        assert dict(taken) == {i: r for i, r in zip(plan["id"], plan["repeats"]) if r}
        assert {g: v["tokens_taken"] for g, v in manifest["groups"].items()} == dict(per_group)
        assert manifest["tokens_taken"] == sum(per_group.values()) == stats["mixtures"][name]["tokens_taken"]
        held = []
        for entry in manifest["validation"]:
            path = folder / entry["file"]
            ids, lists, _ = _shard(path)
            assert entry["tokens"] == sum(len(t) for t in lists) and entry["sha256"] == _sha256(path)
            assert decode_documents(path, tokenizer) == [texts[i] for i in ids]  # back to the original text
            held += ids
        assert sorted(held) == sorted(validation_ids)

    natural = json.loads((root / "natural" / "manifest.json").read_text())
    for group in natural["groups"].values():  # T = 1, budget = every token: one epoch each
        assert group["tokens_taken"] == group["tokens_available"] and group["epochs"] == 1.0
    flat = json.loads((root / "flat" / "manifest.json").read_text())
    chat, news = flat["groups"]["chat"], flat["groups"]["news"]
    # T = inf: equal weights; chat is small, so it is held at 2 epochs and news takes the rest.
    assert chat["capped"] and chat["tokens_taken"] == 2 * chat["tokens_available"]
    assert not news["capped"] and news["epochs"] < 1
    assert news["tokens_taken"] + chat["tokens_taken"] == pytest.approx(5_000, abs=200)

    # The same config and seed in another folder: the same bytes.
    again = _config(tmp_path, run="again")
    curate_flow(again)
    other = RunLayout(again.run_dir).stage("mix").root
    for name in ("natural", "flat"):
        for path in sorted((root / name).rglob("*.arrow")):
            assert _sha256(path) == _sha256(other / name / path.relative_to(root / name))

    # A finished stage is not redone: same stats, shards untouched.
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*.arrow")}
    assert curate_flow(config)["mix"] == stats
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.arrow")} == before

    # nanoGPT export: the .bin holds exactly the mixture's tokens.
    meta = export_mixture(root / "natural", tmp_path / "bin")
    stream = np.memmap(tmp_path / "bin" / "train.bin", dtype=np.uint16, mode="r")
    assert stream.size == natural["tokens_taken"] == meta["files"]["train.bin"]["tokens"]
    (root / "natural" / natural["train"][0]["file"]).write_bytes(b"changed")
    with pytest.raises(ValueError, match="differs from the manifest"):
        export_mixture(root / "natural", tmp_path / "bin2")


def test_without_decontamination_near_copies_stay_in_training(tmp_path):
    _corpus(tmp_path)
    config = _config(tmp_path, decontaminate=False, mixtures=[{"name": "main"}])
    stats = curate_flow(config)["mix"]
    assert stats["removed"] == {} and stats["train_documents"] + stats["validation_documents"] == stats["docs_in"]


def test_explicit_weights_and_their_errors(tmp_path):
    _corpus(tmp_path)
    config = _config(
        tmp_path,
        mixtures=[{"name": "news-heavy", "weights": {"news": 3, "chat": 1}, "max_epochs": 10, "budget_tokens": 20_000}],
    )
    groups = curate_flow(config)["mix"]["mixtures"]["news-heavy"]["groups"]
    assert groups["news"]["effective_weight"] == pytest.approx(0.75, abs=0.01)

    with pytest.raises(ConfigError, match="unknown group 'blogs'"):  # the sources are known: before any work
        _config(tmp_path, run="wrong", mixtures=[{"name": "m", "weights": {"news": 1, "blogs": 1}}])


@pytest.mark.parametrize(
    "mix, message",
    [
        ({"mixtures": [{"name": "m", "temperature": 2.0, "weights": {"a": 1}}]}, "temperature or weights"),
        ({"mixtures": [{"name": "parts"}]}, "taken by a folder"),
        ({"mixtures": [{"name": "a"}, {"name": "a"}]}, "unique"),
        ({"group_by": ["lang"]}, "lang stage is off"),
    ],
)
def test_mix_config_errors(tmp_path, mix, message):
    _corpus(tmp_path)
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **mix)


def test_mix_needs_the_tokenize_stage(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello"}])
    sources = [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "in")]}]
    with pytest.raises(ConfigError, match="enable tokenize"):
        source_config(tmp_path, sources, tokenize=OFF, mix={"group_by": ["source"]})
    # Without a [mix] section, turning tokenize off ends the run at the curated documents.
    assert "mix" not in enabled_stages(source_config(tmp_path, sources, tokenize=OFF))


def test_excluded_texts_and_their_near_copies_leave_the_pool(tmp_path):
    texts, pairs = _corpus(tmp_path)
    task = tmp_path / "task.parquet"
    # A downstream task holding two pool documents (one with a near copy in the pool) and an
    # unrelated text.
    pl.DataFrame(
        {"id": ["t1", "t2", "t3"], "text": [texts["news/n0"], texts["news/n30"], "nothing like the pool at all " * 10]}
    ).write_parquet(task)
    config = _config(tmp_path, exclude=[str(task)], mixtures=[{"name": "main"}])
    stats = curate_flow(config)["mix"]
    root = tmp_path / "run" / "mix"
    documents = pl.read_parquet(root / "documents.parquet")
    excluded = documents.filter(pl.col("split") == "excluded")
    assert sorted(excluded["id"]) == ["news/n0", "news/n0-copy", "news/n30"]
    assert dict(zip(excluded["id"], excluded["near_id"])) == {"news/n0": "t1", "news/n0-copy": "t1", "news/n30": "t2"}
    assert stats["removed"]["reference_near_duplicate"] == 3
    removed = pl.read_parquet(root / "removed" / "excluded.parquet")
    assert sorted(removed["id"]) == sorted(excluded["id"]) and set(removed["rule"]) == {"reference_near_duplicate"}
    in_shards = set()
    manifest = json.loads((root / "main" / "manifest.json").read_text())
    for entry in manifest["train"] + manifest["validation"]:
        in_shards.update(_shard(root / "main" / entry["file"])[0])
    assert not in_shards & set(excluded["id"])
    assert stats["train_documents"] + stats["validation_documents"] + sum(stats["removed"].values()) == len(texts)

    # The report, `curate inspect` and its JSON name the text that removed a document: the excluded
    # task text, or the validation document a contaminated one nearly copies.
    contaminated = documents.filter(pl.col("split") == "contaminated")
    assert contaminated.height and contaminated["near_id"].null_count() == 0
    witness = contaminated.row(0, named=True)
    page = build_report(tmp_path / "run").read_text()
    for doc_id, near in (("news/n0", "t1"), (witness["id"], witness["near_id"])):
        found = inspect_document(tmp_path / "run", doc_id)
        rule = "reference_near_duplicate" if near == "t1" else "validation_near_duplicate"
        assert found["removed_by"]["stage"] == "mix" and found["removed_by"]["rule"] == rule
        assert found["mix"]["near_id"] == near and found["mix"]["cause"].endswith(f" {near}")
        printed = CliRunner().invoke(app, ["inspect", str(tmp_path / "run"), doc_id])
        assert printed.exit_code == 0 and found["mix"]["cause"] in printed.output, printed.output
        assert f'{html.escape(MIX_CAUSES[rule])}:</span> <span class="id">{html.escape(near)}</span>' in page

    with pytest.raises(ConfigError, match="mix.exclude"):
        _config(tmp_path, exclude=[str(tmp_path / "missing.parquet")])

    # The flow is wiring: the library call, its units run in this process, writes the same files.
    root.rename(tmp_path / "run" / "mix-flow")
    assert run_mix(last_document_stage(enabled_stages(config)), config).to_dict() == stats
    assert _files(root) == _files(tmp_path / "run" / "mix-flow")


def _files(root) -> dict[str, str]:
    return {str(p.relative_to(root)): _sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}
