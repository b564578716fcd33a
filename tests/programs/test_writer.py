"""The writer names learnings by number and the code cites them: the model never types a source id."""

import asyncio
import json

import dspy

from deepresearch.programs.citing.citations import CITATION, DRAFT_CITATION
from deepresearch.programs.citing.entailment import citations_in
from deepresearch.programs.lm.models import SchemaAdapter
from deepresearch.programs.stages.writer import FURTHER_HEADING, OFFLINE_HEADER, OfflineWriter, Writer
from deepresearch.signatures.types import Finding
from deepresearch.signatures.write import ReportSection, TopicLearning, WriteReport
from tests.scripted import inputs_of

QUESTION = "Does obesity increase the risk of type 2 diabetes?"
FINDINGS = [
    Finding(
        query="obesity diabetes risk",
        summary="Obesity doubled the risk of type 2 diabetes in 5,000 adults [aa11aa11_1]. "
        "Weight loss of 5% lowered diabetes incidence by 58% [bb22bb22_1, cc33cc33_1].",
    ),
    Finding(
        query="obesity insulin resistance",
        summary="Visceral fat predicted insulin resistance in obese diabetes patients [dd44dd44_1]. "
        "Obesity doubled the risk of type 2 diabetes in 5,000 adults [ee55ee55_1].",
    ),
]


def write(make_lm, sections, findings=FINDINGS):
    """The LM writer's report and the prompts it sent, its model answering `sections` in the JSON adapter's format."""
    lm = make_lm(lambda messages: json.dumps({"sections": sections}))
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        out = asyncio.run(Writer().acall(question=QUESTION, findings=findings))
    return out.report, lm.scripted.prompts


def one(*sentences):
    return [{"heading": "Answer", "sentences": [{"text": t, "learnings": n} for t, n in sentences]}]


def test_a_sentence_naming_a_learning_cites_exactly_that_learning_s_sources(make_lm):
    report, prompts = write(make_lm, one(("Losing 5% of body weight lowered incidence by 58%.", [2])))
    assert report.startswith(
        f"## {QUESTION}\n\n### Answer\n\nLosing 5% of body weight lowered incidence by 58% [bb22bb22_1, cc33cc33_1]."
    )
    # what the model read: numbered learnings under their searches, and no source id at all
    shown = json.loads(inputs_of(prompts[0])["learnings"])
    assert [(x["number"], x["topic"]) for x in shown] == [
        (1, "obesity diabetes risk"),
        (2, "obesity diabetes risk"),
        (3, "obesity insulin resistance"),
    ]
    assert shown[1]["text"] == "Weight loss of 5% lowered diabetes incidence by 58%."
    assert not CITATION.search(prompts[0][-1]["content"])


def test_a_copy_naming_its_neighbour_too_cites_only_the_learning_it_copies(make_lm):
    # seen with the 0.5B model: learning n copied, learnings n and n + 1 named
    report, _ = write(make_lm, one(("Weight loss of 5% lowered diabetes incidence by 58%.", [2, 3])))
    assert "by 58% [bb22bb22_1, cc33cc33_1]." in report


def test_a_sentence_naming_a_learning_it_does_not_state_cites_the_one_it_states(make_lm):
    report, _ = write(make_lm, one(("Visceral fat predicted insulin resistance in obese patients.", [1])))
    assert "in obese patients [dd44dd44_1]." in report


def test_a_copy_naming_a_similar_learning_cites_the_one_it_copies(make_lm):
    findings = [
        Finding(
            query="metformin", summary="Metformin lowered cancer risk in diabetes patients by a third [aa11aa11_1]."
        ),
        Finding(
            query="metformin cohort",
            summary="Metformin lowered cancer risk in diabetes patients in a second cohort of older adults [bb22bb22_1].",
        ),
    ]
    copy = "Metformin lowered cancer risk in diabetes patients in a second cohort of older adults."
    report, _ = write(make_lm, one((copy, [1])), findings=findings)  # learning 1 holds over half its words
    assert (
        "### Answer\n\nMetformin lowered cancer risk in diabetes patients in a second cohort of older adults [bb22bb22_1]."
        in report
    )


def test_a_sentence_stating_two_learnings_cites_both(make_lm):
    both = "Obesity doubled diabetes risk, while visceral fat predicted insulin resistance."
    report, _ = write(make_lm, one((both, [1, 3])))
    assert "predicted insulin resistance [aa11aa11_1, ee55ee55_1, dd44dd44_1]." in report


def test_a_heading_that_copies_a_learning_s_start_is_left_out_and_the_copy_cut_short_shown_whole(make_lm):
    sections = [
        {
            "heading": "Weight loss of 5% lowered diabetes",  # the grammar's bound cut the copy here
            "sentences": [{"text": "incidence by 58%", "learnings": [2]}],
        }
    ]
    report, _ = write(make_lm, sections)
    assert "### Weight" not in report
    assert "\n\nWeight loss of 5% lowered diabetes incidence by 58% [bb22bb22_1, cc33cc33_1]." in report


def test_learnings_whose_sources_the_draft_leaves_uncited_follow_under_further_evidence(make_lm):
    report, _ = write(make_lm, one(("Visceral fat predicted insulin resistance in obese diabetes patients.", [3])))
    main, further = report.split(f"### {FURTHER_HEADING}\n\n")
    assert citations_in(main) == ["dd44dd44_1"]
    # each left-out source once, in the learnings' order, quoted as the learning says it
    assert further == (
        "Obesity doubled the risk of type 2 diabetes in 5,000 adults [aa11aa11_1, ee55ee55_1]. "
        "Weight loss of 5% lowered diabetes incidence by 58% [bb22bb22_1, cc33cc33_1]."
    )


def test_a_learning_two_findings_state_is_one_learning_citing_both(make_lm):
    report, prompts = write(make_lm, one(("Obesity doubled the risk.", [1])))
    assert len(json.loads(inputs_of(prompts[0])["learnings"])) == 3
    # the model's words run inside learning 1: the sentence is that learning, whole
    assert "Obesity doubled the risk of type 2 diabetes in 5,000 adults [aa11aa11_1, ee55ee55_1]." in report


def test_a_finding_said_again_under_another_heading_is_said_once(make_lm):
    said = "Obesity doubled the risk of type 2 diabetes in adults."
    sections = [
        {"heading": "Answer", "sentences": [{"text": said, "learnings": [1]}]},
        {"heading": "Weight", "sentences": [{"text": "Weight loss lowered incidence.", "learnings": [2]}]},
        {
            "heading": "Again",
            "sentences": [{"text": "OBESITY doubled the risk of type-2 diabetes in adults!", "learnings": [1, 3]}],
        },
    ]
    report, _ = write(make_lm, sections)
    assert report.count("doubled the risk") == 1 and "### Again" not in report
    assert "Obesity doubled the risk of type 2 diabetes in adults [aa11aa11_1, ee55ee55_1]." in report


def test_a_sentence_said_again_behind_a_label_or_a_reporting_frame_is_said_once(make_lm):
    said = "Visceral fat predicted insulin resistance in obese diabetes patients."
    sections = [
        {"heading": "Answer", "sentences": [{"text": said, "learnings": [3]}]},
        {"heading": "Fat", "sentences": [{"text": f"RESULTS: {said}", "learnings": [3]}]},
        {"heading": "Again", "sentences": [{"text": f"The passage states that {said.lower()}", "learnings": [3]}]},
    ]
    report, _ = write(make_lm, sections)
    assert report.count("predicted insulin resistance") == 1 and "### Fat" not in report and "### Again" not in report


def test_a_sentence_said_again_inside_a_longer_draft_sentence_and_a_heading_said_again_are_said_once(make_lm):
    # seen with the 0.5B model: three sections under one heading, the third restating two sentences of the
    # second inside a drafted "sentence" of three
    heading = "What is the distribution of risk"
    obesity = "Obesity doubled the risk of type 2 diabetes in 5,000 adults."
    weight = "Weight loss of 5% lowered diabetes incidence by 58%."
    fat = "Visceral fat predicted insulin resistance in obese diabetes patients."
    sections = [
        {"heading": heading, "sentences": [{"text": obesity, "learnings": [1]}]},
        {"heading": heading, "sentences": [{"text": weight, "learnings": [2]}, {"text": fat, "learnings": [3]}]},
        {"heading": heading, "sentences": [{"text": f"{fat} {weight}", "learnings": [3, 2]}]},
    ]
    report, _ = write(make_lm, sections)
    assert report.count(f"### {heading}") == 1
    for said in (obesity, weight, fat):
        assert report.count(said.rstrip(".")) == 1, report
    assert {"aa11aa11_1", "bb22bb22_1", "cc33cc33_1", "dd44dd44_1"} <= set(citations_in(report))
    assert f"{fat.rstrip('.')} [dd44dd44_1]." in report  # not the weight-loss sources of the dropped copy


def test_numbers_not_shown_are_ignored_and_a_sentence_naming_none_is_not_cited(make_lm):
    report, _ = write(
        make_lm,
        one(("Visceral fat matters.", [0, 3, 9]), ("The evidence is consistent.", [4, -1]), ("No numbers.", [])),
    )
    assert "### Answer\n\nVisceral fat matters [dd44dd44_1]. The evidence is consistent. No numbers.\n" in report


def test_an_id_the_model_types_into_its_text_never_becomes_a_citation(make_lm):
    typed = "Smoking is a risk factor [doc123] [ff66ff66_1] [7] [source 2], see [the cohort]."
    report, _ = write(make_lm, [{"heading": "Risk [aa11aa11_1]", "sentences": [{"text": typed, "learnings": []}]}])
    assert not CITATION.search(report) and not DRAFT_CITATION.search(report)  # renumbering and verify read none
    assert "doc123" not in report and "ff66ff66_1" not in report
    assert report.endswith("### Risk\n\nSmoking is a risk factor, see \\[the cohort\\].")


def test_a_sentence_cut_mid_clause_ends_with_its_citation_and_a_full_stop(make_lm):
    report, _ = write(make_lm, one(("Weight loss lowered diabetes incidence by 58%, in adults,", [2])))
    assert "Weight loss lowered diabetes incidence by 58%, in adults [bb22bb22_1, cc33cc33_1]." in report


def test_a_report_naming_no_learning_cites_nothing_so_the_run_asks_again(make_lm):
    report, _ = write(make_lm, one(("Obesity is bad.", [12])))
    assert citations_in(report) == []


def test_the_offline_twin_teaches_the_lm_predictor_its_fields():
    writer = OfflineWriter()
    with dspy.context(trace=[]):
        out = asyncio.run(writer.acall(question=QUESTION, findings=FINDINGS))
        predictor, inputs, outputs = dspy.settings.trace[-1]
    assert predictor is writer.write_report
    assert set(inputs) == set(WriteReport.input_fields) and set(outputs) == set(WriteReport.output_fields)
    learnings = inputs["learnings"]
    assert all(isinstance(x, TopicLearning) for x in learnings) and [x.number for x in learnings] == [1, 2, 3]
    sections = outputs["sections"]
    assert all(isinstance(s, ReportSection) for s in sections)
    # extractive: each sentence is the text of the one learning it names
    said = [(x.text, x.learnings) for s in sections for x in s.sentences]
    assert said and all(text == learnings[n[0] - 1].text and len(n) == 1 for text, n in said)
    # and the report is what the LM writer makes of the same answer
    assert OFFLINE_HEADER in out.report
    assert "Obesity doubled the risk of type 2 diabetes in 5,000 adults [aa11aa11_1, ee55ee55_1]." in out.report
    assert out.report.count("Obesity doubled the risk") == 1


def test_the_decoder_can_name_only_learnings_that_were_shown_and_cannot_loop_on():
    shown = [TopicLearning(number=n, topic="t", text="x") for n in (1, 2, 3)]
    schema = SchemaAdapter()._response_format(WriteReport, {"question": "q", "learnings": shown})["json_schema"]
    models = schema["schema"]["$defs"]
    assert models["ReportSentence"]["properties"]["learnings"]["items"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 3,
    }
    # a small model that repeats a sentence or a section stops at the grammar's bound, not the token cap
    assert (
        schema["schema"]["properties"]["sections"]["maxItems"]
        and models["ReportSection"]["properties"]["sentences"]["maxItems"]
    )
    # each sentence names one or two learnings, and a heading is too short to hold a copied learning
    named = models["ReportSentence"]["properties"]["learnings"]
    assert (named["minItems"], named["maxItems"]) == (1, 2)
    assert models["ReportSection"]["properties"]["heading"]["maxLength"] <= 60
