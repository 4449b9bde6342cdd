"""HTML pages to plain text (resiliparse), with the extractor's settings.

:class:`HtmlOptions` is what a WARC source's ``html_*`` settings give the reader; the defaults
extract a page's main content (navigation and boilerplate dropped) with its block structure as line
breaks and list items as bullets, and leave out image alt texts, link targets, form fields,
``<noscript>`` content and comment sections.
"""

from __future__ import annotations

import codecs
import functools
from dataclasses import dataclass

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree


@dataclass(frozen=True)
class HtmlOptions:
    """The extractor's settings (resiliparse's ``extract_plain_text``)."""

    main_content: bool = True  # only the elements its heuristics take for the page's main content
    alt_texts: bool = False  # images' alt texts
    links: bool = False  # links' target URLs after their text
    form_fields: bool = False  # form fields and their values
    noscript: bool = False  # the content of <noscript> elements
    comments: bool = False  # comment sections taken as main content
    skip: tuple[str, ...] = ()  # CSS selectors of elements to leave out

    def extract_args(self) -> dict:
        return {
            "preserve_formatting": True,
            "list_bullets": True,
            "main_content": self.main_content,
            "alt_texts": self.alt_texts,
            "links": self.links,
            "form_fields": self.form_fields,
            "noscript": self.noscript,
            "comments": self.comments,
            "skip_elements": list(self.skip) or None,
        }


def check_selector(selector: str) -> str | None:
    """Why resiliparse cannot use ``selector`` to skip elements, or None where it can."""
    try:
        extract_plain_text("<p>x</p>", skip_elements=[selector])
    except Exception as error:  # resiliparse's CSSParserException
        return f"{type(error).__name__}: {error}".strip()
    return None


def html_to_text(html: bytes, charset: str | None, options: HtmlOptions = HtmlOptions()) -> str:
    """Plain text of an HTML page: decoded by its declared charset (or a detected one) and
    extracted with ``options``."""
    return read_html(html, charset, options)[0]


def read_html(html: bytes, charset: str | None, options: HtmlOptions = HtmlOptions()) -> tuple[str, list[str]]:
    """The plain text of an HTML page (:func:`html_to_text`) and its licence links: the ``href`` of
    every element whose ``rel`` includes ``license``, in page order, each once. A declared charset
    that names no encoding Python knows (``utf8mb4``, a cut header) is passed over, as a browser
    passes it over: the encoding is detected, as for a page that declares none.

    The parsed tree and its nodes are resiliparse objects that may only be freed on the thread that
    made them, and they never leave this one frame: a sampling profiler (a Dask worker's, every
    10 ms) holds the frames of the thread it samples, and a frame it holds past its return would
    keep them until the profiler lets go, on the profiler's thread ("HTMLTreePy is unsendable, but
    is being dropped on another thread"). So they are dropped here before the frame ends."""
    known = charset is not None and is_codec(charset)
    tree = HTMLTree.parse(bytes_to_str(html, charset if known else detect_encoding(html)))
    element = None
    try:
        links = []
        if tree.document is not None:
            for element in tree.document.query_selector_all("[rel~=license]"):
                href = (element.getattr("href") or "").strip()
                if href and href not in links:
                    links.append(href)
        return extract_plain_text(tree, **options.extract_args()), links
    finally:
        del tree, element


@functools.lru_cache(maxsize=256)
def is_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True
