import asyncio

import dspy
import pytest

from deepresearch.eval.citations import Sentence
from deepresearch.eval.judges import (
    CRITERIA,
    CitationSupportJudge,
    CriteriaJudge,
    GradeCitationSupport,
    JudgeCache,
    JudgeKeyPoint,
    KeyPointJudge,
    RateReport,
    judge_lm,
    key_point_contradiction,
    key_point_recall,
)
from tests.scripted import inputs_of

REPORT = "## Bees\n\nBees pollinate most crops [1]. Pesticides reduce bee foraging [2]."
POINTS = {
    "Bees pollinate crops.": "Supported",
    "Wind pollinates grasses.": "Omitted",
    "Pesticides help bees.": "Contradicted",
    "Pesticides reduce foraging.": "Supported",
}
SCORES = {"clarity": 8, "depth": 6, "balance": 7, "breadth": 5, "support": 9, "insightfulness": 4}


def judge_routes():
    return {
        JudgeKeyPoint: lambda m: {"label": POINTS[inputs_of(m)["key_point"]]},
        RateReport: lambda m: {
            "justification": f"About {inputs_of(m)['criterion']}.",
            "score": SCORES.get(inputs_of(m)["criterion"], 11),
        },
        GradeCitationSupport: lambda m: {"support": "full" if "pollinate" in inputs_of(m)["claim"] else "partial"},
    }


@pytest.fixture
def lm(make_lm, routed):
    return make_lm(routed(judge_routes()))


# Key-point recall and contradiction: the shares of key points labelled Supported and Contradicted.
def test_kpr_and_kpc_from_labels():
    labels = ["Supported", "Omitted", "Contradicted", "Supported"]
    assert key_point_recall(labels) == 0.5
    assert key_point_contradiction(labels) == 0.25
    assert key_point_recall([]) == 0.0 and key_point_contradiction([]) == 0.0


def test_key_point_judge_labels_each_point(lm):
    out = asyncio.run(
        KeyPointJudge(lm=lm).acall(question="Why do bees matter?", report=REPORT, key_points=list(POINTS))
    )
    assert out.verdicts == list(POINTS.values())
    assert (out.kpr, out.kpc) == (0.5, 0.25)
    assert lm.scripted.calls == 4
    assert all(REPORT.splitlines()[-1] in p[-1]["content"] for p in lm.scripted.prompts)


def test_criteria_judge_scores_the_six_criteria(lm):
    out = CriteriaJudge(lm=lm)(question="Why do bees matter?", report=REPORT)
    assert out.scores == SCORES
    assert list(out.scores) == list(CRITERIA) == ["clarity", "depth", "balance", "breadth", "support", "insightfulness"]
    assert out.justifications["depth"] == "About depth."
    assert out.mean == pytest.approx(sum(SCORES.values()) / 6)


def test_criteria_judge_clamps_scores_outside_the_scale(lm):
    out = CriteriaJudge(lm=lm, criteria={"novelty": "New ideas."})(question="q", report=REPORT)
    assert out.scores == {"novelty": 10}


def test_citation_support_judge_grades_cited_claims(lm):
    claims = [
        Sentence("Bees pollinate most crops.", ("1",)),
        Sentence("Uncited.", ()),
        Sentence("Pesticides reduce bee foraging.", ("2",)),
        Sentence("Ghost claim.", ("9",)),
    ]
    out = CitationSupportJudge(lm=lm)(claims=claims, passages={"1": "Bees pollinate crops.", "2": "Foraging fell."})
    assert out.grades == [1.0, 0.5, 0.0]
    assert out.precision == pytest.approx(0.5)
    assert lm.scripted.calls == 2  # the unresolvable citation is graded 0 without a call


def test_cache_makes_rescoring_free(lm, make_lm, routed, tmp_path):
    cache = JudgeCache(tmp_path / "verdicts")
    first = CriteriaJudge(lm=lm, cache=cache)(question="q", report=REPORT)
    assert lm.scripted.calls == 6
    again = CriteriaJudge(lm=lm, cache=JudgeCache(tmp_path / "verdicts"))(question="q", report=REPORT)
    assert lm.scripted.calls == 6
    assert again.scores == first.scores and again.justifications == first.justifications
    CriteriaJudge(lm=lm, cache=cache)(question="q", report=REPORT + " More.")
    assert lm.scripted.calls == 12  # a changed report is judged again
    other = make_lm(routed(judge_routes()), model="fake/other-judge")
    CriteriaJudge(lm=other, cache=cache)(question="q", report=REPORT)
    assert other.scripted.calls == 6  # so is the same report under another judge model


def test_judge_without_lm_says_how_to_configure():
    with pytest.raises(ValueError, match="judge_lm"):
        KeyPointJudge()(question="q", report=REPORT, key_points=["x"])


def test_judge_uses_the_lm_in_context_when_none_is_given(lm):
    with dspy.context(lm=lm):
        out = KeyPointJudge()(question="q", report=REPORT, key_points=["Wind pollinates grasses."])
    assert out.verdicts == ["Omitted"]


def test_judge_lm_defaults_to_temperature_zero():
    lm = judge_lm("openai/gpt-4.1-mini", api_base="http://127.0.0.1:9/v1")
    assert lm.kwargs["temperature"] == 0.0
    assert (
        judge_lm("openai/gpt-4.1-mini", api_base="http://127.0.0.1:9/v1", temperature=0.3).kwargs["temperature"] == 0.3
    )
    with pytest.raises(ValueError, match="need an LM"):
        judge_lm("offline")


def test_judges_are_not_visible_to_program_optimizers():
    from deepresearch.programs.research.program import DeepResearch

    class Null:
        def search(self, query, k=10):
            return []

    names = [n for n, _ in DeepResearch(retriever=Null()).named_predictors()]
    assert not any("judge" in n or "rate_report" in n for n in names)


def test_the_verdict_cache_is_bounded_and_drops_the_oldest_first(tmp_path):
    cache = JudgeCache(tmp_path / "verdicts", size_limit=400_000)
    verdict = {"justification": "x" * 100_000}  # past diskcache's 32 KiB, each verdict is a file of its own
    for i in range(12):
        cache.put(f"key{i}", verdict | {"i": i})
    kept = [i for i in range(12) if cache.get(f"key{i}") is not None]
    assert kept == list(range(12 - len(kept), 12)) and 2 <= len(kept) <= 4  # the newest, about 400 kB of them
    assert JudgeCache(tmp_path / "verdicts").get("key11") == verdict | {"i": 11}
