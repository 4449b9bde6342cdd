"""The WARC reader reads with FastWARC where it can and with warcio where it must: the documents
and quarantine records are the same either way, record by record."""

from __future__ import annotations

import gzip

import pytest

from pipeline.io import warc
from pipeline.io.warc import read_warc

HEADER_FIELDS = ("X-Licence", "WARC-Licence")


def http_block(status: bytes, headers: list[bytes], body: bytes) -> bytes:
    return status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def chunked(body: bytes, size: int = 7) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


PAGE = b"<html><body><p>A page of plain words that any reader keeps as they are.</p></body></html>"


def record(kind: bytes, uri: bytes | None, block: bytes, *extra: bytes, content_type: bytes | None = None) -> bytes:
    """One WARC record, written byte for byte (no writer to tidy what a crawler may get wrong)."""
    number = record.count = getattr(record, "count", 0) + 1
    lines = [b"WARC/1.0", b"WARC-Type: " + kind, b"WARC-Record-ID: <urn:uuid:%08d>" % number]
    if uri is not None:
        lines.append(b"WARC-Target-URI: " + uri)
    lines += [b"WARC-Date: 2024-04-25T16:24:47Z", *extra]
    if content_type is None and kind.lower() in (b"response", b"request"):
        content_type = b"application/http; msgtype=" + kind.lower()
    if content_type:
        lines.append(b"Content-Type: " + content_type)
    lines.append(b"Content-Length: %d" % len(block))
    return b"\r\n".join(lines) + b"\r\n\r\n" + block + b"\r\n\r\n"


def response(
    uri: bytes, headers: list[bytes], body: bytes = PAGE, status: bytes = b"HTTP/1.1 200 OK", extra: tuple = ()
) -> bytes:
    return record(b"response", uri, http_block(status, headers, body), *extra)


def crawl_records() -> list[bytes]:
    """Records of every kind the reader meets, the awkward ones included."""
    html = b"Content-Type: text/html; charset=utf-8"
    return [
        record(b"warcinfo", None, b"software: tests\r\n", content_type=b"application/warc-fields"),
        record(b"request", b"https://a.example/", http_block(b"GET / HTTP/1.1", [b"Host: a.example"], b"")),
        response(b"https://a.example/", [html, b'Link: <https://creativecommons.org/licenses/by/4.0/>; rel="license"']),
        response(b"https://a.example/chunked", [html, b"Transfer-Encoding: chunked"], chunked(PAGE)),
        response(b"https://a.example/gzipped", [html, b"Content-Encoding: gzip"], gzip.compress(PAGE, mtime=0)),
        response(b"<https://a.example/wget style>", [html]),
        response(b"https://a.example/utf8", [html, "X-Licence: cc-by café".encode()]),
        response(
            b"https://a.example/latin1", [html], b"<p>caf\xe9</p>", extra=("WARC-Licence: caf\xe9".encode("latin-1"),)
        ),
        response(b"https://a.example/nothere", [html], status=b"HTTP/1.0 404 Not Found"),
        response(b"https://a.example/odd", [html], status=b"HTTP/1.1 2xx Fine"),
        response(b"https://a.example/icy", [html], status=b"ICY 200 OK"),
        response(b"https://a.example/folded", [b"Content-Type: text/html;", b"  charset=utf-8"]),
        response(
            b"https://a.example/spaced",
            [b"Content-Type :  text/html ; charset=utf-8 \t", b'link:\t<https://x.example/l>;rel="license"  '],
            extra=(b"WARC-Licence:  a b  ",),
        ),
        response(b"https://a.example/untyped", [b"Server: tests"]),
        response(b"https://a.example/image", [b"Content-Type: image/png"], b"\x89PNG\r\n\x1a\n"),
        response(b"https://a.example/bad-utf8", [b"Content-Type: text/plain"], b"caf\xe9"),
        response(b"https://a.example/charset", [b"Content-Type: text/plain; charset=nonesuch"], b"text"),
        response(b"https://a.example/html-charset", [b"Content-Type: text/html; charset=utf8mb4"]),
        record(b"response", b"https://a.example/empty", b""),
        record(b"response", b"dns:a.example", b"a.example. 60 IN A 192.0.2.1\r\n", content_type=b"text/dns"),
        record(b"Response", b"https://a.example/capital", http_block(b"HTTP/1.1 200 OK", [html], PAGE)),
        record(b"resource", b"https://a.example/notes.txt", b"Plain notes.", content_type=b"text/plain"),
        record(b"resource", b"metadata://crawler/log.txt", b"crawl log", content_type=b"text/plain"),
        record(b"conversion", b"https://a.example/", b"Extracted text.\nTwo lines.", content_type=b"text/plain"),
        record(b"metadata", b"https://a.example/", b"fetchTimeMs: 12\r\n", content_type=b"application/warc-fields"),
    ]


def write(path, records: list[bytes], gz: bool):
    path.write_bytes(b"".join(gzip.compress(r, mtime=0) for r in records) if gz else b"".join(records))
    return path


def rows(path) -> list[dict]:
    return [row for batch in read_warc(path, header_fields=HEADER_FIELDS) for row in batch.to_pylist()]


def warcio_rows(path, monkeypatch) -> list[dict]:
    """The rows as warcio alone reads the file (the reader before FastWARC)."""
    with monkeypatch.context() as patched:
        patched.setattr(warc, "_read_fast", lambda *args: (yield from ()) or 0)
        return rows(path)


def fast_resume(path) -> int | None:
    """Where FastWARC's reading leaves the rest of the file to warcio (None: nowhere)."""
    reads = warc._read_fast(path, warc.RawBatchBuilder(10_000), lambda view: None, HEADER_FIELDS)
    with pytest.raises(StopIteration) as done:
        while True:
            next(reads)
    return done.value.value


@pytest.mark.parametrize("gz", [True, False])
def test_every_kind_of_record_reads_as_warcio_reads_it(tmp_path, monkeypatch, gz):
    path = write(tmp_path / "crawl.warc", crawl_records(), gz)
    fast, slow = rows(path), warcio_rows(path, monkeypatch)
    assert fast == slow
    by_url = {row["url"]: row for row in fast}
    # The cases the comparison must hold for are there, as warcio reads them.
    assert "A page of plain words" in by_url["https://a.example/chunked"]["text"]
    assert "A page of plain words" in by_url["https://a.example/gzipped"]["text"]
    assert "https://a.example/wget%20style" in by_url
    assert '"X-Licence":"cc-by café"' in by_url["https://a.example/utf8"]["meta"]
    assert '"WARC-Licence":"café"' in by_url["https://a.example/latin1"]["meta"]
    assert '"http_status":404' in by_url["https://a.example/nothere"]["meta"]
    # An HTML page's charset Python does not know is passed over (detected), not a stop.
    assert "A page of plain words" in by_url["https://a.example/html-charset"]["text"]
    assert '"WARC-Licence":"a b","licence_links":["https://x.example/l"]' in by_url["https://a.example/spaced"]["meta"]
    assert [row["reason"] for row in fast if row["reason"]] == [
        "unsupported_content_type",  # the image
        "invalid_utf8",
        "unknown_charset",
        "unsupported_content_type",  # the empty response: no HTTP headers, so application/http
        "unsupported_content_type",  # the DNS record
    ]
    assert "https://a.example/capital" not in by_url and "metadata://crawler/log.txt" not in by_url
    # FastWARC read the whole file: nothing was left to warcio's whole-file reading.
    assert fast_resume(path) is None


# What FastWARC leaves to warcio, record by record: HTTP encodings to undo, header values warcio
# decodes its own way, a status line that is not HTTP/1.x, an empty response or a DNS record (HTTP
# headers parsed by one reader and not the other).
AWKWARD = (b"/chunked", b"/gzipped", b"/utf8", b"/latin1", b"/icy", b"/empty", b"dns:")


@pytest.mark.parametrize("gz", [True, False])
def test_plain_records_are_read_without_warcio(tmp_path, monkeypatch, gz):
    """Records FastWARC can be trusted with never reach warcio, so the speed is FastWARC's."""
    plain = [r for r in crawl_records() if not any(u in r for u in AWKWARD)]
    path = write(tmp_path / "plain.warc", plain, gz)
    expected = warcio_rows(path, monkeypatch)

    def no_warcio(*args, **kwargs):
        raise AssertionError("warcio was asked to read")

    monkeypatch.setattr(warc, "ArchiveIterator", no_warcio)
    assert rows(path) == expected
    # warcinfo, request, capitalised type, metadata:// resource and metadata give nothing.
    assert len(plain) == 18 and len(expected) == 13


def test_a_file_gzipped_as_one_stream_reads_as_warcio_reads_it(tmp_path, monkeypatch):
    """One gzip member for every record (not the per-record members WARC files use) has no
    member trailers to check each record by: warcio reads it, as before."""
    path = tmp_path / "one-member.warc.gz"
    path.write_bytes(gzip.compress(b"".join(crawl_records()), mtime=0))
    assert rows(path) == warcio_rows(path, monkeypatch)


def with_length(record_bytes: bytes, change: int) -> bytes:
    """The record with its Content-Length (the last WARC header) changed by ``change``."""
    head, name, rest = record_bytes.partition(b"Content-Length: ")
    number, _, tail = rest.partition(b"\r\n")
    return head + name + b"%d\r\n" % (int(number) + change) + tail


@pytest.mark.parametrize("gz", [True, False])
def test_damage_in_the_middle_is_read_by_warcio_from_the_last_whole_record(tmp_path, monkeypatch, gz):
    """A record whose Content-Length is short, one that is longer, bytes between records, a record
    ended by other bytes than its separator, an uncompressed record inside a gzip file: what comes
    before is FastWARC's, the rest warcio's, and the whole equals warcio's reading."""
    records = crawl_records()
    cases = {
        "short": records[:4] + [with_length(records[2], +1000)] + records[4:],  # the block is shorter
        "long": records[:4] + [with_length(records[6], -10)] + records[4:],  # the block is longer
        "between": records[:4] + [b"stray bytes\r\n"] + records[4:],
        "separator": records[:4] + [records[4][:-4] + b"abcd"] + records[5:],  # the right size, not CRLFs
    }
    for name, damaged in cases.items():
        path = write(tmp_path / f"{name}.warc", damaged, gz)
        ends = [len(b"".join(gzip.compress(r, mtime=0) if gz else r for r in damaged[:n])) for n in (3, 4)]
        if gz and name == "between":  # a plain record after the fourth member
            data = path.read_bytes()
            path.write_bytes(data[: ends[1]] + records[3] + data[ends[1] :])
        assert rows(path) == warcio_rows(path, monkeypatch), name
        # FastWARC read up to the damaged record; in a gzip file, a member followed by no member
        # FastWARC can read is not known to be whole, so warcio reads from that member.
        assert fast_resume(path) == ends[0 if gz and name == "between" else 1], name


@pytest.mark.parametrize("gz", [True, False])
def test_a_file_cut_anywhere_reads_as_warcio_reads_it(tmp_path, monkeypatch, gz):
    """Cuts near every record's end and at every 29th byte between: the same rows as warcio's
    reading, where FastWARC reads up to the cut and warcio the rest."""
    # The framing is what a cut tests: the page's bytes stand in for its extracted text.
    monkeypatch.setattr(warc, "read_html", lambda payload, charset, main_content=True: (repr(payload), []))
    records = crawl_records()
    data = write(tmp_path / "whole.warc", records, gz).read_bytes()
    ends = [len(b"".join(gzip.compress(r, mtime=0) if gz else r for r in records[:n])) for n in range(len(records))]
    cuts = sorted({cut for end in ends for cut in range(end - 4, end + 5)} | set(range(1, len(data), 29)))
    path = tmp_path / "cut.warc"
    wrong = []
    for cut in (c for c in cuts if 0 < c <= len(data)):
        path.write_bytes(data[:cut])
        if rows(path) != warcio_rows(path, monkeypatch):
            wrong.append(cut)
    assert len(cuts) > 300 and wrong == []


@pytest.mark.parametrize("gz", [True, False])
def test_a_page_the_extractor_fails_on_is_one_bad_record(tmp_path, monkeypatch, gz):
    """It was taken for damage (the file cut there, every later record lost); now it is one
    quarantine record, and the records after it are read."""
    html = b"Content-Type: text/html"
    pages = [response(b"https://a.example/%d" % i, [html], PAGE.replace(b"plain", b"page%d" % i)) for i in range(3)]
    path = write(tmp_path / "pages.warc", pages, gz)
    real = warc.read_html

    def fails_on_the_second(payload, charset, main_content=True):
        if b"page1" in payload:
            raise ValueError("the extractor gave up")
        return real(payload, charset, main_content)

    monkeypatch.setattr(warc, "read_html", fails_on_the_second)
    for read in (rows(path), warcio_rows(path, monkeypatch)):
        assert [(r["url"], r["reason"]) for r in read] == [
            ("https://a.example/0", None),
            (None, "unreadable_record"),
            ("https://a.example/2", None),
        ]
        assert read[1]["detail"] == "HTML: ValueError: the extractor gave up"
