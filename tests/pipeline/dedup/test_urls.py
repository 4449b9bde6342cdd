"""URL normalization for URL dedup (pipeline.dedup.urls): each rule on its own, the column
version, and the hash the stage routes by."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from pipeline.dedup.urls import TRACKING_PARAMETERS, normalize_url, normalize_urls, url_hashes


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("HTTP://EXAMPLE.com/a", "http://example.com/a"),  # scheme and host case
        ("https://example.com/a", "http://example.com/a"),  # http and https are one scheme
        ("http://example.com:80/a", "http://example.com/a"),  # default ports
        ("https://example.com:443/a", "http://example.com/a"),
        ("ftp://example.com:21/a", "ftp://example.com/a"),
        ("http://example.com/a#part-2", "http://example.com/a"),  # fragment
        ("http://example.com/a/", "http://example.com/a"),  # trailing slash
        ("http://example.com/", "http://example.com"),
        ("http://www.example.com/a", "http://example.com/a"),  # www.
        ("http://example.com./a", "http://example.com/a"),  # a host's trailing dot
        ("http://example.com/a?utm_source=x&utm_medium=y&id=3", "http://example.com/a?id=3"),  # tracking
        ("http://example.com/a?FBCLID=1&gclid=2&msclkid=3", "http://example.com/a"),
        ("http://example.com/a?b=2&a=1", "http://example.com/a?a=1&b=2"),  # parameter order
        ("http://example.com/%7euser/%e2%82%ac", "http://example.com/~user/%E2%82%AC"),  # percent-encoding
        ("http://example.com/caf\u00e9", "http://example.com/caf%C3%A9"),
        ("http://b\u00fccher.de/a", "http://xn--bcher-kva.de/a"),  # IDNA host
        ("http://example.com/x/../a/./", "http://example.com/a"),  # dot segments
        ("http://example.com/a?", "http://example.com/a"),  # an empty query
        ("  http://example.com/a \n", "http://example.com/a"),  # surrounding whitespace
    ],
)
def test_each_rule_makes_two_urls_one(a, b):
    assert normalize_url(a) == normalize_url(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://example.com/A", "http://example.com/a"),  # the path keeps its case
        ("http://example.com:8080/a", "http://example.com/a"),  # a port that is not the default
        ("http://example.com/a?id=1", "http://example.com/a?id=2"),  # other parameters and values stay
        ("http://example.com/a?utm=1", "http://example.com/a"),  # "utm" without the underscore is kept
        ("http://www2.example.com/a", "http://example.com/a"),  # only "www." itself goes
        ("http://example.com/a", "http://example.org/a"),
        ("ftp://example.com/a", "http://example.com/a"),  # ftp is not the web's scheme
    ],
)
def test_urls_that_stay_apart(a, b):
    assert normalize_url(a) != normalize_url(b)


def test_the_key_of_a_url():
    assert normalize_url("HTTPS://WWW.Example.COM:443/Path/?b=2&a=1&utm_source=news#top") == "example.com/Path?a=1&b=2"
    assert normalize_url("ftp://Host.org:21/f/") == "ftp://host.org/f"
    assert normalize_url("http://example.com:abc/x") == "http://example.com:abc/x"  # does not parse: as written
    assert normalize_url(None) is None and normalize_url("") is None and normalize_url("  ") is None
    assert {"gclid", "fbclid", "msclkid"} <= TRACKING_PARAMETERS


def test_a_column_and_its_hashes():
    urls = ["http://a.com/x/", "https://www.a.com/x#y", None, "", "http://b.com/x", "http://a.com/x?utm_id=1"]
    keys = normalize_urls(pa.array(urls))
    assert keys.to_list() == ["a.com/x", "a.com/x", None, None, "b.com/x", "a.com/x"]
    assert normalize_urls(pl.Series(urls)).to_list() == keys.to_list()
    hashes = url_hashes(urls)
    assert hashes.type == pa.uint64() and hashes.null_count == 2
    values = hashes.to_pylist()
    assert values[0] == values[1] == values[5] != values[4]
    # The hash of a key is fixed: the same in every run, process and index.
    assert url_hashes(["http://a.com/x"]).to_pylist() == [values[0]]
    assert len(set(url_hashes([f"http://a.com/{i}" for i in range(10_000)]).to_pylist())) == 10_000
    assert url_hashes([]).to_numpy(zero_copy_only=False).dtype == np.uint64
