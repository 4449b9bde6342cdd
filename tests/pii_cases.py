"""A labelled set for PII scrubbing: per kind, texts holding one PII string, and look-alikes.

``POSITIVES[kind]`` holds ``(text, pii)`` pairs: ``text`` contains ``pii`` once, and scrubbing
must replace exactly it with the kind's placeholder. ``NEGATIVES[kind]`` holds texts with a
look-alike of that kind (or an address this project deliberately keeps: private, loopback,
link-local and documentation IP addresses, see :mod:`pipeline.filters.pii`) that no kind may
replace. :func:`score` gives precision and recall per kind; the tests assert on it and
``benchmarks/pii_scrub.py`` prints it.
"""

from __future__ import annotations

from collections.abc import Callable

POSITIVES: dict[str, list[tuple[str, str]]] = {
    "email": [
        ("Write to jane.doe+news@example.co.uk today.", "jane.doe+news@example.co.uk"),
        ("Contact: a_b@mail-server.org, or call us.", "a_b@mail-server.org"),
        ("Send it to john.smith@example.com.", "john.smith@example.com"),
        ("(first.last@sub.domain.example.org)", "first.last@sub.domain.example.org"),
        ("MAIL USER@EXAMPLE.COM NOW", "USER@EXAMPLE.COM"),
        ("Impressum: info@firma-beispiel.de", "info@firma-beispiel.de"),
        ("<support@my-shop.fr>", "support@my-shop.fr"),
        ("short x@y.io works", "x@y.io"),
        ("numeric 1234567890@example.com too", "1234567890@example.com"),
        ("Écrivez à josé@example.com pour plus d'informations.", "josé@example.com"),
        ("Kontakt: müller@beispiel.de", "müller@beispiel.de"),
        ("联系 李雷@example.cn 即可", "李雷@example.cn"),
        ("legacy email@[123.123.123.123] address", "email@[123.123.123.123]"),
        ("mailto:hr-team@example.com.au", "hr-team@example.com.au"),
        ("firstname_lastname@example.org wrote:", "firstname_lastname@example.org"),
        ("routed user%example.com@example.org here", "user%example.com@example.org"),
        ("see email@subdomain.example.com", "email@subdomain.example.com"),
        ("reply to email@example-one.com please", "email@example-one.com"),
        ("name: email@example.name", "email@example.name"),
        ("Japan office: email@example.co.jp.", "email@example.co.jp"),
        ("firstname-lastname@example.com is my address", "firstname-lastname@example.com"),
        ("Пишите на почта@пример.рф сегодня", "почта@пример.рф"),
        ("museum: contact@example.museum", "contact@example.museum"),
        ('From: "Ann" <ann.lee@university.edu>', "ann.lee@university.edu"),
        ("Questions? careers@startup.io!", "careers@startup.io"),
        ("cc:bob@example.net;", "bob@example.net"),
    ],
    "ip_address": [
        ("Ping 8.8.8.8 to test.", "8.8.8.8"),
        ("DNS 1.1.1.1 answered", "1.1.1.1"),
        ("example.com resolves to 93.184.216.34.", "93.184.216.34"),
        ("Google at 172.217.16.142 timed out", "172.217.16.142"),
        ("fastly 151.101.1.69,", "151.101.1.69"),
        ("host 104.16.132.229 is up", "104.16.132.229"),
        ("GitHub pages: 185.199.108.153", "185.199.108.153"),
        ("ssh to 140.82.112.3 failed", "140.82.112.3"),
        ("client 81.2.69.142 connected", "81.2.69.142"),
        ("from 2.125.160.216 at noon", "2.125.160.216"),
        ("blocked 216.58.214.14;", "216.58.214.14"),
        ("resolver 8.8.4.4:53 used", "8.8.4.4"),
        ("ban 31.13.71.36/32 now", "31.13.71.36"),
        ("(52.95.110.1)", "52.95.110.1"),
        ("Log: 203.0.114.9 - - [10/Oct/2023]", "203.0.114.9"),
        ("IP: 198.51.101.5", "198.51.101.5"),
        ("Cloudflare 2606:4700:4700::1111 answers", "2606:4700:4700::1111"),
        ("Google DNS 2001:4860:4860::8888.", "2001:4860:4860::8888"),
        ("peer 2a03:2880:f12f:83:face:b00c:0:25de closed", "2a03:2880:f12f:83:face:b00c:0:25de"),
        ("Quad9 2620:fe::fe works", "2620:fe::fe"),
        ("from 2a00:1450:4001:829::200e", "2a00:1450:4001:829::200e"),
        ("[2400:cb00:2048:1::c629:d7a2]:443 open", "2400:cb00:2048:1::c629:d7a2"),
        ("tunnel 2001:470::1 up", "2001:470::1"),
        ("full 2001:0470:0000:0000:0000:0000:0000:0001 form", "2001:0470:0000:0000:0000:0000:0000:0001"),
        ("HE: 2001:470:1:18::2,", "2001:470:1:18::2"),
    ],
    "phone_number": [
        ("Call +1 415-555-0132 now", "+1 415-555-0132"),
        ("Call (415) 555-0132 now", "(415) 555-0132"),
        ("Call 415.555.0132 now", "415.555.0132"),
        ("Tel: 415-555-0132.", "415-555-0132"),
        ("phone 415 555 0132 today", "415 555 0132"),
        ("toll-free 1-800-555-0199", "1-800-555-0199"),
        ("NYC +1 (212) 555-0198.", "+1 (212) 555-0198"),
        ("SMS +14155550132 only", "+14155550132"),
        ("UK +442079460958", "+442079460958"),
        ("London: +44 20 7946 0958.", "+44 20 7946 0958"),
        ("London +44 (0)20 7946 0958", "+44 (0)20 7946 0958"),
        ("Office 020 7946 0958", "020 7946 0958"),
        ("mobile 07700 900123", "07700 900123"),
        ("Manchester 0161 496 0000.", "0161 496 0000"),
        ("Paris : +33 1 23 45 67 89", "+33 1 23 45 67 89"),
        ("Appelez le 01 23 45 67 89 demain", "01 23 45 67 89"),
        ("portable 06.12.34.56.78", "06.12.34.56.78"),
        ("Berlin +49 30 12345678", "+49 30 12345678"),
        ("Telefon 030 12345678", "030 12345678"),
        ("Tel. (030) 12345678", "(030) 12345678"),
        ("München 089 1234567", "089 1234567"),
        ("Handy 0171-1234567", "0171-1234567"),
        ("Tokyo +81 3-1234-5678", "+81 3-1234-5678"),
        ("電話 03-1234-5678 まで", "03-1234-5678"),
        ("Sydney +61 2 9876 5432", "+61 2 9876 5432"),
        ("Sydney 02 9876 5432", "02 9876 5432"),
        ("India +91 98765 43210", "+91 98765 43210"),
        ("Madrid +34 912 345 678", "+34 912 345 678"),
        ("dotted +1.415.555.0132", "+1.415.555.0132"),
        ("Moscow +7 495 123-45-67", "+7 495 123-45-67"),
        ("Beijing +86 10 1234 5678", "+86 10 1234 5678"),
        ("São Paulo +55 11 91234-5678", "+55 11 91234-5678"),
    ],
}

NEGATIVES: dict[str, list[str]] = {
    "email": [
        '<img srcset="logo.png 1x, logo@2x.png 2x">',
        "icon@3x.jpg is the retina version",
        "avatar@2x.webp",
        "sprite@1.5x.svg loaded",
        "npm install lodash@4.17.21",
        "upgrade to react@18.2.0 first",
        "pin pkg@^1.0.0 in package.json",
        "follow @nasa for updates",
        "ssh name@localhost",
        "user at example dot com",
        "@media (max-width: 600px) { }",
        "use the @property decorator",
        "price 5@3.99 each",
        "x@y is not an address",
        "foo@bar.c is too short",
        "john@ wrote nothing",
        "domain only: @example.com",
        "meet me @ 5pm.",
        "a @ b.com with spaces",
        "email@example..com is invalid",
        "docker pull python@sha256:abc123",
        "vue@next is the tag",
        "Copyright @ 2023 Example Inc.",
        "@@ -1,4 +1,5 @@ diff hunk",
        "y = x@w.T in numpy",
    ],
    "ip_address": [
        "router at 192.168.1.1",
        "connect to 10.0.0.1 on the VPN",
        "docker 172.16.0.5 bridge",
        "localhost is 127.0.0.1",
        "listen on 0.0.0.0:8080",
        "link-local 169.254.1.1 assigned",
        "CGNAT 100.64.0.1 gateway",
        "netmask 255.255.255.0",
        "broadcast 255.255.255.255",
        "documentation address 192.0.2.1",
        "loopback ::1 works",
        "link-local fe80::1ff:fe23:4567:890a%eth0",
        "ULA fd12:3456:789a::1",
        "doc prefix 2001:db8::1",
        "Python 3.11.7 and numpy 2.1.0 are installed.",
        "Upgrade to version 10.0.0.1 or v1.2.3.4 first.",
        "The build number 1.2.3.4.5 is not an address.",
        "Octets over 255: 300.1.2.3 and 1.2.3.999.",
        "OID 1.3.6.1.2.1.1 in SNMP",
        "dated 2023.01.15 and 15.01.2023",
        "at 12:30:45 sharp",
        "MAC 00:1A:2B:3C:4D:5E",
        "std::vector<int> v;",
        "Base::dead::beef()",
        "timestamp 2023:01:15 12:00",
    ],
    "phone_number": [
        "Revenue 2019 2020 2021 grew.",
        "Card 4111 1111 1111 1111 declined",
        "Mastercard 5500-0000-0000-0004",
        "Born on 2023-01-15, moved on 12/05/2023 at 10:30.",
        "dated 15.01.2023",
        "Revenue rose to 100 000 000 dollars, or 1,234,567.89 in euros.",
        "Order 2024-0001-5678 shipped; ISBN 978-3-16-148410-0.",
        "ISBN 0-306-40615-2",
        "SSN 123-45-6789 is fake",
        "ZIP 94103-1234",
        "IBAN DE89 3704 0044 0532 0130 00",
        "see pages 123-145",
        "final score 3-2",
        "the 1999-2000 season",
        "open 10:30-11:45",
        "at 37.7749, -122.4194",
        "costs $1,299.99",
        "tracking 1Z 999 AA1 0123 4567 84",
        "ISO 9001:2015 certified",
        "scale 1:1000",
        "values 1000 2000 3000",
        "population 1 234 567 890",
        "UUID 123e4567-e89b-12d3-a456-426614174000",
        "Temperature -12.5 to +30.5 degrees",
        "3 + 4 = 7",
        "+1 vote",
        "from 2015 to 2020 1500 people",
        "account 0001 2345",
        "period 01/2023 1234",
    ],
}


def score(
    scrub: Callable[[str], tuple[str, dict[str, int]]], placeholders: dict[str, str]
) -> dict[str, dict[str, float]]:
    """Precision and recall per kind of ``scrub`` on the labelled set.

    A positive is found (true positive) when the output is the text with exactly its PII string
    replaced by its kind's placeholder; otherwise it is missed, and every replacement in it that
    is not that one counts as a false positive of its kind, as does every replacement in a
    negative.
    """
    kinds = list(POSITIVES)
    tp = dict.fromkeys(kinds, 0)
    fp = dict.fromkeys(kinds, 0)
    for kind, cases in POSITIVES.items():
        for text, pii in cases:
            out, counts = scrub(text)
            if out == text.replace(pii, placeholders[kind]) and counts.get(kind) == 1:
                tp[kind] += 1
                counts = {**counts, kind: 0}
            for other, n in counts.items():
                fp[other] += n
    for texts in NEGATIVES.values():
        for text in texts:
            for kind, n in scrub(text)[1].items():
                fp[kind] += n
    return {
        kind: {
            "precision": tp[kind] / (tp[kind] + fp[kind]) if tp[kind] + fp[kind] else 1.0,
            "recall": tp[kind] / len(POSITIVES[kind]),
            "positives": len(POSITIVES[kind]),
            "negatives": len(NEGATIVES[kind]),
            "false_positives": fp[kind],
        }
        for kind in kinds
    }
