"""`curate train` and `curate generate`: the trainer as a Prefect flow run, from a TOML config."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.trainer_fixtures import shared_mixture, toml_text, train_config_dict

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_curate_train_runs_the_flow_reports_groups_and_generates(tmp_path, tmp_path_factory):
    mixture = shared_mixture(tmp_path_factory)
    config = tmp_path / "train.toml"
    config.write_text(toml_text(train_config_dict(mixture, tmp_path / "out")))
    result = CliRunner().invoke(app, ["train", str(config), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["steps"] == 8
    for group, values in summary["final"]["groups"].items():  # the table shows every group's numbers
        assert any(group in line and f"{values['bpb']:.4f}" in line for line in result.output.splitlines())

    first = CliRunner().invoke(app, ["generate", str(tmp_path / "out"), "--prompt", "The council", "--seed", "1"])
    again = CliRunner().invoke(app, ["generate", str(tmp_path / "out"), "--prompt", "The council", "--seed", "1"])
    assert first.exit_code == 0 and first.output == again.output and first.output.startswith("The council")

    config.write_text(toml_text({**train_config_dict(mixture, tmp_path / "out"), "max_step": 3}))
    result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 2 and "max_step: unknown key; did you mean 'max_steps'?" in result.output
