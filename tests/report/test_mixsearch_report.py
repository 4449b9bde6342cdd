"""The mixture search's report page (report.mixsearch) from a small results.json built here as the
search writes it: every number it shows is the file's, the pre-registered answer comes first, it
renders without validation, and names from the data stay text."""

from __future__ import annotations

import copy
import io
import json
from html.parser import HTMLParser

import pytest
from rich.console import Console

from report.console import print_mixsearch
from report.mixsearch import build_mixsearch_report, render
from tests.helpers import parse_html, resolve_json_path

EVIL = '<script>alert("x")</script>$\\frac$'
GROUPS = ["news", "web", EVIL]
TARGETS = ["heldout", "dialogues"]
BASELINES = ["natural", "t3.33", "unimax"]


def _spread(mean: float, std: float, n: int = 2) -> dict:
    ci = None if n < 2 else [mean - 3 * std, mean + 3 * std]
    return {"mean": mean, "std": std, "ci95": ci, "n": n, "min": mean - std, "max": mean + std,
            "by_seed": {str(s): mean for s in range(n)}}  # fmt: skip


def _compare(difference: float, p: float | None, ci: list | None) -> dict:
    return {"difference": difference, "ci95": ci, "p": p, "better": difference < 0, "paired": True, "test": "t",
            "df": 1.0, "stderr": 0.01, "t": -3.0}  # fmt: skip


def _comparison(target: str, b: str, family: str, difference: float, p: float, p_holm: float) -> dict:
    significant = p_holm < 0.05
    return {
        **_compare(difference, p, [difference - 0.05, difference + 0.05]),
        "target": target, "a": f"proposal-{target}", "b": b, "family": family, "p_holm": p_holm,
        "significant": significant, "family_size": 2,
        "sentence": f"target {target}: proposal-{target} against {b} ({family}), p_holm = {p_holm}",
    }  # fmt: skip


def _results() -> dict:
    proxies = []
    for k, label in enumerate([*BASELINES, "sample-0", "sample-1"]):
        shares = {"news": 0.5 - 0.05 * k, "web": 0.3, EVIL: 0.2 + 0.05 * k}
        # sample-0 lacks the dialogues target: the fit's predictions skip it
        targets = {"heldout": 4.5 + 0.01 * k, "dialogues": None if label == "sample-0" else 6.3 + 0.02 * k}
        proxies.append({"name": f"p-{k:012x}", "label": label, "shares": shares,
                        "measures": {"heldout_bpb": targets["heldout"]}, "targets": targets})  # fmt: skip
    fits = {}
    for t, target in enumerate(TARGETS):
        n = sum(p["targets"][target] is not None for p in proxies)
        families = {
            family: {"spearman": None if family == "law" and t else 0.8 - 0.1 * f, "pearson": 0.7, "mae": 0.0123,
                     "folds": 5, "predicted": [4.5 + 0.013 * i + t for i in range(n)]}
            for f, family in enumerate(("trees", "law"))
        }  # fmt: skip
        weights = {"news": 0.6, "web": 0.1, EVIL: 0.3} if t else {"news": 0.2, "web": 0.5, EVIL: 0.3}
        fits[target] = {
            "target": {"name": target, "metrics": {"heldout_bpb": 1.0}},
            "proxies": n,
            "fit": {"family": "trees", "families": families},
            "proposal": {"weights": weights, "interval": {g: [w / 2, min(1.0, w * 1.5)] for g, w in weights.items()},
                         "predicted": 4.4321 + t, "predicted_interval": [4.4, 4.5 + t], "family": "trees",
                         "candidates": 2000, "top_k": 20, "resamples": 20},
            "natural": {"news": 0.5, "web": 0.3, EVIL: 0.2},
        }  # fmt: skip
    mixtures = [*BASELINES, *(f"proposal-{t}" for t in TARGETS)]
    runs = {
        name: {
            "shares": {"news": 0.4 + 0.01 * k, "web": 0.35, EVIL: 0.25 - 0.01 * k},
            "measures": {"heldout_bpb": _spread(4.7 + 0.01 * k, 0.02)},
            # t3.33 has one seed on the dialogues target: no interval
            "targets": {"heldout": _spread(4.7 + 0.01 * k, 0.02),
                        "dialogues": _spread(6.7 - 0.03 * k, 0.05, 1 if k == 1 else 2)},
        }
        for k, name in enumerate(mixtures)
    }  # fmt: skip
    comparisons = []
    for target, (difference, p, p_holm) in zip(TARGETS, [(0.0412, 0.2, 0.4), (-0.1234, 0.004, 0.008)]):
        comparisons.append(_comparison(target, "natural", "primary", difference, p, p_holm))
        comparisons += [_comparison(target, b, "secondary", 0.01, 0.3, 0.6) for b in ("t3.33", "unimax")]
    tradeoff = {
        f"proposal-{t}": {
            "heldout_bpb": _compare(0.0111, 0.3, [-0.02, 0.04]),
            f"heldout_bpb/{EVIL}": _compare(-0.0222, 0.04, [-0.04, -0.001]),
            "task/cloze/gold_bpb": _compare(0.0, None, None),
        }
        for t in TARGETS
    }
    validity = {
        "heldout": {"mixtures": mixtures, "predicted": [4.51, 4.52, 4.53, 4.49, 4.50],
                    "measured": [4.7, 4.71, 4.72, 4.73, 4.74], "spearman": 0.1},
        "dialogues": {"mixtures": mixtures[:2], "predicted": [6.5, 6.4], "measured": [6.7, 6.6], "spearman": None},
    }  # fmt: skip
    contamination = {name: {"contaminated_documents": 0, "contaminated_windows": 0, "common_windows": 3,
                            "tokens_checked": 6000} for name in [*mixtures, *(p["name"] for p in proxies)]}  # fmt: skip
    return {
        "kind": "mixsearch",
        "config": {"budget_tokens": 6000, "seeds": [0, 1],
                   "mixsearch": {"baselines": BASELINES, "primary": "natural", "proxy_tokens": 12000,
                                 "concentration": [0.1, 5.0]}},
        "groups": GROUPS,
        "pool": {"run_dir": "curation/raw", "tokens": {"news": 237063, "web": 88328, EVIL: 13717}},
        "constraints": {"budget": 6000, "max_epochs": 8.0, "min_share": dict.fromkeys(GROUPS, 0.0),
                        "upper": {"news": 1.0, "web": 1.0, EVIL: 0.75}},
        "sampling": {"drawn": 2, "rejected": 1},
        "proxies": proxies,
        "fits": fits,
        "validation": {"runs": runs, "comparisons": comparisons, "tradeoff": tradeoff, "validity": validity},
        "contamination": contamination,
        "timing": {"total_s": 50.6, "curation_s": 9.7, "proxies_s": 7.6, "fits_s": 0.6, "validation_s": 19.4},
    }  # fmt: skip


class _Numbers(HTMLParser):
    """(data-json path, shown text) of every element that names its number's source, in page order."""

    def __init__(self):
        super().__init__()
        self.numbers: list[tuple[str, str]] = []
        self._open: list[tuple[str, str, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "data-json" in attrs:
            self._open.append((tag, attrs["data-json"], []))

    def handle_data(self, data):
        for entry in self._open:
            entry[2].append(data)

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            _, key, text = self._open.pop()
            self.numbers.append((key, "".join(text)))


def _shown(page: str) -> list[tuple[str, str]]:
    parser = _Numbers()
    parser.feed(page)
    return parser.numbers


def _check_numbers(page: str, results: dict) -> list[tuple[str, str]]:
    """Every data-json number is results.json's value within half a unit of its last digit; a
    null one is a dash."""
    shown = _shown(page)
    for ref, text in shown:
        file, _, path = ref.partition("#")
        assert file == "results.json", ref
        value = resolve_json_path(results, path)
        if value is None:
            assert text == "–", (path, text)
            continue
        digits = len(text.split(".")[1]) if "." in text else 0
        assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10**-digits + 1e-12, (path, text, value)
    return shown


@pytest.fixture(scope="module")
def results() -> dict:
    return _results()


@pytest.fixture(scope="module")
def page(results) -> str:
    return render(results)


def test_every_number_shown_is_results_json(page, results):
    shown = _check_numbers(page, results)
    refs = {path.partition("#")[2] for path, _ in shown}
    assert len(shown) > 150
    # the weights beside the baselines, with intervals and bounds, for every group
    for group in GROUPS:
        for target in TARGETS:
            assert {f"fits.{target}.proposal.weights.{group}", f"fits.{target}.proposal.interval.{group}.0",
                    f"fits.{target}.proposal.interval.{group}.1"} <= refs  # fmt: skip
        assert {f"validation.runs.{b}.shares.{group}" for b in BASELINES} <= refs
        assert f"constraints.upper.{group}" in refs
    # both families' scores, each comparison, each trade-off measure, each validity point
    for target in TARGETS:
        for family in ("trees", "law"):
            assert {f"fits.{target}.fit.families.{family}.{k}" for k in ("spearman", "pearson", "mae")} <= refs
        assert f"fits.{target}.proposal.predicted_interval.1" in refs
        assert {f"validation.tradeoff.proposal-{target}.task/cloze/gold_bpb.ci95"} <= refs
    assert {f"validation.comparisons.{i}.p_holm" for i in range(6)} <= refs
    assert {f"validation.validity.heldout.measured.{k}" for k in range(5)} <= refs
    assert dict(shown)["results.json#validation.validity.dialogues.spearman"] == "–"
    assert dict(shown)["results.json#fits.dialogues.fit.families.law.spearman"] == "–"
    # a target's spread with one seed has no interval: a dash, not a made-up one
    assert dict(shown)["results.json#validation.runs.t3.33.targets.dialogues.ci95"] == "–"


def test_the_pre_registered_answer_comes_first(page, results):
    names = ("answer", "weights", "fit", "validation", "tradeoff", "validity", "proxies", "contamination", "how")
    sections = [f"<section id={name}>" for name in names]
    at = [page.index(s) for s in sections]
    assert at == sorted(at)
    answer = page[at[0] : at[1]]
    assert "pre-registered" in answer
    primary = [c for c in results["validation"]["comparisons"] if c["family"] == "primary"]
    for c in primary:
        assert c["sentence"] in answer
    assert not any(c["sentence"] in answer for c in results["validation"]["comparisons"] if c["family"] != "primary")
    # each way the evidence goes is said: a proposal that does not beat natural shares is a result
    assert "do not separate proposal-heldout from natural" in answer and "That is a result" in answer
    assert "supports training on proposal-dialogues" in answer
    # in the table of every comparison, the primary ones come first
    table = page[page.index("Every comparison (primary first)") : at[4]]
    positions = {c["sentence"]: table.index(c["sentence"]) for c in results["validation"]["comparisons"]}
    assert max(positions[c["sentence"]] for c in primary) < min(
        positions[c["sentence"]] for c in results["validation"]["comparisons"] if c["family"] == "secondary"
    )


def test_without_validation_the_page_shows_the_proxies_side(results, tmp_path):
    unvalidated = copy.deepcopy(results)
    del unvalidated["validation"]
    unvalidated["contamination"] = {p["name"]: results["contamination"][p["name"]] for p in results["proxies"]}
    (tmp_path / "results.json").write_text(json.dumps(unvalidated))
    page = build_mixsearch_report(tmp_path).read_text()
    assert build_mixsearch_report(tmp_path) == tmp_path / "report" / "index.html"
    shown = _check_numbers(page, unvalidated)
    refs = {path.partition("#")[2] for path, _ in shown}
    # the baselines' shares are their proxies'; the answer is the prediction, said to be one
    assert {f"proxies.{k}.shares.{g}" for k in range(3) for g in GROUPS} <= refs
    answer = page[page.index("<section id=answer>") : page.index("<section id=weights>")]
    assert answer.count("not validated") == 2 and "proxies.0.targets.heldout" in answer
    assert "ran without validation" in page
    assert "<section id=tradeoff>" not in page and "<section id=validity>" not in page

    out = io.StringIO()
    print_mixsearch(Console(file=out, width=200, color_system=None), unvalidated)
    assert "trees (chosen) 0.80 / 0.0123" in out.getvalue()


def test_names_from_the_data_stay_text(page):
    elements = parse_html(page)
    assert not any(tag == "script" for tag, _ in elements.tags)
    text = "".join(elements.text)
    assert EVIL in text  # in the tables, and as drawn text in the charts
    assert text.count(EVIL) > len(TARGETS) * 2
