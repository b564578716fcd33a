import asyncio
import json
import math
import re
from dataclasses import replace

import dspy
import pytest

from deepresearch.programs.config import ResearchConfig, preset
from deepresearch.programs.research.eco import tree_size
from deepresearch.programs.research.program import DeepResearch
from deepresearch.signatures import ExtractLearnings, PlanQueries
from tests.research_lm import CITATION_NUMBER, INVENTED_ID, _extract, research_handler
from tests.scripted import ScriptedEngine, inputs_of, scripted_lm


class CountingRetriever:
    """Delegates to a real retriever and counts searches (our code is not replaced, only observed)."""

    def __init__(self, inner):
        self.inner, self.queries = inner, []

    def search(self, query, k=10, **filters):
        self.queries.append(query)
        return self.inner.search(query, k, **filters)


def expected_searches(depth: int, breadth: int) -> int:
    # The root plans b tasks (level 1: b searches); each node at level l spawns ceil(b_l / 2) children,
    # so level l has prod(b_1..b_l) searches with b_{l+1} = ceil(b_l / 2):
    #   (1,1): 1            (1,4): 4
    #   (4,1): 1+1+1+1 = 4  (4,4): 4 + 4*2 + 8*1 + 8*1 = 28
    total, width, b = 0, 1, breadth
    for _ in range(depth):
        width *= b
        total += width
        b = math.ceil(b / 2)
    return total


@pytest.mark.parametrize("depth,breadth,searches", [(1, 1, 1), (1, 4, 4), (4, 1, 4), (4, 4, 28)])
def test_search_count_follows_the_halving_rule(scifact_bm25, depth, breadth, searches):
    assert expected_searches(depth, breadth) == searches
    assert tree_size(ResearchConfig(depth=depth, breadth=breadth)) == searches
    retriever = CountingRetriever(scifact_bm25)
    lm = scripted_lm(research_handler())
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=retriever, depth=depth, breadth=breadth)(question="vitamin D and bone fractures")
    assert len(retriever.queries) == searches
    assert out.stats.searches == searches == out.stats.nodes
    leaves = [n for n in out.report.nodes() if not n.children]
    assert all(n.depth == depth for n in leaves)


def test_named_predictors_list_each_stage_once_whatever_the_depth(scifact_bm25):
    names = {
        d: [n for n, _ in DeepResearch(retriever=scifact_bm25, depth=d, breadth=2).named_predictors()] for d in (1, 4)
    }
    assert names[1] == names[4]
    assert sorted(names[1]) == sorted(
        [
            "planner.plan_queries.predict",
            "assessor.assess_relevance",
            "extractor.extract_learnings",
            "merger.merge_learnings",
            "enricher.find_gaps.predict",
            "writer.write_report",
            "verifier.verify_claims",
            # the output stages, present whether or not a run asks for an answer or a taxonomy
            "clarifier.clarify_question",
            "answerer.write_answer",
            "taxonomist.build_taxonomy",
            "taxonomist.merge_taxonomies",
            "taxonomist.place_papers",
            "taxonomist.repair_json",
        ]
    )


def test_every_citation_in_the_report_resolves_to_a_corpus_document(scifact, scifact_bm25):
    lm = scripted_lm(research_handler())
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, depth=2, breadth=2)(question="statins and muscle pain")
    body, _, refs = out.markdown.partition("## References")
    numbers = {int(n) for n in CITATION_NUMBER.findall(body)}
    assert numbers == set(range(1, len(out.references) + 1)) and numbers
    assert all(r.doc_id in scifact for r in out.references)
    assert [r.number for r in out.references] == list(range(1, len(out.references) + 1))
    # the writer typed an id into a sentence: the code alone cites, so it never reached renumbering
    assert INVENTED_ID not in out.markdown and "The evidence is mixed." in out.markdown
    assert out.stats.dropped_citations == 0
    # first use order: the first number in the body is [1], then each new number is the next one
    order = list(dict.fromkeys(int(n) for n in CITATION_NUMBER.findall(body)))
    assert order == sorted(order)
    # learnings keep their provenance: every source id of every learning names a retrieved document
    retrieved = {i for n in out.report.nodes() for i in n.retrieved_ids}
    assert out.learnings and all(len(x.source_ids) == 1 for x in out.learnings)
    for r in out.references:
        assert r.doc_id in retrieved and r.title == scifact.get(r.doc_id).title
        assert f"[{r.number}] " in refs


def test_a_failing_branch_is_recorded_and_the_run_goes_on(scifact_bm25):
    def extract(messages):
        if "aspect 2" in inputs_of(messages)["task"]:  # a reply that does not parse is answered by the twin:
            raise RuntimeError("the model server broke on this request")  # a failing request fails the branch
        return {"quotes": [1], "follow_up_questions": []}

    lm = scripted_lm(research_handler({ExtractLearnings: extract}))
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, depth=2, breadth=3)(question="gut microbiome and obesity")
    failed = [n for n in out.report.nodes() if n.status == "failed"]
    assert [n.node_id for n in failed] == ["2"]
    assert failed[0].error.stage == "extract" and failed[0].retrieved_ids  # what was gathered is kept
    assert failed[0].children == ()
    # nodes 1 and 3 and their two children each; node 2 has none
    assert [n.node_id for n in out.report.nodes() if n.status == "done"] == ["1", "1.1", "1.2", "3", "3.1", "3.2"]
    assert "1 of 7 research branches failed" in out.markdown
    assert any(e.kind == "failure" and e.node_id == "2" for e in out.events)


def test_the_run_stops_after_max_failures_and_still_writes_a_report(scifact_bm25):
    def broken(messages):
        raise RuntimeError("the model server broke on this request")

    lm = scripted_lm(research_handler({ExtractLearnings: broken}))
    config = ResearchConfig(depth=2, breadth=4, max_failures=1, max_concurrency=1)
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, config=config)(question="sleep and memory")
    statuses = [n.status for n in out.report.nodes()]
    assert statuses.count("failed") == 2 and statuses.count("skipped") == 2
    assert out.stats.stopped and "stopped early" in out.markdown and "## References" in out.markdown


def test_siblings_run_concurrently_under_the_global_limit(scifact_bm25):
    in_flight, peak = 0, 0
    engine = ScriptedEngine(research_handler())

    class Probe:  # async engine that records how many LM calls are in flight at once
        async def complete(self, request):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return engine.complete(request)

    lm = dspy.LM("fake/probe", engine=engine, async_engine=Probe(), cache=False)
    config = ResearchConfig(depth=2, breadth=4, max_concurrency=3)
    with dspy.context(lm=lm):
        asyncio.run(DeepResearch(retriever=scifact_bm25, config=config).acall(question="exercise and depression"))
    assert 1 < peak <= 3


def test_forward_works_inside_a_running_event_loop(scifact_bm25):
    lm = scripted_lm(research_handler())
    program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)

    async def notebook_cell():
        with dspy.context(lm=lm):
            return program(question="caffeine and sleep")  # sync call while a loop runs, as in Jupyter

    out = asyncio.run(notebook_cell())
    assert out.stats.searches == 2 and out.references


def test_a_stage_can_have_its_own_lm_and_usage_is_counted_per_stage(scifact_bm25):
    main, planner_lm = scripted_lm(research_handler()), scripted_lm(research_handler())
    with dspy.context(lm=main):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2, lms={"plan": planner_lm})(
            question="aspirin and colorectal cancer"
        )
    assert planner_lm.scripted.calls == 1
    assert all(
        "PlanQueries" not in p[0]["content"] and PlanQueries.instructions.splitlines()[0] not in p[0]["content"]
        for p in main.scripted.prompts
    )
    assert out.usage["plan"].calls == 1 and out.usage["plan"].total_tokens == 15
    assert out.usage["extract"].calls == 2 and out.usage["write"].calls == 1
    assert "enrich" not in out.usage  # depth 1: no follow-ups are asked for


def test_a_stage_can_run_its_offline_twin_while_the_lm_runs_the_others(scifact_bm25):
    from deepresearch.programs.stages.planner import OfflinePlanner
    from deepresearch.programs.stages.verifier import LexicalVerifier

    lm = scripted_lm(research_handler())
    program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2, lms={"plan": "offline", "verify": "offline"})
    assert isinstance(program.planner, OfflinePlanner) and isinstance(program.verifier, LexicalVerifier)
    with dspy.context(lm=lm):
        out = program(question="aspirin and colorectal cancer")
    assert not any("PlanQueries" in p[0]["content"] for p in lm.scripted.prompts)  # no plan request was sent
    assert "plan" not in out.usage and "verify" not in out.usage
    # the offline planner searched the question's key terms first; the LM assessed and extracted each node
    assert out.tree[0].query.startswith("aspirin colorectal cancer")
    assert out.usage["extract"].calls == 2 and out.usage["write"].calls == 1
    assert program.planner.is_offline and not program.writer.is_offline  # the twin answers; the LM writes


def test_usage_also_reaches_an_enclosing_meter_and_dspy_usage_tracker(scifact_bm25):
    from dspy.utils.usage_tracker import track_usage

    from deepresearch.programs.lm.usage import UsageMeter, metered

    outer = UsageMeter()
    with dspy.context(lm=scripted_lm(research_handler())), track_usage() as tracker, metered(outer):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)(question="aspirin and colorectal cancer")
    calls = sum(u.calls for u in out.usage.values())
    assert calls == outer.total_calls == 1 + 2 * 3 + 1 + 1  # plan; assess, extract, merge per node; write; verify
    assert {s: u.calls for s, u in outer.snapshot().items()} == {s: u.calls for s, u in out.usage.items()}
    tokens = sum(u.prompt_tokens for u in out.usage.values())
    assert tokens > 0 and sum(e["prompt_tokens"] for entries in tracker.usage_data.values() for e in entries) == tokens
    assert outer.parent is None  # left with the `with`


def test_bad_input_fails_before_any_lm_call(scifact_bm25):
    lm = scripted_lm(research_handler())
    with dspy.context(lm=lm):
        with pytest.raises(ValueError, match="question is empty"):
            DeepResearch(retriever=scifact_bm25)(question="  ")
    with pytest.raises(ValueError, match="depth and breadth must be >= 1"):
        DeepResearch(retriever=scifact_bm25, depth=0)
    with pytest.raises(ValueError, match="unknown stage"):
        DeepResearch(retriever=scifact_bm25, lms={"judge": lm})
    with pytest.raises(ValueError, match="unknown stage 'judge'"):
        DeepResearch(retriever=scifact_bm25, lms={"judge": "offline"})
    with pytest.raises(ValueError, match="unknown schedule 'layers'"):
        ResearchConfig(schedule="layers")
    with pytest.raises(ValueError, match="schedule 'gptr' models the eco recursion"):
        ResearchConfig(strategy="hero", schedule="gptr")
    with pytest.raises(ValueError, match="hero.turns must be >= 1, got 0"):
        preset("hero", hero=replace(preset("hero").hero, turns=0))
    assert lm.scripted.calls == 0


@pytest.mark.parametrize("strategy", ["eco", "gather"])
def test_a_learning_is_the_quoted_sentence_cited_with_its_passage_and_invented_numbers_are_counted(
    strategy, scifact, scifact_bm25
):
    def last_and_unshown(messages):  # quotes the last passage's last sentence and a number never shown
        passages = json.loads(inputs_of(messages)["passages"])
        shown = [int(n) for p in passages for n in p["sentences"]]
        return {"quotes": [shown[-1], len(shown) + 7] if shown else [], "follow_up_questions": []}

    with dspy.context(lm=scripted_lm(research_handler({ExtractLearnings: last_and_unshown}))):
        out = DeepResearch(retriever=scifact_bm25, config=preset("quick", strategy=strategy))(
            question="statins and muscle pain"
        )
    nodes = [n for n in out.report.nodes() if n.learnings]
    assert nodes and out.stats.invented_citations == len(nodes)  # one unshown number per extraction
    doc_of = {r.source_id: r.doc_id for r in out.references}
    cited = [x for n in nodes for x in n.learnings if x.source_ids[0] in doc_of]
    assert cited and all(len(x.source_ids) == 1 for n in nodes for x in n.learnings)
    for learning in cited:  # quoted as the paper says it, from the paper it cites
        assert learning.text in " ".join(scifact.get(doc_of[learning.source_ids[0]]).text.split())


def test_report_round_trips_through_json(scifact_bm25):
    from deepresearch.programs.artifacts import Report

    with dspy.context(lm=scripted_lm(research_handler())):
        out = DeepResearch(retriever=scifact_bm25, depth=2, breadth=1)(question="zinc and common cold")
    report = out.report
    assert Report.from_dict(report.to_dict()) == report
    assert re.search(r"\[1\]", report.markdown)


def one_task(messages):
    return {"tasks": [{"query": "fish oil trials", "goal": "find the trials"}]}


def test_a_short_root_plan_is_topped_up_with_the_question_itself(scifact_bm25):
    lm = scripted_lm(research_handler({PlanQueries: one_task}))
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)(question="omega-3 and heart disease")
    assert [n.query for n in out.tree] == ["fish oil trials", "omega-3 and heart disease"]
    assert out.stats.plan_topped_up and not out.stats.plan_fallback and out.stats.searches == 2
    with dspy.context(lm=scripted_lm(research_handler())):  # a full plan is left as it is
        full = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)(question="omega-3 and heart disease")
    assert not full.stats.plan_topped_up and len(full.tree) == 2


def test_a_failed_plan_searches_the_question_itself(scifact_bm25):
    def broken(messages):  # a reply that does not parse is answered by the offline twin (test_twin_fallback.py)
        raise RuntimeError("the model server broke on this request")

    with dspy.context(lm=scripted_lm(research_handler({PlanQueries: broken}))):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)(question="omega-3 and heart disease")
    assert out.stats.plan_fallback and [n.query for n in out.tree] == ["omega-3 and heart disease"]
    assert out.report.status == "done" and out.stats.failed_requests == 1 and not out.stats.twin_answers


def test_an_unparseable_reply_is_asked_again_as_a_new_sample(scifact_bm25):
    # a greedy model asked the same prompt twice returns the same broken reply: the re-ask must sample
    asked: list[float | None] = []

    def extract_greedy_broken(messages, request):  # a deterministic model: greedy decoding always breaks
        asked.append(request.config.temperature)
        return _extract(messages) if request.config.temperature else {"learnings": "cut off mid-"}

    handler = research_handler({ExtractLearnings: extract_greedy_broken})
    with dspy.context(lm=scripted_lm(handler)):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=1)(question="omega-3 and heart disease")
    assert out.report.status == "done" and out.stats.failed_nodes == 0
    # DSPy's text format, its JSON fallback, then our re-ask as a sample (which parses in the text format)
    assert asked == [None, None, 0.7]
    node = out.tree[0]
    assert node.learnings and out.stats.parse_failures == 1 and out.stats.retries["parse"] == 1
    assert any("extract: asked again for a new sample" in n for n in node.notes)
    with dspy.context(lm=scripted_lm(handler)):  # no re-ask: parse_retries=0 leaves the call to the offline twin
        again = DeepResearch(scifact_bm25, ResearchConfig(depth=1, breadth=1, parse_retries=0))(
            question="omega-3 and heart disease"
        )
    assert again.stats.failed_nodes == 0 and again.stats.twin_answers == {"extract": 1}
    assert again.stats.retries.get("parse", 0) == 0 and again.tree[0].learnings


def test_a_request_is_never_counted_twice_by_the_budget():
    # a stage call reserves one request; the request is counted inside the LM call (DSPy's usage
    # report), and the reservation is released at that moment, not when the call returns to the
    # scheduler: between the two, a concurrent budget check once saw the request twice
    from deepresearch.programs.lm.usage import UsageMeter

    meter = UsageMeter()
    with meter.reserving():
        assert meter.total_calls + meter.reserved == 1
        meter.add_usage("fake/lm", {"prompt_tokens": 3, "completion_tokens": 2})
        assert (meter.total_calls, meter.reserved) == (1, 0)
        meter.add_usage("fake/lm", {"prompt_tokens": 3, "completion_tokens": 2})  # a JSON fallback: one more
        assert (meter.total_calls, meter.reserved) == (2, 0)
    with meter.reserving():  # a call that raised before any request was counted gives its reservation back
        pass
    assert (meter.total_calls, meter.reserved) == (2, 0)


def test_a_budget_that_fits_the_run_exactly_never_stops_it(scifact_bm25):
    # depth 1 x breadth 4: plan, 4 x (assess, extract, merge), write = 14 requests, four nodes at once
    config = ResearchConfig(depth=1, breadth=4, max_lm_calls=14, lm_timeout_s=30.0, max_concurrency=4)
    with dspy.context(lm=scripted_lm(research_handler(), delay=0.01)):
        out = DeepResearch(retriever=scifact_bm25, config=config)(question="aspirin and colorectal cancer")
    assert out.stats.stopped is None and sum(u.calls for u in out.usage.values()) == 14
    assert all(n.status == "done" and n.summary for n in out.tree)


@pytest.mark.parametrize(
    ("predictor", "old_fields"),
    [
        ("merger.merge_learnings", ["Task:", "Learnings:", "Summary:"]),
        ("assessor.assess_relevance", ["Task:", "Papers:", "Judgements:"]),
        ("writer.write_report", ["Question:", "Findings:", "Report:"]),  # before it named learnings by number
    ],
)
def test_a_program_compiled_for_a_stage_whose_fields_changed_is_refused_in_one_line(
    scifact_bm25, tmp_path, predictor, old_fields
):
    DeepResearch(retriever=scifact_bm25).save(str(tmp_path / "compiled.json"))
    state = json.loads((tmp_path / "compiled.json").read_text())
    state[predictor]["signature"]["fields"] = [{"prefix": p, "description": "-"} for p in old_fields]  # as saved before
    (tmp_path / "old.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match=rf"{predictor}, compiled for an older signature .*compile it again") as err:
        DeepResearch(retriever=scifact_bm25).load(str(tmp_path / "old.json"))
    assert "\n" not in str(err.value)
    DeepResearch(retriever=scifact_bm25).load(str(tmp_path / "compiled.json"))  # the current fields load


def test_a_program_whose_demos_no_longer_fit_their_fields_is_refused_and_fitting_demos_load(scifact_bm25, tmp_path):
    # the extractor kept its field names but now numbers sentences: passages shown whole do not fit
    predictor = "extractor.extract_learnings"
    DeepResearch(retriever=scifact_bm25).save(str(tmp_path / "compiled.json"))
    state = json.loads((tmp_path / "compiled.json").read_text())
    demo = {"question": "q", "task": {"query": "vitamin d fracture", "goal": "effect size"}, "follow_up_questions": []}
    fitting = {**demo, "passages": [{"title": "T", "sentences": {"1": "Risk fell 12%."}}], "quotes": [1]}
    old = {**demo, "passages": [{"source_id": "ab12cd34_1", "title": "T", "text": "Risk fell 12%."}], "quotes": [1]}
    state[predictor]["demos"] = [fitting, old]
    (tmp_path / "old.json").write_text(json.dumps(state))
    with pytest.raises(
        ValueError, match=rf"{predictor}, whose demonstrations do not fit .* passages .*compile it again"
    ):
        DeepResearch(retriever=scifact_bm25).load(str(tmp_path / "old.json"))
    state[predictor]["demos"] = [fitting]
    (tmp_path / "new.json").write_text(json.dumps(state))
    program = DeepResearch(retriever=scifact_bm25).load(str(tmp_path / "new.json"))
    assert len(program.extractor.extract_learnings.demos) == 1
    # an extractor saved before it quoted sentences (a chain of thought that wrote learnings) is refused by name
    (tmp_path / "cot.json").write_text(json.dumps({f"{predictor}.predict": state.pop(predictor), **state}))
    with pytest.raises(ValueError, match=rf"{predictor}.predict, compiled for an older signature: the extractor now"):
        DeepResearch(retriever=scifact_bm25).load(str(tmp_path / "cot.json"))


def test_a_program_saved_before_a_stage_existed_loads_and_keeps_that_stages_default(scifact_bm25, tmp_path, caplog):
    program = DeepResearch(retriever=scifact_bm25)
    program.planner.plan_queries.predict.signature = program.planner.plan_queries.predict.signature.with_instructions(
        "Tuned planner instructions."
    )
    program.save(str(tmp_path / "compiled.json"))
    state = json.loads((tmp_path / "compiled.json").read_text())
    for name in ("clarifier.clarify_question", "answerer.write_answer"):  # as saved before those stages existed
        del state[name]
    (tmp_path / "old.json").write_text(json.dumps(state))
    fresh = DeepResearch(retriever=scifact_bm25)
    fresh.load(str(tmp_path / "old.json"))
    assert fresh.planner.plan_queries.predict.signature.instructions == "Tuned planner instructions."
    assert "no state for clarifier.clarify_question, answerer.write_answer;" in caplog.text
    gather_state = {k: v for k, v in state.items() if k == "metadata"}
    (tmp_path / "other.json").write_text(json.dumps(gather_state))
    with pytest.raises(ValueError, match="none of this research program's stages"):
        DeepResearch(retriever=scifact_bm25).load(str(tmp_path / "other.json"))
