"""Run configuration: TOML, validated before any work.

A config error stops the run with one line that names the key, the problem and the fix::

    sources[0].txt_field: unknown key; did you mean 'text_field'? (allowed: name, reader, ...)

Every path setting has ``~`` and environment variables (``$DATA``) expanded once, as the config
is read, before any check. Relative paths (inputs and ``run_dir``) are resolved from the current
working directory; ``run_dir`` may also be the URL of an fsspec file system
(``s3://bucket/runs/my-crawl``). Values are strict: ``batch_docs = "4096"`` is an error, not a
guess; every number has the bounds its meaning gives it.
"""

from __future__ import annotations

import functools
import glob
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.formats.configfile import (
    ConfigError,
    ExpandedPath,
    ExpandedStr,
    Seed,
    british_keys,
    did_you_mean,
    expand_path,
    read_toml,
    validate_model,
)
from pipeline.formats.names import (
    check_component,
    check_group_names,
    group_file_stem,
    group_files,
    mixture_files,
    shown,
    source_files,
)

if TYPE_CHECKING:
    from pipeline.io.html import HtmlOptions
    from pipeline.io.repair import RepairOptions

READERS = ("jsonl", "parquet", "warc", "wet", "text")

# What a directory given as a path expands to, per reader.
READER_SUFFIXES = {
    "jsonl": (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".json.gz", ".json.zst", ".ndjson"),
    "parquet": (".parquet",),
    "warc": (".warc", ".warc.gz", ".arc", ".arc.gz"),
    "wet": (".wet", ".wet.gz", ".warc.wet.gz"),
    "text": (".txt",),
}


def _existing_file(value: Path | None, key: str, what: str) -> Path | None:
    """``value`` if it is None or an existing file; otherwise the one-line error naming the fix."""
    if value is not None and not Path(value).is_file():
        raise ValueError(f"no file at {str(value)!r}; point {key} at {what}")
    return value


def _plain_name(value: str, what: str) -> str:
    """``value`` if it can name a folder or file inside the run directory and nothing else: not
    ``.`` or ``..``, and not hidden (names starting with a dot are a run's temporaries)."""
    if value.startswith("."):
        raise ValueError(
            f"{what} {value!r} is not a plain folder name; start it with a letter or digit "
            "(letters, digits, _ . - after that)"
        )
    return value


# Each filter's parameters by name (``[filter.params.<filter>]``). A value is any TOML value here
# (a number, a list, a table): the filter's constructor types it (pipeline.filters.params), and
# _check_filters checks every value against those types, so an error names the parameter's form.
FilterParams = dict[str, dict[str, Any]]

# A group's sampling weight: none or more (normalized over the groups).
Weight = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _license_spelling(cls, data):
        """``license_field``, ``license`` (and any key spelt "license") name the "licence" key."""
        return british_keys(data, cls.model_fields)


class UnicodeRepairConfig(_Strict):
    """ftfy's fixes for a source's text (pipeline.io.repair.RepairOptions; docs/readers.md,
    Unicode repair): what is broken repaired, the ways of writing text kept as they are."""

    unescape_html: bool | Literal["auto"] = "auto"
    remove_terminal_escapes: bool = True
    fix_encoding: bool = True
    restore_byte_a0: bool = True
    replace_lossy_sequences: bool = True
    decode_inconsistent_utf8: bool = True
    fix_c1_controls: bool = True
    fix_latin_ligatures: bool = False
    fix_character_width: bool = False
    uncurl_quotes: bool = False
    fix_line_breaks: bool = False
    fix_surrogates: bool = True
    remove_control_chars: bool = True
    normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None


class SourceConfig(_Strict):
    """One input source: which reader, which files, and where its fields are."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="short name, used in ids and file names")
    reader: Literal["jsonl", "parquet", "warc", "wet", "text"]
    paths: list[ExpandedStr] = Field(min_length=1, description="files, folders or globs")
    text_field: str = "text"
    id_field: str | None = None
    url_field: str | None = None
    # Fields to keep in `meta`; None keeps every field that is not text, id or url.
    meta_fields: list[str] | None = None
    # WARC only: the HTML extractor's settings (pipeline.io.html.HtmlOptions; docs/readers.md):
    # the main content of a page only (navigation and boilerplate dropped), and what else to keep.
    html_main_content: bool = True
    html_alt_texts: bool = False
    html_links: bool = False
    html_form_fields: bool = False
    html_noscript: bool = False
    html_comments: bool = False
    html_skip: list[str] = Field(default_factory=list, description="CSS selectors of elements to leave out")
    # The licence of every document (an SPDX identifier or expression, "LicenseRef-...", or
    # "unknown"), and/or a field of the record (dotted) naming each document's own; a document whose
    # field is empty gets `licence`. WARC: "licence_links" (a record's rel="license" links, HTTP
    # Link headers and HTML), or the name of a WARC or HTTP header.
    licence: str = "unknown"
    licence_field: str | None = Field(default=None, pattern=r"^[^'\[\]\\]+$")
    # Repair the text's Unicode with ftfy before any stage measures it: true for the default fixes,
    # or a table of them (UnicodeRepairConfig).
    unicode_repair: bool | UnicodeRepairConfig = False
    # This source's own limit on its share of quarantined records (None: the run's).
    max_quarantine_fraction: float | None = Field(default=None, ge=0.0, le=1.0)

    @field_validator("name")
    @classmethod
    def _plain_source_name(cls, value):
        return check_component(_plain_name(value, "the source name"), "the source name", source_files(value))

    @field_validator("licence")
    @classmethod
    def _spdx_licence(cls, value):
        from pipeline.licence import declared

        return declared(value)

    @field_validator("html_skip")
    @classmethod
    def _selectors(cls, value):
        from pipeline.io.html import check_selector

        for selector in value:
            problem = check_selector(selector)
            if problem:
                raise ValueError(f"html_skip: {selector!r} is no CSS selector the extractor reads ({problem})")
        return value

    @model_validator(mode="after")
    def _html_for_warc(self):
        # A config read back from a manifest sets every key: only a value other than the default counts.
        settings = sorted(
            name
            for name, field in type(self).model_fields.items()
            if name.startswith("html_") and getattr(self, name) != field.get_default(call_default_factory=True)
        )
        if settings and self.reader != "warc":
            raise ValueError(
                f"{', '.join(settings)}: only a WARC source extracts HTML; this source's reader is {self.reader!r}"
            )
        return self

    def repair_options(self) -> RepairOptions | None:
        """The Unicode repair of this source's text, or None where it has none."""
        from pipeline.io.repair import RepairOptions

        if self.unicode_repair is False:
            return None
        if self.unicode_repair is True:
            return RepairOptions()
        return RepairOptions(**self.unicode_repair.model_dump())

    def html_options(self) -> HtmlOptions:
        """The extractor's settings for the WARC reader."""
        from pipeline.io.html import HtmlOptions  # resiliparse: only where a WARC source is read

        return HtmlOptions(
            main_content=self.html_main_content,
            alt_texts=self.html_alt_texts,
            links=self.html_links,
            form_fields=self.html_form_fields,
            noscript=self.html_noscript,
            comments=self.html_comments,
            skip=tuple(self.html_skip),
        )

    @model_validator(mode="after")
    def _licence_field_is_read(self):
        if self.licence_field is not None and self.reader == "text":
            raise ValueError(
                "licence_field: a text file has no fields; declare the folder's licence with licence = '...'"
            )
        return self

    def header_fields(self) -> tuple[str, ...]:
        """WARC and WET sources: the record header ``licence_field`` names, kept in ``meta``
        (``licence_links``, the reader's own key, is no header)."""
        if self.reader in ("warc", "wet") and self.licence_field not in (None, "licence_links"):
            return (self.licence_field,)
        return ()

    def kept_meta_fields(self) -> list[str] | None:
        """The fields the reader keeps in ``meta``: ``meta_fields`` and the licence field (None:
        every field)."""
        if self.meta_fields is None or self.licence_field is None or self.licence_field in self.meta_fields:
            return self.meta_fields
        return [*self.meta_fields, self.licence_field]

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, value):
        return [value] if isinstance(value, str) else value

    def input_files(self) -> list[Path]:
        """The sorted, de-duplicated files this source reads. Raises ConfigError if none."""
        found: set[Path] = set()
        for pattern in self.paths:
            path = Path(pattern)
            if path.is_dir():
                found.update(p for p in path.rglob("*") if _is_input(p) and _has_suffix(p, self.reader))
                continue
            matches = [Path(m) for m in glob.glob(str(path), recursive=True)]
            if not matches:
                raise ConfigError(
                    f"sources[{self.name}].paths: {pattern!r} matches no file; "
                    "fix the path or glob (relative paths are resolved from the current folder)"
                )
            for match in matches:
                if match.is_dir():
                    found.update(p for p in match.rglob("*") if _is_input(p) and _has_suffix(p, self.reader))
                else:
                    found.add(match)
        if not found:
            raise ConfigError(
                f"sources[{self.name}].paths: no {'/'.join(READER_SUFFIXES[self.reader])} file found "
                f"in {self.paths}; point paths at the input files"
            )
        return sorted(p.absolute() for p in found)

    def base_dir(self) -> Path:
        """The folder derived ids are relative to: the common folder of the configured paths
        (a glob counts from its last folder before any wildcard), so ids do not depend on which
        files happen to match."""
        roots = []
        for pattern in self.paths:
            path = Path(pattern).absolute()
            while not path.is_dir() and path != path.parent:  # a file, or a part with wildcards
                path = path.parent
            roots.append(str(path))
        return Path(os.path.commonpath(roots))


class LangConfig(_Strict):
    """The `lang` stage: fastText language ID, and which languages to keep."""

    enabled: bool = True
    # A fastText LID model (lid.176.ftz/.bin, GlotLID, OpenLID); default: lid.176.ftz from setup.
    model: ExpandedPath | None = None
    keep: list[str] | None = None  # language codes to keep; None keeps every language
    min_score: float = Field(default=0.0, ge=0.0, le=1.0)
    min_score_by_lang: dict[str, float] = Field(default_factory=dict)
    # What the model reads of a longer document: sample_spans spans spread over it, sample_chars
    # characters in all (pipeline.lang.sample_expr; defaults DEFAULT_SAMPLE_CHARS / _SPANS there).
    sample_chars: int = Field(default=1000, ge=1)
    sample_spans: int = Field(default=4, ge=1)

    @field_validator("model")
    @classmethod
    def _model_exists(cls, value):
        return _existing_file(value, "lang.model", "a fastText LID model")

    @field_validator("min_score_by_lang")
    @classmethod
    def _scores_are_probabilities(cls, value):
        for lang, score in value.items():
            if not 0.0 <= score <= 1.0:
                raise ValueError(f"the minimum score of {lang!r} is {score}; a language-ID score is between 0 and 1")
        return value

    @model_validator(mode="after")
    def _language_codes(self):
        from pipeline.formats.langcodes import code_languages

        if self.keep is not None and not self.keep:
            raise ValueError(
                "keep: an empty list keeps no document; omit keep to keep every language, or list the languages to keep"
            )
        code_languages(self.keep or [], "keep")
        code_languages(self.min_score_by_lang, "min_score_by_lang")
        return self

    def language_settings(self) -> dict[str, list[str]]:
        """The language codes of the section by key (checked against the model: check_files)."""
        return {"keep": self.keep or [], "min_score_by_lang": list(self.min_score_by_lang)}

    @model_validator(mode="after")
    def _spans_fit(self):
        if self.sample_spans > self.sample_chars:
            raise ValueError(
                f"sample_spans ({self.sample_spans}) is more than sample_chars "
                f"({self.sample_chars}); lower sample_spans or raise sample_chars"
            )
        return self


# Every filter measures the text as it entered the stage; rewrites (C4's line removals, PII) compose in order.
DEFAULT_FILTERS = ["c4_quality", "gopher_quality", "gopher_repetition", "fineweb_quality", "pii"]


class LangFilterConfig(_Strict):
    """``[filter.by_lang.<code>]``: the filter stage for the documents of one language (as the
    lang stage names it: ``zh`` also takes ``zho_Hans`` and ``cmn_Hani``): its own filters (default:
    the stage's) and parameters over the stage's, filter by filter."""

    filters: list[str] | None = None
    params: FilterParams = Field(default_factory=dict)

    @field_validator("params", mode="before")
    @classmethod
    def _expanded_paths(cls, value):
        return _expanded_filter_paths(value)


class FilterConfig(_Strict):
    """The `filter` stage: filters applied in order, with threshold overrides per filter."""

    enabled: bool = True
    filters: list[str] = Field(default_factory=lambda: list(DEFAULT_FILTERS))
    # Sources the filters apply to (None: all); documents of other sources pass through unchanged.
    sources: list[str] | None = None
    # Languages they apply to (None: all; a document without a language is then in scope), and
    # languages they leave alone: documents out of scope pass through unchanged.
    langs: list[str] | None = None
    exclude_langs: list[str] = Field(default_factory=list)
    params: FilterParams = Field(default_factory=dict)
    # Licence rules, before the filters and for every source: keep only documents whose every
    # licence matches one of `licences` (None: any), and drop those with a licence matching one of
    # `exclude_licences`. Shell-style patterns ("CC-BY-*"); "unknown" is a licence of its own.
    licences: list[str] | None = None
    exclude_licences: list[str] = Field(default_factory=list)
    # Store every document's measurements beside the stage's documents (filter/attributes/), so that
    # a rerun with changed thresholds decides again without measuring (about 0.7x the stage's input
    # bytes on web text, most of it the rewritten text); false: a changed threshold measures again.
    store_measures: bool = True
    # Filters and parameters per language: [filter.by_lang.th] filters = [...], and
    # [filter.by_lang.zh.params.c4_quality] min_sentences = 2 over [filter.params.c4_quality].
    by_lang: dict[str, LangFilterConfig] = Field(default_factory=dict)
    # The built-in parameters for languages the published rules misread (Thai and Lao mark no
    # sentence end; Armenian's full stop is often typed ":"): pipeline.filters.profiles.
    language_profiles: bool = True

    def scope(self):
        """The documents the filters apply to (pipeline.filters.scope)."""
        return _scope("filter", self)

    def languages(self) -> list[str]:
        """The languages with filters or parameters of their own: the built-in profiles' (when on)
        not named by ``by_lang``, then ``by_lang``'s."""
        from pipeline.filters.profiles import LANGUAGE_PROFILES
        from pipeline.formats.langcodes import parse_lang

        own = {parse_lang(code)[0] for code in self.by_lang}
        built_in = [code for code in LANGUAGE_PROFILES if self.language_profiles and code not in own]
        return [*built_in, *self.by_lang]

    def for_lang(self, code: str) -> tuple[list[str], dict[str, dict]]:
        """The filters and their parameters for the documents of ``code`` (one of
        :meth:`languages`): the stage's, under the built-in profile of the language, under its
        ``by_lang`` table, parameter by parameter."""
        from pipeline.filters.profiles import LANGUAGE_PROFILES
        from pipeline.formats.langcodes import parse_lang

        override = self.by_lang.get(code, LangFilterConfig())
        names = self.filters if override.filters is None else override.filters
        language = parse_lang(code)[0]
        profile = LANGUAGE_PROFILES.get(language, {}) if self.language_profiles else {}
        params = {
            name: _over(self.params.get(name, {}), profile.get(name, {}), override.params.get(name, {}))
            for name in names
        }
        return names, {name: values for name, values in params.items() if values}

    @field_validator("licences", "exclude_licences")
    @classmethod
    def _licence_patterns(cls, value):
        from pipeline.licence import declared

        if value is None:
            return value
        return [pattern if any(c in pattern for c in "*?[") else declared(pattern) for pattern in value]

    @model_validator(mode="after")
    def _licence_rules_run(self):
        if not self.enabled and (self.licences is not None or self.exclude_licences):
            raise ValueError(
                "licences and exclude_licences are rules of the filter stage, which is off; set enabled = true "
                "(with filters = [] for the licence rules alone)"
            )
        return self

    def licence_rule(self):
        """The licence rule of the stage, or None when it has none."""
        from pipeline.licence import LicenceRule

        if self.licences is None and not self.exclude_licences:
            return None
        return LicenceRule(self.licences, self.exclude_licences)

    @model_validator(mode="after")
    def _language_codes(self):
        from pipeline.formats.langcodes import code_languages

        code_languages(self.by_lang, "by_lang")
        return _scope_codes(self)

    def language_settings(self) -> dict[str, list[str]]:
        """The language codes of the section by key (checked against the model: check_files)."""
        return {"langs": self.langs or [], "exclude_langs": self.exclude_langs, "by_lang": list(self.by_lang)}

    @model_validator(mode="after")
    def _known_filters_and_params(self):
        _check_filters(self.filters, self.params, "")
        for code, override in self.by_lang.items():
            _check_filters(override.filters or [], override.params, f"by_lang.{code}.")
        return self

    @field_validator("params", mode="before")
    @classmethod
    def _expanded_paths(cls, value):
        return _expanded_filter_paths(value)


def _scope_codes(settings):
    """A stage's ``langs`` and ``exclude_langs``: codes, each language once, none in both, and
    ``langs`` not empty (it would leave every document out of the stage's rules)."""
    from pipeline.formats.langcodes import code_languages

    if settings.langs is not None and not settings.langs:
        raise ValueError(
            "langs: an empty list applies the stage's rules to no document; omit langs to apply them to every language"
        )
    langs = code_languages(settings.langs or [], "langs")
    excluded = code_languages(settings.exclude_langs, "exclude_langs")
    both = next((language for language in langs if language in excluded), None)
    if both is not None:
        raise ValueError(
            f"langs: {langs[both]!r} is also in exclude_langs ({excluded[both]!r}); keep it in one of them"
        )
    return settings


def _scope(stage: str, settings):
    from pipeline.filters.scope import Scope

    langs = None if settings.langs is None else tuple(settings.langs)
    sources = None if settings.sources is None else tuple(settings.sources)
    return Scope(stage, sources, langs, tuple(settings.exclude_langs))


def _over(*tables: dict) -> dict:
    """Filter parameters, each table's over the ones before; a parameter that is a table itself
    (thresholds per n-gram size, stop words per language) entry by entry."""
    merged: dict = {}
    for table in tables:
        for key, value in table.items():
            below = merged.get(key)
            merged[key] = {**below, **value} if isinstance(below, dict) and isinstance(value, dict) else value
    return merged


def _expanded_filter_paths(value):
    """Filter parameters as their filters take them (a filter's ``config_params``: gopher_repetition's
    ``dup_5gram_char_frac = 0.2`` as ``dup_ngram_char_frac = {5 = 0.2}``), with the path
    parameters (the quality filter's model) ``~`` and variables expanded."""
    from pipeline.filters.registry import FILTERS

    if not isinstance(value, dict):
        return value
    expanded = {}
    for name, params in value.items():
        known = name in FILTERS and isinstance(params, dict)
        if known and hasattr(FILTERS[name], "config_params"):
            _check_entry_names(name, params)
            params = FILTERS[name].config_params(params)
        paths = filter_path_parameters(name) if known else set()
        expanded[name] = {key: _expanded(v) if key in paths else v for key, v in params.items()} if paths else params
    return expanded


def _expanded(value):
    """A path parameter expanded: a path, or each path of a table (word lists by language) or a
    list of them (URL lists)."""
    if isinstance(value, dict):
        return {key: expand_path(v) for key, v in value.items()}
    return [expand_path(v) for v in value] if isinstance(value, list) else expand_path(value)


def _check_entry_names(name: str, params: dict) -> None:
    """Check each parameter written as the name of one entry of a table parameter (gopher_repetition's
    ``dup_5gram_char_frac``, size 5 of ``dup_ngram_char_frac``) by the entry's type, so that an error
    names the key as written. Raises ValueError naming ``<filter>.<key>``."""
    from pydantic import TypeAdapter

    from pipeline.filters.registry import FILTERS

    hints = _parameter_hints(name)
    for key, value in params.items():
        if key in hints:
            continue
        try:
            ((table, entries),) = FILTERS[name].config_params({key: value}).items()
        except ValueError:
            continue
        if table == key or table not in hints or not isinstance(entries, dict) or len(entries) != 1:
            continue
        ((size, _),) = entries.items()
        size_type, entry = _table_types(hints[table])
        try:
            TypeAdapter(size_type).validate_python(size, strict=True)
        except ValidationError as error:
            problem = error.errors()[0]["msg"].removeprefix("Input ")
            raise ValueError(
                f"{name}.{key}: the size {problem}, got {size!r}; give a size within those bounds"
            ) from None
        try:
            TypeAdapter(entry).validate_python(value, strict=True)
        except ValidationError as error:
            raise ValueError(_parameter_error(f"{name}.{key}", value, entry, error)) from None


def _check_filters(filters: list[str], params: dict[str, dict], where: str) -> None:
    """Every filter named is known and every parameter one its filter takes, of its type and
    within its bounds. Raises ValueError naming ``<where>params.<filter>.<key>``."""
    from pipeline.filters.registry import FILTERS, filter_parameters

    for name in [*filters, *params]:
        if name not in FILTERS:
            scope = f"{where.rstrip('.')}: " if where else ""
            raise ValueError(
                f"{scope}unknown filter {name!r}; {did_you_mean(name, FILTERS)}(known: {', '.join(FILTERS)})"
            )
    for name, values in params.items():
        allowed = filter_parameters(name)
        types, hints = _parameter_types(name), _parameter_hints(name)
        defaults = getattr(FILTERS[name], "threshold_maps", {})  # a table parameter's default entries
        for key, value in values.items():
            if key not in allowed:
                raise ValueError(
                    f"{where}params.{name}.{key}: unknown parameter; {did_you_mean(key, allowed)}"
                    f"(allowed: {', '.join(allowed)})"
                )
            if key in types:
                try:
                    types[key].validate_python(value, strict=True)
                except ValidationError as error:
                    at = f"{where}params.{name}.{key}"
                    raise ValueError(_parameter_error(at, value, hints[key], error, defaults.get(key))) from None


def _parameter_error(at: str, value, hint, error: ValidationError, entries: dict | None = None) -> str:
    """One line for a parameter value its filter's type (``hint``) refuses: where (an entry of a
    table parameter by its key), the problem, what was given and how to write it (a table
    parameter's example from its default ``entries``)."""
    first = error.errors()[0]
    loc, got, form = first["loc"], value, _toml_form(hint, entries)
    on_key = "[key]" in loc
    if isinstance(value, dict) and loc and loc[0] in value:  # an entry of a table parameter
        at, got = f"{at}.{loc[0]}", (loc[0] if on_key else value[loc[0]])
        form = _toml_form(_table_types(hint)[1])
    problem = first["msg"][0].lower() + first["msg"][1:]
    if on_key:
        fix = f"key each entry as in {_toml_form(hint, entries)}"
    elif first["type"].startswith(("greater_than", "less_than")):
        fix = "give a threshold within those bounds"
    else:
        fix = f"write it as {form}"
    return f"{at}: {problem}, got {got!r}; {fix}"


def _table_types(hint) -> tuple:
    """The key and value types of a table parameter's type (``Mapping[K, V] | None``)."""
    import typing

    options = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    return typing.get_args(options[0])


def _toml_form(hint, entries: dict | None = None) -> str:
    """How a value of a filter parameter's type is written in TOML, with an example (the forms
    docs/config.md lists; a table of thresholds by size: two of its default ``entries``)."""
    import typing
    from collections.abc import Mapping, Sequence

    options = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    if Path in options and any(typing.get_origin(o) is Mapping for o in options):
        return 'a path in quotes ("~/lists") or a table of paths by language ({ en = "~/lists/en.txt" })'
    if Path in options and any(typing.get_origin(o) is Sequence for o in options):
        return 'a path in quotes ("~/blacklists") or a list of them (["~/blacklists/adult", "~/hosts.txt"])'
    if Path in options:
        return 'a path in quotes ("~/models/quality")'
    if _path_table(hint):
        return 'a table of paths by language ({ en = "~/models/en.bin" })'
    base = options[0]
    if typing.get_origin(base) is typing.Annotated:
        base = typing.get_args(base)[0]
    origin = typing.get_origin(base) or base
    if origin is bool:
        return "true or false"
    if origin is int:
        return "a whole number without quotes (50)"
    if origin is float:
        return "a number without quotes (0.15)"
    if origin in (Mapping, dict):
        key_type = typing.get_args(base)[0]
        if typing.get_origin(key_type) is typing.Annotated:
            key_type = typing.get_args(key_type)[0]
        if key_type is int:
            example = ", ".join(f"{n} = {t}" for n, t in list((entries or {5: 0.15, 6: 0.14}).items())[:2])
            return f"a table of thresholds by n-gram size, 2 words or more ({{ {example} }})"
        return 'a table of word lists by language ({ en = ["the", "and"] })'
    if origin in (Sequence, list, tuple):
        return 'a list of strings in quotes (["•", "-"])'
    return 'a string in quotes ("text")'


def _is_union(hint) -> bool:
    import types
    import typing

    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _parameter_hints(name: str) -> dict:
    """A filter's constructor parameters and their types, bounds included (pipeline.filters.params);
    empty when an annotation does not resolve (the filter then checks its values itself)."""
    import typing

    from pipeline.filters.registry import FILTERS

    try:
        hints = typing.get_type_hints(FILTERS[name].__init__, include_extras=True)
    except Exception:
        return {}
    return {key: hint for key, hint in hints.items() if key != "return"}


def _parameter_types(name: str) -> dict:
    """A filter's constructor parameters as pydantic type adapters (those whose types resolve)."""
    from pydantic import TypeAdapter

    return {key: TypeAdapter(hint) for key, hint in _parameter_hints(name).items()}


def filter_path_parameters(name: str) -> set[str]:
    """The parameters of a filter that take a path (``str | Path``) or a table of paths by
    language (``Mapping[str, str | Path]``: a model per language)."""
    import typing

    return {key for key, hint in _parameter_hints(name).items() if Path in typing.get_args(hint) or _path_table(hint)}


def _path_table(hint) -> bool:
    """Whether a parameter's type is a table of paths (``Mapping[str, str | Path] | None``)."""
    import typing
    from collections.abc import Mapping

    options = typing.get_args(hint) if _is_union(hint) else (hint,)
    return any(
        typing.get_origin(o) in (Mapping, dict) and Path in typing.get_args(typing.get_args(o)[1]) for o in options
    )


class DedupConfig(_Strict):
    """The `dedup` stage: exact and MinHash near-duplicates, verified by exact Jaccard."""

    enabled: bool = True
    exact: bool = True  # identical normalized text
    near: bool = True  # MinHash LSH candidates, verified on the shingle sets
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)  # Jaccard from which documents are duplicates
    ngram: int = Field(default=5, ge=1)  # words per shingle
    num_perm: int = Field(default=128, ge=1)
    seed: Seed = 1
    # LSH layout: by default the one whose candidate probability at the threshold is at least
    # `recall` with the least verification work (21 x 6 at 0.8); or set bands and rows together.
    recall: float = Field(default=0.998, gt=0.0, lt=1.0)
    bands: int | None = Field(default=None, ge=1)
    rows: int | None = Field(default=None, ge=1)
    partitions: int = Field(default=8, ge=1)  # band-key partitions; units of each step across shards
    # Which document of a cluster stays: the first (input order), the longest, or the one with the
    # highest quality_score (needs the "quality" filter on every source).
    keep: Literal["first", "longest", "quality"] = "first"
    # Documents with the same normalized URL are duplicates too (pipeline.dedup.urls has the rules).
    url: bool = False
    # A dedup index (`curate index add`): its documents count as kept, and a duplicate of one is
    # removed (dedup.in_index). A local folder or an fsspec URL.
    index: Path | str | None = None

    @field_validator("index", mode="before")
    @classmethod
    def _index(cls, value):
        from pipeline.io.storage import is_local, location

        if value is None:
            return None
        if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
            raise ValueError("give the folder of a dedup index (`curate index add`), or leave index out")
        path = location(expand_path(value))
        return path if is_local(path) else str(value)

    def minhash_params(self):
        from pipeline.dedup.minhash import MinHashParams

        # A copy of this model's fields, on purpose: pipeline.dedup sits below the config and may not
        # import it, its units hand this frozen, hashable set to worker processes, and benchmarks and
        # tests build it without a config (with fields no config sets: scheme, shingle_hash,
        # keep_signature); it also checks and derives the LSH layout.
        return MinHashParams(
            ngram=self.ngram,
            num_perm=self.num_perm,
            seed=self.seed,
            threshold=self.threshold,
            recall=self.recall,
            bands=self.bands,
            rows=self.rows,
            exact=self.exact,
            near=self.near,
            score_column="quality_score" if self.keep == "quality" else None,
            url=self.url,
        )

    @model_validator(mode="after")
    def _something_to_do(self):
        if self.enabled and not (self.exact or self.near):
            raise ValueError("dedup needs exact or near turned on (or enabled = false)")
        if self.enabled and self.url and not self.near:
            raise ValueError("dedup url needs near = true (a URL copy's similarity is measured on the shingle sets)")
        if (self.bands is None) != (self.rows is None):
            raise ValueError(
                "set bands and rows together, or neither to derive them from threshold, num_perm and recall"
            )
        if self.bands is not None and "recall" in self.model_fields_set:
            raise ValueError("give recall or bands and rows, not both (bands and rows fix the LSH layout)")
        if self.bands is not None and self.bands * self.rows > self.num_perm:
            raise ValueError(
                f"bands x rows ({self.bands} x {self.rows} = {self.bands * self.rows}) must be at "
                f"most num_perm ({self.num_perm}); lower them or raise num_perm"
            )
        if self.enabled and self.near and self.bands is None:
            from pipeline.dedup.minhash import recall_bands

            recall_bands(self.threshold, self.num_perm, self.recall)  # an unreachable recall names its fix
        return self


class LinesConfig(_Strict):
    """The `lines` stage: lines found in more than ``max_docs`` documents are cut from every one."""

    enabled: bool = True
    max_docs: int = Field(default=10, ge=1)
    partitions: int = Field(default=8, ge=1)
    sources: list[str] | None = None  # sources it applies to (None: all)
    langs: list[str] | None = None  # languages it applies to (None: all)
    exclude_langs: list[str] = Field(default_factory=list)  # languages it leaves alone

    def scope(self):
        """The documents whose lines are cut (pipeline.filters.scope)."""
        return _scope("lines", self)

    @model_validator(mode="after")
    def _language_codes(self):
        return _scope_codes(self)

    def language_settings(self) -> dict[str, list[str]]:
        """The language codes of the section by key (checked against the model: check_files)."""
        return {"langs": self.langs or [], "exclude_langs": self.exclude_langs}


class TokenizeConfig(_Strict):
    """The `tokenize` stage: every curated document as tokens, one token shard per curated shard."""

    enabled: bool = True
    # An existing tokenizer.json (so that several runs share one); default: train one on a seeded
    # sample of the curated documents, saved as <run_dir>/tokenize/tokenizer.json.
    tokenizer: ExpandedPath | None = None
    kind: Literal["bpe", "wordpiece"] = "bpe"
    vocab_size: int = Field(default=8192, ge=260)
    sample_docs: int = Field(default=50_000, ge=1)

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_exists(cls, value):
        return _existing_file(value, "tokenize.tokenizer", "a tokenizer.json")


# What mix.exclude reads (see pipeline.dedup.contamination.read_reference_texts).
EXCLUDE_SUFFIXES = (".parquet", ".jsonl", ".json", ".ndjson")

# Folders of the mix stage that are not mixtures.
RESERVED_MIXTURE_NAMES = ("removed", "parts", "intermediate", "docs", "quarantine")


class MixtureConfig(_Strict):
    """One training mixture drawn from the curated pool: its weights, epoch cap and token budget."""

    name: str = Field(default="main", pattern=r"^[A-Za-z0-9_.-]+$", description="the mixture's folder name")
    # Temperature sampling over the groups' token counts (q_i proportional to n_i^(1/T); 1 keeps the
    # natural proportions, about 3.3 is mT5's), or explicit weights per group; neither: T = 1.
    temperature: float | None = Field(default=None, gt=0)
    weights: dict[str, Weight] | None = None
    default_weight: float | None = Field(default=None, ge=0)  # for groups `weights` does not name
    max_epochs: float | None = Field(default=4.0, gt=0)  # UniMax-style cap on repeats per group
    budget_tokens: int | None = Field(default=None, ge=1)  # default: every training token once

    @field_validator("name")
    @classmethod
    def _plain_mixture_name(cls, value):
        return check_component(_plain_name(value, "the mixture name"), "the mixture name", [value])

    @model_validator(mode="after")
    def _one_weighting(self):
        if self.name in RESERVED_MIXTURE_NAMES:
            raise ValueError(f"the mixture name {self.name!r} is taken by a folder of the mix stage; choose another")
        if self.temperature is not None and self.weights is not None:
            raise ValueError("give temperature or weights, not both")
        if self.default_weight is not None and self.weights is None:
            raise ValueError("default_weight goes with weights")
        return self


class RehydrateConfig(_Strict):
    """FineWeb-2's re-hydration: each kept document of the training side counts as ``copies`` of
    itself, by the size of the duplicate cluster it stood for (dedup/clusters.parquet; a document
    in no cluster stood for 1). ``bins``: copies from each cluster size up (FineWeb-2's
    ``{1 = 1, 2 = 2, 3 = 3, 5 = 5, 100 = 8, 1000 = 1}``); omitted, copies = the cluster's size.
    ``max_copies`` caps either."""

    bins: dict[int, int] | None = None
    max_copies: int = Field(default=8, ge=1)

    @field_validator("bins", mode="before")
    @classmethod
    def _sizes_as_numbers(cls, value):
        # A TOML table's keys are strings: "100" is the cluster size 100.
        if not isinstance(value, dict):
            return value
        sizes = {}
        for key, copies in value.items():
            if isinstance(key, str) and not key.strip().isdigit():
                raise ValueError(f"bin {key!r}: a bin is named by a cluster size, a whole number (100 = 8)")
            sizes[int(key)] = copies
        return sizes

    @field_validator("bins")
    @classmethod
    def _bins(cls, value):
        if value is None:
            return value
        if not value:
            raise ValueError("give at least one bin (cluster size = copies), or omit bins for copies = cluster size")
        small = [size for size in value if size < 1]
        if small:
            raise ValueError(f"a bin's cluster size is at least 1, got {small[0]}")
        few = [size for size, copies in value.items() if copies < 1]
        if few:
            raise ValueError(f"bin {few[0]}: copies must be at least 1 (got {value[few[0]]})")
        return dict(sorted(value.items()))


class MixConfig(_Strict):
    """The `mix` stage: groups, a held-out validation split, and mixtures of the training side
    written as token shards (gathered from the tokenize stage's shards, not encoded again)."""

    enabled: bool = True
    group_by: list[Literal["source", "lang"]] = Field(default=["source"], min_length=1)
    merge: dict[str, str] = Field(default_factory=dict)  # group name -> new name (a file name, see mixture_groups)
    min_share: float = Field(default=0.0, ge=0.0, lt=1.0)  # smaller groups (share of tokens) mix as "other"
    validation_fraction: float = Field(default=0.01, ge=0.0, lt=1.0)  # held out per group
    validation_max_docs: int | None = Field(default=1000, ge=0)  # per group
    # per group, where it has the documents (a quarter of them at most): text enough to measure
    validation_min_docs: int = Field(default=10, ge=0)
    # Drop training documents that near-duplicate a validation document (Jaccard >= threshold).
    decontaminate: bool = True
    contamination_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    # Parquet or JSON-lines files with a `text` column (a downstream task, a shared evaluation set):
    # documents that are one of their texts (same `id`), near-duplicate one (Jaccard as above) or
    # share an `exclude_ngram`-token window with one leave the pool before the split.
    exclude: list[ExpandedPath] = Field(default_factory=list)
    exclude_ngram: int = Field(default=13, ge=0)  # tokens per window (GPT-3's 13); 0: no window check
    # A window in more pool documents than this is common text (licences, templates), not
    # contamination: counted and reported, never a reason to exclude.
    common_window_docs: int = Field(default=10, ge=1)
    partitions: int = Field(default=8, ge=1)  # most units per step across shards (one per 16 shards)
    shard_tokens: int = Field(default=1 << 26, ge=1)  # tokens per output shard, at most (a document is never cut)
    # Repeat each kept training document by the size of its duplicate cluster (FineWeb-2's re-hydration).
    rehydrate: RehydrateConfig | None = None
    mixtures: list[MixtureConfig] = Field(default_factory=lambda: [MixtureConfig()], min_length=1)

    @field_validator("exclude")
    @classmethod
    def _exclude_files(cls, value):
        for path in value:
            _existing_file(path, "mix.exclude", "a .parquet or .jsonl file of texts")
            if Path(path).suffix not in EXCLUDE_SUFFIXES:
                raise ValueError(
                    f"{str(path)!r} is neither Parquet nor JSON lines; point mix.exclude at "
                    f"{' or '.join(EXCLUDE_SUFFIXES)} files with a text column"
                )
        return value

    @field_validator("merge")
    @classmethod
    def _merged_names(cls, value):
        for key, name in value.items():  # a group's name is a file name once its '/' are '+'
            check_component(group_file_stem(name), f"the new name of {key!r}", group_files(name))
        return value

    def mixture_groups(self, sources: list[str]) -> list[str]:
        """The mixing groups whose names the config knows (each a file name in the mixture
        folders): the groups ``group_by`` makes of ``sources`` (a language as a placeholder as long
        as the longest code: the languages are known once the documents are read), as ``merge``
        renames them, its targets, and ``other`` when ``min_share`` may make it."""
        from pipeline.formats.names import LANG_CODE_BYTES
        from pipeline.mix.plan import GROUP_SEPARATOR, OTHER

        parts = [sources if by == "source" else ["x" * LANG_CODE_BYTES] for by in self.group_by]
        groups = [""]
        for values in parts:
            groups = [f"{group}{GROUP_SEPARATOR if group else ''}{value}" for group in groups for value in values]
        named = [self.merge.get(group, group) for group in groups] + list(self.merge.values())
        return list(dict.fromkeys([*named, *([OTHER] if self.min_share > 0 else [])]))

    @model_validator(mode="after")
    def _unique_names(self):
        names = [m.name for m in self.mixtures]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"mixture names must be unique; rename the repeated {repeated}")
        return self


class RunConfig(_Strict):
    """A curation run."""

    # A local folder (a Path), or the URL of any fsspec file system (s3://bucket/run) as written.
    run_dir: Path | str
    seed: Seed = 0
    sources: list[SourceConfig] = Field(min_length=1)
    lang: LangConfig = Field(default_factory=LangConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    lines: LinesConfig = Field(default_factory=LinesConfig)
    tokenize: TokenizeConfig = Field(default_factory=TokenizeConfig)
    mix: MixConfig = Field(default_factory=MixConfig)
    # Reading: documents per Arrow batch, and the largest document text accepted.
    batch_docs: int = Field(default=4096, gt=0)
    max_doc_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    # A source whose share of quarantined records is more than this fails the run after the source
    # stage, whose outputs are kept (1.0: never); a source's own max_quarantine_fraction overrides it.
    max_quarantine_fraction: float = Field(default=0.5, ge=0.0, le=1.0)
    # Output shards are cut at whichever limit comes first.
    shard_docs: int = Field(default=50_000, gt=0)
    shard_bytes: int = Field(default=256 * 1024 * 1024, gt=0)

    @field_validator("run_dir", mode="before")
    @classmethod
    def _run_dir(cls, value):
        # A local path becomes a Path as before; a URL stays a string (a Path would turn
        # memory://x into memory:/x). The checks are those of every output folder: not a file
        # nor under one, a file system whose package is installed and that takes writes.
        from pipeline.io.storage import is_local, output_location

        if not isinstance(value, (str, os.PathLike)):
            raise ValueError("give a local folder or the URL of a file system, such as s3://bucket/run")
        if not str(value).strip():
            raise ValueError("is empty; give the folder the run writes to, such as runs/my-crawl")
        path = output_location(expand_path(value), folder=True)
        return path if is_local(path) else str(path)

    @model_validator(mode="after")
    def _source_names(self):
        names = [s.name for s in self.sources]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"source names must be unique; rename the repeated {repeated}")
        if (
            self.dedup.enabled
            and self.dedup.keep == "quality"
            and not (self.filter.enabled and "quality" in self.filter.filters and self.filter.sources is None)
        ):
            raise ValueError(
                'dedup.keep = "quality" needs the "quality" filter in filter.filters, on all '
                "sources (no filter.sources): it gives every document its quality_score"
            )
        if self.mix.enabled and not self.tokenize.enabled:
            if "mix" in self.model_fields_set:
                raise ValueError(
                    "the mix stage gathers the tokenize stage's shards: enable tokenize, or set mix.enabled = false"
                )
            # No [mix] section and no tokens: the run ends with the curated documents
            # (pipeline.stages.registry.enabled_stages leaves mix out).
        if self.mix.enabled and self.mix.rehydrate is not None and not self.dedup.enabled:
            raise ValueError("mix.rehydrate repeats documents by their dedup clusters: enable dedup, or drop rehydrate")
        if self.mix.enabled and "lang" in self.mix.group_by and not self.lang.enabled:
            raise ValueError('mix.group_by has "lang" but the lang stage is off; enable lang or group by source')
        for section in ("filter", "lines"):
            unknown = sorted(set(getattr(self, section).sources or []) - set(names))
            if unknown:
                raise ValueError(
                    f"{section}.sources names no configured source: {unknown}; "
                    f"{did_you_mean(unknown[0], names)}(sources: {', '.join(names)})"
                )
        _check_file_names(self)
        _check_weight_names(self)
        return self


def _check_file_names(config: RunConfig) -> None:
    """Names that meet in one file name: the mix stage's shards carry each group's name, its part
    records the mixture's and the group's; two groups that map to one file name would write one
    file. ValueError with one line."""
    if not (config.mix.enabled and config.tokenize.enabled):
        return
    groups = config.mix.mixture_groups([source.name for source in config.sources])
    check_group_names(groups)
    for index, mixture in enumerate(config.mix.mixtures):
        for group in groups:
            check_component(
                mixture.name,
                f"mix.mixtures[{index}].name: the mixture name",
                mixture_files(mixture.name, group),
                f" with the group {shown(group)!r}",
            )


def _check_weight_names(config: RunConfig) -> None:
    """A mixture's weights name groups: where the groups are known before the documents are read
    (``group_by = ["source"]``: the sources, as ``merge`` renames them), a name that is none of them
    is refused now rather than after every stage before mix. A language's groups are checked by the
    mix stage (pipeline.mix.plan.named_groups: ``eng`` names the group ``en``). ValueError, one line."""
    if not (config.mix.enabled and config.tokenize.enabled) or config.mix.group_by != ["source"]:
        return
    groups = config.mix.mixture_groups([source.name for source in config.sources])
    for index, mixture in enumerate(config.mix.mixtures):
        unknown = next((name for name in mixture.weights or {} if name not in groups), None)
        if unknown is None:
            continue
        renamed = f" (mix.merge renames it {config.mix.merge[unknown]!r})" if unknown in config.mix.merge else ""
        near = did_you_mean(unknown, groups)
        listed = f"{near}(the groups: {', '.join(groups)})" if near else f"the groups are {', '.join(groups)}"
        raise ValueError(f"mix.mixtures[{index}].weights: unknown group {unknown!r}{renamed}; {listed}")


def _is_input(path: Path) -> bool:
    """A file to read, or a link that leads to none (dangling, or a loop): the reader
    quarantines that under the link's path rather than passing it over in silence."""
    return path.is_file() or (path.is_symlink() and not path.exists())


def _has_suffix(path: Path, reader: str) -> bool:
    name = path.name.lower()
    return name.endswith(READER_SUFFIXES[reader])


def parse_config(data: dict) -> RunConfig:
    """Validate a config mapping; raise ConfigError with one line on the first problem."""
    config = validate_model(RunConfig, data)
    for source in config.sources:
        files = source.input_files()  # a missing input stops the run here, before any work
        check_apart(config, source, files)
    check_files(config)
    return config


def _read_folder(pattern: str) -> tuple[Path, bool] | None:
    """The folder a path of a source reads in and whether it reads below that folder's own files
    (a folder is read recursively, and so is a glob with ``**`` or a wildcard folder); None for a
    single file."""
    path = Path(pattern).absolute()
    if path.is_dir():
        return path.resolve(), True
    parts = path.parts
    wild = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), None)
    if wild is None:
        return None
    rest = parts[wild:]
    return Path(*parts[:wild]).resolve(), len(rest) > 1 or "**" in rest


def check_apart(config: RunConfig, source: SourceConfig, files: list[Path]) -> None:
    """Refuse a run folder where ``source`` reads (the next run would read this run's output as
    its input) and an input file inside the run folder (a run replaces files there). Raises
    ConfigError with one line."""
    from pipeline.io.storage import is_local

    if not is_local(config.run_dir):
        return
    run = Path(config.run_dir).absolute().resolve()
    for pattern in source.paths:
        read = _read_folder(pattern)
        if read is not None and (run == read[0] or (read[1] and run.is_relative_to(read[0]))):
            raise ConfigError(
                f"run_dir: {str(run)!r} is inside {str(read[0])!r}, which sources[{source.name}].paths "
                "reads, so a run would read its own output as input; give a run_dir outside that folder"
            )
    # os.path.realpath, not Path.resolve: a link loop among the inputs (quarantined by the source
    # stage) resolves as far as it goes instead of raising
    inside = next((file for file in files if Path(os.path.realpath(file)).is_relative_to(run)), None)
    if inside is not None:
        raise ConfigError(
            f"sources[{source.name}].paths: {str(inside)!r} is inside run_dir {str(run)!r}, where the "
            "run writes; move the inputs out of the run folder, or give another run_dir"
        )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _stamp(path: Path) -> tuple[int, int]:
    stat = Path(path).stat()
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=16)
def _model_labels(path: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    """The labels of a language-ID model, loaded once per file version (the model is not kept)."""
    from pipeline.lang import LanguageIdentifier

    return LanguageIdentifier(path).languages


def _check_language_codes(config: RunConfig, labels: tuple[str, ...], model: str) -> None:
    """Every language code of the stages that run names a language the model gives (its labels,
    in any spelling pipeline.formats.langcodes reads). Raises ConfigError with one line."""
    from pipeline.formats.langcodes import check_model_codes

    for section in ("lang", "filter", "lines"):
        settings = getattr(config, section)
        if not settings.enabled:
            continue
        for key, codes in settings.language_settings().items():
            try:
                check_model_codes(codes, f"{section}.{key}", labels, model)
            except ValueError as error:
                raise ConfigError(str(error)) from None


def check_files(config: RunConfig) -> None:
    """Open what the run will load (the LID model, the tokenizer, the filters' models, the excluded
    texts), so that a file that is not what its key says stops the run here, with one line, and not
    after stages have written output. Raises ConfigError."""
    if config.lang.enabled:
        from pipeline.lang.model import lid_model_path

        try:
            path = lid_model_path(config.lang.model)
        except FileNotFoundError as error:
            raise ConfigError(f"lang.model: {error}") from None
        try:
            labels = _model_labels(str(path), *_stamp(path))
        except Exception as error:  # fastText raises ValueError or RuntimeError on a file it cannot read
            raise ConfigError(
                f"lang.model: {str(path)!r} is not a fastText language-ID model "
                f"({_first_line(error)}); point lang.model at one, such as lid.176.ftz"
            ) from None
        _check_language_codes(config, labels, path.name)
    if config.filter.enabled:
        from pipeline.filters.registry import build_filters

        groups = [("", config.filter.filters, config.filter.params)]
        groups += [(f"by_lang.{code}.", *config.filter.for_lang(code)) for code in config.filter.by_lang]
        for where, names, params in groups:  # a language's own model too
            for name in names:
                try:
                    build_filters([name], params)
                except Exception as error:  # a missing or unreadable model, a threshold out of range
                    raise ConfigError(
                        f"filter.{where}params.{name}: the {name} filter cannot be built ({_first_line(error)}); "
                        f"fix [filter.{where}params.{name}]"
                    ) from None
    if config.tokenize.enabled and config.tokenize.tokenizer is not None:
        from tokenizers import Tokenizer

        try:
            Tokenizer.from_file(str(config.tokenize.tokenizer))
        except Exception as error:  # the tokenizers library raises a bare Exception
            raise ConfigError(
                f"tokenize.tokenizer: {str(config.tokenize.tokenizer)!r} is not a tokenizer.json "
                f"({_first_line(error)}); point it at one saved by the tokenizers library, "
                "or leave it out to train one"
            ) from None
    if config.mix.enabled and config.tokenize.enabled:
        for path in config.mix.exclude:
            _check_texts_file(Path(path))
    if config.dedup.enabled and config.dedup.index is not None:
        _check_dedup_index(config.dedup)


def _check_dedup_index(settings: DedupConfig) -> None:
    """The index exists and was made with the run's MinHash settings."""
    from pipeline.dedup.index import DedupIndex, DedupIndexError, check_settings, index_settings

    try:
        check_settings(
            DedupIndex(settings.index).opened(), index_settings(settings.minhash_params().to_dict()), "this run"
        )
    except DedupIndexError as error:
        raise ConfigError(f"dedup.index: {error}") from None


def _check_texts_file(path: Path) -> None:
    """A mix.exclude file must be Parquet or JSON lines with a text column."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            columns = pq.read_schema(path).names
        else:
            import polars as pl

            columns = pl.scan_ndjson(path).collect_schema().names()
    except Exception as error:
        raise ConfigError(
            f"mix.exclude: {str(path)!r} cannot be read as {path.suffix.lstrip('.')} "
            f"({_first_line(error)}); point mix.exclude at Parquet or JSON-lines files of texts"
        ) from None
    if "text" not in columns:
        raise ConfigError(
            f"mix.exclude: {str(path)!r} has no 'text' column (columns: {', '.join(columns)}); "
            "give files whose texts are in a column named text"
        )


def load_config(path: Path) -> RunConfig:
    """Read and validate a TOML config file."""
    return parse_config(read_toml(path))
