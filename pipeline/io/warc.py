"""WARC and WET reader (warcio), with HTML turned into text by resiliparse.

Documents are the records that carry content: ``response`` and ``resource`` records (HTML is
extracted to plain text, ``text/plain`` is taken as it is) and WET ``conversion`` records.
Protocol records (``request``, ``warcinfo``, ``metadata``, ``revisit``) are not documents and are
passed over, as are the crawler's own files (``resource`` records at ``metadata://`` URIs, such as
wget's log). A response whose payload is neither HTML nor text (an image, a PDF) is quarantined as
``unsupported_content_type``, so that every content record is accounted for.

A record's id is its ``WARC-Record-ID``, its url the ``WARC-Target-URI``; ``meta`` keeps the WARC
date, the HTTP status and the content type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import orjson
import pyarrow as pa
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from warcio.archiveiterator import ArchiveIterator

from pipeline.io.records import RawBatchBuilder, ReadLimits

CONTENT_RECORDS = {"response", "resource", "conversion"}
HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml")


def html_to_text(html: bytes, charset: str | None, main_content: bool = True) -> str:
    """Plain text of an HTML page: decoded by its declared charset (or a detected one), main
    content only unless ``main_content`` is false, block structure kept as line breaks."""
    page = bytes_to_str(html, charset or detect_encoding(html))
    return extract_plain_text(page, preserve_formatting=True, main_content=main_content,
                              list_bullets=True, alt_texts=False, links=False,
                              form_fields=False, noscript=False, comments=False)


def _is_content(record) -> bool:
    uri = record.rec_headers.get_header("WARC-Target-URI") or ""
    return record.rec_type in CONTENT_RECORDS and not uri.startswith("metadata://")


def _content_type(record) -> tuple[str, str | None]:
    """The payload's media type and charset, from the HTTP headers (or the WARC headers)."""
    headers = record.http_headers if record.http_headers is not None else record.rec_headers
    value = (headers.get_header("Content-Type") or "").lower()
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.strip().partition("=")
        if key == "charset" and val:
            charset = val.strip("\"' ")
    return media.strip(), charset


def read_warc(path: Path, *, html_main_content: bool = True,
              limits: ReadLimits = ReadLimits()) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches from one WARC or WET file (gzip or plain).

    warcio reads a truncated file without complaint, so truncation is checked here: a record
    shorter than its Content-Length, or bytes after the last whole record, are quarantined as
    ``truncated_file``."""
    out = RawBatchBuilder(limits.batch_docs)
    offset = end = 0
    try:
        with open(path, "rb") as stream:
            records = ArchiveIterator(stream)
            for record in records:
                content = _is_content(record)
                if content:
                    kind, *fields = _read_record(record, html_main_content, limits.max_doc_bytes)
                # The offset is known once the record is read (warcio reads it to its end).
                offset = records.get_record_offset()
                end = offset + records.get_record_length()
                if getattr(record.raw_stream, "limit", 0) > 0:
                    out.bad("truncated_file", f"{record.rec_type} record ends {record.raw_stream.limit} "
                            "bytes short of its Content-Length", None, None, offset)
                elif content and kind == "doc":
                    out.doc(*fields, line=None, offset=offset)
                elif content:
                    out.bad(*fields, line=None, offset=offset)
                if out.full:
                    yield out.flush()
        size = path.stat().st_size
        if end < size:
            out.bad("truncated_file", f"{size - end} bytes after the last whole record", None, None, end)
    except Exception as error:  # warcio raises assorted errors on damaged input
        reason = "truncated_file" if isinstance(error, EOFError) else "unreadable_file"
        out.bad(reason, f"{type(error).__name__}: {error}", None, None, end)
    batch = out.flush()
    if batch is not None:
        yield batch


def _read_record(record, main_content: bool, max_bytes: int) -> tuple:
    """``("doc", text, id, url, meta)`` or ``("bad", reason, detail, raw bytes)`` for a content record."""
    headers = record.rec_headers
    record_id = (headers.get_header("WARC-Record-ID") or "").strip("<>") or None
    url = headers.get_header("WARC-Target-URI")
    media, charset = _content_type(record)
    status = record.http_headers.get_statuscode() if record.http_headers is not None else None
    status = int(status) if status and status.isdigit() else None
    meta = orjson.dumps({"warc_type": record.rec_type, "warc_date": headers.get_header("WARC-Date"),
                         "content_type": media or None, "http_status": status}).decode()
    payload = record.content_stream().read(max_bytes + 1)
    if len(payload) > max_bytes:
        return "bad", "too_large", f"payload of more than {max_bytes} bytes", payload
    if record.rec_type == "conversion" or media.startswith("text/plain"):
        try:
            text = payload.decode(charset or "utf-8")
        except UnicodeDecodeError as error:
            return "bad", "invalid_utf8", str(error), payload
        except LookupError as error:
            return "bad", "unknown_charset", str(error), payload
    elif media.startswith(HTML_TYPES) or (not media and payload.lstrip()[:1] == b"<"):
        text = html_to_text(payload, charset, main_content)
    else:
        return "bad", "unsupported_content_type", f"payload is {media or 'of unknown type'}", payload
    return "doc", text, record_id, url, meta
