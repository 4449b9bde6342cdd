"""Language identification over a batch of documents, and the language filter's decisions.

A :class:`LanguageIdentifier` wraps a fastText language-ID model: fastText's ``lid.176.ftz``
(fetched at setup, see :mod:`pipeline.lang.model`) or ``lid.176.bin``, or a GlotLID / OpenLID model.
Predicted labels lose their ``__label__`` prefix and are otherwise kept as the model writes them:
``en``, ``zh`` for lid.176; ``eng_Latn`` style codes for GlotLID and OpenLID.

What the model sees of a document:

* a document of at most :data:`DEFAULT_SAMPLE_CHARS` characters (1,000): all of it;
* a longer one: :data:`DEFAULT_SAMPLE_SPANS` spans (4) of 250 characters, one centred in each
  quarter of the text, joined by spaces (:func:`sample_expr`; both numbers configurable per
  identifier and in ``[lang]``). fastText averages word and character n-gram vectors over its
  whole input, so the cost of a prediction grows with the text, and its answer follows whatever
  most of the input is: read from the start only, an English header, navigation or cookie banner
  over a Spanish or French text outvotes the text. Spans spread over the document are a sample
  of all of it at the same bounded cost as a prefix, the same for every run.

  Measured by ``benchmarks/lid_accuracy.py``: agreement with lid.176 on the whole text (without
  the header), spans against the first 1,000 characters, each
  document as it is and under an English header of 170 to 860 characters (navigation, cookie
  or licence banner):

  ============================================  =================  ==================
  documents                                     as they are        under a header
  ============================================  =================  ==================
  670 Common Crawl pages (2019-30 sample)       98.96 vs 97.46%    91.49 vs 81.19%
  2,369 package texts (BBC news, dialogues)     100.00 vs 99.96%   99.92 vs 98.61%
  ============================================  =================  ==================

  Under the header the spans do as well as the whole text itself (91.49% on the pages, where
  short pages are outvoted whatever is read; 99.96% on the package texts): Spanish pages are
  Spanish 85% of the time against the prefix's 66% (whole text 84%), French 100% against 68%,
  Italian 84% against 51%. On the pages as they are, the spans disagree with the whole text on 7
  of 670, 6 of them pages where lid.176 gives the whole text less than 0.5 (the prefix: 17).
  Throughput is 0.87 to 1.02 times the prefix's (the same length of text is read). The longest
  paragraphs instead score 97.16% on the pages, below the prefix.
* its text with newlines folded to spaces: fastText predicts one line at a time (the binding
  refuses a newline), and its other whitespace already separates words.

A quantized model with a hierarchical softmax (``lid.176.ftz``) is predicted by
:mod:`pipeline.lang.kernels`, a compiled copy of fastText's arithmetic that gives its labels and
scores bit for bit, about 3.5 times as fast; it is checked against fastText on a few texts when the
model loads, and fastText predicts where it differs or cannot read the model.

A document that is empty or only whitespace gets :data:`UNDETERMINED` (``"und"``, the
BCP 47 / ISO 639-2 code for an undetermined language) with score 0.0, instead of the guess
fastText makes for an empty line (``en``, 0.12). Scores are the model's probability for its top
label as float32, clipped to [0, 1]: fastText's approximate (table-based) hierarchical softmax
can return slightly more than 1, such as 1.00004.

The language filter keeps a document when its language is kept (a list of codes, or all) and its
score reaches the minimum for its language (a default, with per-language overrides).
:func:`lang_decisions` says, per document, which rule removes it, if any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import fasttext
import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.formats.langcodes import UNDETERMINED, lang_languages
from pipeline.formats.langcodes import language_of as _language
from pipeline.io.quiet import quiet_stderr

DEFAULT_SAMPLE_CHARS = 1000
DEFAULT_SAMPLE_SPANS = 4
LABEL_PREFIX = "__label__"

RULE_NOT_KEPT = "lang.not_kept"
RULE_LOW_SCORE = "lang.low_score"


def normalize_label(label: str) -> str:
    """``__label__en`` -> ``en``, ``__label__eng_Latn`` -> ``eng_Latn``."""
    return label[len(LABEL_PREFIX) :] if label.startswith(LABEL_PREFIX) else label


def sample_expr(
    text: pl.Expr, sample_chars: int = DEFAULT_SAMPLE_CHARS, sample_spans: int = DEFAULT_SAMPLE_SPANS
) -> pl.Expr:
    """What the model reads of each text: the text itself when it has at most ``sample_chars``
    characters; otherwise ``sample_spans`` spans of ``sample_chars // sample_spans`` characters,
    one centred in each of ``sample_spans`` equal parts of the text, joined by spaces.

    The spans never overlap and never leave the text (a part is at least a span long), and they
    depend only on the text's length, so the same text always gives the same sample.
    """
    span = sample_chars // sample_spans
    length = text.str.len_chars().cast(pl.Int64)
    starts = [length * (2 * i + 1) // (2 * sample_spans) - span // 2 for i in range(sample_spans)]
    spans = pl.concat_str([text.str.slice(start, span) for start in starts], separator=" ")
    return pl.when(length <= sample_chars).then(text).otherwise(spans)


_UNSET = object()


class LanguageIdentifier:
    """A fastText language-ID model, loaded once, predicting over batches of texts."""

    def __init__(
        self,
        model_path: Path | str,
        *,
        sample_chars: int = DEFAULT_SAMPLE_CHARS,
        sample_spans: int = DEFAULT_SAMPLE_SPANS,
    ):
        if sample_chars <= 0:
            raise ValueError(f"sample_chars must be positive, got {sample_chars}")
        if not 1 <= sample_spans <= sample_chars:
            raise ValueError(f"sample_spans must be between 1 and sample_chars ({sample_chars}), got {sample_spans}")
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"language-ID model {path} not found")
        self.model_path = path
        self.sample_chars = sample_chars
        self.sample_spans = sample_spans
        # Some fastText bindings print a warning about load_model's return type on stderr.
        with quiet_stderr():
            self._model = fasttext.load_model(str(path))
        raw_labels = self._model.get_labels()
        if not raw_labels:
            raise ValueError(f"{path} is not a supervised fastText model (it has no labels)")
        self._codes = {label: normalize_label(label) for label in raw_labels}
        self.languages: tuple[str, ...] = tuple(self._codes.values())
        self._predictor = _UNSET  # made at the first prediction: a config check only loads the model

    @property
    def _compiled(self):
        """The compiled predictor (None: fastText predicts), made and checked on first use."""
        if self._predictor is _UNSET:
            self._predictor = _compiled_predictor(self._model, self.model_path)
        return self._predictor

    @_compiled.setter
    def _compiled(self, predictor) -> None:
        self._predictor = predictor

    def prepare(self, texts: Sequence[str | None] | pl.Series) -> pl.Series:
        """The texts as the model sees them: the sample, newlines folded, nulls as ``""``."""
        series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.Utf8)
        frame = series.cast(pl.Utf8).fill_null("").to_frame("text")
        return (
            frame.select(
                sample_expr(pl.col("text"), self.sample_chars, self.sample_spans).str.replace_all(
                    "\n", " ", literal=True
                )
            )
            .to_series()
            .alias(series.name)
        )

    def predict(self, texts: Sequence[str | None] | pl.Series) -> tuple[list[str], np.ndarray]:
        """The top language of each text and its score (float32 in [0, 1]), in input order."""
        prepared = self.prepare(texts)
        n = len(prepared)
        langs = [UNDETERMINED] * n
        scores = np.zeros(n, dtype=np.float32)
        has_text = prepared.str.strip_chars().str.len_bytes() > 0
        if not has_text.any():
            return langs, scores
        if has_text.all():
            index = None
        else:
            index = np.flatnonzero(has_text.to_numpy())
        if self._compiled is not None:
            top, top_scores = self._predict_compiled(prepared, index)
        else:
            top, top_scores = self._predict_fasttext(prepared if index is None else prepared.filter(has_text))
        np.clip(top_scores, 0.0, 1.0, out=top_scores)
        if index is None:
            return top, top_scores
        for i, code in zip(index.tolist(), top):
            langs[i] = code
        scores[index] = top_scores
        return langs, scores

    def _predict_fasttext(self, texts: pl.Series) -> tuple[list[str], np.ndarray]:
        """fastText's top label and score of each prepared text. One call for the whole batch:
        the list API loops in C++."""
        labels, probs = self._model.predict(texts.to_list(), k=1)
        codes = self._codes
        top = [codes[label[0]] for label in labels]
        return top, np.fromiter((p[0] for p in probs), dtype=np.float32, count=len(probs))

    def _predict_compiled(self, texts: pl.Series, index: np.ndarray | None) -> tuple[list[str], np.ndarray]:
        """:meth:`_predict_fasttext` of the texts at ``index`` (None: all), by
        :mod:`pipeline.lang.kernels` (the same labels and scores)."""
        data, offsets = utf8_buffers(texts)
        rows = np.arange(len(texts), dtype=np.int64) if index is None else index.astype(np.int64)
        labels, scores = self._compiled.predict(data, offsets, rows)
        languages = self.languages
        # fastText predicts nothing for a text with no input row (unreachable with lid.176, whose
        # dictionary has the end-of-sentence token every text ends with)
        return [languages[k] if k >= 0 else UNDETERMINED for k in labels.tolist()], scores


def utf8_buffers(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a string series (no nulls) and each text's offsets in them."""
    array = texts.to_arrow()
    array = (array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array).cast(pa.large_string())
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return data, np.ascontiguousarray(offsets)


# Texts the compiled prediction is checked on against fastText's when a model is loaded: scripts,
# fastText's separators, a word that is the end-of-sentence token, a label-like word.
_CHECK_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Le renard brun saute par-dessus le chien paresseux, n'est-ce pas ?",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "敏捷的棕色狐狸跳过了懒狗。日本語のテキストも少し。",
    "الثعلب البني السريع يقفز فوق الكلب الكسول",
    "tab\tseparated\rwords\x0bwith\x0cevery\x00separator  and   spaces",
    "words before </s> and after it",
    "__label__en __label__xx mixed 123 ### !!! ... 🙂🙃 ok",
    "x",
]


def _compiled_predictor(model, path: Path):
    """:mod:`pipeline.lang.kernels`' predictor of the fastText ``model`` read from ``path``, or
    None when that module cannot reproduce it (or, checked on a few texts, does not)."""
    args = model.f.getArgs()
    if not model.is_quantized() or args.qout or args.loss.name != "hs" or args.wordNgrams > 1 or args.maxn <= 0:
        return None
    from pipeline.lang import kernels  # numba loads with a model it serves, not with the config's imports

    read = kernels.read_model(path)
    if read is None or read.labels != list(model.get_labels()):
        return None
    predictor = kernels.Predictor(read)
    texts = pl.Series(_CHECK_TEXTS)
    data, offsets = utf8_buffers(texts)
    labels, scores = predictor.predict(data, offsets, np.arange(len(texts), dtype=np.int64))
    expected, probs = model.predict(_CHECK_TEXTS, k=1)
    same = [read.labels[k] for k in labels.tolist()] == [e[0] for e in expected]
    same = same and scores.tobytes() == np.array([p[0] for p in probs], dtype=np.float32).tobytes()
    return predictor if same else None


def identify_languages(docs: pl.DataFrame, identifier: LanguageIdentifier, text_column: str = "text") -> pl.DataFrame:
    """``docs`` with a ``lang`` (Utf8) and a ``lang_score`` (Float32) column added."""
    langs, scores = identifier.predict(docs.get_column(text_column))
    return docs.with_columns(
        pl.Series("lang", langs, dtype=pl.Utf8),
        pl.Series("lang_score", scores, dtype=pl.Float32),
    )


def lang_decisions(
    docs: pl.DataFrame,
    keep: Sequence[str] | None,
    min_score: float,
    min_score_by_lang: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    """Per document of ``docs`` (columns ``lang``, ``lang_score``), in order:

    * ``rule`` (Utf8): null when the document is kept; :data:`RULE_NOT_KEPT` when its language
      is not in ``keep`` (``None`` keeps every language); otherwise :data:`RULE_LOW_SCORE` when
      its score is below the minimum for its language.
    * ``value`` (Float64): the document's language score.
    * ``threshold`` (Float64): the minimum score for the document's language,
      ``min_score_by_lang.get(lang, min_score)``; null where the language is not kept, as no
      score would keep it.

    Codes are matched by language (:func:`pipeline.formats.langcodes.parse_lang`): ``keep =
    ["eng_Latn"]`` keeps the documents lid.176 labels ``en``, and ``zh`` those GlotLID labels
    ``cmn_Hani``.

    An undetermined document (``und``, score 0) is removed by ``keep`` unless it lists ``und``,
    and by any positive minimum score.
    """
    if keep is not None and len(keep) == 0:
        raise ValueError("keep: an empty list keeps no document; list languages, or None for all")
    overrides = dict(min_score_by_lang or {})
    for code, score in [("default", min_score), *overrides.items()]:
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"min_score for {code}: {score} is outside [0, 1]")

    overrides = {_language(code): score for code, score in overrides.items()}
    docs = docs.with_columns(_language=pl.coalesce(lang_languages(docs["lang"]), docs["lang"].cast(pl.String)))
    lang = pl.col("_language")
    value = pl.col("lang_score").cast(pl.Float64)
    if overrides:
        threshold = lang.replace_strict(
            list(overrides),
            list(overrides.values()),
            default=pl.lit(min_score, dtype=pl.Float64),
            return_dtype=pl.Float64,
        )
    else:
        threshold = pl.lit(min_score, dtype=pl.Float64)
    kept_lang = pl.lit(True) if keep is None else lang.is_in([_language(code) for code in keep])
    # A null language is never kept by a list, and a null score never reaches a minimum.
    kept_lang = kept_lang.fill_null(False)
    low = (value < threshold).fill_null(True)
    return docs.select(
        rule=pl.when(~kept_lang)
        .then(pl.lit(RULE_NOT_KEPT))
        .when(low)
        .then(pl.lit(RULE_LOW_SCORE))
        .otherwise(pl.lit(None, dtype=pl.Utf8)),
        value=value,
        threshold=pl.when(kept_lang).then(threshold).otherwise(pl.lit(None, dtype=pl.Float64)),
    )
