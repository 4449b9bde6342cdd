"""The built-in demo: its corpus location and the config that curates it (= configs/demo.toml)."""

from __future__ import annotations

from pathlib import Path

DEMO_CORPUS_DIR = Path(".cache/demo-corpus")
DEMO_RUN_DIR = Path("runs/demo")


def demo_config(corpus_dir: Path = DEMO_CORPUS_DIR, run_dir: Path = DEMO_RUN_DIR, seed: int = 0) -> dict:
    corpus = Path(corpus_dir)
    return {
        "run_dir": str(run_dir),
        "seed": seed,
        "sources": [
            {
                "name": "news",
                "reader": "jsonl",
                "paths": [str(corpus / "news")],
                "text_field": "text",
                "id_field": "id",
                "url_field": "url",
                "licence_field": "licence",
            },
            {
                "name": "dialogues",
                "reader": "parquet",
                "paths": [str(corpus / "dialogues")],
                "text_field": "text",
                "id_field": "id",
                "licence_field": "licence",
            },
            {"name": "web", "reader": "warc", "paths": [str(corpus / "web")], "licence_field": "licence_links"},
            {"name": "notes", "reader": "text", "paths": [str(corpus / "notes")]},
        ],
        "lang": {"min_score": 0.5},
        "filter": {"sources": ["news", "web", "notes"]},
        "dedup": {"threshold": 0.8, "keep": "first"},
        "lines": {"max_docs": 10, "sources": ["news", "web", "notes"]},
        "mix": {
            "group_by": ["source"],
            "validation_fraction": 0.05,
            "validation_max_docs": 500,
            "mixtures": [
                {"name": "main", "temperature": 1.0},
                {"name": "tempered", "temperature": 3.33, "max_epochs": 4},
            ],
        },
    }
