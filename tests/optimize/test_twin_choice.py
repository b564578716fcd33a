"""Compile decides where a model helps: per stage, the LM module or its offline twin, whichever scores higher
end to end on the training split; the program chosen is never below the offline floor there, and the choice
is saved with it."""

import dspy
import pytest

import deepresearch as dr
from deepresearch.programs.stages.choice import TWINS_KEY, choose_twins
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries
from tests.research_lm import research_handler
from tests.scripted import inputs_of, scripted_lm


def off_topic_plan(messages):
    return {
        "searches": [{"action": "derive", "source_id": 0, "text": "zebrafish fin regeneration", "target_k": 10}],
        "checklist_update": "c",
        "memory_update": "m",
        "is_complete": False,
    }


def keep_all(messages):
    import json

    return {"relevance": {c["paper_id"]: "relevant" for c in json.loads(inputs_of(messages)["candidates"])}}


@pytest.fixture
def lm():
    lm = scripted_lm(research_handler({PlanSubqueries: off_topic_plan, LabelCandidates: keep_all}))
    dspy.configure(lm=lm)
    return lm


def test_the_twin_answers_the_stage_where_it_scores_higher_and_the_choice_is_saved(lm, scifact_bm25, tmp_path):
    train = dr.examples("scifact", "train", limit=4)
    gatherer = dr.Gatherer(scifact_bm25, iterations=1)
    chosen, scores = choose_twins(gatherer, train, dr.metrics.gather_f1)
    assert scores["lm"] == 0.0  # the model's plan searches another topic
    assert "gather_plan" in chosen.twin_stages() and gatherer.twin_stages() == ()
    best = max(scores.values())
    assert dspy.Evaluate(devset=train, metric=dr.metrics.gather_f1)(chosen).score == pytest.approx(best, abs=0.01)
    assert best >= scores["offline"] > scores["lm"]
    path = tmp_path / "chosen.json"
    chosen.save(str(path))
    loaded = dr.Gatherer(scifact_bm25, iterations=1)
    loaded.load(str(path))
    assert loaded.twin_stages() == chosen.twin_stages()
    assert TWINS_KEY not in dr.Gatherer(scifact_bm25).dump_state()  # nothing chosen, nothing saved


def test_a_program_below_the_floor_everywhere_falls_back_to_every_twin(scifact_bm25):
    def never_relevant(messages):
        import json

        return {"relevance": {c["paper_id"]: "irrelevant" for c in json.loads(inputs_of(messages)["candidates"])}}

    lm = scripted_lm(research_handler({PlanSubqueries: off_topic_plan, LabelCandidates: never_relevant}))
    train = dr.examples("scifact", "train", limit=3)
    with dspy.context(lm=lm):
        chosen, scores = choose_twins(dr.Gatherer(scifact_bm25, iterations=1), train, dr.metrics.gather_f1)
    assert set(chosen.twin_stages()) == {"gather_plan", "gather_assess"} and scores["offline"] > 0


def test_an_unknown_or_twinless_stage_is_refused(scifact_bm25):
    with pytest.raises(ValueError, match="no offline twin for stage 'search' here; choose from: gather_plan"):
        dr.Gatherer(scifact_bm25).with_twins(["search"])
