"""Builders of small real input files for the tests, and a `curate` process as a user runs it."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from pipeline.config import RunConfig, parse_config
from pipeline.formats.documents import RunLayout
from pipeline.formats.stats import StageStats
from pipeline.stages.source import source_jobs, source_unit

REPO = Path(__file__).resolve().parents[1]

PAGE = """<html><head><title>{title}</title><style>body {{color: red}}</style></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/contact">Contact</a></nav>
<article><h1>{title}</h1>{paragraphs}</article>
<footer>Copyright 2024 Example Media. All rights reserved.</footer></body></html>"""


def write_jsonl(path: Path, records: list, compress: str | None = None) -> Path:
    """Write records (dicts, or raw bytes/str lines written as they are) as JSON lines."""
    lines = []
    for record in records:
        if isinstance(record, bytes):
            lines.append(record)
        elif isinstance(record, str):
            lines.append(record.encode())
        else:
            lines.append(json.dumps(record).encode())
    data = b"\n".join(lines) + b"\n"
    if compress == "gz":
        data = gzip.compress(data, mtime=0)
    elif compress == "zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_parquet_file(path: Path, columns: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def html_page(title: str, paragraphs: list[str]) -> bytes:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return PAGE.format(title=title, paragraphs=body).encode()


def write_warc(path: Path, responses: list[tuple[str, str, bytes]], conversions: list[tuple[str, str]] = ()) -> Path:
    """A gzipped WARC as a crawler writes it: warcinfo, a request + response per (url, content
    type, payload), WET-style conversion records per (url, text), and the crawler's log as a
    resource record at a metadata:// URI (not a document)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    writer.write_record(writer.create_warcinfo_record(path.name, {"software": "tests"}))
    for url, content_type, payload in responses:
        request = writer.create_warc_record(url, "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n"))
        writer.write_record(request)
        headers = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
        writer.write_record(
            writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=headers)
        )
    for url, text in conversions:
        writer.write_record(
            writer.create_warc_record(
                url, "conversion", payload=io.BytesIO(text.encode()), warc_content_type="text/plain"
            )
        )
    writer.write_record(
        writer.create_warc_record(
            "metadata://crawler/log.txt", "resource", payload=io.BytesIO(b"crawl log"), warc_content_type="text/plain"
        )
    )
    path.write_bytes(buffer.getvalue())
    return path


COMMON_WORDS = (
    "the of and to in is that it was for on are with as his they be at one have this from or had by "
    "word but what some we can out other were all there when up use your how said an each she which do"
).split()


def near_copies_corpus(folder: Path) -> Path:
    """``folder/a.jsonl``: 60 English-looking documents that every filter keeps, and near copies
    of 8 of them (one word of 120 changed: a Jaccard similarity of about 0.84 on 5-word shingles, a
    duplicate at dedup's 0.8, not at 0.95). Returns the folder."""
    rng = random.Random(0)
    docs = []
    for _ in range(60):
        words = [rng.choice(COMMON_WORDS) for _ in range(120)]
        docs.append(" ".join(" ".join(words[j : j + 12]).capitalize() + "." for j in range(0, 120, 12)))
    for text in docs[:8]:
        words = text.split()
        words[60] = "changed"
        docs.append(" ".join(words))
    write_jsonl(folder / "a.jsonl", [{"text": t} for t in docs])
    return folder


def stage_outputs(run_dir: Path) -> dict[str, bytes]:
    """Every file under the run's stage folders, with the run folder's own path (which part
    records and stats name) written as <run>: what two runs of one config in two folders share."""
    return {
        str(p.relative_to(run_dir)): p.read_bytes().replace(str(run_dir).encode(), b"<run>")
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.parent != run_dir and p.relative_to(run_dir).parts[0] not in (".prefect", "logs", "report")
    }


def source_config(tmp_path: Path, sources: list[dict], **settings) -> RunConfig:
    return parse_config({"run_dir": str(tmp_path / "run"), "sources": sources, **settings})


def mix_config(tmp_path: Path, sources: list[dict], mix: dict, vocab_size: int = 300, **settings) -> RunConfig:
    """A run whose documents go from source straight to tokenize and mix: lang, filter, dedup and
    lines off, a tokenizer of ``vocab_size`` trained on the run, the given ``mix`` settings."""
    off = {"enabled": False}
    stages = {"lang": off, "filter": off, "dedup": off, "lines": off, **settings}
    return source_config(tmp_path, sources, tokenize={"vocab_size": vocab_size}, mix=mix, **stages)


def run_units(config: RunConfig) -> list[dict]:
    """Run the source stage's units in order without Prefect; return their part records."""
    stage = RunLayout(config.run_dir).stage("source").make()
    return [source_unit(job) for job in source_jobs(config, stage)]


def source_run(config: RunConfig) -> StageStats:
    """The source stage as a run makes it (its units, stats.json and the manifest), without
    Prefect; return its stats."""
    from pipeline.stages.rerun import open_run
    from pipeline.stages.source import finish_source

    open_run(config)
    return finish_source(config, RunLayout(config.run_dir).stage("source"), run_units(config))


def tokenized_run(config: RunConfig) -> str:
    """The source stage's outputs (its units and stats) and the tokenize stage's library call,
    without Prefect, so a later stage's library call can run on them; return the name of the last
    document stage."""
    from pipeline.io.writer import write_json
    from pipeline.stages.tokenize import run_tokenize

    layout = RunLayout(config.run_dir)
    parts = run_units(config)
    source = layout.stage("source")
    write_json({"stage": "source", "docs_out": sum(p["ledger"]["docs_out"] for p in parts)}, source.stats)
    write_json({"stages": {}}, layout.manifest)
    run_tokenize("source", config)
    return "source"


def resolve_json_path(data, path: str):
    """A report's ``data-json`` path in a JSON document: at each level the longest key that matches
    (keys may hold dots)."""
    parts = path.split(".")
    while parts:
        for take in range(len(parts), 0, -1):
            key = ".".join(parts[:take])
            if isinstance(data, list) and key.isdigit():
                data, parts = data[int(key)], parts[take:]
                break
            if isinstance(data, dict) and key in data:
                data, parts = data[key], parts[take:]
                break
        else:
            raise KeyError(path)
    return data


def _card_table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells as text) of the first Markdown table after ``heading`` in a card."""
    section = text.split(f"\n{heading}\n", 1)[1]
    lines = [line for line in section.split("\n\n| ", 1)[1].split("\n\n")[0].split("\n")]
    return [[cell.strip() for cell in line.strip("| ").split(" | ")] for line in lines[2:]]


def check_card(folder: Path) -> None:
    """A mixture's dataset card (``README.md``) against its manifest: the YAML header the Hub reads
    (licences), the tokens and documents per licence, and each group's figures."""
    import yaml

    from pipeline.stages.card import hub_licences

    manifest = json.loads((folder / "manifest.json").read_text())
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n")[1])
    hub, other = hub_licences(manifest["licences"])
    assert header["license"] == (hub[0] if len(hub) == 1 else hub)
    assert header.get("license_name") == (", ".join(other) if other else None)

    def number(cell: str) -> int:
        return int(cell.replace(",", ""))

    rows = _card_table(text, "## Licences")
    assert {row[0].strip("`"): [number(c) for c in (row[1], row[2], row[4], row[5])] for row in rows} == {
        name: [v["documents_taken"], v["tokens_taken"], v["validation_documents"], v["validation_tokens"]]
        for name, v in manifest["licences"].items()
    }
    rows = _card_table(text, "## Groups")
    assert {row[0]: (number(row[7]), number(row[8])) for row in rows} == {
        group: (g["documents_taken"], g["tokens_taken"]) for group, g in manifest["groups"].items()
    }


URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "poster", "data"}


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse_html(page: str) -> _Elements:
    """The elements (tag, attributes) and the text of an HTML page or fragment."""
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser


def render_markdown(text: str, tables: bool = True) -> _Elements:
    """Markdown rendered as CommonMark renders it (raw HTML passed through, as CommonMark allows;
    with GFM's tables, as the Hugging Face Hub and GitHub render them), then parsed."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark")
    return parse_html((renderer.enable("table") if tables else renderer).render(text))


def live_markup(elements: _Elements, allowed: set[str]) -> list:
    """The elements outside ``allowed``, event-handler attributes and script URLs (in a link's,
    an image's or a form's address): what text a writer was given must never become."""
    found = [tag for tag, _ in elements.tags if tag not in allowed]
    for _, attrs in elements.tags:
        found += [k for k in attrs if k.startswith("on")]
        found += [v for k, v in attrs.items() if k in URL_ATTRIBUTES and "javascript:" in (v or "").lower()]
    return found


def curate_in_process(config: RunConfig) -> dict[str, dict]:
    """Every enabled stage of ``config`` in order, by its library calls without Prefect (what
    flows.curate runs); each stage's stats by name."""
    from pipeline.formats.manifest import record_stage
    from pipeline.formats.manifest import stage_outputs as recorded_outputs
    from pipeline.io.writer import write_json
    from pipeline.stages.dedup import run_dedup, run_lines
    from pipeline.stages.mix import run_mix
    from pipeline.stages.registry import REGISTRY, enabled_stages
    from pipeline.stages.rerun import open_run
    from pipeline.stages.shard import ShardJob, check_stage_outputs, finish_stage, stage_unit
    from pipeline.stages.source import drop_repeated_ids
    from pipeline.stages.tokenize import run_tokenize

    open_run(config)
    layout = RunLayout(config.run_dir)
    source = layout.stage("source")
    parts = drop_repeated_ids(source, run_units(config), config.sources)
    stats = {"source": {**check_stage_outputs("source", source, parts).to_dict(), "units": len(parts)}}
    write_json(stats["source"], source.stats)
    record_stage(config, "source", stats["source"])
    previous = "source"
    whole = {"dedup": run_dedup, "lines": run_lines, "tokenize": run_tokenize, "mix": run_mix}
    for name in enabled_stages(config):
        if REGISTRY[name].kind == "shard":
            stage = layout.stage(name).make()
            inputs = recorded_outputs(config.run_dir, previous)  # as flows.stages reads them
            shard_parts = [
                stage_unit(ShardJob(stage_name=name, in_path=path, stage=stage, config=config)) for path in inputs
            ]
            stats[name] = finish_stage(name, previous, config, shard_parts).to_dict()
        else:
            stats[name] = whole[name](previous, config).to_dict()
        if REGISTRY[name].documents:
            previous = name
    return stats


def shared_api_env() -> dict[str, str]:
    """The environment that points a ``curate`` process at the test session's Prefect server (the
    ``prefect_server`` fixture, which the test must use): the process then starts no temporary
    server of its own, about 10 s saved per process on two cores. Tests of the temporary server
    itself (Ctrl-C, a full database, the banner) keep their own."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    assert url, "shared_api_env needs the prefect_server fixture"
    return {"PREFECT_API_URL": url}


# The test session's own Prefect settings, which a user's shell does not have: a ``curate`` process
# gets them only where a test passes them in ``env``.
SESSION_SETTINGS = ("PREFECT_HOME", "PREFECT_API_URL", "PREFECT_LOGGING_SETTINGS_PATH", "PREFECT_LOGGING_LEVEL")


def curate_environment(env: dict | None = None) -> dict[str, str]:
    """The environment of a ``curate`` process as a user's shell gives it (this checkout on the
    path, none of the test session's Prefect settings), plus ``env``."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    for name in SESSION_SETTINGS:
        if name not in (env or {}):
            environment.pop(name, None)
    return environment


def curate_command(args: list[str], prelude: str = "") -> list[str]:
    """The command line of ``curate ARGS`` (after the Python of ``prelude``, in the same process)."""
    return [sys.executable, "-c", prelude + "from flows.cli import main; main()", *args]


def run_curate(
    args: list[str],
    cwd: Path,
    env: dict | None = None,
    prelude: str = "",
    timeout: float = 600,
    wrapper: Sequence[str] = (),
) -> subprocess.CompletedProcess:
    """``curate ARGS`` in a process of its own, run from ``cwd`` without a terminal, with the
    environment of :func:`curate_environment` (``env`` added: ``shared_api_env()`` to report to
    the test session's server), its output as text; ``wrapper`` goes in front of the command (a
    namespace to run it in). The result's ``seconds`` is how long it took."""
    started = time.perf_counter()
    done = subprocess.run(
        [*wrapper, *curate_command(args, prelude)],
        cwd=cwd,
        env=curate_environment(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    done.seconds = time.perf_counter() - started
    return done
