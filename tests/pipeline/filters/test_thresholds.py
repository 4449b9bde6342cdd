"""A filter's ``thresholds`` are the parameters a rerun may change and decide again from the stored
measurements (pipeline.stages.attributes): each must change a rule's threshold and nothing the
filter measures, rewrites, counts or adds."""

from __future__ import annotations

import inspect

import polars as pl
import pytest

from demo.corpus import build_demo_corpus
from pipeline.filters.heuristics import HEURISTIC_FILTERS, GopherRepetition
from pipeline.filters.quality import demo_web_pool
from pipeline.filters.registry import FILTERS, filter_parameters


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> pl.DataFrame:
    path = tmp_path_factory.mktemp("demo")
    build_demo_corpus(path, docs=400, seed=3)
    pool = demo_web_pool(path).head(300)
    extra = ["", "   \n", "# # #\n- a\n- b\n...", "短い文です。二つ目の文です。", "{ lorem ipsum }"]
    frame = pl.concat([pool.select("id", "text"), pl.DataFrame({"id": [f"x{i}" for i in range(5)], "text": extra})])
    return frame.with_columns(source=pl.lit("web"), lang=pl.lit("en"))


def _output(doc_filter, docs: pl.DataFrame) -> tuple:
    out = doc_filter.apply(docs)
    text = None if out.text is None else out.text.to_list()
    counts = {name: series.to_list() for name, series in out.counts.items()}
    columns = {name: series.to_list() for name, series in out.columns.items()}
    return out.measures.to_dict(as_series=False), text, counts, columns


def _other_values(default):
    if isinstance(default, int) and not isinstance(default, bool):
        return [None, default + 3, 0]
    return [None, min(1.0, default * 0.5 + 0.2), 0.0]


def test_every_filter_names_thresholds_among_its_parameters():
    for name, cls in FILTERS.items():
        assert set(cls.thresholds) <= set(filter_parameters(name)), name


@pytest.mark.parametrize(
    ("name", "param"),
    [(name, param) for name, cls in HEURISTIC_FILTERS.items() for param in cls.thresholds],
)
def test_a_threshold_changes_the_rules_and_nothing_measured(pages, name, param):
    cls = HEURISTIC_FILTERS[name]
    default = inspect.signature(cls).parameters[param].default
    reference = _output(cls(), pages)
    for value in _other_values(default):
        changed = cls(**{param: value})
        assert _output(changed, pages) == reference, (param, value)
        assert changed.rules() != cls().rules()


def test_the_config_reference_lists_each_filters_thresholds():
    from pathlib import Path

    docs = (Path(__file__).parents[3] / "docs" / "config.md").read_text()
    rows = {}
    for line in docs.splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] in FILTERS:
            rows[cells[0]] = tuple(c.strip().strip("`") for c in cells[1].split(","))
    listed = {name: (*cls.thresholds, *getattr(cls, "threshold_maps", ())) for name, cls in FILTERS.items()}
    assert rows == {name: params for name, params in listed.items() if params}


@pytest.mark.parametrize("param", list(GopherRepetition.threshold_maps))
def test_a_threshold_by_ngram_size_changes_the_rules_and_nothing_measured(pages, param):
    defaults = GopherRepetition.threshold_maps[param]
    reference = _output(GopherRepetition(), pages)
    for sizes in ({n: None for n in defaults}, {n: 0.05 for n in defaults}, {min(defaults): 1.0}):
        changed = GopherRepetition(**{param: sizes})
        assert _output(changed, pages) == reference, sizes
        assert changed.rules() != GopherRepetition().rules()
