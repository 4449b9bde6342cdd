"""WARC and WET reader (FastWARC, with warcio where a file or a record needs it), with HTML turned
into text by resiliparse (:mod:`pipeline.io.html`).

Documents are the records that carry content: ``response`` and ``resource`` records (HTML is
extracted to plain text, ``text/plain`` is taken as it is) and WET ``conversion`` records.
Protocol records (``request``, ``warcinfo``, ``metadata``, ``revisit``) are not documents and are
passed over, as are the crawler's own files (``resource`` records at ``metadata://`` URIs, such as
wget's log). A response whose payload is neither HTML nor text (an image, a PDF) is quarantined as
``unsupported_content_type``, so that every content record is accounted for.

A record's id is its ``WARC-Record-ID``, its url the ``WARC-Target-URI``; ``meta`` keeps the WARC
date, the HTTP status and the content type, an HTML page's size in bytes (``html_bytes``, which
the source stage tallies against the text extracted from it), and a record's licence links where
it has any, as ``licence_links``: the targets of the HTTP ``Link`` headers with ``rel="license"``, then the
``href`` of every element of an HTML page with ``rel="license"``. A source reads them as each page's
licence with ``licence_field = "licence_links"`` (pipeline.licence); any other ``licence_field``
of a WARC source names a WARC or HTTP header, which ``meta`` then keeps.

FastWARC (Resiliparse's WARC parser, in C++) reads a file about four times faster than warcio, but
like warcio it reads a damaged file without a word, and it parses headers its own way. So a record
it reads is taken only once its framing is checked against the bytes (its block followed by the
record separator; in a gzip file, its member's size as the gzip trailer states it) and only where
the fields read from it are the ones warcio would give (plain ASCII values, no HTTP transfer or
content encoding, an ``HTTP/1.x`` status line); any other record is read by warcio at its offset.
A file whose framing does not check out from some record on (an ARC file, bytes between records, a
cut) is read by warcio, as it always was, from that record on.
"""

from __future__ import annotations

import functools
import io
import logging
import mmap
import os
import re
import zlib
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from warcio import archiveiterator, bufferedreaders
from warcio.archiveiterator import ArchiveIterator

from pipeline.io.html import HtmlOptions, read_html
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
# The meta key of an HTML page's size in bytes, beside the length of the text extracted from it.
HTML_BYTES = "html_bytes"

CONTENT_RECORDS = {"response", "resource", "conversion"}
HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml")


@dataclass
class _View:
    """What a document is made from, read from a record by warcio or FastWARC alike."""

    rec_type: str | None
    warc: Callable[[str], str | None]  # a WARC header's value by name
    http: Callable[[str], str | None] | None  # an HTTP header's value by name; None without HTTP headers
    http_pairs: Sequence[tuple[str, str]]  # every HTTP header, in order
    status: str | None  # the HTTP status code as the status line gives it
    payload: Callable[[], object]  # the payload's reader (after any HTTP encoding is undone)


def _warcio_view(record) -> _View:
    http = record.http_headers
    return _View(
        record.rec_type,
        record.rec_headers.get_header,
        None if http is None else http.get_header,
        () if http is None else http.headers,
        None if http is None else http.get_statuscode(),
        record.content_stream,
    )


def _is_content(rec_type: str | None, uri: str | None) -> bool:
    return rec_type in CONTENT_RECORDS and not (uri or "").startswith("metadata://")


def _content_type(view: _View) -> tuple[str, str | None]:
    """The payload's media type and charset, from the HTTP headers (or the WARC headers)."""
    value = ((view.http or view.warc)("Content-Type") or "").lower()
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
    html: HtmlOptions = HtmlOptions(),
    limits: ReadLimits = ReadLimits(),
    header_fields: tuple[str, ...] = (),
) -> Iterator[pa.RecordBatch]:
    """Yield raw-record batches from one WARC or WET file (gzip or plain).

    warcio and FastWARC read a cut file without complaint, so wholeness is checked here: every
    record but the last is whole (another record followed it); the last must end where the file
    ends (its gzip member complete, or its block followed by the record separator). Where the file
    is cut, the records before the cut are kept and the cut record, whatever it was, is quarantined
    once as ``truncated_file`` at its offset; bytes after the last whole record that do not start a
    record are quarantined once as ``unreadable_file``. ``header_fields``: WARC or HTTP headers
    whose value each document's ``meta`` keeps under the header's name (a licence header, say)."""
    out = RawBatchBuilder(limits.batch_docs)

    def read(view: _View) -> tuple:
        return _read_record(view, html, limits.max_doc_bytes, header_fields)

    resume = yield from _read_fast(path, out, read, header_fields)
    if resume is not None:
        yield from _read_checked(path, out, read, resume)
    batch = out.flush()
    if batch is not None:
        yield batch


def _read_checked(
    path: Path, out: RawBatchBuilder, read: Callable[[_View], tuple], skip_before: int
) -> Iterator[pa.RecordBatch]:
    """Read the file with warcio, checking every record's wholeness and quarantining what is not
    (:func:`read_warc`); records that begin before ``skip_before`` were read already and give
    nothing."""
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
                    # records.offset is where this record begins (read before the record is).
                    if records.offset >= skip_before and _is_content(
                        record.rec_type, record.rec_headers.get_header("WARC-Target-URI")
                    ):
                        fields = read(_warcio_view(record))
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


SEPARATOR = RECORD_END["warc"]
HTTP_SCHEMES = ("http:", "https:")
# FastWARC's record types (flags, by their value) that are documents.
FAST_TYPES = {int(getattr(WarcRecordType, name)): name for name in CONTENT_RECORDS}


@dataclass
class _Framed:
    """A record FastWARC read in a gzip file, kept back until its member's end is known."""

    offset: int
    size: int  # its bytes uncompressed (headers, block and separator) modulo 2**32, as gzip keeps it
    fields: tuple | None


def _read_fast(
    path: Path, out: RawBatchBuilder, read: Callable[[_View], tuple], header_fields: tuple[str, ...]
) -> Generator[pa.RecordBatch, None, int | None]:
    """Read with FastWARC the records whose framing checks out against the file's bytes, from the
    first on; return the offset from which warcio must read the rest (None where nothing is
    left, 0 where FastWARC read nothing that counts).

    In a plain file a record is whole where its headers' blank line, ``Content-Length`` bytes and
    the separator are there and the next record begins right after them. In a gzip file each
    record must be a gzip member of its own whose size, as the member's trailer states it, is the
    record's headers, block and separator, and the last member must end with the file."""
    whole_end = 0
    try:
        size = path.stat().st_size
        with open(path, "rb") as stream:
            head = stream.read(8)
            gz = head[:2] == GZIP_MAGIC
            if not gz and not head.startswith(b"WARC/"):
                return 0  # an ARC file, or not a WARC at all: warcio says which
            stream.seek(0)
            # The bytes of a plain file, to check each record's framing by (a gzip file's members
            # are checked by their trailers, read with os.pread).
            with nullcontext() if gz else mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as body:
                # FastWARC is given the open file: given a path, it goes by the name's extension.
                records = iter(FastIterator(stream, parse_http=True, auto_decode="none", fsspec_args=False))
                pending: _Framed | None = None
                while True:
                    try:
                        record = next(records, None)
                    except OSError:  # FastWARC's word for a damaged stream
                        break
                    if record is None:
                        break
                    offset = record.stream_pos
                    if pending is not None:  # the member before this one ends here
                        if offset <= pending.offset or _member_size(stream, offset) != pending.size:
                            break
                        _emit(out, _Read(pending.offset, offset, "warc", pending.fields))
                        whole_end, pending = offset, None
                    if offset != whole_end:
                        break
                    warc = _first_values(record.headers.astuples())
                    # The block's length as the WARC headers give it (FastWARC's content_length
                    # is what follows the HTTP headers, where it parsed them).
                    length = warc.get("content-length", "")
                    if not (length.isascii() and length.isdigit()):
                        break
                    fields = _fast_fields(path, offset, record, warc, int(length), read, header_fields)
                    if fields is False:
                        break
                    if gz:
                        pending = _Framed(offset, (_header_size(record) + int(length) + 4) % 2**32, fields)
                    else:
                        headers_end = body.find(SEPARATOR, offset)
                        end = headers_end + 4 + int(length) + 4
                        if headers_end < 0 or body[end - 4 : end] != SEPARATOR:
                            break
                        _emit(out, _Read(offset, end, "warc", fields))
                        whole_end = end
                    if out.full:
                        yield out.flush()
                if (
                    pending is not None
                    and pending.offset == whole_end
                    and _member_size(stream, size) == pending.size
                    and _whole_end(path, gz, _Read(pending.offset, size, "warc", None)) == size
                ):
                    _emit(out, _Read(pending.offset, size, "warc", pending.fields))
                    whole_end = size
    except (OSError, ValueError, zlib.error):  # unreadable, empty (mmap) or not gzip after all
        return whole_end  # warcio reads from here and says why
    return None if whole_end == size else whole_end


def _member_size(stream, end: int) -> int:
    """The size of the gzip member that ends at ``end``, as its trailer states it (modulo 2**32)."""
    return int.from_bytes(os.pread(stream.fileno(), 4, end - 4), "little") if end >= 4 else -1


def _header_size(record) -> int:
    """The bytes of a record's WARC headers and the blank line after them, as FastWARC writes
    them back (which matches the file where the headers are plainly written; where it does not,
    the member's size does not match and warcio reads the file from there)."""
    sink = io.BytesIO()
    return record.headers.write(sink)


def _fast_fields(
    path: Path,
    offset: int,
    record,
    warc: dict[str, str],
    length: int,
    read: Callable[[_View], tuple],
    header_fields: tuple[str, ...],
):
    """The record's document fields (``None`` for a record that is not a document), read from
    FastWARC's record (``warc``: its WARC headers, :func:`_first_values`) where its values are the
    ones warcio would give, else by warcio at the record's offset; ``False`` where warcio cannot
    read it there either."""
    rec_type, uri = warc.get("warc-type"), _warcio_uri(warc.get("warc-target-uri"))
    if uri is not None:
        warc["warc-target-uri"] = uri
    if not _is_content(rec_type, uri):
        return None
    view = _fast_view(record, rec_type, uri, length, warc, header_fields)
    if view is not None:
        try:
            return read(view)
        except OSError:  # FastWARC failed partway through the payload: warcio reads from here
            return False
    try:
        with open(path, "rb") as stream, captured_writes():
            stream.seek(offset)
            return read(_warcio_view(next(iter(ArchiveIterator(stream)))))
    except Exception:  # warcio raises assorted errors on damaged input
        return False


def _warcio_uri(uri: str | None) -> str | None:
    """A WARC-Target-URI as warcio gives it: without the angle brackets some writers (wget) put
    around it, spaces percent-encoded."""
    if uri is not None and uri.startswith("<") and uri.endswith(">"):
        uri = uri[1:-1]
    return uri.replace(" ", "%20") if uri is not None and " " in uri else uri


def _first_values(pairs) -> dict[str, str]:
    """Each header's first value by its lower-cased name, as warcio's ``get_header`` finds it."""
    found: dict[str, str] = {}
    for name, value in pairs:
        found.setdefault(name.lower(), value)
    return found


# The WARC and HTTP headers a document is made from; the HTTP encodings that warcio undoes.
_WARC_READ = ("warc-type", "warc-target-uri", "warc-record-id", "warc-date", "content-type")
_HTTP_READ = ("content-type", "link")
_ENCODINGS = ("content-encoding", "transfer-encoding")


@functools.lru_cache(maxsize=64)
def _names_read(header_fields: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
    """The WARC and the HTTP headers (lower-cased) a document is made from, ``header_fields``
    among them."""
    folded = tuple(name.lower() for name in header_fields)
    return (*_WARC_READ, *folded), frozenset((*_HTTP_READ, *folded))


def _fast_view(
    record, rec_type: str, uri: str | None, length: int, warc: dict[str, str], header_fields: tuple[str, ...]
):
    """A view of a FastWARC record where its fields are certainly warcio's, else None: the record
    type as FastWARC parsed it, HTTP headers where (and only where) warcio parses them, ASCII values
    in every header read (FastWARC and warcio decode other bytes differently), no HTTP encoding to
    undo and an ``HTTP/1.x`` status line."""
    if FAST_TYPES.get(int(record.record_type)) != rec_type:
        return None
    # warcio parses a response's HTTP headers where its URI is http(s) and its block not empty.
    http_expected = rec_type == "response" and (uri or "").startswith(HTTP_SCHEMES) and length > 0
    if record.is_http != http_expected:
        return None
    warc_read, http_read = _names_read(header_fields)
    if not all(warc.get(name, "").isascii() for name in warc_read):
        return None
    http = None
    pairs: tuple = ()
    status = None
    if http_expected:
        headers = record.http_headers
        if headers is None:  # cut before its HTTP headers end
            return None
        pairs = headers.astuples()
        http = _first_values(pairs)
        line = headers.status_line or ""
        if (
            any(name in http for name in _ENCODINGS)
            or not line.isascii()
            or not line.startswith(("HTTP/1.0 ", "HTTP/1.1 "))
            or line != line.strip()
            or not all(value.isascii() for name, value in pairs if name.lower() in http_read)
        ):
            return None
        status = line.split(" ", 1)[1].strip().split(" ", 1)[0]
    reader = record.reader
    return _View(
        rec_type,
        lambda name: warc.get(name.lower()),
        None if http is None else (lambda name: http.get(name.lower())),
        pairs,
        status,
        lambda: reader,
    )


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
        try:
            while left > 0 and not member.eof:
                chunk = stream.read(min(READ_BLOCK, left))
                if not chunk:
                    break
                left -= len(chunk)
                member.decompress(chunk, READ_BLOCK)
                while member.unconsumed_tail and not member.eof:  # bounded output, in steps
                    member.decompress(member.unconsumed_tail, READ_BLOCK)
        except zlib.error:  # not a gzip member (a plain record in a gzip file), or a damaged one
            return None
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


def _licence_header_links(http_pairs: Sequence[tuple[str, str]]) -> list[str]:
    """The targets of an HTTP ``Link`` header's ``rel="license"`` links (RFC 8288)."""
    found = []
    for name, value in http_pairs:
        if name.lower() != "link":
            continue
        for target, params in _LINK.findall(value):
            rels = [(quoted or bare).lower().split() for quoted, bare in _REL.findall(params)]
            if any("license" in rel for rel in rels):
                found.append(target.strip())
    return found


def _read_record(view: _View, html: HtmlOptions, max_bytes: int, header_fields: tuple[str, ...] = ()) -> tuple:
    """``("doc", text, id, url, meta)`` or ``("bad", reason, detail, raw bytes)`` for a content record."""
    record_id = (view.warc("WARC-Record-ID") or "").strip("<>") or None
    url = view.warc("WARC-Target-URI")
    media, charset = _content_type(view)
    status = int(view.status) if view.status and view.status.isdigit() else None
    meta = {
        "warc_type": view.rec_type,
        "warc_date": view.warc("WARC-Date"),
        "content_type": media or None,
        "http_status": status,
    }
    for name in header_fields:
        value = view.warc(name)
        if value is None and view.http is not None:
            value = view.http(name)
        if value is not None:
            meta[name] = value
    links = _licence_header_links(view.http_pairs)
    html_bytes = None
    payload = view.payload().read(max_bytes + 1)
    if len(payload) > max_bytes:
        return "bad", "too_large", f"payload of more than {max_bytes} bytes", payload
    if view.rec_type == "conversion" or media.startswith("text/plain"):
        try:
            text = payload.decode(charset or "utf-8")
        except UnicodeDecodeError as error:
            return "bad", "invalid_utf8", str(error), payload
        except LookupError as error:
            return "bad", "unknown_charset", str(error), payload
    elif media.startswith(HTML_TYPES) or (not media and payload.lstrip()[:1] == b"<"):
        try:
            text, in_page = read_html(payload, charset, html)
        except Exception as error:  # a page the parser or extractor fails on is one bad record
            return "bad", "unreadable_record", f"HTML: {type(error).__name__}: {error}", payload
        links += [link for link in in_page if link not in links]
        html_bytes = len(payload)
    else:
        return "bad", "unsupported_content_type", f"payload is {media or 'of unknown type'}", payload
    if links:
        meta[LICENCE_LINKS] = links
    if html_bytes is not None:
        meta[HTML_BYTES] = html_bytes
    return "doc", text, record_id, url, orjson.dumps(meta).decode()
