"""The prompt cuts of issue 18 do what they claim, observed at the LM boundary; tokens are counted per node."""

import json

import dspy
import pytest

from deepresearch.programs.config import HeroConfig, ResearchConfig, preset
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.assessor import task_view
from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.signatures import AssessRelevance, ExtractLearnings
from deepresearch.signatures.types import Source, Task
from tests.research_lm import research_handler
from tests.scripted import inputs_of, is_signature_prompt, scripted_lm

QUESTION = "Does melatonin improve sleep quality in shift workers?"
OFF_TOPIC = "The hospital car park was resurfaced in the spring of that year by a local contractor."
ON_TOPIC = "Melatonin improved sleep quality in night shift workers by 20 minutes per night."


def passage(i: int) -> str:
    filler = " ".join(
        f"Background sentence {j} of paper {i} describes the cohort recruitment in detail." for j in range(4)
    )
    return f"{filler} {OFF_TOPIC} {ON_TOPIC} {filler}"


@pytest.fixture(scope="module")
def retriever():
    docs = [Doc(doc_id=f"m{i}", title=f"Melatonin and shift work {i}", text=passage(i)) for i in range(6)]
    docs.append(Doc(doc_id="copy", title="Melatonin and shift work 0 (preprint)", text=passage(0)))  # same text as m0
    docs += [
        Doc(doc_id=f"z{i}", title=f"Soil survey {i}", text="Clay soils drain slowly after rain.") for i in range(30)
    ]
    return BM25Retriever(Corpus(docs, name="toy"))


def calls_of(lm, signature) -> list[dict[str, str]]:
    """The rendered inputs of each request `signature` made, in order."""
    wanted = set(signature.input_fields)
    return [inputs_of(m) for m in lm.scripted.prompts if is_signature_prompt(m) and wanted <= set(inputs_of(m))]


def run(retriever, config: ResearchConfig):
    lm = scripted_lm(research_handler())
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=retriever, config=config)(question=QUESTION)
    return lm, out


def sent_ids(call: dict[str, str], field: str) -> list[str]:
    """The papers a call was shown, by title (each toy paper's title is its own; the extractor sees no ids)."""
    return [p["title"] for p in json.loads(call[field])]


def said(call: dict[str, str]) -> list[list[str]]:
    """The sentences of each passage an extractor call was shown."""
    return [list(p["sentences"].values()) for p in json.loads(call["passages"])]


@pytest.mark.parametrize("skip_seen", ["lineage", "node", "off"])
def test_a_passage_is_sent_once_per_node_and_not_again_below_it(retriever, skip_seen):
    config = ResearchConfig(depth=2, breadth=1, hits_per_query=7, max_passages=8, skip_seen=skip_seen)
    lm, out = run(retriever, config)
    parent, *below = calls_of(lm, ExtractLearnings)  # breadth 1: one node, then its one child, in that order
    texts = {" ".join(s) for s in said(parent)}
    ids = sent_ids(parent, "passages")
    child = out.report.tree[0].children[0]
    assert len(child.retrieved_ids) == 7  # the child searched and found the same papers
    if skip_seen == "off":  # the control: the duplicate text goes too, and the child reads it all again
        assert len(texts) < len(ids) == 7 and [set(sent_ids(c, "passages")) for c in below] == [set(ids)]
    elif skip_seen == "node":  # one paper's text once per node; the child reads the same papers again
        assert len(texts) == len(ids) == 6
        assert [{" ".join(s) for s in said(c)} for c in below] == [texts]
    else:  # and nothing the parent's extractor read goes to its child
        assert len(texts) == len(ids) == 6
        assert below == [] and not child.learnings
    assert out.report.status == "done"


def test_the_assessor_and_the_extractor_see_the_sentences_on_the_task(retriever):
    config = ResearchConfig(depth=1, breadth=1, hits_per_query=3, assess_sentences=3, extract_sentences=2)
    lm, out = run(retriever, config)
    (assessed,), (extracted,) = calls_of(lm, AssessRelevance), calls_of(lm, ExtractLearnings)
    for paper in json.loads(assessed["papers"]):
        assert ON_TOPIC in paper["text"] and OFF_TOPIC not in paper["text"] and paper["title"].startswith("Melatonin")
    assert all(len(s) == 2 and ON_TOPIC in s and OFF_TOPIC not in s for s in said(extracted))
    assert out.learnings and {x.text for x in out.learnings} <= {t for s in said(extracted) for t in s}
    lm_full, _ = run(
        retriever, ResearchConfig(depth=1, breadth=1, hits_per_query=3, assess_sentences=0, extract_sentences=0)
    )
    (full,), (full_extracted,) = calls_of(lm_full, AssessRelevance), calls_of(lm_full, ExtractLearnings)
    assert len(full["papers"]) > 2 * len(assessed["papers"])
    assert all(OFF_TOPIC in p["text"] for p in json.loads(full["papers"]))
    assert all(len(s) == 10 and OFF_TOPIC in s for s in said(full_extracted))  # every sentence of the passage


def test_task_view_keeps_the_best_sentences_in_their_order():
    task = Task(query="melatonin shift workers sleep", goal="whether sleep quality improves")
    text = (
        "Recruitment took place in two hospitals. Melatonin was given before day sleep. "
        "The car park was resurfaced. Shift workers on melatonin reported better sleep quality."
    )
    view = task_view(Source(source_id="s1", title="T", text=text), task, 2)
    assert view.text == (
        "Melatonin was given before day sleep. Shift workers on melatonin reported better sleep quality."
    )
    assert task_view(Source(source_id="s1", title="T", text=text), task, 4).text == text


def test_hero_enrichments_are_not_sent_their_pipelines_passages(retriever):
    config = preset(
        "hero",
        hits_per_query=6,
        max_lm_calls=None,
        skip_seen="lineage",
        hero=HeroConfig(turns=1, tasks_per_turn=1, deep_depth=6, shallow_depth=6, batch_size=3, enrichments=1),
    )
    lm, out = run(retriever, config)
    calls = calls_of(lm, ExtractLearnings)
    pipeline_query = out.report.tree[0].query
    read = {i for c in calls if json.loads(c["task"])["query"] == pipeline_query for i in sent_ids(c, "passages")}
    later = [i for c in calls if json.loads(c["task"])["query"] != pipeline_query for i in sent_ids(c, "passages")]
    assert read and not read.intersection(later)


def test_each_node_records_its_tokens_per_stage_in_the_trace(retriever):
    _, out = run(retriever, ResearchConfig(depth=1, breadth=2, hits_per_query=3))
    trace = out.report.to_dict()
    for node in trace["tree"]:
        (line,) = [n for n in node["notes"] if n.startswith("tokens:")]
        # the scripted LM reports 10 prompt and 5 completion tokens per request: assess, extract, merge
        assert (
            line == "tokens: 30 prompt + 15 completion (assess 1 calls 10+5, extract 1 calls 10+5, merge 1 calls 10+5)"
        )
    assert any(n.startswith("tokens:") and "plan 1 calls" in n for n in trace["stats"]["root_notes"])


def test_prompt_tokens_read_from_the_servers_cache_are_counted_and_priced(retriever):
    import litellm

    from deepresearch.programs.artifacts import Report

    # the scripted server reports 10 prompt tokens a request, 4 of them read from its prompt cache
    litellm.model_cost["openai/fake-cached-prices"] = {
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 2e-6,
        "cache_read_input_token_cost": 1e-7,
    }
    try:
        lm = scripted_lm(research_handler(), model="openai/fake-cached-prices", cached=4)
        with dspy.context(lm=lm):
            out = DeepResearch(retriever=retriever, config=ResearchConfig(depth=1, breadth=2))(question=QUESTION)
    finally:
        del litellm.model_cost["openai/fake-cached-prices"]
    usage = out.report.usage
    assert usage and all(u.cached_tokens == 4 * u.calls and u.prompt_tokens == 10 * u.calls for u in usage.values())
    assert Report.from_dict(json.loads(json.dumps(out.report.to_dict()))).usage == usage
    per_call = 6 * 1e-6 + 4 * 1e-7 + 5 * 2e-6  # 6 uncached + 4 cached prompt tokens, 5 completion tokens
    assert out.report.stats.cost["total"] == pytest.approx(sum(u.calls for u in usage.values()) * per_call)
    lm = scripted_lm(research_handler())  # a server that reports no cache
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=retriever, config=ResearchConfig(depth=1, breadth=2))(question=QUESTION)
    assert all(u.cached_tokens == 0 for u in out.report.usage.values())


def test_stable_prompt_parts_come_first(retriever):
    # a server's prompt cache reuses a prefix: every extract request of a run shares its system message, and
    # its user message gives the question (the same for the whole run) before the task and then the passages
    lm, _ = run(retriever, ResearchConfig(depth=1, breadth=2, hits_per_query=3))
    prompts = [m for m in lm.scripted.prompts if {"question", "task", "passages"} <= set(inputs_of(m))]
    assert len(prompts) == 2 and prompts[0][0] == prompts[1][0]
    for m in prompts:
        user = m[-1]["content"]
        assert user.index("[[ ## question ## ]]") < user.index("[[ ## task ## ]]") < user.index("[[ ## passages ## ]]")
