"""Reruns with a changed config, by the stages' library calls (no Prefect): the stages the change
does not reach keep their files, the others are redone, and the run ends as a fresh run of the new
config would; only files this project wrote are removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.stages.rerun import config_changes, plan_run, readers, stage_identities
from tests.helpers import curate_in_process, near_copies_corpus, source_config, stage_outputs


@pytest.fixture
def corpus(tmp_path) -> Path:
    return near_copies_corpus(tmp_path / "in")


def config(tmp_path, corpus, run="run", **settings):
    mix = {"validation_fraction": 0.1} if "tokenize" not in settings else {"enabled": False}
    settings = {"tokenize": {"vocab_size": 300}, "mix": mix, **settings}
    made = source_config(tmp_path, [{"name": "web", "reader": "jsonl", "paths": [str(corpus)]}], **settings)
    return made.model_copy(update={"run_dir": tmp_path / run})


def inodes(run_dir: Path, stage: str) -> dict[str, tuple[int, int]]:
    root = RunLayout(run_dir).stage(stage).root
    return {
        str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and p.name != "stats.json"  # a kept stage rewrites its stats (same bytes)
    }


def test_changed_keys_are_dotted_paths_with_the_stages_that_read_them():
    old = {"run_dir": "a", "dedup": {"threshold": 0.8}, "sources": [{"text_field": "text"}], "seed": 0}
    new = {"run_dir": "b", "dedup": {"threshold": 0.9}, "sources": [{"text_field": "body"}], "seed": 0}
    assert [str(c) for c in config_changes(old, new)] == [
        "dedup.threshold: 0.8 -> 0.9",
        'sources[0].text_field: "text" -> "body"',
    ]
    assert readers("dedup.threshold") == ["dedup"]
    assert readers("dedup.ngram") == ["dedup", "mix"]  # mix measures near copies with dedup's shingles
    assert readers("seed") == ["tokenize", "mix"]
    assert readers("dedup") == ["dedup", "mix"]


def test_a_stage_identity_changes_with_what_it_reads_and_with_every_stage_before_it(tmp_path, corpus):
    before = stage_identities(config(tmp_path, corpus))
    after = stage_identities(config(tmp_path, corpus, filter={"params": {"gopher_quality": {"min_words": 10}}}))
    assert [s for s in before if before[s] == after[s]] == ["source", "lang"]
    elsewhere = stage_identities(config(tmp_path, corpus, run="elsewhere"))
    assert elsewhere == before  # where the run is is no part of what it makes


def test_a_changed_dedup_threshold_reruns_dedup_and_after_to_the_bytes_of_a_fresh_run(tmp_path, corpus):
    first = curate_in_process(config(tmp_path, corpus))
    changed = config(tmp_path, corpus, dedup={"threshold": 0.95})
    plan = plan_run(changed)
    assert plan.lines()[0] == "changed: dedup.threshold: 0.8 -> 0.95 (read by dedup)"
    assert {p.stage: p.action for p in plan.stages} == {
        "source": "kept",
        "lang": "kept",
        "filter": "kept",
        "dedup": "reruns",
        "lines": "reruns",
        "tokenize": "reruns",
        "mix": "reruns",
    }
    kept = {stage: inodes(changed.run_dir, stage) for stage in ("source", "lang", "filter")}
    redone = inodes(changed.run_dir, "dedup")
    again = curate_in_process(changed)

    assert again["dedup"]["docs_out"] > first["dedup"]["docs_out"]  # the near copies stay at 0.95
    assert {stage: inodes(changed.run_dir, stage) for stage in kept} == kept
    assert not set(inodes(changed.run_dir, "dedup").values()) & set(redone.values())
    fresh = config(tmp_path, corpus, run="fresh", dedup={"threshold": 0.95})
    assert curate_in_process(fresh) == json.loads(json.dumps(again).replace("/run/", "/fresh/"))
    assert stage_outputs(changed.run_dir) == stage_outputs(fresh.run_dir)
    assert [str(p) for p in plan_run(changed).stages][0] == "source: kept (same config)"
    assert {p.action for p in plan_run(changed).stages} == {"kept"}


def _no_tokens(**settings) -> dict:
    return {"dedup": {"enabled": False}, "tokenize": {"enabled": False}, **settings}


def test_a_changed_threshold_decides_again_from_the_stored_measurements_to_the_bytes_of_a_fresh_run(
    tmp_path, corpus, monkeypatch
):
    first = curate_in_process(config(tmp_path, corpus, **_no_tokens()))
    thresholds = {"gopher_quality": {"max_mean_word_length": 3.0}, "c4_quality": {"min_sentences": 1}}
    changed = config(tmp_path, corpus, **_no_tokens(filter={"params": thresholds}))
    assert [str(p) for p in plan_run(changed).stages] == [
        "source: kept (same config)",
        "lang: kept (same config)",
        "filter: re-decides from its stored measurements (filter.params.c4_quality: null -> "
        '{"min_sentences": 1}, filter.params.gopher_quality: null -> {"max_mean_word_length": 3.0})',
        "lines: reruns (its input changes: filter re-decides)",
    ]
    kept = {stage: inodes(changed.run_dir, stage) for stage in ("source", "lang")}
    filtered = inodes(changed.run_dir, "filter")
    measurements = {k: v for k, v in filtered.items() if k.startswith("attributes/")}
    assert measurements

    def measured(*args, **kwargs):
        raise AssertionError("the filters measured again")

    monkeypatch.setattr("pipeline.stages.steps.measure", measured)
    stats = curate_in_process(changed)
    monkeypatch.undo()

    assert {stage: inodes(changed.run_dir, stage) for stage in kept} == kept
    now = inodes(changed.run_dir, "filter")
    assert {k: v for k, v in now.items() if k.startswith("attributes/")} == measurements  # not rewritten
    assert not set(v for k, v in now.items() if k.startswith("docs/")) & set(filtered.values())
    assert stats["filter"]["docs_out"] != first["filter"]["docs_out"]
    fresh = config(tmp_path, corpus, run="fresh", **_no_tokens(filter={"params": thresholds}))
    assert curate_in_process(fresh) == json.loads(json.dumps(stats).replace("/run/", "/fresh/"))
    assert stage_outputs(changed.run_dir) == stage_outputs(fresh.run_dir)
    # and back: the first config's thresholds decide again from the same measurements
    back = curate_in_process(config(tmp_path, corpus, **_no_tokens()))
    assert back == first
    assert {k: v for k, v in inodes(changed.run_dir, "filter").items() if k.startswith("attributes/")} == measurements


def test_a_changed_parameter_that_is_not_a_threshold_measures_again(tmp_path, corpus):
    curate_in_process(config(tmp_path, corpus, **_no_tokens()))
    marks = {"c4_quality": {"end_marks": [".", "?", "!", '"', ":"]}}
    changed = config(tmp_path, corpus, **_no_tokens(filter={"params": marks}))
    assert [str(p) for p in plan_run(changed).stages][2:] == [
        'filter: reruns (filter.params.c4_quality: null -> {"end_marks": [".", "?", "!", "\\"", ":"]})',
        "lines: reruns (its input changes: filter reruns)",
    ]
    kept = {stage: inodes(changed.run_dir, stage) for stage in ("source", "lang")}
    filtered = inodes(changed.run_dir, "filter")
    stats = curate_in_process(changed)
    assert {stage: inodes(changed.run_dir, stage) for stage in kept} == kept
    assert not set(inodes(changed.run_dir, "filter").values()) & set(filtered.values())
    fresh = config(tmp_path, corpus, run="fresh", **_no_tokens(filter={"params": marks}))
    assert curate_in_process(fresh) == json.loads(json.dumps(stats).replace("/run/", "/fresh/"))
    assert stage_outputs(changed.run_dir) == stage_outputs(fresh.run_dir)


def test_a_rerun_removes_only_what_the_project_wrote_and_drops_disabled_stages(tmp_path, corpus):
    curate_in_process(config(tmp_path, corpus, tokenize={"enabled": False}))
    run = tmp_path / "run"
    notes = run / "dedup" / "my-notes.txt"
    notes.write_text("a person's file")
    changed = config(tmp_path, corpus, tokenize={"enabled": False}, dedup={"threshold": 0.95}, lines={"enabled": False})
    assert [str(p) for p in plan_run(changed).stages][-1] == "lines: removed (no longer enabled)"
    curate_in_process(changed)
    assert notes.read_text() == "a person's file"
    assert not (run / "lines").exists()
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["stages"]) == set(manifest["made"]) == {"source", "lang", "filter", "dedup"}
    assert "my-notes.txt" in manifest["made"]["dedup"]["foreign"]
    assert "my-notes.txt" not in manifest["made"]["dedup"]["files"]
    fresh = config(tmp_path, corpus, run="fresh", tokenize={"enabled": False}, dedup={"threshold": 0.95})
    curate_in_process(fresh.model_copy(update={"lines": changed.lines}))
    notes.unlink()
    assert stage_outputs(run) == stage_outputs(tmp_path / "fresh")


def test_a_run_made_before_reruns_were_recorded_is_refused_naming_the_changed_key(tmp_path, corpus):
    curate_in_process(config(tmp_path, corpus, dedup={"enabled": False}, tokenize={"enabled": False}))
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["made"]  # as a run of an earlier version wrote it
    manifest_path.write_text(json.dumps(manifest))
    changed = config(tmp_path, corpus, dedup={"enabled": False}, tokenize={"enabled": False}, lang={"min_score": 0.5})
    with pytest.raises(ConfigError, match=r"another config \(lang.min_score: 0.0 -> 0.5 \(read by lang\)\)"):
        plan_run(changed)


def test_a_stage_enabled_on_a_rerun_runs_and_the_stages_after_it_rerun(tmp_path, corpus):
    off = {"enabled": False}
    curate_in_process(config(tmp_path, corpus, filter=off, tokenize=off))
    changed = config(tmp_path, corpus, tokenize=off)
    assert plan_run(changed).lines() == [
        "changed: filter.enabled: false -> true (read by filter)",
        "source: kept (same config)",
        "lang: kept (same config)",
        "filter: runs (not run here before)",
        "dedup: reruns (its input changes: filter runs)",
        "lines: reruns (its input changes: filter runs)",
    ]
    curate_in_process(changed)
    fresh = config(tmp_path, corpus, run="fresh", tokenize=off)
    curate_in_process(fresh)
    assert stage_outputs(tmp_path / "run") == stage_outputs(tmp_path / "fresh")


def test_a_stage_killed_before_it_finished_resumes_or_is_redone_whole(tmp_path, corpus, monkeypatch):
    import pipeline.stages.dedup as dedup

    off = {"enabled": False}
    real_finish = dedup.finish_stage

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(dedup, "finish_stage", killed)
    with pytest.raises(KeyboardInterrupt):
        curate_in_process(config(tmp_path, corpus, tokenize=off, lines=off))
    monkeypatch.setattr(dedup, "finish_stage", real_finish)
    assert any((tmp_path / "run" / "dedup" / "docs").iterdir())  # its units wrote their shards
    same = config(tmp_path, corpus, tokenize=off, lines=off)
    assert [str(p) for p in plan_run(same).stages][-1] == "dedup: resumes (same config; it had not finished)"

    changed = config(tmp_path, corpus, tokenize=off, lines=off, dedup={"threshold": 0.95})
    assert [p.action for p in plan_run(changed).stages] == ["kept", "kept", "kept", "reruns"]
    curate_in_process(changed)
    curate_in_process(config(tmp_path, corpus, run="fresh", tokenize=off, lines=off, dedup={"threshold": 0.95}))
    assert stage_outputs(tmp_path / "run") == stage_outputs(tmp_path / "fresh")


def test_files_put_in_a_stage_folder_after_the_stage_was_killed_stay(tmp_path, corpus, monkeypatch):
    import pipeline.stages.dedup as dedup

    off = {"enabled": False}
    monkeypatch.setattr(dedup, "finish_stage", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt("killed")))
    with pytest.raises(KeyboardInterrupt):
        curate_in_process(config(tmp_path, corpus, tokenize=off, lines=off))
    monkeypatch.undo()
    run = tmp_path / "run"
    mine = {run / "dedup" / "my-notes.txt": b"a person's file", run / "dedup" / "notes" / "mine.txt": b"more"}
    for path, data in mine.items():  # put there after the kill, before the next run
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)

    curate_in_process(config(tmp_path, corpus, tokenize=off, lines=off))  # resumes and finishes
    assert all(path.read_bytes() == data for path, data in mine.items())
    files = json.loads((run / "manifest.json").read_text())["made"]["dedup"]["files"]
    assert "my-notes.txt" not in files and "notes/mine.txt" not in files

    monkeypatch.setattr(dedup, "finish_stage", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt("killed")))
    with pytest.raises(KeyboardInterrupt):  # killed again, on a rerun with another threshold
        curate_in_process(config(tmp_path, corpus, tokenize=off, lines=off, dedup={"threshold": 0.9}))
    monkeypatch.undo()
    curate_in_process(config(tmp_path, corpus, tokenize=off, lines=off, dedup={"threshold": 0.95}))
    assert all(path.read_bytes() == data for path, data in mine.items())


def test_a_mix_rerun_keeps_a_copy_of_a_mixture_made_beside_it(tmp_path, corpus):
    import shutil

    curate_in_process(config(tmp_path, corpus))
    mix = tmp_path / "run" / "mix"
    (name,) = json.loads((mix / "stats.json").read_text())["mixtures"]
    shutil.copytree(mix / name, mix / f"{name}-backup")
    copy = {p.relative_to(mix): p.read_bytes() for p in (mix / f"{name}-backup").rglob("*") if p.is_file()}
    (mix / "intermediate" / "my-notes.txt").write_text("a person's file")

    changed = config(tmp_path, corpus, mix={"validation_fraction": 0.2})
    assert [str(p) for p in plan_run(changed).stages][-1].startswith("mix: reruns")
    curate_in_process(changed)
    assert {p.relative_to(mix): p.read_bytes() for p in (mix / f"{name}-backup").rglob("*") if p.is_file()} == copy
    assert (mix / "intermediate" / "my-notes.txt").read_text() == "a person's file"
    assert (mix / name / "manifest.json").read_bytes() != (mix / f"{name}-backup" / "manifest.json").read_bytes()

    from pipeline.formats.mixture import export_mixture

    with pytest.raises(ValueError, match=r"run'?, which the export reads; export to a folder outside it$"):
        export_mixture(mix / name, tmp_path / "run" / "exported")  # an empty folder, but inside the run
    assert not (tmp_path / "run" / "exported").exists()


def test_a_file_named_like_a_stage_output_that_the_stage_did_not_write_stays(tmp_path, corpus):
    off = {"enabled": False}
    curate_in_process(config(tmp_path, corpus, tokenize=off))
    mine = tmp_path / "run" / "lang" / "quarantine" / "mine.parquet"
    mine.write_bytes(b"a person's file")
    curate_in_process(config(tmp_path, corpus, tokenize=off))  # every stage kept: each checks its outputs
    assert mine.read_bytes() == b"a person's file"


def test_a_model_replaced_at_the_same_path_reruns_the_stage_that_loads_it(tmp_path, corpus):
    from pipeline.lang.model import lid_model_path

    model = tmp_path / "models" / "lid.ftz"
    model.parent.mkdir()
    model.write_bytes(lid_model_path().read_bytes())
    settings = _no_tokens(lang={"model": str(model)})
    curate_in_process(config(tmp_path, corpus, **settings))
    model.write_bytes(model.read_bytes())  # the same bytes, written again: nothing to redo
    assert {p.action for p in plan_run(config(tmp_path, corpus, **settings)).stages} == {"kept"}
    model.write_bytes(model.read_bytes() + b"\0")  # another model at the same path
    assert [str(p) for p in plan_run(config(tmp_path, corpus, **settings)).stages] == [
        "source: kept (same config)",
        "lang: reruns (the contents of lang.model changed)",
        "filter: reruns (its input changes: lang reruns)",
        "lines: reruns (its input changes: lang reruns)",
    ]


def test_without_stored_measurements_a_changed_threshold_measures_again(tmp_path, corpus):
    curate_in_process(config(tmp_path, corpus, **_no_tokens(filter={"store_measures": False})))
    assert not (tmp_path / "run" / "filter" / "attributes").exists()
    changed = _no_tokens(filter={"store_measures": False, "params": {"c4_quality": {"min_sentences": 1}}})
    assert [str(p) for p in plan_run(config(tmp_path, corpus, **changed)).stages][2] == (
        'filter: reruns (filter.params.c4_quality: null -> {"min_sentences": 1})'
    )
    stats = curate_in_process(config(tmp_path, corpus, **changed))
    fresh = curate_in_process(config(tmp_path, corpus, run="fresh", **changed))
    assert stats == json.loads(json.dumps(fresh).replace("/fresh/", "/run/"))


def _rewrite_measurements(run_dir: Path, change, checksum: bool) -> Path:
    """Change the first stored measurements file as a person with pyarrow would (its metadata
    kept); with ``checksum``, write the checksum of the new bytes beside it (as this project would)."""
    import hashlib

    import pyarrow.parquet as pq

    path = sorted((run_dir / "filter" / "attributes").glob("*.parquet"))[0]
    table = change(pq.read_table(path))
    pq.write_table(table, path)
    if checksum:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n")
    return path


@pytest.mark.parametrize(
    ("change", "checksum", "said"),
    [
        # tampered values: every sentence count 0, which would remove every document at any threshold
        (
            lambda t: t.set_column(
                t.schema.get_field_index("measure:c4_quality.sentence_count"),
                "measure:c4_quality.sentence_count",
                __import__("pyarrow").array([0.0] * t.num_rows),
            ),
            False,
            "do not match their checksum",
        ),
        # a file of an older version: a measure the filters decide on is missing
        (
            lambda t: t.drop_columns(["measure:c4_quality.sentence_count"]),
            True,
            "lack measure:c4_quality.sentence_count",
        ),
        (lambda t: t, "remove", "have no checksum"),
        # rewritten by a tool that keeps no schema metadata (polars): the record of settings is lost
        (lambda t: t.replace_schema_metadata(None), False, "do not match their checksum"),
    ],
    ids=["tampered", "missing-column", "no-checksum", "metadata-lost"],
)
def test_a_re_decide_measures_again_from_stored_measurements_it_cannot_trust(
    tmp_path, corpus, caplog, change, checksum, said
):
    curate_in_process(config(tmp_path, corpus, **_no_tokens()))
    path = _rewrite_measurements(tmp_path / "run", change, checksum is True)
    if checksum == "remove":
        path.with_name(path.name + ".sha256").unlink()
    changed = _no_tokens(filter={"params": {"c4_quality": {"min_sentences": 2}}})
    assert plan_run(config(tmp_path, corpus, **changed)).action("filter") == "redecides"
    with caplog.at_level("WARNING"):
        stats = curate_in_process(config(tmp_path, corpus, **changed))
    assert f"the stored measurements {path.name} {said}" in caplog.text
    assert "measuring its documents again" in caplog.text
    # in the run log only: the CLI prints the stage's warnings as `warning:` lines (report.console)
    assert [r.terminal for r in caplog.records if "stored measurements" in r.getMessage()] == [False]
    (warning,) = stats["filter"].pop("warnings")
    assert warning.startswith(f"filter: the stored measurements {path.name} {said}")
    fresh = curate_in_process(config(tmp_path, corpus, run="fresh", **changed))
    assert stats == json.loads(json.dumps(fresh).replace("/fresh/", "/run/"))
    assert stage_outputs(tmp_path / "run") == stage_outputs(tmp_path / "fresh")
    # measured again and stored with its checksum: the next re-decide trusts it without a word
    caplog.clear()
    with caplog.at_level("WARNING"):
        again = curate_in_process(
            config(tmp_path, corpus, **_no_tokens(filter={"params": {"c4_quality": {"min_sentences": 1}}}))
        )
    assert "stored measurements" not in caplog.text
    assert "warnings" not in again["filter"]


def test_a_stale_measurements_checksum_goes_with_its_file_and_a_kept_ones_stays(tmp_path):
    from pipeline.formats.documents import StageDir
    from pipeline.io.writer import write_text
    from pipeline.stages.shard import remove_unlisted

    stage = StageDir(tmp_path / "filter").make()
    folder = stage.root / "attributes"
    folder.mkdir()
    for name in ("kept.parquet", "kept.parquet.sha256", "gone.parquet", "gone.parquet.sha256"):
        write_text(name, folder / name)  # as the stage writes them: recorded
    (folder / "notes.txt").write_text("a person's file")
    part = {"unit": "kept", "shards": [], "attributes": "kept.parquet"}
    removed = remove_unlisted(stage, [part])
    assert sorted(p.name for p in removed) == ["gone.parquet", "gone.parquet.sha256"]
    assert sorted(p.name for p in folder.iterdir()) == ["kept.parquet", "kept.parquet.sha256", "notes.txt"]
