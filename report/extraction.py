"""The report's section on what the source stage did to the text: what the extractor kept of each
WARC source's pages and how many documents Unicode repair changed, as the stage recorded them
(``source/stats.json``, ``extraction`` and ``repaired``)."""

from __future__ import annotations

from pipeline.formats.extraction import SHARE_LABELS, Extraction, share_of
from pipeline.stages.run import RunFiles
from report import plots
from report.html import esc, num, share, table

# The settings of a WARC source that the section names beside its figures.
_SETTINGS = (
    ("html_main_content", "main content only"),
    ("html_alt_texts", "alt texts"),
    ("html_links", "link targets"),
    ("html_form_fields", "form fields"),
    ("html_noscript", "noscript"),
    ("html_comments", "comment sections"),
)


def has_extraction(run: RunFiles) -> bool:
    source = run.stats.get("source")
    return bool(source and (source.extraction or source.repaired))


def extraction_section(run: RunFiles) -> str:
    """Per source that repairs its text, the documents it changed; per WARC source: its pages'
    bytes against their text, the pages per band of kept share, and the pages that kept the least."""
    stats = run.stats["source"]
    out = [_repaired(stats)] if stats.repaired else []
    if stats.extraction:
        out += _extraction(run, stats.extraction)
    return "".join(out)


def _repaired(stats) -> str:
    rows = [
        [
            esc(name),
            num(changed, f"source.repaired.{name}"),
            num(stats.sources[name].docs_in, f"source.sources.{name}.docs_in")
            if name in (stats.sources or {})
            else "–",
        ]
        for name, changed in stats.repaired.items()
    ]
    return (
        "<h3>Unicode repair</h3><p>Records whose text ftfy changed (mojibake, HTML entities, control "
        "characters; <code>unicode_repair</code>), before any check or stage measured it.</p>"
        + table(["source", "changed", "records read"], rows, numeric={1, 2})
    )


def _extraction(run: RunFiles, found: dict) -> list[str]:
    configs = {source.name: source for source in run.config.sources} if run.config else {}
    out = [
        "<h3>HTML extraction</h3><p>A page's kept share is the characters of text the extractor took "
        "from it over the bytes of its HTML; markup, scripts and styles are most of a page's bytes, "
        "so an article kept whole keeps a few per cent. A page that kept far less than its neighbours "
        "is one whose text the main-content heuristics may have dropped: open it and compare with "
        "<code>html_main_content = false</code>.</p>"
    ]
    for name, data in found.items():
        out.append(_source(name, Extraction.from_dict(data), configs.get(name)))
    return out


def _source(name: str, found: Extraction, config) -> str:
    base = f"source.extraction.{name}"
    settings = ""
    if config is not None:
        on = [label for key, label in _SETTINGS if getattr(config, key)]
        skipped = f"; elements skipped: {esc(', '.join(config.html_skip))}" if config.html_skip else ""
        settings = f" Extractor settings: {esc(', '.join(on) or 'whole page, nothing else')}{skipped}."
    head = (
        f"<h4>{esc(name)}</h4><p>{num(found.pages, f'{base}.pages')} HTML pages, "
        f"{num(found.html_bytes, f'{base}.html_bytes')} bytes of HTML, "
        f"{num(found.text_chars, f'{base}.text_chars')} characters of text "
        f"({share(found.text_chars, found.html_bytes)} kept); "
        f"{num(found.bands[0], f'{base}.bands.0')} pages gave no text.{settings}</p>"
    )
    chart = plots.column_chart(
        f"extraction-{name}",
        f"{name}: pages by kept share",
        list(SHARE_LABELS),
        found.bands,
        "characters of text over bytes of HTML",
        "pages",
    )
    rows = [
        [
            esc(page["file"]),
            num(page["offset"], f"{base}.least.{i}.offset"),
            esc(page["url"] or "–"),
            num(page["html_bytes"], f"{base}.least.{i}.html_bytes"),
            num(page["text_chars"], f"{base}.least.{i}.text_chars"),
            f"{100 * share_of(page):.2f}%",
        ]
        for i, page in enumerate(found.least)
    ]
    least = (
        f"<details><summary>the {len(rows)} pages that kept the smallest share</summary>"
        + table(
            ["file", "offset", "url", "HTML bytes", "text characters", "kept"],
            rows,
            numeric={1, 3, 4, 5},
            cls="examples",
            widths=[16, 10, 44, 10, 10, 10],
        )
        + "</details>"
    )
    return head + chart + least
