"""The gathering loop with a scripted LM over a small hand-made corpus whose BM25 ranking is known.

"alpha" documents a00..a19 have equal length and 20, 19, ... occurrences of "alpha", so BM25 ranks them in
index order; `late` scores highest but is published after the date constraint. The "omega" documents
keep "alpha" rare enough for a positive IDF.
"""

import asyncio
import json

import dspy
import pytest

from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.gather.baselines import DirectQuery
from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.lm.models import SchemaAdapter
from deepresearch.programs.stages.gathering import CandidateAssessor, OfflineCandidateAssessor
from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.retrievers.types import Hit
from deepresearch.signatures.gather import (
    CandidatePreview,
    LabelCandidates,
    PlanSubqueries,
    RecheckCandidate,
    WriteSearchQuery,
)
from tests.scripted import inputs_of, shown_candidates

DATE = "2020-01"


def toy_docs():
    docs = [
        Doc(
            doc_id=f"a{i:02d}",
            title="alpha report",
            text=" ".join(["alpha"] * (20 - i) + ["filler"] * i),
            published="2019-05",
        )
        for i in range(20)
    ]
    docs += [
        Doc(doc_id=f"g{i}", title="gamma note", text=" ".join(["gamma"] * (5 - i) + ["filler"] * (15 + i)))
        for i in range(5)
    ]
    docs += [Doc(doc_id=f"z{i:02d}", title="omega survey", text="omega lorem ipsum dolor sit amet") for i in range(40)]
    docs.append(Doc(doc_id="late", title="alpha alpha", text=" ".join(["alpha"] * 20), published="2021-03"))
    return docs


TOY = toy_docs()


@pytest.fixture(scope="module")
def corpus():
    return Corpus(TOY, name="toy")


@pytest.fixture(scope="module")
def retriever(corpus):
    return BM25Retriever(corpus)


def tree_of(messages):
    return json.loads(inputs_of(messages)["subquery_tree"])


def planner(rounds, complete_at=None, memory=None):
    """Answers round n (counted by the tree size seen) with rounds[n]; nothing once the script runs out."""
    sizes = {}

    def answer(messages):
        size = len(tree_of(messages))
        n = sizes.setdefault(size, len(sizes))
        searches = rounds[n] if n < len(rounds) else []
        return {
            "searches": searches,
            "checklist_update": f"criteria {n}",
            "memory_update": memory or f"memory {n}",
            "is_complete": complete_at == n,
        }

    return answer


def assessor(keep, uncertain=()):
    def answer(messages):
        def label(d):
            return "relevant" if d in keep else "uncertain" if d in uncertain else "irrelevant"

        return {"relevance": {key: label(d) for key, d in shown_candidates(messages, TOY).items()}}

    return answer


def run(gatherer, lm, question="alpha question", date=DATE):
    with dspy.context(lm=lm):
        return asyncio.run(gatherer.acall(question=question, date_constraint=date))


ROUNDS = [
    [
        {"action": "derive", "source_id": 0, "text": "alpha", "target_k": 3},
        {"action": "continue", "source_id": 0, "target_k": 3},  # dropped: the root cannot be continued
        {"action": "derive", "source_id": 9, "text": "beta", "target_k": 3},  # dropped: no node 9
        {"action": "expand", "source_id": 0, "text": "gamma", "target_k": 50},
    ],  # repaired: k clamped to 10
    [
        {"action": "continue", "source_id": 1, "target_k": 3},
        {"action": "continue", "source_id": 1, "target_k": 3},  # dropped: one continue per node
        {"action": "expand", "source_id": 1, "text": "gamma filler", "target_k": 2},
        {"action": "derive", "source_id": 1, "text": "alpha filler", "target_k": 2},
        {"action": "derive", "source_id": 2, "text": "ALPHA", "target_k": 2},
    ],  # dropped: repeats node 1
]


def test_actions_shape_the_tree_and_invalid_ones_are_dropped(retriever, make_lm, routed):
    lm = make_lm(routed({PlanSubqueries: planner(ROUNDS), LabelCandidates: assessor({"a01", "g0"})}))
    out = run(Gatherer(retriever, iterations=5), lm)
    tree = {n.node_id: (n.parent_id, n.link, n.text, n.iteration) for n in out.tree}
    assert tree == {
        0: (None, "root", "alpha question", 0),
        1: (0, "derive", "alpha", 1),
        2: (0, "expand", "gamma", 1),
        3: (0, "expand", "gamma filler", 2),
        4: (1, "derive", "alpha filler", 2),
    }
    first, second = out.result.rounds
    assert first.dropped == ("continue on the root", "unknown source 9") and first.repaired == 1
    assert [s.k for s in first.searches] == [3, 10]
    assert len(second.dropped) == 2 and any("repeated query" in d for d in second.dropped)
    assert out.result.stop_reason == "no_new_subqueries" and not out.result.is_failed
    assert lm.scripted.calls == 3 + 2 + 3  # three plans, two assessments in round 1, three in round 2
    assert first.checklist == "criteria 0" and second.memory == "memory 1"


def test_continue_fetches_the_next_page_without_selected_papers(retriever, make_lm, routed):
    lm = make_lm(routed({PlanSubqueries: planner(ROUNDS), LabelCandidates: assessor({"a01", "g0"})}))
    result = run(Gatherer(retriever), lm).result
    page1 = result.rounds[0].searches[0]
    assert [c.doc_id for c in page1.candidates] == ["a00", "a01", "a02"]  # `late` is after the date constraint
    page2 = result.rounds[1].searches[0]
    assert (page2.node_id, page2.action) == (1, "continue")
    # a01 was selected, so the filtered ranking is a00 a02 a03 ...: the next page starts after the two still shown.
    assert page2.offset == 2 and [(c.doc_id, c.rank) for c in page2.candidates] == [("a03", 3), ("a04", 4), ("a05", 5)]
    selected_before = {"a01", "g0"}
    assert all(c.doc_id not in selected_before for s in result.rounds[1].searches for c in s.candidates)
    assert {(x.doc_id, x.iteration, x.node_id) for x in result.selected} == {("a01", 1, 1), ("g0", 1, 2)}
    assert "late" not in {c.doc_id for r in result.rounds for s in r.searches for c in s.candidates}


def test_loop_stops_after_the_iteration_limit(retriever, make_lm, routed):
    def always_new(messages):
        n = len(tree_of(messages))
        return {
            "searches": [{"action": "derive", "source_id": 0, "text": f"alpha variant {n}", "target_k": 2}],
            "checklist_update": "c",
            "memory_update": "m",
            "is_complete": False,
        }

    lm = make_lm(routed({PlanSubqueries: always_new, LabelCandidates: assessor(set())}))
    result = run(Gatherer(retriever, iterations=2), lm).result
    assert result.stop_reason == "iterations" and len(result.rounds) == 2 and len(result.tree) == 3


def test_completion_before_any_selection_marks_the_query_failed(retriever, make_lm, routed):
    lm = make_lm(routed({PlanSubqueries: planner(ROUNDS, complete_at=0), LabelCandidates: assessor(set())}))
    result = run(Gatherer(retriever), lm).result
    assert (result.stop_reason, result.is_failed, result.rounds) == ("complete", True, ())
    lm = make_lm(routed({PlanSubqueries: planner([]), LabelCandidates: assessor(set())}))
    result = run(Gatherer(retriever), lm).result
    assert (result.stop_reason, result.is_failed) == ("no_new_subqueries", True)


def test_memory_stays_bounded(retriever, make_lm, routed):
    lm = make_lm(routed({PlanSubqueries: planner(ROUNDS, memory="word " * 5000), LabelCandidates: assessor(set())}))
    run(Gatherer(retriever, GatherConfig(memory_chars=300)), lm)
    memories = [inputs_of(m)["memory"] for m in lm.scripted.prompts if "subquery_tree" in inputs_of(m)]
    assert memories[0] == "" and all(len(m) <= 302 for m in memories[1:]) and len(memories) == 3


def test_uncertain_candidates_get_a_second_look_at_the_full_text(retriever, make_lm, routed):
    rounds = [[{"action": "derive", "source_id": 0, "text": "alpha", "target_k": 3}]]
    seen = []

    def recheck(messages):
        paper = json.loads(inputs_of(messages)["paper"])
        seen.append(paper)
        return {"is_relevant": True, "evidence": "The full text fits."}

    third_uncertain = {"relevance": {"1": "irrelevant", "2": "irrelevant", "3": "uncertain"}}  # a02 ranks third
    lm = make_lm(routed({PlanSubqueries: planner(rounds), LabelCandidates: third_uncertain, RecheckCandidate: recheck}))
    result = run(Gatherer(retriever, GatherConfig(preview_chars=20)), lm).result
    assert [x.doc_id for x in result.selected] == ["a02"]
    assert len(seen) == 1 and len(seen[0]["abstract"]) > 20  # the first look was cut to 20 characters
    lm = make_lm(routed({PlanSubqueries: planner(rounds), LabelCandidates: assessor(set(), uncertain={"a02"})}))
    assert run(Gatherer(retriever, GatherConfig(second_look=False)), lm).result.selected == ()


def test_ranking_depth_records_the_top_of_each_ranking(retriever, make_lm, routed):
    rounds = [[{"action": "derive", "source_id": 0, "text": "alpha", "target_k": 2}]]
    lm = make_lm(routed({PlanSubqueries: planner(rounds), LabelCandidates: assessor(set())}))
    search = run(Gatherer(retriever, GatherConfig(ranking_depth=5)), lm).result.rounds[0].searches[0]
    assert search.ranking == ("a00", "a01", "a02", "a03", "a04") and len(search.candidates) == 2


def test_result_round_trips_through_json(retriever, make_lm, routed):
    lm = make_lm(routed({PlanSubqueries: planner(ROUNDS), LabelCandidates: assessor({"a01"})}))
    result = run(Gatherer(retriever), lm).result
    again = GatherResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result and again.candidates()["a00"] == {1: 1}
    assert result.usage["gather_plan"].calls == 3


def test_assessor_ignores_unknown_ids_and_treats_unjudged_as_irrelevant(retriever, make_lm, routed):
    hits = retriever.search("alpha", 3)
    lm = make_lm(routed({LabelCandidates: {"relevance": {"nope": "relevant", "2": "relevant"}}}))
    with dspy.context(lm=lm):
        out = asyncio.run(CandidateAssessor().acall(question="q", subquery="alpha", checklist="", hits=hits))
    assert [j.label for j in out.judgements] == ["irrelevant", "relevant", "irrelevant"]
    assert (out.unlabelled, out.unknown) == (2, 1)
    assert "1 of 3 kept" in out.feedback and "(2 not labelled)" in out.feedback  # the planner's notes, from labels


def test_assessor_shows_each_candidate_its_title_and_best_sentences_only(make_lm, routed):
    text = (
        "Background on soil. Vitamin D lowers fracture risk in older adults. Weather was mild. "
        "Fracture rates fell further with calcium. Funding came from a trust."
    )
    hit = Hit(doc=Doc(doc_id="d1", title="A trial", text=text), score=1.0, rank=1)
    lm = make_lm(routed({LabelCandidates: {"relevance": {"1": "relevant"}}}))
    with dspy.context(lm=lm):
        asyncio.run(
            CandidateAssessor(sentences=2).acall(
                question="Does vitamin D reduce fracture risk?", subquery="vitamin D fracture", checklist="", hits=[hit]
            )
        )
    (shown,) = json.loads(inputs_of(lm.scripted.prompts[-1])["candidates"])
    assert shown == {
        "paper_id": "1",
        "title": "A trial",
        "text": "Vitamin D lowers fracture risk in older adults. Fracture rates fell further with calcium.",
        "match": 1.0,
    }


def test_assessor_shows_each_candidates_score_as_a_share_of_its_searchs_best_page_after_page(make_lm, routed):
    def hits(scores, first_rank):
        return [
            Hit(doc=Doc(doc_id=f"d{first_rank + i}", title="t", text="x."), score=s, rank=first_rank + i)
            for i, s in enumerate(scores)
        ]

    lm = make_lm(routed({LabelCandidates: {"relevance": {"1": "irrelevant"}}}))
    assessor = CandidateAssessor()
    shown = []
    with dspy.context(lm=lm):
        for page in (hits([4.0, 3.8, 2.0], 1), hits([1.0], 11)):  # the second page: the next results of the search
            asyncio.run(assessor.acall(question="q", subquery="s", checklist="", hits=page))
            shown.append([c["match"] for c in json.loads(inputs_of(lm.scripted.prompts[-1])["candidates"])])
    assert shown == [[1.0, 0.95, 0.5], [0.25]]


def test_the_offline_assessor_teaches_with_the_score_it_keeps_candidates_on(retriever):
    # the twin keeps a candidate scoring at least 0.9 of its search's best: the view it records for the LM
    # assessor to learn from shows that share, so the rule behind each label is in the demonstration
    hits = retriever.search("alpha", 20)
    twin = OfflineCandidateAssessor()
    with dspy.context(trace=[]):
        out = asyncio.run(twin.acall(question="alpha", subquery="alpha", checklist="", hits=hits))
        ((_, inputs, shown),) = dspy.settings.trace
    matches = [c.match for c in inputs["candidates"]]
    labels = [shown.relevance[c.paper_id] for c in inputs["candidates"]]
    assert matches == [round(h.score / hits[0].score, 2) for h in hits] and matches[0] == 1.0
    assert "relevant" in labels and "irrelevant" in labels
    assert all((label == "relevant") == (m >= 0.9) for m, label in zip(matches, labels))
    assert labels == [j.label for j in out.judgements]


def test_assessor_reply_in_the_json_format_parses_and_its_schema_requires_each_shown_id_once(make_lm):
    hits = [Hit(doc=Doc(doc_id=f"d{i}", title=f"t{i}", text="alpha text."), score=1.0, rank=i + 1) for i in range(2)]
    lm = make_lm(lambda messages: '{"relevance": {"1": "relevant", "2": "irrelevant"}}')
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        out = asyncio.run(CandidateAssessor().acall(question="q", subquery="s", checklist="", hits=hits))
    assert [j.label for j in out.judgements] == ["relevant", "irrelevant"]
    papers = [CandidatePreview(paper_id=str(n), title="t", text="x", match=1.0) for n in (1, 2)]
    schema = SchemaAdapter()._response_format(LabelCandidates, {"candidates": papers})["json_schema"]["schema"]
    labels = schema["properties"]["relevance"]
    assert labels["required"] == ["1", "2"] and labels["additionalProperties"] is False
    assert labels["properties"]["1"]["enum"] == ["relevant", "irrelevant", "uncertain"]


def test_gatherer_refuses_a_program_compiled_for_the_old_assessor_signature(retriever, tmp_path):
    path = tmp_path / "old.json"
    Gatherer(retriever).save(str(path))
    state = json.loads(path.read_text())
    state["assessor.assess_candidates"] = state.pop("assessor.label_candidates")  # what an older version saved
    path.write_text(json.dumps(state))
    with pytest.raises(
        ValueError,
        match=r"assessor.assess_candidates, compiled for an older signature.*compile "
        r"it again",
    ) as err:
        Gatherer(retriever).load(str(path))
    assert "\n" not in str(err.value)


def test_direct_query_baseline_selects_every_result_of_one_written_query(retriever, make_lm, routed):
    lm = make_lm(routed({WriteSearchQuery: {"query": "gamma"}}))
    with dspy.context(lm=lm):
        out = asyncio.run(DirectQuery(retriever, k=3).acall(question="what about gamma?"))
    assert out.result.tree[1].text == "gamma" and out.selected == ["g0", "g1", "g2"] and lm.scripted.calls == 1
    raw = DirectQuery(retriever, k=3, raw=True)(question="alpha", date_constraint=DATE)
    assert raw.selected == ["a00", "a01", "a02"] and raw.result.usage == {}


def test_offline_gatherer_is_deterministic_on_real_claims(scifact_bm25):
    gatherer = Gatherer(scifact_bm25, iterations=3, offline=True)
    question = "Vitamin D supplementation reduces the risk of fractures in older adults."
    first, second = gatherer(question=question).result, gatherer(question=question).result
    assert first == second and first.rounds and len(first.tree) >= 2
    assert all(s.action in ("derive", "continue") for r in first.rounds for s in r.searches)


def test_offline_planner_declares_completion_when_no_page_is_left(scifact_bm25):
    # An empty plan fails the query under ScholarGym's released rules; running out of pages is completion.
    result = Gatherer(scifact_bm25, iterations=5, offline=True)(
        question="Vitamin D supplementation reduces the risk of fractures in older adults."
    ).result
    assert 1 <= len(result.rounds) < 5 and result.stop_reason == "complete"
    assert result.is_failed == (not result.selected)


class FlakyRetriever:
    """A real BM25 retriever whose searches for one subquery fail (a dead engine, a bad page)."""

    def __init__(self, inner, broken: str):
        self.inner, self.broken = inner, broken

    def search(self, query, k=10, **filters):
        if query == self.broken:
            raise RuntimeError("engine unavailable")
        return self.inner.search(query, k, **filters)


def test_a_failed_search_is_recorded_on_its_subquery_and_the_run_goes_on(retriever, make_lm, routed):
    lm = make_lm(routed({PlanSubqueries: planner(ROUNDS), LabelCandidates: assessor({"a01", "g0", "a03"})}))
    events = []
    out = run(Gatherer(FlakyRetriever(retriever, "gamma"), on_event=events.append), lm)
    first, second = out.result.rounds
    broken = next(s for s in first.searches if s.text == "gamma")
    assert broken.error.startswith("search: RuntimeError: engine unavailable") and broken.candidates == ()
    assert all(s.error is None and s.candidates for s in first.searches if s.text != "gamma")
    assert {(x.doc_id, x.iteration) for x in out.result.selected} >= {("a01", 1), ("a03", 2)}
    assert ("g0", 1) not in {(x.doc_id, x.iteration) for x in out.result.selected}  # round 1 lost "gamma"
    assert second.searches and out.result.stop_reason == "no_new_subqueries"
    assert any(e.kind == "failure" and e.stage == "search" and e.node_id == "2" for e in events)
    assert GatherResult.from_dict(json.loads(json.dumps(out.result.to_dict()))) == out.result


def test_the_loop_runs_under_the_call_budget_and_the_deadline(retriever, make_lm, routed):
    def always_new(messages):
        n = len(tree_of(messages))
        return {
            "searches": [{"action": "derive", "source_id": 0, "text": f"alpha variant {n}", "target_k": 2}],
            "checklist_update": "c",
            "memory_update": "m",
            "is_complete": False,
        }

    lm = make_lm(routed({PlanSubqueries: always_new, LabelCandidates: assessor({"a00"})}))
    # each round is a plan and one assessment: a budget of 5 requests allows two rounds, not the third's assessment
    result = run(Gatherer(retriever, GatherConfig(iterations=5, max_lm_calls=5)), lm).result
    assert result.stop_reason == "budget" and len(result.rounds) == 3 and lm.scripted.calls == 5
    assert result.rounds[-1].searches[0].error.startswith("assess: BudgetExceeded") and not result.is_failed
    slow = make_lm(routed({PlanSubqueries: always_new, LabelCandidates: assessor({"a00"})}), delay=0.3)
    result = run(Gatherer(retriever, GatherConfig(iterations=50, deadline_s=1.0)), slow).result
    assert result.stop_reason == "deadline" and 1 <= len(result.rounds) < 50 and not result.is_failed


def test_a_failed_plan_ends_the_loop_with_what_it_selected(retriever, make_lm, routed):
    calls = []

    def plan_then_fail(messages):
        calls.append(1)
        if len(calls) > 1:
            return "not a plan at all"
        return planner(ROUNDS)(messages)

    lm = make_lm(routed({PlanSubqueries: plan_then_fail, LabelCandidates: assessor({"a01"})}))
    result = run(Gatherer(retriever), lm).result
    assert result.stop_reason == "plan_failed" and len(result.rounds) == 1 and not result.is_failed
