"""PII: what must be replaced, and what must be left alone."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.filters.pii import PLACEHOLDERS, PIIScrubber, scrub
from tests.pii_cases import NEGATIVES, POSITIVES, score


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Write to jane.doe+news@example.co.uk today.", "Write to <EMAIL> today."),
        ("Contact: a_b@mail-server.org, or b@c.io.", "Contact: <EMAIL>, or <EMAIL>."),
        ("Server at 93.184.216.34 answered.", "Server at <IP_ADDRESS> answered."),
        ("Ping 8.8.8.8 and 10.0.0.1.", "Ping <IP_ADDRESS> and 10.0.0.1."),
        ("Call +1 415-555-0132 now", "Call <PHONE_NUMBER> now"),
        ("Call (415) 555-0132 now", "Call <PHONE_NUMBER> now"),
        ("Call 415.555.0132 now", "Call <PHONE_NUMBER> now"),
        ("London: +44 20 7946 0958.", "London: <PHONE_NUMBER>."),
        # were missed
        ("IPv6 2606:4700:4700::1111 and [2001:4860:4860::8888]:53", "IPv6 <IP_ADDRESS> and [<IP_ADDRESS>]:53"),
        ("SMS +14155550132 now", "SMS <PHONE_NUMBER> now"),
        ("Appelez le 01 23 45 67 89.", "Appelez le <PHONE_NUMBER>."),
        ("Telefon 030 12345678", "Telefon <PHONE_NUMBER>"),
        ("Écrivez à josé@example.com.", "Écrivez à <EMAIL>."),
        ("old style email@[123.123.123.123] here", "old style <EMAIL> here"),
    ],
)
def test_pii_is_replaced_by_typed_placeholders(text, expected):
    assert scrub(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "Python 3.11.7 and numpy 2.1.0 are installed.",
        "Upgrade to version 10.0.0.1 or v1.2.3.4 first.",
        "The build number 1.2.3.4.5 is not an address.",
        "Octets over 255: 300.1.2.3 and 1.2.3.999.",
        "Born on 2023-01-15, moved on 12/05/2023 at 10:30.",
        "Revenue rose to 100 000 000 dollars, or 1,234,567.89 in euros.",
        "Order 2024-0001-5678 shipped; ISBN 978-3-16-148410-0.",
        "user at example dot com, @handle, name@localhost",
        # were taken for PII
        "Revenue 2019 2020 2021 grew.",
        "Card 4111 1111 1111 1111 declined.",
        '<img srcset="logo.png 1x, logo@2x.png 2x">',
    ],
)
def test_things_that_look_like_pii_are_left_alone(text):
    assert scrub(text) == (text, {"email": 0, "ip_address": 0, "phone_number": 0})


def test_scrubber_counts_per_document_and_leaves_clean_documents_unchanged():
    docs = pl.DataFrame({"id": ["a", "b", "c"], "text": ["mail x@y.com or z@y.com", "no pii here", "ip 1.1.1.1"]})
    out = PIIScrubber().apply(docs)
    assert out.text.to_list() == ["mail <EMAIL> or <EMAIL>", "no pii here", "ip <IP_ADDRESS>"]
    assert out.counts["pii.email"].to_list() == [2, 0, 0]
    assert out.counts["pii.ip_address"].to_list() == [0, 0, 1]
    assert out.columns["pii_replacements"].to_list() == [2, 0, 1]
    assert PIIScrubber().rules() == []


def test_private_loopback_and_documentation_addresses_are_kept():
    """Public addresses only, as FineWeb: private, loopback, link-local, shared, reserved and
    documentation addresses identify no one and are common in technical text."""
    kept = [
        "192.168.1.1",
        "10.0.0.1",
        "172.16.0.5",
        "127.0.0.1",
        "0.0.0.0",
        "169.254.1.1",
        "100.64.0.1",
        "255.255.255.0",
        "192.0.2.1",
        "::1",
        "fe80::1",
        "fd12:3456:789a::1",
        "2001:db8::1",
    ]
    for address in kept:
        assert scrub(f"host {address} up")[1]["ip_address"] == 0, address
    assert scrub("host 8.8.8.8 and 2620:fe::fe up") == (
        "host <IP_ADDRESS> and <IP_ADDRESS> up",
        {"email": 0, "ip_address": 2, "phone_number": 0},
    )


def test_labelled_set_is_balanced():
    for kind in POSITIVES:
        assert len(POSITIVES[kind]) >= 25 and len(NEGATIVES[kind]) >= 25, kind
        assert all(text.count(pii) == 1 for text, pii in POSITIVES[kind])


@pytest.mark.parametrize("kind", list(POSITIVES))
def test_precision_and_recall_per_kind_on_the_labelled_set(kind):
    measured = score(scrub, PLACEHOLDERS)[kind]
    assert measured["precision"] >= 0.95, measured
    assert measured["recall"] >= 0.95, measured


def test_scrubber_matches_scrub_on_every_labelled_text():
    texts = [t for cases in POSITIVES.values() for t, _ in cases] + [t for ts in NEGATIVES.values() for t in ts]
    out = PIIScrubber().apply(pl.DataFrame({"id": [str(i) for i in range(len(texts))], "text": texts}))
    assert out.text.to_list() == [scrub(t)[0] for t in texts]
    for kind in POSITIVES:
        assert out.counts[f"pii.{kind}"].to_list() == [scrub(t)[1][kind] for t in texts]
