"""The curation run on a 2-worker Dask LocalCluster against local threads, stage by stage, and
what each stage costs per document (the figures behind the README's "Running at scale").

Corpus: the demo corpus (``pipeline.demo``) of :data:`DOCS` documents, built once under
``.cache/``. The same config (``configs/demo.toml``'s) runs twice, each into a fresh run directory:

* local: Prefect's thread pool, :data:`WORKERS` threads (the default runner);
* dask: a ``LocalCluster`` of :data:`WORKERS` single-threaded worker processes (``--runner dask``).

Per stage: wall seconds (from the stage's own flow run in the Prefect API), documents in, and bytes
per input document written by the stage (its documents, removed records, intermediate files). The
two runs' outputs are compared byte for byte (with the run directory's name made neutral). Core
seconds are wall seconds times workers, an upper bound (serial parts leave cores idle).

The last line printed is one JSON object; the headline is ``wall_ratio_dask_vs_local`` (the whole
run on Dask over local threads, cluster start included; LocalCluster startup is also given alone),
with ``stage_ratio_dask_vs_local`` (the stages' seconds summed) beside it. Both runs report to one
Prefect server started before either is timed.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = 20_000
WORKERS = 2
WORK = ROOT / ".cache" / "bench-scale-out"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def stage_seconds(flow_run_id) -> dict[str, float]:
    """Wall seconds of each stage: the subflow runs of the curate flow run, by the stage's flow name
    (shard stages share one flow, and their runs are named after the stage)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
        flows = {run.flow_id: client.read_flow(run.flow_id).name for run in runs}
    return {
        (run.name if flows[run.flow_id] == "shard-stage" else flows[run.flow_id]): (
            run.end_time - run.start_time
        ).total_seconds()
        for run in runs
    }


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def run_once(kind: str, corpus: Path) -> dict:
    from flows.curate import curate_flow
    from flows.demo import demo_config
    from flows.runners import Runner, running_on
    from pipeline.core.config import parse_config

    run_dir = WORK / f"run-{kind}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = parse_config(demo_config(corpus, run_dir))
    start = time.perf_counter()
    with running_on(Runner(kind, workers=WORKERS)) as ready:
        ready_s = time.perf_counter() - start
        state = curate_flow(config, ready, return_state=True)
        seconds = stage_seconds(state.state_details.flow_run_id)
    wall = time.perf_counter() - start
    stats = state.result()
    stages = {}
    for name, counts in stats.items():
        folder = run_dir / name
        stages[name] = {
            "docs_in": counts["docs_in"],
            "docs_out": counts["docs_out"],
            "seconds": round(seconds[name], 2),
            "bytes_out_per_doc_in": round(folder_bytes(folder) / max(counts["docs_in"], 1), 1),
            "intermediate_bytes_per_doc_in": round(
                folder_bytes(folder / "intermediate") / max(counts["docs_in"], 1), 1
            ),
        }
    return {"run_dir": run_dir, "wall_s": round(wall, 2), "start_s": round(ready_s, 2), "stages": stages}


def same_outputs(a: Path, b: Path) -> tuple[int, list[str]]:
    """How many files the runs wrote, and which differ (Prefect's database aside)."""

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes().replace(str(root).encode(), b"<run>")
            for p in sorted(root.rglob("*"))
            if p.is_file() and ".prefect" not in p.parts
        }

    left, right = files(a), files(b)
    return len(left), sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))


def main() -> None:
    from flows.runtime import configure_prefect
    from pipeline.demo.corpus import build_demo_corpus

    corpus = ROOT / ".cache" / ("demo-corpus" if DOCS == 20_000 else f"demo-corpus-{DOCS}-0")
    build_demo_corpus(corpus, docs=DOCS, seed=0)
    WORK.mkdir(parents=True, exist_ok=True)
    configure_prefect(WORK, quiet=True)
    source_bytes = folder_bytes(corpus)

    from flows.runners import shared_api

    with shared_api():  # one Prefect server, started before either run is timed
        local = run_once("local", corpus)
        dask = run_once("dask", corpus)
    files, differ = same_outputs(local["run_dir"], dask["run_dir"])

    print(f"{DOCS} demo documents ({source_bytes / DOCS:.0f} input bytes each), {WORKERS} workers")
    print(
        f"{'stage':10} {'docs in':>8} {'local s':>8} {'dask s':>8} {'docs/core-s':>12} {'bytes/doc':>10} {'interm.':>8}"
    )
    for name, row in local["stages"].items():
        per_core_s = row["docs_in"] / max(row["seconds"] * WORKERS, 1e-9)
        print(
            f"{name:10} {row['docs_in']:8d} {row['seconds']:8.1f} {dask['stages'][name]['seconds']:8.1f} "
            f"{per_core_s:12.0f} {row['bytes_out_per_doc_in']:10.0f} {row['intermediate_bytes_per_doc_in']:8.0f}"
        )
    print(
        f"whole run: local {local['wall_s']} s, dask {dask['wall_s']} s (LocalCluster start {dask['start_s']} s); "
        f"{files} files, {len(differ)} differ"
    )
    print(
        json.dumps(
            {
                "docs": DOCS,
                "workers": WORKERS,
                "input_bytes_per_doc": round(source_bytes / DOCS, 1),
                "wall_ratio_dask_vs_local": round(dask["wall_s"] / local["wall_s"], 3),
                "stage_ratio_dask_vs_local": round(
                    sum(r["seconds"] for r in dask["stages"].values())
                    / sum(r["seconds"] for r in local["stages"].values()),
                    3,
                ),
                "local_wall_s": local["wall_s"],
                "dask_wall_s": dask["wall_s"],
                "dask_start_s": dask["start_s"],
                "identical_files": files - len(differ),
                "differing_files": differ[:10],
                "peak_rss_mib_flow_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "local_stages": local["stages"],
                "dask_stages": {k: v["seconds"] for k, v in dask["stages"].items()},
            }
        )
    )


if __name__ == "__main__":
    main()
