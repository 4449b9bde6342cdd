"""Model-based quality filtering: a fastText classifier of reference text against raw web text.

The recipe is GPT-3's (Brown et al. 2020, appendix A: a classifier of high-quality reference
corpora against raw Common Crawl, whose score decided what was kept) as DCLM made it a baseline
(Li et al. 2024, "DataComp-LM": a fastText classifier of reference text against random web
documents, keeping the top 10% of the pool by score). Positives (``__label__hq``) are reference
text; negatives (``__label__lq``) a random sample of the raw pool the filter will run on, so the
classifier learns what sets the reference apart from typical web text. Word bigrams follow
fastText's text-classification recipe (Joulin et al. 2017, "Bag of Tricks").

What the model sees of a document (:func:`prepare_texts`, the same in training and inference):

* its first ``prefix_chars`` characters (:data:`DEFAULT_PREFIX_CHARS`, 2,000; kept in
  ``quality.json``, so the filter prepares text as the model was trained). fastText averages
  word and bigram vectors over the whole input, so the cost grows with the text while the answer
  settles early. On the 20,000-document demo corpus a 2,000-character prefix gives the same
  held-out F1 as whole texts (0.882 and 0.880) and removes the same share of unseen copies of
  news articles (15.8%); shorter prefixes trade one for the other (1,000 characters: F1 0.897,
  21% of those copies removed; 500: 0.899, 28%). One core scores about 36,000 news articles
  (2.2 KB) a second with the prefix and 26,000 without; the prefix also bounds the cost of a
  multi-megabyte document.
* newlines (and carriage returns) folded to spaces: a training example is one line, and the
  binding's predict refuses a newline. Other whitespace already separates fastText's words.
* case kept: it carries signal (shouted spam, sentence case, names), and lowercasing moved
  held-out F1 by 0.002 on the demo corpus, so nothing argues for losing it.
* ``__label__`` inside a text broken up (``__label_ _``), so that no document can smuggle a label
  into the training file.

A document with no text after preparation scores 0.0: nothing in it resembles the reference.

Scores are P(hq), the model's probability of the ``hq`` label (softmax over the two labels),
clipped to [0, 1]. Two ways to remove documents:

* ``threshold`` (default 0.5): rule ``quality.score_min`` fires when ``quality_score < threshold``;
  the removed-documents table reports the score as value and the threshold as threshold.
* ``top_fraction`` (DCLM keeps 0.1): keep the best ``top_fraction`` of each language, with a fixed
  cut per language read from ``quality.json``: the score at the ``1 - top_fraction`` quantile of
  that language's documents in the pool scored at training time (a language with fewer than
  :data:`MIN_LANG_DOCS` pool documents, a language the pool lacks, and a document without
  ``lang`` use the quantile of the whole pool). A cut that differs per document does not fit a
  :class:`Rule` (one threshold), so the filter also measures
  ``quality_margin = quality_score - cut(lang)`` and rule ``quality.top_fraction`` fires when
  ``quality_margin < 0``: the removed-documents table reports the margin as value and 0.0 as
  threshold; the score stays in the ``quality_score`` measure, and the cut is
  ``quality_score - quality_margin``. Fixed cuts, not ranks within a batch, keep each decision
  independent of how documents are sharded. They keep exactly the fraction of the scored pool
  (up to ties: copies of one page score alike) and about that fraction of new documents like it.

A reference corpus in one language (the demo's English news) scores other languages low as a
whole: at 0.5 the demo's filter removes 98% of the (clean, mostly non-English) dialogues.
``top_fraction`` keeps the best of each language instead, which is why it exists.

The negatives are raw web text, good pages included: a fifth of the demo's web pages are copies
of news articles. That caps held-out precision (about 0.8 on the demo) and teaches the model to
doubt such copies; more training (more epochs, or quantization's retraining) raises held-out F1
by rejecting more of them (0.907 and 33% of unseen copies removed at 10 epochs), so the
defaults stop at fastText's 5 epochs.

Training (:func:`train_quality_classifier`) is deterministic: one thread and a fixed fastText
seed, the split and the example order drawn from ``numpy.random.default_rng(seed)``, so the same
inputs and seed give a byte-identical model file (see :func:`zeroed_allocations` for what that
takes with this fastText build).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gzip
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import fasttext
import numpy as np
import orjson
import polars as pl

from pipeline.filters.params import Fraction, Share
from pipeline.formats.step import FilterOutput, Rule
from pipeline.io.owner import has_record, written_files
from pipeline.io.quiet import quiet_stderr
from pipeline.io.warc import read_warc
from pipeline.io.writer import atomic_path, read_json, write_json

HQ = "__label__hq"
LQ = "__label__lq"
MODEL_BIN = "quality.bin"
MODEL_FTZ = "quality.ftz"
MODEL_INFO = "quality.json"
DEFAULT_PREFIX_CHARS = 2000
# Quantile levels stored per language: 0.00, 0.01, ..., 1.00; cuts between them are interpolated.
QUANTILE_LEVELS = np.round(np.linspace(0.0, 1.0, 101), 2)
# A language with fewer pool documents uses the whole pool's quantiles: with 20, one document is
# 5% of the language, so a cut keeps within 5 points of the fraction asked for.
MIN_LANG_DOCS = 20

RULE_SCORE_MIN = "quality.score_min"
RULE_TOP_FRACTION = "quality.top_fraction"

# Supervised fastText settings: word bigrams; a small dimension and hash table, since two labels
# need little capacity (on the demo, dim 16 and 100,000 buckets score as dim 32 and 200,000 at a
# third of the model's size). Callers override any of them.
DEFAULT_FASTTEXT_PARAMS = {
    "lr": 0.1,
    "dim": 16,
    "wordNgrams": 2,
    "minCount": 2,
    "bucket": 100_000,
    "loss": "softmax",
}
# Without an ``epoch`` parameter: fastText's default of 5 passes, or enough passes for about this
# many updates on a small training set. With 966 training documents (a 3,000-document demo
# corpus) 5 passes leave scores bunched around 0.5 (a third of the unseen boilerplate pages
# above it); 11 separate them (all below) and still keep every unseen news article.
MIN_EPOCHS = 5
MIN_UPDATES = 10_000


def prepare_texts(
    texts: Sequence[str | None] | pl.Series, prefix_chars: int = DEFAULT_PREFIX_CHARS, lowercase: bool = False
) -> pl.Series:
    """The texts as the classifier sees them: the prefix, one line, nulls as ``""``."""
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", list(texts), dtype=pl.Utf8)
    series = (
        series.cast(pl.Utf8)
        .fill_null("")
        .str.slice(0, prefix_chars)
        .str.replace_all(r"[\r\n]", " ")
        .str.replace_all("__label__", "__label_ _", literal=True)
    )
    return series.str.to_lowercase() if lowercase else series


def _quiet_load(path: str):
    # Some fastText bindings print a warning about load_model's return type on stderr.
    with quiet_stderr():
        return fasttext.load_model(path)


@lru_cache(maxsize=8)
def _cached_model(path: str, mtime_ns: int, size: int):
    return _quiet_load(path)


def load_quality_model(path: Path | str):
    """The fastText model at ``path``, loaded once per process (reloaded if the file changes)."""
    path = Path(path).resolve()
    stat = path.stat()
    return _cached_model(str(path), stat.st_mtime_ns, stat.st_size)


def hq_probability(model, prepared: pl.Series) -> np.ndarray:
    """P(hq) for each prepared text (float64 in [0, 1]); 0.0 for a blank one."""
    n = len(prepared)
    scores = np.zeros(n, dtype=np.float64)
    has_text = (prepared.str.strip_chars().str.len_bytes() > 0).to_numpy()
    if not has_text.any():
        return scores
    batch = prepared.filter(pl.Series(has_text)).to_list()
    # One call for the whole batch: the list API loops in C++. With k=1 and two labels under
    # softmax, P(hq) is the top probability when hq is on top and its complement otherwise.
    labels, probs = model.predict(batch, k=1)
    top = np.fromiter((p[0] for p in probs), dtype=np.float64, count=len(probs))
    is_hq = np.fromiter((label[0] == HQ for label in labels), dtype=bool, count=len(labels))
    scores[has_text] = np.clip(np.where(is_hq, top, 1.0 - top), 0.0, 1.0)
    return scores


def _binary_metrics(scores: np.ndarray, truth: np.ndarray, threshold: float = 0.5) -> dict:
    """Precision, recall and F1 of the ``hq`` class at ``threshold``, and ROC AUC."""
    predicted = scores >= threshold
    tp = int(np.sum(predicted & truth))
    fp = int(np.sum(predicted & ~truth))
    fn = int(np.sum(~predicted & truth))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    # AUC as the Mann-Whitney statistic (ties count half).
    pos, neg = scores[truth], scores[~truth]
    auc = None
    if pos.size and neg.size:
        ranks = pl.Series(np.concatenate([pos, neg])).rank("average").to_numpy()
        auc = float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))
    return {
        "threshold": threshold,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "auc": auc,
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "positives": int(truth.sum()),
        "negatives": int((~truth).sum()),
    }


def _quantiles(scores: np.ndarray) -> list[float]:
    return [float(q) for q in np.quantile(scores, QUANTILE_LEVELS)]


def score_quantiles(scores: np.ndarray, langs: Sequence[str | None]) -> dict:
    """Score quantiles of a pool, overall and per language with at least :data:`MIN_LANG_DOCS`
    documents (a missing language counts in the overall quantiles only)."""
    langs_series = pl.Series("lang", list(langs), dtype=pl.Utf8)
    frame = pl.DataFrame({"lang": langs_series, "score": scores})
    by_lang, docs_by_lang = {}, {}
    for (lang,), group in frame.filter(pl.col("lang").is_not_null()).group_by(["lang"]):
        docs_by_lang[lang] = group.height
        if group.height >= MIN_LANG_DOCS:
            by_lang[lang] = _quantiles(group["score"].to_numpy())
    return {
        "levels": [float(q) for q in QUANTILE_LEVELS],
        "global": _quantiles(scores),
        "docs": int(scores.size),
        "by_lang": dict(sorted(by_lang.items())),
        "docs_by_lang": dict(sorted(docs_by_lang.items())),
        "min_lang_docs": MIN_LANG_DOCS,
    }


@contextlib.contextmanager
def zeroed_allocations():
    """Make glibc's malloc hand out zero-filled memory while the block runs; yield whether it could.

    fastText fills its input matrix (words and n-gram buckets) with random values in ``thread``
    blocks of a tenth each, and the build of fasttext-numpy2 this project uses leaves the rest of
    the matrix as it finds it in memory: with ``thread=1``, nine tenths of the rows start as
    whatever the allocator returns, which makes training non-deterministic and sometimes
    diverge ("Encountered NaN", even at a learning rate of 0.001). glibc's ``M_PERTURB`` option
    fills each allocation with the complement of a byte, so 0xFF gives zeros: those rows start at
    zero, as fastText's output matrix does, and the same data and seed give the same model.
    """
    libc_name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(libc_name), "mallopt", None) if libc_name else None
    m_perturb = -6
    if mallopt is None or not mallopt(m_perturb, 0xFF):
        yield False
        return
    try:
        yield True
    finally:
        mallopt(m_perturb, 0)


def _check_finite(model) -> None:
    """Refuse a model whose training diverged or started from garbage memory."""
    for matrix in (model.get_input_matrix(), model.get_output_matrix()):
        if not np.isfinite(matrix).all() or np.abs(matrix).max(initial=0.0) > 1e4:
            raise RuntimeError(
                "fastText training gave non-finite or huge weights: lower lr (or, "
                "off glibc, the model started from uninitialized memory)"
            )


def _split(n: int, held_out: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices of one class's training and held-out examples."""
    order = rng.permutation(n)
    test = int(round(held_out * n)) if n >= 2 else 0
    return order[test:], order[:test]


def _write_training_file(path: Path, texts: list[str], labels: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for label, text in zip(labels, texts):
            out.write(f"{label} {text}\n")


def train_quality_classifier(
    positives: Sequence[str],
    negatives: Sequence[str],
    out_dir: Path,
    seed: int = 0,
    held_out: float = 0.1,
    *,
    langs: Sequence[str | None] | None = None,
    pool: Sequence[str] | None = None,
    prefix_chars: int = DEFAULT_PREFIX_CHARS,
    lowercase: bool = False,
    quantize: bool = False,
    **fasttext_params,
) -> dict:
    """Train the quality classifier of ``positives`` (reference text) against ``negatives``
    (random raw text) and write ``out_dir/quality.bin`` (``quality.ftz`` when ``quantize``) and
    ``out_dir/quality.json``; return the summary written to the latter.

    ``held_out`` of each class (a stratified split) is kept out of training and scored at 0.5
    for precision, recall and F1 of the ``hq`` class. When ``langs`` is given, the summary holds
    the score quantiles per language of the pool (``pool``, by default the negatives: the random
    raw sample that stands for the data the filter will see), ``langs`` naming each pool
    document's language, for :class:`QualityFilter`'s ``top_fraction``. ``fasttext_params``
    override :data:`DEFAULT_FASTTEXT_PARAMS`; ``thread`` is always 1 and ``seed`` is ``seed``.

    ``prefix_chars`` and ``lowercase`` say how texts are prepared (:func:`prepare_texts`); they are
    saved for the filter. ``quantize`` writes a product-quantized ``quality.ftz`` (vocabulary cut
    to 100,000 rows, retrained) instead of ``quality.bin``: on the 20,000-document demo corpus it
    takes 10 s where training takes 1 s, and its model is 2.0 MB instead of 8.7 MB, but its
    retraining pass shifts the scores like more epochs do (held-out F1 0.911 instead of 0.882,
    and 34% of unseen copies of news articles removed instead of 16%), so it is off by default.
    """
    pool_texts = _check_training_inputs(positives, negatives, held_out, langs, pool, fasttext_params)
    params = {**DEFAULT_FASTTEXT_PARAMS, **fasttext_params, "thread": 1, "seed": int(seed)}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(seed)
    prepared = {
        HQ: prepare_texts(positives, prefix_chars, lowercase).to_list(),
        LQ: prepare_texts(negatives, prefix_chars, lowercase).to_list(),
    }
    train_x, train_y, test_x, test_y = _training_examples(prepared, held_out, rng)
    if "epoch" not in params:
        params["epoch"] = max(MIN_EPOCHS, -(-MIN_UPDATES // max(len(train_x), 1)))
    model, zeroed = _fit(train_x, train_y, out_dir, params, quantize)
    model_name = _save_model(model, out_dir, quantize)

    held = _held_out_metrics(model, test_x, test_y)
    info = {
        "model_file": model_name,
        "labels": {"hq": HQ, "lq": LQ},
        "seed": int(seed),
        "held_out_share": held_out,
        "prefix_chars": prefix_chars,
        "lowercase": lowercase,
        "quantized": quantize,
        "fasttext_params": params,
        "zeroed_allocations": zeroed,
        "counts": _example_counts(positives, negatives, train_y, test_y, model),
        "held_out": held,
        "model_bytes": (out_dir / model_name).stat().st_size,
    }
    if langs is not None:
        pool_scores = hq_probability(model, prepare_texts(pool_texts, prefix_chars, lowercase))
        info["quantiles"] = score_quantiles(pool_scores, langs)
    write_json(info, out_dir / MODEL_INFO)
    return info


def _check_training_inputs(
    positives: Sequence[str],
    negatives: Sequence[str],
    held_out: float,
    langs: Sequence[str | None] | None,
    pool: Sequence[str] | None,
    fasttext_params: dict,
) -> Sequence[str]:
    """Refuse inputs :func:`train_quality_classifier` cannot train on; return the pool whose
    scores give the quantiles (the negatives unless ``pool`` is given)."""
    if not positives or not negatives:
        raise ValueError(
            f"train_quality_classifier needs positives and negatives (got {len(positives)} and {len(negatives)})"
        )
    if not 0.0 <= held_out < 1.0:
        raise ValueError(f"held_out must be in [0, 1), got {held_out}")
    pool_texts = negatives if pool is None else pool
    if langs is not None and len(langs) != len(pool_texts):
        raise ValueError(
            f"langs has {len(langs)} entries for {len(pool_texts)} pool documents "
            f"({'pool' if pool is not None else 'negatives'})"
        )
    for key in ("thread", "seed", "input"):
        if key in fasttext_params:
            raise ValueError(f"fastText parameter {key!r} is set by train_quality_classifier")
    return pool_texts


def _training_examples(
    prepared: dict[str, list[str]], held_out: float, rng: np.random.Generator
) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(train_x, train_y, test_x, test_y)``: each label's prepared texts split (stratified, in
    label order), then the training examples shuffled."""
    train_x, train_y, test_x, test_y = [], [], [], []
    for label, texts in prepared.items():
        train_idx, test_idx = _split(len(texts), held_out, rng)
        train_x += [texts[i] for i in train_idx]
        train_y += [label] * len(train_idx)
        test_x += [texts[i] for i in test_idx]
        test_y += [label] * len(test_idx)
    order = rng.permutation(len(train_x))
    train_x = [train_x[i] for i in order]
    train_y = [train_y[i] for i in order]
    return train_x, train_y, test_x, test_y


def _fit(train_x: list[str], train_y: list[str], out_dir: Path, params: dict, quantize: bool):
    """Train fastText on the examples (from a training file in a temporary folder of ``out_dir``)
    and quantize it when asked; return the model and whether allocations were zeroed."""
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".quality-train-") as tmp:
        train_file = Path(tmp) / "train.txt"
        _write_training_file(train_file, train_x, train_y)
        with quiet_stderr(), zeroed_allocations() as zeroed:
            model = fasttext.train_supervised(input=str(train_file), verbose=0, **params)
        _check_finite(model)
        if quantize:
            with quiet_stderr(), zeroed_allocations():
                model.quantize(input=str(train_file), retrain=True, qnorm=True, cutoff=100_000, thread=1, verbose=0)
    return model, zeroed


def _save_model(model, out_dir: Path, quantize: bool) -> str:
    """Write ``quality.ftz`` (quantized) or ``quality.bin`` and remove the other; return its name."""
    model_name = MODEL_FTZ if quantize else MODEL_BIN
    with atomic_path(out_dir / model_name) as tmp_model:
        model.save_model(str(tmp_model))
    stale = out_dir / (MODEL_BIN if quantize else MODEL_FTZ)
    if not has_record(out_dir) or stale.name in written_files(out_dir):  # in a claimed folder: ours only
        stale.unlink(missing_ok=True)
    return model_name


def _held_out_metrics(model, test_x: list[str], test_y: list[str]) -> dict:
    """The ``hq`` class's precision, recall and F1 at 0.5 on the held-out examples ({} without any)."""
    held = {}
    if test_x:
        truth = np.array([y == HQ for y in test_y])
        held = _binary_metrics(hq_probability(model, pl.Series(test_x, dtype=pl.Utf8)), truth)
    return held


def _example_counts(
    positives: Sequence[str], negatives: Sequence[str], train_y: list[str], test_y: list[str], model
) -> dict[str, int]:
    """The examples given, trained on and held out per label, and the model's vocabulary."""
    return {
        "positives": len(positives),
        "negatives": len(negatives),
        "train_positives": train_y.count(HQ),
        "train_negatives": train_y.count(LQ),
        "held_out_positives": test_y.count(HQ),
        "held_out_negatives": test_y.count(LQ),
        "vocabulary": len(model.get_words()),
    }


def _model_files(model: Path) -> tuple[Path, Path]:
    """The model file and its ``quality.json``, from either the file or its directory."""
    if model.is_dir():
        info_path = model / MODEL_INFO
        if not info_path.is_file():
            raise FileNotFoundError(
                f"{info_path} not found: train a model with train_quality_classifier(..., out_dir) first"
            )
        return model / read_json(info_path)["model_file"], info_path
    return model, model.with_name(MODEL_INFO)


class QualityFilter:
    """Scores every document with the quality classifier; removes the low scorers.

    ``model``: the model file (``quality.bin`` / ``quality.ftz``) or the folder holding it and its
    ``quality.json``. ``threshold`` removes documents scoring below it (None: measure only); with
    ``top_fraction`` the per-language cuts of ``quality.json`` are used instead and ``threshold``
    is unused. See the module docstring for what the removed-documents table reports.
    """

    name = "quality"
    thresholds = ("threshold",)

    def __init__(self, model: str | Path, threshold: Fraction | None = 0.5, top_fraction: Share | None = None):
        model_path, info_path = _model_files(Path(model))
        if not model_path.is_file():
            raise FileNotFoundError(
                f"quality model {model_path} not found: train one with "
                "pipeline.filters.quality.train_quality_classifier"
            )
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"quality threshold must be in [0, 1], got {threshold}")
        if top_fraction is not None and not 0.0 < top_fraction <= 1.0:
            raise ValueError(f"quality top_fraction must be in (0, 1], got {top_fraction}")
        self.model_path = model_path
        self.threshold = threshold
        self.top_fraction = top_fraction
        info = read_json(info_path) if info_path.is_file() else {}
        self.prefix_chars = int(info.get("prefix_chars", DEFAULT_PREFIX_CHARS))
        self.lowercase = bool(info.get("lowercase", False))
        self.cuts: dict[str, float] = {}
        self.global_cut: float | None = None
        if top_fraction is not None:
            quantiles = info.get("quantiles")
            if not quantiles:
                raise ValueError(
                    f"top_fraction needs score quantiles in {info_path}: train with "
                    "langs=[...] (the pool documents' languages)"
                )
            levels = np.asarray(quantiles["levels"])
            level = 1.0 - top_fraction
            self.global_cut = float(np.interp(level, levels, quantiles["global"]))
            self.cuts = {lang: float(np.interp(level, levels, values)) for lang, values in quantiles["by_lang"].items()}
        load_quality_model(self.model_path)  # fail early on a file that is not a model

    def rules(self) -> list[Rule]:
        if self.top_fraction is not None:
            margin = "the score less the cut that keeps the top fraction of the document's language"
            return [Rule(RULE_TOP_FRACTION, measure="quality_margin", op="<", threshold=0.0, counts=margin)]
        if self.threshold is None:
            return []
        score = "the classifier's probability that the text is like its reference text"
        return [Rule(RULE_SCORE_MIN, measure="quality_score", op="<", threshold=self.threshold, counts=score)]

    def cut_for(self, langs: pl.Series | None, n: int) -> pl.Series:
        """The ``top_fraction`` cut of each document, by its language."""
        if langs is None:
            return pl.Series("cut", [self.global_cut] * n, dtype=pl.Float64)
        return (
            langs.cast(pl.Utf8).replace_strict(self.cuts, default=self.global_cut, return_dtype=pl.Float64).alias("cut")
        )

    def scores(self, texts: pl.Series | Sequence[str | None]) -> np.ndarray:
        prepared = prepare_texts(texts, self.prefix_chars, self.lowercase)
        return hq_probability(load_quality_model(self.model_path), prepared)

    def apply(self, docs: pl.DataFrame) -> FilterOutput:
        score = pl.Series("quality_score", self.scores(docs["text"]), dtype=pl.Float64)
        measures = pl.DataFrame([score])
        if self.top_fraction is not None:
            langs = docs["lang"] if "lang" in docs.columns else None
            cut = self.cut_for(langs, docs.height)
            measures = measures.with_columns((score - cut).alias("quality_margin"))
        return FilterOutput(measures=measures, columns={"quality_score": measures["quality_score"]})


def _read_news(path: Path) -> list[tuple[str, str]]:
    """(id, text) of each parseable line of a demo news file."""
    out = []
    with gzip.open(path, "rb") as stream:
        for line in stream:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("text"), str):
                out.append((str(record.get("id")), record["text"]))
    return out


def demo_web_pool(corpus_dir: Path) -> pl.DataFrame:
    """Every document of the demo corpus's ``web/`` WARC files as the project's reader extracts
    them (columns ``id``, ``text``, and ``lang`` from ``labels.parquet``: the language of the text
    a page was made from, null where the labels give none: mixed-language, lorem ipsum and
    gibberish pages)."""
    corpus_dir = Path(corpus_dir)
    frames = []
    for path in sorted((corpus_dir / "web").glob("*.warc*")):
        for batch in read_warc(path):
            frame = pl.from_arrow(batch).filter(pl.col("text").is_not_null() & pl.col("reason").is_null())
            frames.append(frame.select(pl.col("own_id").alias("id"), "text"))
    pool = pl.concat(frames) if frames else pl.DataFrame(schema={"id": pl.Utf8, "text": pl.Utf8})
    labels = pl.read_parquet(corpus_dir / "labels.parquet", columns=["key", "lang"])
    return pool.join(labels.rename({"key": "id"}), on="id", how="left", maintain_order="left")


def demo_training_texts(corpus_dir: Path, seed: int) -> tuple[list[str], list[str]]:
    """Training texts from a demo corpus (:mod:`demo`): positives are its clean
    news articles (``labels.parquet`` kind ``clean``, source ``news``: the reference text),
    negatives a random sample of its ``web/`` pages (the raw pool, whatever they hold), as many
    as the positives, or all pages if there are fewer (then as many positives, at random).
    Reading the labels is fine here: this makes training data, it is not a pipeline step."""
    corpus_dir = Path(corpus_dir)
    labels = pl.read_parquet(corpus_dir / "labels.parquet", columns=["source", "kind", "key"])
    clean = set(labels.filter((pl.col("source") == "news") & (pl.col("kind") == "clean"))["key"])
    positives = [
        text
        for path in sorted((corpus_dir / "news").glob("*.jsonl*"))
        for key, text in _read_news(path)
        if key in clean
    ]
    web = demo_web_pool(corpus_dir)["text"].to_list()
    n = min(len(positives), len(web))
    rng = np.random.default_rng(seed)
    positives = [positives[i] for i in np.sort(rng.permutation(len(positives))[:n])]
    negatives = [web[i] for i in np.sort(rng.permutation(len(web))[:n])]
    return positives, negatives
