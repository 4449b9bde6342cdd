"""Writers: the corpus's files from a plan. News as gzipped JSON lines (and the malformed ones),
dialogues as Parquet, web pages as WARC files (:class:`PageRenderer` puts each document on a page
of its site), notes as text files; ``labels.parquet`` and the canaries table.

How a label row finds its record (``key``): the ``id`` field in JSONL and Parquet, or
``line:<n>`` for a JSONL line that a strict JSON parser rejects (broken JSON, invalid UTF-8); the
WARC-Record-ID without its angle brackets (``urn:uuid:...``) in WARC; the path relative to
``notes/`` for text files. Keys are unique across the corpus. A web copy of a real document keeps
that document's non-empty lines, in order, as the ``<h1>``/``<p>`` elements of its ``<article>``.
"""

from __future__ import annotations

import gzip
import html
import io
import os
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from demo.plan import Doc, Plan
from demo.sites import SHARE_LINKS, Site, e, slug
from pipeline.io.owner import note_written
from pipeline.licence import licence_parts

VERSION = 4

CANARY_SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("occurrences", pa.int64()), ("pool_ids", pa.list_(pa.string()))]
)

# Malformed records a strict JSON parser rejects: their key is the line, not an id.
UNPARSEABLE = {"truncated", "single_quotes", "unescaped_quote", "invalid_utf8"}


def atomic_write(path: Path, write: Callable[[io.BufferedWriter], None]) -> None:
    """Write ``path`` through a temporary file in the same folder, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as stream:
            write(stream)
        note_written(path)  # into the corpus folder's record of its own files, before it appears
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass
class Written:
    """Where each written document is: (document, file, key, line)."""

    rows: list[tuple[Doc, str, str, int | None]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def _news_record(doc: Doc) -> dict:
    record = {"id": doc.key, "text": doc.text, "url": doc.url, "meta": {"topic": doc.topic, "title": doc.title}}
    if doc.licence is not None:  # generated text states no licence
        record["licence"] = doc.licence
    return record


def _malformed_line(doc: Doc) -> bytes:
    """The bytes of one deliberately bad JSONL line (without the newline)."""
    snippet = doc.text[:400]
    record = {"id": doc.key, "text": snippet, "url": doc.url, "meta": {"topic": doc.topic}}
    variant = doc.variant
    if variant == "truncated":
        return orjson.dumps(record)[: len(doc.key) + 20 + len(snippet) // 2]
    if variant == "single_quotes":
        return repr(record).encode("utf-8")
    if variant == "unescaped_quote":
        inner = orjson.dumps(snippet)[1:-1] + b' He said "no comment" to reporters.'
        return b'{"id":"' + doc.key.encode() + b'","text":"' + inner + b'","url":null}'
    if variant == "invalid_utf8":
        text = snippet + " Prices at the caf\u00e9 rose to \u00a34.50."
        inner = orjson.dumps(text)[1:-1].decode("utf-8").encode("cp1252", errors="replace")
        return b'{"id":"' + doc.key.encode() + b'","text":"' + inner + b'","url":null}'
    if variant == "empty_text":
        record["text"] = ""
    elif variant == "number_text":
        record["text"] = 404
    elif variant == "nul_text":
        record["text"] = snippet[:100] + "\x00" + snippet[100:]
    return orjson.dumps(record)


def write_news(shards: list[list[Doc]], out_dir: Path, written: Written) -> None:
    for number, shard in enumerate(shards):
        rel = f"news/news-{number:05d}.jsonl.gz"
        lines = []
        for line_no, doc in enumerate(shard, start=1):
            if doc.kind == "malformed":
                lines.append(_malformed_line(doc))
                key = f"line:{line_no}" if doc.variant in UNPARSEABLE else doc.key
            else:
                lines.append(orjson.dumps(_news_record(doc)))
                key = doc.key
            written.rows.append((doc, rel, key, line_no))
        payload = b"\n".join(lines) + b"\n"

        def write(stream, payload=payload):
            with gzip.GzipFile(filename="", mode="wb", fileobj=stream, mtime=0, compresslevel=6) as gz:
                gz.write(payload)

        atomic_write(out_dir / rel, write)
        written.files.append(rel)


DIALOGUE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("lang", pa.string()),
        ("category", pa.string()),
        ("language", pa.string()),
        ("licence", pa.string()),
    ]
)


def write_dialogues(shards: list[list[Doc]], out_dir: Path, written: Written) -> None:
    for number, shard in enumerate(shards):
        rel = f"dialogues/dialogues-{number:05d}.parquet"
        table = pa.table(
            {
                "id": [d.key for d in shard],
                "text": [d.text for d in shard],
                "lang": [_claimed_lang(d) for d in shard],
                "category": [d.topic for d in shard],
                "language": [d.language for d in shard],
                "licence": [d.licence for d in shard],
            },
            schema=DIALOGUE_SCHEMA,
        )
        atomic_write(out_dir / rel, lambda stream, table=table: pq.write_table(table, stream, compression="zstd"))
        written.rows.extend((doc, rel, doc.key, None) for doc in shard)
        written.files.append(rel)


def _crawl_start(seed: int) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=seed % 366, hours=seed % 24)


def _claimed_lang(doc: Doc) -> str | None:
    """The language a file states for a document: a mixed page claims its first half's."""
    if doc.kind == "mixed_lang" and doc.detail:
        return doc.detail.split("+", 1)[0]
    return doc.lang


class PageRenderer:
    """Turns web documents into HTML pages of their site."""

    def __init__(self, sites: list[Site]):
        self.sites = sites
        self.chrome = [site.chrome_html() for site in sites]

    def render(self, doc: Doc) -> bytes:
        site = self.sites[doc.site]
        top, sidebar, footer = self.chrome[doc.site]
        head_extra = ""
        if doc.kind == "boilerplate":
            main = self._boilerplate_main(doc.body or [])
        else:
            section = (doc.topic if doc.real_source == "news" else None) or site.nav[0]
            main = (
                f'<nav class="breadcrumb"><a href="/">Home</a> &rsaquo; '
                f'<a href="/{slug(section)}/">{e(section.title())}</a></nav>\n' + self._article(doc) + SHARE_LINKS
            )
            if doc.kind == "spam":
                keywords = doc.detail.removeprefix("keywords: ")
                head_extra = f'<meta name="keywords" content="{html.escape(keywords)}">'
                main += f'<div style="display:none">{e((keywords + " ") * 20)}</div>\n'
        title = doc.title or site.name
        # A page of real text links the licence of the package it came from, as rel="license".
        head_extra += (
            "".join(
                f'<link rel="license" href="https://spdx.org/licenses/{part}.html">'
                for part in licence_parts(doc.licence)
            )
            if doc.licence
            else ""
        )
        page = (
            f'<!DOCTYPE html>\n<html lang="{_claimed_lang(doc) or "en"}">\n'
            f'<head><meta charset="utf-8"><title>{e(title)} | {e(site.name)}</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'{head_extra}<link rel="stylesheet" href="/static/site.css"></head>\n<body>\n'
            f"{top}<main>\n{main}{sidebar}</main>\n{footer}"
            '<script src="/static/analytics.js"></script>\n</body>\n</html>\n'
        )
        return page.encode("utf-8")

    @staticmethod
    def _article(doc: Doc) -> str:
        """Each non-empty line of the text as a paragraph; a news title as the heading."""
        lines = [line for line in doc.text.split("\n") if line.strip()]
        parts = ["<article>\n"]
        if doc.real_source == "news" and doc.kind in ("exact_dup", "near_dup", "clean") and lines:
            parts.append(f"<h1>{e(lines[0])}</h1>\n")
            lines = lines[1:]
        parts.extend(f"<p>{e(line)}</p>\n" for line in lines)
        parts.append("</article>\n")
        return "".join(parts)

    @staticmethod
    def _boilerplate_main(body: list[tuple[str, str]]) -> str:
        parts, in_list = ['<section class="content">\n'], False
        for tag, text in body:
            if tag == "li" and not in_list:
                parts.append("<ul>")
            elif tag != "li" and in_list:
                parts.append("</ul>\n")
            in_list = tag == "li"
            if tag == "li":
                parts.append(f'<li><a href="/story/{slug(text)}">{e(text)}</a></li>')
            else:
                parts.append(f"<{tag}>{e(text)}</{tag}>\n")
        if in_list:
            parts.append("</ul>\n")
        parts.append("</section>\n")
        return "".join(parts)


def _response(doc: Doc, date: datetime, body: bytes, content_type: str, writer: WARCWriter):
    http = StatusAndHeaders(
        "200 OK",
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Date", format_datetime(date, usegmt=True)),
            ("Server", "nginx"),
        ],
        protocol="HTTP/1.1",
    )
    return writer.create_warc_record(
        doc.url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=http,
        warc_headers_dict={"WARC-Record-ID": f"<{doc.key}>", "WARC-Date": _warc_date(date)},
    )


def write_web(
    shards: list[list[Doc]], out_dir: Path, written: Written, sites: list[Site], seed: int, rng: np.random.Generator
) -> None:
    """WARC files: a warcinfo record, then one response record per document, in crawl order."""
    renderer = PageRenderer(sites)
    clock = _crawl_start(seed)
    for number, shard in enumerate(shards):
        rel = f"web/web-{number:05d}.warc.gz"
        info_id = uuid.UUID(bytes=rng.bytes(16), version=4)
        info = (
            f"software: curate demo corpus v{VERSION}\r\nformat: WARC File Format 1.0\r\n"
            f"description: generated web pages for the curate demo corpus, seed {seed}\r\n"
        ).encode()
        start = clock
        responses = []
        for doc, gap in zip(shard, rng.integers(1, 40, size=len(shard)).tolist()):
            clock += timedelta(seconds=gap)
            if doc.kind == "non_html":
                responses.append((doc, clock, doc.text, "image/png"))
            else:
                responses.append((doc, clock, renderer.render(doc), "text/html; charset=utf-8"))

        def write(stream, responses=responses, info=info, info_id=info_id, start=start, rel=rel):
            writer = WARCWriter(stream, gzip=True)
            writer.write_record(
                writer.create_warc_record(
                    "",
                    "warcinfo",
                    payload=io.BytesIO(info),
                    length=len(info),
                    warc_headers_dict={
                        "WARC-Record-ID": f"<urn:uuid:{info_id}>",
                        "WARC-Date": _warc_date(start),
                        "WARC-Filename": Path(rel).name,
                    },
                )
            )
            for response in responses:
                writer.write_record(_response(*response, writer))

        atomic_write(out_dir / rel, write)
        written.rows.extend((doc, rel, doc.key, None) for doc in shard)
        written.files.append(rel)


def _warc_date(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_notes(docs: list[Doc], out_dir: Path, written: Written) -> None:
    for doc in sorted(docs, key=lambda d: d.key):
        rel = f"notes/{doc.key}"
        data = doc.text.encode("utf-8")
        atomic_write(out_dir / rel, lambda stream, data=data: stream.write(data))
        written.rows.append((doc, rel, doc.key, None))
        written.files.append(rel)


LABEL_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("file", pa.string()),
        ("key", pa.string()),
        ("line", pa.int64()),
        ("kind", pa.string()),
        ("original", pa.string()),
        ("original_source", pa.string()),
        ("edit_rate", pa.float64()),
        ("lang", pa.string()),
        ("topic", pa.string()),
        ("detail", pa.string()),
        ("copy_kind", pa.string()),
        ("copies", pa.int64()),
        ("canary", pa.bool_()),
        ("licence", pa.string()),
    ]
)


def labels_table(written: Written, plan: Plan) -> pa.Table:
    """One row per written document, in file order. Lineage: ``original`` (the key of the
    document a copy copies), ``copy_kind``, ``edit_rate``, and ``copies``: how many copies of its
    lineage (the original's) the corpus holds, on the original and on each copy."""
    columns: dict[str, list] = {name: [] for name in LABEL_SCHEMA.names}
    index = {id(doc): i for i, doc in enumerate(plan.docs)}
    lineage = Counter(doc.original for doc in plan.docs if doc.original is not None)
    for doc, rel, key, line in written.rows:
        original = plan.docs[doc.original] if doc.original is not None else None
        row = {
            "source": doc.source,
            "file": rel,
            "key": key,
            "line": line,
            "kind": doc.kind,
            "original": original.key if original else None,
            "original_source": original.source if original else None,
            "edit_rate": doc.edit_rate,
            "lang": doc.lang,
            "topic": doc.topic if doc.real_source else None,
            "detail": doc.detail,
            "copy_kind": doc.copy_kind,
            "copies": lineage[doc.original if original else index[id(doc)]],
            "canary": doc.canary,
            "licence": doc.licence,
        }
        for name, value in row.items():
            columns[name].append(value)
    return pa.table(columns, schema=LABEL_SCHEMA)


def canaries_table(plan: Plan) -> pa.Table:
    """:data:`HELDOUT_CANARIES`: each canary (id ``canary/<key>``), its text, how many times it
    occurs in the pools and the ids (``news/<key>``) of its occurrences; then the control canaries
    (ids ``canary/control-<n>``), which occur nowhere."""
    planted: dict[int, list[str]] = {}
    for i, doc in enumerate(plan.docs):
        if doc.canary:
            planted.setdefault(i if doc.original is None else doc.original, []).append(f"{doc.source}/{doc.key}")
    rows = [(f"canary/{plan.docs[i].key}", plan.docs[i].text, len(ids), ids) for i, ids in planted.items()]
    rows += [(f"canary/control-{n:04d}", text, 0, []) for n, text in enumerate(plan.controls)]
    columns = list(zip(*rows)) if rows else [[] for _ in CANARY_SCHEMA.names]
    return pa.table({name: list(values) for name, values in zip(CANARY_SCHEMA.names, columns)}, schema=CANARY_SCHEMA)
