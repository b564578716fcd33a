"""TaxoBench's taxonomy judge with a scripted LM, and the averages of TaxoBench's Table 7."""

from __future__ import annotations

import json

import diskcache
import pytest

from deepresearch.eval.judges import JudgeCache, JudgeTaxonomy
from deepresearch.eval.taxonomy_judge import (
    DIMENSIONS,
    JudgeAnswerError,
    TaxonomyJudge,
    judgement_average,
    parse_judgement,
    summarize_judgements,
)
from deepresearch.eval.taxonomy_tree import render_tree
from tests.scripted import chat_format, inputs_of, scripted_lm

EXPERT = {
    "name": "LLM alignment",
    "subtopics": [
        {
            "name": "Reward modelling",
            "subtopics": [
                {"name": "Preference data", "papers": ["Learning to summarize from human feedback"]},
                {"name": "Reward hacking", "papers": [{"title": "Scaling laws for reward model overoptimization"}]},
            ],
        },
        {"name": "Direct preference optimisation", "papers": ["Direct Preference Optimization"]},
    ],
}
MODEL = {
    "name": "LLM alignment",
    "subtopics": [
        {"name": "RLHF", "papers": ["Learning to summarize from human feedback", "Direct Preference Optimization"]},
        {"name": "Evaluation", "papers": ["Scaling laws for reward model overoptimization"]},
    ],
}
TITLES = [
    "Learning to summarize from human feedback",
    "Scaling laws for reward model overoptimization",
    "Direct Preference Optimization",
]
ANSWER = {
    "semantic_coverage": {"reasoning": "Reward modelling is half recalled.", "score": 3},
    "sibling_organization": {"reasoning": "RLHF and Evaluation split on different criteria.", "score": 2},
    "hierarchical_logic": {"reasoning": "RLHF does not contain DPO.", "score": 4},
    "structural_topology": {"reasoning": "Flat where the experts go two levels deep.", "score": 2},
}

# TaxoBench's Table 7: system -> (Cov., Org., Log., Topo., Avg.) as printed.
TABLE_7 = {
    "o3": (2.14, 2.71, 3.06, 2.28, 2.55),
    "Doubao": (1.90, 2.57, 2.86, 2.03, 2.34),
    "DeepSeek": (1.90, 2.57, 2.75, 1.96, 2.30),
    "Gemini": (2.03, 2.76, 2.78, 2.25, 2.46),
    "Grok": (2.08, 2.58, 3.06, 2.19, 2.48),
    "Perplexity": (2.07, 2.60, 2.78, 2.10, 2.39),
    "Qwen": (2.01, 2.62, 2.76, 2.08, 2.37),
    "Claude-4.5-Sonnet": (2.17, 2.74, 2.90, 2.32, 2.53),
    "GPT-5": (2.11, 2.71, 2.83, 2.43, 2.52),
    "Gemini-3-Pro*": (2.18, 2.57, 2.97, 2.46, 2.55),
    "DeepSeek-V3.2": (2.17, 2.65, 3.01, 2.53, 2.59),
    "Qwen3-Max*": (2.14, 2.54, 2.85, 2.29, 2.46),
    "Kimi-K2": (2.04, 2.57, 2.85, 2.36, 2.46),
    "Claude-4.5-Sonnet-Thinking": (2.17, 2.68, 2.83, 2.32, 2.50),
    "GPT-5-Thinking": (2.14, 2.68, 2.83, 2.29, 2.49),
    "Gemini-3-Pro-Thinking*": (2.03, 2.71, 2.81, 2.28, 2.46),
    "DeepSeek-V3.2-Thinking": (2.14, 2.54, 2.94, 2.25, 2.47),
    "Qwen3-Max-Thinking*": (2.11, 2.60, 2.88, 2.43, 2.50),
    "Kimi-K2-Thinking": (2.10, 2.50, 2.64, 2.39, 2.41),
}


@pytest.fixture
def lm(routed):
    return scripted_lm(routed({JudgeTaxonomy: ANSWER}))


def test_render_tree_draws_connectors_and_leaves_out_papers():
    assert render_tree(EXPERT) == (
        "LLM alignment\n"
        "├── Reward modelling\n"
        "│   ├── Preference data\n"
        "│   └── Reward hacking\n"
        "└── Direct preference optimisation"
    )
    assert render_tree({"name": "root only", "papers": ["A paper"]}) == "root only"


def test_judge_sees_both_text_trees_without_paper_titles(lm):
    TaxonomyJudge(lm=lm)(topic="LLM alignment", reference=EXPERT, tree=MODEL)
    assert lm.scripted.calls == 1
    messages = lm.scripted.prompts[0]
    inputs = inputs_of(messages)
    assert inputs["topic"] == "LLM alignment"
    assert inputs["reference_tree"] == render_tree(EXPERT)
    assert inputs["model_tree"] == "LLM alignment\n├── RLHF\n└── Evaluation"
    prompt = "\n".join(m["content"] for m in messages)
    assert not any(title in prompt for title in TITLES)
    assert "rigour and objectivity of a specialist" in messages[0]["content"]  # TaxoBench's expert standard


def test_judge_returns_the_four_scores_and_their_average(lm):
    out = TaxonomyJudge(lm=lm)(topic="LLM alignment", reference=EXPERT, tree=MODEL)
    assert out.scores == {
        "semantic_coverage": 3,
        "sibling_organization": 2,
        "hierarchical_logic": 4,
        "structural_topology": 2,
    }
    assert list(out.scores) == list(DIMENSIONS)
    assert out.average == pytest.approx(11 / 4)
    assert out.reasoning["hierarchical_logic"] == "RLHF does not contain DPO."
    assert out.judgement.to_dict()["average"] == out.average


def test_judge_of_a_failed_tree_renders_a_root_named_after_the_topic(lm):
    TaxonomyJudge(lm=lm)(topic="LLM alignment", reference=EXPERT, tree="FIX FAILED")
    assert inputs_of(lm.scripted.prompts[0])["model_tree"] == "LLM alignment"


def test_scores_outside_the_scale_are_clamped_and_unusable_answers_raise(routed):
    wild = ANSWER | {
        "semantic_coverage": {"reasoning": "r", "score": 7},
        "structural_topology": {"reasoning": "r", "score": 0},
    }
    out = TaxonomyJudge(lm=scripted_lm(routed({JudgeTaxonomy: wild})))(topic="t", reference=EXPERT, tree=MODEL)
    assert out.scores["semantic_coverage"] == 5 and out.scores["structural_topology"] == 1
    with pytest.raises(JudgeAnswerError, match="no integer score for hierarchical_logic"):
        parse_judgement(ANSWER | {"hierarchical_logic": {"reasoning": "r"}})
    with pytest.raises(JudgeAnswerError, match="could not be parsed"):
        TaxonomyJudge(lm=scripted_lm(lambda m: chat_format({"semantic_coverage": "great"})))(
            topic="t", reference=EXPERT, tree=MODEL
        )


def test_cache_makes_rejudging_free(lm, tmp_path):
    first = TaxonomyJudge(lm=lm, cache=JudgeCache(tmp_path / "verdicts"))(topic="t", reference=EXPERT, tree=MODEL)
    assert lm.scripted.calls == 1
    again = TaxonomyJudge(lm=lm, cache=JudgeCache(tmp_path / "verdicts"))(topic="t", reference=EXPERT, tree=MODEL)
    assert lm.scripted.calls == 1
    assert again.judgement == first.judgement
    with diskcache.Cache(str(tmp_path / "verdicts")) as stored:
        assert [json.loads(stored[key]) for key in stored] == [ANSWER]
    TaxonomyJudge(lm=lm, cache=JudgeCache(tmp_path / "verdicts"))(topic="t", reference=EXPERT, tree=EXPERT)
    assert lm.scripted.calls == 2  # another tree is another verdict


def test_summarize_judgements_averages_each_dimension_over_trees(lm):
    judge = TaxonomyJudge(lm=lm)
    judgement = judge(topic="t", reference=EXPERT, tree=MODEL).judgement
    other = dict.fromkeys(DIMENSIONS, 5)
    summary = summarize_judgements([judgement, other])
    assert summary["semantic_coverage"] == 4.0 and summary["structural_topology"] == 3.5
    assert summary["average"] == pytest.approx((judgement.average + 5) / 2)
    assert summary["trees"] == 2
    assert summarize_judgements([]) == dict.fromkeys(DIMENSIONS, 0.0) | {"average": 0.0, "trees": 0}


# Table 7's Avg column is the mean of the four dimensions to 0.01.
@pytest.mark.parametrize("system", list(TABLE_7))
def test_table_7_average_is_the_mean_of_the_four_dimensions(system):
    *dims, printed = TABLE_7[system]
    summary = summarize_judgements([dict(zip(DIMENSIONS, dims))])
    assert summary["average"] == pytest.approx(printed, abs=0.01)
    assert judgement_average(dict(zip(DIMENSIONS, dims))) == summary["average"]


def test_table_7_o3_row_as_the_spec_works_it():
    assert sum(TABLE_7["o3"][:4]) == pytest.approx(10.19)
    assert round(summarize_judgements([dict(zip(DIMENSIONS, TABLE_7["o3"][:4]))])["average"], 2) == 2.55
