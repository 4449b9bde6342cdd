"""A config file on disk: reading TOML and validating it against a pydantic model, with errors
of one line that name the key and the fix (:class:`ConfigError`); the paths it gives, with ``~``
and environment variables expanded once, as the model reads them (:data:`ExpandedPath`)."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, ValidationError

# $NAME or ${NAME} in a path.
_VARIABLE = re.compile(r"\$(?:(\w+)|\{(\w+)\})")
# A message that starts with the key it is about: ``mix.mixtures[0].name: ...``.
_KEYED = re.compile(r"^[A-Za-z_][\w.\[\]']*: ")
# ``scheme://`` at the start: a URL, whose ``~`` is not this machine's home.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def expand_path(value):
    """A path setting as written, with a leading ``~`` (or ``~user``) and environment variables
    (``$DATA``, ``${DATA}``) expanded, as a shell would; a URL has its variables expanded only.
    Anything not a path passes through for the type check to name. ValueError names a variable
    that is not set (an unset one would become a folder named ``$DATA``)."""
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        return value
    text = os.fspath(value)
    if not isinstance(text, str):
        return value
    if not _URL.match(text):
        text = os.path.expanduser(text)

    def variable(match: re.Match) -> str:
        name = match[1] or match[2]
        if name not in os.environ:
            raise ValueError(
                f"the environment variable ${name} in {os.fspath(value)!r} is not set; set it, or write the path out"
            )
        return os.environ[name]

    text = _VARIABLE.sub(variable, text)
    return Path(text) if isinstance(value, Path) else text


# Why a path setting must be on this machine, in the refusal of a URL there.
READS_HERE = "this setting names a file on this machine: copy it here first, then give its local path"
WRITES_HERE = "this setting names a folder written on this machine: give a local path, then copy what is written there"


def local_path(why: str):
    """The before-validator of a path setting on this machine: :func:`expand_path`, then a file
    URL (``file:///x``, ``file://localhost/x``) read as the local path it names and any other URL
    refused with ``why`` (pipeline.io.storage.location), before pathlib would make a local name
    of it (``memory://b/x`` as the folder ``memory:/b/x``)."""

    def parse(value):
        value = expand_path(value)
        if isinstance(value, str) and _URL.match(value):
            from pipeline.io.storage import location

            return location(value, why)  # a LocationError is a ValueError: the key is named
        return value

    return parse


# A local path setting of a config model: expanded (see expand_path), a file URL read, another
# URL refused, then a Path; a TOML string is taken although the models are strict.
ExpandedPath = Annotated[Path, BeforeValidator(local_path(READS_HERE)), Field(strict=False)]
# The same, for a folder the command writes (the refusal of a URL says so).
OutputFolder = Annotated[Path, BeforeValidator(local_path(WRITES_HERE)), Field(strict=False)]
# A random seed: numpy, torch and random all take it.
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]
# A path or glob kept as a string (a source's paths), expanded alike.
ExpandedStr = Annotated[str, BeforeValidator(expand_path)]


class ConfigError(ValueError):
    """A problem in the user's configuration; its message is one line with the fix."""


def did_you_mean(word, choices) -> str:
    """``"did you mean 'x'? "`` for the choice closest to ``word`` (a misspelt key or name), or ``""``."""
    near = difflib.get_close_matches(str(word), [str(choice) for choice in choices], n=1)
    return f"did you mean {near[0]!r}? " if near else ""


def british_keys(data, fields) -> dict:
    """``data`` (a section of a config) with keys spelt "license" (as datatrove, Hugging Face and
    SPDX spell them) renamed to this project's "licence" where ``fields`` has that key. ValueError
    when a section gives both spellings of one key."""
    if not isinstance(data, dict):
        return data
    renamed = dict(data)
    for key in data:
        british = key.replace("license", "licence") if isinstance(key, str) else key
        if british == key or british not in fields:
            continue
        if british in data:
            raise ValueError(f"{key} and {british} are one key spelt two ways; keep one")
        renamed[british] = renamed.pop(key)
    return renamed


def validate_model(model: type[M], data: dict) -> M:
    """``model.model_validate(data)``, raising ConfigError with one line on the first problem
    (for any config model: the run's, the trainer's)."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_one_line(error, model)) from None


def read_toml(path: Path) -> dict:
    """A TOML file as a dict; ConfigError with one line when it is missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config: {str(path)!r} is not a file; pass the path of a .toml config")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config: {path} is not valid TOML ({error}); fix the syntax there") from None


M = TypeVar("M", bound=BaseModel)


def _key(loc: tuple) -> str:
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key or "config"


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys allowed where ``loc`` points, for the 'unknown key' hint: the path is walked through
    sections, lists (an index) and tables keyed by the user (``by_lang.<code>``: any key)."""
    current = model
    for part in loc[:-1]:
        current = _inner(current, part)
    return list(current.model_fields) if _is_model(current) else []


def _is_model(annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _inner(annotation, part):
    """The type found at ``part`` (a field, an index or a key) inside ``annotation``."""
    if _is_model(annotation):
        field = annotation.model_fields.get(part) if isinstance(part, str) else None
        return None if field is None else field.annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (dict, list, tuple, Mapping, Sequence) and args:
        return args[-1]  # a list's items, a dict's values
    for arg in args:  # X | None, a union: the alternative that has parts
        if _is_model(arg) or typing.get_origin(arg) in (dict, list):
            return _inner(arg, part)
    return None


def _one_line(error: ValidationError, model: type[BaseModel]) -> str:
    first = error.errors()[0]
    loc = first["loc"]
    key = _key(loc)
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        if not allowed:
            return f"{key}: unknown key; remove it"
        return f"{key}: unknown key; {did_you_mean(loc[-1], allowed)}(allowed: {', '.join(allowed)})"
    if first["type"] == "missing":
        return f"{key}: required key is missing; add it to the config"
    message = first["msg"].removeprefix("Value error, ")
    if _KEYED.match(message) and (not loc or isinstance(first.get("input"), dict)):
        # A check of the whole config, or of a section, names its key (in the section) itself.
        return f"{key}.{message}" if loc else message
    if isinstance(first.get("input"), dict):  # a whole section: the message names the key in it
        return f"{key}: {message}"
    if str(first.get("input")) in message:  # the message names what it got (a file's path)
        return f"{key}: {message}"
    got = repr(first.get("input"))
    line = f"{key}: {message} (got {got if len(got) <= 60 else got[:40] + '...' + got[-10:]})"
    if first["type"] == "literal_error" and isinstance(first.get("input"), str):  # a misspelt choice
        hint = did_you_mean(first["input"], re.findall(r"'([^']*)'", first["ctx"]["expected"]))
        line += f"; {hint.strip()}" if hint else ""
    return line
