"""scripts/compare_runs.py: two run folders equal but for paths and timings, and one that differs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

spec = importlib.util.spec_from_file_location("compare_runs", Path(__file__).parents[1] / "scripts" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def _run(root: Path, seconds: float, loss: float) -> Path:
    (root / "mix").mkdir(parents=True)
    stats = {"folder": str(root / "mix"), "loss": loss, "timing": {"total_s": seconds}, "tokens_per_s": 1 / seconds}
    (root / "mix" / "stats.json").write_text(json.dumps(stats))
    (root / "mix" / "shard.arrow").write_bytes(b"\x00\x01")
    (root / ".prefect").mkdir()
    (root / ".prefect" / "prefect.db").write_bytes(str(seconds).encode())
    return root


def test_paths_and_timings_are_set_aside_and_a_changed_number_is_not(tmp_path, capsys):
    before = _run(tmp_path / "before" / "demo", 3.0, 2.5)
    after = _run(tmp_path / "after" / "demo", 7.0, 2.5)
    assert compare_runs.main([str(before), str(after)]) == 0
    assert "2 files identical" in capsys.readouterr().out
    changed = _run(tmp_path / "changed" / "demo", 3.0, 2.6)
    assert compare_runs.main([str(before), str(changed)]) == 1
    assert "differs: mix/stats.json" in capsys.readouterr().out
    (changed / "mix" / "extra.json").write_text("{}")
    assert compare_runs.main([str(before), str(changed)]) == 1
    assert "only in" in capsys.readouterr().out
