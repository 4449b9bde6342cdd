"""Empty tables are built without pandas: pyarrow's ``Schema.empty_table`` imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_an_empty_table_does_not_import_pandas():
    """``Schema.empty_table`` imports pandas (a third of a second on a run's first report); the
    product code builds its empty tables with :func:`empty_table` instead."""
    code = (
        "import sys, pyarrow as pa\n"
        "from pipeline.io.storage import empty_table\n"
        "table = empty_table(pa.schema([('a', pa.int64())]))\n"
        "assert table.num_rows == 0 and table.schema.names == ['a']\n"
        "assert 'pandas' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in ("pipeline", "report", "flows", "experiment", "demo", "trainer")
        for path in (ROOT / package).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "empty_table"
    ]
    assert calls == []
