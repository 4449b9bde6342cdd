"""Compare two run folders file by file: the same files, byte for byte.

    python scripts/compare_runs.py RUN_A RUN_B

Used to show that a change of code structure changed no output: run the same config, on the same
input paths, before and after the change into two folders of the same name (``before/demo`` and
``after/demo``: the report's title is the folder's name), then compare them. Text files (JSON,
TOML, HTML, Markdown) are compared with each run's own folder path replaced by ``<run>`` (stats
name their files by absolute path). Left out of the JSON compared: records of wall time, speed and
the moment a run started (``timing``, ``seconds``, ``*_s`` such as ``tokens_per_s``, ``started``,
``finished``, ``elapsed``, ``*_at``); left out whole: files that only describe one machine's run
(Prefect's database in ``.prefect/``, logs, TensorBoard event files, whose names hold the moment
and the host). CSV files are compared without their timing columns (``tokens_per_s``); an HTML
report without its wall-time sentences (``Wall time ...``). Checkpoints (``.pt``) are compared by
what they hold, when torch is installed: every tensor's dtype, shape and bytes, every other value,
timings left out and folder paths replaced as in text; their ``.pt.sha256`` files, digests of the
bytes with the timings in them, are then left out. Prints each differing file and exits with 1 if
any differ; prints how many files matched and exits with 0 otherwise.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import re
import sys
from pathlib import Path

TEXT = {".json", ".toml", ".html", ".md", ".txt", ".csv"}
SKIP = {".log", ".db", ".sqlite", ".lock", ".pid"}
SKIP_NAMES = re.compile(r"^events\.out\.tfevents\.")
WALL_TIME = re.compile(r"Wall time[^<]*")
# Checkpoints are compared by what they hold when torch can open them, else as bytes.
HAS_TORCH = importlib.util.find_spec("torch") is not None
TIMING = re.compile(r"^timing$|(^|_)(seconds|started|finished|elapsed|wall|duration|time|timestamp)$|_at$|_s$")


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if not TIMING.search(str(k))}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def _without_timing_columns(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return text
    keep = [i for i, name in enumerate(rows[0]) if not TIMING.search(name)]
    return "\n".join(",".join(row[i] for i in keep if i < len(row)) for row in rows)


def _local_text(text: str, root: Path) -> str:
    return text.replace(str(root.resolve()), "<run>").replace(str(root), "<run>")


def _checkpoint_digest(path: Path, root: Path) -> str:
    """A digest of what a checkpoint holds, timings left out (torch is installed)."""
    import torch

    parts: list[bytes] = []

    def walk(value, key: str) -> None:
        if TIMING.search(key.rsplit(".", 1)[-1]):
            return
        if isinstance(value, dict):
            for name in sorted(value, key=str):
                walk(value[name], f"{key}.{name}")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, f"{key}[{i}]")
        elif isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous()
            parts.append(f"{key} {tensor.dtype} {tuple(tensor.shape)}".encode())
            parts.append(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
        else:
            parts.append(f"{key} {_local_text(repr(value), root)}".encode())

    walk(torch.load(path, map_location="cpu", weights_only=False), "")
    return hashlib.sha256(b"\n".join(parts)).hexdigest()


def digest(path: Path, root: Path) -> str:
    if path.suffix == ".pt" and HAS_TORCH:
        return _checkpoint_digest(path, root)
    data = path.read_bytes()
    if path.suffix in TEXT:
        text = _local_text(data.decode("utf-8", errors="replace"), root)
        if path.suffix == ".json":
            try:
                text = json.dumps(_without_timing(json.loads(text)), sort_keys=True)
            except json.JSONDecodeError:
                pass
        elif path.suffix == ".csv":
            text = _without_timing_columns(text)
        elif path.suffix == ".html":
            text = WALL_TIME.sub("Wall time", text)
        data = text.encode()
    return hashlib.sha256(data).hexdigest()


def _compared(path: Path, root: Path) -> bool:
    relative = path.relative_to(root)
    if not path.is_file() or path.suffix in SKIP or SKIP_NAMES.match(path.name):
        return False
    if any(part.startswith(".") for part in relative.parts):
        return False
    # A checkpoint's digest file holds the sha256 of bytes that include its timings.
    return not (HAS_TORCH and path.name.endswith(".pt.sha256") and path.with_suffix("").is_file())


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): digest(p, root) for p in sorted(root.rglob("*")) if _compared(p, root)}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = (Path(x) for x in argv)
    missing = [str(p) for p in (a, b) if not p.is_dir()]
    if missing:
        print(f"error: not a run folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    left, right = files(a), files(b)
    differ = sorted(k for k in left.keys() & right.keys() if left[k] != right[k])
    for name in sorted(left.keys() - right.keys()):
        print(f"only in {a}: {name}")
    for name in sorted(right.keys() - left.keys()):
        print(f"only in {b}: {name}")
    for name in differ:
        print(f"differs: {name}")
    if differ or left.keys() != right.keys():
        return 1
    print(f"{len(left)} files identical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
