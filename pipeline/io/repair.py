"""Unicode repair of documents' text with ftfy: mojibake (``â€™`` for ``’``), HTML entities left in
text, C1 controls, terminal escapes, lone surrogates, control characters.

:class:`RepairOptions` are ftfy's fixes (``TextFixerConfig``). The defaults repair what is broken
and leave alone what is only one way of writing: ligatures, full-width characters, curly quotes,
line breaks and the Unicode normalization form stay as the text has them, as FineWeb's pipeline
(datatrove's ``FTFYFormatter``) sets them, so that a model still sees text as people write it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class RepairOptions:
    """ftfy's fixes, each on or off (its ``TextFixerConfig`` of the same names)."""

    unescape_html: bool | Literal["auto"] = "auto"  # "auto": only in text with no "<" (not HTML itself)
    remove_terminal_escapes: bool = True
    fix_encoding: bool = True  # mojibake: text decoded in the wrong encoding
    restore_byte_a0: bool = True
    replace_lossy_sequences: bool = True
    decode_inconsistent_utf8: bool = True
    fix_c1_controls: bool = True
    fix_latin_ligatures: bool = False
    fix_character_width: bool = False  # would turn CJK text's full-width punctuation half-width
    uncurl_quotes: bool = False
    fix_line_breaks: bool = False  # the source stage makes every line end "\n" anyway
    fix_surrogates: bool = True
    remove_control_chars: bool = True
    normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None


def repair_texts(texts: pa.Array, options: RepairOptions) -> tuple[pa.Array, int]:
    """``texts`` repaired (nulls stay null), and how many of them changed."""
    import ftfy  # only where a source repairs its text

    config = ftfy.TextFixerConfig(**asdict(options), explain=False)
    before = texts.to_pylist()
    after = [None if text is None else ftfy.fix_text(text, config) for text in before]
    repaired = pa.array(after, pa.string())
    changed = pc.sum(pc.fill_null(pc.not_equal(texts.cast(pa.string()), repaired), False)).as_py() or 0
    return repaired, changed
