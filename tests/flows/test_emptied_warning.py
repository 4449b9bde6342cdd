"""A setting that removes every document of a stage ends the run with a loud warning naming the
rule and the setting, on the CLI (stderr, after everything else) and in the Python API."""

from __future__ import annotations

import pytest

from pipeline.formats.stats import StageStats
from report.emptied import EmptiedStageWarning, emptied_stages, warn_emptied
from tests.helpers import REPO, run_curate, shared_api_env, write_jsonl

ENGLISH = "The river runs past the old stone bridge, and the market opens early every morning."


def test_a_stage_that_kept_nothing_is_named_with_its_rules_and_settings():
    stats = {
        "source": StageStats("source", 670, 670),
        "lang": StageStats("lang", 670, 0, {"lang.not_kept": 670}),
        "filter": StageStats("filter", 0, 0),  # nothing came in
    }
    assert [stage.line() for stage in emptied_stages(stats)] == [
        "the lang stage kept none of the 670 documents that entered it: lang.not_kept removed 670 of 670; "
        "check lang.keep in the config"
    ]
    stats = {"filter": StageStats("filter", 9, 0, {"licence.not_kept": 2, "c4_quality.min_sentences": 7})}
    (stage,) = emptied_stages(stats)
    assert stage.line().endswith(
        "c4_quality.min_sentences removed 7 of 9, licence.not_kept removed 2 of 9; "
        "check [filter.params.c4_quality] and filter.licences in the config"
    )
    with pytest.warns(EmptiedStageWarning, match="the filter stage kept none of the 9 documents"):
        warn_emptied(stats)


@pytest.mark.flow
def test_curate_run_ends_with_a_warning_naming_the_rule_that_removed_everything(tmp_path, prefect_server):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": f"{ENGLISH} Page {i}."} for i in range(6)])
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "{tmp_path / "run"}"\n'
        f'[[sources]]\nname = "web"\nreader = "jsonl"\npaths = ["{tmp_path / "in"}"]\n'
        '[lang]\nkeep = ["de"]\n[tokenize]\nenabled = false\n'
    )
    env = {"PREFECT_HOME": str(tmp_path / "prefect"), **shared_api_env()}
    done = run_curate(["run", "--quiet", str(config)], REPO, env=env)  # REPO: the language-ID model's .cache
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "warning: the lang stage kept none of the 6 documents that entered it: lang.not_kept removed 6 of 6; "
        "check lang.keep in the config"
    )
