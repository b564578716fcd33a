"""report.html without a browser: the page parsed with html.parser. Every citation resolves to a reference card
and a recorded passage, payloads in a corpus stay text, failed and interrupted runs say so at the top, the
notebook view is the same view, and `deepresearch view` finds or writes the page."""

from __future__ import annotations

import dataclasses
import json
import re

import dspy
import pytest

from deepresearch import cli
from deepresearch.programs.artifacts import Report
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.report_view import report_html, report_view, safe_url
from deepresearch.programs.research.program import DeepResearch
from tests.notebook_views import shown
from tests.research_lm import research_handler
from tests.scripted import scripted_lm
from tests.view_checks import PAYLOAD_QUESTION, Page, check_page, write_payload_corpus

QUESTION = "Does obesity increase the risk of type 2 diabetes?"


@pytest.fixture(scope="module")
def offline_report(scifact_bm25) -> Report:
    config = ResearchConfig(depth=2, breadth=2, answer=True, taxonomy=True)
    return DeepResearch(retriever=scifact_bm25, config=config, offline=True)(QUESTION).report


@pytest.fixture(scope="module")
def payload_run(tmp_path_factory, data_dir):
    folder = tmp_path_factory.mktemp("payload")
    corpus = write_payload_corpus(folder / "corpus.jsonl")
    out = folder / "run"
    code = cli.main(
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
    assert code == 0
    return out


def test_every_citation_resolves_to_a_reference_card_and_its_passage(offline_report):
    trace = offline_report.to_dict()
    page = check_page(report_html(offline_report), trace)
    cites = page.find("a", "dr-cite")
    assert len(cites) >= 10 and offline_report.answer  # the answer's citations and the report's
    # the passage behind a citation is the cited document's text, and the marked sentence is one of its sentences
    for c in cites:
        number = int(c.attrs["data-number"])
        ref = next(r for r in offline_report.references if r.number == number)
        text = page.text_of(page.by_id[c.attrs["data-src"]])
        assert " ".join(text.split()) == " ".join(offline_report.passages[ref.source_id].split())
    # offline, the report quotes its sources: the marked sentence of each body citation is the quoted one
    body = page.find("section", "dr-report")[0]
    start = page.elements.index(body)
    quoted = [c for c in cites if page.elements.index(c) > start]
    assert quoted and all(int(c.attrs["data-mark"]) >= 0 for c in quoted)


def test_sentences_carry_the_verify_stages_verdicts(offline_report):
    page = Page(report_html(offline_report))
    judged = [e for e in page.elements if "dr-s" in e.classes and e.attrs.get("data-verdict")]
    checked = offline_report.stats.verification["checked"]
    assert checked and len(judged) == checked  # every checked sentence of the shipped report, once
    assert {e.attrs["data-verdict"] for e in judged} <= set(offline_report.stats.verification["verdicts"])
    # offline, a sentence is judged by the lexical rule, or is a quote of its passage that needs no judge
    judges = {e.attrs["data-judge"] for e in judged}
    assert "quote" in judges and judges <= {"lexical", "quote"}


def test_the_tree_the_references_the_map_and_the_cost_are_shown(offline_report):
    page = Page(report_html(offline_report))
    nodes = page.find("details", "dr-node")
    assert len(nodes) == len(offline_report.nodes())
    for node, element in zip(offline_report.nodes(), nodes):
        text = " ".join(page.text_of(element).split())
        assert node.query in text and node.goal in text and f"{len(node.retrieved_ids)} hits" in text
        assert all(x.text in text for x in node.learnings) and all(i in text for i in node.relevant_ids)
    cards = page.find("li", "dr-ref")
    assert [page.text_of(c).split()[0] for c in cards] == [f"[{r.number}]" for r in offline_report.references]
    text = " ".join(page.text_of(page.find("main")[0]).split())
    assert "Map of the literature" in text and "Short answer" in text
    assert "No LM call: every stage ran offline" in text and f"{offline_report.stats.searches}" in text


def test_a_scripted_lm_run_shows_calls_tokens_cost_and_time_per_stage(scifact_bm25):
    with dspy.context(lm=scripted_lm(research_handler())):
        report = DeepResearch(retriever=scifact_bm25, config=ResearchConfig(depth=1, breadth=2))(QUESTION).report
    assert report.usage and all(u.seconds > 0 for u in report.usage.values())  # the stages' LM time is measured
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))).usage == report.usage
    page = check_page(report_html(report, config={"max_lm_calls": 40, "deadline_s": None}), report.to_dict())
    table = page.find("table", "dr-usage")[0]
    cells = [e for e in page.elements[page.elements.index(table) :] if e.tag in ("th", "td")]
    stages = [page.text_of(e) for e in cells if e.attrs.get("scope") == "row"]
    assert stages == [*sorted(report.usage), "total"]
    total = [page.text_of(e) for e in cells[-8:]]
    assert total[:2] == ["total", str(sum(u.calls for u in report.usage.values()))]
    assert total[-1] == f"{sum(u.seconds for u in report.usage.values()):.2f}"
    terms = [page.text_of(e) for e in page.elements if e.tag in ("dt", "dd")]
    pairs = set(zip(terms[::2], terms[1::2]))
    assert ("LM calls", "40") in pairs and ("deadline (s)", "no limit") in pairs  # the budget it ran under
    assert ("LM calls", str(report.stats.lm_calls)) in pairs and ("tokens", f"{report.stats.tokens:,}") in pairs


def test_payloads_in_a_corpus_are_escaped_text(payload_run):
    trace = json.loads((payload_run / "trace.json").read_text())
    source = (payload_run / "report.html").read_text()
    page = check_page(source, trace)  # one script (ours), no img/svg/iframe, no on* attribute, no javascript: link
    assert trace["references"] and page.find("a", "dr-cite")
    text = " ".join(page.text_of(page.find("main")[0]).split())
    assert "<script>window.__pwned='title';document.title='PWNED'</script>" in text  # shown as text
    assert "<svg onload=\"window.__pwned='author'\">" in text and "javascript:window.__pwned='url'" in text
    assert "<script>window.__pwned='question'</script>" in page.text_of(page.find("h1")[0])
    assert "&lt;script&gt;window.__pwned=" in source and "<script>window" not in source
    assert "javascript:" not in "".join(e.attrs.get("href", "") for e in page.elements)
    doi = next(r for r in trace["references"] if r.get("doi"))
    (link,) = {e.attrs["href"] for e in page.elements if e.attrs.get("href", "").startswith("https://doi.org/")}
    assert link == "https://doi.org/10.1234/x%22%3E%3Cscript%3Ewindow.__pwned%3D%27doi%27%3C/script%3E" and doi


def test_only_http_links_are_made():
    assert safe_url("https://example.org/a?b=1") == "https://example.org/a?b=1"
    assert safe_url("http://example.org") == "http://example.org"
    for bad in (
        "javascript:alert(1)",
        " JavaScript:alert(1)",
        "data:text/html,<script>",
        "//evil.org/x",
        "vbscript:x",
        "file:///etc/passwd",
        "https://",
        "https://a.org/x y",
        None,
        "",
    ):
        assert safe_url(bad) is None, bad


@pytest.mark.parametrize(
    "status, error, words",
    [
        ("failed", "every branch failed (3 of 3): ConnectionError", "This run failed:"),
        ("interrupted", "interrupted by SIGINT", "This run was interrupted:"),
    ],
)
def test_a_failed_or_interrupted_run_says_so_at_the_top(offline_report, status, error, words):
    report = dataclasses.replace(offline_report, status=status, error=error)
    page = Page(report_html(report))
    (banner,) = page.find("div", "dr-banner")
    assert page.elements.index(banner) < page.elements.index(page.find("nav")[0])  # above everything but the title
    assert " ".join(page.text_of(banner).split()).startswith(f"{words} {error}")
    assert report_view(offline_report)["banner"] is None


def test_the_notebook_shows_the_same_view_in_a_box_of_its_own(offline_report, scifact_bm25):
    fragment = shown(offline_report, "text/html")
    assert fragment == report_html(offline_report, embedded=True)
    assert "<html" not in fragment and "<body" not in fragment and "dr-embedded" in fragment
    page = Page(fragment)
    assert [int(a.attrs["data-number"]) for a in page.find("a", "dr-cite")] == [
        int(a.attrs["data-number"]) for a in Page(report_html(offline_report)).find("a", "dr-cite")
    ]
    # every style rule is scoped to the view, so the notebook's own page is left as it is
    (style,) = re.findall(r"<style>(.*?)</style>", fragment, re.S)
    rules = re.sub(r"/\*.*?\*/", "", style, flags=re.S)
    selectors = [
        s.strip()
        for block in re.findall(r"([^{}]+)\{[^{}]*\}", re.sub(r"@(container|media)[^{]*\{", "", rules))
        for s in block.split(",")
    ]
    assert selectors and all(s.startswith(".dr-view") for s in selectors if s), [
        s for s in selectors if not s.startswith(".dr-view")
    ]
    prediction = DeepResearch(retriever=scifact_bm25, depth=1, breadth=1, offline=True)(QUESTION)
    assert shown(prediction, "text/html") == shown(prediction.report, "text/html")


def test_run_writes_report_html_and_view_prints_it(tmp_path, data_dir, monkeypatch, capsys):
    out = tmp_path / "run"
    assert (
        cli.main(["-q", "run", QUESTION, "--corpus", "scifact", "--depth", "1", "--breadth", "1", "--out", str(out)])
        == 0
    )
    assert f"view:   {out / 'report.html'}" in capsys.readouterr().out
    trace = json.loads((out / "trace.json").read_text())
    check_page((out / "report.html").read_text(), trace)
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    assert cli.main(["view", str(out)]) == 0
    assert opened == [(out / "report.html").resolve().as_uri()]
    monkeypatch.setattr("webbrowser.open", lambda url: False)  # no browser here: the path, to open elsewhere
    assert cli.main(["view", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith(str((out / "report.html").resolve()))
    # a folder of an older run, with only its trace: the view is written from it
    (out / "report.html").unlink()
    assert cli.main(["view", str(out), "--no-browser"]) == 0
    assert capsys.readouterr().out.strip() == str((out / "report.html").resolve())
    check_page((out / "report.html").read_text(), trace)


def test_view_names_what_is_missing(tmp_path, capsys):
    assert cli.main(["view", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "trace.json").write_text(json.dumps({"question": "q", "tree": []}))
    assert cli.main(["view", str(tmp_path), "--no-browser"]) == 2
    assert "has no report yet" in capsys.readouterr().err


def test_the_markdown_a_writer_may_use_renders_as_structure_not_markup(offline_report):
    refs = offline_report.references
    markdown = (
        "## Title\n\n### Findings\n\nA claim with **bold** and *em* [1, 2]. Another `x<y` [3].\n\n"
        "- item one [1]\n  - nested item [2]\n- item two\n\n| a | b |\n|---|---|\n| cell [1] | x |\n\n"
        "```\n<b>code</b> [1]\n```\n\nA [safe link](https://example.org/p) and a [bad one](javascript:alert(1)).\n\n"
        "## References\n\n" + "\n".join(r.render() for r in refs)
    )
    report = dataclasses.replace(offline_report, markdown=markdown, answer="## Answer\n\nShort [1].")
    page = Page(report_html(report))
    cites = [int(a.attrs["data-number"]) for a in page.find("a", "dr-cite")]
    assert cites == [1, 1, 2, 3, 1, 2, 1]  # answer, the group [1, 2], `[3]`, the list, the table; not the code
    headings = [e for e in page.elements if e.tag in ("h2", "h3") and e.attrs.get("id")]
    assert [page.text_of(h) for h in headings] == ["Answer", "Title", "Findings"]
    assert [e.tag for e in page.elements if e.tag in ("strong", "em", "ul", "li", "table", "td", "pre")][:10] == [
        "strong",
        "em",
        "ul",
        "li",
        "ul",
        "li",
        "li",
        "table",
        "td",
        "td",
    ]
    (code,) = page.find("pre")
    assert page.text_of(code) == "<b>code</b> [1]" and not page.find("b")
    hrefs = [e.attrs["href"] for e in page.find("a") if not e.attrs["href"].startswith("#")]
    assert "https://example.org/p" in hrefs and not any("javascript" in h for h in hrefs)
    text = " ".join(page.text_of(page.find("section", "dr-report")[0]).split())
    assert "and a bad one." in text and "x<y" in text
    ids = [e.attrs["id"] for e in page.elements if e.attrs.get("id")]
    assert len(ids) == len(set(ids))
