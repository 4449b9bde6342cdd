"""``curate run`` on English and Chinese pages with a config that makes one rule unfair to Chinese
on purpose (C4's end marks given as ``.`` alone, so every line ending in ``。`` is cut and no
Chinese page keeps a sentence): the run prints one warning line for it, and the report shows it
and each language's documents through the stages, every number as its stats.json has it."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import parse_html, resolve_json_path, shared_api_env, write_jsonl

REPO = Path(__file__).resolve().parents[2]
NOUNS = (
    "council school market hospital library museum station bridge harbour garden factory team club court "
    "river village budget report plan road farm shop office church theatre airport college park street"
).split()
VERBS = "opened closed approved rejected repaired announced delayed reviewed expanded funded visited".split()
ADJECTIVES = "local national small large new old public private northern southern early late quiet".split()
PLACES = "Leeds Bristol Glasgow Cardiff York Bath Oxford Derby Exeter Chester Dundee Norwich".split()
CHINESE = [
    "今天早上，市政府宣布将在城市北部修建一座新的图书馆。",
    "这座图书馆预计明年秋天开放，将为附近的居民提供更多的阅读空间。",
    "许多家长表示，他们希望孩子们能在周末去那里看书和学习。",
    "学校的老师们也认为，这个项目对社区的发展非常重要。",
    "据报道，新的公园和体育场也将在未来几年内完成建设。",
    "火车站附近的商店最近生意很好，因为来这里旅游的人越来越多。",
    "一位当地的农民说，今年的天气比去年好，粮食的产量也提高了。",
    "医院的医生提醒大家，冬天要注意保暖，多喝热水，按时休息。",
    "博物馆正在举办一个关于古代历史的展览，吸引了很多学生参观。",
    "市长在会议上说，政府会继续支持中小企业，帮助年轻人找到工作。",
    "这条河两岸的风景非常美丽，每到春天都会开满鲜花。",
    "记者在采访中了解到，很多人希望公共交通能够更加方便。",
]
ENGLISH_PAGES, CHINESE_PAGES = 12, 8
UNFAIR = "c4_quality.min_sentences"


def _english(rng: random.Random) -> str:
    """Three lines of three plain English news sentences, each line ending in a full stop."""

    def sentence() -> str:
        c = rng.choice
        return (
            f"The {c(ADJECTIVES)} {c(NOUNS)} {c(VERBS)} the {c(NOUNS)} in {c(PLACES)}, and the {c(ADJECTIVES)} "
            f"{c(NOUNS)} said that it would be ready for the {c(NOUNS)} before the end of the year."
        )

    return "\n".join(" ".join(sentence() for _ in range(3)) for _ in range(3))


def _chinese(rng: random.Random) -> str:
    """Three lines of three Chinese news sentences, each ending in 。"""
    picked = rng.sample(CHINESE, 9)
    return "\n".join("".join(picked[i : i + 3]) for i in range(0, 9, 3))


def _folder(tmp_path: Path) -> Path:
    rng = random.Random(0)
    pages = [_english(rng) for _ in range(ENGLISH_PAGES)] + [_chinese(rng) for _ in range(CHINESE_PAGES)]
    write_jsonl(tmp_path / "data" / "pages.jsonl", [{"text": text} for text in pages])
    (tmp_path / "run.toml").write_text(
        'run_dir = "runs/mixed"\n'
        '[[sources]]\nname = "web"\nreader = "jsonl"\npaths = ["data/"]\n'
        '[filter]\nfilters = ["c4_quality"]\n'
        '[filter.params.c4_quality]\nend_marks = ["."]   # no 。: unfair to Chinese on purpose\n'
        "[tokenize]\nenabled = false\n[mix]\nenabled = false\n"
    )
    return tmp_path


def test_a_rule_unfair_to_chinese_is_warned_of_after_the_run_and_in_the_report(tmp_path, prefect_server):
    folder = _folder(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", "from flows.cli import app; app()", "run", "run.toml", "--quiet"],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO), **shared_api_env()},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = folder / "runs" / "mixed"
    filter_stats = json.loads((run / "filter" / "stats.json").read_text())
    assert {code: ledger["docs_in"] for code, ledger in filter_stats["languages"].items()} == {
        "en": ENGLISH_PAGES,
        "zh": CHINESE_PAGES,
    }
    assert filter_stats["languages"]["zh"]["removed"] == {UNFAIR: CHINESE_PAGES}
    assert filter_stats["languages"]["en"]["docs_out"] == ENGLISH_PAGES
    line = (
        f"warning: {UNFAIR} removes 100% of zh ({CHINESE_PAGES} of {CHINESE_PAGES} documents) but 0% of en; "
        "its threshold may not suit zh (see docs/config.md)"
    )
    assert [text for text in done.stdout.splitlines() if text.startswith("warning:")] == [line]
    assert done.stdout.index("documents through the stages") < done.stdout.index(line)

    page = (run / "report" / "index.html").read_text()
    parsed = parse_html(page)
    text = "".join(parsed.text)
    assert line in text and "1 fairness warning" in text
    section = page.split('<section id="languages">', 1)[1].split("</section>", 1)[0]
    table = section.split("<h3>Each language through the stages</h3>", 1)[1]
    assert table.index(">en<") < table.index(">zh<")  # most documents first
    shown = dict(re.findall(r'data-stat="([^"]+)">([^<]*)<', table))
    stats = {
        stage: json.loads((run / stage / "stats.json").read_text()) for stage in ("lang", "filter", "dedup", "lines")
    }
    for key, data in shown.items():
        stage, path = key.split(".", 1)
        assert int(data.replace(",", "")) == resolve_json_path(stats[stage], path), key
    assert f"filter.languages.zh.removed.{UNFAIR}" in shown and "lang.languages.zh.docs_in" in shown
    assert "lines.languages.en.docs_out" in shown
