"""The stage registry builds the programs: each stage's module sits at its attribute, calls its signatures,
and its offline twin holds the same predictors (so it can teach the LM module)."""

import dspy
import pytest

from deepresearch.programs.config import PRESETS, preset
from deepresearch.programs.gather.loop import Gatherer
from deepresearch.programs.research.program import STRATEGIES, DeepResearch
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.bm25 import BM25Retriever
from deepresearch.retrievers.types import Doc


@pytest.fixture(scope="module")
def retriever():
    return BM25Retriever([Doc(doc_id="d1", title="Warming", text="Warming advances flowering in alpine plants.")])


def _signatures(module: dspy.Module) -> set[str]:
    """The instructions of the module's predictors (ChainOfThought extends its signature under a new name)."""
    return {p.signature.instructions for _, p in module.named_predictors()}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("offline", [False, True])
def test_every_research_stage_sits_at_its_attribute_with_its_module(retriever, strategy, offline):
    name = next(n for n, c in PRESETS.items() if c.strategy == strategy)
    program = DeepResearch(retriever, preset(name), offline=offline)
    assert program.stage_table() == STAGES.research(strategy)
    for stage, attr in STAGES.research(strategy).items():
        spec = STAGES[stage]
        module = getattr(program, attr)
        assert type(module) is (spec.offline if offline else spec.module), (stage, type(module))
        assert module.is_offline == offline, stage
        # the LM module calls exactly the registered signatures; its twin holds the same predictors
        calls = (*spec.signatures, *(x for c in STAGES if c.part_of == stage for x in c.signatures))
        assert _signatures(module) == {s.instructions for s in calls}, stage


def test_gatherer_stages_sit_at_their_attributes(retriever):
    program = Gatherer(retriever)
    for stage, attr in STAGES.gather().items():
        spec = STAGES[stage]
        assert type(getattr(program, attr)) is spec.module
        calls = (*spec.signatures, *(x for c in STAGES if c.part_of == stage for x in c.signatures))
        assert _signatures(getattr(program, attr)) == {s.instructions for s in calls}, stage


def test_names_and_attributes_are_unique_and_each_spec_is_reachable_by_both():
    names = STAGES.names()
    assert len(set(names)) == len(names)
    attrs = [s.research_attr for s in STAGES if s.research_attr]
    assert len(set(attrs)) == len(attrs)
    assert not set(names) & set(attrs)
    for spec in STAGES:
        assert STAGES[spec.name] is spec
        assert getattr(STAGES, spec.name) is spec
        if spec.research_attr:
            assert STAGES[spec.research_attr] is spec


def test_every_offline_twin_is_its_modules_subclass_under_the_same_predictor_names(retriever):
    from deepresearch.programs.config import ResearchConfig

    for spec in STAGES:
        if spec.offline is None:
            continue
        assert issubclass(spec.offline, spec.module), spec.name
        lm_module = spec.build(ResearchConfig(), retriever)
        twin = spec.build(ResearchConfig(), retriever, offline=True)
        assert [n for n, _ in twin.named_predictors()] == [n for n, _ in lm_module.named_predictors()], spec.name


def test_unknown_stage_names_the_choices():
    with pytest.raises(KeyError, match="unknown stage 'nope'; choose one of: clarify, plan"):
        STAGES["nope"]
