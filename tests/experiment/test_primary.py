"""The pre-registered primary comparison (``[primary]``): checked with the config, a family of its
own that Holm's correction covers alone, taken out of the family it was in (no test counted
twice), first in results.json and first on the report."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from experiment.config import parse_experiment
from experiment.results import FAMILIES, _comparisons, _primary, results_json
from experiment.statistics import spread
from pipeline.formats.configfile import ConfigError
from report.console import print_experiment
from report.experiment import _findings, _primary_section
from report.html import esc

PRIMARY = {"variant": "full", "metrics": ["heldout_bpb", "tasks/gold_bpb"]}


def _config(tmp_path, **overrides):
    data = {
        "out_dir": str(tmp_path / "experiment"),
        "demo": True,
        "budget_tokens": 6000,
        "variants": [
            {"name": "raw"},
            {"name": "dedup", "stages": ["dedup"]},
            {"name": "full", "stages": ["lang", "filter", "dedup", "lines"], "quality": True},
        ],
    }
    return parse_experiment({**data, **overrides})


@pytest.mark.parametrize(
    "primary, message",
    [
        ({"variant": "nope", "metrics": ["heldout_bpb"]}, "primary.variant: 'nope' is not a variant; name the"),
        ({"variant": "raw", "metrics": ["heldout_bpb"]}, "primary.variant: 'raw' is the baseline; name the"),
        ({"variant": "full", "metrics": ["heldout"]}, "primary.metrics: 'heldout' is not a measure full is compared"),
        ({"variant": "full", "metrics": []}, "primary.metrics: List should have at least 1 item"),
        ({"variant": "full", "metrics": ["heldout_bpb"] * 2}, "primary.metrics: name each measure once"),
        ({"metrics": ["heldout_bpb"]}, "primary.variant: required key is missing"),
    ],
)
def test_a_bad_primary_is_one_line(tmp_path, primary, message):
    with pytest.raises(ConfigError, match=message) as error:
        _config(tmp_path, primary=primary)
    assert "\n" not in str(error.value)


def test_a_primary_names_only_what_the_experiment_measures(tmp_path):
    config = _config(
        tmp_path, primary={"variant": "full", "metrics": ["task/cloze-news/gold_bpb", "probe_accuracy@all"]}
    )
    assert config.primary.metrics == ["task/cloze-news/gold_bpb", "probe_accuracy@all"]
    # the unknown key's line names the known ones
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, primary={"variant": "full", "metrics": ["heldout_bpb/nope"]})
    assert "known: heldout_bpb; heldout_bpb/<set> (news, dialogues, web, junk); tasks/core; tasks/gold_bpb" in str(
        error.value
    )
    # no tasks scored, no task measure; no transfer runs for full, no transfer measure
    for overrides, metric in (
        ({"choice_tasks": {"enabled": False}}, "tasks/gold_bpb"),
        ({"task": {"variants": ["raw"]}}, "probe_accuracy@10"),
    ):
        with pytest.raises(ConfigError, match=f"primary.metrics: '{metric}' is not a measure"):
            _config(tmp_path, primary={"variant": "full", "metrics": [metric]}, **overrides)


def _seeds(base: list[float], shift: float) -> dict:
    """Three seeds of ``base`` moved by ``shift``, the per-seed differences ``shift - 0.01, shift,
    shift + 0.01`` (standard deviation 0.01): a paired t of ``shift * sqrt(3) / 0.01`` at 2 df."""
    return spread({seed: value + shift + 0.01 * (seed - 1) for seed, value in enumerate(base)})


# Full against raw: held-out p = 0.007 and task gold bits per byte p = 0.014 (t = 11.89 and 8.36
# at 2 df); every other comparison far from significant.
METRICS = {
    "heldout_bpb": {"raw": spread([3.63, 3.61, 3.65]), "dedup": _seeds([3.63, 3.61, 3.65], -0.002),
                    "full": _seeds([3.63, 3.61, 3.65], -0.0686437)},
    "tasks/gold_bpb": {"raw": spread([3.30, 3.28, 3.33]), "dedup": _seeds([3.30, 3.28, 3.33], 0.002),
                       "full": _seeds([3.30, 3.28, 3.33], -0.0482812)},
    "tasks/core": {"raw": spread([0.04, 0.05, 0.03]), "dedup": _seeds([0.04, 0.05, 0.03], 0.003),
                   "full": _seeds([0.04, 0.05, 0.03], -0.001)},
}  # fmt: skip


def _made(config) -> list[dict]:
    metrics = json.loads(json.dumps(METRICS))
    return _comparisons(config, metrics, {"sets": {"news": {"clean": True}}}, None, {}, {}, {}, {})


def _one(made: list[dict], metric: str, a: str) -> dict:
    (found,) = [c for c in made if c["metric"] == metric and c["a"] == a and c["b"] == "raw"]
    return found


def test_the_primary_family_is_corrected_alone(tmp_path):
    """Today's families: the task aggregate misses Holm in a family of 4 (4 x 0.014 = 0.056); named
    as primary beside the held-out headline it passes in a family of 2 (max(2 x 0.007, 0.014))."""
    before = _made(_config(tmp_path))
    gold, heldout = _one(before, "tasks/gold_bpb", "full"), _one(before, "heldout_bpb", "full")
    assert gold["p"] == pytest.approx(0.014, abs=1e-5) and heldout["p"] == pytest.approx(0.007, abs=1e-5)
    assert gold["family"] == "task aggregates" and gold["family_size"] == 4
    assert gold["p_holm"] == pytest.approx(4 * gold["p"]) and gold["p_holm"] > 0.05 and not gold["significant"]
    assert "role" not in gold and _primary(_config(tmp_path), before) is None

    config = _config(tmp_path, primary=PRIMARY)
    made = _made(config)
    assert len(made) == len(before)  # moved, not added
    gold, heldout = _one(made, "tasks/gold_bpb", "full"), _one(made, "heldout_bpb", "full")
    for c, otherwise in ((gold, "task aggregates"), (heldout, "headline")):
        assert (c["family"], c["family_otherwise"], c["role"], c["family_size"]) == ("primary", otherwise, "primary", 2)
    assert heldout["p_holm"] == pytest.approx(2 * heldout["p"])
    assert gold["p_holm"] == pytest.approx(max(2 * heldout["p"], gold["p"])) == pytest.approx(0.014, abs=1e-5)
    assert gold["significant"] and heldout["significant"]
    assert (
        "Holm-adjusted over the 2 primary comparisons named in the config before the run: p = 0.014"
        in (gold["sentence"])
    )
    # every other comparison is secondary, Holm within what is left of its family
    rest = [c for c in made if c["family"] != "primary"]
    assert rest and all(c["role"] == "secondary" for c in rest)
    assert {c["family_size"] for c in rest if c["family"] == "task aggregates"} == {3}
    dedup = _one(made, "heldout_bpb", "dedup")
    assert dedup["family_size"] == 1 and dedup["p_holm"] == pytest.approx(dedup["p"])
    # results.json's entry: both comparisons, with their index among the comparisons
    entry = _primary(config, made)
    assert (entry["variant"], entry["against"], entry["named"]) == ("full", "raw", "in the config before the run")
    assert [c["metric"] for c in entry["comparisons"]] == ["heldout_bpb", "tasks/gold_bpb"]
    assert [made[c["index"]]["p_holm"] for c in entry["comparisons"]] == [c["p_holm"] for c in entry["comparisons"]]
    assert entry["not_measured"] == [] and FAMILIES[0] == "primary"


def test_results_json_lists_the_primary_first_and_the_report_shows_it_first(tmp_path):
    config = _config(tmp_path, primary={**PRIMARY, "metrics": [*PRIMARY["metrics"], "task/cloze-news/gold_bpb"]})
    made = _made(config)
    entry = _primary(config, made)
    assert entry["not_measured"] == ["task/cloze-news/gold_bpb"]  # named, but these runs have no such task
    text = results_json({"alpha": 0.05, "comparisons": made, "primary": entry, "baseline": "raw"})
    assert text.startswith('{\n  "primary": {\n    "against": "raw",')  # first; inside, sorted as ever
    assert list(json.loads(text)) == ["primary", "alpha", "baseline", "comparisons"]
    results = {"primary": entry, "comparisons": made, "families": {"primary": 2, "headline": 1}, "alpha": 0.05,
               "heldout": {"sets": {"news": {"clean": True}}, "clean_sets": ["news"]}}  # fmt: skip
    page = "\n".join([*_primary_section(results), *_findings(results)])
    assert page.index("<section id=primary><h2>Primary comparison (pre-registered)</h2>") < page.index(
        "<h2>Secondary findings</h2>"
    )
    first = page[: page.index("<section id=findings>")]
    gold = _one(made, "tasks/gold_bpb", "full")["sentence"]
    assert f"<li>{esc(gold)}</li>" in first and "Not measured by these runs: task/cloze-news/gold_bpb" in first
    assert "primary 2, headline 1" in page and gold not in page[page.index("<section id=findings>") :]
    # without [primary], the page starts with the findings as before
    assert _primary_section({**results, "primary": None}) == []
    assert "<h2>Findings</h2>" in "".join(_findings({**results, "primary": None}))


def test_the_terminal_summary_says_the_primary_first(tmp_path):
    made = _made(_config(tmp_path, primary=PRIMARY))
    value = {"mean": 3.5, "std": 0.01}
    results = {"seeds": [0, 1, 2], "timing": {"total_s": 60.0}, "heldout": {"sets": {"news": {"clean": True}}},
               "metrics": {"heldout_bpb": {"raw": value, "dedup": value, "full": value}}, "transfer": {},
               "variants": ["raw", "dedup", "full"], "comparisons": made}  # fmt: skip
    buffer = io.StringIO()
    print_experiment(Console(file=buffer, width=2000, color_system=None), results)
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith(("[", "heldout_bpb:", "tasks/"))]
    assert [line.split(" vs ")[0] for line in lines] == [
        "[primary] heldout_bpb: full 3.5614 ± 0.0265",
        "[primary] tasks/gold_bpb: full 3.2551 ± 0.0321",
        "heldout_bpb: dedup 3.6280 ± 0.0265",
    ]
