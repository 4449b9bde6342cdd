"""Small HTML builders for the report: escaping, numbers that name their source, tables, text
snippets and word-level diffs. Every piece of document text goes through :func:`esc`.

A number read from a stage's ``stats.json`` carries ``data-stat="<stage>.<key>.<key>..."`` (a dict
of counts stands for its sum: ``data-stat="filter.removed"`` is every document the filter stage
removed); a number from another JSON file of the run carries
``data-json="<file relative to the run>#<key>.<key>..."``. Keys may contain dots themselves (rule
names do); a reader resolves a path by taking, at each level, the longest key that matches.
"""

from __future__ import annotations

import difflib
import html
import re

# Control characters (but tab and newline) cannot be shown; binary samples are full of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def esc(text) -> str:
    """``text`` safe to put in HTML text or an attribute value."""
    if text is None:
        return ""
    return html.escape(_CONTROL.sub("\ufffd", str(text)), quote=True)


def fmt(value, digits: int | None = None) -> str:
    """A number as the page shows it: integers with thousands separators, floats with ``digits``
    decimals (default 3); None as a dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and digits is None:
        return f"{value:,}"
    return f"{float(value):,.{3 if digits is None else digits}f}"


def num(
    value, stat: str | None = None, json_ref: str | None = None, digits: int | None = None, tag: str = "span"
) -> str:
    """A number in an element that says where it came from (see the module docstring)."""
    attrs = ""
    if stat is not None:
        attrs += f' data-stat="{esc(stat)}"'
    if json_ref is not None:
        attrs += f' data-json="{esc(json_ref)}"'
    return f'<{tag} class="num"{attrs}>{esc(fmt(value, digits))}</{tag}>'


def share(part, whole, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole`` (a dash when ``whole`` is 0)."""
    if not whole:
        return "–"
    return f"{100.0 * part / whole:.{digits}f}%"


def table(
    headers: list[str],
    rows: list[list[str]],
    numeric: set[int] | None = None,
    cls: str = "",
    widths: list[int] | None = None,
) -> str:
    """A table of already-rendered cells; columns in ``numeric`` align right; ``widths`` in percent."""
    numeric = numeric or set()
    cols = "".join(f'<col style="width:{w}%">' for w in widths) if widths else ""
    head = "".join(f"<th{' class=r' if i in numeric else ''}>{esc(h)}</th>" for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = "".join(f"<td{' class=r' if i in numeric else ''}>{cell}</td>" for i, cell in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(headers)}" class="none">none</td></tr>')
    return (
        f'<table class="{esc(cls)}">{f"<colgroup>{cols}</colgroup>" if cols else ""}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def snippet(text: str | None, chars: int = 280, more: int = 2000) -> str:
    """The start of a document's text; the rest (up to ``more`` characters) behind a toggle."""
    if text is None:
        return '<span class="none">(text not found)</span>'
    if len(text) <= chars:
        return f'<div class="text">{esc(text)}</div>'
    rest = text[chars:more]
    cut = f"… ({len(text) - more:,} more characters)" if len(text) > more else ""
    return (
        f'<details class="text"><summary><span class="text">{esc(text[:chars])}…</span></summary>'
        f'<div class="text">{esc(rest)}{esc(cut)}</div></details>'
    )


def word_diff(kept: str, removed: str, context: int = 12, max_words: int = 3000) -> str:
    """A word-level diff of two texts: words only in ``removed`` are marked as inserted, words
    only in ``kept`` as deleted; long unchanged runs are shortened to ``context`` words each side."""
    a, b = kept.split()[:max_words], removed.split()[:max_words]
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            words = a[i1:i2]
            if len(words) > 2 * context + 1:
                out.append(esc(" ".join(words[:context])))
                out.append(f'<span class="skip">… {len(words) - 2 * context:,} equal words …</span>')
                out.append(esc(" ".join(words[-context:])))
            else:
                out.append(esc(" ".join(words)))
            continue
        if i2 > i1:
            out.append(f"<del>{esc(' '.join(a[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{esc(' '.join(b[j1:j2]))}</ins>")
    if not any(tag in piece for piece in out for tag in ("<del>", "<ins>")):
        out.append('<span class="skip">(the same words: the texts differ at most in spacing)</span>')
    return f'<div class="diff">{" ".join(out)}</div>'
