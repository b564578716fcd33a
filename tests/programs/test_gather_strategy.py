"""The `gather` strategy: ScholarGym's loop gathers the papers inside a research run, then nodes extract from them.

A scripted LM answers at the LM boundary over a small hand-made corpus whose BM25 ranking is known: "alpha"
documents a00..a19 have equal length and 20, 19, ... occurrences of "alpha", so BM25 ranks them in index
order; the "omega" documents keep "alpha" rare enough for a positive IDF.
"""

import json

import dspy
import pytest

from deepresearch import cli
from deepresearch.cli.research_run import parse_stage_lms
from deepresearch.eval.gather import QueryTrace, metrics_from_trace, summarize
from deepresearch.eval.querysets import load_beir_queryset
from deepresearch.programs.artifacts import Report
from deepresearch.programs.config import PRESETS, GatherLoopConfig, ResearchConfig, preset
from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.research.finish import stopped_empty
from deepresearch.programs.research.program import DeepResearch
from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.signatures import ExtractLearnings
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries
from tests.research_lm import first_sentences, research_handler
from tests.scripted import inputs_of, scripted_lm, shown_candidates

QUESTION = "alpha question"


def toy_docs():
    docs = [
        Doc(doc_id=f"a{i:02d}", title=f"alpha report {i}", text=" ".join(["alpha"] * (20 - i) + ["filler"] * i))
        for i in range(20)
    ]
    docs += [
        Doc(doc_id=f"g{i}", title=f"gamma note {i}", text=" ".join(["gamma"] * (5 - i) + ["filler"] * (15 + i)))
        for i in range(5)
    ]
    docs += [Doc(doc_id=f"z{i:02d}", title="omega survey", text="omega lorem ipsum dolor sit amet") for i in range(40)]
    return docs


TOY = toy_docs()


@pytest.fixture(scope="module")
def corpus():
    return Corpus(TOY, name="toy")


@pytest.fixture(scope="module")
def retriever(corpus):
    return BM25Retriever(corpus)


# round 1: two new subqueries; round 2: the next page of the first and a narrower child of it; then nothing
ROUNDS = [
    [
        {"action": "derive", "source_id": 0, "text": "alpha", "target_k": 3},
        {"action": "expand", "source_id": 0, "text": "gamma", "target_k": 3},
    ],
    [
        {"action": "continue", "source_id": 1, "target_k": 3},
        {"action": "derive", "source_id": 1, "text": "alpha filler", "target_k": 2},
    ],
]
KEEP = {"a01", "a03", "g0"}


def planner(rounds):
    """Answers round n (counted by the size of the tree it is shown) with rounds[n]; nothing once they run out."""
    sizes = {}

    def answer(messages):
        size = len(json.loads(inputs_of(messages)["subquery_tree"]))
        n = sizes.setdefault(size, len(sizes))
        return {
            "searches": rounds[n] if n < len(rounds) else [],
            "checklist_update": f"criteria {n}",
            "memory_update": f"memory {n}",
            "is_complete": False,
        }

    return answer


def always_new(messages):
    n = len(json.loads(inputs_of(messages)["subquery_tree"]))
    return {
        "searches": [{"action": "derive", "source_id": 0, "text": f"alpha variant {n}", "target_k": 2}],
        "checklist_update": "c",
        "memory_update": "m",
        "is_complete": False,
    }


def assessor(keep):
    def answer(messages):
        return {
            "relevance": {
                key: "relevant" if d in keep else "irrelevant" for key, d in shown_candidates(messages, TOY).items()
            }
        }

    return answer


def gather_lm(plan=None, keep=KEEP, delay=0.0, routes=None):
    return scripted_lm(
        research_handler({PlanSubqueries: plan or planner(ROUNDS), LabelCandidates: assessor(keep), **(routes or {})}),
        delay=delay,
    )


def research(retriever, lm, config=None, **run_options):
    with dspy.context(lm=lm):
        return DeepResearch(retriever=retriever, config=config or preset("gather"))(question=QUESTION, **run_options)


def candidates_of(result: GatherResult, node_id: int) -> list[str]:
    return [c.doc_id for r in result.rounds for s in r.searches if s.node_id == node_id for c in s.candidates]


def test_the_gather_preset_and_its_stages_join_the_vocabulary(retriever, corpus):
    assert preset("gather").strategy == "gather" and preset("gather").gather == GatherLoopConfig(
        iterations=5, ranking_depth=100
    )
    assert "gather" in PRESETS
    program = DeepResearch(retriever=retriever, config=preset("gather"))
    assert {"gather_plan", "gather_assess"} <= set(program.stage_table())
    names = [n for n, _ in program.named_predictors()]
    assert "subquery_planner.plan_subqueries.predict" in names and "candidate_assessor.label_candidates" in names
    assert len(names) == len(set(names))
    own = scripted_lm(research_handler())
    program = DeepResearch(retriever=retriever, config=preset("gather"), lms={"gather_plan": own})
    assert program.subquery_planner.plan_subqueries.predict.lm is own
    assert parse_stage_lms(["gather_assess=openai/x"]) == {"gather_assess": "openai/x"}
    with pytest.raises(ValueError, match="unknown stage 'gather_plan'"):
        DeepResearch(retriever=retriever, config=preset("eco"), lms={"gather_plan": own})
    with pytest.raises(ValueError, match="gather.max_k must be >= 1"):
        ResearchConfig(strategy="gather", gather=GatherLoopConfig(max_k=0))


def test_the_loop_gathers_and_each_subquery_node_extracts_from_what_it_selected(retriever, corpus):
    lm = gather_lm()
    out = research(retriever, lm, preset("gather", max_passages=1))
    result = GatherResult.from_dict(out.gathered)
    assert result.stop_reason == "no_new_subqueries" and not result.is_failed and len(result.rounds) == 2
    assert [(n.node_id, n.text) for n in result.tree[1:]] == [(1, "alpha"), (2, "gamma"), (3, "alpha filler")]
    # round 2 pages on past what round 1 showed of "alpha", without the selected a01
    assert candidates_of(result, 1) == ["a00", "a01", "a02", "a03", "a04", "a05"]
    assert {x.doc_id: x.node_id for x in result.selected} == {"a01": 1, "g0": 2, "a03": 1}
    nodes = out.report.nodes()
    assert [(n.node_id, n.query, n.status) for n in nodes] == [
        ("1", "alpha", "done"),
        ("2", "gamma", "done"),
        ("3", "alpha filler", "done"),
    ]
    for n in nodes:  # each node shows what its subquery retrieved and was first to select
        assert list(n.retrieved_ids) == list(dict.fromkeys(candidates_of(result, int(n.node_id))))
        assert set(n.relevant_ids) == {x.doc_id for x in result.selected if x.node_id == int(n.node_id)}
    assert nodes[0].relevant_ids == ("a01", "a03") and nodes[2].relevant_ids == () and not nodes[2].learnings
    # extraction sees exactly the selected papers, max_passages (1) at a time, and merges per node
    extracts = [json.loads(inputs_of(p)["passages"]) for p in lm.scripted.prompts if "passages" in inputs_of(p)]
    assert sorted(" ".join(p[0]["sentences"].values()) for p in extracts) == sorted(
        corpus.get(d).text for d in ("a01", "a03", "g0")
    )
    assert all(len(p) == 1 for p in extracts)
    assert {r.doc_id for r in out.references} == {"a01", "a03", "g0"}
    usage = {stage: u.calls for stage, u in out.usage.items()}
    assert usage == {"gather_plan": 3, "gather_assess": 4, "extract": 3, "merge": 2, "write": 1, "verify": 1}
    assert lm.scripted.calls == 14 and out.stats.searches == 4 and out.stats.strategy == "gather"
    assert result.usage["gather_plan"].calls == 3 and "extract" not in result.usage
    assert out.status == "done" and any(e.kind == "stage_end" and e.stage == "gather" for e in out.events)


def test_the_metrics_from_the_trace_are_the_eval_metrics_of_the_loop(retriever):
    out = research(retriever, gather_lm())
    trace = json.loads(json.dumps(out.report.to_dict()))  # what trace.json holds
    gt = {"a03", "a07"}
    result = GatherResult.from_dict(trace["gathered"])
    expected = summarize([QueryTrace.from_result(QUESTION, gt, result)], 5, failed="included", bootstrap=0)
    metrics = metrics_from_trace({**trace, "config": {"gather": {"iterations": 5}}}, gt)
    assert metrics == expected and metrics["evaluated"] == 1
    retrieved = {c.doc_id for r in result.rounds for s in r.searches for c in s.candidates}
    final = metrics["final"]  # a03 was retrieved and selected; a07 never
    assert final["ret_recall"] == 0.5 and final["ret_precision"] == pytest.approx(1 / len(retrieved))
    assert final["recall"] == 0.5 and final["precision"] == pytest.approx(1 / 3)
    assert len(metrics["per_iteration"]["recall"]) == 5 and metrics["per_iteration"]["recall"][0] == 0
    assert metrics_from_trace(trace, gt)["iterations"] == 2  # without the config, the rounds it ran
    with pytest.raises(ValueError, match="--preset gather"):
        metrics_from_trace(research(retriever, scripted_lm(research_handler()), preset("quick")).report.to_dict(), gt)


def test_the_loop_spends_the_run_budget_and_the_run_stops_with_what_it_has(retriever):
    lm = gather_lm(plan=always_new)
    # each round is a plan and one assessment, and one call is kept for the writer: of 4 calls the loop may
    # spend 3, so round 2's assessment is refused, and the loop halts with round 1's selection
    out = research(retriever, lm, preset("gather", max_lm_calls=4))
    result = GatherResult.from_dict(out.gathered)
    assert result.stop_reason == "budget" and len(result.rounds) == 2 and lm.scripted.calls == 3
    assert result.rounds[1].searches[0].error.startswith("assess: BudgetExceeded")
    assert [x.doc_id for x in result.selected] == ["a01"]
    assert "LM call budget of 4" in out.stats.stopped and "stopped early" in out.markdown
    first = out.report.nodes()[0]  # its extraction never ran, but what the loop gave it is recorded
    assert first.status == "skipped" and list(first.retrieved_ids) == candidates_of(result, 1)
    assert first.relevant_ids == ("a01",)
    assert "extract" not in out.usage  # nothing was kept: partial, for the reason the run stopped
    assert out.status == "partial" and out.error == stopped_empty(out.stats.stopped)


def test_a_failed_search_is_a_failure_of_the_run_recorded_on_its_subquery(retriever):
    class FlakyRetriever:
        def search(self, query, k=10, **filters):
            if query == "gamma":
                raise RuntimeError("engine unavailable")
            return retriever.search(query, k, **filters)

    out = research(FlakyRetriever(), gather_lm())
    failures = [e for e in out.events if e.kind == "failure"]
    assert [(e.node_id, e.stage) for e in failures] == [("gather:2", "search")]
    gamma = next(n for n in out.report.nodes() if n.query == "gamma")
    assert gamma.status == "done" and gamma.retrieved_ids == () and any("engine unavailable" in x for x in gamma.notes)
    search = next(s for r in GatherResult.from_dict(out.gathered).rounds for s in r.searches if s.text == "gamma")
    assert search.error.startswith("search: RuntimeError") and out.status == "done" and out.references


def test_a_failed_plan_is_recorded_and_the_question_itself_is_researched(retriever):
    def broken(messages):  # a plan that does not parse is the offline twin's to make: a broken request fails it
        raise RuntimeError("the model server broke on this request")

    out = research(retriever, gather_lm(plan=broken))
    result = GatherResult.from_dict(out.gathered)
    assert (result.stop_reason, result.is_failed, result.rounds) == ("plan_failed", True, ())
    assert any(e.kind == "failure" and e.stage == "gather_plan" and e.node_id == "gather:1" for e in out.events)
    assert out.stats.plan_fallback and [n.query for n in out.report.tree] == [QUESTION]
    assert out.status == "done" and out.stats.searches == 1 and out.usage["assess"].calls == 1


def test_the_deadline_cuts_the_loop_and_its_finished_rounds_stand(retriever):
    lm = gather_lm(plan=always_new, delay=0.3)
    out = research(retriever, lm, preset("gather", deadline_s=1.0, gather=GatherLoopConfig(iterations=50)))
    result = GatherResult.from_dict(out.gathered)
    assert result.stop_reason == "deadline" and 1 <= len(result.rounds) < 50
    assert "deadline" in out.stats.stopped
    assert out.status == "partial" and out.error == stopped_empty(out.stats.stopped)  # its extraction never ran


def test_a_resumed_run_neither_gathers_again_nor_redoes_finished_nodes(retriever, tmp_path):
    journal = tmp_path / "journal.jsonl"

    def extract_fails_for_gamma(messages):
        if "gamma" in inputs_of(messages)["task"]:  # a broken request fails the node (an unparseable reply
            raise RuntimeError("the model server broke on this request")  # would be the twin's to answer)
        passages = json.loads(inputs_of(messages)["passages"])
        return {"quotes": first_sentences(passages), "follow_up_questions": []}

    first = research(retriever, gather_lm(routes={ExtractLearnings: extract_fails_for_gamma}), journal=journal)
    assert [n.status for n in first.report.nodes()] == ["done", "failed", "done"]
    again = gather_lm(plan=lambda messages: pytest.fail("the resumed run planned again"))
    out = research(retriever, again, journal=journal, resume=True)
    assert out.gathered == first.gathered and out.stats.resumed_nodes == 2
    assert [n.status for n in out.report.nodes()] == ["done", "done", "done"]
    assert {s: u.calls for s, u in out.usage.items()} == {"extract": 1, "merge": 1, "write": 1, "verify": 1}
    assert {r.doc_id for r in out.references} == {"a01", "a03", "g0"}


def test_offline_run_through_the_command_line(tmp_path, data_dir, monkeypatch, capsys):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)  # no LM: the offline stages, loop included
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    query = next(q for q in load_beir_queryset(data_dir / "scifact") if q.query_id == "51")
    out = tmp_path / "gather"
    code = cli.main(["run", query.query, "--corpus", "scifact", "--preset", "gather", "--out", str(out), "-q"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    trace = json.loads((out / "trace.json").read_text())
    result = GatherResult.from_dict(trace["gathered"])
    searches = [s for r in result.rounds for s in r.searches]
    assert trace["status"] == "done" and trace["config"]["strategy"] == "gather"
    assert trace["stats"]["searches"] == len(searches) and f"searches {len(searches)}" in printed.out
    report = Report.from_dict(trace)
    assert [n.query for n in report.nodes()] == [n.text for n in result.tree[1:]]
    assert {d for n in report.nodes() for d in n.retrieved_ids} == {c.doc_id for s in searches for c in s.candidates}
    assert {d for n in report.nodes() for d in n.relevant_ids} == {x.doc_id for x in result.selected}
    assert report.references and {r.doc_id for r in report.references} <= {x.doc_id for x in result.selected}
    metrics = metrics_from_trace(trace, query.gt_ids)
    expected = summarize(
        [QueryTrace.from_result(query.query_id, query.gt_ids, result)], 5, failed="included", bootstrap=0
    )
    assert metrics == expected and metrics["final"]["recall"] == 1.0  # the claim's one cited paper is selected
    assert metrics["final"]["precision"] == pytest.approx(1 / len(result.selected))


def done_at_once(messages):
    return {"searches": [], "checklist_update": "c", "memory_update": "m", "is_complete": True}


def test_a_first_plan_that_would_fail_the_query_is_made_by_the_offline_twin_in_a_research_run(retriever):
    """A small model often declares the search complete before any search: a research run goes on with the
    offline planner's first plan, counted and noted; the standalone Gatherer keeps the benchmark's rule."""
    from deepresearch.programs.gather.loop import Gatherer

    asked = "What is known about alpha?"
    with dspy.context(lm=gather_lm(plan=done_at_once)):
        out = DeepResearch(retriever=retriever, config=preset("gather", max_passages=1))(question=asked)
    assert out.stats.twin_answers == {"gather_plan": 1}
    assert out.stats.searches > 0 and out.status == "done"
    fallbacks = [e for e in out.events if e.kind == "fallback" and e.stage == "gather_plan"]
    assert len(fallbacks) == 1 and "declared the search complete before any search" in fallbacks[0].message
    round_1 = out.gathered["rounds"][0]
    assert round_1["searches"][0]["text"] == "alpha"  # the twin's key-term query
    with dspy.context(lm=gather_lm(plan=done_at_once)):
        alone = Gatherer(retriever, iterations=2)(question=asked)
    assert alone.result.is_failed and alone.result.stop_reason == "complete" and not alone.result.rounds
