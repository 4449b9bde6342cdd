"""The demo corpus: sizes, labels that match the files, determinism, and the noise it promises."""

from __future__ import annotations

import gzip
import html
import re
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

from demo.corpus import build_demo_corpus
from demo.heldout import HELDOUT_MANIFEST, HELDOUT_TASK, HELDOUT_TEXTS
from demo.noise import perturb
from demo.plan import KINDS, MALFORMED, zipf_copy_counts
from experiment.downstream import demo_topic_task
from pipeline.formats.task import load_task
from pipeline.io.owner import RECORD, ForeignFolderError
from tests.helpers import REPO, run_curate

DOCS = 3_000
SEED = 7
ARTICLE_LINE = re.compile(r"<(h1|p)>(.*?)</\1>", re.S)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "a"
    build_demo_corpus(out, docs=DOCS, seed=SEED)
    return out


@pytest.fixture(scope="module")
def labels(corpus) -> list[dict]:
    return pq.read_table(corpus / "labels.parquet").to_pylist()


@pytest.fixture(scope="module")
def records(corpus) -> dict[tuple[str, str], object]:
    """Every record in the data files by (file, key): text (str), article lines (list) for HTML
    pages, raw bytes for lines or payloads that are not text."""
    found: dict[tuple[str, str], object] = {}
    for path in sorted(corpus.glob("news/*.jsonl.gz")):
        rel = path.relative_to(corpus).as_posix()
        for number, line in enumerate(gzip.open(path).read().split(b"\n")[:-1], start=1):
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                found[(rel, f"line:{number}")] = line
                continue
            found[(rel, record["id"])] = record["text"]
    for path in sorted(corpus.glob("dialogues/*.parquet")):
        rel = path.relative_to(corpus).as_posix()
        for row in pq.read_table(path).to_pylist():
            found[(rel, row["id"])] = row["text"]
    for path in sorted(corpus.glob("web/*.warc.gz")):
        rel = path.relative_to(corpus).as_posix()
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type != "response":
                    continue
                key = record.rec_headers.get_header("WARC-Record-ID").strip("<>")
                payload = record.content_stream().read()
                if record.http_headers.get_header("Content-Type").startswith("text/html"):
                    found[(rel, key)] = _article_lines(payload.decode("utf-8"))
                else:
                    found[(rel, key)] = payload
    for path in sorted(corpus.glob("notes/**/*.txt")):
        key = path.relative_to(corpus / "notes").as_posix()
        found[(path.relative_to(corpus).as_posix(), key)] = path.read_text(encoding="utf-8")
    return found


def _article_lines(page: str) -> list[str]:
    article = page.split("<article>", 1)[1].split("</article>", 1)[0] if "<article>" in page else ""
    return [html.unescape(m.group(2)) for m in ARTICLE_LINE.finditer(article)]


def _lines(content) -> list[str]:
    return content if isinstance(content, list) else [line for line in content.split("\n") if line.strip()]


def test_total_and_labels_match_the_files(corpus, labels, records):
    summary = orjson.loads((corpus / "corpus.json").read_bytes())
    assert abs(len(labels) - DOCS) <= DOCS * 0.01
    assert summary["written"] == len(labels) and summary["docs"] == DOCS
    assert len(records) == len(labels)
    assert {(r["file"], r["key"]) for r in labels} == set(records)
    assert len({r["key"] for r in labels}) == len(labels)  # keys are unique corpus-wide
    assert {r["kind"] for r in labels} <= set(KINDS)
    assert set(Counter(r["source"] for r in labels)) == {"news", "dialogues", "web", "notes"}
    notes = sum(r["source"] == "notes" for r in labels)
    assert 0.015 * DOCS <= notes <= 0.025 * DOCS


def test_shares_of_kinds(labels):
    kinds = Counter(r["kind"] for r in labels)
    assert 0.50 * DOCS <= kinds["clean"] <= 0.56 * DOCS
    copies = sum(r["original"] is not None for r in labels)
    assert 0.18 * DOCS <= copies <= 0.26 * DOCS
    noise = sum(
        r["original"] is None
        for r in labels
        if r["kind"] in ("boilerplate", "spam", "lorem", "gibberish", "mixed_lang", "non_html")
    )
    assert 0.19 * DOCS <= noise <= 0.23 * DOCS
    assert all(kinds[k] > 0 for k in KINDS)


def test_same_seed_same_bytes(corpus, tmp_path):
    other = tmp_path / "b"
    build_demo_corpus(other, docs=DOCS, seed=SEED)
    files = sorted(p.relative_to(corpus) for p in corpus.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(other) for p in other.rglob("*") if p.is_file())
    for rel in files:
        assert (corpus / rel).read_bytes() == (other / rel).read_bytes(), rel
    header = (corpus / "news" / "news-00000.jsonl.gz").read_bytes()[:10]
    assert header[3] & 0x08 == 0 and header[4:8] == b"\0\0\0\0"  # no file name, no mtime


def test_another_seed_differs(corpus, tmp_path):
    build_demo_corpus(tmp_path, docs=DOCS, seed=SEED + 1)
    assert (tmp_path / "labels.parquet").read_bytes() != (corpus / "labels.parquet").read_bytes()


def test_exact_dups_equal_their_original(labels, records):
    by_key = {r["key"]: r for r in labels}
    dups = [r for r in labels if r["kind"] == "exact_dup"]
    assert dups
    for row in dups:
        original = by_key[row["original"]]
        assert original["kind"] == "clean" and original["source"] == row["original_source"]
        copy, source = records[(row["file"], row["key"])], records[(original["file"], original["key"])]
        if isinstance(copy, str) and isinstance(source, str):
            assert copy == source
        else:  # a web page keeps the original's non-empty lines as its article
            assert _lines(copy) == _lines(source)
    # copies often live in another source (format) than their original
    assert sum(r["source"] != r["original_source"] for r in dups) > 0.3 * len(dups)


def test_near_dups_differ_by_about_their_rate(labels, records):
    by_key = {r["key"]: r for r in labels}
    near = [r for r in labels if r["kind"] == "near_dup"]
    assert {r["edit_rate"] for r in near} == {0.01, 0.03, 0.1, 0.3}
    assert all((r["edit_rate"] is None) == (r["copy_kind"] != "near") for r in labels)
    changed_share = {}
    for row in near:
        original = by_key[row["original"]]
        copy = "\n".join(_lines(records[(row["file"], row["key"])]))
        source = "\n".join(_lines(records[(original["file"], original["key"])]))
        assert copy != source
        if original["lang"] == "en":
            a, b = Counter(source.split()), Counter(copy.split())
            changed_share.setdefault(row["edit_rate"], []).append(sum((a - b).values()) / max(1, sum(a.values())))
    # a substitution or deletion changes one word, an insertion none: about 2/3 of the rate
    for rate, shares in changed_share.items():
        assert 0.3 * rate <= np.mean(shares) <= 1.5 * rate + 0.02, (rate, np.mean(shares))


def test_lineage_columns(labels):
    by_key = {r["key"]: r for r in labels}
    lineage = Counter(r["original"] for r in labels if r["original"] is not None)
    for row in labels:
        assert (row["original"] is None) == (row["copy_kind"] is None)
        root = row["original"] or row["key"]
        assert row["copies"] == lineage[root]
        if row["original"] is not None:
            assert by_key[row["original"]]["original"] is None  # copies copy originals
            assert row["canary"] == by_key[row["original"]]["canary"]
    assert {r["copy_kind"] for r in labels} == {None, "exact", "near", "template"}


def test_duplication_is_web_like(labels):
    """Templates and spam hold most copies and the largest clusters; clean articles are copied
    mildly."""
    base = {r["key"]: r["kind"] for r in labels if r["original"] is None}
    copies = [r for r in labels if r["original"] is not None]
    by_kind = Counter(base[r["original"]] for r in copies if not r["canary"])
    assert by_kind["boilerplate"] + by_kind["spam"] > max(0.55 * sum(by_kind.values()), 2 * by_kind["clean"])
    clusters = {
        kind: Counter(r["original"] for r in copies if base[r["original"]] == kind and not r["canary"])
        for kind in ("boilerplate", "spam", "clean", "lorem", "gibberish", "mixed_lang")
    }
    assert all(clusters[kind] for kind in clusters)  # every kind is copied
    largest = {kind: max(found.values()) for kind, found in clusters.items()}
    assert largest["boilerplate"] > 30 and largest["spam"] > 15
    assert largest["clean"] <= 3 < largest["boilerplate"] / 10
    clean = sum(r["kind"] == "clean" for r in labels)
    assert len(clusters["clean"]) < 0.2 * clean  # most clean documents appear once
    sizes = Counter(clusters["boilerplate"].values())
    assert sizes.most_common(1)[0][0] <= 2  # heavy tail: small clusters are the most common


def test_canaries(corpus, labels, records):
    """Canaries occur in the news pool as often as canaries.parquet says (exact copies, ids
    ``news/<key>``), at 1, 10, 30 and 100 occurrences (scaled to the corpus); the control
    canaries occur in no data file."""
    table = pq.read_table(corpus / "heldout" / "canaries.parquet").to_pylist()
    planted = [row for row in table if row["occurrences"]]
    occurrences = Counter(row["occurrences"] for row in planted)
    assert occurrences == {1: 15, 10: 4, 30: 3, 100: 2}
    rows = {(r["source"], r["key"]): r for r in labels}
    for row in planted:
        assert len(row["pool_ids"]) == row["occurrences"] == len(set(row["pool_ids"]))
        for pool_id in row["pool_ids"]:
            source, key = pool_id.split("/", 1)
            label = rows[(source, key)]
            assert source == "news" and label["kind"] == "canary" and label["canary"]
            assert label["copies"] == row["occurrences"] - 1
            assert records[(label["file"], key)] == row["text"]
    assert sum(r["kind"] == "canary" for r in labels) == sum(n * c for n, c in occurrences.items())
    assert all(r["copy_kind"] in (None, "exact") for r in labels if r["canary"])
    controls = [row["text"] for row in table if not row["occurrences"]]
    assert len(controls) == 60 and all(not row["pool_ids"] for row in table if not row["occurrences"])
    texts = {text for text in records.values() if isinstance(text, str)}
    assert not texts & set(controls)
    assert len({row["text"] for row in table}) == len(table)  # every canary is its own text
    assert all(len(text.split()) == 72 for text in controls)


def test_template_copies(labels, records):
    by_key = {r["key"]: r for r in labels}
    templates = [r for r in labels if r["copy_kind"] == "template"]
    assert {by_key[r["original"]]["kind"] for r in templates} == {"boilerplate", "spam"}
    for row in templates:
        original = by_key[row["original"]]
        copy, source = records[(row["file"], row["key"])], records[(original["file"], original["key"])]
        if row["kind"] == "spam" and isinstance(copy, str) and isinstance(source, str):
            assert copy != source and len(copy.split("\n")) == len(source.split("\n"))
            assert row["detail"] != original["detail"]  # another product's keywords


def test_languages_and_sources(labels, corpus):
    langs = set()
    for path in corpus.glob("dialogues/*.parquet"):
        langs |= set(pq.read_table(path, columns=["lang"]).column("lang").to_pylist())
    assert len(langs) >= 15 and {"en", "es", "zh", "ja", "ru"} <= langs
    mixed = [r for r in labels if r["kind"] == "mixed_lang"]
    assert all(len(set(r["detail"].split("+"))) == 2 for r in mixed)
    assert all(r["lang"] == "en" for r in labels if r["source"] == "news" and r["kind"] == "clean")


def test_malformed_records(labels, records):
    bad = [r for r in labels if r["kind"] == "malformed"]
    assert sorted(r["detail"] for r in bad) == sorted(MALFORMED.values())
    assert all(r["source"] == "news" and r["line"] >= 1 for r in bad)
    for row in bad:
        content = records[(row["file"], row["key"])]
        if row["key"].startswith("line:"):  # rejected by a strict JSON parser
            assert isinstance(content, bytes)
            assert row["key"] == f"line:{row['line']}"
        elif row["detail"] == "empty text":
            assert content == ""
        elif row["detail"].startswith("text is a number"):
            assert isinstance(content, int)
        else:
            assert "\x00" in content


def test_non_html_responses(labels, records):
    images = [r for r in labels if r["kind"] == "non_html"]
    assert images and all(r["source"] == "web" for r in images)
    assert all(records[(r["file"], r["key"])].startswith(b"\x89PNG") for r in images)


def test_cached_and_rebuilt(tmp_path):
    first = build_demo_corpus(tmp_path, docs=500, seed=1)
    labels = tmp_path / "labels.parquet"
    stamp = labels.stat().st_mtime_ns
    assert build_demo_corpus(tmp_path, docs=500, seed=1) == first
    assert labels.stat().st_mtime_ns == stamp  # not rebuilt
    second = build_demo_corpus(tmp_path, docs=200, seed=1)
    on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert on_disk == set(second["files"]) | {"corpus.json", RECORD}  # nothing left from the first build
    assert second["written"] == 200


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "diary.txt").write_text("d")
    (tmp_path / "labels.parquet").write_bytes(b"mine")
    with pytest.raises(
        ForeignFolderError, match=r"holds files curate did not write \(labels.parquet, notes/diary.txt\)"
    ):
        build_demo_corpus(tmp_path, docs=200, seed=1)
    done = run_curate(["demo-corpus", str(tmp_path), "--docs", "100"], REPO)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "give a new or empty folder" in done.stderr
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "labels.parquet",
        "notes/diary.txt",
    ]
    assert (tmp_path / "notes" / "diary.txt").read_text() == "d"


def test_a_rebuild_deletes_only_the_files_of_the_earlier_build(tmp_path):
    build_demo_corpus(tmp_path, docs=300, seed=1)
    mine = [
        tmp_path / "notes" / "diary.txt",
        tmp_path / "heldout" / "mine.parquet",
        tmp_path / "news" / "news-09999.jsonl.gz",
    ]
    for path in mine:  # put in the corpus folder after it was built, named as the build names its files
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"a person's file")
    second = build_demo_corpus(tmp_path, docs=200, seed=1)
    assert all(path.read_bytes() == b"a person's file" for path in mine)
    on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert on_disk == set(second["files"]) | {"corpus.json", RECORD} | {
        p.relative_to(tmp_path).as_posix() for p in mine
    }


def test_a_corpus_built_before_records_were_kept_is_rebuilt_by_its_file_list(tmp_path):
    build_demo_corpus(tmp_path, docs=300, seed=1)
    (tmp_path / RECORD).unlink()  # as an earlier version left it: corpus.json names its files
    second = build_demo_corpus(tmp_path, docs=200, seed=1)
    on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert on_disk == set(second["files"]) | {"corpus.json", RECORD}


def test_zipf_copy_counts():
    counts = zipf_copy_counts(1_000, 5_000, cap=300)
    assert counts.sum() == 5_000 and counts.max() <= 300
    assert (np.diff(counts) <= 1).all()  # non-increasing by rank, up to the rounding remainder
    assert zipf_copy_counts(10, 5_000, cap=300).sum() == 5_000  # cap raised when needed


def test_perturb_keeps_lines_and_edits():
    rng = np.random.default_rng(0)
    text = "\n".join(" ".join(f"w{i}_{j}" for j in range(20)) for i in range(10))
    edited = perturb(text, 0.1, rng)
    assert edited != text and edited.count("\n") == text.count("\n")
    assert perturb("你好世界", 0.01, rng, by_char=True) != "你好世界"


def _windows(text: str, n: int = 13) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@pytest.fixture(scope="module")
def heldout(corpus) -> list[dict]:
    return pq.read_table(corpus / HELDOUT_TEXTS).to_pylist()


def test_heldout_sets(corpus, heldout):
    sets = Counter(r["set"] for r in heldout)
    assert sets["news"] == sets["dialogues"] == 150 and 145 <= sets["web"] <= 150
    assert 145 <= sets["junk"] <= 150
    assert len({r["id"] for r in heldout}) == len(heldout)
    assert all(r["id"].startswith(f"heldout/{r['set']}/") and r["text"].strip() for r in heldout)
    assert all(r["clean"] == (r["set"] != "junk") for r in heldout)
    assert {r["kind"] for r in heldout if r["set"] == "junk"} == {"spam", "boilerplate", "lorem", "gibberish"}
    assert {r["group"] for r in heldout if r["set"] != "junk"} == {"news", "dialogues", "web"}
    assert len({r["lang"] for r in heldout if r["set"] == "dialogues"}) >= 20
    web = [r["text"] for r in heldout if r["set"] == "web"]
    # the main content the HTML extraction gives: the article, not the cookie banner or footer
    assert not any("All rights reserved" in t or "Accept all" in t for t in web)
    manifest = orjson.loads((corpus / HELDOUT_MANIFEST).read_bytes())
    assert {name: entry["documents"] for name, entry in manifest["sets"].items()} == dict(sets)
    assert manifest["sets"]["news"]["bytes"] == sum(len(r["text"].encode()) for r in heldout if r["set"] == "news")
    assert manifest["seed"] == SEED and manifest["task_split"]["test"] == 300


def test_heldout_and_task_texts_are_in_no_pool(corpus, heldout, records):
    """No 13-word window of a clean held-out text or a task article occurs in any data file."""
    task = pq.read_table(corpus / HELDOUT_TASK).to_pylist()
    reserved = [r["text"] for r in heldout if r["clean"]] + [r["text"] for r in task]
    pool: set[tuple[str, ...]] = set()
    for content in records.values():
        if isinstance(content, list):
            content = "\n".join(content)
        if isinstance(content, str):
            pool |= _windows(content)
    leaked = [text[:60] for text in reserved if _windows(text) & pool]
    assert not leaked
    assert sum(len(_windows(text)) for text in reserved) > 100_000  # the check had text to check


def test_task_reserved_by_the_corpus(corpus, tmp_path):
    task = load_task(corpus / HELDOUT_TASK)
    counts = Counter(zip(task["split"].to_list(), task["label"].to_list()))
    assert {k: v for k, v in counts.items() if k[0] == "train"} == {("train", t): 100 for t in set(task["label"])}
    assert sorted(v for k, v in counts.items() if k[0] == "test") == [60] * 5
    info = demo_topic_task(tmp_path / "task.parquet", 500, 300, corpus_dir=corpus)
    assert (info["train"], info["test"]) == (500, 300)
    assert (tmp_path / "task.parquet").read_bytes() == (corpus / HELDOUT_TASK).read_bytes()
    with pytest.raises(ValueError, match="task_train_docs=200"):
        demo_topic_task(tmp_path / "other.parquet", 200, 300, corpus_dir=corpus)
