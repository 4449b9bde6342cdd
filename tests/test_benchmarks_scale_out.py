"""The 1-billion-document plan that ``benchmarks/scale_out.py`` prints from its largest run: each
stage's demo documents per core-second and its core-hours at 1B, scaled by web text's length."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def scale_out():
    spec = importlib.util.spec_from_file_location("scale_out", REPO / "benchmarks" / "scale_out.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_text_bytes_per_doc_is_the_mean_utf8_length_over_every_shard(scale_out, tmp_path):
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["abcd", "é" * 3]}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"id": ["c"], "text": ["xy"]}), tmp_path / "part-1.parquet", row_group_size=1)
    assert scale_out.text_bytes_per_doc(tmp_path) == pytest.approx((4 + 6 + 2) / 3)
    assert scale_out.text_bytes_per_doc(tmp_path / "none") == 0.0


def test_billion_plan_scales_each_stage_by_its_documents_at_1b_and_web_text_length(scale_out):
    workers, web = scale_out.WORKERS, scale_out.WEB_TEXT_BYTES
    run = {
        "stages": {
            "source": {"docs_in": 1_000, "seconds": 2.0, "text_bytes_in": web / 2},
            "dedup": {"docs_in": 500, "seconds": 1.0, "text_bytes_in": web},
            "unknown": {"docs_in": 10, "seconds": 1.0, "text_bytes_in": web},
            "mix": {"docs_in": 0, "seconds": 1.0, "text_bytes_in": web},
        }
    }
    plan = scale_out.billion_plan(run)
    assert set(plan) == {"source", "dedup", "all"}  # no rate without documents, no line for a stage not in the plan
    source_rate = 1_000 / (workers * 2.0)
    assert plan["source"]["docs_per_core_s"] == round(source_rate)
    # twice the text of the demo's documents: twice the core time per document
    assert plan["source"]["core_hours"] == round(scale_out.PLAN_DOCS_M["source"] * 1e6 * 2 / source_rate / 3600)
    dedup_rate = 500 / workers
    assert plan["dedup"]["core_hours"] == round(scale_out.PLAN_DOCS_M["dedup"] * 1e6 / dedup_rate / 3600)
    assert plan["all"]["core_hours"] == plan["source"]["core_hours"] + plan["dedup"]["core_hours"]


def test_marginal_rate_is_what_the_larger_run_added_and_leaves_out_a_fixed_cost(scale_out):
    web = scale_out.WEB_TEXT_BYTES
    # 2 s of fixed cost, then 1,000 documents a second on the run's workers
    small = {"stages": {"tokenize": {"docs_in": 1_000, "seconds": 3.0, "text_bytes_in": web}}}
    large = {"stages": {"tokenize": {"docs_in": 10_000, "seconds": 12.0, "text_bytes_in": web}}}
    plan = scale_out.billion_plan(large, small)["tokenize"]
    workers = scale_out.WORKERS
    assert plan["marginal_docs_per_core_s"] == round(1_000 / workers)
    assert plan["docs_per_core_s"] == round(10_000 / (workers * 12.0)) < plan["marginal_docs_per_core_s"]
    assert plan["marginal_core_hours"] < plan["core_hours"]
    # no marginal figure where the smaller run is not smaller, or the stage took no longer
    assert "marginal_core_hours" not in scale_out.billion_plan(small, large)["tokenize"]
    assert scale_out.billion_plan(large, small)["all"]["marginal_core_hours"] == plan["marginal_core_hours"]
    assert "marginal_core_hours" not in scale_out.billion_plan(small, large)["all"]
