"""PII: what must be replaced, and what must be left alone."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.filters.pii import PIIScrubber, scrub


@pytest.mark.parametrize("text, expected", [
    ("Write to jane.doe+news@example.co.uk today.", "Write to <EMAIL> today."),
    ("Contact: a_b@mail-server.org, or b@c.io.", "Contact: <EMAIL>, or <EMAIL>."),
    ("Server at 192.168.0.12 answered.", "Server at <IP_ADDRESS> answered."),
    ("Ping 8.8.8.8 and 10.0.0.1.", "Ping <IP_ADDRESS> and <IP_ADDRESS>."),
    ("Call +1 415-555-0132 now", "Call <PHONE_NUMBER> now"),
    ("Call (415) 555-0132 now", "Call <PHONE_NUMBER> now"),
    ("Call 415.555.0132 now", "Call <PHONE_NUMBER> now"),
    ("London: +44 20 7946 0958.", "London: <PHONE_NUMBER>."),
])
def test_pii_is_replaced_by_typed_placeholders(text, expected):
    assert scrub(text)[0] == expected


@pytest.mark.parametrize("text", [
    "Python 3.11.7 and numpy 2.1.0 are installed.",
    "Upgrade to version 10.0.0.1 or v1.2.3.4 first.",
    "The build number 1.2.3.4.5 is not an address.",
    "Octets over 255: 300.1.2.3 and 1.2.3.999.",
    "Born on 2023-01-15, moved on 12/05/2023 at 10:30.",
    "Revenue rose to 100 000 000 dollars, or 1,234,567.89 in euros.",
    "Order 2024-0001-5678 shipped; ISBN 978-3-16-148410-0.",
    "user at example dot com, @handle, name@localhost",
])
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
