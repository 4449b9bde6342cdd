"""The quality classifier: it separates reference text from raw web text, trains deterministically,
and its filter removes noise, keeps unseen reference text, and keeps a top fraction per language."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from demo.corpus import build_demo_corpus
from pipeline.filters.engine import apply_filters
from pipeline.filters.quality import (
    MIN_LANG_DOCS,
    RULE_SCORE_MIN,
    RULE_TOP_FRACTION,
    QualityFilter,
    demo_training_texts,
    demo_web_pool,
    prepare_texts,
    train_quality_classifier,
)
from pipeline.formats.step import Rule

NOISE = ("boilerplate", "spam", "lorem", "gibberish")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo")
    build_demo_corpus(path, docs=3000, seed=1)
    return path


@pytest.fixture(scope="module")
def pool(corpus) -> pl.DataFrame:
    """The demo's distinct web pages, with their kind from the labels (for evaluation only).
    Copies are dropped so that no language's quantiles hinge on one page copied many times (a
    text copied 27 times is more than half of the Spanish pages)."""
    labels = pl.read_parquet(corpus / "labels.parquet", columns=["key", "kind"]).rename({"key": "id"})
    pages = demo_web_pool(corpus).unique("text", keep="first", maintain_order=True)
    return pages.join(labels, on="id", how="left", maintain_order="left")


@pytest.fixture(scope="module")
def trained(corpus, pool, tmp_path_factory) -> tuple[Path, dict]:
    positives, negatives = demo_training_texts(corpus, seed=0)
    out = tmp_path_factory.mktemp("model")
    info = train_quality_classifier(
        positives, negatives, out, seed=0, pool=pool["text"].to_list(), langs=pool["lang"].to_list()
    )
    return out, info


def test_training_texts_are_balanced_news_against_web(corpus):
    positives, negatives = demo_training_texts(corpus, seed=0)
    labels = pl.read_parquet(corpus / "labels.parquet")
    clean_news = labels.filter((pl.col("source") == "news") & (pl.col("kind") == "clean")).height
    web = demo_web_pool(corpus)
    assert len(positives) == len(negatives) == min(clean_news, web.height) == 335
    assert set(negatives) <= set(web["text"].to_list())
    assert demo_training_texts(corpus, seed=0) == (positives, negatives)
    assert demo_training_texts(corpus, seed=1)[1] != negatives  # another seed, another sample


def test_classifier_separates_reference_text_from_raw_web_text(trained):
    out, info = trained
    held = info["held_out"]
    # 10% of each class held out: 34 + 34 documents (54 before the corpus reserved its task and
    # held-out news) of this 3,000-document corpus. Over seeds 0-9 (sample and training) held-out
    # F1 was 0.857-0.964, AUC 0.91-0.99 and recall 1.0
    # (F1 0.88-0.92 and AUC 0.92-0.95 at 20,000 documents). Precision stays near 0.8-0.9
    # because a fifth of the web pages are copies of news articles, labelled raw web yet as good
    # as the reference. A constant "hq" answer has F1 0.667 and AUC 0.5; a random one F1 0.5.
    assert held["positives"] == held["negatives"] == 34
    assert held["f1"] >= 0.80
    assert held["recall"] >= 0.95
    assert held["auc"] >= 0.85
    assert (out / "quality.bin").is_file()
    assert json.loads((out / "quality.json").read_text()) == info
    assert info["counts"]["train_positives"] + info["counts"]["held_out_positives"] == info["counts"]["positives"]
    assert info["fasttext_params"]["thread"] == 1 and info["fasttext_params"]["seed"] == 0
    assert not list(out.glob(".*"))  # no temporaries left behind


def test_training_is_deterministic(corpus, trained, tmp_path):
    out, info = trained
    positives, negatives = demo_training_texts(corpus, seed=0)
    again = train_quality_classifier(positives, negatives, tmp_path, seed=0)
    assert (tmp_path / "quality.bin").read_bytes() == (out / "quality.bin").read_bytes()
    assert again["held_out"] == info["held_out"]
    other = train_quality_classifier(positives, negatives, tmp_path / "other", seed=1)
    assert (tmp_path / "other" / "quality.bin").read_bytes() != (out / "quality.bin").read_bytes()
    assert other["seed"] == 1


def test_score_rule_removes_noise_and_keeps_unseen_reference_text(corpus, trained, pool):
    out, _ = trained
    # Clean news articles stored as notes were never training examples.
    labels = pl.read_parquet(corpus / "labels.parquet")
    notes = labels.filter((pl.col("source") == "notes") & (pl.col("kind") == "clean"))["key"].to_list()
    batch = pl.concat(
        [
            pl.DataFrame(
                {
                    "id": [f"note:{k}" for k in notes],
                    "kind": ["clean"] * len(notes),
                    "text": [(corpus / "notes" / k).read_text() for k in notes],
                }
            ),
            pool.filter(pl.col("kind").is_in(NOISE)).select("id", "kind", "text"),
            pl.DataFrame({"id": ["blank"], "kind": ["blank"], "text": ["  \n "]}),
        ]
    ).with_columns(source=pl.lit("test"), lang=pl.lit("en"))
    quality = QualityFilter(str(out / "quality.bin"))
    assert quality.name == "quality"
    assert quality.rules() == [Rule(RULE_SCORE_MIN, measure="quality_score", op="<", threshold=0.5)]
    measures = quality.apply(batch).measures
    assert measures.columns == ["quality_score"] and measures["quality_score"].dtype == pl.Float64
    scores = measures["quality_score"]
    assert scores.is_between(0.0, 1.0).all() and scores[-1] == 0.0  # blank text scores 0

    result = apply_filters(batch, [quality])
    removed = batch.join(result.removed.select("id", "rule", "value", "threshold"), on="id")
    share = removed.group_by("kind").len().join(batch.group_by("kind").len(), on="kind", suffix="_all")
    share = dict(share.select("kind", pl.col("len") / pl.col("len_all")).iter_rows())
    # The unseen clean articles of the notes folder: at most 10% of them removed, the noise pages all but removed.
    assert len(notes) >= 15 and share.get("clean", 0.0) <= 0.1
    for kind in NOISE:
        assert share[kind] >= 0.95, kind
    assert (removed["rule"] == RULE_SCORE_MIN).all() and (removed["threshold"] == 0.5).all()
    assert (removed["value"] < 0.5).all()
    # Same scores in a smaller batch, with the model named by its folder.
    assert QualityFilter(out).apply(batch.head(3)).measures["quality_score"].to_list() == scores.head(3).to_list()
    assert QualityFilter(out, threshold=None).rules() == []
    # The threshold is only a threshold (QualityFilter.thresholds): a rerun decides again from the
    # stored scores.
    assert QualityFilter.thresholds == ("threshold",)
    for threshold in (None, 0.0, 0.9):
        other = QualityFilter(out, threshold=threshold).apply(batch)
        assert other.measures.equals(measures) and other.text is None
        assert other.columns["quality_score"].equals(scores) and not other.counts


@pytest.fixture(scope="module")
def multilingual(corpus, pool, tmp_path_factory) -> tuple[Path, dict, pl.DataFrame]:
    """A pool in several languages with enough documents each (the web pages, mostly English, and
    the corpus's distinct dialogues, which carry their language), and a model trained with it.
    Languages written without spaces are left out: the model reads a short Chinese turn as one or
    two unknown words, so many get the same score and no cut can keep an exact share of them."""
    dialogues = (
        pl.read_parquet(corpus / "dialogues", columns=["id", "text", "lang"])
        .filter(~pl.col("lang").is_in(["zh", "ja", "th"]))
        .unique("text", keep="first", maintain_order=True)
    )
    mixed = pl.concat([pool.select("id", "text", "lang"), dialogues], how="vertical_relaxed")
    positives, negatives = demo_training_texts(corpus, seed=0)
    out = tmp_path_factory.mktemp("model-multilingual")
    info = train_quality_classifier(
        positives, negatives, out, seed=0, pool=mixed["text"].to_list(), langs=mixed["lang"].to_list()
    )
    return out, info, mixed


def test_top_fraction_keeps_that_share_of_each_language(multilingual):
    out, info, pool = multilingual
    quantiles = info["quantiles"]
    assert quantiles["docs"] == pool.height
    big = [lang for lang, n in quantiles["docs_by_lang"].items() if n >= MIN_LANG_DOCS]
    assert sorted(quantiles["by_lang"]) == sorted(big) and len(big) >= 5
    for fraction in (0.1, 0.3, 0.5):
        quality = QualityFilter(out, top_fraction=fraction)
        assert quality.rules()[0].name == RULE_TOP_FRACTION and quality.rules()[0].threshold == 0.0
        measures = quality.apply(pool).measures
        kept = pool.with_columns(kept=measures["quality_margin"] >= 0)
        by_lang = dict(kept.group_by("lang").agg(pl.col("kept").mean()).iter_rows())
        for lang in big:
            # Within one document of the fraction.
            n = quantiles["docs_by_lang"][lang]
            assert abs(by_lang[lang] - fraction) <= 1 / n + 1e-9, (fraction, lang, by_lang[lang])
        # Documents without a language (or a rare one) use the whole pool's cut.
        margin_plus_cut = measures["quality_score"] - measures["quality_margin"]
        rare = pool["lang"].is_null() | ~pool["lang"].is_in(big)
        assert np.allclose(margin_plus_cut.filter(rare).to_numpy(), quality.global_cut)
        assert abs(kept["kept"].mean() - fraction) <= 0.1


def test_text_is_folded_to_one_line_and_labels_are_defused():
    prepared = prepare_texts(["a\nb\r\nc", None, "__label__hq spam", "x" * 5000], prefix_chars=2000)
    assert prepared.to_list()[:3] == ["a b  c", "", "__label_ _hq spam"]
    assert prepared.str.len_chars()[3] == 2000


def test_errors_name_the_problem(tmp_path, corpus, trained):
    out, _ = trained
    positives, negatives = demo_training_texts(corpus, seed=0)
    train_quality_classifier(positives[:100], negatives[:100], tmp_path / "no_langs")
    with pytest.raises(ValueError, match="langs"):
        QualityFilter(tmp_path / "no_langs", top_fraction=0.1)
    with pytest.raises(FileNotFoundError, match="train_quality_classifier"):
        QualityFilter(tmp_path / "missing.bin")
    with pytest.raises(ValueError, match="top_fraction"):
        QualityFilter(out, top_fraction=1.5)
    with pytest.raises(ValueError, match="thread"):
        train_quality_classifier(["a"], ["b"], tmp_path, thread=4)
    with pytest.raises(ValueError, match="langs"):
        train_quality_classifier(["a b"], ["c d"], tmp_path, langs=["en", "de"])


def test_curate_train_quality_trains_from_a_run_and_from_a_demo_corpus(corpus, tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["train-quality", str(tmp_path / "demo-model"), "--demo-corpus", str(corpus)])
    assert result.exit_code == 0, result.output
    assert "held-out precision" in result.output and (tmp_path / "demo-model" / "quality.bin").exists()

    docs = tmp_path / "run" / "lang" / "docs"
    docs.mkdir(parents=True)
    news = ["The minister said the budget would rise by two percent next year, after long talks."] * 40
    spam = ["cheap pills buy now best price cheap pills click here free free free"] * 40
    pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(80)],
            "text": news + spam,
            "source": ["news"] * 40 + ["web"] * 40,
            "lang": ["en"] * 80,
        }
    ).write_parquet(docs / "a.parquet")
    result = CliRunner().invoke(
        app,
        [
            "train-quality",
            str(tmp_path / "run-model"),
            "--run-dir",
            str(tmp_path / "run"),
            "--positive",
            "news",
            "--negative",
            "web",
        ],
    )
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "run-model" / "quality.json").read_text())
    assert info["counts"]["positives"] == 40 and "en" in info["quantiles"]["by_lang"]

    result = CliRunner().invoke(
        app,
        [
            "train-quality",
            str(tmp_path / "x"),
            "--run-dir",
            str(tmp_path / "run"),
            "--positive",
            "books",
            "--negative",
            "web",
        ],
    )
    assert result.exit_code == 2 and "no documents of sources ['books']" in result.output
