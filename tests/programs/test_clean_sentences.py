"""Sentences worth reading: no report ships a structured abstract's section label, a sentence that is only a
label or only a cited paper's title; and a question nothing found is about ends `partial`, saying so."""

import json

import pytest

from deepresearch import cli
from deepresearch.programs.research.deliverables import NO_EVIDENCE_ANSWER
from deepresearch.programs.research.finish import NOTHING_FOUND, NOTHING_RELEVANT
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.runtime.text import LABEL_WORDS, strip_label
from deepresearch.programs.stages.writer import drop_labels_and_titles
from deepresearch.retrievers.passages import split_sentences


@pytest.mark.parametrize(
    "sentence,expected",
    [
        ("INTRODUCTION Vitamin D deficiency is common.", "Vitamin D deficiency is common."),
        ("METHODS AND RESULTS In 30 obese subjects, insulin fell.", "In 30 obese subjects, insulin fell."),
        ("METHODOLOGY/PRINCIPAL FINDINGS We determined it.", "We determined it."),
        ("Background: Obesity is rising.", "Obesity is rising."),
        ("AIMS To analyse the long-term outcome.", "To analyse the long-term outcome."),
        # seen in a report of the 0.5B model: a label of three parts, commas between them
        (
            "DESIGN, SETTING, AND PATIENTS One hundred fifty-nine patients were enrolled.",
            "One hundred fifty-nine patients were enrolled.",
        ),
        ("Design, setting, and participants: A cohort of 400 adults.", "A cohort of 400 adults."),
        ("RESULTS", ""),
        ("CONCLUSIONS.", ""),
        # not labels: an acronym, a capitalised word that starts a sentence, a label word used as a word
        ("VEGF regulates osteoclastic differentiation.", "VEGF regulates osteoclastic differentiation."),
        ("HIV infection rates fell.", "HIV infection rates fell."),
        ("Methods were robust in both cohorts.", "Methods were robust in both cohorts."),
        ("Results.", "Results."),
        (
            "Design, methods and results differed between the trials.",
            "Design, methods and results differed between the trials.",
        ),
    ],
)
def test_a_section_label_at_a_sentences_start_is_left_out(sentence, expected):
    assert strip_label(sentence) == expected


def test_the_report_loses_labels_label_only_lines_and_title_only_sentences_and_nothing_else():
    draft = (
        "## Does obesity cause diabetes?\n\n"
        "AIMS Obesity raised the risk of type 2 diabetes [ab12]. Obesity and type 2 diabetes in adults [ab12].\n\n"
        "**RESULTS**\n\n"
        "- Weight loss lowered the risk [cd34].\n\n"
        "| column | AIMS |\n"
        "> BACKGROUND quoted text stays"
    )
    cleaned, dropped = drop_labels_and_titles(draft, ["Obesity and Type 2 Diabetes in Adults."])
    assert cleaned.splitlines() == [
        "## Does obesity cause diabetes?",
        "",
        "Obesity raised the risk of type 2 diabetes [ab12].",
        "",
        "",
        "- Weight loss lowered the risk [cd34].",
        "",
        "| column | AIMS |",
        "> BACKGROUND quoted text stays",
    ]
    assert dropped == 2  # the title-only sentence and the label-only line


def test_no_offline_report_sentence_starts_with_a_section_label(scifact_bm25):
    for question in ("Does vitamin D reduce fracture risk?", "Does obesity increase the risk of type 2 diabetes?"):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=3, offline=True)(question=question)
        body = out.markdown.split("## References")[0]
        quoted = [
            s for line in body.splitlines() if not line.startswith(("#", "*", ">")) for s in split_sentences(line)
        ]
        assert quoted
        assert not [s for s in quoted if s.split()[0].rstrip(":").lower() in LABEL_WORDS and s.split()[0].isupper()]


def test_a_question_nothing_found_is_about_ends_partial_and_says_so(scifact_bm25):
    out = DeepResearch(retriever=scifact_bm25, depth=2, breadth=3, offline=True)(question="x")
    assert out.status == "partial" and out.error == NOTHING_RELEVANT
    assert not out.references and "no relevant evidence" in out.markdown
    assert "The writer failed" not in out.markdown


def test_searches_that_keep_no_evidence_end_partial_and_the_command_exits_3(scifact_bm25, tmp_path, capsys):
    question = "Does quantum chromodynamics explain the spin of the proton?"  # SciFact is biomedicine
    out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2, offline=True)(question=question)
    assert out.stats.searches == 2 and not out.learnings
    assert out.status == "partial" and out.error == NOTHING_FOUND
    assert NO_EVIDENCE_ANSWER in out.markdown and f"> Note: This report is partial: {NOTHING_FOUND}." in out.markdown
    code = cli.main(["run", question, "--corpus", "scifact", "--preset", "quick", "-q", "--out", str(tmp_path / "r")])
    assert code == 3 and f"partial: {NOTHING_FOUND}" in capsys.readouterr().err
    assert json.loads((tmp_path / "r" / "trace.json").read_text())["status"] == "partial"
