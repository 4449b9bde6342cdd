"""Web sites: made-up sites with the page chrome every page of a site repeats (navigation, cookie
banner, sidebar, footer), and boilerplate pages (listings, tag archives, 404, login, cookie walls,
sitemaps, licences)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import numpy as np

SITE_FIRST = (
    "Daily",
    "Morning",
    "Metro",
    "Harbor",
    "Pioneer",
    "Summit",
    "Northern",
    "Global",
    "Pixel",
    "Open",
    "Urban",
    "River",
    "Bright",
    "Civic",
    "Silver",
    "Quantum",
)
SITE_SECOND = (
    "Herald",
    "Post",
    "Digest",
    "Ledger",
    "Wire",
    "Review",
    "Journal",
    "Gazette",
    "Tribune",
    "Insider",
    "Times",
    "Report",
    "Hub",
    "Forum",
    "Chronicle",
    "Bulletin",
)
SITE_TLDS = (".com", ".net", ".org", ".co.uk", ".info", ".news")
NAV_ITEMS = (
    "News",
    "Sport",
    "Business",
    "Tech",
    "Culture",
    "Opinion",
    "Travel",
    "Video",
    "Weather",
    "Science",
    "Health",
    "Money",
    "Lifestyle",
    "Podcasts",
    "Shop",
    "Forum",
)
COOKIE_BANNERS = (
    "We use cookies to give you the best experience on our website. By continuing to browse "
    "you agree to our use of cookies.",
    "This site uses cookies and similar technologies to personalise content and ads and to "
    "analyse our traffic. You can change your preferences at any time.",
    "We and our partners store and access information on your device, such as cookies, for "
    "personalised ads and content, ad and content measurement and audience insights.",
)
FOOTER_LINKS = (
    "About us",
    "Contact",
    "Privacy Policy",
    "Terms of Use",
    "Cookie settings",
    "Advertise",
    "Careers",
    "Sitemap",
    "Accessibility",
    "Help",
)
SHARE_LINKS = (
    '<ul class="share"><li><a href="#share">Share</a></li><li><a href="#facebook">'
    'Facebook</a></li><li><a href="#x">X</a></li><li><a href="#email">Email</a></li>'
    "</ul>\n"
)
BOILERPLATE_VARIANTS = ("listing", "tag_archive", "not_found", "login", "cookie_wall", "sitemap", "licence")
LICENCE_LINES = (
    "Content licence",
    "Unless stated otherwise, the text on this site may be shared and adapted for any purpose, "
    "provided that the author is credited, a link to the licence is given and changes are "
    "indicated.",
    "Images, logos and embedded media are excluded and remain the property of their owners.",
    "Third-party content is used with permission; ask its owner before reusing it.",
    "The site is provided as is, without warranty of any kind; we accept no liability for loss arising from its use.",
    "Questions about reuse? Write to the editors via the contact page.",
)
TAGS = ("economy", "elections", "football", "gadgets", "music", "film", "markets", "climate")


def slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "page"


def e(text: str) -> str:
    return html.escape(text, quote=False)


@dataclass(frozen=True)
class Site:
    """A made-up web site: its name and the chrome every page of it repeats."""

    name: str
    domain: str
    nav: tuple[str, ...]
    cookie: str
    sidebar: tuple[str, ...]  # titles of "most read" links
    year: int

    @property
    def nav_line(self) -> str:
        return " | ".join(("Home",) + self.nav)

    @property
    def footer_line(self) -> str:
        return f"\u00a9 {self.year} {self.name}. All rights reserved."

    def chrome_html(self) -> tuple[str, str, str]:
        """(top: cookie banner and header, sidebar, footer) as HTML."""
        nav = "".join(f'<li><a href="/{slug(item)}/">{e(item)}</a></li>' for item in self.nav)
        top = (
            f'<div class="cookie-banner" id="cookie-consent"><p>{e(self.cookie)}</p>'
            "<button>Accept all</button><button>Manage preferences</button></div>\n"
            f'<header><a class="logo" href="/">{e(self.name)}</a><nav><ul>'
            f'<li><a href="/">Home</a></li>{nav}</ul></nav>'
            '<form class="search" action="/search"><input name="q" placeholder="Search">'
            "</form></header>\n"
        )
        links = "".join(f'<li><a href="/story/{slug(t)}">{e(t)}</a></li>' for t in self.sidebar)
        sidebar = f'<aside class="sidebar"><h3>Most read</h3><ol>{links}</ol></aside>\n'
        footer_links = "".join(f'<li><a href="/{slug(t)}">{e(t)}</a></li>' for t in FOOTER_LINKS)
        footer = (
            f'<footer><ul class="footer-links">{footer_links}</ul>'
            '<p class="social">Follow us: Facebook | X | Instagram | YouTube</p>'
            f"<p>{e(self.footer_line)}</p></footer>\n"
        )
        return top, sidebar, footer


def make_sites(count: int, titles: list[str], rng: np.random.Generator) -> list[Site]:
    """``count`` sites with distinct domains; sidebars link to real article titles."""
    sites, domains = [], set()
    while len(sites) < count:
        first = SITE_FIRST[int(rng.integers(len(SITE_FIRST)))]
        second = SITE_SECOND[int(rng.integers(len(SITE_SECOND)))]
        domain = (first + second).lower() + SITE_TLDS[int(rng.integers(len(SITE_TLDS)))]
        if domain in domains:
            continue
        domains.add(domain)
        nav = tuple(NAV_ITEMS[i] for i in sorted(rng.choice(len(NAV_ITEMS), 6, replace=False)))
        sidebar = tuple(titles[i] for i in rng.choice(len(titles), 6, replace=False))
        sites.append(
            Site(
                f"{first} {second}",
                domain,
                nav,
                COOKIE_BANNERS[int(rng.integers(len(COOKIE_BANNERS)))],
                sidebar,
                int(rng.integers(2019, 2025)),
            )
        )
    return sites


def boilerplate_body(variant: str, titles: list[str], rng: np.random.Generator) -> list[tuple[str, str]]:
    """The main content of a page without content of its own, as (tag, text) pairs."""

    def links(low: int, high: int) -> list[tuple[str, str]]:
        picks = rng.choice(len(titles), size=int(rng.integers(low, high)), replace=False)
        return [("li", titles[i]) for i in picks.tolist()]

    if variant == "listing":
        page = int(rng.integers(2, 40))
        return (
            [("h2", f"Latest stories - page {page}")]
            + links(10, 25)
            + [("p", f"\u00ab Previous {page - 1} {page} {page + 1} Next \u00bb")]
        )
    if variant == "tag_archive":
        tag = TAGS[int(rng.integers(len(TAGS)))]
        return [("h2", f"Posts tagged \u201c{tag}\u201d")] + links(5, 15) + [("p", "Older posts \u00bb")]
    if variant == "not_found":
        return [
            ("h2", "404 - Page not found"),
            ("p", "Sorry, the page you are looking for does not exist or has been moved."),
            ("p", "Try searching the site or go back to the homepage."),
        ] + links(3, 6)
    if variant == "login":
        return [
            ("h2", "Sign in to your account"),
            ("p", "Email address"),
            ("p", "Password"),
            ("p", "Remember me | Forgot your password?"),
            ("p", "Don't have an account? Register now - it's free."),
            ("p", "Subscribe to our newsletter for the latest updates."),
        ]
    if variant == "licence":
        return [("h2", LICENCE_LINES[0])] + [("p", line) for line in LICENCE_LINES[1:]]
    if variant == "cookie_wall":
        return [
            ("h2", "Your privacy choices"),
            ("p", COOKIE_BANNERS[int(rng.integers(len(COOKIE_BANNERS)))]),
            ("p", "Strictly necessary cookies | Performance cookies | Targeting cookies"),
            ("p", "Accept all | Reject all | Save my preferences"),
        ]
    sections = [NAV_ITEMS[i] for i in sorted(rng.choice(len(NAV_ITEMS), 8, replace=False))]
    return [("h2", "Sitemap")] + [
        ("li", f"{s} \u203a {t}") for s in sections for t in ("Latest", "Archive", "Most popular")
    ]


def boilerplate_plain(site: Site, body: list[tuple[str, str]]) -> str:
    """A boilerplate page as a naive scraper would flatten it."""
    lines = [site.nav_line, site.cookie + " Accept all | Manage preferences"]
    lines += [("- " + text) if tag == "li" else text for tag, text in body]
    lines += [
        "Subscribe to our newsletter",
        "Follow us: Facebook | X | Instagram | YouTube",
        " | ".join(FOOTER_LINKS),
        site.footer_line,
    ]
    return "\n".join(lines)
