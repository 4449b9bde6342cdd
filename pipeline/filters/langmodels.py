"""Models a filter loads by path, one for every language or one per language: which documents
each model scores, and the checks that make a bad path one clear line before any work.

A filter given ``model`` (one model for every document) and ``models`` (a table of models by
language code, ``{ en = "en.bin", fr = "fr.bin" }``) scores each document with its language's
model, else with ``model``; a document with neither (a language without a model, or no language
when only ``models`` is given) is not scored: its measures are null and no rule removes it.
Language codes are matched as the filter stage matches ``by_lang`` (``zh`` takes ``zho_Hans``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.formats.langcodes import code_languages, lang_languages


def model_table(model: str | Path | None, models: Mapping[str, str | Path] | None, what: str) -> dict:
    """``{language: path}`` of ``models`` with ``model`` under the key None (every other
    document); ValueError naming ``what`` for a path that is not a file or a code that is none."""
    table: dict[str | None, Path] = {}
    for language, code in code_languages(models or {}, f"{what}.models").items():
        table[language] = Path(models[code])
    if model is not None:
        table[None] = Path(model)
    if not table:
        raise ValueError(f"{what}: no model given; set model (every language) or models (a table by language)")
    for language, path in table.items():
        if not path.is_file():
            key = "model" if language is None else f"models.{language}"
            raise FileNotFoundError(f"{what}.{key}: {path} is not a file; give the path of a model file")
    return table


def rows_by_model(docs: pl.DataFrame, table: Mapping[str | None, Path]) -> Iterator[tuple[Path, np.ndarray]]:
    """Each model of ``table`` with the rows of ``docs`` it scores (none twice; a row of no model's
    language and no ``model`` for every other is in none)."""
    lang = docs["lang"] if "lang" in docs.columns else pl.Series([None] * docs.height, dtype=pl.String)
    languages = lang_languages(lang)
    own = [language for language in table if language is not None]
    for language in own:
        rows = np.flatnonzero((languages == language).fill_null(False).to_numpy())
        if len(rows):
            yield table[language], rows
    if None in table:
        rows = np.flatnonzero((~languages.is_in(own).fill_null(False)).to_numpy())
        if len(rows):
            yield table[None], rows


def read_pool(path: Path, what: str) -> pl.DataFrame:
    """A sample of documents whose scores give a filter's cuts: ``text`` and ``lang`` (null when
    the file has none) from a Parquet or JSON-lines file; ValueError naming ``what`` otherwise."""
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_ndjson(path, infer_schema_length=None)
    except Exception as error:
        raise ValueError(f"{what}.pool: {path} is not a Parquet or JSON-lines file of documents ({error})") from None
    if "text" not in frame.columns or not frame.height:
        raise ValueError(f"{what}.pool: {path} has no documents with a text column; give a sample of the stage's input")
    lang = pl.col("lang").cast(pl.String) if "lang" in frame.columns else pl.lit(None, dtype=pl.String)
    return frame.select(pl.col("text").cast(pl.String).fill_null(""), lang.alias("lang"))
