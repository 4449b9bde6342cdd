"""A config file on disk: reading TOML and validating it against a pydantic model, with errors
of one line that name the key and the fix (:class:`ConfigError`)."""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError


class ConfigError(ValueError):
    """A problem in the user's configuration; its message is one line with the fix."""


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
    """The keys allowed where ``loc`` points, for the 'unknown key' hint."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        inner = getattr(annotation, "__args__", (annotation,))[0]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            model = inner
    return list(model.model_fields)


def _one_line(error: ValidationError, model: type[BaseModel]) -> str:
    first = error.errors()[0]
    loc = first["loc"]
    key = _key(loc)
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        return f"{key}: unknown key; {hint}(allowed: {', '.join(allowed)})"
    if first["type"] == "missing":
        return f"{key}: required key is missing; add it to the config"
    message = first["msg"].removeprefix("Value error, ")
    if isinstance(first.get("input"), dict):  # a whole section: the message names the key in it
        return f"{key}: {message}"
    if str(first.get("input")) in message:  # the message names what it got (a file's path)
        return f"{key}: {message}"
    return f"{key}: {message} (got {first.get('input')!r})"
