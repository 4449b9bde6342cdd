"""What a ``curate run`` costs beyond its stages' own work: the fixed cost a user meets on every
command (starting Prefect's temporary server, the flow and task runs, the report).

    python benchmarks/overhead.py              # this checkout, and the one at BEFORE beside it
    python benchmarks/overhead.py --against -  # this checkout only
    python benchmarks/overhead.py --against REV

On the demo config (``configs/demo.toml``) over a 1,000-document demo corpus (built once under
``.cache/``, not timed), each run a fresh process into a fresh run directory, alternating
:data:`REPEATS` times, the best of each counting:

* plain: the same stages as plain functions, in one process, without Prefect: the flows' own
  functions with Prefect's ``flow`` and ``task`` replaced by plain calls and a thread pool of as
  many threads as the default runner (:data:`PLAIN`); Prefect is not imported;
* run: ``curate run CONFIG`` as a user types it (no ``PREFECT_API_URL``: Prefect's temporary
  server), from process start to exit, the report included;
* noop: the same command again on that finished run directory;
* served: ``curate run CONFIG`` with ``PREFECT_API_URL`` set to a Prefect server that is already
  up (``prefect server start``, started once before the rounds, as a user who keeps one does);
* first: one ``curate run`` with an empty cache (``XDG_CACHE_HOME``), as the first run after
  installing: its temporary server migrates a new database.

``fixed_cost_s`` is run minus plain; ``served_fixed_cost_s`` served minus plain; ``noop_rerun_s``
is noop. The checkout at ``--against``
(default :data:`BEFORE`, the code before the fixed cost was worked on; ``-`` for none) runs beside
this one in the same alternation, from a git worktree under ``.cache/``, on the same corpus.

The last line printed is one JSON object: per checkout its seconds, and
``fixed_cost_ratio_before_vs_now`` (the earlier checkout's fixed cost over this one's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "bench-overhead"
DOCS = 1000
REPEATS = 3
BEFORE = "7c7756e"  # main before the fixed cost was worked on (issue #57)

# The plain side: Prefect's decorators as plain calls, tasks on a thread pool of os.cpu_count()
# threads (the default runner's), artifacts not published; `prefect` itself never imported.
PLAIN = """
import concurrent.futures as cf, os, sys, types
pool = cf.ThreadPoolExecutor(os.cpu_count())

class Plain:
    def __init__(self, fn):
        self.fn = fn
    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)
    def with_options(self, **options):
        return self
    def submit(self, *args, **kwargs):
        return pool.submit(self.fn, *args, **kwargs)

def decorator(fn=None, **options):
    return Plain(fn) if fn is not None else Plain

def module(name, **names):
    made = types.ModuleType(name)
    made.__dict__.update(names)
    sys.modules[name] = made

module("prefect", flow=decorator, task=decorator, get_run_logger=None)
module("prefect.cache_policies", NO_CACHE=None)
module("prefect.task_runners", ThreadPoolTaskRunner=lambda **options: None)
module("prefect.futures", PrefectFuture=cf.Future, as_completed=cf.as_completed)
module("prefect.artifacts", create_markdown_artifact=lambda **kw: None, create_table_artifact=lambda **kw: None)

from flows.curate import curate_flow
from pipeline.config import load_config
from pipeline.stages.rerun import open_run
from pipeline.stages.source import check_readers

config = load_config(sys.argv[1])
check_readers(config.sources)
open_run(config)
curate_flow(config)
assert "prefect.flows" not in sys.modules
"""


def corpus() -> Path:
    """The 1,000-document demo corpus (made once)."""
    folder = ROOT / ".cache" / f"demo-corpus-{DOCS}-0"
    if not (folder / "corpus.json").is_file():
        subprocess.run(
            [sys.executable, "-c", "from flows.cli import app; app()", "demo-corpus", str(folder), "--docs", str(DOCS)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=True,
            capture_output=True,
        )
    return folder


def write_config(run_dir: Path, name: str) -> Path:
    """The demo config over the 1,000-document corpus, into ``run_dir``."""
    text = (ROOT / "configs" / "demo.toml").read_text()
    text = text.replace(".cache/demo-corpus/", f"{corpus()}/").replace(
        'run_dir = "runs/demo"', f'run_dir = "{run_dir}"'
    )
    path = WORK / f"{name}.toml"
    path.write_text(text)
    return path


def checkout(rev: str) -> Path:
    """A git worktree of ``rev`` under .cache (made once), with this checkout's .cache beside it."""
    tree = WORK / f"tree-{rev}"
    if not tree.is_dir():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True, capture_output=True
        )
    if not (tree / ".cache").exists():  # the language-ID model where that checkout looks for it
        (tree / ".cache").symlink_to(ROOT / ".cache")
    return tree


def timed(command: list[str], code: Path, env: dict | None = None) -> float:
    """Wall seconds of ``command`` run from the repository root with ``code`` on the path (and
    ``python -P``: not the folder it runs in, which holds this checkout)."""
    environment = {**os.environ, "PYTHONPATH": str(code)}
    for name in ("PREFECT_API_URL", "PREFECT_HOME"):  # as a user's shell has them: unset
        environment.pop(name, None)
    environment.update(env or {})
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


# The `curate` program as its console script runs it (flows.cli.main; the app alone in a checkout
# that has no main).
PROGRAM = "import flows.cli as cli; getattr(cli, 'main', None) and cli.main() or cli.app(prog_name='curate')"


def curate(*args: str) -> list[str]:
    return [sys.executable, "-P", "-c", PROGRAM, *args]


def prefect_server() -> tuple[subprocess.Popen, str]:
    """``prefect server start`` on a free port, its home under WORK; (process, API URL) once it answers."""
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(WORK / "served-home"), "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    command = [str(Path(sys.executable).with_name("prefect")), "server", "start", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(1200):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return process, url
        except OSError:
            time.sleep(0.25)
    process.kill()
    raise SystemExit("prefect server start did not answer in 5 minutes")


def one_round(name: str, code: Path, first: bool, served: str) -> dict[str, float]:
    """One plain run, one ``curate run`` and its no-op rerun, one ``curate run`` reporting to the
    server up at ``served`` (and, when ``first``, a run with an empty cache), each into a fresh run
    directory."""
    seconds = {}
    for side in ("plain", "run", "served", *(["first"] if first else [])):
        run_dir = WORK / f"run-{name}-{side}"
        shutil.rmtree(run_dir, ignore_errors=True)
        config = write_config(run_dir, f"{name}-{side}")
        if side == "plain":
            seconds["plain"] = timed([sys.executable, "-P", "-c", PLAIN, str(config)], code)
        elif side == "run":
            seconds["run"] = timed(curate("run", str(config), "--quiet"), code)
            seconds["noop"] = timed(curate("run", str(config), "--quiet"), code)
        elif side == "served":
            seconds["served"] = timed(curate("run", str(config), "--quiet"), code, {"PREFECT_API_URL": served})
        else:
            with tempfile.TemporaryDirectory(dir=WORK) as empty:
                seconds["first"] = timed(curate("run", str(config), "--quiet"), code, {"XDG_CACHE_HOME": empty})
    return seconds


def main(against: str | None) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    corpus()
    codes = {"now": ROOT, **({"before": checkout(against)} if against else {})}
    for name, code in codes.items():  # untimed: numba's cache and the database template filled
        timed(curate("run", str(write_config(WORK / f"run-{name}-warm", f"{name}-warm")), "--quiet"), code)
    rounds: dict[str, list[dict]] = {name: [] for name in codes}
    server, served = prefect_server()
    try:
        for repeat in range(REPEATS):
            for name, code in codes.items():
                rounds[name].append(one_round(name, code, repeat == 0, served))
                print(name, {k: round(v, 2) for k, v in rounds[name][-1].items()}, flush=True)
    finally:
        server.terminate()
        server.wait()
    results = {}
    for name, runs in rounds.items():
        best = {key: min(r[key] for r in runs if key in r) for key in runs[0]}
        results[name] = {
            **{f"{key}_s": round(value, 2) for key, value in best.items()},
            "fixed_cost_s": round(best["run"] - best["plain"], 2),
            "first_fixed_cost_s": round(best["first"] - best["plain"], 2),
            "served_fixed_cost_s": round(best["served"] - best["plain"], 2),
            "noop_rerun_s": round(best["noop"], 2),
        }
    print(f"\n{'':8} {'plain':>7} {'run':>7} {'fixed':>7} {'no-op':>7} {'first run':>10} {'served':>7} {'fixed':>7}")
    for name, r in results.items():
        print(
            f"{name:8} {r['plain_s']:7.2f} {r['run_s']:7.2f} {r['fixed_cost_s']:7.2f} {r['noop_rerun_s']:7.2f} "
            f"{r['first_s']:10.2f} {r['served_s']:7.2f} {r['served_fixed_cost_s']:7.2f}"
        )
    line = {"docs": DOCS, "repeats": REPEATS, **results["now"], "against": against, "by_checkout": results}
    if "before" in results:
        line["fixed_cost_ratio_before_vs_now"] = round(
            results["before"]["fixed_cost_s"] / results["now"]["fixed_cost_s"], 2
        )
        line["noop_ratio_before_vs_now"] = round(results["before"]["noop_rerun_s"] / results["now"]["noop_rerun_s"], 2)
    print(json.dumps(line))


if __name__ == "__main__":
    args = sys.argv[1:]
    rev = args[args.index("--against") + 1] if "--against" in args else BEFORE
    main(None if rev == "-" else rev)
