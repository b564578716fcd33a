"""report.html in a real browser (Debian's chromium, driven by Playwright): an offline run over SciFact and a run
over a corpus of script payloads. No console error and no request leaves the file; a citation hovered or focused
shows its passage and verdict; j/k move between citations; a tree node expands; nothing in the payloads runs.
Screenshots at a phone's width and a wide screen's land in each test's tmp_path."""

from __future__ import annotations

from deepresearch import cli
from tests.view_checks import PAYLOAD_QUESTION, chromium, exercise, open_report, write_payload_corpus

QUESTION = "Does obesity increase the risk of type 2 diabetes?"


# Playwright's sync API runs an event loop in the test's thread, so each run is made before the browser starts.


def test_an_offline_run_in_chromium(tmp_path, data_dir):
    out = tmp_path / "run"
    assert (
        cli.main(
            [
                "-q",
                "run",
                QUESTION,
                "--corpus",
                "scifact",
                "--depth",
                "2",
                "--breadth",
                "2",
                "--answer",
                "--taxonomy",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    with chromium() as browser:
        exercise(browser, out / "report.html", tmp_path / "screenshots")


def test_nothing_in_a_payload_corpus_runs(tmp_path):
    corpus = write_payload_corpus(tmp_path / "corpus.jsonl")
    out = tmp_path / "run"
    assert (
        cli.main(
            [
                "-q",
                "run",
                PAYLOAD_QUESTION,
                "--corpus",
                str(corpus),
                "--depth",
                "1",
                "--breadth",
                "1",
                "--answer",
                "--taxonomy",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    with chromium() as browser:
        exercise(browser, out / "report.html", tmp_path / "screenshots")
        check_payloads_stay_text(browser, out, tmp_path)


def check_payloads_stay_text(browser, out, tmp_path):
    opened = open_report(browser, out / "report.html", "wide")
    page = opened.page
    for i in range(page.locator("a.dr-cite").count()):  # every citation's passage shown, every card opened
        page.locator("a.dr-cite").nth(i).hover()
        page.locator("a.dr-cite").nth(i).focus()
    for box in page.locator("details").all():
        box.evaluate("d => { d.open = true; }")
    page.locator(".dr-ref-meta").first.hover()
    page.wait_for_timeout(200)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert "PWNED" not in page.title()
    assert (
        "<script>window.__pwned='title'" in page.locator(".dr-ref-title").first.inner_text()
        or "<script>window.__pwned='title'" in page.locator(".dr-refs").inner_text()
    )  # the payload shows as text
    assert page.locator(".dr-view img, .dr-view svg, .dr-view iframe").count() == 0
    assert page.locator("script").count() == 1
    assert opened.errors == [] and opened.requests == []
    page.screenshot(path=str(tmp_path / "screenshots" / "payload-opened.png"), full_page=True)
