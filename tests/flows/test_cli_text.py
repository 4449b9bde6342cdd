"""What the CLI prints of its own: every command's help as written (brackets such as
``pip install -e '.[ray]'`` or ``[sweep]`` are text, not rich markup), and ``curate --version``."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from flows.cli import app
from tests.helpers import REPO, run_curate

BRACKETED = re.compile(r"\[[^\[\]]+\]")
COMMANDS = sorted(typer.main.get_command(app).commands)


def _squeezed(text: str) -> str:
    """``text`` without whitespace: a help line wrapped anywhere (at a hyphen too) still matches."""
    return "".join(text.split())


def _source_help(name: str | None) -> list[str]:
    """The help strings of a command (None: the app) as the source writes them."""
    group = typer.main.get_command(app)
    command = group if name is None else group.commands[name]
    texts = [command.help or ""]
    texts += [getattr(param, "help", None) or "" for param in command.params]
    return texts


def test_the_help_strings_have_brackets_to_check():
    found = {word for name in COMMANDS for text in _source_help(name) for word in BRACKETED.findall(text)}
    assert {"[ray]", "[sweep]", "[default: cores]", "[default: start a local one]"} <= found


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_every_help_prints_its_bracketed_words(name):
    args = ["--help"] if name is None else [name, "--help"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    printed = _squeezed(result.output)
    for text in _source_help(name):
        for word in BRACKETED.findall(text):
            assert _squeezed(word) in printed, f"curate {' '.join(args)} lost {word!r}"


def test_run_help_shows_the_ray_extra_in_a_real_process():
    done = run_curate(["run", "--help"], REPO)
    assert done.returncode == 0
    assert "pip install -e '.[ray]'" in done.stdout


def test_version_names_the_package_and_its_main_libraries():
    done = run_curate(["--version"], REPO)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"curate {version('curate')} (")
    for library in ("torch", "prefect", "polars"):
        assert f"{library} {version(library)}" in lines[0]
