"""CCNet's perplexity under a KenLM model written here by hand (a unigram and bigram ARPA file):
the normalization, the perplexity against hand-computed values, per language, thresholds and
head/middle/tail buckets, and a changed threshold decided from the stored perplexities."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.api import filter_documents
from pipeline.filters import perplexity
from pipeline.filters.perplexity import KenLMPerplexity, ccnet_normalize
from pipeline.formats.configfile import ConfigError
from pipeline.stages.rerun import plan_run
from tests.helpers import curate_in_process, source_config, write_jsonl

kenlm = pytest.importorskip("kenlm")  # the optional extra `make test` installs

# log10 probabilities and back-offs, so that every score below can be worked out by hand
ARPA = """
\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-2.0\t<unk>\t0
-99\t<s>\t-0.3
-0.7\t</s>\t0
-0.5\tthe\t-0.2
-0.8\tcat\t-0.1

\\2-grams:
-0.2\t<s> the
-0.3\tthe cat
-0.1\tcat </s>

\\end\\
"""
# "the cat": P(the|<s>) -0.2, P(cat|the) -0.3, P(</s>|cat) -0.1: -0.6 over 3 tokens (2 words, 1 end)
THE_CAT = 10 ** (0.6 / 3)
# "cat the": bo(<s>) + P(cat) = -1.1, bo(cat) + P(the) = -0.6, bo(the) + P(</s>) = -0.9: -2.6 over 3
CAT_THE = -2.6
# "dog" (unknown): bo(<s>) + P(<unk>) = -2.3, then P(</s>) = -0.7: -3.0 over 2
DOG = 10 ** (3.0 / 2)


def write_arpa(folder: Path, text: str = ARPA, name: str = "en.arpa") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def arpa(tmp_path_factory) -> Path:
    return write_arpa(tmp_path_factory.mktemp("lm"))


def test_lines_are_normalized_as_ccnet_normalizes_them():
    lines = pl.Series(["  Thé CÄT ran 1984 km — «fast»…  ", "Ｑ：（ok）！\tnext", "İstanbul’s ２０２４"])
    assert ccnet_normalize(lines).to_list() == [
        'the cat ran 0000 km  -  "fast"...',  # accents, case, digits, CCNet's punctuation table
        "ｑ:(ok)!next",  # full-width punctuation to ASCII, a tab removed (a control character)
        "istanbul's 0000",  # a dotted capital lowers to i and a combining dot, which goes
    ]


def test_perplexity_is_ccnets_over_the_lines_of_a_document(arpa):
    docs = pl.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e"],
            "text": ["The Cat", "The Cät\nCAT the", "dog", "", "  the   cat  "],
            "lang": ["en"] * 5,
        }
    )
    measured = KenLMPerplexity(models={"en": arpa}).apply(docs).measures["perplexity"].to_list()
    assert measured[0] == pytest.approx(THE_CAT, rel=1e-6)
    assert measured[1] == pytest.approx(10 ** (-(-0.6 + CAT_THE) / 6), rel=1e-6)  # both lines: one sum, one count
    assert measured[2] == pytest.approx(DOG, rel=1e-6)
    assert measured[3] is None  # no text: not scored, as CCNet leaves it
    assert measured[4] == pytest.approx(THE_CAT, rel=1e-6)  # stripped; KenLM splits on whitespace runs


def test_each_language_takes_its_model_and_one_without_passes(arpa, tmp_path):
    # a German model where "cat the" is the likely order
    german = write_arpa(tmp_path, ARPA.replace("-0.3\tthe cat", "-0.3\tcat the"), "de.arpa")
    docs = pl.DataFrame({"id": ["en", "de", "fr"], "text": ["cat the"] * 3, "lang": ["en", "deu", "fr"]})
    measured = KenLMPerplexity(models={"en": arpa, "de": german}).apply(docs).measures["perplexity"].to_list()
    assert measured[0] == pytest.approx(10 ** (2.6 / 3), rel=1e-6)
    # "cat the" under the German model: -1.1, P(the|cat) -0.3, bo(the) + P(</s>) -0.9
    assert measured[1] == pytest.approx(10 ** (2.3 / 3), rel=1e-6)
    assert measured[2] is None
    everyone = KenLMPerplexity(models={"de": german}, model=arpa).apply(docs).measures["perplexity"].to_list()
    assert everyone[2] == pytest.approx(10 ** (2.6 / 3), rel=1e-6)


def test_a_threshold_removes_above_it_per_language(arpa):
    docs = pl.DataFrame({"id": ["a", "b", "c"], "text": ["the cat", "cat the", "dog"], "lang": ["en", "en", "en"]})
    settings = {
        "filters": ["perplexity"],
        "params": {"perplexity": {"models": {"en": str(arpa)}, "max_perplexity": 7.0}},
    }
    kept, removed = filter_documents(docs, settings)
    assert kept["id"].to_list() == ["a"]
    assert removed["rule"].to_list() == ["perplexity.max"] * 2
    assert removed["value"].to_list() == pytest.approx([10 ** (2.6 / 3), DOG], rel=1e-6)
    assert removed["threshold"].to_list() == [7.0, 7.0]
    settings["by_lang"] = {"en": {"params": {"perplexity": {"max_perplexity": 8.0}}}}  # English's own
    kept, removed = filter_documents(docs, settings)
    assert kept["id"].to_list() == ["a", "b"] and removed["id"].to_list() == ["c"]


def test_buckets_cut_at_the_users_cutoffs_or_at_a_pools_percentiles(arpa, tmp_path):
    docs = pl.DataFrame(
        {"id": ["a", "b", "c", "d"], "text": ["the cat", "cat the", "dog", "dog"], "lang": ["en", "en", "en", "fr"]}
    )
    params = {"models": {"en": str(arpa)}, "cutoffs": {"en": [2.0, 10.0]}, "max_bucket": "middle"}
    kept, removed = filter_documents(docs, {"filters": ["perplexity"], "params": {"perplexity": params}})
    buckets = KenLMPerplexity(**params).apply(docs).measures["bucket"].to_list()
    assert buckets == [0.0, 1.0, 2.0, None]  # 1.58 head, 7.4 middle, 31.6 tail; fr has no model
    assert removed["id"].to_list() == ["c"] and removed["rule"].to_list() == ["perplexity.bucket"]
    assert removed["value"].to_list() == [2.0] and removed["threshold"].to_list() == [1.0]

    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(["the", "cat", "dog"], rng.integers(1, 6))) for _ in range(30)]
    pool = write_jsonl(tmp_path / "pool.jsonl", [{"text": t, "lang": "en"} for t in texts])
    built = KenLMPerplexity(models={"en": arpa}, pool=pool, max_bucket="head")
    model = kenlm.Model(str(arpa))
    expected = [10 ** (-model.score(t) / (len(t.split()) + 1)) for t in texts]
    head, tail = built.cutoffs["en"]
    assert head == pytest.approx(np.percentile(expected, 30), rel=1e-6)
    assert tail == pytest.approx(np.percentile(expected, 60), rel=1e-6)


def _run_config(tmp_path: Path, corpus: Path, run: str = "run", **params):
    off = {"enabled": False}
    return source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(corpus)]}],
        lang=off,
        filter={"filters": ["perplexity"], "params": {"perplexity": params}},
        dedup=off,
        lines=off,
        tokenize=off,
        mix=off,
    ).model_copy(update={"run_dir": tmp_path / run})


def test_a_bad_model_or_setting_is_one_line_before_any_work(arpa, tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "the cat"}])
    cases = [
        ({"models": {"en": str(tmp_path / "missing.arpa")}}, "perplexity.models.en: ", "missing.arpa is not a file"),
        ({"model": str(corpus)}, "a.jsonl is not a KenLM model", "(an ARPA file or KenLM's binary format)"),
        ({"model": str(arpa), "max_bucket": "tail"}, "max_bucket needs cut-offs", "cutoffs = { en = [head, tail] }"),
        ({"model": str(arpa), "cutoffs": {"en": [10.0, 2.0]}}, "cutoffs.en: give two perplexities", "head then tail"),
    ]
    for params, *parts in cases:
        with pytest.raises(ConfigError) as error:
            _run_config(tmp_path, corpus, **params)
        assert "\n" not in str(error.value) and str(error.value).startswith("filter.params.perplexity: ")
        for part in parts:
            assert part in str(error.value), params
    monkeypatch.setattr(perplexity.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"needs the kenlm package: pip install 'curate\[kenlm\]'"):
        _run_config(tmp_path, corpus, model=str(arpa))


def test_a_changed_threshold_decides_again_from_the_stored_perplexities(arpa, tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in ["the cat", "cat the", "dog", "The Cat"]])
    model = write_arpa(tmp_path / "models")
    first = curate_in_process(_run_config(tmp_path, corpus, model=str(model), max_perplexity=7.0))
    assert first["filter"]["docs_out"] == 2
    changed = _run_config(tmp_path, corpus, model=str(model), max_perplexity=8.0)
    assert [str(p) for p in plan_run(changed).stages][1].startswith("filter: re-decides from its stored measurements")

    def loaded(*args, **kwargs):
        raise AssertionError("a KenLM model was loaded again")

    monkeypatch.setattr(perplexity, "load_kenlm_model", loaded)
    monkeypatch.setattr(perplexity, "document_perplexity", loaded)
    stats = curate_in_process(changed)
    monkeypatch.undo()
    assert stats["filter"]["docs_out"] == 3  # "cat the" (7.4) is kept at 8
    fresh = curate_in_process(_run_config(tmp_path, corpus, "fresh", model=str(model), max_perplexity=8.0))
    assert json.dumps(stats["filter"]["removed"]) == json.dumps(fresh["filter"]["removed"])

    write_arpa(tmp_path / "models", ARPA.replace("-0.1\tcat </s>", "-0.2\tcat </s>"))  # another model, same path
    assert [str(p) for p in plan_run(changed).stages][1] == (
        "filter: reruns (the contents of filter.params.perplexity.model changed)"
    )
