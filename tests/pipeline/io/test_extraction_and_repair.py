"""The extractor's settings reach the WARC reader, each HTML page's bytes are recorded beside its
text, and the source stage tallies what extraction kept per source (``stats.json``,
``extraction``); a source's Unicode repair (``repaired``)."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pytest
from pydantic import ValidationError

from pipeline.api import repair_documents
from pipeline.config import SourceConfig
from pipeline.formats.configfile import ConfigError
from pipeline.formats.extraction import LEAST_PAGES, SHARE_LABELS, Extraction, band, merged
from pipeline.io.html import HtmlOptions
from pipeline.io.records import RAW_SCHEMA
from pipeline.io.repair import RepairOptions, repair_texts
from pipeline.io.warc import read_warc
from tests.helpers import source_config, source_run, write_jsonl, write_warc

PAGE = b"""<html><head><title>Mills</title></head><body>
<nav><ul><li><a href="/">Home page link</a></li><li><a href="/mills">All the mills</a></li></ul></nav>
<article><h1>The old mill</h1>
<p>The old mill on the river was rebuilt in the spring after the winter floods had broken its wheel.</p>
<p>Its miller, who had worked there for thirty years, ground the first flour of the season in May.</p>
<img src="wheel.jpg" alt="The new oak wheel turning">
<div class="advert">Buy cheap flour sacks today</div>
</article></body></html>"""


def texts(path, html: HtmlOptions = HtmlOptions()) -> list[dict]:
    return [row for batch in read_warc(path, html=html) for row in batch.to_pylist()]


@pytest.fixture
def crawl(tmp_path):
    return write_warc(
        tmp_path / "crawl.warc.gz",
        [("https://mills.example/old", "text/html", PAGE)],
        conversions=[("https://mills.example/wet", "A conversion record's plain text.")],
    )


def test_each_extractor_setting_changes_what_the_reader_keeps(crawl):
    default = texts(crawl)[0]["text"]
    assert "rebuilt in the spring" in default and "All the mills" not in default
    assert "oak wheel" not in default

    whole = texts(crawl, HtmlOptions(main_content=False))[0]["text"]
    assert "All the mills" in whole and "rebuilt in the spring" in whole
    assert "oak wheel" in texts(crawl, HtmlOptions(alt_texts=True))[0]["text"]
    assert "cheap flour" in whole
    assert "cheap flour" not in texts(crawl, HtmlOptions(main_content=False, skip=(".advert",)))[0]["text"]


def test_an_html_page_records_its_bytes_and_a_conversion_does_not(crawl):
    page, conversion = texts(crawl)
    assert json.loads(page["meta"])["html_bytes"] == len(PAGE)
    assert "html_bytes" not in json.loads(conversion["meta"])


def test_the_source_config_gives_the_reader_its_settings_and_refuses_them_elsewhere():
    source = SourceConfig(
        name="cc", reader="warc", paths=["x"], html_main_content=False, html_alt_texts=True, html_skip=[".advert"]
    )
    assert source.html_options() == HtmlOptions(main_content=False, alt_texts=True, skip=(".advert",))
    with pytest.raises(ValidationError, match="html_alt_texts: only a WARC source extracts HTML"):
        SourceConfig(name="j", reader="jsonl", paths=["x"], html_alt_texts=True)
    # A manifest's config spells every key with its default: it reads back.
    SourceConfig(name="j", reader="jsonl", paths=["x"], html_main_content=True, html_alt_texts=False, html_skip=[])
    with pytest.raises(ValidationError, match="html_skip: 'div\\[' is no CSS selector"):
        SourceConfig(name="cc", reader="warc", paths=["x"], html_skip=["div["])


def raw_batch(rows: list[tuple]) -> pa.RecordBatch:
    """Rows of (text, url, html_bytes or None, reason) as a reader's raw batch."""
    columns = {name: [None] * len(rows) for name in RAW_SCHEMA.names}
    columns["text"] = [text for text, *_ in rows]
    columns["url"] = [url for _, url, *_ in rows]
    columns["meta"] = [json.dumps({} if size is None else {"html_bytes": size}) for _, _, size, _ in rows]
    columns["offset"] = [100 * i for i in range(len(rows))]
    columns["reason"] = [reason for *_, reason in rows]
    return pa.RecordBatch.from_pydict(columns, schema=RAW_SCHEMA)


def test_the_tally_bands_pages_by_kept_share_and_names_those_that_kept_least():
    assert [band(0, 100), band(1, 1000), band(15, 1000), band(60, 1000), band(600, 1000)] == [0, 1, 2, 4, 7]
    found = Extraction()
    found.add_batch(
        raw_batch(
            [
                ("a" * 50, "https://x/ok", 1000, None),  # 5%
                ("", "https://x/empty", 4000, None),  # no text
                ("a" * 5, "https://x/least", 1000, None),  # 0.5%
                ("plain", "https://x/txt", None, None),  # no HTML: not a page
                (None, None, None, "too_large"),  # a bad record: not counted
            ]
        ),
        "a.warc.gz",
        "html_bytes",
    )
    assert (found.pages, found.html_bytes, found.text_chars) == (3, 6000, 55)
    assert found.bands == [1, 1, 0, 0, 1, 0, 0, 0] and len(found.bands) == len(SHARE_LABELS)
    assert [p["url"] for p in found.least] == ["https://x/empty", "https://x/least", "https://x/ok"]
    assert found.least[1] == {
        "file": "a.warc.gz",
        "url": "https://x/least",
        "offset": 200,
        "html_bytes": 1000,
        "text_chars": 5,
    }

    other = Extraction()
    other.add_batch(raw_batch([("a" * 2, f"https://y/{i}", 1000, None) for i in range(30)]), "b.warc.gz", "html_bytes")
    both = merged([{"extraction": {"cc": found.to_dict()}}, {"extraction": {"cc": other.to_dict()}}, {}])["cc"]
    assert both.pages == 33 and sum(both.bands) == 33 and len(both.least) == LEAST_PAGES
    assert [p["url"] for p in both.least[:2]] == ["https://x/empty", "https://y/0"]
    assert both.least[-1]["text_chars"] == 2  # the 0.2% pages fill the list before the 0.5% one


def test_the_source_stage_records_each_warc_source_s_extraction(tmp_path, crawl):
    write_jsonl(tmp_path / "j" / "a.jsonl", [{"text": "a line of text"}])
    config = source_config(
        tmp_path / "run",
        [
            {"name": "cc", "reader": "warc", "paths": [str(crawl)]},
            {"name": "j", "reader": "jsonl", "paths": [str(tmp_path / "j")]},
        ],
    )
    stats = source_run(config)
    assert list(stats.extraction) == ["cc"]
    cc = Extraction.from_dict(stats.extraction["cc"])
    assert cc.pages == 1 and cc.html_bytes == len(PAGE)
    assert [(p["file"], p["url"]) for p in cc.least] == [("crawl.warc.gz", "https://mills.example/old")]
    assert 150 < cc.text_chars < 300 and cc.least[0]["offset"] > 0


# ---- Unicode repair ------------------------------------------------------------------------------

BROKEN = [
    "It\u00e2\u20ac\u2122s the river\u00e2\u20ac\u201dand the mill",  # mojibake of ’ and —
    "Fish &amp; chips",  # an entity left in text
    "\ufeffA byte-order mark and a bell\x07",  # control characters
    "Curly \u201cquotes\u201d and the ligature \ufb01ne stay",  # ways of writing, not damage
    None,
]


def test_repair_fixes_damage_and_keeps_ways_of_writing():
    texts, changed = repair_texts(pa.array(BROKEN, pa.string()), RepairOptions())
    assert texts.to_pylist() == [
        "It\u2019s the river\u2014and the mill",
        "Fish & chips",
        "A byte-order mark and a bell",
        BROKEN[3],
        None,
    ]
    assert changed == 3
    uncurled, _ = repair_texts(pa.array(BROKEN[3:4]), RepairOptions(uncurl_quotes=True, fix_latin_ligatures=True))
    assert uncurled.to_pylist() == ['Curly "quotes" and the ligature fine stay']


def test_a_source_repairs_its_text_before_the_checks_and_counts_the_changes(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in [*BROKEN[:4], "\ufeff"]])
    sources = [{"name": "j", "reader": "jsonl", "paths": [str(tmp_path / "in")]}]
    stats = source_run(source_config(tmp_path / "fixed", [{**sources[0], "unicode_repair": {"uncurl_quotes": True}}]))
    assert stats.repaired == {"j": 5}
    assert stats.quarantined == {"empty_text": 1}  # a text of nothing but a byte-order mark
    texts = docs_text(tmp_path / "fixed")
    assert "It's the river\u2014and the mill" in texts and 'Curly "quotes" and the ligature \ufb01ne stay' in texts
    plain = source_run(source_config(tmp_path / "plain", sources))
    assert plain.repaired is None and "Fish &amp; chips" in docs_text(tmp_path / "plain")


def docs_text(run_dir) -> list[str]:
    return pl.read_parquet(run_dir / "run" / "source" / "docs" / "*.parquet")["text"].to_list()


def test_repair_documents_repairs_a_frame_as_a_source_would():
    docs = pl.DataFrame({"id": ["a", "b", "c"], "text": BROKEN[:3]})
    repaired = repair_documents(docs, {"remove_control_chars": False})
    assert repaired["repaired"].to_list() == [True, True, False]  # control characters kept, as asked
    assert repaired["text"].to_list() == ["It\u2019s the river\u2014and the mill", "Fish & chips", BROKEN[2]]
    with pytest.raises(ConfigError, match="unicode_repair.uncurl: unknown key; did you mean 'uncurl_quotes'"):
        repair_documents(docs, {"uncurl": True})
