"""``manifest.json``: what a run was made from (config, package versions, input checksums) and
its counts per stage. It holds no times, so the same config and inputs give the same bytes."""

from __future__ import annotations

import platform
from importlib import metadata

from pipeline.config import ConfigError, RunConfig
from pipeline.io.writer import read_json, write_json
from pipeline.schema import RunLayout

PACKAGES = ("curate", "pyarrow", "polars", "prefect", "pydantic", "orjson", "warcio", "resiliparse",
            "zstandard", "datasketch", "fasttext-numpy2", "tokenizers", "torch")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def config_record(config: RunConfig) -> dict:
    return config.model_dump(mode="json")


def open_run(config: RunConfig) -> dict:
    """Create the run directory's manifest, or check that an existing one is of this config.

    Resuming a run needs the same config: a different one would mix outputs of two configs."""
    layout = RunLayout(config.run_dir)
    if layout.manifest.exists():
        manifest = read_json(layout.manifest)
        if manifest.get("config") != config_record(config):
            raise ConfigError(
                f"run_dir: {str(config.run_dir)!r} holds a run made with another config; "
                "choose a new run_dir, or delete that folder to start over"
            )
        manifest["versions"] = package_versions()
    else:
        layout.root.mkdir(parents=True, exist_ok=True)
        manifest = {"config": config_record(config), "versions": package_versions(), "inputs": [], "stages": {}}
    write_json(manifest, layout.manifest)
    return manifest


def record_stage(config: RunConfig, stage: str, counts: dict, inputs: list[dict] | None = None) -> dict:
    """Add a finished stage's counts (and, for the source stage, the input checksums)."""
    layout = RunLayout(config.run_dir)
    manifest = read_json(layout.manifest)
    manifest["stages"][stage] = counts
    if inputs is not None:
        manifest["inputs"] = inputs
    write_json(manifest, layout.manifest)
    return manifest
