"""Licences: read from what the input says (never guessed), carried through every stage, counted
per stage and per mixture, kept or dropped by rules, and described in each mixture's card."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from pipeline.formats.configfile import ConfigError
from pipeline.formats.documents import UNKNOWN, RunLayout
from pipeline.formats.mixture import export_mixture
from pipeline.licence import LicenceRule, declared, licence_of
from pipeline.stages.card import write_cards
from pipeline.stages.run import RunFiles
from report.build import build_report
from tests.helpers import check_card, html_page, mix_config, run_units, source_config, write_jsonl, write_warc


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("mit", "MIT"),
        ("cc-by-sa-4.0", "CC-BY-SA-4.0"),
        ("CC BY-NC 4.0", "CC-BY-NC-4.0"),
        ("https://creativecommons.org/licenses/by-nc/3.0/de/", "CC-BY-NC-3.0-DE"),
        ("https://creativecommons.org/licenses/by-nc-sa/3.0/deed.en", "CC-BY-NC-SA-3.0"),  # a deed's language
        ("http://creativecommons.org/licenses/by/2.5/in/", "LicenseRef-CC-BY-2.5-in"),  # a port SPDX lacks
        ("https://creativecommons.org/publicdomain/zero/1.0/", "CC0-1.0"),
        ("https://creativecommons.org/licenses/by/3.0/igo/", "CC-BY-3.0-IGO"),  # a port, not the unported
        ("http://creativecommons.org/licenses/by/2.0/scotland/", "LicenseRef-CC-BY-2.0-scotland"),
        ("CC BY-SA 4.0 International", "CC-BY-SA-4.0"),
        ("CC0 1.0 Universal", "CC0-1.0"),
        ("CC BY 3.0 or later", "LicenseRef-CC-BY-3.0-or-later"),  # not a port "or"
        ("GPL-3.0-only AND CC BY-NC 3.0", "GPL-3.0-only AND CC-BY-NC-3.0"),
        # What the pipeline writes reads back the same.
        ("LicenseRef-CC-BY-SA-3.0-es AND MIT", "LicenseRef-CC-BY-SA-3.0-es AND MIT"),
        ("MIT OR (Apache-2.0 AND BSD-3-Clause)", "MIT OR (Apache-2.0 AND BSD-3-Clause)"),
        ("https://spdx.org/licenses/BSD-3-Clause.html", "BSD-3-Clause"),
        ("Apache-2.0 OR MIT", "Apache-2.0 OR MIT"),
        ('["MIT", "bsd-3-clause", "MIT"]', "BSD-3-Clause AND MIT"),
        # Dolma's cc_re attributes: the keys name licences, the other keys are ignored; a 4.0
        # licence has no ports, so a suffix is the deed's language.
        ('{"cc_re__cc_re__cc_by_nc_nd_4_0_fr": [[1, 2, 1.0]], "other": 1}', "CC-BY-NC-ND-4.0"),
        # Before 4.0 a name's suffix may be a port or a deed's language: kept as said.
        ('{"cc_re__cc_re__cc_by_sa_3_0_de": [[1, 2, 1.0]], "cc_re__cc_re__cc_by_4_0": null}',
         "LicenseRef-CC-BY-SA-3.0-de"),
        ('{"cc_re__cc_re__cc_by_sa_3_0": [[1, 2, 1.0]], "cc_re__cc_re__cc_by_sa_4_0": [[3, 4, 1]]}',
         "CC-BY-SA-3.0 AND CC-BY-SA-4.0"),
        ('{"cc_re__cc_re__cc_publicdomain_zero_1_0_en": 1, "cc_re__cc_re__cc_publicdomain_mark_1_0": 1}',
         "CC0-1.0 AND LicenseRef-CC-PDM-1.0"),
        ('{"other": 1}', None),
        ("public domain", "LicenseRef-public-domain"),  # kept as said, not guessed into an SPDX id
        ("unknown", None),
        ("  ", None),
        (None, None),
    ],
)  # fmt: skip
def test_what_a_licence_field_holds_becomes_one_licence(raw, expected):
    assert licence_of(raw) == expected


def test_objects_read_by_their_keys_at_once_agree_with_reading_each_value():
    import random

    import pyarrow as pa

    from pipeline.licence import licence_column

    rng = random.Random(3)
    keys = ["cc_re__cc_re__cc_by_sa_3_0", "cc_re__cc_re__cc_by_sa_3_0_en", "cc_re__cc_re__cc_by_4_0_fr",
            "cc_re__cc_re__cc_by_4_0", "cc_re__cc_re__cc_publicdomain_mark_1_0", "tagger__score", "mit"]  # fmt: skip
    metas = [None, json.dumps({"other": 1}), json.dumps({"attributes": "MIT"})]
    metas += [json.dumps({"attributes": {"MIT OR Apache-2.0": 1, "cc0": 1, "cc_by_4_0": None}})]
    metas += [
        json.dumps({"attributes": {k: [[rng.randrange(9999), 1, 1.0]] for k in rng.sample(keys, rng.randint(0, 3))}})
        for _ in range(300)
    ]

    def one_by_one(meta):
        found = json.loads(meta).get("attributes") if meta else None
        return (
            licence_of(found if isinstance(found, str) else json.dumps(found)) if found is not None else None
        ) or "CC0-1.0"

    assert licence_column(pa.array(metas), "attributes", "CC0-1.0").to_pylist() == [one_by_one(m) for m in metas]
    # Values of mixed types under one key do not decode as one struct: each is read on its own.
    mixed = [json.dumps({"attributes": {"cc_by_4_0": [1]}}), json.dumps({"attributes": {"cc_by_4_0": "x", "mit": 1}})]
    assert licence_column(pa.array(mixed), "attributes", UNKNOWN).to_pylist() == ["CC-BY-4.0", "CC-BY-4.0 AND MIT"]


def test_declared_licences_are_spdx_and_configs_say_so_in_one_line(tmp_path):
    assert declared("cc-by-4.0") == "CC-BY-4.0" and declared("Unknown") == UNKNOWN
    with pytest.raises(ValueError, match="not an SPDX licence identifier"):
        declared("free for all")
    write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    source = {"name": "s", "reader": "jsonl", "paths": [str(tmp_path / "a.jsonl")]}
    with pytest.raises(ConfigError, match=r"sources\[0\]\.licence: not an SPDX licence") as error:
        source_config(tmp_path, [{**source, "licence": "free for all"}])
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="a text file has no fields"):
        source_config(tmp_path, [{**source, "reader": "text", "licence_field": "licence"}])
    with pytest.raises(ConfigError, match="not an SPDX licence"):
        source_config(tmp_path, [source], filter={"licences": ["MIT", "nonsense licence"]})
    with pytest.raises(ConfigError, match="rules of the filter stage, which is off"):
        source_config(tmp_path, [source], filter={"enabled": False, "exclude_licences": ["unknown"]})
    config = source_config(tmp_path, [source], filter={"licences": ["mit", "CC-BY-*"], "exclude_licences": ["unknown"]})
    assert config.filter.licences == ["MIT", "CC-BY-*"] and config.filter.exclude_licences == [UNKNOWN]


def test_licence_rules_read_and_and_or_as_spdx_means_them():
    rule = LicenceRule(keep=["cc-by-*", "MIT"], drop=["*-NC-*"])  # patterns match in any case
    assert rule.rule("CC-BY-4.0") is None and rule.rule("CC-BY-SA-4.0 AND MIT") is None
    assert rule.rule("CC-BY-NC-4.0") == LicenceRule.DROPPED  # excluded first, though cc-by-* keeps it
    assert rule.rule("LicenseRef-CC-BY-NC-3.0-es") == LicenceRule.DROPPED
    assert rule.rule("MIT AND BSD-3-Clause") == LicenceRule.NOT_KEPT  # AND: every licence applies
    assert rule.rule("MIT OR BSD-3-Clause") is None  # OR: the user may take MIT
    assert rule.rule("MIT OR CC-BY-NC-4.0") is None  # ...and leave the excluded one
    assert rule.rule("CC-BY-NC-4.0 OR CC-BY-NC-SA-4.0") == LicenceRule.DROPPED  # no choice left
    assert rule.rule(UNKNOWN) == LicenceRule.NOT_KEPT
    assert LicenceRule(drop=[UNKNOWN]).rule("MIT") is None and LicenceRule(drop=[UNKNOWN]).rule(UNKNOWN)
    nested = "MIT OR (Apache-2.0 AND BSD-3-Clause)"
    assert LicenceRule(drop=["BSD-3-Clause"]).rule(nested) is None
    assert LicenceRule(drop=["BSD-3-Clause"]).rule("(BSD-3-Clause OR MIT) AND CC0-1.0") is None
    assert LicenceRule(drop=["MIT"]).rule("(BSD-3-Clause OR MIT) AND CC0-1.0") is None
    assert LicenceRule(drop=["CC0-1.0"]).rule("(BSD-3-Clause OR MIT) AND CC0-1.0") == LicenceRule.DROPPED
    assert LicenceRule(keep=["MIT", "Apache-2.0", "BSD-3-Clause"]).rule(nested) is None
    assert LicenceRule(keep=["BSD-3-Clause AND MIT"]).rule("BSD-3-Clause AND MIT") is None  # listed whole


def _warc_with_headers(path, pages: list[tuple[str, list[tuple[str, str]], bytes]]) -> None:
    """A WARC of responses with the given extra HTTP headers."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    for url, headers, payload in pages:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), *headers], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=http))
    path.write_bytes(buffer.getvalue())


def test_a_warc_records_licence_from_its_link_headers_its_page_or_a_named_header(tmp_path):
    page = html_page("One", ["A page."])
    link = '</a,b.css>; rel="stylesheet", <https://spdx.org/licenses/MIT.html>; title="x, y"; rel="License"'
    _warc_with_headers(
        tmp_path / "crawl" / "a.warc.gz",
        [
            ("https://a.example/1", [("Link", link)], page),
            ("https://a.example/2", [("X-Licence", "cc-by-sa-4.0")], page.replace(
                b"</head>", b'<a rel="nofollow license" href="https://creativecommons.org/licenses/by/4.0/">cc</a></head>')),
            ("https://a.example/3", [], page),
        ],
    )  # fmt: skip
    crawl = {"name": "crawl", "reader": "warc", "paths": [str(tmp_path / "crawl")]}
    links = source_config(tmp_path, [{**crawl, "licence_field": "licence_links"}])
    run_units(links)
    docs = pl.read_parquet(RunLayout(links.run_dir).stage("source").docs / "*.parquet").sort("url")
    assert docs["licence"].to_list() == ["MIT", "CC-BY-4.0", UNKNOWN]
    header = source_config(
        tmp_path, [{**crawl, "licence_field": "X-Licence", "licence": "CC0-1.0"}], run_dir=str(tmp_path / "h")
    )
    run_units(header)
    docs = pl.read_parquet(RunLayout(header.run_dir).stage("source").docs / "*.parquet").sort("url")
    assert docs["licence"].to_list() == ["CC0-1.0", "CC-BY-SA-4.0", "CC0-1.0"]


def test_the_source_stage_reads_each_documents_licence_from_every_reader(tmp_path):
    write_jsonl(
        tmp_path / "web" / "a.jsonl",
        [
            {"id": "a", "text": "one", "metadata": {"license": "cc-by-4.0"}},
            {"id": "b", "text": "two", "metadata": {"license": None}},
            {"id": "c", "text": "three"},
            {"id": "d", "text": "four", "metadata": {"license": "https://creativecommons.org/licenses/by-sa/3.0/"}},
            '{"broken',
        ],
    )
    write_warc(
        tmp_path / "crawl" / "a.warc.gz",
        [
            ("https://a.example/1", "text/html", html_page("One", ["A page."]).replace(
                b"</head>", b'<link rel="license" href="https://creativecommons.org/licenses/by/4.0/"></head>')),
            ("https://a.example/2", "text/html", html_page("Two", ["Another page."])),
        ],
    )  # fmt: skip
    config = source_config(
        tmp_path,
        [
            # Only "title" kept in meta: the licence field is read all the same.
            {"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "web")], "id_field": "id",
             "licence_field": "metadata.license", "licence": "CC0-1.0", "meta_fields": ["title"]},
            {"name": "crawl", "reader": "warc", "paths": [str(tmp_path / "crawl")], "licence_field": "licence_links"},
            {"name": "notes", "reader": "jsonl", "paths": [str(tmp_path / "web")], "id_field": "id",
             "licence": "mit"},
        ],
    )  # fmt: skip
    parts = run_units(config)
    docs = pl.read_parquet(RunLayout(config.run_dir).stage("source").docs / "*.parquet")
    found = dict(zip(docs["id"], docs["licence"]))
    assert {k: v for k, v in found.items() if k.startswith("web/")} == {
        "web/a": "CC-BY-4.0", "web/b": "CC0-1.0", "web/c": "CC0-1.0", "web/d": "CC-BY-SA-3.0",
    }  # fmt: skip
    assert sorted(v for k, v in found.items() if k.startswith("crawl/")) == ["CC-BY-4.0", UNKNOWN]
    assert {v for k, v in found.items() if k.startswith("notes/")} == {"MIT"}
    # Per licence, every record is accounted for; the unreadable line is counted under unknown.
    web = next(p for p in parts if p["source"] == "web")["by_licence"]
    assert web["CC0-1.0"]["docs_out"] == 2 and web[UNKNOWN]["quarantined"] == {"invalid_json": 1}
    for part in parts:
        ledgers = part["by_licence"].values()
        assert sum(x["docs_in"] for x in ledgers) == part["ledger"]["docs_in"]
        assert sum(x["docs_out"] for x in ledgers) == part["ledger"]["docs_out"]


WORDS = "river council budget market school harbour winter garden station bridge museum library".split()


def _texts(prefix: str, n: int, words: int) -> list[str]:
    return [
        " ".join(WORDS[(i * 7 + j * 3 + len(prefix)) % len(WORDS)] for j in range(words)) + f" {prefix}{i}."
        for i in range(n)
    ]


@pytest.mark.usefixtures("prefect_server")
def test_a_dropped_licence_leaves_the_ledger_and_every_mixture_and_the_card_says_so(tmp_path):
    web = [
        {"id": f"w{i}", "text": text, "attributes": {f"cc_re__cc_by_{kind}_4_0": [[0, 1, 1.0]], "lang": "en"}}
        for i, (text, kind) in enumerate(zip(_texts("w", 60, 40), ["sa", "nc", "nd"] * 20))
    ]
    web += [{"id": f"u{i}", "text": text} for i, text in enumerate(_texts("u", 10, 40))]  # no licence named
    write_jsonl(tmp_path / "web" / "a.jsonl", web)
    write_jsonl(tmp_path / "books" / "a.jsonl", [{"id": f"b{i}", "text": t} for i, t in enumerate(_texts("b", 30, 60))])
    config = mix_config(
        tmp_path,
        [
            {"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "web")], "id_field": "id",
             "licence_field": "attributes"},
            {"name": "books", "reader": "jsonl", "paths": [str(tmp_path / "books")], "id_field": "id",
             "licence": "CC0-1.0"},
        ],
        mix={"group_by": ["source"], "validation_fraction": 0.2, "decontaminate": False,
             "mixtures": [{"name": "natural"}, {"name": "flat", "temperature": 100.0, "max_epochs": 3.0}]},
        filter={"filters": [], "exclude_licences": ["CC-BY-NC-*"], "licences": ["CC-BY-*", "CC0-1.0", "unknown"]},
    )  # fmt: skip
    from flows.curate import curate_flow

    stats = curate_flow(config)
    # The rule removes the 20 non-commercial documents, counted like any rule, per licence too.
    assert stats["filter"]["removed"] == {"licence.excluded": 20}
    assert stats["filter"]["licences"]["CC-BY-NC-4.0"] == {
        "stage": "filter", "docs_in": 20, "docs_out": 0, "removed": {"licence.excluded": 20}, "quarantined": {},
    }  # fmt: skip
    assert stats["source"]["licences"]["CC-BY-SA-4.0"]["docs_out"] == 20
    assert stats["source"]["licences"][UNKNOWN]["docs_out"] == 10
    layout = RunLayout(config.run_dir)
    removed = pl.read_parquet(layout.stage("filter").removed / "*.parquet")
    assert removed["licence"].unique().to_list() == ["CC-BY-NC-4.0"] and removed.height == 20
    tokens = stats["tokenize"]["licences"]
    assert set(tokens) == {"CC-BY-SA-4.0", "CC-BY-ND-4.0", "CC0-1.0", UNKNOWN}
    assert sum(v["tokens"] for v in tokens.values()) == stats["tokenize"]["tokens"]

    documents = pl.read_parquet(layout.root / "mix" / "documents.parquet")
    assert "CC-BY-NC-4.0" not in documents["licence"].to_list()
    for name in ("natural", "flat"):
        folder = layout.root / "mix" / name
        manifest = json.loads((folder / "manifest.json").read_text())
        licences = manifest["licences"]
        assert "CC-BY-NC-4.0" not in licences
        # Per licence and per group, the figures add up to the mixture's own.
        assert sum(v["tokens_taken"] for v in licences.values()) == manifest["tokens_taken"]
        for figures in manifest["groups"].values():
            mine = figures["licences"].values()
            assert sum(v["tokens_taken"] for v in mine) == figures["tokens_taken"]
            assert sum(v["documents_taken"] for v in mine) == figures["documents_taken"]
            assert sum(v["validation_tokens"] for v in mine) == figures["validation_tokens"]
        assert stats["mix"]["mixtures"][name]["licences"] == {k: v["tokens_taken"] for k, v in licences.items()}
        # The training side's tokens per licence, from the plan and the pool's documents.
        plan = pl.read_parquet(folder / "plan.parquet").join(documents.select("id", "licence"), on="id")
        counted = plan.group_by("licence").agg((pl.col("tokens") * pl.col("repeats")).sum()).rows()
        assert {k: v for k, v in counted if v} == {
            k: v["tokens_taken"] for k, v in licences.items() if v["tokens_taken"]
        }
        check_card(folder)
        card = (folder / "README.md").read_bytes()
        meta = export_mixture(folder, tmp_path / "export" / name)  # nanoGPT's files carry the licences
        assert meta["licences"] == licences and (tmp_path / "export" / name / "README.md").read_bytes() == card
        (folder / "README.md").unlink()
        page = build_report(config.run_dir).read_text()  # `curate report` writes the card again, the same bytes
        assert "a licence matches CC-BY-NC-*" in page and "a licence matches none of CC-BY-*, CC0-1.0, unknown" in page
        assert '<span class="note">licence:</span> <span class="id">CC-BY-NC-4.0</span>' in page
        assert (folder / "README.md").read_bytes() == card

    # The card is made from the run's files alone: a config that no longer validates (its LID model
    # moved away since) still gives the sources, each step's config and the limitations.
    recorded = json.loads(layout.manifest.read_text())
    recorded["config"]["lang"]["model"] = str(tmp_path / "moved" / "lid.176.ftz")
    layout.manifest.write_text(json.dumps(recorded))
    assert RunFiles.open(config.run_dir).config is None
    write_cards(config.run_dir)
    card = (layout.root / "mix" / "natural" / "README.md").read_text()
    assert "# mixture natural of web, books" in card and "| web | jsonl |" in card
    assert card.count("Config:") == 3 and "Near-duplicates" not in card and "No deduplication ran." in card

    result = CliRunner().invoke(app, ["inspect", str(config.run_dir), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)["licences"]
    assert found["CC-BY-NC-4.0"] == {
        "read": 20, "removed_by_rule": 20, "curated": 0, "tokens": 0, "mixtures": {"natural": 0, "flat": 0},
    }  # fmt: skip
    assert found["CC0-1.0"]["tokens"] == tokens["CC0-1.0"]["tokens"]
    doc = json.loads(CliRunner().invoke(app, ["inspect", str(config.run_dir), "web/w1", "--json"]).output)
    assert doc["licence"] == "CC-BY-NC-4.0" and doc["removed_by"]["rule"] == "licence.excluded"
    printed = CliRunner().invoke(app, ["inspect", str(config.run_dir), "web/w1"]).output
    assert "licence: CC-BY-NC-4.0" in printed
    table = CliRunner().invoke(app, ["inspect", str(config.run_dir)]).output
    assert "CC-BY-NC-4.0" in table and "removed by rule" in table


def test_threads_reading_licences_at_once_read_what_one_thread_reads():
    """license_expression's parser is not thread-safe: threads that parse at once with a fresh
    Licensing got wrong answers (78 of 480 before the lock), which the caches then kept."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from pipeline import licence

    values = ["BSD-3-Clause AND MIT", "MIT", "Apache-2.0 OR MIT", "GPL-3.0-only AND CC-BY-4.0", "CC-BY-SA-4.0"] * 8
    expected = [licence.spdx(value) for value in values]
    for _ in range(10):
        licence._licensing.cache_clear()
        licence.spdx.cache_clear()
        start = threading.Barrier(4)

        def read(chunk: list[str], start: threading.Barrier = start) -> list[str | None]:
            start.wait()
            return [licence.spdx(value) for value in chunk]

        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(read, [values[i::4] for i in range(4)]))
        assert got == [expected[i::4] for i in range(4)]
