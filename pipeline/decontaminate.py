"""Token-window decontamination: which documents share a 13-token window with texts that must stay
unseen in training (held-out evaluation sets, a downstream task), and a check of a written mixture.

Near-duplicate search (:mod:`pipeline.dedup.contamination`, MinHash and exact Jaccard) asks whether
two documents are mostly the same; contamination needs less: a training document that holds a
passage of an evaluation text has seen it, whatever else it holds. A near copy at 10% word edits
sits near Jaccard 0.44 with its original and passes a 0.8 threshold, yet most of its 13-token
windows are the original's. So the texts' windows of ``ngram`` tokens (13, as GPT-3's study,
Brown et al. 2020 appendix C, used 13-grams; Llama 2's and PaLM's checks use token n-grams too),
tokenized with the run's own tokenizer, are hashed into a sorted array, and every window of every
pool document is looked up in it::

    index = WindowIndex.from_texts(reference["id"], reference["text"], tokenizer)
    tokens, offsets = read_token_shard(path)                         # a tokenize or mixture shard
    hits = index.hits(tokens, offsets["doc_start"], offsets["doc_tokens"] - 1)   # end token left out
    found = window_containment(hits.with_columns(id=...), index, common_window_docs=10)

Common text is not contamination. A licence, a cookie banner or a site template is in the held-out
texts and in thousands of pool documents alike; GPT-3's study ignored 13-grams frequent in the
training data. Here a window of the index that occurs in more than ``common_window_docs``
documents of the pool being looked at (distinct documents) is *common*: it makes no document
contaminated, and it is counted and reported on its own (windows, and the documents whose only
shared windows are common), never dropped silently.

Hashing is vectorized: a window's hash is ``fmix64(sum_j T[j, token_j])`` modulo 2^64, with
``T[j, t] = fmix64(key ^ (j << 32 | t))`` a table of pseudo-random 64-bit values per (position,
token), so two different windows collide with probability about 2^-64 and the hashes of all
windows of a batch come from ``ngram`` gathers and additions over the token array. A document of
fewer than ``ngram`` tokens has no window; the index counts such texts (``short_texts``).

A copy is contamination however common: a held-out text copied into many pool documents makes its
own windows frequent, so a document that holds at least :data:`COPY_COVERAGE` of one text's
distinct windows is contaminated whatever their frequency, and the document frequencies that judge
common windows are counted over the other documents.

Cost and catch (``benchmarks/decontaminate.py``: the 20,000-document demo corpus' news, 114
held-out clean articles, a pool of 4,117 documents and 1.6M tokens, two shared cores): the index of
the 114 texts (60,000 windows) builds in 0.17 s, the lookup runs at 0.3-0.4 s per million pool
tokens and :func:`check_contamination` at 0.45-0.5 s per million tokens checked (MinHash + Jaccard
on the same texts: 0.3 s). It finds all 422 copies of the held-out articles (MinHash at 0.8: 344,
none at 10% or 30% word edits), and 106 more documents that share a real passage with one
(mixed-language pages built from a held-out article, columns sharing an author's paragraph).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl
from tokenizers import Tokenizer

from pipeline.formats.hashing import fmix64
from pipeline.formats.mixture import read_manifest, tokenizer_path
from pipeline.formats.tokens import load_tokenizer, read_token_shard, shard_encoder
from pipeline.io.storage import as_path
from pipeline.tokenizer import TEXT_BATCH

WINDOW_TOKENS = 13  # GPT-3's contamination study (Brown et al. 2020, appendix C)
COMMON_WINDOW_DOCS = 10  # a window in more pool documents than this is common text, not contamination
# A document holding at least this share of a text's windows holds a copy of it, however common
# those windows are (PaLM's contamination check used 70% of 8-grams; half is stricter).
COPY_COVERAGE = 0.5
SALT_WINDOW = 0x57494E444F57  # "WINDOW"
# Windows are hashed over spans of about this many tokens at a time, to bound the temporaries.
CHUNK_TOKENS = 1 << 22

HITS_SCHEMA = {"doc": pl.Int64, "window": pl.Int64}
CONTAINMENT_SCHEMA = {
    "id": pl.String,
    "windows": pl.Int64,
    "common_windows": pl.Int64,
    "coverage": pl.Float64,
    "reference_id": pl.String,
}


@lru_cache(maxsize=8)
def _window_table(ngram: int, vocab: int) -> np.ndarray:
    """``T[j, t]`` for positions j < ngram and tokens t < vocab (values do not depend on vocab)."""
    key = fmix64(np.array([SALT_WINDOW], dtype=np.uint64))[0]
    j = np.arange(ngram, dtype=np.uint64)[:, None] << np.uint64(32)
    t = np.arange(vocab, dtype=np.uint64)[None, :]
    return fmix64(key ^ (j | t))


def _table_for(ngram: int, tokens: np.ndarray) -> np.ndarray:
    top = int(tokens.max()) + 1 if tokens.size else 1
    return _window_table(ngram, max(1 << 13, 1 << (top - 1).bit_length()))


def window_hashes(tokens: np.ndarray, starts, lengths, ngram: int = WINDOW_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, doc)``: the uint64 hash of every window of ``ngram`` consecutive tokens of every
    document, and the document's number (its position in ``starts``), in document order.

    Document i is ``tokens[starts[i]:starts[i] + lengths[i]]`` (the flat token array and offsets of
    a tokenize shard: pass its lengths without the end-of-document token). Documents must come in
    increasing order of start and not overlap; gaps between them are ignored. A document shorter
    than ``ngram`` has no window."""
    if ngram < 1:
        raise ValueError(f"window_hashes: ngram={ngram}; a window has at least one token")
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if starts.shape != lengths.shape:
        raise ValueError("window_hashes: give one length per start")
    if len(starts) > 1 and (starts[1:] < starts[:-1] + lengths[:-1]).any():
        raise ValueError("window_hashes: documents overlap or are out of order; give them in token order")
    counts = np.maximum(lengths - ngram + 1, 0)
    if not counts.sum():
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    table = _table_for(ngram, tokens)
    hashes, docs = [], []
    # Chunks of whole documents (a long document makes its own chunk).
    ends = starts + lengths
    edge = np.cumsum(lengths)
    bounds = np.unique(
        np.concatenate([[0, len(starts)], np.searchsorted(edge, np.arange(CHUNK_TOKENS, edge[-1], CHUNK_TOKENS))])
    )
    with np.errstate(over="ignore"):
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            chunk_counts = counts[lo:hi]
            total = int(chunk_counts.sum())
            if not total:
                continue
            base, stop = int(starts[lo]), int(ends[hi - 1])
            span = np.asarray(tokens[base:stop])
            width = len(span) - ngram + 1
            acc = table[0][span[:width]]
            for j in range(1, ngram):
                acc += table[j][span[j : j + width]]
            # Window starts inside each document: a ragged arange.
            first = np.cumsum(chunk_counts) - chunk_counts
            doc = np.repeat(np.arange(lo, hi, dtype=np.int64), chunk_counts)
            position = np.arange(total, dtype=np.int64) - np.repeat(first, chunk_counts) + (starts[doc] - base)
            hashes.append(fmix64(acc[position] + np.uint64(ngram)))
            docs.append(doc)
    return np.concatenate(hashes), np.concatenate(docs)


def encode_texts(texts: Sequence[str], tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, offsets)`` of texts encoded as the tokenize stage encodes documents (special-token
    strings as plain text, no special tokens added, no end token): text i is
    ``tokens[offsets[i]:offsets[i + 1]]``."""
    encoder = shard_encoder(tokenizer)
    encode = getattr(encoder, "encode_batch_fast", encoder.encode_batch)
    pieces, lengths = [], []
    texts = list(texts)
    for lo in range(0, len(texts), TEXT_BATCH):
        for encoding in encode(texts[lo : lo + TEXT_BATCH], add_special_tokens=False):
            ids = np.asarray(encoding.ids, dtype=np.int64)
            pieces.append(ids)
            lengths.append(len(ids))
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    return tokens, offsets


def _text_frame(texts, ids=None) -> pl.DataFrame:
    if isinstance(texts, pl.DataFrame):
        if "text" not in texts.columns:
            raise ValueError(f"the texts have no 'text' column (columns: {texts.columns})")
        ids = texts["id"] if "id" in texts.columns and ids is None else ids
        texts = texts["text"]
    texts = (
        pl.Series("text", texts, dtype=pl.String)
        if not isinstance(texts, pl.Series)
        else texts.cast(pl.String).alias("text")
    )
    if ids is None:
        ids = pl.Series("id", [str(i) for i in range(len(texts))], dtype=pl.String)
    ids = pl.Series("id", ids, dtype=pl.String) if not isinstance(ids, pl.Series) else ids.cast(pl.String).alias("id")
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} texts; give one id per text")
    if texts.null_count():
        raise ValueError(f"{texts.null_count()} texts are null; drop them first")
    return pl.DataFrame([ids, texts])


@dataclass(frozen=True)
class WindowIndex:
    """The distinct ``ngram``-token windows of a set of texts: ``hashes`` (sorted, unique);
    ``owners`` (``window, text``: every text that holds each window, by row); ``text_windows``
    (distinct windows per text); ``ids`` name the texts."""

    hashes: np.ndarray
    owners: pl.DataFrame
    text_windows: np.ndarray
    ids: pl.Series
    ngram: int
    texts: int
    short_texts: int  # texts of fewer than ngram tokens: they have no window
    tokens: int

    @classmethod
    def from_texts(cls, ids, texts, tokenizer: Tokenizer | Path, ngram: int = WINDOW_TOKENS) -> WindowIndex:
        """Tokenize ``texts`` with ``tokenizer`` (the run's) and index their windows."""
        frame = _text_frame(texts, ids)
        if not isinstance(tokenizer, Tokenizer):
            tokenizer = load_tokenizer(tokenizer)
        tokens, offsets = encode_texts(frame["text"].to_list(), tokenizer)
        return cls.from_tokens(frame["id"], tokens, offsets, ngram)

    @classmethod
    def from_tokens(cls, ids, tokens: np.ndarray, offsets: np.ndarray, ngram: int = WINDOW_TOKENS) -> WindowIndex:
        offsets = np.asarray(offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        hashes, doc = window_hashes(tokens, offsets[:-1], lengths, ngram)
        unique, window = np.unique(hashes, return_inverse=True)
        owners = pl.DataFrame(
            {"window": window.astype(np.int64), "text": doc}, schema={"window": pl.Int64, "text": pl.Int64}
        )
        owners = owners.unique().sort(["window", "text"])
        text_windows = np.bincount(owners["text"].to_numpy(), minlength=len(lengths)).astype(np.int64)
        ids = ids if isinstance(ids, pl.Series) else pl.Series("id", list(ids), dtype=pl.String)
        return cls(
            hashes=unique,
            owners=owners,
            text_windows=text_windows,
            ids=ids.cast(pl.String),
            ngram=ngram,
            texts=len(lengths),
            short_texts=int((lengths < ngram).sum()),
            tokens=int(lengths.sum()),
        )

    def __len__(self) -> int:
        return len(self.hashes)

    def hits(self, tokens: np.ndarray, starts, lengths) -> pl.DataFrame:
        """``doc, window``: one row per window of the given documents (see :func:`window_hashes`)
        that is in the index; ``window`` is its row in :attr:`hashes`."""
        if not len(self):
            return pl.DataFrame(schema=HITS_SCHEMA)
        hashes, doc = window_hashes(tokens, starts, lengths, self.ngram)
        where = np.searchsorted(self.hashes, hashes)
        where[where == len(self.hashes)] = 0
        found = self.hashes[where] == hashes
        return pl.DataFrame({"doc": doc[found], "window": where[found].astype(np.int64)}, schema=HITS_SCHEMA)

    def summary(self) -> dict:
        return {
            "ngram": self.ngram,
            "texts": self.texts,
            "short_texts": self.short_texts,
            "text_tokens": self.tokens,
            "windows": len(self),
        }


def window_containment(
    hits: pl.DataFrame,
    index: WindowIndex,
    common_window_docs: int = COMMON_WINDOW_DOCS,
    common: np.ndarray | None = None,
    copy_coverage: float = COPY_COVERAGE,
) -> tuple[pl.DataFrame, dict, pl.DataFrame]:
    """``(documents, summary, common)`` from the index's hits over a whole pool.

    ``hits`` has columns ``id`` (the pool document's) and ``window`` (from :meth:`WindowIndex.hits`),
    one row per occurrence, over every document of the pool (so that the document frequency of a
    window is the pool's). A document is contaminated when

    1. it holds a copy of a text: its windows cover at least ``copy_coverage`` of that text's
       distinct windows, however frequent they are (a held-out text copied into a hundred pool
       documents makes its own windows frequent; that is no reason to keep its copies); or
    2. it shares a window that is not common. Common: held by more than ``common_window_docs``
       distinct documents of the pool that are not copies by rule 1 (a licence, a template), or
       listed in ``common`` (hashes judged common over a larger pool, such as the mix stage's).

    ``documents``: one row per document with a hit: ``id``, ``windows`` (occurrences of uncommon
    windows, or of all shared windows for a copy: the document is contaminated when > 0),
    ``common_windows`` (occurrences of common windows), ``coverage`` (the largest share of one
    text's windows it holds) and ``reference_id`` (that text for a copy, else the text sharing most
    of its uncommon windows; ties: the smaller row; null when only common windows were shared).
    ``summary``: ``common_windows`` (windows of the index found common), ``copies`` (documents
    contaminated by rule 1), ``contaminated_documents``, ``contaminated_windows``,
    ``common_window_documents`` (documents whose only shared windows are common, kept).
    ``common`` (returned): ``hash, documents`` of the common windows, to record beside a mixture."""
    if common_window_docs < 1:
        raise ValueError(f"common_window_docs={common_window_docs}; it is a number of documents >= 1")
    if not 0.0 < copy_coverage <= 1.0:
        raise ValueError(f"copy_coverage={copy_coverage}; it is a share of a text's windows in (0, 1]")
    hits = hits.select(pl.col("id").cast(pl.String), pl.col("window").cast(pl.Int64))
    shared = _text_coverage(hits, index)
    copies = shared.filter(pl.col("coverage") >= copy_coverage)
    frequent = _common_windows(hits, copies["id"], index, common_window_docs, common)
    recorded = pl.DataFrame(
        {
            "hash": pl.Series(index.hashes[frequent["window"].to_numpy()], dtype=pl.UInt64),
            "documents": frequent["documents"].cast(pl.Int64),
        }
    )
    marked = hits.with_columns(common=pl.col("window").is_in(frequent["window"].implode()))
    documents = _containment_documents(marked, shared, index, copy_coverage)
    contaminated = documents.filter(pl.col("windows") > 0)
    return (
        documents,
        {
            "common_windows": recorded.height,
            "copies": copies.height,
            "contaminated_documents": contaminated.height,
            "contaminated_windows": int(contaminated["windows"].sum()),
            "common_window_documents": documents.height - contaminated.height,
        },
        recorded,
    )


def _text_coverage(hits: pl.DataFrame, index: WindowIndex) -> pl.DataFrame:
    """Rule 1: per document, the largest share of one text's distinct windows it holds (``id,
    text, shared, size, coverage``; ties: the smaller text row)."""
    return (
        hits.unique()
        .join(index.owners, on="window", how="inner")
        .group_by("id", "text")
        .agg(shared=pl.len())
        .join(
            pl.DataFrame({"text": np.arange(len(index.text_windows), dtype=np.int64), "size": index.text_windows}),
            on="text",
            how="left",
        )
        .with_columns(coverage=pl.col("shared") / pl.col("size"))
        .sort(["id", "coverage", "text"], descending=[False, True, False])
        .unique("id", keep="first", maintain_order=True)
    )


def _common_windows(
    hits: pl.DataFrame, copies: pl.Series, index: WindowIndex, common_window_docs: int, common: np.ndarray | None
) -> pl.DataFrame:
    """Rule 2: ``window, documents`` of the common windows, by document frequency over the
    documents that are not copies (``copies``), or listed in ``common``; sorted by window."""
    others = hits.filter(~pl.col("id").is_in(copies.implode()))
    frequency = others.group_by("window").agg(documents=pl.col("id").n_unique())
    is_common = pl.col("documents") > common_window_docs
    if common is not None and len(common):
        known = np.flatnonzero(np.isin(index.hashes, np.asarray(common, dtype=np.uint64)))
        is_common = is_common | pl.col("window").is_in(pl.Series(known, dtype=pl.Int64).implode())
    return frequency.filter(is_common).sort("window")


def _containment_documents(
    marked: pl.DataFrame, shared: pl.DataFrame, index: WindowIndex, copy_coverage: float
) -> pl.DataFrame:
    """One row per document with a hit (CONTAINMENT_SCHEMA), from its hits marked common or not
    and its coverage (:func:`_text_coverage`); a copy counts all its shared windows."""
    per_doc = marked.group_by("id").agg(
        windows=(~pl.col("common")).sum().cast(pl.Int64),
        common_windows=pl.col("common").sum().cast(pl.Int64),
        all_windows=pl.len().cast(pl.Int64),
    )
    best = (
        marked.filter(~pl.col("common"))
        .join(index.owners, on="window", how="inner")
        .group_by("id", "text")
        .len()
        .sort(["id", "len", "text"], descending=[False, True, False])
        .unique("id", keep="first", maintain_order=True)
        .select("id", best="text")
    )
    documents = (
        per_doc.join(shared.select("id", "coverage", copy="text"), on="id", how="left")
        .join(best, on="id", how="left")
        .with_columns(is_copy=pl.col("coverage").fill_null(0.0) >= copy_coverage)
    )
    documents = documents.with_columns(
        windows=pl.when(pl.col("is_copy")).then(pl.col("all_windows")).otherwise(pl.col("windows")),
        common_windows=pl.when(pl.col("is_copy")).then(0).otherwise(pl.col("common_windows")),
        text=pl.when(pl.col("is_copy")).then(pl.col("copy")).otherwise(pl.col("best")),
    )
    names = pl.DataFrame({"text": np.arange(len(index.ids), dtype=np.int64), "reference_id": index.ids})
    return (
        documents.join(names, on="text", how="left")
        .with_columns(pl.col("coverage").fill_null(0.0))
        .sort("id")
        .select(list(CONTAINMENT_SCHEMA))
    )


def _same_tokenizer(given: Tokenizer, folder: Path, manifest: dict) -> None:
    path = tokenizer_path(folder, manifest)
    if load_tokenizer(path).to_str() != given.to_str():
        raise ValueError(
            f"{folder}: the tokenizer given is not the mixture's ({path.name}); windows of another "
            "tokenizer never match, so check with the mixture's own tokenizer"
        )


def check_contamination(
    mixture_dir: Path,
    texts,
    tokenizer: Tokenizer | Path | None = None,
    ngram: int = WINDOW_TOKENS,
    common_window_docs: int = COMMON_WINDOW_DOCS,
    examples: int = 5,
) -> dict:
    """Count, per group, the training documents of a mixture folder that share an ``ngram``-token
    window with any of ``texts`` (held-out sets, task texts), common windows apart.

    ``texts``: strings, a Series, or a DataFrame with a ``text`` (and ``id``, and ``set``) column;
    with ``set`` (such as held-out set names and "task"), the result also counts, per set, the
    contaminated documents whose closest text is of that set (``sets``). ``tokenizer``
    must be the mixture's (checked against its ``tokenizer.json``; None: use that one). Every
    TRAIN shard listed in ``manifest.json`` is read; a document repeated in the mixture (upsampled)
    counts once. A window is common when it is in more than ``common_window_docs`` distinct
    training documents, or when the mix stage judged it common over the whole pool (the mixture's
    ``common_windows.parquet``, written when ``mix.exclude`` ran with the same ``ngram``): the
    check then agrees with the exclusion it checks. Returns::

        {"ngram", "common_window_docs", "texts", "short_texts", "text_tokens", "windows",
         "documents_checked", "tokens_checked", "seconds",
         "contaminated_documents", "contaminated_windows",      # 0 and 0 when clean
         "common_windows", "common_window_documents",
         "groups": {group: {"documents", "tokens", "contaminated_documents", "contaminated_windows",
                            "common_window_documents"}},
         "sets": {set: {"texts", "contaminated_documents", "contaminated_windows"}},  # with a set column
         "examples": [{"id", "group", "reference_id", "windows"}, ...]}   # the first few, by id
    """
    started = time.perf_counter()
    folder = as_path(mixture_dir)
    manifest = read_manifest(folder)
    tokenizer = _mixture_tokenizer(folder, manifest, tokenizer)
    frame = _text_frame(texts)
    index = WindowIndex.from_texts(frame["id"], frame["text"], tokenizer, ngram)
    all_hits, checked = _training_hits(folder, manifest, index)
    recorded = _recorded_common_windows(folder, manifest, ngram)
    documents, summary, _ = window_containment(all_hits.select("id", "window"), index, common_window_docs, recorded)
    documents = documents.join(all_hits.select("id", "group").unique("id"), on="id", how="left")
    groups = _group_counts(documents, checked)
    sets = _set_counts(documents, texts, frame["id"])
    shown = documents.filter(pl.col("windows") > 0).head(examples)
    return {
        **index.summary(),
        "common_window_docs": common_window_docs,
        "documents_checked": sum(c["documents"] for c in checked.values()),
        "tokens_checked": sum(c["tokens"] for c in checked.values()),
        **summary,
        "groups": groups,
        **({"sets": sets} if sets else {}),
        "examples": shown.select("id", "group", "reference_id", "windows").to_dicts(),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _mixture_tokenizer(folder: Path, manifest: dict, tokenizer: Tokenizer | Path | None) -> Tokenizer:
    """The tokenizer given (loaded from a path), or the mixture's when None; checked to be the
    mixture's."""
    if tokenizer is None:
        tokenizer = load_tokenizer(tokenizer_path(folder, manifest))
    elif not isinstance(tokenizer, Tokenizer):
        tokenizer = load_tokenizer(tokenizer)
    _same_tokenizer(tokenizer, folder, manifest)
    return tokenizer


def _training_hits(folder: Path, manifest: dict, index: WindowIndex) -> tuple[pl.DataFrame, dict]:
    """``(hits, checked)``: ``id, window, group`` of every window of the index in the mixture's
    training shards, each document counted once however often it is repeated; and per group the
    documents and tokens (end tokens apart) checked."""
    seen: set[str] = set()
    hits, checked = [], {}
    for entry in manifest.get("train", []):
        tokens, offsets = read_token_shard(folder / entry["file"])
        ids = offsets["doc_id"]
        fresh = ids.is_first_distinct() & ~ids.is_in(pl.Series(list(seen), dtype=pl.String).implode())
        rows = offsets.filter(fresh)
        seen.update(rows["doc_id"].drop_nulls().to_list())
        group = entry["group"]
        count = checked.setdefault(group, {"documents": 0, "tokens": 0})
        lengths = rows["doc_tokens"].to_numpy().astype(np.int64) - 1  # the end token is no text
        count["documents"] += rows.height
        count["tokens"] += int(lengths.sum())
        found = index.hits(tokens, rows["doc_start"].to_numpy(), lengths)
        if found.height:
            hits.append(
                pl.DataFrame(
                    {
                        "id": rows["doc_id"].gather(found["doc"].to_numpy()),
                        "window": found["window"],
                        "group": pl.Series([group] * found.height, dtype=pl.String),
                    }
                )
            )
    all_hits = (
        pl.concat(hits) if hits else pl.DataFrame(schema={"id": pl.String, "window": pl.Int64, "group": pl.String})
    )
    return all_hits, checked


def _recorded_common_windows(folder: Path, manifest: dict, ngram: int) -> np.ndarray | None:
    """The hashes of the windows the mix stage judged common over the whole pool, when its
    exclusion used windows of ``ngram`` tokens; else None."""
    decontamination = manifest.get("decontamination") or {}
    recorded = None
    if decontamination.get("ngram") == ngram and decontamination.get("common_windows_file"):
        recorded = pl.read_parquet(folder / decontamination["common_windows_file"])["hash"].to_numpy()
    return recorded


def _group_counts(documents: pl.DataFrame, checked: dict) -> dict:
    """Per group checked: its documents and tokens, and its contaminated documents and windows and
    documents with only common windows."""
    groups = {}
    for group in sorted(checked):
        mine = documents.filter(pl.col("group") == group)
        dirty = mine.filter(pl.col("windows") > 0)
        groups[group] = {
            **checked[group],
            "contaminated_documents": dirty.height,
            "contaminated_windows": int(dirty["windows"].sum()),
            "common_window_documents": mine.height - dirty.height,
        }
    return groups


def _set_counts(documents: pl.DataFrame, texts, ids: pl.Series) -> dict:
    """Per set of ``texts`` (its ``set`` column; none without one): its texts, and the contaminated
    documents and windows whose closest text (``ids``: the texts' ids) is of that set."""
    sets = {}
    if isinstance(texts, pl.DataFrame) and "set" in texts.columns:
        named = pl.DataFrame({"reference_id": ids, "set": texts["set"].cast(pl.String)})
        dirty = documents.filter(pl.col("windows") > 0).join(
            named.unique("reference_id"), on="reference_id", how="left"
        )
        for name in sorted(named["set"].drop_nulls().unique().to_list()):
            mine = dirty.filter(pl.col("set") == name)
            sets[name] = {
                "texts": int((named["set"] == name).sum()),
                "contaminated_documents": mine.height,
                "contaminated_windows": int(mine["windows"].sum()),
            }
    return sets
