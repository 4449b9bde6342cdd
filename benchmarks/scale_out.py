"""The curation run at growing corpus sizes, on a local process pool, a 2-worker Dask LocalCluster
and (asked for) local threads: what it costs per document as the corpus grows, how far the
1-billion-document plan from the whole flow is from the plan from the stages' own benchmarks, and
whether the runners write the same bytes (the figures behind docs/scale.md).

    python benchmarks/scale_out.py                      # 100,000 documents (a few minutes)
    python benchmarks/scale_out.py 100000 1000000
    python benchmarks/scale_out.py 100000 --runners local,processes,dask

Corpus: the demo corpus (``demo``) of each size, built once under ``.cache/`` (not timed).
At each size the demo config (``configs/demo.toml``'s) runs twice, each in a fresh process and
into a fresh run directory (after one untimed run at the smallest size, which fills numba's cache
of compiled loops, as any first run after installing does):

* processes: a local process pool of :data:`WORKERS` processes (``--runner processes``);
* dask: a ``LocalCluster`` of :data:`WORKERS` single-threaded worker processes (``--runner dask``);
* local (with ``--runners``): :data:`WORKERS` threads (``--runner local``, the default runner).

The first runner's outputs are compared with each other's.

Per run: wall seconds (cluster start included) and seconds per 1,000 documents; per stage its
wall seconds (from the stage's own flow run in the Prefect API), documents in, the bytes of its
input documents (each unit reads its shard once; dedup reads them twice), the bytes it wrote
(its documents, removed records and intermediate files) and, for dedup, the bytes each step read
as it measured them. Peak memory per process (VmHWM): the flow process (on local threads it holds
every task too) and each Dask worker; and per task function, on the Dask workers, the most a run
of it added to what its worker held when it started (:class:`TaskPeaks`).
The two runs' outputs are compared byte for byte (with the run directory's name made neutral).

The last line printed is one JSON object: per size the runs' figures, with
``wall_ratio_dask_vs_local`` (the whole run on Dask over local threads); and across sizes
``time_per_doc_ratio_largest_vs_smallest`` (local threads' seconds per document at the largest
size over the smallest: 1.0 is linear growth), ``worker_peak_ratio_largest_vs_smallest`` (the
Dask workers' peak RSS: 1.0 is flat memory per task) and ``task_growth_ratio_largest_vs_smallest``
(each task function's growth, where it is 1 MiB or more at the smallest size); and
``plan_1b_core_hours``, the 1-billion-document plan from the largest size's stage rates, all in
and marginal over the smallest size (:func:`billion_plan`; per stage in ``plan_1b``).

Core time per stage is taken two ways: its wall seconds times :data:`WORKERS` (an upper bound:
it counts idle cores and, on a shared machine, cores other programs took), and the CPU seconds
of every process of the run while the stage ran (the flow process, its pool or Dask workers and
Prefect's server: :func:`tree_cpu_s`). ``plan_vs_benchmarks`` sets each beside
:data:`BENCHMARK_PLAN`, the plan from the stages' own benchmarks (docs/scale.md, "Sizing a
1-billion-document run"), and ``plan_ratio_vs_benchmarks`` gives their ratios per runner.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from distributed.diagnostics.plugin import WorkerPlugin

ROOT = Path(__file__).resolve().parents[1]
SIZES = [100_000]
WORKERS = 2
WORK = ROOT / ".cache" / "bench-scale-out"
# The 1-billion-document plan (docs/scale.md, "The same plan from the whole flow"): the documents
# into each stage at 1B, in millions (the 20,000-document demo's keep rates: lang 90%, filter 74%,
# dedup 61%), and the mean extracted text of the Common Crawl sample tried (697 CC-MAIN-2019-30
# pages), by which a stage's rate on the demo's shorter texts is scaled.
PLAN_DOCS_M = {"source": 1000, "lang": 1000, "filter": 900, "dedup": 666, "lines": 408, "tokenize": 408, "mix": 408}
WEB_TEXT_BYTES = 4127
# The plan from the stages' benchmark rates (docs/scale.md, "Sizing a 1-billion-document run"),
# core-hours per stage: source is JSON lines 21 + WARC extraction 63; lang and filter are one line.
BENCHMARK_PLAN = {"source": 84, "lang+filter": 173, "dedup": 35, "lines": 54, "tokenize": 153, "mix": 84}
RUNNERS = ["processes", "dask"]
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def corpus_dir(docs: int) -> Path:
    return ROOT / ".cache" / ("demo-corpus" if docs == 20_000 else f"demo-corpus-{docs}-0")


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


# Task runs whose time a run pays whatever its size, by the stage they belong to: the tokenizer's
# training on its sample (``tokenize.sample_docs`` documents at 1M as at 1B).
FIXED_TASK_RUNS = {"train-tokenizer": "tokenize"}


def fixed_seconds(flow_run_id) -> dict[str, float]:
    """Wall seconds of the :data:`FIXED_TASK_RUNS` of the curate flow run, by stage."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
        TaskRunFilter,
        TaskRunFilterName,
    )

    with get_client(sync_client=True) as client:
        stages = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
        found = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[stage.id for stage in stages])),
            task_run_filter=TaskRunFilter(name=TaskRunFilterName(any_=list(FIXED_TASK_RUNS))),
        )
    fixed: dict[str, float] = {}
    for run in found:
        if run.start_time and run.end_time:
            stage = FIXED_TASK_RUNS[run.name]
            fixed[stage] = fixed.get(stage, 0.0) + (run.end_time - run.start_time).total_seconds()
    return fixed


def training_cpu_s(config) -> float:
    """CPU seconds of training the run's tokenizer on its sample, once more in this process after
    the run (the flow trains it as one task, whose wall time on a shared machine is not its CPU
    time); 0 where the config names a tokenizer."""
    import tempfile

    from pipeline.formats.documents import RunLayout
    from pipeline.formats.manifest import stage_outputs
    from pipeline.formats.stats import docs_handed_over
    from pipeline.stages.registry import input_stage
    from pipeline.stages.tokenize import draw_sample
    from pipeline.stages.units import in_process
    from pipeline.tokenizer import train_tokenizer

    settings = config.tokenize
    if settings.tokenizer is not None:
        return 0.0
    previous = input_stage("tokenize", config)
    total = docs_handed_over(RunLayout(config.run_dir).stage(previous).stats)
    sample = draw_sample(stage_outputs(config.run_dir, previous), settings.sample_docs, total, config.seed, in_process)
    with tempfile.TemporaryDirectory() as folder:
        start = time.process_time()  # every thread of this process: the trainer's too
        train_tokenizer(sample["text"], Path(folder) / "tokenizer.json", settings.kind, settings.vocab_size)
        return time.process_time() - start


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def text_bytes_per_doc(docs: Path) -> float:
    """The mean UTF-8 bytes of the ``text`` column over a stage's document shards."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    total = count = 0
    for path in sorted(docs.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(columns=["text"]):
            total += pc.sum(pc.binary_length(batch.column(0))).as_py() or 0
            count += batch.num_rows
    return total / count if count else 0.0


def billion_plan(run: dict, smaller: dict | None = None) -> dict[str, dict]:
    """Per stage of one run: its demo documents per core-second (the stage's wall seconds times the
    run's workers as its core time, an upper bound; ``cpu_``: the CPU seconds of the run's
    processes while the stage ran) and the core-hours of the stage at 1B documents, its documents
    scaled by :data:`WEB_TEXT_BYTES` over the mean text of the stage's input. Given a ``smaller``
    run of the same kind, also the marginal rate: the documents the larger run added over the
    seconds they added, which leaves out what a run pays whatever its size (training the tokenizer
    on its fixed sample, a round of tasks waiting for the one before)."""
    plan = {}
    for name, row in run["stages"].items():
        if name not in PLAN_DOCS_M or not row["docs_in"] or not row["seconds"] or not row.get("text_bytes_in"):
            continue
        scaled = PLAN_DOCS_M[name] * 1e6 * WEB_TEXT_BYTES / row["text_bytes_in"]
        fixed = {"": row.get("fixed_s", 0.0), "cpu_": row.get("fixed_cpu_s", 0.0)}  # counted once, below
        rates = {"": row["docs_in"] / (WORKERS * (row["seconds"] - fixed[""]))}
        if row.get("cpu_s"):
            rates["cpu_"] = row["docs_in"] / (row["cpu_s"] - fixed["cpu_"])
        before = (smaller or {}).get("stages", {}).get(name)
        if before and row["docs_in"] > before["docs_in"] and row["seconds"] > before["seconds"]:
            added = (row["docs_in"] - before["docs_in"]) / (WORKERS * (row["seconds"] - before["seconds"]))
            rates["marginal_"] = added
        plan[name] = {
            figure: round(value)
            for prefix, rate in rates.items()
            for figure, value in (
                (f"{prefix}docs_per_core_s", rate),
                (f"{prefix}core_hours", scaled / rate / 3600 + _fixed_core_s(prefix, fixed) / 3600),
            )
        }
    plan["all"] = {
        key: sum(stage[key] for stage in plan.values())
        for key in ("core_hours", "marginal_core_hours", "cpu_core_hours")
        if all(key in stage for stage in plan.values())
    }
    return plan


def _fixed_core_s(prefix: str, fixed: dict[str, float]) -> float:
    """The core-seconds of a stage's fixed task runs for the rate named by ``prefix``: their CPU
    time for ``cpu_``, else their wall time times the workers (as the stage's own)."""
    return fixed["cpu_"] if prefix == "cpu_" else WORKERS * fixed[""]


def against_benchmarks(plan: dict[str, dict]) -> dict[str, dict]:
    """A run's 1B plan (:func:`billion_plan`) in the rows of :data:`BENCHMARK_PLAN` (lang and filter
    as one), each row's core-hours from the wall time (``flow``) and from the CPU time
    (``flow_cpu``) beside the benchmarks' (``benchmarks``), and in ``all`` their ratios."""
    rows = {}
    for row, bench in BENCHMARK_PLAN.items():
        stages = [plan[name] for name in row.split("+") if name in plan]
        rows[row] = {
            "benchmarks": bench,
            "flow": sum(stage["core_hours"] for stage in stages),
            "flow_cpu": sum(stage.get("cpu_core_hours", 0) for stage in stages),
        }
    total = {key: sum(row[key] for row in rows.values()) for key in ("benchmarks", "flow", "flow_cpu")}
    total["ratio"] = round(total["flow"] / total["benchmarks"], 2)
    total["cpu_ratio"] = round(total["flow_cpu"] / total["benchmarks"], 2)
    return {**rows, "all": total}


def print_plan(plan: dict[str, dict], kinds: list[str]) -> None:
    """The 1B plan of a size's runs (:func:`billion_plan`) as a table: per runner the demo documents
    per core-second and the core-hours at 1B, all in and marginal where measured; then each
    runner's plan beside the benchmarks' (:func:`against_benchmarks`)."""
    runs = [plan[kind] for kind in kinds]
    keys = [key for key in ("", "marginal_") if all(f"{key}core_hours" in run["all"] for run in runs)]
    print(f"at 1B documents of {WEB_TEXT_BYTES:,} bytes of text, {', '.join(kinds)}: demo docs per core-s, "
          "core-hours" + (" (all in, then marginal)" if len(keys) > 1 else ""))  # fmt: skip
    for name in [name for name in runs[0] if name != "all"]:
        cells = [
            f"{run[name][f'{k}docs_per_core_s']:7,d} {run[name][f'{k}core_hours']:6,d}" for run in runs for k in keys
        ]
        print(f"  {name:10} " + "  ".join(cells))
    print(f"  {'all':10} " + "  ".join(f"{run['all'][f'{k}core_hours']:14,d}" for run in runs for k in keys))
    print("the 1B plan in core-hours: the benchmarks' rates, then per runner the whole flow's from wall time x "
          f"{WORKERS} and from CPU time")  # fmt: skip
    beside = {kind: against_benchmarks(plan[kind]) for kind in kinds}
    for row in [*BENCHMARK_PLAN, "all"]:
        cells = "  ".join(f"{beside[kind][row]['flow']:6,d} {beside[kind][row]['flow_cpu']:6,d}" for kind in kinds)
        print(f"  {row:12} {BENCHMARK_PLAN.get(row, sum(BENCHMARK_PLAN.values())):6,d}  {cells}")
    ratios = [f"{kind} {beside[kind]['all']['ratio']} / {beside[kind]['all']['cpu_ratio']}" for kind in kinds]
    print("  ratio to the benchmarks' plan, wall / CPU: " + ", ".join(ratios))


def _resident_mib(field: str = "VmRSS") -> float:
    """A memory figure of this process from Linux's /proc/self/status, in MiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:")) / 1024


def _peak_rss_mib() -> float:
    """This process's peak resident memory: Linux's VmHWM, which a new program starts afresh (the
    ``ru_maxrss`` of a process started from a big parent keeps the parent's peak), else ru_maxrss."""
    try:
        return _resident_mib("VmHWM")
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> float:
    """Start this process's peak (VmHWM) again from its present size, which it returns (Linux)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _resident_mib()


class TaskPeaks(WorkerPlugin):
    """A Dask worker plugin: per task function (by name), the largest peak resident memory of the
    worker while one ran, and the largest growth of a run over what the worker held when it started
    (the memory the task itself needed; what the worker holds is mostly what earlier tasks left in
    Python's allocator). A worker runs one task at a time here (one thread each), so the peak is
    started again when a task starts and read when it ends (Linux's clear_refs and VmHWM)."""

    name = "task-peaks"

    def setup(self, worker):
        self.worker = worker
        self.running: str | None = None
        self.peaks: dict[str, float] = {}
        self.growth: dict[str, float] = {}
        self.highest = _peak_rss_mib()
        self.started = 0.0

    def transition(self, key, start, finish, **kwargs):
        from dask.utils import key_split

        if finish == "executing":
            self.highest = max(self.highest, _peak_rss_mib())
            self.running = _task_name(self.worker, key, key_split(key))
            self.started = _reset_peak()
        elif start == "executing":
            name, peak = self.running or key_split(key), _peak_rss_mib()
            self.peaks[name] = max(self.peaks.get(name, 0.0), peak)
            self.growth[name] = max(self.growth.get(name, 0.0), peak - self.started)
            self.highest = max(self.highest, peak)


def _task_name(worker, key, name: str) -> str:
    """A task's function name; for a block of short units (pipeline.stages.units.run_block) the
    name of the function it runs, as ``run_block:<name>``."""
    if name != "run_block":
        return name
    try:
        return f"run_block:{worker.state.tasks[key].run_spec.kwargs['parameters']['block'].fn.__name__}"
    except (AttributeError, KeyError, TypeError):
        return name


def _task_peaks(dask_worker) -> dict:
    plugin = dask_worker.plugins[TaskPeaks.name]
    return {"peaks": plugin.peaks, "growth": plugin.growth, "highest": max(plugin.highest, _peak_rss_mib())}


def tree_cpu_s() -> tuple[float, float]:
    """CPU seconds (user and system) of this process, its descendants alive now (a Dask cluster's
    nannies and workers, a process pool, Prefect's server) and the children each has waited for
    (a process pool's workers once the pool has closed); and of those, Prefect's server's."""
    import psutil

    total = server = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
            serving = "uvicorn" in " ".join(process.cmdline())
        except psutil.Error:  # ended since it was listed
            continue
        spent = times.user + times.system + times.children_user + times.children_system
        total += spent
        server += spent if serving else 0.0
    return total, server


def timing_stages(cpu: dict[str, float], server: dict[str, float]):
    """Make ``flows.curate`` record in ``cpu`` the CPU seconds of the run's processes
    (:func:`tree_cpu_s`) while each stage's flow runs, and in ``server`` those of Prefect's server."""
    import flows.curate

    stage_flow = flows.curate.stage_flow

    def timed(stage, *args, **kwargs):
        before = tree_cpu_s()
        try:
            return stage_flow(stage, *args, **kwargs)
        finally:
            after = tree_cpu_s()
            cpu[stage], server[stage] = round(after[0] - before[0], 2), round(after[1] - before[1], 2)

    flows.curate.stage_flow = timed


def run_once(kind: str, docs: int) -> dict:
    """One curation run (in this process, which is fresh): its figures as a dict."""
    from flows.runtime import configure_prefect

    configure_prefect(WORK / f"prefect-{docs}-{kind}", quiet=True)  # before Prefect is imported
    from demo.config import demo_config
    from flows.curate import curate_flow
    from flows.runners import Runner, running_on, shared_api
    from pipeline.config import parse_config
    from pipeline.formats.stats import StageStats

    # Dask's worker processes import this project and this module from here, as this process does.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "benchmarks"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    run_dir = WORK / f"run-{docs}-{kind}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = parse_config(demo_config(corpus_dir(docs), run_dir))
    workers_peak: list[float] = []
    task_peaks: dict[str, float] = {}
    task_growth: dict[str, float] = {}
    cpu: dict[str, float] = {}
    server_cpu: dict[str, float] = {}
    timing_stages(cpu, server_cpu)
    with shared_api():  # started before the run is timed
        start = time.perf_counter()
        with running_on(Runner(kind, workers=WORKERS, gil_on_processes=True)) as ready:  # as `curate run`
            ready_s = time.perf_counter() - start
            if kind == "dask":
                from distributed import Client

                with Client(ready.address, set_as_default=False) as client:
                    client.register_plugin(TaskPeaks(), name=TaskPeaks.name)
            state = curate_flow(config, ready, return_state=True)
            if kind == "dask":
                with Client(ready.address, set_as_default=False) as client:
                    found = list(client.run(_task_peaks).values())
                workers_peak = sorted(worker["highest"] for worker in found)
                for worker in found:
                    for name, peak in worker["peaks"].items():
                        task_peaks[name] = round(max(task_peaks.get(name, 0.0), peak), 1)
                    for name, grown in worker["growth"].items():
                        task_growth[name] = round(max(task_growth.get(name, 0.0), grown), 1)
        wall = time.perf_counter() - start
        seconds = stage_seconds(state.state_details.flow_run_id)
        fixed = fixed_seconds(state.state_details.flow_run_id)
    stats = state.result()
    stages, previous = {}, None
    for name, counts in stats.items():
        folder = run_dir / name
        # source's own documents stand for its input: its input is raw files, HTML among them
        text_from = run_dir / (previous or name) / "docs"
        row = {
            "docs_in": StageStats.from_dict(counts).docs_in,
            "seconds": round(seconds[name], 2),
            "cpu_s": cpu.get(name),
            "server_cpu_s": server_cpu.get(name),
            "fixed_s": round(fixed.get(name, 0.0), 2),
            "fixed_cpu_s": round(training_cpu_s(config), 2) if name in fixed else 0.0,
            "input_bytes": folder_bytes(run_dir / previous / "docs") if previous else None,
            "bytes_written": folder_bytes(folder),
            "intermediate_bytes": folder_bytes(folder / "intermediate"),
            "text_bytes_in": round(text_bytes_per_doc(text_from), 1),
        }
        if name == "dedup":
            row["bytes_read_by_step"] = counts["dedup"]["bytes_read"]
            row["component_rounds"] = counts["dedup"]["component_rounds"]
        stages[name] = row
        # tokenize keeps an empty docs folder (it writes token shards): mix reads the documents before it
        previous = name if any((folder / "docs").glob("*.parquet")) else previous
    return {
        "kind": kind,
        "docs": docs,
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(cpu.values()), 2),
        "server_cpu_s": round(sum(server_cpu.values()), 2),
        "start_s": round(ready_s, 2),
        "s_per_1k_docs": round(1000 * wall / docs, 3),
        "flow_process_peak_rss_mib": round(_peak_rss_mib(), 1),
        "worker_peak_rss_mib": [round(w, 1) for w in workers_peak],
        "task_peak_rss_mib": dict(sorted(task_peaks.items(), key=lambda item: -item[1])),
        "task_growth_mib": dict(sorted(task_growth.items(), key=lambda item: -item[1])),
        "stages": stages,
    }


def same_outputs(a: Path, b: Path) -> tuple[int, list[str]]:
    """How many files the runs wrote, and which differ (Prefect's database and the run lock, which
    names its holder, aside)."""
    from pipeline.formats.manifest import LOCK_NAME

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes().replace(str(root).encode(), b"<run>")
            for p in sorted(root.rglob("*"))
            if p.is_file() and ".prefect" not in p.parts and p.name != LOCK_NAME
        }

    left, right = files(a), files(b)
    return len(left), sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))


def in_fresh_process(kind: str, docs: int) -> dict:
    """:func:`run_once` in a new Python process, so that its peak memory is its own."""
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
    code += f"import json, scale_out; print(json.dumps(scale_out.run_once({kind!r}, {docs})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} run of {docs} documents failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(sizes: list[int], kinds: list[str]) -> None:
    from demo.corpus import build_demo_corpus

    WORK.mkdir(parents=True, exist_ok=True)
    results = {}
    for docs in sizes:
        build_demo_corpus(corpus_dir(docs), docs=docs, seed=0)
    # Untimed: a first run compiles the MinHash and normalization loops into numba's cache beside
    # the code (a checkout's first run at 100k paid about 7 s of it in dedup and lines) and reads
    # the corpus into the page cache; the timed runs below find both warm.
    in_fresh_process(kinds[0], min(sizes))
    for docs in sizes:
        runs = {kind: in_fresh_process(kind, docs) for kind in kinds}
        compared = {
            kind: same_outputs(WORK / f"run-{docs}-{kinds[0]}", WORK / f"run-{docs}-{kind}") for kind in kinds[1:]
        }
        differ = sorted({name for _, names in compared.values() for name in names})
        files = max((count for count, _ in compared.values()), default=0)
        first, dask = runs[kinds[0]], runs.get("dask")
        results[docs] = {
            "input_bytes_per_doc": round(folder_bytes(corpus_dir(docs)) / docs, 1),
            **runs,
            **{
                f"wall_ratio_{kind}_vs_{kinds[0]}": round(run["wall_s"] / first["wall_s"], 3)
                for kind, run in runs.items()
                if kind != kinds[0]
            },
            "identical_files": files - len(differ),
            "differing_files": differ[:10],
            "plan_1b": {
                kind: billion_plan(run, results[sizes[0]][kind] if results else None) for kind, run in runs.items()
            },
        }
        results[docs]["plan_vs_benchmarks"] = {
            kind: against_benchmarks(plan) for kind, plan in results[docs]["plan_1b"].items()
        }
        print(f"\n{docs:,} demo documents, {WORKERS} workers each way")
        print(f"{'stage':10} {'docs in':>9} " + " ".join(f"{kind[:9] + ' s':>11} {'CPU s':>7}" for kind in kinds)
              + f" {'in B/doc':>9} {'out B/doc':>10}")  # fmt: skip
        for name, row in first["stages"].items():
            in_bytes = row["input_bytes"] / row["docs_in"] if row["input_bytes"] and row["docs_in"] else 0
            times = " ".join(
                f"{run['stages'][name]['seconds']:11.1f} {run['stages'][name]['cpu_s'] or 0:7.1f}"
                for run in runs.values()
            )
            out_bytes = row["bytes_written"] / max(row["docs_in"], 1)
            print(f"{name:10} {row['docs_in']:9d} {times} {in_bytes:9.0f} {out_bytes:10.0f}")
        dedup = first["stages"].get("dedup", {})
        if dedup:
            per_doc = {k: round(v / dedup["docs_in"], 1) for k, v in dedup["bytes_read_by_step"].items()}
            print(f"dedup bytes read per document in, by step: {per_doc} ({dedup['component_rounds']} rounds)")
        whole = [
            f"{kind} {run['wall_s']} s, {run['cpu_s']} CPU s ({run['server_cpu_s']} of them Prefect's server; "
            f"{run['s_per_1k_docs']} s per 1k docs, "
            f"flow process peak {run['flow_process_peak_rss_mib']} MiB"
            + (f", workers' peaks {run['worker_peak_rss_mib']} MiB" if run["worker_peak_rss_mib"] else "")
            + ")"
            for kind, run in runs.items()
        ]
        print("whole run: " + "; ".join(whole) + f"; {files} files, {len(differ)} differ")
        print_plan(results[docs]["plan_1b"], kinds)
        if dask:
            top = list(dask["task_growth_mib"].items())[:8]
            print("largest growth of a task over its worker's memory at its start, on Dask (MiB): "
                  + ", ".join(f"{name} {grown:.0f}" for name, grown in top))  # fmt: skip
    smallest, largest = results[min(sizes)], results[max(sizes)]
    summary = {
        "sizes": sizes,
        "workers": WORKERS,
        "runners": kinds,
        **{key: value for key, value in largest.items() if key.startswith("wall_ratio_")},
        **{
            f"{kind}_time_per_doc_ratio_largest_vs_smallest": round(
                largest[kind]["s_per_1k_docs"] / smallest[kind]["s_per_1k_docs"], 3
            )
            for kind in kinds
        },
        "plan_1b_core_hours": {kind: largest["plan_1b"][kind]["all"] for kind in kinds},
        "benchmark_plan_core_hours": sum(BENCHMARK_PLAN.values()),
        "plan_ratio_vs_benchmarks": {kind: largest["plan_vs_benchmarks"][kind]["all"]["ratio"] for kind in kinds},
        "plan_cpu_ratio_vs_benchmarks": {
            kind: largest["plan_vs_benchmarks"][kind]["all"]["cpu_ratio"] for kind in kinds
        },
        "differing_files": sum(len(r["differing_files"]) for r in results.values()),
    }
    if "dask" in kinds:
        summary["worker_peak_ratio_largest_vs_smallest"] = round(
            max(largest["dask"]["worker_peak_rss_mib"]) / max(smallest["dask"]["worker_peak_rss_mib"]), 3
        )
        summary["task_growth_ratio_largest_vs_smallest"] = {
            name: round(grown / smallest["dask"]["task_growth_mib"][name], 3)
            for name, grown in largest["dask"]["task_growth_mib"].items()
            if smallest["dask"]["task_growth_mib"].get(name, 0) >= 1.0
        }
    summary["flow_peak_ratio_largest_vs_smallest"] = {
        kind: round(largest[kind]["flow_process_peak_rss_mib"] / smallest[kind]["flow_process_peak_rss_mib"], 3)
        for kind in kinds
    }
    summary["by_size"] = results
    print(json.dumps(summary))


def parse_args(argv: list[str]) -> tuple[list[int], list[str]]:
    """Sizes (default :data:`SIZES`) and ``--runners a,b`` (default :data:`RUNNERS`)."""
    kinds, sizes = list(RUNNERS), []
    for arg in argv:
        if arg.startswith("--runners="):
            kinds = arg.split("=", 1)[1].split(",")
        else:
            sizes.append(int(arg))
    unknown = [kind for kind in kinds if kind not in ("local", "processes", "dask")]
    if unknown or not kinds:
        sys.exit(f"--runners={','.join(kinds)}: choose from local, processes, dask")
    return sizes or SIZES, kinds


if __name__ == "__main__":
    main(*parse_args(sys.argv[1:]))
