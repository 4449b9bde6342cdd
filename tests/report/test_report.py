"""The run report: every number in the page equals the run's stats.json files, document text is
escaped, the page loads nothing from the network and renders in headless Chromium without errors;
it is rebuilt by `curate report`, built by `curate run`, and copes with stages turned off and an
empty pool. Also the stages' Prefect artifacts."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.artifacts import artifact_key, publish_stage, stage_markdown, stage_rule_rows
from flows.cli import app
from flows.curate import curate_flow
from pipeline.formats.stats import StageStats
from report.build import build_report
from report.html import esc, word_diff
from tests.helpers import source_config, write_jsonl

pytestmark = pytest.mark.usefixtures("prefect_server")

NOUNS = (
    "council school market hospital library museum station bridge harbour garden factory team club court "
    "river village budget report plan road farm shop office church theatre airport college park street "
    "company union police doctor teacher driver farmer student family festival election weather price "
    "engine railway tunnel ferry island forest valley castle prison stadium mayor minister judge nurse"
).split()
VERBS = (
    "opened closed approved rejected repaired announced delayed reviewed expanded funded visited praised "
    "criticised moved sold bought built painted found lost won joined left changed tested watched"
).split()
ADJECTIVES = (
    "local national small large new old public private northern southern early late quiet busy famous "
    "modern ancient popular expensive cheap narrow wide green empty crowded careful angry happy"
).split()
PREPOSITIONS = "in near behind beside across under over after before during".split()
DETERMINERS = "the a this that every their our".split()
PLACES = "Leeds Bristol Glasgow Cardiff York Bath Oxford Derby Exeter Chester Dundee Norwich".split()
NEWSLETTER = "Sign up to our weekly newsletter for the latest local stories and offers."
HOSTILE = "<script>alert('x')</script> <b>Buy now</b> & save"


def _sentence(rng: random.Random) -> str:
    c = rng.choice
    words = [
        c(DETERMINERS).capitalize(),
        c(ADJECTIVES),
        c(NOUNS),
        c(VERBS),
        c(DETERMINERS),
        c(NOUNS),
        c(PREPOSITIONS),
        c(PLACES),
        "and",
        c(VERBS),
        c(DETERMINERS),
        c(ADJECTIVES),
        c(NOUNS),
        "with",
        "the",
        c(NOUNS),
    ]
    return " ".join(words) + "."


def _article(rng: random.Random) -> str:
    """Three paragraphs of English-like sentences: clean enough for every filter."""
    return "\n\n".join(" ".join(_sentence(rng) for _ in range(3)) for _ in range(3))


def write_corpus(folder: Path) -> None:
    """'news' (own ids): 50 articles, 4 exact and 3 near copies, a newsletter line in 12 of them,
    junk that the lang or filter stage removes, and 2 malformed lines; 'web' (ids from file and
    line): 15 articles and 2 copies of a news article."""
    rng = random.Random(11)
    news = {f"n{i}": _article(rng) for i in range(50)}
    for i in range(10, 22):
        news[f"n{i}"] += "\n\n" + NEWSLETTER
    for k in range(1, 5):
        news[f"n0-copy{k}"] = news["n0"]
    for k in range(1, 4):
        words = news["n1"].split(" ")
        words[10 + 20 * k] = "changed"
        news[f"n1-near{k}"] = " ".join(words)
    news["junk-html"] = HOSTILE
    news["junk-short"] = "Click here. Home. Login. Contact."
    news["junk-words"] = "Breaking news today in the city council meeting about the budget and the plan."
    news["junk-lorem"] = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6
    records = [{"id": key, "text": text, "url": f"https://example.org/{key}"} for key, text in news.items()]
    write_jsonl(folder / "news" / "a.jsonl", records[:30] + ['{"broken'] + records[30:] + ["[1, 2"])
    web = [{"text": _article(rng)} for _ in range(15)] + [{"text": news["n2"]}, {"text": news["n2"]}]
    write_jsonl(folder / "web" / "a.jsonl", web)


def full_config(tmp_path: Path, run: str = "run"):
    config = source_config(
        tmp_path,
        [
            {
                "name": "news",
                "reader": "jsonl",
                "paths": [str(tmp_path / "in" / "news")],
                "id_field": "id",
                "url_field": "url",
            },
            {"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in" / "web")]},
        ],
        lang={"min_score": 0.5},
        dedup={"partitions": 2},
        lines={"max_docs": 5, "partitions": 2},
        tokenize={"vocab_size": 400},
        mix={
            "validation_fraction": 0.2,
            "validation_max_docs": 100,
            "mixtures": [{"name": "main"}, {"name": "flat", "temperature": 3.0, "max_epochs": 2.0}],
        },
    )
    return config.model_copy(update={"run_dir": tmp_path / run})


_RUNS: dict[str, tuple[Path, dict]] = {}


def curated_run(tmp_path_factory) -> tuple[Path, dict]:
    """One run of every stage over the corpus above, shared by this file's and test_inspect's
    tests: ``(run directory, stats per stage)``."""
    if "full" not in _RUNS:
        root = tmp_path_factory.mktemp("report-run")
        write_corpus(root / "in")
        config = full_config(root)
        stats = curate_flow(config)
        _RUNS["full"] = (Path(config.run_dir), stats)
    return _RUNS["full"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, prefect_server):
    return curated_run(tmp_path_factory)


# ---- reading the page ------------------------------------------------------------------------


class _Numbers(HTMLParser):
    """Collects (data-stat or data-json, shown text) pairs, every src/href, and the visible text."""

    def __init__(self):
        super().__init__()
        self.numbers: list[tuple[str, str, str]] = []
        self.links: list[str] = []
        self.ids: list[str] = []
        self._open: list[tuple[str, str, str, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href"):
            if attrs.get(name):
                self.links.append(attrs[name])
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        for kind in ("data-stat", "data-json"):
            if kind in attrs:
                self._open.append((tag, kind, attrs[kind], []))

    def handle_data(self, data):
        for entry in self._open:
            entry[3].append(data)

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            _, kind, key, text = self._open.pop()
            self.numbers.append((kind, key, "".join(text).strip()))


def _resolve(value, path: str):
    """Follow a dotted path whose keys may hold dots: at each level the longest key that matches."""
    while path:
        if isinstance(value, list):
            head, _, path = path.partition(".")
            value = value[int(head)]
            continue
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            key = ".".join(parts[:cut])
            if key in value:
                value, path = value[key], ".".join(parts[cut:])
                break
        else:
            raise KeyError(f"{path!r} not in {sorted(value)[:20]}")
    return value


def _expected(run_dir: Path, kind: str, key: str):
    if kind == "data-stat":
        stage, _, path = key.partition(".")
        data = json.loads((run_dir / stage / "stats.json").read_text())
    else:
        file, _, path = key.partition("#")
        data = json.loads((run_dir / file).read_text())
    value = _resolve(data, path)
    return sum(value.values()) if isinstance(value, dict) else value


def check_numbers(run_dir: Path, page: str) -> _Numbers:
    """Every data-stat / data-json element shows the value its file holds (at the shown precision)."""
    parsed = _Numbers()
    parsed.feed(page)
    assert parsed.numbers, "the page names no number's source"
    for kind, key, shown in parsed.numbers:
        expected = _expected(run_dir, kind, key)
        if expected is None:
            assert shown == "–", (key, shown)
            continue
        if isinstance(expected, bool):
            continue
        decimals = len(shown.split(".")[1]) if "." in shown else 0
        number = float(shown.replace(",", ""))
        assert number == round(float(expected), decimals), (kind, key, shown, expected)
    return parsed


# ---- Chromium --------------------------------------------------------------------------------


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "chromium is not installed; install it with `apt-get install -y --no-install-recommends chromium` "
        "(`make test` installs it where it can: run the suite with `make test`)"
    )


ERROR_PROBE = """<script>
(function () {
  var root = document.documentElement;
  function mark(what) {
    root.setAttribute('data-page-errors', (root.getAttribute('data-page-errors') || '') + '|' + what);
  }
  window.addEventListener('error', function (e) {
    mark('error ' + (e.message || (e.target && (e.target.src || e.target.href)) || 'resource'));
  }, true);
  window.addEventListener('unhandledrejection', function (e) { mark('rejection ' + e.reason); });
  var original = console.error;
  console.error = function () {
    mark('console.error ' + Array.prototype.join.call(arguments, ' '));
    original.apply(console, arguments);
  };
  document.addEventListener('DOMContentLoaded', function () { root.setAttribute('data-probe', 'ran'); });
})();
</script>"""


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    command = [
        chromium(),
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def render_in_chromium(report: Path, tmp_path: Path) -> Path:
    """Load the page with an error probe (no console error, no failed load, no uncaught exception),
    then take a screenshot; return the PNG."""
    page = report.read_text(encoding="utf-8")
    probe = report.with_name("probe.html")
    probe.write_text(page.replace("<head>", "<head>" + ERROR_PROBE, 1), encoding="utf-8")
    try:
        dumped = _chromium(["--dump-dom", probe.as_uri()], tmp_path)
    finally:
        probe.unlink()
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert 'data-probe="ran"' in dumped.stdout, "the error probe did not run: " + dumped.stderr[-2000:]
    errors = re.search(r'data-page-errors="([^"]*)"', dumped.stdout)
    assert errors is None, f"errors while loading the report: {errors.group(1)}"
    for marker in ("Uncaught", "net::ERR_"):
        assert marker not in dumped.stderr, dumped.stderr[-2000:]

    shot = tmp_path / "report.png"
    taken = _chromium([f"--screenshot={shot}", "--window-size=1280,4000", report.as_uri()], tmp_path)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    shutil.copyfile(shot, report.with_name("screenshot.png"))  # for a person to look at
    return shot


# ---- tests -----------------------------------------------------------------------------------


def test_report_numbers_are_the_runs_and_it_renders_offline_in_chromium(run, tmp_path):
    run_dir, stats = run
    assert stats["dedup"]["removed"] and stats["filter"]["removed"] and stats["source"]["quarantined"]
    assert stats["lines"]["counts"]["repeated_lines.lines_removed"] >= 12
    report = build_report(run_dir)
    assert report == run_dir / "report" / "index.html"
    page = report.read_text(encoding="utf-8")
    parsed = check_numbers(run_dir, page)

    shown = {key for kind, key, _ in parsed.numbers if kind == "data-stat"}
    for stage in stats:
        assert {f"{stage}.docs_in", f"{stage}.docs_out", f"{stage}.removed"} <= shown, stage
    for rule in stats["filter"]["removed"]:
        assert f"filter.removed.{rule}" in shown
    assert {
        "dedup.dedup.clusters",
        "tokenize.tokens",
        "mix.train_documents",
        "source.quarantined.invalid_json",
        "mix.mixtures.main.groups.news.tokens_taken",
        "mix.mixtures.flat.groups.web.epochs",
        "lang.languages.en.docs_in",
        "lines.languages.en.docs_out",
        "lines.counts.repeated_lines.lines_removed",
    } <= shown
    assert any(
        kind == "data-json" and key.startswith("mix/flat/manifest.json#groups.") for kind, key, _ in parsed.numbers
    )
    assert {"funnel", "lang", "filter", "dedup", "lines", "languages", "mix", "quarantine"} <= set(parsed.ids)

    # Offline: no script, nothing fetched; charts are inline SVG.
    assert "<script" not in page.lower()
    assert set(re.findall(r"url\((.)", page)) <= {"#"}  # only the charts' own clip paths
    assert all(link.startswith("#") for link in parsed.links), [x for x in parsed.links if not x.startswith("#")]
    assert page.count("<svg") >= 4
    assert len(parsed.ids) == len(set(parsed.ids)), "ids repeat (several charts on one page)"
    # Document text is escaped (the junk document is one the lang or filter stage removed).
    assert esc(HOSTILE) in page and HOSTILE not in page
    # Near-threshold examples say how many documents they judged, and from what.
    assert re.search(r"of [\d,]+ kept documents \(a seeded sample of the [\d,]+ in scope; as the run stored", page)
    assert "kept, closest to the threshold" in page
    # The dedup section shows the largest cluster with a word-level diff of a near copy.
    assert "<ins>changed</ins>" in page
    assert NEWSLETTER in page  # the repeated line the lines stage cut

    render_in_chromium(report, tmp_path)
    assert (run_dir / "report" / "screenshot.png").is_file()


def test_curate_report_rebuilds_the_same_page_from_the_run_directory(run):
    run_dir, _ = run
    first = build_report(run_dir).read_bytes()
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert f"report: {(run_dir / 'report' / 'index.html').resolve()}" in result.output
    assert (run_dir / "report" / "index.html").read_bytes() == first  # same files, same bytes
    result = CliRunner().invoke(app, ["report", str(run_dir / "nope")])
    assert result.exit_code == 2 and "no manifest.json" in result.output


def test_curate_run_builds_the_report_with_stages_off_and_an_empty_pool(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    write_jsonl(
        tmp_path / "in" / "a.jsonl", [{"text": f"Too short to keep, number {i}."} for i in range(6)] + ['{"broken']
    )
    config = tmp_path / "run.toml"
    config.write_text(
        f'run_dir = "{tmp_path / "run"}"\n'
        f'[[sources]]\nname = "s"\nreader = "jsonl"\npaths = ["{tmp_path / "in"}"]\n'
        '[lang]\nenabled = false\n[filter]\nfilters = ["gopher_quality"]\n'
        "[dedup]\nenabled = false\n[lines]\nenabled = false\n[tokenize]\nenabled = false\n"
    )
    result = CliRunner().invoke(app, ["run", str(config), "--quiet"])
    assert result.exit_code == 0, result.output
    report = tmp_path / "run" / "report" / "index.html"
    assert f"report: {report.resolve()}" in result.output
    page = report.read_text(encoding="utf-8")
    stats = json.loads((tmp_path / "run" / "filter" / "stats.json").read_text())
    assert stats["docs_in"] == 6 and stats["docs_out"] == 0
    parsed = check_numbers(tmp_path / "run", page)
    assert ("data-stat", "filter.docs_out", "0") in parsed.numbers
    assert "The lang stage did not run" in page and "The mix stage did not run" not in page
    assert {"funnel", "filter", "languages", "quarantine"} <= set(parsed.ids)
    assert not {"dedup", "lines", "mix"} & set(parsed.ids)


def test_each_stage_publishes_its_prefect_artifacts(run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    _, stats = run
    keys = [artifact_key(stage, what) for stage in stats for what in ("summary", "rules")]
    assert all(re.fullmatch(r"[a-z0-9-]+", key) for key in keys)
    wanted = ArtifactFilter(key=ArtifactFilterKey(any_=keys))
    found: list = []
    with get_client(sync_client=True) as client:
        # The server answers at most a page (200) at a time, and every run of the test suite
        # publishes under the same keys: read every page, or this run's may be past the first.
        while page := client.read_artifacts(artifact_filter=wanted, offset=len(found), limit=200):
            found += page
    by_key: dict[str, list] = {}
    for artifact in found:
        by_key.setdefault(artifact.key, []).append(artifact)
    assert set(keys) <= set(by_key)
    filter_stats = stats["filter"]
    line = f"| {filter_stats['docs_in']:,} | {filter_stats['docs_out']:,} |"
    assert any(line in artifact.data for artifact in by_key["curate-filter-summary"])
    assert all(artifact.type == "table" for artifact in by_key["curate-dedup-rules"])


def test_publishing_artifacts_never_fails_a_run(monkeypatch, caplog):
    def broken(**_):
        raise RuntimeError("no API")

    monkeypatch.setattr("flows.artifacts.create_markdown_artifact", broken)
    stats = StageStats("filter", 3, 2, {"a.b": 1})
    with caplog.at_level("WARNING"):
        assert publish_stage("filter", stats) == stats.to_dict()
    assert "could not publish" in caplog.text and "no API" in caplog.text


def test_a_stages_artifacts_count_its_rules_and_figures():
    stats = StageStats("filter", 10, 6, {"a.b": 3, "c.d": 1}, counts={"fired|a.b": 5, "fired|e.f": 2})
    markdown = stage_markdown("filter", stats)
    assert "| 10 | 6 | 4 | 0 |" in markdown and "| `a.b` | 3 | 30.00% |" in markdown
    assert [list(row.values()) for row in stage_rule_rows(stats)] == [
        ["a.b", 3, 5, 0, "30.00%"],
        ["c.d", 1, 1, 0, "10.00%"],
        ["e.f", 0, 2, 0, "0.00%"],
    ]
    lines = StageStats("lines", 6, 6, lines={"frequent_lines": 2}, counts={"repeated_lines.lines_removed": 7})
    assert stage_markdown("lines", lines).endswith("- 7 repeated lines cut\n")
    mix = StageStats("mix", 6, 5, train_documents=4, validation_documents=1, mixtures={"m": {"tokens_taken": 90}})
    assert "- 4 training and 1 validation documents\n- mixture `m`: 90 tokens taken\n" in stage_markdown("mix", mix)


def test_word_diff_marks_changed_words_and_escapes_them():
    diff = word_diff("the <b>old</b> text " + "same " * 40, "the <i>new</i> text " + "same " * 40)
    assert "<del>&lt;b&gt;old&lt;/b&gt;</del>" in diff and "<ins>&lt;i&gt;new&lt;/i&gt;</ins>" in diff
    assert "equal words" in diff
    assert esc("a\x00b") == "a\ufffdb"
