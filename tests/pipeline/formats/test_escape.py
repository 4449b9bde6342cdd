"""User text in Markdown: rendered as CommonMark (and GFM tables), it is the text itself, never
markup."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.escape import cell, code, code_block, inline, visible
from tests.helpers import live_markup, render_markdown

HOSTILE = [
    "a`b<img src=x onerror=alert(1)>[g]\x1b[31mred\nline.jsonl",
    "<script>alert(1)</script> [g] `x` | *b* _i_ ~~s~~ $x$",
    "[click](javascript:alert(1)) ![i](x) <https://example.org>",
    "a\\|b \\ end\\",
    "``` fence",
    "&lt;b&gt; &amp; &#60;",
    "\u202eevil\u0000nul\x7f\x9b",
    " ` ",
    "",
]
# Markdown-heavy text: punctuation, spaces, HTML and the controls a terminal acts on.
TEXT = st.text(alphabet=st.sampled_from(list("ab <>&/\\`*_[]()!|~$#=-+.:;\"'\n\r\t\x1b\x00\u202e")), max_size=40)


def _paragraph(markdown: str, tables: bool = False):
    return render_markdown(markdown, tables=tables)


def test_visible_writes_controls_as_escapes():
    assert visible("a\x1b[31m\n\t\u202e") == "a\\x1b[31m\\n\\t\\u202e"
    assert visible("a\nb\tc\x1b", keep="\n\t") == "a\nb\tc\\x1b"


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_names_render_as_themselves(text):
    for markdown, tags in ((f"x {inline(text)} y", {"p"}), (f"x {code(text)} y", {"p", "code"})):
        found = _paragraph(markdown)
        assert not live_markup(found, tags), markdown
        assert "".join(found.text).strip("\n") == f"x {visible(text)} y"


@settings(max_examples=300)
@given(TEXT)
def test_inline_text_is_never_markup(text):
    found = _paragraph(f"x {inline(text)} y")
    assert [tag for tag, _ in found.tags] == ["p"]
    assert "".join(found.text).strip("\n") == f"x {visible(text)} y"


@settings(max_examples=300)
@given(TEXT)
def test_a_code_span_holds_any_backticks(text):
    found = _paragraph(f"x {code(text)} y")
    assert set(tag for tag, _ in found.tags) <= {"p", "code"}
    assert "".join(found.text).strip("\n") == f"x {visible(text)} y"


@settings(max_examples=200)
@given(TEXT, TEXT)
def test_table_cells_keep_their_text_and_their_columns(first, second):
    table = f"| a | b |\n|---|---|\n| {cell(inline(first))} | {cell(code(second))} |\n"
    found = render_markdown(table)
    assert not live_markup(found, {"table", "thead", "tbody", "tr", "th", "td", "code"})
    assert [tag for tag, _ in found.tags].count("td") == 2
    # A table strips a cell's outer spaces, as it does any cell's.
    assert "".join(found.text).split() == f"a b {visible(first)} {visible(second)}".split()


def test_a_code_block_outlasts_the_backticks_inside_it():
    text = "x\n```\n<img src=x onerror=alert(1)>\n````"
    found = render_markdown("a\n\n" + code_block(text, "json") + "\nb\n")
    assert [tag for tag, _ in found.tags] == ["p", "pre", "code", "p"]
    assert text in "".join(found.text)
