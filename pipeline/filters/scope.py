"""Which documents a stage's rules apply to: the sources and the languages it names (the filter
and lines stages' ``sources``, ``langs`` and ``exclude_langs``). The others pass through it
unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.formats.langcodes import lang_languages, parse_lang


@dataclass(frozen=True)
class Scope:
    """Documents of ``sources`` (None: every source), of ``langs`` (None: every language) and not
    of ``exclude_langs``, for the stage named ``stage``. A language is matched as
    :func:`~pipeline.formats.langcodes.parse_lang` reads it (``zh`` takes ``zho_Hans``); a document
    without a language is in scope unless ``langs`` is given."""

    stage: str
    sources: tuple[str, ...] | None = None
    langs: tuple[str, ...] | None = None
    exclude_langs: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return self.sources is None and self.langs is None and not self.exclude_langs

    def _languages(self, codes) -> set[str]:
        return {parse_lang(code)[0] or code for code in codes}

    def mask(self, docs: pl.DataFrame) -> pl.Series:
        """Whether each document is in scope."""
        inside = pl.Series([True] * docs.height, dtype=pl.Boolean)
        if self.sources is not None:
            inside = inside & docs["source"].is_in(list(self.sources))
        if self.langs is not None or self.exclude_langs:
            lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
            language = lang_languages(lang)
            if self.langs is not None:
                inside = inside & language.is_in(list(self._languages(self.langs))).fill_null(False)
            if self.exclude_langs:
                inside = inside & ~language.is_in(list(self._languages(self.exclude_langs))).fill_null(False)
        return inside

    def outside(self, source: str | None, lang: str | None) -> str | None:
        """Why a document of ``source`` and ``lang`` is out of scope (a phrase), or None."""
        language = parse_lang(lang)[0]
        if self.sources is not None and source not in self.sources:
            return f"its source is not in {self.stage}.sources"
        if self.langs is not None and language not in self._languages(self.langs):
            return f"its language ({lang or 'none'}) is not in {self.stage}.langs"
        if self.exclude_langs and language in self._languages(self.exclude_langs):
            return f"its language ({lang}) is in {self.stage}.exclude_langs"
        return None

    def describe(self, every: str = "every document") -> str:
        """The scope in words, for the report: ``sources web, news; languages zh, ja``."""
        if self.everything:
            return every
        parts = []
        if self.sources is not None:
            parts.append("sources " + ", ".join(self.sources))
        if self.langs is not None:
            parts.append("languages " + ", ".join(self.langs))
        if self.exclude_langs:
            parts.append("no documents in " + ", ".join(self.exclude_langs))
        return "; ".join(parts)
