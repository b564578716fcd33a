import typing

import dspy
import pydantic
import pytest

from deepresearch.signatures import (
    AssessRelevance,
    ExtractLearnings,
    FindGaps,
    Judgement,
    Label,
    MergeLearnings,
    PlanQueries,
    Task,
    WriteReport,
)
from deepresearch.signatures.extract import QuotablePassage
from deepresearch.signatures.write import ReportSection

STAGES = {
    PlanQueries: (["question", "known", "max_tasks"], {"tasks": list[Task]}),
    AssessRelevance: (["task", "papers"], {"relevance": dict[str, Label]}),
    ExtractLearnings: (
        ["question", "task", "passages"],
        {"quotes": list[int], "follow_up_questions": list[str]},
    ),
    MergeLearnings: (["task", "learnings"], {"order": list[int]}),
    FindGaps: (
        ["question", "focus", "summary", "open_questions", "sibling_queries", "max_tasks"],
        {"tasks": list[Task]},
    ),
    WriteReport: (["question", "learnings"], {"sections": list[ReportSection]}),
}


@pytest.mark.parametrize("signature", list(STAGES), ids=lambda s: s.__name__)
def test_fields_and_types(signature):
    inputs, outputs = STAGES[signature]
    assert list(signature.input_fields) == inputs
    assert {k: v.annotation for k, v in signature.output_fields.items()} == outputs
    assert 2 <= len([s for s in signature.instructions.split(".") if s.strip()]) <= 6  # a few plain sentences


@pytest.mark.parametrize("signature", list(STAGES), ids=lambda s: s.__name__)
def test_distinct_instructions(signature):
    # GEPA matches trace entries by signature equality: stages must not share instructions
    others = [s.instructions for s in STAGES if s is not signature]
    assert signature.instructions not in others


def test_assessment_label_is_a_closed_set():
    assert typing.get_args(Judgement.model_fields["label"].annotation) == ("relevant", "irrelevant", "uncertain")
    with pytest.raises(pydantic.ValidationError):
        Judgement(source_id="a_1", label="maybe", reason="-")


def test_lm_models_are_frozen():
    task = Task(query="q", goal="g")
    with pytest.raises(pydantic.ValidationError):
        task.query = "other"


def test_the_prompt_renders_fields_and_schema():
    messages = dspy.ChatAdapter().format(
        ExtractLearnings,
        demos=[],
        inputs={
            "question": "Q?",
            "task": Task(query="vitamin d fracture", goal="effect size"),
            "passages": [QuotablePassage(title="Calcifediol trial", sentences={1: "Fractures fell by a fifth."})],
        },
    )
    system, user = messages[0]["content"], messages[-1]["content"]
    # the LM reads sentences by number and answers with numbers
    assert "`quotes` (list[int])" in system
    assert '{"title": "Calcifediol trial", "sentences": {"1": "Fractures fell by a fifth."}}' in user
    assert ExtractLearnings.instructions.splitlines()[0] in system
    assert "Calcifediol trial" in user and "vitamin d fracture" in user
