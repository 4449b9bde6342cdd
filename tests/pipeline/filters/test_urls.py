"""URL blocklists (pipeline.filters.urls): a domain entry matches its host and every host under
it, a URL entry that URL and those below it, substrings anywhere; UT1's folder layout; the list
and entry each removed document matched; a document without a URL passes; a wrong list path is
one line naming it."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.api import filter_documents
from pipeline.filters.urls import RULE_DOMAIN, RULE_SUBSTRING, RULE_URL, URLBlocklist
from pipeline.formats.configfile import ConfigError
from tests.helpers import source_config


def write_list(path, entries: list[str]):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(entries) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def blacklists(tmp_path):
    """UT1's layout: a folder per category with its domains and urls files."""
    root = tmp_path / "blacklists"
    write_list(root / "adult" / "domains", ["# UT1 comment", "example.com", "*.wild.org", "WWW.Site.NET", ""])
    urls = ["good.com/bad/page", "http://www.other.com/x?y=1", "trail.com/dir/", "ported.com:8080/admin"]
    write_list(root / "adult" / "urls", urls)
    write_list(root / "gambling" / "domains", ["casino.biz", "example.com"])
    return root


def docs(urls: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {"id": [f"d{i}" for i in range(len(urls))], "text": ["a text"] * len(urls), "url": urls},
        schema_overrides={"url": pl.String},
    )


def notes(flt: URLBlocklist, urls: list[str | None]) -> list[str | None]:
    return flt.apply(docs(urls)).notes["match"].to_list()


def test_a_domain_matches_its_host_and_every_host_under_it(blacklists):
    flt = URLBlocklist(domains=blacklists)
    urls = [
        "https://Example.com:8080/a",  # case and port
        "http://www.a.b.example.com./",  # www., subdomains and a trailing dot
        "https://badexample.com/",  # not under example.com
        "https://example.com.evil.net/",  # not under it either
        "http://x.wild.org/p",  # a *. entry
        "https://wild.org",
        "http://site.net/",  # the entry's www. is the same site
        "https://user:pw@casino.biz/",
        "https://notcasino.biz/",
    ]
    assert notes(flt, urls) == [
        "adult/domains: example.com",  # the first list that holds it (adult before gambling)
        "adult/domains: example.com",
        None,
        None,
        "adult/domains: wild.org",
        "adult/domains: wild.org",
        "adult/domains: site.net",
        "gambling/domains: casino.biz",
        None,
    ]
    assert flt.apply(docs(urls)).measures["blocked_domain"].to_list() == [1, 1, 0, 0, 1, 1, 1, 1, 0]


def test_a_url_entry_matches_that_url_and_those_below_it(blacklists):
    flt = URLBlocklist(urls=blacklists / "adult")
    urls = {
        "https://good.com/bad/page": True,
        "http://www.GOOD.com/bad/page/more?q=1#top": True,
        "https://good.com/bad/page?x=1": True,
        "https://good.com/bad/page/": True,
        "https://good.com/bad/pages": False,  # a longer name, not a path below
        "https://good.com/bad": False,  # above the entry
        "https://sub.good.com/bad/page": False,  # a URL entry is one host
        "http://other.com/x?y=1": True,  # an entry with a query needs it
        "http://other.com/x?y=2": False,
        "http://other.com/x": False,
        "https://trail.com/dir/file": True,  # an entry's trailing / dropped
        "http://ported.com/admin/users": True,  # an entry's port dropped (no scheme: no "//")
    }
    found = notes(flt, list(urls))
    assert [f is not None for f in found] == list(urls.values())
    assert found[0] == "adult/urls: good.com/bad/page" and found[7] == "adult/urls: other.com/x?y=1"


def test_substrings_anywhere_in_any_case_and_rules_in_order(blacklists):
    flt = URLBlocklist(domains=blacklists, urls=blacklists, substrings=["Porn", "casino"])
    assert [r.name for r in flt.rules()] == [RULE_DOMAIN, RULE_URL, RULE_SUBSTRING]
    output = flt.apply(docs(["https://PORNhub.example.org/", "https://site.org/casino-games", "https://casino.biz/"]))
    assert output.notes["match"].to_list() == [
        "substrings: porn",
        "substrings: casino",
        "gambling/domains: casino.biz",  # a domain rule comes first
    ]
    assert output.measures["banned_substring"].to_list() == [1, 1, 1]


def test_a_document_without_a_url_passes(blacklists):
    flt = URLBlocklist(domains=blacklists, substrings=["a"])
    output = flt.apply(docs([None, "", "https://example.com/"]))
    assert output.measures.rows() == [(None, None), (None, None), (1.0, 1.0)]
    no_column = flt.apply(docs(["x"]).drop("url"))
    assert no_column.measures.rows() == [(None, None)] and no_column.notes["match"].to_list() == [None]


def test_filter_documents_removes_and_names_the_list_and_entry(blacklists, tmp_path):
    hosts = write_list(tmp_path / "lists" / "hosts.txt", ["spam.net"])
    frame = docs(["https://ok.org/", "https://www.example.com/a", "https://spam.net/", None, "http://x.org/porn"])
    settings = {"domains": [str(blacklists), str(hosts)], "substrings": ["porn"]}
    kept, removed = filter_documents(frame, {"filters": ["url_blocklist"], "params": {"url_blocklist": settings}})
    assert kept["id"].to_list() == ["d0", "d3"]
    assert removed.select("id", "rule", "value", "match").rows() == [
        ("d1", RULE_DOMAIN, 1.0, "adult/domains: example.com"),
        ("d2", RULE_DOMAIN, 1.0, "lists/hosts.txt: spam.net"),  # a file of its own: named by its folder and name
        ("d4", RULE_SUBSTRING, 1.0, "substrings: porn"),
    ]


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"domains": "missing"}, "domains: '<dir>/missing' is neither a file nor a folder"),
        ({"urls": ["blacklists/adult", "empty"]}, "urls: the folder '<dir>/empty' has no file named 'urls'"),
        ({}, "url_blocklist has no list: give domains, urls or substrings"),
    ],
)
def test_a_bad_url_list_is_one_config_error_naming_it(tmp_path, blacklists, params, said):
    (tmp_path / "empty").mkdir()
    write_list(tmp_path / "in.jsonl", ['{"text": "a text"}'])
    params = {
        k: [str(tmp_path / p) for p in v] if isinstance(v, list) else str(tmp_path / v) for k, v in params.items()
    }
    with pytest.raises(ConfigError) as error:
        source_config(
            tmp_path,
            [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in.jsonl")]}],
            lang={"enabled": False},
            filter={"filters": ["url_blocklist"], "params": {"url_blocklist": params}},
        )
    message = str(error.value)
    assert "\n" not in message and message.startswith("filter.params.url_blocklist: ")
    assert said.replace("<dir>", str(tmp_path)) in message


def test_url_lists_expand_home_and_every_file_is_in_the_stage_identity(tmp_path, blacklists, monkeypatch):
    from pipeline.stages.digests import named_files

    monkeypatch.setenv("HOME", str(tmp_path))
    write_list(tmp_path / "in.jsonl", ['{"text": "a text"}'])
    config = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in.jsonl")]}],
        lang={"enabled": False},
        filter={"filters": ["url_blocklist"], "params": {"url_blocklist": {"domains": ["~/blacklists"]}}},
    )
    assert config.filter.params["url_blocklist"]["domains"] == [str(blacklists)]
    assert named_files("filter", config) == {
        "filter.params.url_blocklist.domains": sorted(p for p in blacklists.rglob("*") if p.is_file())
    }
