"""External fastText classifiers: a model trained here with DCLM's labels, loaded by its path,
scoring documents by the probability of its positive label, per language, under names of their
own, by a threshold or a top fraction; and a changed threshold decided from the stored scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.api import filter_documents, read_run
from pipeline.filters import classifier, quality
from pipeline.filters.classifier import FastTextClassifier, model_labels
from pipeline.formats.configfile import ConfigError
from pipeline.stages.rerun import plan_run
from pipeline.stages.verdicts import verdict_table
from report.inspect import inspect_document
from report.measure import filter_rules
from tests.helpers import curate_in_process, source_config, write_jsonl

GOOD = [
    "The committee published its annual report on science education and public health.",
    "Researchers explain how the experiment was designed and what the results mean for patients.",
    "The museum opened a new exhibition about the history of printing and early newspapers.",
]
SPAM = [
    "Buy cheap pills, click here now! Free casino bonus, win money today!!!",
    "Best deals click here, win money now, free bonus for you, buy now!!",
    "Click here for cheap casino deals and free pills, buy now and win!!!",
]


def train_dclm_like(folder: Path, positive: list[str], negative: list[str], name: str = "dclm.bin") -> Path:
    """A fastText model of ``positive`` (``__label__hq``) against ``negative`` (``__label__cc``):
    DCLM's label names, trained here in a second."""
    x = [positive[i % len(positive)] for i in range(60)] + [negative[i % len(negative)] for i in range(60)]
    y = ["__label__hq"] * 60 + ["__label__cc"] * 60
    params = {"lr": 0.5, "dim": 8, "epoch": 25, "minCount": 1, "wordNgrams": 1, "bucket": 0, "loss": "softmax"}
    folder.mkdir(parents=True, exist_ok=True)
    model, _ = quality._fit(x, y, folder, {**params, "thread": 1, "seed": 0}, False)
    path = folder / name
    model.save_model(str(path))
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return train_dclm_like(tmp_path_factory.mktemp("models"), GOOD, SPAM)


def probability(model_path: Path, text: str, label: str = "__label__hq") -> float:
    labels, probs = quality.load_quality_model(model_path).predict(text.replace("\n", " "), k=-1)
    return float(probs[list(labels).index(label)])


def docs_frame(langs: list[str | None] | None = None) -> pl.DataFrame:
    texts = [GOOD[0], SPAM[0], GOOD[1] + "\n" + GOOD[2], SPAM[1]]
    frame = pl.DataFrame({"id": ["g0", "s0", "g1", "s1"], "text": texts})
    return frame if langs is None else frame.with_columns(pl.Series("lang", langs, dtype=pl.String))


def test_a_model_with_dclms_labels_scores_the_probability_of_its_positive_label(model):
    assert set(model_labels(model)) == {"__label__hq", "__label__cc"}  # read from the file's header
    docs = docs_frame()
    kept, removed = filter_documents(docs, {"filters": ["classifier"], "params": {"classifier": {"model": str(model)}}})
    assert kept["id"].to_list() == ["g0", "g1"]
    assert removed["rule"].to_list() == ["classifier.score_min"] * 2
    assert removed["threshold"].to_list() == [0.5, 0.5]
    # the value is the model's own P(__label__hq) of the text on one line
    for row in removed.iter_rows(named=True):
        text = docs.filter(pl.col("id") == row["id"])["text"][0]
        assert row["value"] == pytest.approx(probability(model, text), abs=1e-6)
        assert row["value"] < 0.1
    scores = FastTextClassifier(model=model).apply(docs).measures["score"]
    assert scores[2] == pytest.approx(probability(model, GOOD[1] + " " + GOOD[2]), abs=1e-6)
    assert scores[2] > 0.9
    # "hq" names the same label; the other label's probability is the complement
    other = FastTextClassifier(model=model, label="cc").apply(docs).measures["score"]
    assert np.allclose(other.to_numpy() + scores.to_numpy(), 1.0, atol=1e-4)  # fastText adds 1e-5 to each


def test_one_model_per_language_scores_its_language_and_a_language_without_one_passes(model, tmp_path):
    inverse = train_dclm_like(tmp_path, SPAM, GOOD, "inverse.bin")  # for German: spam is "hq"
    docs = docs_frame(["en", "de", "de", None])
    settings = {
        "filters": ["classifier"],
        "params": {"classifier": {"models": {"en": str(model), "deu": str(inverse)}}},
    }
    kept, removed = filter_documents(docs, settings)
    # g0 (en) by the English model: kept; s0 and g1 (de) by the inverted one: g1 removed, s0 kept;
    # s1 has no language and no model covers it: not scored, kept
    assert removed["id"].to_list() == ["g1"]
    assert kept["id"].to_list() == ["g0", "s0", "s1"]
    measures = FastTextClassifier(models={"en": model, "deu": inverse}).apply(docs).measures["score"]
    assert measures.null_count() == 1 and measures[3] is None
    assert measures[1] == pytest.approx(probability(inverse, SPAM[0]), abs=1e-6)
    # a model for every other language covers the rest
    both = FastTextClassifier(model=model, models={"de": inverse}).apply(docs).measures["score"]
    assert both[3] == pytest.approx(probability(model, SPAM[1]), abs=1e-6)


EDUCATIONAL = [
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "The derivative of a function measures how its output changes as its input changes.",
]


def test_expected_score_weighs_numbered_labels_as_fineweb_edu_scores(tmp_path):
    classes = {"__label__0": SPAM, "__label__1": GOOD, "__label__2": EDUCATIONAL}
    x = [texts[i % len(texts)] for texts in classes.values() for i in range(40)]
    y = [label for label in classes for _ in range(40)]
    params = {"lr": 0.5, "dim": 8, "epoch": 25, "minCount": 1, "wordNgrams": 1, "bucket": 0, "loss": "softmax"}
    fitted, _ = quality._fit(x, y, tmp_path, {**params, "thread": 1, "seed": 0}, False)
    fitted.save_model(str(tmp_path / "edu.bin"))
    docs = pl.DataFrame({"id": ["spam", "good", "edu"], "text": [SPAM[2], GOOD[2], EDUCATIONAL[0]]})
    built = FastTextClassifier(model=tmp_path / "edu.bin", score="expected", threshold=1.5)
    scores = built.apply(docs).measures["score"].to_list()
    for text, score in zip(docs["text"], scores):
        labels, probs = fitted.predict(text, k=-1)
        assert score == pytest.approx(sum(p * int(label[-1]) for label, p in zip(labels, probs)), abs=1e-6)
    assert scores[0] < 0.5 and scores[2] > 1.5
    params = {"model": str(tmp_path / "edu.bin"), "score": "expected", "threshold": 1.5}
    kept, removed = filter_documents(docs, {"filters": ["classifier"], "params": {"classifier": params}})
    assert kept["id"].to_list() == ["edu"] and set(removed["rule"]) == {"classifier.score_min"}
    with pytest.raises(ValueError, match="labels that are numbers .* has '__label__(hq|cc)'"):
        FastTextClassifier(model=train_dclm_like(tmp_path, GOOD, SPAM), score="expected")
    with pytest.raises(ValueError, match="a probability is at most 1, got 1.5"):
        FastTextClassifier(model=tmp_path / "dclm.bin", threshold=1.5)


def test_several_classifiers_run_in_one_stage_under_their_own_names(model):
    params = {
        "classifier_dclm": {"model": str(model), "threshold": 0.5},
        "classifier_inverse": {"model": str(model), "label": "__label__cc", "threshold": 0.5},
    }
    docs = docs_frame()
    kept, removed = filter_documents(docs, {"filters": ["classifier_dclm", "classifier_inverse"], "params": params})
    assert kept.height == 0
    assert dict(zip(removed["id"], removed["rule"])) == {
        "g0": "classifier_inverse.score_min",
        "s0": "classifier_dclm.score_min",
        "g1": "classifier_inverse.score_min",
        "s1": "classifier_dclm.score_min",
    }


def test_top_fraction_cuts_at_the_pools_quantile_per_language(model, tmp_path):
    rng = np.random.default_rng(0)
    words = " ".join(GOOD + SPAM).split()
    pool = [{"text": " ".join(rng.choice(words, 12)), "lang": "en"} for _ in range(40)]
    pool += [{"text": " ".join(rng.choice(words, 12)), "lang": "fr"} for _ in range(5)]  # too few: the whole pool's
    pool_path = write_jsonl(tmp_path / "pool.jsonl", pool)
    built = FastTextClassifier(model=model, top_fraction=0.25, pool=pool_path)
    scores = np.array([probability(model, d["text"]) for d in pool])
    assert built.cuts["en"] == pytest.approx(float(np.quantile(scores[:40], 0.75)), abs=1e-6)
    assert built.cuts[None] == pytest.approx(float(np.quantile(scores, 0.75)), abs=1e-6)
    assert "fr" not in built.cuts
    docs = pl.DataFrame({"id": [f"d{i}" for i in range(45)], "text": [d["text"] for d in pool]})
    docs = docs.with_columns(pl.Series("lang", [d["lang"] for d in pool]))
    kept, removed = filter_documents(
        docs,
        {
            "filters": ["classifier"],
            "params": {"classifier": {"model": str(model), "top_fraction": 0.25, "pool": str(pool_path)}},
        },
    )
    assert set(removed["rule"]) == {"classifier.top_fraction"}
    english = kept.filter(pl.col("lang") == "en").height
    assert english == int(np.sum(scores[:40] >= built.cuts["en"]))
    assert 9 <= english <= 11  # a quarter of the 40, up to ties
    # the value is the margin, the cut is the score less it
    first = removed.row(0, named=True)
    text = docs.filter(pl.col("id") == first["id"])["text"][0]
    cut = built.cuts["en"] if first["lang"] == "en" else built.cuts[None]
    assert first["value"] == pytest.approx(probability(model, text) - cut, abs=1e-6)
    assert first["threshold"] == 0.0


def _run_config(tmp_path: Path, corpus: Path, run: str = "run", by_lang: dict | None = None, **params) -> object:
    settings = {"filters": ["classifier"], "params": {"classifier": params}, "by_lang": by_lang or {}}
    off = {"enabled": False}
    return source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(corpus)]}],
        lang=off,
        filter=settings,
        dedup=off,
        lines=off,
        tokenize=off,
        mix=off,
    ).model_copy(update={"run_dir": tmp_path / run})


def test_a_bad_model_path_or_label_is_one_line_before_any_work(model, tmp_path):
    corpus = write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in GOOD])
    with pytest.raises(ConfigError) as error:
        _run_config(tmp_path, corpus, model=str(tmp_path / "missing.bin"))
    assert "\n" not in str(error.value)
    assert "filter.params.classifier" in str(error.value) and "missing.bin is not a file" in str(error.value)
    with pytest.raises(ConfigError) as error:
        _run_config(tmp_path, corpus, model=str(model), label="__label__positive")
    message = str(error.value)
    assert "\n" not in message
    assert "no label '__label__positive'" in message
    assert "__label__hq" in message and "__label__cc" in message
    (tmp_path / "text.bin").write_text("not a model")
    with pytest.raises(ConfigError, match="is not a fastText model file"):
        _run_config(tmp_path, corpus, model=str(tmp_path / "text.bin"))
    with pytest.raises(ConfigError, match="top_fraction needs pool"):
        _run_config(tmp_path, corpus, model=str(model), top_fraction=0.5)
    german = {"de": {"params": {"classifier": {"model": str(tmp_path / "de.bin")}}}}  # a language's own
    with pytest.raises(ConfigError, match=r"^filter\.by_lang\.de\.params\.classifier: .*de\.bin is not a file"):
        _run_config(tmp_path, corpus, by_lang=german, model=str(model))


def test_a_languages_own_model_replaced_at_the_same_path_reruns_the_stage(model, tmp_path):
    corpus = write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in GOOD + SPAM])
    german = tmp_path / "models" / "de.bin"
    german.parent.mkdir()
    german.write_bytes(model.read_bytes())
    by_lang = {"de": {"params": {"classifier": {"model": str(german)}}}}
    curate_in_process(_run_config(tmp_path, corpus, by_lang=by_lang, model=str(model)))
    again = _run_config(tmp_path, corpus, by_lang=by_lang, model=str(model))
    assert {p.action for p in plan_run(again).stages} == {"kept"}
    german.write_bytes(train_dclm_like(tmp_path / "other", SPAM, GOOD).read_bytes())
    assert [str(p) for p in plan_run(again).stages][1] == (
        "filter: reruns (the contents of filter.by_lang.de.params.classifier.model changed)"
    )


def test_a_changed_threshold_decides_again_from_the_stored_scores_without_the_model(model, tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in GOOD + SPAM])
    copy = tmp_path / "models" / "dclm.bin"
    copy.parent.mkdir()
    copy.write_bytes(model.read_bytes())
    first = curate_in_process(_run_config(tmp_path, corpus, model=str(copy), threshold=0.5))
    assert first["filter"]["docs_out"] == 3
    run = read_run(tmp_path / "run")
    assert run.removed(rule="classifier.score_min").height == 3
    table = verdict_table(run.files, run.removed()["id"].to_list())
    assert set(table["rule"]) == {"classifier.score_min"} and table["found"].to_list() == ["stored"] * 3
    spam = run.removed()["id"][0]
    assert "classifier.score_min" in inspect_document(tmp_path / "run", spam)["fate"]
    (described,) = filter_rules(run.files.config)[0]
    assert described[1] == "score < 0.5; counts the classifier's probability of __label__hq"

    changed = _run_config(tmp_path, corpus, model=str(copy), threshold=0.99999)
    assert [str(p) for p in plan_run(changed).stages][1].startswith("filter: re-decides from its stored measurements")

    def loaded(*args, **kwargs):
        raise AssertionError("the classifier's model was loaded again")

    monkeypatch.setattr(quality, "load_quality_model", loaded)
    monkeypatch.setattr(classifier, "label_scores", loaded)
    stats = curate_in_process(changed)
    monkeypatch.undo()
    fresh = curate_in_process(_run_config(tmp_path, corpus, "fresh", model=str(copy), threshold=0.99999))
    assert stats["filter"]["docs_out"] == fresh["filter"]["docs_out"]
    assert json.dumps(stats["filter"]["removed"], sort_keys=True) == json.dumps(
        fresh["filter"]["removed"], sort_keys=True
    )
    assert stats["filter"]["docs_out"] == 0  # every score is below 0.99999

    copy.write_bytes(train_dclm_like(tmp_path / "other", SPAM, GOOD).read_bytes())  # another model, same path
    assert [str(p) for p in plan_run(changed).stages][1] == (
        "filter: reruns (the contents of filter.params.classifier.model changed)"
    )
