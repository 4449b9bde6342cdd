"""A run directory on an fsspec file system: the whole curation run (every stage, the mixtures and
the report) on ``memory://`` gives the bytes of the same run in a local folder; the writers stay
atomic without a rename; the storage helpers read local and remote files alike; and the trainer
refuses a remote mixture in one line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from upath import UPath

from flows.curate import curate_flow
from pipeline.config import parse_config
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import RunLayout
from pipeline.formats.manifest import LOCK_NAME
from pipeline.formats.mixture import export_mixture
from pipeline.io.storage import (
    LocationError,
    arrow_filesystem,
    as_path,
    is_local,
    location,
    open_arrow_file,
    output_location,
    parquet_file,
    read_parquet,
    read_table,
    scan_parquet,
)
from pipeline.io.writer import (
    TMP_MARK,
    atomic_sink,
    parquet_stream,
    read_json,
    remove_temporaries,
    write_json,
    write_parquet,
)
from pipeline.stages.registry import DOCUMENT_STAGES
from pipeline.stages.shard import check_stage_outputs
from report.build import build_report
from report.inspect import inspect_document
from tests.report.test_report import write_corpus
from trainer.config import parse_train_config
from trainer.data import MixtureError, open_mixture


def _config(root: Path, run_dir: str):
    """Every stage through tokenize, and a [mix] section with two mixtures."""
    return parse_config(
        {
            "run_dir": run_dir,
            "sources": [
                {
                    "name": "news",
                    "reader": "jsonl",
                    "paths": [str(root / "in" / "news")],
                    "id_field": "id",
                    "url_field": "url",
                },
                {"name": "web", "reader": "jsonl", "paths": [str(root / "in" / "web")]},
            ],
            "lang": {"min_score": 0.5},
            "dedup": {"partitions": 2},
            "lines": {"max_docs": 5, "partitions": 2},
            "tokenize": {"vocab_size": 400},
            "mix": {
                "validation_fraction": 0.2,
                "validation_max_docs": 100,
                "mixtures": [{"name": "main"}, {"name": "flat", "temperature": 3.0, "max_epochs": 2.0}],
            },
        }
    )


def _files(root) -> dict[str, object]:
    """Every file under ``root`` by its path relative to ``root``, but the run lock (a local run
    holds one, naming its process; a run on a remote file system is not locked)."""
    prefix = len(str(root).rstrip("/")) + 1
    return {str(path)[prefix:]: path for path in root.rglob("*") if path.is_file() and path.name != LOCK_NAME}


def _without_run_dir(value, run_dir):
    """A JSON value with the run directory's own path, where a field records it, made ``<run>``."""
    run_dir = str(run_dir)
    if isinstance(value, dict):
        return {key: _without_run_dir(item, run_dir) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_run_dir(item, run_dir) for item in value]
    if isinstance(value, str) and value.startswith(run_dir):
        return "<run>" + value[len(run_dir) :]
    return value


# ---- the whole run ---------------------------------------------------------------------------


@pytest.mark.usefixtures("prefect_server")
def test_a_run_on_a_memory_file_system_writes_the_bytes_of_a_local_run(tmp_path, memory_root):
    write_corpus(tmp_path / "in")
    local = _config(tmp_path, str(tmp_path / "run"))
    remote = _config(tmp_path, f"{memory_root}/run")
    assert remote.run_dir == f"{memory_root}/run"  # the URL survives validation, "//" and all

    local_stats = curate_flow(local)
    remote_stats = curate_flow(remote)
    assert set(remote_stats) == {"source", "lang", "filter", "dedup", "lines", "tokenize", "mix"}
    assert _without_run_dir(remote_stats, remote.run_dir) == _without_run_dir(local_stats, local.run_dir)
    assert remote_stats["dedup"]["removed"] and remote_stats["mix"]["train_documents"]
    build_report(local.run_dir)
    build_report(remote.run_dir)

    local_files = _files(Path(local.run_dir))
    remote_files = _files(UPath(remote.run_dir))
    assert sorted(remote_files) == sorted(local_files)
    recording_the_run_dir = []
    for name, path in local_files.items():
        here, there = path.read_bytes(), remote_files[name].read_bytes()
        if here == there:
            continue
        # Only JSON that records where the run directory is may differ, and only there.
        assert name.endswith(".json"), name
        assert _without_run_dir(json.loads(there), remote.run_dir) == _without_run_dir(
            json.loads(here), local.run_dir
        ), name
        recording_the_run_dir.append(name)
    assert "manifest.json" in recording_the_run_dir and "mix/stats.json" in recording_the_run_dir
    assert not any(name.endswith((".parquet", ".arrow", ".html")) for name in recording_the_run_dir)

    layout = RunLayout(remote.run_dir)
    assert isinstance(layout.root, UPath) and str(layout.stage("mix").root) == f"{remote.run_dir}/mix"
    for stage in DOCUMENT_STAGES:  # the ledgers hold against the files on the memory file system
        parts = [read_json(path) for path in sorted(layout.stage(stage).parts.glob("*.json"))]
        ledger = check_stage_outputs(stage, layout.stage(stage), parts)
        assert ledger.to_dict() == {k: remote_stats[stage][k] for k in ledger.to_dict()}
    assert inspect_document(remote.run_dir, "news/n0-copy2")["removed_by"]["rule"] == "dedup.exact_duplicate"

    # A remote mixture exports as the local one does.
    exported = {}
    for name, run in (("local", local), ("remote", remote)):
        export_mixture(f"{run.run_dir}/mix/main", tmp_path / "export" / name)
        exported[name] = {f: (tmp_path / "export" / name / f).read_bytes() for f in ("train.bin", "val.bin")}
    assert exported["remote"] == exported["local"]

    assert curate_flow(remote) == remote_stats  # a second run resumes every unit from the memory files
    assert sorted(_files(UPath(remote.run_dir))) == sorted(local_files)


# ---- writers ---------------------------------------------------------------------------------


def test_a_failed_write_leaves_nothing_under_the_final_name(memory_root):
    folder = as_path(f"{memory_root}/out")
    table = pa.table({"id": ["a", "b"], "n": [1, 2]})
    with pytest.raises(RuntimeError):
        with atomic_sink(folder / "raw.bin") as sink:
            sink.write(b"half a file")
            raise RuntimeError("the writer failed")
    with pytest.raises(RuntimeError):
        with parquet_stream(folder / "stream.parquet", table.schema) as out:
            out.write_table(table)
            raise RuntimeError("the writer failed")
    assert not (folder / "raw.bin").exists() and not (folder / "stream.parquet").exists()
    assert not folder.exists() or not list(folder.rglob("*"))

    write_parquet(table, folder / "t.parquet")
    write_json({"b": 1, "a": "é"}, folder / "t.json")
    assert read_table(folder / "t.parquet").equals(table)
    assert (folder / "t.json").read_text(encoding="utf-8") == '{\n  "a": "é",\n  "b": 1\n}\n'


def test_remote_writes_have_the_bytes_of_local_writes(tmp_path, memory_root):
    table = pa.table({"id": [f"d{i}" for i in range(100)], "text": ["some text"] * 100})
    write_parquet(table, tmp_path / "t.parquet")
    write_parquet(table, f"{memory_root}/t.parquet")
    assert as_path(f"{memory_root}/t.parquet").read_bytes() == (tmp_path / "t.parquet").read_bytes()


def test_remove_temporaries_on_a_memory_file_system(memory_root):
    stage = as_path(f"{memory_root}/run/filter")
    (stage / "docs").mkdir(parents=True, exist_ok=True)
    (stage / "docs" / f".a.parquet{TMP_MARK}123").write_bytes(b"left by a killed run")
    (stage / "docs" / "a.parquet").write_bytes(b"kept")
    assert remove_temporaries(stage) == 1
    assert [p.name for p in (stage / "docs").iterdir()] == ["a.parquet"]
    assert remove_temporaries(as_path(f"{memory_root}/missing")) == 0


# ---- storage helpers -------------------------------------------------------------------------


def test_as_path_keeps_local_paths_local_and_urls_remote(tmp_path):
    assert as_path("runs/demo") == Path("runs/demo") and type(as_path("runs/demo")) is type(Path("x"))
    assert not as_path("runs/demo").is_absolute()  # resolved from the current folder, as before
    assert as_path(tmp_path) is tmp_path
    assert as_path(f"file://{tmp_path}/run") == tmp_path / "run"
    remote = as_path("memory://somewhere/run")
    assert isinstance(remote, UPath) and str(remote) == "memory://somewhere/run"
    assert as_path(remote) is remote and str(remote / "docs") == "memory://somewhere/run/docs"
    assert is_local("runs/demo") and is_local(tmp_path) and is_local(f"file://{tmp_path}")
    assert not is_local("memory://x/run") and not is_local("s3://bucket/run") and not is_local(remote)
    assert isinstance(RunLayout("runs/demo").root, Path) and isinstance(RunLayout(remote).stage("lang").docs, UPath)


def test_run_dir_keeps_a_url_as_written(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    sources = [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "a.jsonl")]}]
    assert (
        parse_config({"run_dir": "memory://bucket/runs/demo", "sources": sources}).run_dir
        == "memory://bucket/runs/demo"
    )
    config = parse_config({"run_dir": "runs//demo/", "sources": sources})
    assert config.run_dir == Path("runs/demo") and config.model_dump(mode="json")["run_dir"] == "runs/demo"


def test_a_file_url_of_this_machine_is_local_and_one_of_another_host_is_refused(tmp_path):
    # file://localhost/x is /x (RFC 8089); fsspec read it as the relative path localhost/x.
    assert as_path(f"file://localhost{tmp_path}/run") == tmp_path / "run"
    assert as_path(f"file://LOCALHOST{tmp_path}/a%20b") == tmp_path / "a b"
    assert location(f"file://{tmp_path}/run") == tmp_path / "run"
    for url in ("file://elsewhere/data/run", "file://localhost:8000/data/run"):
        with pytest.raises(LocationError, match="not of this machine; give a local path") as error:
            as_path(url)
        assert "\n" not in str(error.value)
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    sources = [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "a.jsonl")]}]
    assert parse_config({"run_dir": f"file://localhost{tmp_path}/run", "sources": sources}).run_dir == tmp_path / "run"
    with pytest.raises(ConfigError, match="run_dir: file://elsewhere/run: a file URL of the host 'elsewhere'"):
        parse_config({"run_dir": "file://elsewhere/run", "sources": sources})


@pytest.mark.parametrize(
    "run_dir, says",
    [
        ("s3://bucket/run", "the s3:// file system needs the package s3fs, which is not installed: pip install s3fs"),
        ("http://example.com/run", "the http:// file system is read-only; give a local path or the URL of"),
        ("https://example.com/run", "the https:// file system is read-only"),
        ("zip://run::memory://a.zip", "zip:// reads the files in an archive and cannot write them one by one"),
        ("nosuch://bucket/run", "no file system is known for nosuch://; give a local path"),
    ],
)
def test_a_run_dir_no_run_can_write_is_refused_at_config_time(tmp_path, run_dir, says):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    sources = [{"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "a.jsonl")]}]
    if run_dir.startswith("s3://") and importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed here")
    with pytest.raises(ConfigError) as error:
        parse_config({"run_dir": run_dir, "sources": sources})
    message = str(error.value)
    assert message.startswith(f"run_dir: {run_dir}: ") and says in message and "\n" not in message


def test_output_locations_are_checked_before_any_work(tmp_path, memory_root):
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    assert output_location(tmp_path / "new" / "out", folder=True) == tmp_path / "new" / "out"
    assert output_location(str(tmp_path / "folder"), folder=True) == tmp_path / "folder"
    assert output_location(str(tmp_path / "file"), folder=False) == tmp_path / "file"  # replacing it: the caller's call
    refusals = [
        ((tmp_path / "file", True), f"'{tmp_path / 'file'}' is a file, not a folder; give a new or empty folder"),
        ((tmp_path / "folder", False), f"'{tmp_path / 'folder'}' is a folder, not a file; name the file to write"),
        ((tmp_path / "file" / "a" / "b", True), f"'{tmp_path / 'file'}' is a file, so no folder can be made under it"),
        ((tmp_path / "file" / "r.json", False), f"'{tmp_path / 'file'}' is a file, so no file can be made under it"),
        (("http://example.com/r.json", False), "http://example.com/r.json: the http:// file system is read-only"),
    ]
    for (path, folder), says in refusals:
        with pytest.raises(LocationError) as error:
            output_location(path, folder=folder)
        assert str(error.value).startswith(says) and "\n" not in str(error.value)
    remote = output_location(f"{memory_root}/out/r.json", folder=False)  # a URL stays a URL
    assert isinstance(remote, UPath) and str(remote) == f"{memory_root}/out/r.json"
    with pytest.raises(LocationError, match=f"^{memory_root}/out is a URL; the export needs a local folder$"):
        output_location(f"{memory_root}/out", folder=True, local="the export needs a local folder")


def test_readers_give_the_same_data_local_and_remote(tmp_path, memory_root):
    table = pa.table({"id": [f"d{i}" for i in range(50)], "n": list(range(50)), "text": ["t"] * 50})
    local = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    remote = [as_path(f"{memory_root}/a.parquet"), as_path(f"{memory_root}/b.parquet")]
    for path in [*local, *remote]:
        write_parquet(table, path)

    assert parquet_file(remote[0]).metadata.num_rows == 50
    assert parquet_file(remote[0]).schema_arrow == parquet_file(local[0]).schema_arrow
    assert read_table(remote[0], ["id"]).column_names == ["id"]
    assert read_parquet(remote[0]).equals(read_parquet(local[0]))
    assert read_parquet(remote[0], ["n", "id"]).equals(read_parquet(local[0], ["n", "id"]))
    query = [pl.col("n") >= 45]
    scanned = scan_parquet(remote).filter(*query).select("id", "n").collect()
    assert scanned.equals(scan_parquet(local).filter(*query).select("id", "n").collect()) and scanned.height == 10

    filesystem, where = arrow_filesystem(remote[0])
    assert where == remote[0].path and filesystem.get_file_info(where).size == remote[0].stat().st_size
    assert arrow_filesystem(local[0])[1] == str(local[0])

    for path in (tmp_path / "t.arrow", as_path(f"{memory_root}/t.arrow")):
        with atomic_sink(path) as sink:
            with ipc.new_file(str(sink) if isinstance(sink, Path) else sink, table.schema) as writer:
                writer.write_table(table)
        with open_arrow_file(path) as source:
            assert ipc.open_file(source).read_all().equals(table)


# ---- the trainer -----------------------------------------------------------------------------


def test_the_trainer_refuses_a_remote_mixture_in_one_line(memory_root):
    mixture = f"{memory_root}/run/mix/main"
    as_path(mixture).mkdir(parents=True, exist_ok=True)
    for given in (mixture, as_path(mixture)):
        with pytest.raises(MixtureError) as error:
            open_mixture(given)
        message = str(error.value)
        assert "\n" not in message and "local mixture folder" in message and "copy" in message
    # The config refuses a URL before pathlib could turn it into a local name (s3:/...).
    for settings in ({"mixture": "s3://bucket/run/mix/main"}, {"eval_mixtures": {"ref": mixture}}):
        with pytest.raises(ConfigError) as error:
            parse_train_config({"mixture": "runs/x/mix/main", "out_dir": "out", "max_steps": 1, **settings})
        message = str(error.value)
        assert "\n" not in message and "is a URL; the trainer memory-maps a local mixture folder" in message
    with pytest.raises(ValueError, match="local folder"):
        export_mixture(mixture, f"{memory_root}/export")
