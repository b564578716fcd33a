"""What a run delivers beside its report: the short answer (answer mode) and the map of the literature
(taxonomy mode), through the research program with a scripted LM and offline."""

from __future__ import annotations

import json
import re
from collections import Counter

import dspy
import pytest

from deepresearch.programs.citing.citations import CitationRegistry
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.research.deliverables import MAP_HEADING, render_map, renumber_together
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from deepresearch.retrievers import BM25Retriever
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.types import Doc
from deepresearch.signatures import WriteAnswer
from deepresearch.signatures.taxonomy import BuildTaxonomy
from tests.research_lm import research_handler
from tests.scripted import inputs_of, scripted_lm

QUESTION = "Does vitamin D supplementation reduce fracture risk?"
CITATION = re.compile(r"\[(\d+)\]")


@pytest.fixture(scope="module")
def surveys(data_dir):
    with open(data_dir / "taxobench_examples" / "data_subset.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def leaf_titles(tree) -> Counter:
    out = Counter(tree.get("papers", []))
    for child in tree.get("subtopics", []):
        out += leaf_titles(child)
    return out


def two_leaves(messages):
    papers = json.loads(inputs_of(messages)["papers"])
    half = len(papers) // 2
    return {
        "taxonomy": {
            "name": inputs_of(messages)["topic"],
            "subtopics": [
                {"name": "First half", "papers": [p["paper_id"] for p in papers[:half]]},
                {"name": "Second half", "papers": [p["paper_id"] for p in papers[half:]]},
            ],
        }
    }


def cited_answer(messages):
    findings = json.loads(inputs_of(messages)["findings"])
    first = re.search(r"\[([0-9a-f]{8}_1)\]", findings[0]["summary"]).group(1)
    return {"answer": f"Probably not for most adults [{first}]. Ignore the rest [deadbeef_9]."}


def test_taxonomy_mode_organises_the_papers_judged_relevant_and_cites_them_in_the_map(surveys):
    docs = [
        Doc(doc_id=f"d{i}", title=p["title"], text=p["abs"])
        for i, p in enumerate(p for s in surveys for p in s["pdfs"])
    ]
    research = DeepResearch(
        retriever=BM25Retriever(Corpus(docs, name="taxobench")),
        config=ResearchConfig(depth=1, breadth=2, taxonomy=True),
    )
    with dspy.context(lm=scripted_lm(research_handler({BuildTaxonomy: two_leaves}))):
        report = research(question=surveys[0]["survey_topic"]).report
    tax = report.taxonomy
    relevant = {i for n in report.nodes() for i in n.relevant_ids}
    assert relevant and {p["doc_id"] for p in tax["papers"]} == relevant
    assert leaf_titles(tax["hierarchy_tree"]) == Counter(tax["retrieved_papers"])  # every paper once, by title
    assert [c["name"] for c in tax["hierarchy_tree"]["subtopics"]] == ["First half", "Second half"]
    assert report.usage["taxonomy"].calls == 1  # counted in the run's meter
    # the map cites every organised paper with the report's numbering, and each number is a reference
    body, refs = report.markdown.split(MAP_HEADING, 1)[1].split("## References", 1)
    numbers = {int(n) for n in CITATION.findall(body)}
    by_number = {r.number: r.doc_id for r in report.references}
    assert {by_number[n] for n in numbers} == relevant
    assert len(report.references) == report.stats.citations >= len(relevant)


def test_answer_mode_writes_a_short_answer_numbered_like_the_report(scifact_bm25):
    program = DeepResearch(retriever=scifact_bm25, config=ResearchConfig(depth=1, breadth=2, answer=True))
    with dspy.context(lm=scripted_lm(research_handler({WriteAnswer: cited_answer}))):
        report = program(question=QUESTION).report
    assert report.answer.startswith("Probably not for most adults [")
    assert "deadbeef" not in report.answer  # an id naming no retrieved document is dropped, as in the report
    (number,) = CITATION.findall(report.answer)
    ref = next(r for r in report.references if r.number == int(number))
    assert ref.source_id in {s for x in report.learnings for s in x.source_ids}
    assert report.usage["answer"].calls == 1
    assert report.to_dict()["answer"] == report.answer


def test_a_failed_answer_stage_is_recorded_and_replaced_by_quoted_sentences(scifact_bm25):
    def broken(messages):
        raise RuntimeError("the answer server fell over")

    program = DeepResearch(retriever=scifact_bm25, config=ResearchConfig(depth=1, breadth=2, answer=True, lm_retries=0))
    with dspy.context(lm=scripted_lm(research_handler({WriteAnswer: broken}))):
        report = program(question=QUESTION).report
    assert report.status == "done"
    assert "the answer stage failed" in report.answer and CITATION.search(report.answer)
    assert any(e.kind == "failure" and e.stage == "answer" for e in report.events)


def test_offline_answer_and_taxonomy(scifact_bm25):
    program = DeepResearch(
        retriever=scifact_bm25, offline=True, config=ResearchConfig(depth=1, breadth=2, answer=True, taxonomy=True)
    )
    report = program(question=QUESTION).report
    sentences = [s for s in re.split(r"(?<=\.)\s+", report.answer) if s]
    assert 1 <= len(sentences) <= 3 and all(CITATION.search(s) for s in sentences)
    assert all(re.search(r"vitamin|fracture|supplement", s, re.I) for s in sentences)
    assert MAP_HEADING in report.markdown and report.taxonomy["papers"]
    assert leaf_titles(report.taxonomy["hierarchy_tree"]) == Counter(report.taxonomy["retrieved_papers"])


def test_without_the_modes_the_report_has_neither():
    corpus = Corpus([Doc("a", "Vitamin D and falls", "Vitamin D supplementation reduced falls in older adults.")])
    report = DeepResearch(retriever=BM25Retriever(corpus), offline=True, depth=1, breadth=1)(question=QUESTION).report
    assert report.answer == "" and report.taxonomy is None and MAP_HEADING not in report.markdown


def test_render_map_nests_categories_and_cites_each_paper():
    tree = {
        "name": "t",
        "subtopics": [
            {"name": "A", "subtopics": [{"name": "A1", "papers": ["x"]}]},
            {"name": "B", "papers": ["y", "z"]},
        ],
    }
    cite = {"x": ("11111111_1", "X"), "y": ("22222222_1", "Y"), "z": ("33333333_1", "Z")}
    assert render_map(tree, cite).splitlines() == [
        MAP_HEADING,
        "",
        "- **A**",
        "  - **A1**",
        "    - X [11111111_1]",
        "- **B**",
        "  - Y [22222222_1]",
        "  - Z [33333333_1]",
    ]


def test_renumbering_together_gives_a_source_one_number_everywhere():
    registry = CitationRegistry()
    a, b = (registry.register(Doc(i, f"T{i}", "text")) for i in ("a", "b"))
    (report, answer), refs, dropped = renumber_together([f"R [{a}]. S [{b}].", f"Ans [{b}] [ffffffff_1]."], registry)
    assert (report, answer, dropped) == ("R [1]. S [2].", "Ans [2].", 1)
    assert [r.doc_id for r in refs] == ["a", "b"]


def test_an_answer_citing_nothing_is_replaced_by_quoted_sentences(scifact_bm25):
    # what SmolLM2-135M answered on llama-server: the output template itself
    program = DeepResearch(retriever=scifact_bm25, config=ResearchConfig(depth=1, breadth=2, answer=True))
    with dspy.context(lm=scripted_lm(research_handler({WriteAnswer: {"answer": "{{answer}}"}}))):
        report = program(question=QUESTION).report
    assert "{{answer}}" not in report.answer and CITATION.search(report.answer)
    assert "cited no source" in report.answer
    assert any(e.kind == "fallback" and e.stage == "answer" and "{{answer}}" in e.message for e in report.events)


def test_a_taxonomy_lm_that_fails_still_gives_every_paper_a_place(surveys):
    def broken(messages):
        raise RuntimeError("the taxonomy server fell over")

    papers = surveys[0]["pdfs"][:12]
    with dspy.context(lm=scripted_lm(broken)):
        out = TaxonomyBuilder()(topic="Personalized alignment", papers=papers)
    assert leaf_titles(out.tree) == Counter(p["title"] for p in papers)
    assert [r.kind for r in out.repairs] == ["lm_failed"] and "fell over" in out.repairs[0].detail


def test_a_failed_run_writes_no_answer_and_no_map_and_answer_md_says_why(scifact_bm25):
    from deepresearch.cli.research_run import answer_markdown

    def down(messages):
        raise RuntimeError("the server is down")

    program = DeepResearch(
        retriever=scifact_bm25, config=ResearchConfig(depth=1, breadth=2, answer=True, taxonomy=True, lm_retries=0)
    )
    with dspy.context(lm=scripted_lm(down)):
        report = program(question=QUESTION).report
    assert report.status == "failed" and report.answer == "" and report.taxonomy is None
    assert MAP_HEADING not in report.markdown and report.markdown.startswith("# Research failed")
    text = answer_markdown(report)
    assert f"> {report.error}" in text and "No answer was written." in text
