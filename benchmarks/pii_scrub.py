"""PII scrubbing: precision and recall per kind on a labelled set, and throughput.

* **Accuracy.** The labelled set of ``tests/pii_cases.py`` (a few dozen PII strings per kind in
  context, and as many look-alikes: versions, dates, card numbers, retina image names, private
  addresses, ...): precision and recall of :func:`pipeline.filters.pii.scrub` per kind.
* **Throughput, one core.** :class:`pipeline.filters.pii.PIIScrubber` (a polars pre-check per
  kind, then Python's ``re`` on the documents that may hold PII) against a plain Python loop
  that runs :func:`~pipeline.filters.pii.scrub` on every document (``speed_ratio_vs_python_loop``).
  The texts are the package descriptions, licences and READMEs shipped with the installed Python
  packages (real prose with emails, URLs and version numbers), or the ``text`` field of the JSONL
  files given as arguments. Best of :data:`REPEATS` runs, ``POLARS_MAX_THREADS=1``.

The last line printed is one JSON object with the figures.

Usage::

    python benchmarks/pii_scrub.py [FILE.jsonl[.gz] ...]
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402

import polars as pl  # noqa: E402
from peers import rounded  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.filters.pii import PLACEHOLDERS, PIIScrubber, scrub  # noqa: E402
from tests.pii_cases import score  # noqa: E402

REPEATS = 3
MAX_DOCS = 20_000


def package_texts() -> list[str]:
    """Package descriptions and licence/README files of the installed distributions."""
    texts = []
    for dist in metadata.distributions():
        description = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
        if description.strip():
            texts.append(description)
        for file in dist.files or []:
            name = file.name.upper()
            prose = name.startswith(("LICENSE", "LICENCE", "README", "AUTHORS", "NOTICE"))
            if prose and file.suffix in ("", ".txt", ".md", ".rst"):
                try:
                    texts.append(file.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    pass
    return [t for t in texts if t.strip()][:MAX_DOCS]


def jsonl_texts(paths: list[str]) -> list[str]:
    texts = []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            texts.extend(json.loads(line)["text"] for line in f if line.strip())
    return texts[:MAX_DOCS]


def best_seconds(fn) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    accuracy = score(scrub, PLACEHOLDERS)
    print(f"{'kind':<14}{'precision':>10}{'recall':>8}{'pos':>5}{'neg':>5}")
    for kind, m in accuracy.items():
        print(f"{kind:<14}{m['precision']:>10.3f}{m['recall']:>8.3f}{m['positives']:>5}{m['negatives']:>5}")

    texts = jsonl_texts(sys.argv[1:]) if len(sys.argv) > 1 else package_texts()
    docs = pl.DataFrame({"id": [str(i) for i in range(len(texts))], "text": texts})
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    scrubber = PIIScrubber()
    ours = best_seconds(lambda: scrubber.apply(docs))
    loop = best_seconds(lambda: [scrub(t) for t in texts])
    replaced = scrubber.apply(docs).counts
    found = {kind.removeprefix("pii."): int(values.sum()) for kind, values in replaced.items()}
    print(
        f"\n{len(texts)} documents, {megabytes:.1f} MB: PIIScrubber {len(texts) / ours:,.0f} docs/s "
        f"({megabytes / ours:.1f} MB/s), Python loop {len(texts) / loop:,.0f} docs/s; replaced {found}"
    )
    result = {
        "docs": len(texts),
        "megabytes": megabytes,
        "docs_per_s": len(texts) / ours,
        "mb_per_s": megabytes / ours,
        "python_loop_docs_per_s": len(texts) / loop,
        "speed_ratio_vs_python_loop": loop / ours,
        "replaced": found,
        **{f"{kind}_precision": m["precision"] for kind, m in accuracy.items()},
        **{f"{kind}_recall": m["recall"] for kind, m in accuracy.items()},
    }
    print(json.dumps(rounded(result)))


if __name__ == "__main__":
    main()
