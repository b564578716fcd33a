"""Gathering and taxonomy objectives, and tuning the gathering assessor on frozen candidates."""

import json

import dspy
import pytest

from deepresearch import cli
from deepresearch.eval.run_gather import load_frozen_cases
from deepresearch.eval.taxobench import load_taxobench
from deepresearch.optimize.compile import compile_program
from deepresearch.optimize.metrics import metric_spec
from deepresearch.optimize.trainsets import from_frozen_cases
from deepresearch.programs.stages.gathering import CandidateAssessor
from deepresearch.signatures.gather import LabelCandidates
from tests.scripted import inputs_of, routed_handler, scripted_lm, shown_candidates


def test_gather_objectives_on_a_hand_worked_query():
    example = dspy.Example(gt_ids=["a", "b", "c", "d"])
    # a and b retrieved (best ranks 1 and 51), c retrieved at rank 150 of a deep page, d never; a and x selected
    pred = dspy.Prediction(
        selected=["a", "x"], candidates={"a": {0: 3, 1: 1}, "b": {1: 51}, "c": {2: 150}, "x": {0: 2}}
    )
    score = {
        name: metric_spec("gather", name).score(example, pred)
        for name in ("f1", "recall", "ret_recall", "avg_distance", "discard")
    }
    assert score["recall"] == 0.25 and score["ret_recall"] == 0.75
    assert score["avg_distance"] == pytest.approx(((1 - 1 / 100) + (1 - 51 / 100)) / 4)  # c past the cutoff: 0
    assert score["discard"] == pytest.approx(1 / 3)  # of a, b, c retrieved only a was kept
    feedback = metric_spec("gather", "f1").feedback(example, pred)
    assert "d" in feedback.split("retrieved:")[1].split(";")[0] and "discarded: b, c" in feedback


def test_planner_objectives_count_ret_r_within_the_hits_a_run_reads():
    example = dspy.Example(relevant_ids=["a", "b", "c", "d"])
    # a ranked 1, b 10 (the last hit a run with hits_per_query=10 reads), c 11 (retrieved, never read), d never
    pred = dspy.Prediction(best_rank={"a": 1, "b": 10, "c": 11, "x": 2}, read_k=10)
    assert metric_spec("planner", "recall").score(example, pred) == 0.5
    deeper = dspy.Prediction(best_rank=pred.best_rank, read_k=20)
    assert metric_spec("planner", "recall").score(example, deeper) == 0.75
    # Avg.Distance grades every rank to 100, whatever a run reads
    assert metric_spec("planner", "avg_distance").score(example, pred) == pytest.approx((0.99 + 0.90 + 0.89) / 4)
    feedback = metric_spec("planner", "recall").feedback(example, pred)
    assert "No query retrieved: d" in feedback and "Ranked below 10: c" in feedback


def test_taxonomy_objectives_are_perfect_for_the_expert_tree(data_dir):
    survey = load_taxobench(data_dir / "taxobench_examples", limit=1)[0]
    example = dspy.Example(topic=survey.topic, papers=list(survey.papers), gt=survey.gt, survey_id=survey.survey_id)
    pred = dspy.Prediction(tree=survey.gt)
    for name in ("ari", "sem_path", "us_nted"):
        assert metric_spec("taxonomy", name).score(example, pred) == pytest.approx(1.0, abs=1e-6)
    flat = dspy.Prediction(
        tree={"name": survey.topic, "subtopics": [{"name": "all", "papers": [p["title"] for p in survey.papers]}]}
    )
    assert metric_spec("taxonomy", "ari").score(example, flat) == 0.0


def test_gathering_assessor_is_tuned_on_frozen_candidates_without_searching(data_dir, tmp_path, monkeypatch, scifact):
    run = tmp_path / "gather"
    assert (
        cli.main(
            [
                "eval",
                "gather",
                "--data",
                str(data_dir / "scifact"),
                "--lm",
                "offline",
                "--limit",
                "6",
                "--iterations",
                "2",
                "--out",
                str(run),
                "-q",
                "--bootstrap",
                "10",
            ]
        )
        == 0
    )
    cases = load_frozen_cases(run / "results.jsonl", scifact)
    examples = from_frozen_cases(cases)
    assert examples and all(ex.hits for ex in examples)

    def assess(messages):  # finds the ground-truth papers only when demos show how; otherwise keeps nothing
        gt = {h.doc.doc_id for ex in examples for h in ex.hits if h.doc.doc_id in ex.gt_ids}
        label = (
            (lambda pid: "relevant" if pid in gt else "irrelevant") if len(messages) > 2 else (lambda pid: "irrelevant")
        )
        docs = [h.doc for ex in examples for h in ex.hits]
        return {"relevance": {key: label(d) for key, d in shown_candidates(messages, docs).items()}}

    lm = scripted_lm(routed_handler({LabelCandidates: assess}))
    spec = metric_spec("assessor", "discard")
    trainset, devset = examples[: len(examples) // 2], examples[len(examples) // 2 :]
    with dspy.context(lm=lm):
        result = compile_program(
            CandidateAssessor(second_look=False),
            optimizer="bootstrap-rs",
            spec=spec,
            trainset=trainset,
            devset=devset,
            budget=4 * len(trainset),
            num_threads=1,
        )
    assert result.before < result.after == pytest.approx(1.0)
    assert not hasattr(CandidateAssessor(), "retriever")  # replaying needs no search: the hits are recorded


@pytest.mark.parametrize("strategy", ["eco", "hero", "parallel", "gather"])
def test_tuning_one_stage_hides_every_other_stage_of_the_program(scifact_bm25, strategy):
    from deepresearch.optimize.targets import research_target
    from deepresearch.programs.config import preset
    from deepresearch.programs.research.program import DeepResearch

    def tuned(program):  # the predictors an optimizer sees: DSPy skips submodules marked compiled
        return {name for name, _ in program.named_predictors()}

    for stage in DeepResearch(retriever=scifact_bm25, config=preset(strategy)).stage_table():
        program = DeepResearch(retriever=scifact_bm25, config=preset(strategy))
        attr = program.stage_table()[stage]
        target = research_target(program, stage, "program")
        assert tuned(program) == {f"{attr}.{name}" for name, _ in getattr(program, attr).named_predictors()}
        assert tuned(target.finish()) == tuned(DeepResearch(retriever=scifact_bm25, config=preset(strategy)))


def test_tuning_all_leaves_the_stages_a_run_never_calls(scifact_bm25):
    from deepresearch.optimize.targets import research_target
    from deepresearch.programs.config import ResearchConfig
    from deepresearch.programs.research.program import DeepResearch

    program = DeepResearch(retriever=scifact_bm25, config=ResearchConfig(answer=True))
    research_target(program, "all", "program")
    attrs = {name.split(".", 1)[0] for name, _ in program.named_predictors()}
    assert "answerer" in attrs and not attrs & {"clarifier", "taxonomist"}


def test_the_research_assessors_candidates_are_recorded_from_retrieval_alone(data_dir, scifact, scifact_bm25):
    # no LM is configured, so any LM call would fail: recording the pool costs one search a question, nothing else
    import asyncio

    from deepresearch.optimize.targets import record_candidates
    from deepresearch.optimize.trainsets import from_beir
    from deepresearch.programs.config import preset
    from deepresearch.programs.research.program import DeepResearch

    questions = from_beir(data_dir / "scifact", "train", scifact)[:4]
    program = DeepResearch(retriever=scifact_bm25, config=preset("quick"))
    with dspy.context(lm=None):
        recorded = asyncio.run(record_candidates(program, questions))
    assert [ex.task.query for ex in recorded] == [q.question for q in questions]
    assert all(len(ex.sources) == program.config.hits_per_query for ex in recorded)
    assert any(ex.relevant_ids for ex in recorded)  # the benchmark's relevant papers among the hits
    assert all(set(ex.relevant_ids) <= {s.source_id for s in ex.sources} for ex in recorded)


def test_gold_labels_let_the_optimizer_show_demos_with_the_right_labels(data_dir, tmp_path, scifact):
    """A model that calls every candidate relevant until a demonstration shows it an irrelevant one: its own
    bootstrapped answers teach it nothing, the qrels' labels as demos do; the saved demos hold only the
    predictor's fields."""
    from deepresearch.optimize.targets import with_gold_labels

    run = tmp_path / "gather"
    argv = ["eval", "gather", "--data", str(data_dir / "scifact"), "--lm", "offline", "--limit", "6"]
    assert cli.main([*argv, "--iterations", "2", "--out", str(run), "-q", "--bootstrap", "10"]) == 0
    cases = from_frozen_cases(load_frozen_cases(run / "results.jsonl", scifact))
    examples = [ex for ex in cases if set(ex.gt_ids) & {h.doc.doc_id for h in ex.hits}]  # F1 1.0 can be had
    gt = {h.doc.doc_id for ex in examples for h in ex.hits if h.doc.doc_id in ex.gt_ids}
    docs = [h.doc for ex in examples for h in ex.hits]

    def assess(messages):
        shown_irrelevant = any('"irrelevant"' in m["content"] for m in messages[1:-1] if m["role"] == "assistant")
        label = (lambda d: "relevant" if d in gt else "irrelevant") if shown_irrelevant else (lambda d: "relevant")
        return {"relevance": {key: label(d) for key, d in shown_candidates(messages, docs).items()}}

    spec = metric_spec("assessor", "f1")
    half = len(examples) // 2

    def compiled(train_examples):
        with dspy.context(lm=scripted_lm(routed_handler({LabelCandidates: assess}))):
            return compile_program(
                CandidateAssessor(second_look=False),
                optimizer="bootstrap-rs",
                spec=spec,
                trainset=train_examples[:half],
                devset=examples[half:],
                budget=4 * half,
                num_threads=1,
            )

    plain = compiled(examples)
    assert plain.after == plain.before < 1.0  # demos of its own all-relevant answers change nothing
    labelled = with_gold_labels(examples, CandidateAssessor(second_look=False))
    assert all(
        ex.relevance
        == {str(i): "relevant" if h.doc.doc_id in ex.gt_ids else "irrelevant" for i, h in enumerate(ex.hits, 1)}
        for ex in labelled
    )
    result = compiled(labelled)
    assert result.before == plain.before < result.after == pytest.approx(1.0)
    demos = result.program.label_candidates.demos
    assert demos and all(
        set(d.keys()) <= {"question", "subquery", "checklist", "candidates", "relevance", "augmented"} for d in demos
    )
    assert any("irrelevant" in d.relevance.values() for d in demos)
    json.dumps(result.program.dump_state())  # the demos save as plain JSON


def test_the_research_assessors_gold_labels_number_the_papers_as_the_lm_reads_them(data_dir, scifact, scifact_bm25):
    import asyncio

    from deepresearch.optimize.targets import record_candidates, with_gold_labels
    from deepresearch.optimize.trainsets import from_beir
    from deepresearch.programs.config import preset
    from deepresearch.programs.research.program import DeepResearch
    from deepresearch.programs.stages.assessor import Assessor
    from deepresearch.signatures.assess import AssessRelevance

    program = DeepResearch(retriever=scifact_bm25, config=preset("quick"))
    recorded = asyncio.run(record_candidates(program, from_beir(data_dir / "scifact", "train", scifact)[:6]))
    examples = [ex.copy(sentences=2).with_inputs("task", "sources", "scores", "sentences") for ex in recorded]
    labelled = with_gold_labels(examples, Assessor())
    assert any("relevant" in ex.relevance.values() for ex in labelled)
    for ex in labelled:
        assert [p.paper_id for p in ex.papers] == [str(n) for n in range(1, len(ex.sources) + 1)]
        assert ex.relevance == {
            str(n): "relevant" if s.source_id in ex.relevant_ids else "irrelevant" for n, s in enumerate(ex.sources, 1)
        }
        assert all(len(p.text) <= len(s.text) for p, s in zip(ex.papers, ex.sources))  # the view the LM reads
        assert ex.scores and len(ex.scores) == len(ex.sources)
        assert all(name in ex for name in AssessRelevance.fields)  # whole demonstrations for its predictor
    assert set(labelled[0].inputs().keys()) == {"task", "sources", "scores", "sentences"}


def test_reference_plans_let_the_optimizer_show_the_planner_queries_that_reach_the_papers(data_dir, scifact):
    """A planner model that searches a vague phrase until a demonstration shows it a plan, then searches the
    question itself: its own plans never pass the metric, so only the offline planner's reference plans,
    carried by the training claims, can teach it; they are shown whole, reasoning included."""
    import asyncio

    from deepresearch.optimize.targets import REFERENCE_REASONING, PlanAndSearch, with_reference_plans
    from deepresearch.optimize.trainsets import from_beir
    from deepresearch.programs.stages.planner import OfflinePlanner
    from deepresearch.retrievers.bm25 import BM25Retriever
    from deepresearch.signatures.plan import PlanQueries
    from deepresearch.signatures.types import Task

    retriever = BM25Retriever(scifact)
    examples = from_beir(data_dir / "scifact", "train", scifact)[:8]

    def plan(messages):
        shown_a_plan = any(m["role"] == "assistant" for m in messages[1:-1])
        question = inputs_of(messages)["question"]
        query = question if shown_a_plan else "recent scientific findings"
        return {"tasks": [Task(query=query, goal="the claim").model_dump()]}

    spec = metric_spec("planner", "recall")

    def compiled(trainset):
        with dspy.context(lm=scripted_lm(routed_handler({PlanQueries: plan}))):
            return compile_program(
                PlanAndSearch(retriever, breadth=2, read_k=10),
                optimizer="bootstrap-rs",
                spec=spec,
                trainset=trainset,
                devset=examples[4:],
                budget=16,
                num_threads=1,
            )

    plain = compiled(examples[:4])
    assert plain.after == plain.before == 0.0  # its own vague plans reach nothing and teach nothing
    labelled = asyncio.run(with_reference_plans(examples[:4], PlanAndSearch(retriever, breadth=2)))
    for ex in labelled:
        reference = asyncio.run(OfflinePlanner(retriever).acall(question=ex.question, known=[], max_tasks=2))
        assert ex.tasks == list(reference.tasks) and ex.max_tasks == 2 and ex.known == []
        assert list(ex.inputs().keys()) == ["question"]  # the labels are not inputs of the program
    result = compiled(labelled)
    assert result.before == 0.0 < result.after
    demos = result.program.planner.plan_queries.predict.demos
    assert demos and all(d.reasoning == REFERENCE_REASONING for d in demos if "tasks" in d)
    json.dumps(result.program.dump_state())  # the demos save as plain JSON
