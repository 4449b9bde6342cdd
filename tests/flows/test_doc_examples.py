"""The examples the docs and the help give, run against a demo run as a user would type them: every
``curate ...`` line of the README's and docs' code blocks whose input is the demo run, and the
document id ``curate inspect --help`` gives; and the demo tables the docs show are the tables the
CLI prints (the same titles, columns and stages, no notes the CLI does not print)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from flows.cli import app
from tests.helpers import REPO, run_curate

DOCS = [REPO / "README.md", REPO / "docs" / "cli.md", REPO / "docs" / "getting-started.md"]
# Made by `curate train` on the demo's mixture, not by `curate demo`.
NOT_OF_THE_DEMO = "runs/demo/train"


def _code_lines(path: Path) -> list[str]:
    """The lines of a markdown file's fenced code blocks."""
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def _demo_examples() -> list[tuple[str, list[str]]]:
    """(where, the arguments after ``curate``) of each example that reads the demo run; optional
    parts (``[--json]``) left out."""
    found = []
    for path in DOCS:
        for line in _code_lines(path):
            command = re.sub(r"\s#.*$", "", line).strip()
            command = re.sub(r"^(\.venv/bin/)?curate ", "curate ", command)
            if not command.startswith("curate ") or "runs/demo" not in command or NOT_OF_THE_DEMO in command:
                continue
            words = shlex.split(re.sub(r"\[[^\]]*\]", "", command))[1:]
            found.append((f"{path.relative_to(REPO)}: {line.strip()}", words))
    return found


EXAMPLES = _demo_examples()


def _inspect_help_id() -> str:
    inspect = typer.main.get_command(app).commands["inspect"]
    (help_text,) = [param.help for param in inspect.params if param.name == "doc_id"]
    return re.search(r"e\.g\. (\S+)", help_text)[1]


def test_the_docs_have_demo_examples():
    commands = {words[0] for _, words in EXAMPLES}
    assert {"inspect", "report", "export"} <= commands
    assert any(words[0] == "inspect" and len(words) == 3 for _, words in EXAMPLES)  # a document's id


@pytest.mark.parametrize("where, words", EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_every_demo_example_of_the_docs_runs(demo_run, tmp_path, where, words):
    root = demo_run[0]
    args = [str(tmp_path / "out") if word == "OUT" else word for word in words]
    done = run_curate(args, root)
    assert done.returncode == 0, f"{where}\n{done.stdout}{done.stderr}"


def test_the_inspect_help_example_is_a_document_of_the_demo(demo_run):
    root, doc_id = demo_run[0], _inspect_help_id()
    done = run_curate(["inspect", "runs/demo", doc_id], root)
    assert done.returncode == 0, done.stderr
    assert doc_id in done.stdout and "fate:" in done.stdout


def _tables(text: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    """The rich tables in ``text``: per title (numbers as N, spaces squeezed), the header's cells and
    the rows' cells."""
    tables, title, header, rows = {}, [], None, []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("┏"):
            header, rows = None, []
        elif line.startswith("┃"):
            header = [cell.strip() for cell in line.strip("┃").split("┃")]
        elif line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
        elif line.startswith("└"):
            key = re.sub(r"\d[\d,.]*", "N", " ".join(" ".join(title).split()))
            tables[key] = (header, rows)
            title = []
        elif not line.startswith("┡"):
            title.append(line)
    return tables


def _demo_block(path: Path) -> str:
    """The code block after "`make demo` prints" in a doc."""
    text = path.read_text()
    start = text.index("`make demo` prints")
    block = text.index("```\n", start) + 4
    return text[block : text.index("```", block)]


@pytest.mark.parametrize("path", [REPO / "README.md", REPO / "docs" / "getting-started.md"], ids=lambda p: p.name)
def test_the_docs_demo_tables_are_the_tables_the_cli_prints(demo_run, path):
    shown, printed = _tables(_demo_block(path)), _tables(demo_run[3])
    assert "documents through the stages" in shown, f"{path.name} shows no stage table as the CLI prints it"
    for title, (header, rows) in shown.items():
        # (a printed title has the lines printed before the table in front of it)
        same = [key for key in printed if key.endswith(title)]
        assert same, f"{path.name}: the CLI prints no table {title!r}"
        assert header == printed[same[0]][0]
        assert all(len(row) == len(header) for row in rows)
        if title == "documents through the stages":
            funnel = printed[same[0]][1]
    header, rows = shown["documents through the stages"]
    stages = [row for row in rows if row[0]]  # a row of its own per stage; the rest wraps reasons
    assert [row[0] for row in stages] == [row[0] for row in funnel if row[0]]
    for row, following in zip(stages, [*stages[1:], None]):
        docs_in, docs_out, removed, quarantined = (int(cell) for cell in row[1:5])
        assert docs_in == docs_out + removed + quarantined, row
        assert following is None or int(following[1]) == docs_out, (row, following)
