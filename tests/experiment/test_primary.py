"""The pre-registered primary comparison (``[primary]``): checked with the config."""

from __future__ import annotations

import pytest

from experiment.config import parse_experiment
from pipeline.formats.configfile import ConfigError

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
