"""resiliparse's parsed pages may only be freed on the thread that made them; the WARC reader frees
them there even while another thread holds its frames, as a Dask worker's sampling profiler does
every 10 ms (a page freed on the profiler's thread printed "HTMLTreePy is unsendable")."""

from __future__ import annotations

import sys
import threading

import pytest

from pipeline.io import html, warc
from tests.helpers import html_page, write_warc


def _on_another_thread(work) -> None:
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


@pytest.mark.parametrize("extract", [True, False], ids=["extracted", "extractor-fails"])
def test_pages_are_freed_on_the_reading_thread_while_a_profiler_holds_its_frames(tmp_path, monkeypatch, extract):
    page = html_page("Licensed", ["Some words of a page.", '<a rel="license" href="/by/4.0/">CC BY</a>'])
    path = write_warc(tmp_path / "a.warc.gz", [(f"https://example.org/{i}", "text/html", page) for i in range(3)])
    held: list = []
    decode = html.bytes_to_str

    def sampled(*args):  # as the profiler samples: another thread takes this thread's running frames
        reader = threading.get_ident()
        _on_another_thread(lambda: held.append(sys._current_frames()[reader]))
        return decode(*args)

    def failing(*args, **kwargs):
        raise ValueError("no text")

    monkeypatch.setattr(html, "bytes_to_str", sampled)
    if not extract:
        monkeypatch.setattr(html, "extract_plain_text", failing)
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}"))

    rows = [row for batch in warc.read_warc(path) for row in batch.to_pylist()]
    _on_another_thread(held.clear)  # the profiler lets go of the frames, on its own thread

    assert unraisable == []
    if extract:
        assert [r["reason"] for r in rows] == [None] * 3 and all("Some words of a page." in r["text"] for r in rows)
        assert all('"licence_links":["/by/4.0/"]' in r["meta"] for r in rows)
    else:
        assert [r["reason"] for r in rows] == ["unreadable_record"] * 3
