"""The per-language filter benchmark in its ``--tiny`` mode (built-in text only, nothing installed
or downloaded): it runs, and its last line holds the figures the full run prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "filter_languages.py"


def test_tiny_mode_prints_keep_rates_per_language_and_noise_recall_as_json_last():
    command = [sys.executable, str(SCRIPT), "--tiny"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["mode"] == "tiny" and result["benchmark"] == "filter_languages"
    rates = {key[len("keep_rate_") :]: value for key, value in result.items() if key.startswith("keep_rate_")}
    assert {"en", "zh", "ja", "ru"} <= set(rates) and set(rates) == set(result["docs_by_lang"])
    assert all(0.0 <= rate <= 1.0 for rate in rates.values())
    assert result["worst_lang"] == min(rates, key=lambda lang: (rates[lang], lang))
    if rates["en"]:
        assert abs(result["keep_ratio_worst_vs_en"] - round(rates[result["worst_lang"]] / rates["en"], 4)) < 1e-3
    assert result["noise_pages"] > 100 and 0.0 <= result["noise_recall"] <= 1.0
    assert 0.0 <= result["noise_recall_en"] <= 1.0
    assert "Good text kept by the default filter stage" in done.stdout and "Demo noise removed" in done.stdout


def test_documents_are_built_to_the_same_english_equivalent_size_in_every_script():
    sys.path.insert(0, str(SCRIPT.parent))
    import filter_languages as bench

    english = bench.build_documents(["A sentence of forty characters, or so."] * 600, "en", 3)
    chinese = bench.build_documents(["这是一个大约有十三个字的句子。"] * 600, "zh", 3)
    assert len(english) == len(chinese) == bench.MAX_DOCS_PER_SOURCE
    for docs, lang in ((english, "en"), (chinese, "zh")):
        sizes = [bench.en_chars(doc, lang) for doc in docs]
        assert all(bench.DOC_CHARS <= size < bench.DOC_CHARS * 1.2 for size in sizes)
    assert "\n" in chinese[0] and " " not in chinese[0]
    assert bench.build_documents(["Too short."], "en", 3) == []  # under half the size, nothing before it
