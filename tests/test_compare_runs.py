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


def _training(root: Path, seconds: float, weight: float) -> Path:
    import torch

    (root / "tb").mkdir(parents=True)
    (root / "tb" / f"events.out.tfevents.{int(seconds)}.host").write_bytes(str(seconds).encode())
    (root / "metrics.csv").write_text(f"step,loss,tokens_per_s\n10,2.5,{1000 / seconds}\n")
    checkpoint = {"model": {"w": torch.full((2, 2), weight), "step": torch.tensor(3)}, "wall_time_s": seconds}
    checkpoint["config"] = {"out_dir": str(root), "lr": 1e-3}
    torch.save(checkpoint, root / "step-000010.pt")
    (root / "step-000010.pt.sha256").write_text(str(seconds))
    (root / "report.html").write_text(f"<p>Wall time of the last invocation: {seconds} min.</p><p>loss 2.5</p>")
    return root


def test_checkpoints_csv_logs_and_reports_are_compared_without_their_timings(tmp_path, capsys):
    before = _training(tmp_path / "before" / "train", 3.0, 0.5)
    after = _training(tmp_path / "after" / "train", 7.0, 0.5)
    assert compare_runs.main([str(before), str(after)]) == 0
    assert "3 files identical" in capsys.readouterr().out  # metrics.csv, the checkpoint, the report
    changed = _training(tmp_path / "changed" / "train", 3.0, 0.25)
    assert compare_runs.main([str(before), str(changed)]) == 1
    assert "differs: step-000010.pt" in capsys.readouterr().out
    (changed / "metrics.csv").write_text("step,loss,tokens_per_s\n10,2.6,1000\n")
    assert compare_runs.main([str(before), str(changed)]) == 1
    assert "differs: metrics.csv" in capsys.readouterr().out


def test_a_folder_that_is_not_there_is_an_error_not_a_match(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert compare_runs.main([str(tmp_path / "run"), str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err
    assert "not a run folder" in err and "typo" in err
