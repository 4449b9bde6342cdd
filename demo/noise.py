"""Text generators: near-copy edits (perturb), lorem ipsum, gibberish, keyword spam, mixed-language
text and tiny PNG images, all drawn from a numpy generator."""

from __future__ import annotations

import re
import struct
import zlib

import numpy as np

from demo.real_text import RealDoc

_WORDS = re.compile(r"(\s+)")
_CHARS = re.compile(r"\s+|\S")


def perturb(text: str, rate: float, rng: np.random.Generator, by_char: bool = False) -> str:
    """``text`` with about ``rate`` of its words substituted, deleted or inserted (one of the
    three, equally likely), at least one edit, line breaks kept. Replacement and inserted words
    come from the text itself. ``by_char`` edits characters (scripts written without spaces)."""
    if by_char:
        tokens = np.array(_CHARS.findall(text), dtype=object)
        editable = np.flatnonzero([not t.isspace() for t in tokens])
        joiner = ""
    else:
        tokens = np.array(_WORDS.split(text), dtype=object)  # words at even positions
        editable = np.arange(0, tokens.size, 2)[tokens[0::2] != ""]
        joiner = " "
    if editable.size == 0:
        return text + joiner + "x"
    hit = editable[rng.random(editable.size) < rate]
    if hit.size == 0:
        hit = editable[rng.integers(editable.size, size=1)]
    ops = rng.integers(3, size=hit.size)
    fill = tokens[editable[rng.integers(editable.size, size=hit.size)]]
    deleted = hit[ops == 1]
    tokens[hit[ops == 0]] = fill[ops == 0]
    tokens[hit[ops == 2]] = tokens[hit[ops == 2]] + joiner + fill[ops == 2]
    tokens[deleted] = ""
    if not by_char:  # a deleted word takes its following space along
        after = deleted[deleted + 1 < tokens.size] + 1
        tokens[after[tokens[after] == " "]] = ""
    edited = "".join(tokens.tolist())
    if edited == text or not edited.strip():  # same-word substitutions, or nothing left
        first = _CHARS.findall(text.strip())[0] if by_char else text.split()[0]
        edited = text.replace(first, first + joiner + first, 1)
    return edited


LOREM = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud "
    "exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in "
    "reprehenderit voluptate velit esse cillum eu fugiat nulla pariatur excepteur sint "
    "occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est "
    "laborum"
).split()
LOREM_OPENING = "Lorem ipsum dolor sit amet, consectetur adipiscing elit"


def lorem_text(rng: np.random.Generator) -> str:
    """Lorem ipsum: 2-6 paragraphs of 3-7 sentences, starting with the usual opening."""
    paragraphs = []
    sentence_counts = rng.integers(3, 8, size=rng.integers(2, 7))
    lengths = rng.integers(5, 17, size=int(sentence_counts.sum()))
    words = np.array(LOREM, dtype=object)[rng.integers(len(LOREM), size=int(lengths.sum()))]
    start = 0
    sentences = []
    for length in lengths.tolist():
        chunk = " ".join(words[start : start + length].tolist())
        sentences.append(chunk[0].upper() + chunk[1:] + ".")
        start += length
    sentences[0] = LOREM_OPENING + ", " + sentences[0][0].lower() + sentences[0][1:]
    start = 0
    for count in sentence_counts.tolist():
        paragraphs.append(" ".join(sentences[start : start + count]))
        start += count
    return "\n\n".join(paragraphs)


_GIBBERISH_ALPHABETS = {
    "letters": b"abcdefghijklmnopqrstuvwxyzeeaaiioonnrrsstt",
    "keyboard_mash": b"asdfghjkl;asdfjkjkl;qwerfdsa",
    "symbols": b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-#%&",
}


def gibberish_text(rng: np.random.Generator) -> tuple[str, str]:
    """Random character strings split into word-like runs and lines; returns (text, variant)."""
    variant = list(_GIBBERISH_ALPHABETS)[int(rng.integers(len(_GIBBERISH_ALPHABETS)))]
    alphabet = np.frombuffer(_GIBBERISH_ALPHABETS[variant], dtype=np.uint8)
    size = int(rng.integers(300, 2500))
    chars = alphabet[rng.integers(alphabet.size, size=size)]
    longest = 30 if variant == "symbols" else 12
    breaks = np.cumsum(rng.integers(2, longest, size=size // 2 + 1) + 1) - 1
    breaks = breaks[breaks < size]
    chars[breaks] = ord(" ")
    chars[breaks[rng.random(breaks.size) < 0.06]] = ord("\n")
    return chars.tobytes().decode("ascii").strip(), variant


SPAM_THEMES = (
    ("cheap flights", "last minute flights", "flight deals", "cheap airline tickets"),
    ("weight loss pills", "lose weight fast", "diet pills", "fat burner"),
    ("online casino", "casino bonus", "free spins", "best slots"),
    ("payday loans", "bad credit loans", "instant cash", "quick loans online"),
    ("replica watches", "cheap luxury watches", "designer watches", "watches sale"),
    ("seo services", "buy backlinks", "rank first on google", "cheap seo"),
    ("crypto signals", "bitcoin profit", "crypto trading bot", "free bitcoin"),
    ("essay writing service", "buy essays", "cheap essays", "write my essay"),
    ("cheap hotels", "hotel deals", "discount hotels", "best hotel prices"),
    ("car insurance quotes", "cheap car insurance", "compare insurance", "auto insurance"),
)
SPAM_YEAR = 2024
SPAM_PATTERNS = (
    "Best {a} {year}!",
    "Buy {a} online now.",
    "{a} {b} {c}",
    "Click here for {a}!",
    "Cheap {a} - {b} - {c}",
    "Top {n} {a} sites",
    "{a} {a} {a}",
    "Get {a} today, {b} free!",
    "Looking for {a}? We have the best {b} and {c}.",
    "{a} near me",
    "#1 {a} {b} guaranteed",
    "{b}? {a}! {c}!",
)


def spam_text(rng: np.random.Generator) -> tuple[str, str, list[str]]:
    """Keyword spam: lines of SEO phrases around one theme; returns (text, title, keywords)."""
    keywords = list(SPAM_THEMES[int(rng.integers(len(SPAM_THEMES)))])
    lines = []
    for count in rng.integers(3, 12, size=rng.integers(3, 9)).tolist():
        picks = rng.integers(len(keywords), size=(count, 3)).tolist()
        patterns = rng.integers(len(SPAM_PATTERNS), size=count).tolist()
        numbers = rng.integers(3, 51, size=count).tolist()
        lines.append(
            " ".join(
                SPAM_PATTERNS[p].format(a=keywords[a], b=keywords[b], c=keywords[c], year=SPAM_YEAR, n=n)
                for p, (a, b, c), n in zip(patterns, picks, numbers)
            )
        )
    if rng.random() < 0.5:
        lines.append(", ".join(keywords * int(rng.integers(3, 10))))
    title = f"Best {keywords[0]} {SPAM_YEAR} - {keywords[1]} | {keywords[2]}".title()
    return "\n".join(lines), title, keywords


def _half(text: str, first: bool) -> str:
    """The first or second half of ``text``, cut at the line (or space) nearest the middle."""
    middle = len(text) // 2
    cuts = [m.start() for m in re.finditer("\n", text)] or [m.start() for m in re.finditer(" ", text)]
    cut = min(cuts, key=lambda c: abs(c - middle)) if cuts else middle
    return (text[:cut] if first else text[cut:]).strip()


def mixed_lang_text(
    first_pool: tuple[RealDoc, ...], by_lang: dict[str, list[RealDoc]], rng: np.random.Generator
) -> tuple[RealDoc, RealDoc, str]:
    """First half of a document of ``first_pool`` and second half of one in another language."""
    first = first_pool[int(rng.integers(len(first_pool)))]
    other_langs = [lang for lang in by_lang if lang != first.lang]
    candidates = by_lang[other_langs[int(rng.integers(len(other_langs)))]]
    second = candidates[int(rng.integers(len(candidates)))]
    return first, second, _half(first.text, True) + "\n" + _half(second.text, False)


def tiny_png(rng: np.random.Generator, size: int = 16) -> bytes:
    """A valid PNG of random RGB pixels."""
    pixels = rng.integers(0, 256, size=(size, size * 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in pixels)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
