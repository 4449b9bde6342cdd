"""``curate calibrate`` on a real run: the fragment it writes, applied by the filter stage's own
step, removes from each language's reference what it says it does."""

from __future__ import annotations

import tomllib

import polars as pl
from typer.testing import CliRunner

from flows.cli import app
from pipeline.stages.calibrate import calibrate, checked
from pipeline.stages.run import RunFiles
from pipeline.stages.steps import filter_settings_step


def fired(settings, docs: pl.DataFrame) -> dict[str, int]:
    """Every rule's removals on ``docs``: the demo filters news and web pages only, and the
    calibration measures its reference whatever the scope."""
    counts = filter_settings_step(settings.model_copy(update={"sources": None}))(docs).counts
    return {key.split("|", 1)[1]: n for key, n in counts.items() if key.startswith("fired|")}


def test_calibrate_writes_thresholds_that_remove_what_they_say_from_each_language(demo_run, tmp_path):
    _, _, run, _ = demo_run
    out = tmp_path / "calibrated.toml"
    args = ["calibrate", str(run), "--reference", "dialogues", "--min-docs", "10", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "calibrated" in result.output and "config fragment:" in result.output
    text = out.read_text()
    assert text.startswith("# Filter thresholds per language, written by `curate calibrate`")
    written = tomllib.loads(text)["filter"]["by_lang"]

    files = RunFiles.open(run)
    docs = files.scan_docs("lang").filter(pl.col("source") == "dialogues").collect()
    found = calibrate(docs, files.config.filter, min_docs=10)
    assert found.changes() and set(written) == {c.lang for c in found.changes()}
    settings = checked(files.config.filter, text)
    english = fired(files.config.filter, docs.filter(pl.col("lang") == "en"))
    for lang in written:
        ours = docs.filter(pl.col("lang") == lang)
        before, after = fired(files.config.filter, ours), fired(settings, ours)
        for change in found.changes(lang):
            assert written[lang]["params"][change.filter][change.param] == change.shown
            for share in change.rules:
                assert english.get(share.rule, 0) == share.english_removed
                assert (before.get(share.rule, 0), after.get(share.rule, 0)) == (share.before, share.after)

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2 and "exists; pass --force" in again.output
    printed = CliRunner().invoke(app, ["calibrate", str(run), "--reference", "dialogues", "--min-docs", "10"])
    assert printed.exit_code == 0 and text in printed.output
    unknown = CliRunner().invoke(app, ["calibrate", str(run), "--reference", "nope"])
    assert unknown.exit_code == 2 and "no documents of source 'nope'" in unknown.output
