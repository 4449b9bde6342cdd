"""WARC and WET reader (warcio), with HTML turned into text by resiliparse.

Documents are the records that carry content: ``response`` and ``resource`` records (HTML is
extracted to plain text, ``text/plain`` is taken as it is) and WET ``conversion`` records.
Protocol records (``request``, ``warcinfo``, ``metadata``, ``revisit``) are not documents and are
passed over, as are the crawler's own files (``resource`` records at ``metadata://`` URIs, such as
wget's log). A response whose payload is neither HTML nor text (an image, a PDF) is quarantined as
``unsupported_content_type``, so that every content record is accounted for.

A record's id is its ``WARC-Record-ID``, its url the ``WARC-Target-URI``; ``meta`` keeps the WARC
date, the HTTP status and the content type, and a record's licence links where it has any, as
``licence_links``: the targets of the HTTP ``Link`` headers with ``rel="license"``, then the
``href`` of every element of an HTML page with ``rel="license"``. A source reads them as each page's
licence with ``licence_field = "licence_links"`` (pipeline.licence); any other ``licence_field``
of a WARC source names a WARC or HTTP header, which ``meta`` then keeps.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree
from warcio import archiveiterator, bufferedreaders
from warcio.archiveiterator import ArchiveIterator

from pipeline.io.quiet import captured_writes, route_stderr
from pipeline.io.records import RawBatchBuilder, ReadLimits, sample_of

# warcio writes its warnings on stderr (a record not followed by its blank line, with kilobytes of
# the bytes that followed; a gzip member that fails partway): read_warc captures them and
# quarantines each with its file and offset. What it logs (spaces it replaced in a
# WARC-Target-URI, whose record is read) is not shown either.
route_stderr(archiveiterator, bufferedreaders)
logging.getLogger("warcio").addHandler(logging.NullHandler())
logging.getLogger("warcio").propagate = False
# warcio's warning of bytes where the blank line after a record should be.
_NOT_FOLLOWED = re.compile(
    r"WARNING: Record not followed by newline[^\n]*\n\s*Offset: (\d+)\n\s*Remainder: ([^\n]*)\n?"
)

# The meta key where the WARC reader puts a page's rel="license" links.
LICENCE_LINKS = "licence_links"

CONTENT_RECORDS = {"response", "resource", "conversion"}
HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml")


def html_to_text(html: bytes, charset: str | None, main_content: bool = True) -> str:
    """Plain text of an HTML page: decoded by its declared charset (or a detected one), main
    content only unless ``main_content`` is false, block structure kept as line breaks."""
    return read_html(html, charset, main_content)[0]


def read_html(html: bytes, charset: str | None, main_content: bool = True) -> tuple[str, list[str]]:
    """The plain text of an HTML page (:func:`html_to_text`) and its licence links: the ``href`` of
    every element whose ``rel`` includes ``license``, in page order, each once."""
    tree = HTMLTree.parse(bytes_to_str(html, charset or detect_encoding(html)))
    links = []
    if tree.document is not None:
        for element in tree.document.query_selector_all("[rel~=license]"):
            href = (element.getattr("href") or "").strip()
            if href and href not in links:
                links.append(href)
    return _plain_text(tree, main_content), links


def _plain_text(tree: HTMLTree, main_content: bool) -> str:
    return extract_plain_text(
        tree,
        preserve_formatting=True,
        main_content=main_content,
        list_bullets=True,
        alt_texts=False,
        links=False,
        form_fields=False,
        noscript=False,
        comments=False,
    )


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


GZIP_MAGIC = b"\x1f\x8b"
# What ends a record in an uncompressed file: two CRLFs after a WARC record's block, one LF
# after an ARC record's.
RECORD_END = {"warc": b"\r\n\r\n", "arc": b"\n"}
READ_BLOCK = 1 << 20


@dataclass
class _Read:
    """A record warcio has read whole as far as it can tell; kept back until it is known to be
    whole (another record follows it, or the file ends where it should)."""

    offset: int
    end: int  # where its bytes end (its gzip member, or its block before the separator)
    format: str
    fields: tuple | None  # ("doc", ...) or ("bad", ...) for a content record, else None


def read_warc(
    path: Path,
    *,
    html_main_content: bool = True,
    limits: ReadLimits = ReadLimits(),
    header_fields: tuple[str, ...] = (),
) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches from one WARC or WET file (gzip or plain).

    warcio reads a cut file without complaint, so wholeness is checked here: every record but
    the last is whole (another record followed it); the last must end where the file ends (its
    gzip member complete, or its block followed by the record separator). Where the file is cut,
    the records before the cut are kept and the cut record, whatever it was, is quarantined once
    as ``truncated_file`` at its offset; bytes after the last whole record that do not start a
    record are quarantined once as ``unreadable_file``. ``header_fields``: WARC or HTTP headers
    whose value each document's ``meta`` keeps under the header's name (a licence header, say)."""
    out = RawBatchBuilder(limits.batch_docs)
    pending: _Read | None = None
    whole_end = 0  # where the bytes after the last whole record begin
    next_start = 0  # where the record after the last one read begins
    problem = None  # why reading stopped early, if it did
    at_eof = True
    try:
        size = path.stat().st_size
        with open(path, "rb") as stream, captured_writes() as warnings:
            first = stream.read(2)
            gz = bool(first) and GZIP_MAGIC.startswith(first)
            stream.seek(0)
            records = ArchiveIterator(stream)
            try:
                for record in records:
                    _quarantine_warnings(out, warnings, next_start)
                    # Another record began, so the one before it is whole.
                    if pending is not None:
                        _emit(out, pending)
                        whole_end, pending = next_start, None
                    fields = None
                    if _is_content(record):
                        fields = _read_record(record, html_main_content, limits.max_doc_bytes, header_fields)
                    # The offset is known once the record is read (warcio reads it to its end).
                    offset = records.get_record_offset()
                    end = offset + records.get_record_length()
                    next_start = records.offset
                    short = getattr(record.raw_stream, "limit", 0)
                    if short > 0:
                        problem = f"{record.rec_type} record ends {short} bytes short of its Content-Length"
                        break
                    pending = _Read(offset, end, record.format, fields)
                    if out.full:
                        yield out.flush()
            except Exception as error:  # warcio raises assorted errors on damaged input
                problem = f"{type(error).__name__}: {error}"
                at_eof = stream.tell() >= size
            _quarantine_warnings(out, warnings, next_start)
        if pending is not None:
            after = _whole_end(path, gz, pending)
            if after is not None:
                _emit(out, pending)
                whole_end = after
        _check_rest(out, path, gz, whole_end, size, problem, at_eof)
    except OSError as error:
        out.bad("unreadable_file", f"{type(error).__name__}: {error}", None, None, whole_end)
    batch = out.flush()
    if batch is not None:
        yield batch


def _quarantine_warnings(out: RawBatchBuilder, warnings: list[str], offset: int) -> None:
    """What warcio wrote on stderr since the last call, as quarantine records: bytes it skipped
    between records at the offset it names, anything else at ``offset`` (where the record being
    read begins)."""
    if not warnings:
        return
    text = "".join(warnings)
    warnings.clear()
    for found in _NOT_FOLLOWED.finditer(text):
        out.bad(
            "bytes_between_records",
            "bytes where the blank line after a record should be (its Content-Length is likely wrong); "
            "warcio skipped this line and read on",
            sample_of(found.group(2)),
            None,
            int(found.group(1)),
        )
    rest = _NOT_FOLLOWED.sub("", text).strip()
    if rest:
        out.bad("unreadable_record", f"warcio: {' '.join(rest.split())}", None, None, offset)


def _emit(out: RawBatchBuilder, read: _Read) -> None:
    if read.fields is None:
        return
    kind, *fields = read.fields
    if kind == "doc":
        out.doc(*fields, line=None, offset=read.offset)
    else:
        out.bad(*fields, line=None, offset=read.offset)


def _whole_end(path: Path, gz: bool, read: _Read) -> int | None:
    """Where the last record read ends, separator included, if it is whole; None if it is cut."""
    with open(path, "rb") as stream:
        if not gz:
            separator = RECORD_END.get(read.format, RECORD_END["warc"])
            stream.seek(read.end)
            return read.end + len(separator) if stream.read(len(separator)) == separator else None
        stream.seek(read.offset)
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        left = read.end - read.offset
        while left > 0 and not member.eof:
            chunk = stream.read(min(READ_BLOCK, left))
            if not chunk:
                break
            left -= len(chunk)
            member.decompress(chunk, READ_BLOCK)
            while member.unconsumed_tail and not member.eof:  # bounded output, in steps
                member.decompress(member.unconsumed_tail, READ_BLOCK)
        return read.end if member.eof and not member.unused_data and left == 0 else None


def _check_rest(
    out: RawBatchBuilder, path: Path, gz: bool, whole_end: int, size: int, problem: str | None, at_eof: bool
) -> None:
    """Quarantine, once, what follows the last whole record, if anything does."""
    with open(path, "rb") as stream:
        stream.seek(whole_end)
        head = stream.read(4096)
    start = whole_end
    if not gz:  # blank lines between records are not a record
        blank = len(head) - len(head.lstrip(b"\r\n"))
        head, start = head[blank:], start + blank
    if start >= size:
        return
    if at_eof and _starts_a_record(head, gz):
        out.bad(
            "truncated_file",
            f"the file is cut {size - start} bytes into the record at offset "
            f"{start}; the whole records before it are kept",
            head,
            None,
            start,
        )
    else:
        out.bad(
            "unreadable_file",
            f"{size - start} bytes from here on are not a WARC record{f' ({problem})' if problem else ''}",
            head,
            None,
            start,
        )


def _starts_a_record(head: bytes, gz: bool) -> bool:
    """Whether bytes could be the start of a record (of which a cut file holds only a part)."""
    if gz:
        return head[:2] == GZIP_MAGIC[: len(head[:2])]
    return head[:5] == b"WARC/"[: len(head[:5])] or not head.startswith(b"WARC") and b"://" in head[:64]


# One link of an HTTP Link header: <target> and its parameters (RFC 8288); a comma inside <...> or
# inside a quoted parameter does not end it.
_LINK = re.compile(r'<([^>]*)>((?:\s*;\s*[^;,=\s]+(?:\s*=\s*(?:"[^"]*"|[^;,\s]*))?)*)')
_REL = re.compile(r';\s*rel\s*=\s*(?:"([^"]*)"|([^;,\s]*))', re.I)


def _licence_header_links(http_headers) -> list[str]:
    """The targets of an HTTP ``Link`` header's ``rel="license"`` links (RFC 8288)."""
    if http_headers is None:
        return []
    found = []
    for name, value in http_headers.headers:
        if name.lower() != "link":
            continue
        for target, params in _LINK.findall(value):
            rels = [(quoted or bare).lower().split() for quoted, bare in _REL.findall(params)]
            if any("license" in rel for rel in rels):
                found.append(target.strip())
    return found


def _read_record(record, main_content: bool, max_bytes: int, header_fields: tuple[str, ...] = ()) -> tuple:
    """``("doc", text, id, url, meta)`` or ``("bad", reason, detail, raw bytes)`` for a content record."""
    headers = record.rec_headers
    record_id = (headers.get_header("WARC-Record-ID") or "").strip("<>") or None
    url = headers.get_header("WARC-Target-URI")
    media, charset = _content_type(record)
    status = record.http_headers.get_statuscode() if record.http_headers is not None else None
    status = int(status) if status and status.isdigit() else None
    meta = {
        "warc_type": record.rec_type,
        "warc_date": headers.get_header("WARC-Date"),
        "content_type": media or None,
        "http_status": status,
    }
    for name in header_fields:
        value = headers.get_header(name)
        if value is None and record.http_headers is not None:
            value = record.http_headers.get_header(name)
        if value is not None:
            meta[name] = value
    links = _licence_header_links(record.http_headers)
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
        text, in_page = read_html(payload, charset, main_content)
        links += [link for link in in_page if link not in links]
    else:
        return "bad", "unsupported_content_type", f"payload is {media or 'of unknown type'}", payload
    if links:
        meta[LICENCE_LINKS] = links
    return "doc", text, record_id, url, orjson.dumps(meta).decode()
