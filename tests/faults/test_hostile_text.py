"""Text stays data (issue "Stop means stop, failed means failed", item "Text stays data"): a corpus whose
records carry a heading line, an image, a link, raw HTML (`<script>`, `<img>`, `<a>`), a setext underline and
NUL, ESC and BEL bytes is researched offline, end to end; report.md and answer.md, read by an independent
CommonMark parser (markdown-it-py), report.html and references.bib (read back by bibtexparser) carry the
on-topic sentences and our own headings, references and citations, and none of that structure or those bytes."""

from __future__ import annotations

import json
import re

import bibtexparser
from markdown_it import MarkdownIt

from deepresearch.cli import main
from deepresearch.programs.artifacts import Report
from deepresearch.programs.report_view import report_html
from deepresearch.programs.runtime.text import inert_markdown, strip_markup
from deepresearch.signatures import ExtractLearnings, WriteReport
from deepresearch.signatures.answer import WriteAnswer
from tests.integration.openai_server import LocalOpenAIServer
from tests.notebook_views import shown
from tests.research_lm import research_handler
from tests.scripted import inputs_of

QUESTION = "omega-3 fatty acids and coronary heart disease"
EVIL = "evil.example"
HOSTILE = [
    {
        "_id": "h1",
        "title": "# Omega-3 fatty acids <script>alert(1)</script> and coronary\x00 heart disease",
        "text": "Omega-3 fatty acid intake was associated with lower rates of coronary heart disease in a cohort "
        "of 4,000 adults.\n# Omega-3 heading injected\n![tracker](http://evil.example/pixel.png) Omega-3 "
        "supplements reduced coronary heart disease events [click here](http://evil.example/phish) in trials. "
        "<script>alert(1)</script> Omega-3 fatty acids\x00 lowered\x1b[31m coronary\x07 heart disease mortality. "
        '<img src=x onerror=alert(2)> Omega-3 <a href="http://evil.example/a">coronary</a> heart disease '
        "risk fell.",
    },
    {
        "_id": "h2",
        "title": "Fish oil and coronary heart disease\x1b]0;owned\x07 [a link](http://evil.example/t)",
        "text": "Omega-3 fatty acids from fish oil lowered coronary heart disease risk in a randomised trial.\n"
        "> a quoted omega-3 coronary heart disease line\n---\nOmega-3 fatty acids improved coronary heart "
        "disease outcomes.\n=====\n## Omega-3 coronary heart disease heading",
    },
]
ON_TOPIC = "Omega-3 fatty acids from fish oil lowered coronary heart disease risk in a randomised trial"
# C0 but tab and newline, DEL, C1
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
RAW_TAG = re.compile(r"(?<!\\)</?(?:script|img|a)\b", re.IGNORECASE)


def run_offline(tmp_path) -> tuple[int, dict[str, str]]:
    corpus = tmp_path / "hostile.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in HOSTILE), encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        ["-q", "run", QUESTION, "--corpus", str(corpus), "--lm", "offline", "--depth", "1", "--answer", "--bibtex"]
        + ["--out", str(out)]
    )
    names = ("report.md", "answer.md", "report.html", "references.bib", "trace.json")
    return code, {name: (out / name).read_text(encoding="utf-8") for name in names if (out / name).exists()}


def tokens(markdown: str):
    return MarkdownIt("commonmark").parse(markdown)


def structure(markdown: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """What a CommonMark renderer makes of `markdown`: its headings, links, images and raw HTML."""
    headings, links, images, html = [], [], [], []
    toks = tokens(markdown)
    for i, tok in enumerate(toks):
        if tok.type == "heading_open":
            headings.append(toks[i + 1].content)
        if tok.type in ("html_block", "html_inline"):
            html.append(tok.content)
        for child in tok.children or ():
            if child.type == "link_open":
                links.append(str(child.attrGet("href")))
            elif child.type == "image":
                images.append(str(child.attrGet("src")))
            elif child.type == "html_inline":
                html.append(child.content)
    return headings, links, images, html


def test_corpus_markup_and_control_bytes_never_reach_the_deliverables(tmp_path, capfd, clean_lm_env):
    code, files = run_offline(tmp_path)
    assert code == 0, capfd.readouterr().err[-2000:]
    assert set(files) == {"report.md", "answer.md", "report.html", "references.bib", "trace.json"}
    for name in ("report.md", "answer.md", "report.html", "references.bib"):
        text = files[name]
        assert not CONTROL.search(text), (name, CONTROL.findall(text))
        if name != "report.html":  # the page has our own script and links; it is checked below
            assert not RAW_TAG.search(text), (name, RAW_TAG.findall(text))  # Markdown shows it escaped: \<script\>
    assert "<" not in files["references.bib"] and "alert" not in files["references.bib"]

    report, answer = files["report.md"], files["answer.md"]
    # the report and the answer are made of the corpus's sentences, cited, with our own references
    assert ON_TOPIC in report and ON_TOPIC in answer
    assert re.search(re.escape(ON_TOPIC) + r"[^\n]*\[\d\]", report)
    assert "## References" in report and re.search(r"^\[1\] .*doc h[12]$", report, re.M)
    assert re.search(r"^\[2\] .*doc h[12]$", report, re.M)

    headings, links, images, html = structure(report)
    # only the headings the program writes: the question, the section of the extractive writer, the references
    assert headings == [QUESTION, "Main evidence on the question", "References"], headings
    assert links == [] and images == [] and html == [], (links, images, html)
    assert not any(t.type in ("blockquote_open", "hr", "fence", "code_block") for t in tokens(report))
    # the corpus's words are still there, shown as the text they were
    rendered = MarkdownIt("commonmark").render(report)
    assert "Omega-3 heading injected" in rendered and "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert "[click here](http://evil.example/phish)" in rendered

    headings, links, images, html = structure(answer)
    assert headings == [QUESTION, "References"], headings  # answer.md's title is the question
    assert links == [] and images == [] and html == [], (links, images, html)

    page = files["report.html"]
    assert ON_TOPIC in page and "Omega-3 heading injected" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # shown as text, escaped
    assert "<script>alert" not in page and "<img" not in page and page.count("<script") == 1  # ours only
    assert not re.search(r"<h[1-6][^>]*>[^<]*(?:heading injected|Omega-3 coronary heart disease heading)", page)
    assert not re.search(r"<(?:img|a|iframe)\b[^>]*" + re.escape(EVIL), page)
    assert not re.search(r"<blockquote[^>]*>[^<]*quoted omega-3", page)
    assert re.search(r'id="dr\w+-ref-1"', page) and re.search(r'id="dr\w+-ref-2"', page)  # our reference cards

    library = bibtexparser.parse_string(files["references.bib"])
    assert not library.failed_blocks
    titles = sorted(e.fields_dict["title"].value for e in library.entries)
    assert len(titles) == 2 and all("coronary" in t for t in titles), titles
    assert not any("alert" in t or "<" in t or ">" in t for t in titles), titles


def test_the_notebook_view_of_a_hostile_run_adds_no_structure(tmp_path, capfd, clean_lm_env):
    code, files = run_offline(tmp_path)
    assert code == 0, capfd.readouterr().err[-2000:]
    report = Report.from_dict(json.loads(files["trace.json"]))
    view = shown(report)  # the report, its references and the research tree, as Jupyter shows it
    headings, links, images, html = structure(view)
    assert "heading injected" not in " ".join(headings) and not images and not html, (headings, images, html)
    assert not any(EVIL in link for link in links), links
    assert not CONTROL.search(view) and ON_TOPIC in view
    page = report_html(report)  # the view rebuilt from trace.json, as `deepresearch view` does
    assert not CONTROL.search(page) and "<script>alert" not in page and "<img" not in page


HOSTILE_MARKUP = (
    "![x](http://evil.example/p.png) See [here](http://evil.example/x) and <img src=x onerror=alert(2)>. "
    "<script>alert(1)</script>\x00\x1b[31m\x07"
)


def _hostile_extract(messages):  # quotes the sentences carrying markup and control bytes (the tree view shows them)
    passages = json.loads(inputs_of(messages)["passages"])
    return {
        "quotes": [int(n) for p in passages for n, s in p["sentences"].items() if "<script>" in s],
        "follow_up_questions": [],
    }


def _hostile_write(messages):  # a draft whose text carries markup a model may copy from a paper
    said = [
        {"text": "Omega-3 fatty acids lowered coronary heart disease risk.", "learnings": [1]},
        {"text": f"<script>alert(1)</script> {HOSTILE_MARKUP}\n=====\n# Heading", "learnings": [1]},
    ]
    return {"sections": [{"heading": "Evidence\n=====", "sentences": said}]}


def _hostile_answer(messages):
    findings = json.loads(inputs_of(messages)["findings"])
    ids = re.findall(r"\[([0-9a-f]{8}_\d+)\]", " ".join(f["summary"] for f in findings))
    return {"answer": f"# Yes\nOmega-3 fatty acids lower coronary heart disease risk [{ids[0]}]. {HOSTILE_MARKUP}"}


def test_a_model_s_markup_and_control_bytes_never_reach_the_deliverables(tmp_path, capfd, clean_lm_env):
    corpus = tmp_path / "hostile.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in HOSTILE), encoding="utf-8")
    handler = research_handler(
        {ExtractLearnings: _hostile_extract, WriteReport: _hostile_write, WriteAnswer: _hostile_answer}
    )
    out = tmp_path / "out"
    with LocalOpenAIServer(handler) as server:
        code = main(
            ["-q", "run", QUESTION, "--corpus", str(corpus), "--lm", "openai/hostile", "--api-base", server.base_url]
            + ["--no-cache", "--out", str(out), "--answer", "--bibtex", "--depth", "1", "--breadth", "2"]
        )
    assert code == 0, capfd.readouterr().err[-2000:]
    report, answer, page = ((out / n).read_text(encoding="utf-8") for n in ("report.md", "answer.md", "report.html"))
    for name, text in (("report.md", report), ("answer.md", answer), ("report.html", page)):
        assert not CONTROL.search(text), (name, CONTROL.findall(text))
        assert not RAW_TAG.search(text) if name != "report.html" else "<script>alert" not in text, name
    assert "<img" not in page and page.count("<script") == 1  # the page's one script is ours
    assert "Omega-3 fatty acids lowered coronary heart disease risk [1]" in report
    headings, links, images, html = structure(report)
    assert headings == [QUESTION, "Evidence =====", "References"], headings  # the writer's sections stay
    assert links == [] and images == [] and html == [], (links, images, html)
    assert "Omega-3 fatty acids lower coronary heart disease risk [1]" in answer
    headings, links, images, html = structure(answer)
    assert headings == [QUESTION, "References"] and not links and not images and not html, (headings, links, html)
    # the learnings shown in the page's research tree are escaped text
    assert "in trials. &lt;script&gt;alert(1)&lt;/script&gt; Omega-3 fatty acids" in page
    view = shown(Report.from_dict(json.loads((out / "trace.json").read_text())))
    assert not CONTROL.search(view) and not any(structure(view)[2:]), structure(view)


def test_inert_markdown_keeps_citations_shows_the_text_and_changes_nothing_twice():
    text = (
        "# Heading\n> quote\n=====\n```\n![i](http://evil.example/p) [x](http://evil.example) [x][y] [y]: "
        "http://evil.example <a href=x>a</a> [3] [1, 4] [5a7b0fd1_1; 2] [5a7b0fd1_1][6][7]\x00\x1b[2J\x07\x7f\x85"
    )
    once = inert_markdown(text)
    assert inert_markdown(once) == once
    headings, links, images, html = structure(once)
    assert headings == links == images == html == []
    assert not any(t.type in ("blockquote_open", "fence", "hr") for t in tokens(once))
    # citations side by side stay citations (the definition that could make one a link is escaped)
    assert "[3] [1, 4] [5a7b0fd1_1; 2] [5a7b0fd1_1][6][7]" in once and not CONTROL.search(once)
    rendered = MarkdownIt("commonmark").render(once)
    assert "# Heading" in rendered and "![i](http://evil.example/p)" in rendered and "&lt;a href=x&gt;" in rendered
    kept = inert_markdown("## Section\n\n### Theme\n\nText [3].", headings=True)
    assert structure(kept)[0] == ["Section", "Theme"]
    assert strip_markup("The <i>p53</i> gene<script>alert(1)</script>\x07") == "The p53 gene"
