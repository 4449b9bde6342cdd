"""Compare two run folders file by file: the same files, byte for byte.

    python scripts/compare_runs.py RUN_A RUN_B

Used to show that a change of code structure changed no output: run the same config, on the same
input paths, before and after the change into two folders of the same name (``before/demo`` and
``after/demo``: the report's title is the folder's name), then compare them. Text files (JSON,
TOML, HTML, Markdown) are compared with each run's own folder path replaced by ``<run>`` (stats
name their files by absolute path). Left out of the JSON compared: records of wall time, speed and
the moment a run started (``timing``, ``seconds``, ``*_s`` such as ``tokens_per_s``, ``started``,
``finished``, ``elapsed``, ``*_at``); left out whole: files that only describe one machine's run
(Prefect's database in ``.prefect/``, logs). Checkpoints and CSV logs are compared as bytes, so
their timing columns show as differences. Prints each differing file and exits with 1 if any
differ; prints how many files matched and exits with 0 otherwise.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

TEXT = {".json", ".toml", ".html", ".md", ".txt", ".csv"}
SKIP = {".log", ".db", ".sqlite", ".lock", ".pid"}
TIMING = re.compile(r"^timing$|(^|_)(seconds|started|finished|elapsed|wall|duration|time|timestamp)$|_at$|_s$")


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if not TIMING.search(str(k))}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def digest(path: Path, root: Path) -> str:
    data = path.read_bytes()
    if path.suffix in TEXT:
        text = data.decode("utf-8", errors="replace").replace(str(root.resolve()), "<run>").replace(str(root), "<run>")
        if path.suffix == ".json":
            try:
                text = json.dumps(_without_timing(json.loads(text)), sort_keys=True)
            except json.JSONDecodeError:
                pass
        data = text.encode()
    return hashlib.sha256(data).hexdigest()


def files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): digest(p, root)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix not in SKIP and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = (Path(x) for x in argv)
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
