"""Checks of report.html shared by the render tests and the browser tests (tests/programs/test_report_view*.py,
tests/real_lm/test_view.py): the page parsed with the standard library's HTML parser, and the page opened
in Debian's chromium through Playwright (its own browser downloads are never used)."""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = os.environ.get("DEEPRESEARCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SIZES = {"phone": (390, 844), "wide": (1440, 900)}
NUMBER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")

# A corpus whose every field carries markup or script: none of it may run or become markup in the view.
PAYLOAD_QUESTION = "Does coffee <b>consumption</b> lower heart disease risk? <script>window.__pwned='question'</script>"
PAYLOADS = [
    {
        "id": "p1",
        "title": "Coffee and heart disease <script>window.__pwned='title';document.title='PWNED'</script>",
        "text": "Coffee consumption lowers heart disease risk in adults <img src=x onerror=\"window.__pwned='text';"
        "document.title='PWNED'\">. Heart disease risk fell with coffee consumption in a cohort "
        "[click](javascript:window.__pwned='link') of adults.",
        "authors": ["<svg onload=\"window.__pwned='author'\">", "Ann <i>Lee</i>"],
        "venue": "<iframe src=\"javascript:window.__pwned='venue'\"></iframe>",
        "url": "javascript:window.__pwned='url'",
        "year": 2020,
    },
    {
        "id": "p2",
        "title": "<a href=\"javascript:window.__pwned='title2'\">Coffee</a> drinking and heart disease",
        "text": "In coffee drinkers, heart disease risk was lower <script>window.__pwned='text2'</script>. "
        "Coffee consumption and heart disease risk: **<b onmouseover=\"window.__pwned='bold'\">bold</b>**.",
        "doi": "10.1234/x\"><script>window.__pwned='doi'</script>",
        "year": 2021,
    },
    {"id": "p3", "title": "Tea and sleep", "text": "Tea does not change sleep.", "year": 2019},
]


def write_payload_corpus(path: Path) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in PAYLOADS), encoding="utf-8")
    return path


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: list[str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


class Page(HTMLParser):
    """report.html parsed: every element with its attributes and its text (its descendants' text included)."""

    VOID = {"meta", "link", "br", "hr", "img", "input", "source", "wbr", "area", "base", "col", "embed"}

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.scripts: list[str] = []
        self._open: list[Element] = []
        self.feed(html)
        self.close()
        self.by_id = {e.attrs["id"]: e for e in self.elements if e.attrs.get("id")}

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        for element in self._open:
            element.text.append(data)
        if self._open and self._open[-1].tag == "script":
            self.scripts.append(data)

    def text_of(self, element: Element) -> str:
        return "".join(element.text)

    def find(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        return [e for e in self.elements if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)]


def check_page(html: str, report: dict) -> Page:
    """What every report.html holds, from the page alone: each citation of the report (and answer) is a link
    resolving to a reference card and a recorded passage; the page is one script and no markup from data.

    Args:
        html: The page.
        report: The run's report as trace.json holds it (`markdown`, `answer`, `references`, `passages`).
    """
    page = Page(html)
    assert html.lstrip().lower().startswith("<!doctype html>")
    ids = [e.attrs["id"] for e in page.elements if e.attrs.get("id")]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert len(page.find("script")) == 1 and not any(e.attrs.get("src") for e in page.find("script"))
    assert not page.find("img") and not page.find("iframe") and not page.find("svg") and not page.find("link")
    for e in page.elements:  # no event handler attribute, and no link other than http(s), doi.org or in-page
        assert not any(k.startswith("on") for k in e.attrs), e
        href = e.attrs.get("href")
        if href is not None:
            assert href.startswith(("#", "https://", "http://")), href
    csp = [e for e in page.find("meta") if e.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0].attrs["content"]

    body = report["markdown"].split("## References")[0]
    wanted = [
        int(n)
        for text in (report.get("answer") or "", body)
        for m in NUMBER.finditer(text)
        for n in re.split(r"\s*,\s*", m.group(1))
    ]
    cites = page.find("a", "dr-cite")
    assert [int(c.attrs["data-number"]) for c in cites] == wanted
    numbers = {r["number"] for r in report["references"]}
    for c in cites:
        ref = page.by_id[c.attrs["href"][1:]]
        assert "dr-ref" in ref.classes and int(c.attrs["data-number"]) in numbers
        assert page.text_of(ref).strip().startswith(f"[{c.attrs['data-number']}]")
        passage = page.by_id[c.attrs["data-src"]]
        assert "dr-passage" in passage.classes and page.text_of(passage).strip()
        assert "dr-missing" not in passage.classes  # the run recorded the passage's text
        spans = [
            e
            for e in page.elements
            if e.tag == "span" and "data-i" in e.attrs and any(e is x for x in _descendants(page, passage))
        ]
        assert -1 <= int(c.attrs["data-mark"]) < len(spans)
    assert len(page.find("li", "dr-ref")) == len(report["references"])
    return page


def _descendants(page: Page, element: Element) -> list[Element]:
    """Elements after `element` whose text lies inside its text (the parser keeps no tree: spans follow it)."""
    start = page.elements.index(element)
    out = []
    for e in page.elements[start + 1 :]:
        if e.tag == "p" or e.tag == "details" or (e.tag == "li" and "dr-ref" in e.classes):
            break
        out.append(e)
    return out


@contextmanager
def chromium():
    """Debian's chromium under Playwright; fails (never skips) with what to install when it is missing."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(
            f"no chromium at {CHROMIUM}: run `make browser` (apt-get install chromium) or set DEEPRESEARCH_CHROMIUM"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Opened:
    page: object
    errors: list[str]
    requests: list[str]


def open_report(browser, path: Path, size: str) -> Opened:
    """Opens report.html at a viewport size; records console errors and fails every non-file: request."""
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    errors: list[str] = []
    requests: list[str] = []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            requests.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else requests.append(r.url))
    page.goto(Path(path).resolve().as_uri())
    page.wait_for_load_state("load")
    return Opened(page, errors, requests)


def exercise(browser, path: Path, shots: Path) -> None:
    """The browser checks every report.html passes, at a phone's width and a wide screen's.

    Hovering and focusing a citation shows its passage (the marked sentence is the passage's own text) and
    the sentence's verdict; j/k move between citations; Enter opens the reference card; a tree node expands;
    no console error and no request leaves the file. A screenshot of each width lands in `shots`.
    """
    shots.mkdir(parents=True, exist_ok=True)
    for size in SIZES:
        opened = open_report(browser, path, size)
        page = opened.page
        cites = page.locator("a.dr-cite")
        count = cites.count()
        if count:
            first = (
                page.locator(".dr-report a.dr-cite").first
                if page.locator(".dr-report a.dr-cite").count()
                else cites.first
            )
            first.hover()
            pane = page.locator(".dr-pane")
            assert pane.is_visible()
            number = first.get_attribute("data-number")
            assert page.locator(".dr-pane-title").inner_text().startswith(f"[{number}]")
            passage = page.locator(".dr-pane .dr-pane-passage")
            source = page.locator(f"#{first.get_attribute('data-src')}")
            assert passage.inner_text().strip() == source.text_content().strip()  # the cited passage, whole
            mark = int(first.get_attribute("data-mark"))
            if mark >= 0:
                marked = page.locator(".dr-pane .dr-mark")
                assert marked.count() == 1 and marked.inner_text().strip() in passage.inner_text()
            verdict = first.evaluate(
                "a => (a.closest('.dr-s') || {}).getAttribute ? a.closest('.dr-s').getAttribute('data-verdict') : null"
            )
            line = page.locator(".dr-pane .dr-verdict").text_content()  # (inner_text is upper-cased by the CSS)
            assert (verdict in line) if verdict else line.startswith("No verdict")
            page.screenshot(path=str(shots / f"{size}-citation.png"))

            # the keyboard: j to the first citation, j to the next, k back; the pane follows the focus
            page.locator("h1").click()
            page.keyboard.press("j")
            assert page.evaluate("document.activeElement.classList.contains('dr-cite')")
            first_id = page.evaluate("document.activeElement.id")
            ids = [cites.nth(i).get_attribute("id") for i in range(count)]
            at = ids.index(first_id)  # the citation after the one last shown
            assert at == (ids.index(first.get_attribute("id")) + 1) % count
            if count > 1:
                page.keyboard.press("j")
                second = cites.nth((at + 1) % count)
                assert page.evaluate("document.activeElement.id") == second.get_attribute("id")
                assert (
                    page.locator(".dr-pane-title").inner_text().startswith(f"[{second.get_attribute('data-number')}]")
                )
                page.keyboard.press("k")
            assert page.evaluate("document.activeElement.id") == first_id
            page.keyboard.press("Tab")  # Tab leaves for the next link: focus shows a citation's passage too
            page.keyboard.press("Shift+Tab")
            assert page.evaluate("document.activeElement.id") == first_id
            ref_id = cites.nth(at).get_attribute("href")[1:]
            page.keyboard.press("Enter")
            assert page.evaluate("document.activeElement.id") == ref_id
            assert "dr-target" in (page.locator(f"#{ref_id}").get_attribute("class") or "")
            page.keyboard.press("Escape")
            if size == "phone":
                assert not page.locator(".dr-pane").is_visible()

        nodes = page.locator("details.dr-node")
        if nodes.count():
            node = nodes.first
            assert node.get_attribute("open") is None
            node.locator("summary").first.click()
            assert node.get_attribute("open") is not None
            assert node.locator(".dr-node-body").first.is_visible()
            assert "Goal" in node.locator(".dr-node-body").first.inner_text()
            node.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / f"{size}-tree.png"))
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(shots / f"{size}-top.png"), full_page=True)
        assert opened.errors == [], opened.errors
        assert opened.requests == [], opened.requests
        page.context.close()
