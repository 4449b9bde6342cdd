"""The files a stage loads whose contents its outputs depend on, and their sha256: part of each
stage's identity (pipeline.stages.rerun), so that a model or tokenizer replaced at the same path
redoes the stages that loaded it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.config import RunConfig, filter_path_parameters
from pipeline.dedup.index import DedupIndex
from pipeline.formats.manifest import config_record
from pipeline.io.storage import is_local
from pipeline.lang.model import lid_model_path
from pipeline.stages.attributes import measuring_settings


def named_files(stage: str, config: RunConfig) -> dict[str, list[Path]]:
    """The files a stage loads whose contents its outputs depend on, by the config key that names
    them: the language-ID model (``lang.model``, or the default one it finds), each filter's
    path parameters (the quality model; a folder stands for the files in it), the tokenizer
    (``tokenize.tokenizer``), the dedup index's manifest (``dedup.index``, local) and the exclusion
    lists (``mix.exclude``). A missing file is left out
    (the run stops on it before any work, pipeline.config.check_files)."""
    named: dict[str, list[Path]] = {}
    if stage == "lang":
        try:
            named["lang.model"] = [lid_model_path(config.lang.model)]
        except FileNotFoundError:
            named["lang.model"] = []
    elif stage == "filter":
        stage_paths = _path_values(config.filter.filters, config.filter.params)
        named |= {f"filter.params.{key}": _files(path) for key, path in stage_paths.items()}
        for code in config.filter.languages():  # a language's own model, where it has one
            for key, path in _path_values(*config.filter.for_lang(code)).items():
                if stage_paths.get(key) != path:
                    named[f"filter.by_lang.{code}.params.{key}"] = _files(path)
    elif stage == "tokenize" and config.tokenize.tokenizer is not None:
        named["tokenize.tokenizer"] = [Path(config.tokenize.tokenizer)]
    elif stage == "dedup" and config.dedup.index is not None and is_local(config.dedup.index):
        # The index's manifest names the runs it holds: a run added to it redoes the stage.
        manifest = DedupIndex(config.dedup.index).manifest_path
        named["dedup.index"] = [manifest] if manifest.is_file() else []
    elif stage == "mix" and config.mix.exclude:
        named["mix.exclude"] = [Path(p) for p in config.mix.exclude if Path(p).is_file()]
    return named


def _path_values(filters: list[str], params: dict[str, dict]) -> dict[str, list[Path]]:
    """The paths each of the filters' path parameters gives, by ``<filter>.<key>``
    (``<filter>.<key>.<code>`` for a table of paths by language)."""
    paths = {}
    for name in filters:
        for key in sorted(filter_path_parameters(name)):
            value = params.get(name, {}).get(key)
            if isinstance(value, dict):
                paths |= {f"{name}.{key}.{code}": [Path(each)] for code, each in sorted(value.items())}
            elif isinstance(value, list):
                paths[f"{name}.{key}"] = [Path(each) for each in value]
            elif value is not None:
                paths[f"{name}.{key}"] = [Path(value)]
    return paths


def _files(paths: list[Path]) -> list[Path]:
    """The files path parameters name: each file, or the files of each folder and its subfolders
    (UT1's URL lists are a folder per category)."""
    files = []
    for path in paths:
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [p for p in files if p.is_file()]


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256, for this process


def _content_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        with path.open("rb") as handle:
            _DIGESTS[key] = hashlib.file_digest(handle, "sha256").hexdigest()
    return _DIGESTS[key]


def file_contents(stage: str, config: RunConfig) -> dict[str, list[str]]:
    """The sha256 of each of :func:`named_files`, by key (in the stage's identity, so that a model
    or tokenizer replaced at the same path redoes the stages that loaded it)."""
    return {key: [_content_digest(p) for p in paths] for key, paths in named_files(stage, config).items()}


def measured_with(config: RunConfig, contents: dict[str, list[str]] | None = None) -> dict:
    """What the filter stage's measurements depend on (pipeline.stages.attributes.measuring_settings)
    with the contents of the files its filters load (``contents``: :func:`file_contents`, when
    known already)."""
    contents = file_contents("filter", config) if contents is None else contents
    return {**measuring_settings(config_record(config)), "contents": contents}
