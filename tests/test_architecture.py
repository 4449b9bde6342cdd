"""The architecture holds: the import contracts of pyproject.toml pass (docs/architecture.md), an
import against a layer breaks them, and no function outside benchmarks/ runs past 100 lines."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flows", "report", "experiment", "demo", "trainer", "pipeline")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# A longer function is a sequence of steps that should have names (benchmarks/ aside).
MAX_FUNCTION_LINES = 100


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_the_code(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(path: Path, line: str) -> None:
    text = path.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    assert marker in text, path
    path.write_text(text.replace(marker, marker + line + "\n", 1), encoding="utf-8")


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # a format reaching up into a stage
        ("pipeline/formats/documents.py", "import pipeline.stages.registry", "The library's layers"),
        # one algorithm importing another
        ("pipeline/dedup/lsh.py", "import pipeline.filters.heuristics", "The library's layers"),
        # the trainer reaching past the formats
        ("trainer/model.py", "import pipeline.config", "The trainer reads the library's formats only"),
        # the library importing the application above it
        ("pipeline/mix/plan.py", "import report", "Layers: flows"),
        # the library importing Prefect
        ("pipeline/filters/text.py", "import prefect", "The library imports neither Prefect nor torch"),
        # two modules of one package importing each other
        ("pipeline/formats/hashing.py", "import pipeline.formats.tokens", "No import cycles"),
    ],
)
def test_an_import_against_the_architecture_breaks_a_contract(tmp_path, module, line, contract):
    root = copy_of_the_code(tmp_path)
    if "cycles" in contract:  # make the cycle: tokens -> hashing as well
        add_import(root / "pipeline/formats/tokens.py", "import pipeline.formats.hashing")
    add_import(root / module, line)
    result = lint_imports(root)
    assert result.returncode != 0, result.stdout
    broken = [row for row in result.stdout.splitlines() if row.endswith("BROKEN")]
    assert any(row.startswith(contract) for row in broken), result.stdout


def test_no_function_runs_past_100_lines():
    long = []
    for package in (*PACKAGES, "tests", "scripts"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "functions over 100 lines (split them into named steps):\n" + "\n".join(long)
