"""A run whose names are hostile: an input file named with a backtick, an HTML element and rich's
markup (a control character in a file name quarantines its records as invalid_id: the ids made of
it could not be typed), and mix.merge groups named with HTML, Markdown and
rich's markup. The dataset card, rendered as CommonMark (with GFM's tables, as the Hugging Face
Hub renders it), the terminal's tables and the HTML report show every name as text."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from pipeline.formats.escape import visible
from tests.helpers import REPO, live_markup, parse_html, render_markdown, run_curate, shared_api_env, write_jsonl

pytestmark = pytest.mark.flow

FILE = "a`b<img src=x onerror=alert(1)>[g] *red* line.jsonl"
GROUPS = {
    "news": "<script>alert(1)</script> [g] `x` | *b* \x1b[31m",
    "chat": "<img src=x onerror=alert(2)> [link](javascript:alert(3)) $\\frac$",
}
CARD_ELEMENTS = {"h1", "h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "code", "pre", "em"}
CARD_ELEMENTS |= {"strong"}


def _run(tmp_path: Path) -> subprocess.CompletedProcess:
    rng = random.Random(3)
    words = "river council budget market school harbour winter garden station bridge museum library".split()
    text = lambda n: " ".join(rng.choice(words) for _ in range(n)) + "."  # noqa: E731
    write_jsonl(tmp_path / "news" / FILE, [{"id": f"n{i}", "text": text(60)} for i in range(30)])
    write_jsonl(tmp_path / "chat" / "a.jsonl", [{"id": f"c{i}", "text": text(20)} for i in range(30)])
    merge = "".join(f"{name} = {json.dumps(group)}\n" for name, group in GROUPS.items())
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "{tmp_path / "run"}"\n'
        + "".join(f'[[sources]]\nname = "{name}"\nreader = "jsonl"\npaths = ["{tmp_path / name}"]\n' for name in GROUPS)
        + "[lang]\nenabled = false\n[filter]\nenabled = false\n[dedup]\nenabled = false\n"
        "[lines]\nenabled = false\n[tokenize]\nvocab_size = 300\n"
        f'[mix]\ngroup_by = ["source"]\nvalidation_fraction = 0.2\n[mix.merge]\n{merge}'
    )
    env = {"PREFECT_HOME": str(tmp_path / "prefect-home"), "COLUMNS": "400", **shared_api_env()}
    return run_curate(["run", str(config), "--quiet"], REPO, env=env)


def test_hostile_names_stay_text_in_the_card_the_terminal_and_the_report(tmp_path, prefect_server):
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    names = [*GROUPS.values(), str(tmp_path / "news" / FILE)]

    # The card: no element or attribute from a name, and each name reads as itself.
    card = (tmp_path / "run" / "mix" / "main" / "README.md").read_text().split("---\n", 2)[2]
    for tables in (False, True):
        found = render_markdown(card, tables=tables)
        assert not live_markup(found, CARD_ELEMENTS | ({"table"} if tables else set()))
    text = "".join(render_markdown(card).text)
    for name in names:
        assert visible(name) in text

    # The terminal: no escape byte, rich's brackets kept, each group's name in the mixtures table.
    assert "\x1b" not in result.stdout + result.stderr
    printed = result.stdout.replace("\n", "")
    for name in GROUPS.values():
        assert visible(name) in printed or all(part in printed for part in visible(name).split())

    # The report: no element from a name (the page has no script at all), no control byte.
    page = (tmp_path / "run" / "report" / "index.html").read_text(encoding="utf-8")
    found = parse_html(page)
    assert "script" not in [tag for tag, _ in found.tags] and not [t for t, _ in found.tags if t == "img"]
    assert not live_markup(found, {tag for tag, _ in found.tags})
    assert "\x1b" not in page
    assert "$\\frac$" in "".join(found.text)  # the chart's label, drawn as text (not mathtext)
