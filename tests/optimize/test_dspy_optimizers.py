"""dr.Gatherer compiles with DSPy's own optimizers through their own `compile`, and `dspy.Evaluate` scores the
result: the optimizers a DSPy user reaches for, each at its smallest budget, with a scripted LM at DSPy's LM
boundary (the gathering stages answer as a planner and an assessor would; the optimizers' own prompts get
well-typed placeholders)."""

from __future__ import annotations

import dspy
import pytest

import deepresearch as dr
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries
from tests.eval.test_gather_runner import keep_first, planner
from tests.research_lm import research_handler
from tests.scripted import routed_handler, scripted_lm, universal_handler


def gathering_lm() -> dspy.LM:
    """The gathering stages' scripted answers; anything else (an optimizer's proposer) the universal one."""
    stages, other = routed_handler({PlanSubqueries: planner, LabelCandidates: keep_first}), universal_handler()

    def handler(messages):
        try:
            return stages(messages)
        except AssertionError:  # not a gathering stage's prompt
            return other(messages)

    return scripted_lm(handler)


OPTIMIZERS = {
    "BootstrapFewShotWithRandomSearch": lambda metric, lm: dspy.BootstrapFewShotWithRandomSearch(
        metric=metric, max_bootstrapped_demos=1, max_labeled_demos=0, num_candidate_programs=1, num_threads=1
    ),
    "MIPROv2": lambda metric, lm: dspy.MIPROv2(
        metric=metric,
        prompt_model=lm,
        task_model=lm,
        auto=None,
        num_candidates=2,
        max_bootstrapped_demos=1,
        max_labeled_demos=0,
        num_threads=1,
    ),
    "SIMBA": lambda metric, lm: dspy.SIMBA(metric=metric, bsize=2, num_candidates=2, max_steps=1, num_threads=1),
    "GEPA": lambda metric, lm: dspy.GEPA(
        metric=dr.metrics.as_gepa_metric(dr.metrics.metric_spec("gather", "f1")),
        reflection_lm=lm,
        max_metric_calls=8,
        num_threads=1,
    ),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_the_gatherer_compiles_with_dspys_own_optimizer(name, scifact_bm25):
    train = dr.examples("scifact", "train", limit=4)
    dev = dr.examples("scifact", "test", limit=2)
    lm = gathering_lm()
    gatherer = dr.Gatherer(scifact_bm25, iterations=1)
    optimizer = OPTIMIZERS[name](dr.metrics.gather_f1, lm)
    kwargs = {"num_trials": 2, "minibatch": False} if name == "MIPROv2" else {}
    with dspy.context(lm=lm):
        compiled = optimizer.compile(gatherer, trainset=train, **kwargs)
        score = dspy.Evaluate(devset=dev, metric=dr.metrics.gather_f1, num_threads=1)(compiled).score
    assert isinstance(compiled, dr.Gatherer) and compiled is not gatherer
    assert [n for n, _ in compiled.named_predictors()] == [n for n, _ in gatherer.named_predictors()]
    assert 0.0 <= score <= 100.0 and lm.scripted.calls > 0


def test_the_research_program_compiles_with_random_search_and_the_offline_teacher(scifact_bm25):
    train = dr.examples("scifact", "train", limit=3)
    lm = scripted_lm(research_handler())
    program = dr.DeepResearch(retriever=scifact_bm25, config=dr.preset("quick"))
    optimizer = dspy.BootstrapFewShotWithRandomSearch(
        metric=dr.metrics.cited_recall, max_bootstrapped_demos=1, max_labeled_demos=0, num_candidate_programs=1
    )
    with dspy.context(lm=lm):
        compiled = optimizer.compile(program, teacher=program.offline(), trainset=train)
        score = dspy.Evaluate(devset=train[:1], metric=dr.metrics.cited_recall, num_threads=1)(compiled).score
    assert isinstance(compiled, dr.DeepResearch) and 0.0 <= score <= 100.0
    # the search tried programs with the offline teacher's demonstrations (the best may still be the zero-shot one)
    tried = [c["program"] for c in compiled.candidate_programs]
    assert any(p.demos for program in tried for _, p in program.named_predictors())
