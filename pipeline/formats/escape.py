"""Text from the data or the config (file names, group and source names, ids, licences, reasons)
as each medium takes it, so that no name turns into markup or into a terminal's command.

:func:`visible` writes the characters a terminal acts on as escapes (``\\x1b``); it is the base of
every medium. The Markdown of a mixture's dataset card takes :func:`inline` text, :func:`code`
spans, :func:`cell` contents and :func:`code_block` blocks, which a CommonMark renderer (the
Hugging Face Hub's, GitHub's) shows as the text they were given. The report's HTML escapes in
``report.html.esc``, the terminal's in ``report.console``, the charts' in ``report.plots``.
"""

from __future__ import annotations

import re

# Characters a terminal acts on rather than shows: C0 and C1 controls (ESC starts ANSI sequences),
# DEL, and the bidirectional overrides that reorder what is shown.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# The punctuation that opens Markdown inline markup (emphasis, code, links and images, GFM's
# strikethrough, the Hub's math), backslash-escaped; <, > and & (HTML) are written as entities.
# A table's | is the cell's to escape (see cell).
_MARKDOWN = re.compile(r"[\\`*_\[\]~$]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def visible(text, keep: str = "") -> str:
    """``text`` with every control character but those in ``keep`` written as an escape:
    ``\\n``, ``\\t``, ``\\r``, ``\\x1b``, ``\\u202e``."""

    def shown(match: re.Match) -> str:
        char = match[0]
        if char in keep:
            return char
        return NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")

    return CONTROL.sub(shown, str(text))


def inline(text) -> str:
    """``text`` as Markdown inline text that renders as ``text`` itself (control characters as
    :func:`visible` shows them): Markdown punctuation backslash-escaped, ``<``, ``>`` and ``&``
    as HTML entities, so no emphasis, link, code span or HTML element starts inside it. For the
    inside of a line (a line's first characters can still open a list or a heading)."""
    text = _MARKDOWN.sub(lambda m: "\\" + m[0], visible(text))
    return re.sub("[<>&]", lambda m: _ENTITIES[m[0]], text)


def code(text) -> str:
    """``text`` as a Markdown code span, fenced by more backticks than any run of them inside it;
    as :func:`inline` text where it holds a ``|`` (a table row splits a code span there)."""
    text = visible(text)
    if "|" in text or not text:
        return inline(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    # A renderer strips one space from each end of a span that has one at both (and more than
    # spaces); a backtick at an end would join the fence.
    pad = " " if text.strip(" ") and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cell(text) -> str:
    """Rendered Markdown (``inline`` text, ``code`` spans) as the content of a table cell: every
    ``|`` escaped, line breaks as spaces."""
    return re.sub(r"\r\n|[\r\n]", " ", str(text)).replace("|", "\\|")


def code_block(text: str, info: str = "") -> str:
    """``text`` as a fenced code block, its fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}\n"
