"""The offline program teaches: its twins record their answers in DSPy's trace under the LM predictors' names,
so DSPy's own `BootstrapFewShot(...).compile(program, teacher=program.offline(), trainset=...)` collects
demonstrations for every predictor a run calls, without a single LM call; `dr.examples`, `dr.metrics` and
`dspy.Evaluate` do the rest, as a DSPy user writes it."""

import dspy
import pytest

import deepresearch as dr
from deepresearch.programs.runtime.stage import teach
from deepresearch.retrievers.passages import sentences as split_sentences
from deepresearch.signatures.plan import PlanQueries
from tests.scripted import scripted_lm


@pytest.fixture
def refusing_lm():
    """The configured LM: any request fails the test (the teacher must not call it)."""

    def handler(messages):
        raise AssertionError("the offline teacher sent an LM request")

    lm = scripted_lm(handler)
    dspy.configure(lm=lm)
    return lm


@pytest.fixture(scope="module")
def train():
    return dr.examples("scifact", "train", limit=6)


def _demos(program: dspy.Module) -> dict[str, list]:
    return {name: p.demos for name, p in program.named_predictors()}


def test_examples_are_dspy_examples_with_the_question_as_input_and_gold_paper_ids_as_labels(train):
    assert len(train) == 6 and all(isinstance(x, dspy.Example) for x in train)
    assert set(train[0].inputs().keys()) == {"question"}
    assert train[0].question == "0-dimensional biomaterials lack inductive properties."
    assert train[0].relevant_ids == ["31715818"]  # SciFact's qrels for claim 0
    assert len(dr.examples("scifact", "train")) == 809  # every train claim with a gold paper


def test_the_offline_gatherer_teaches_both_stages_without_an_lm_call(refusing_lm, scifact_bm25, train):
    gatherer = dr.Gatherer(scifact_bm25, iterations=2)
    teacher = gatherer.offline()
    compiled = dspy.BootstrapFewShot(metric=dr.metrics.gather_recall, max_labeled_demos=0).compile(
        gatherer, teacher=teacher, trainset=train
    )
    assert refusing_lm.scripted.calls == 0
    demos = _demos(compiled)
    assert len(demos["planner.plan_subqueries.predict"]) == len(demos["assessor.label_candidates"]) > 0
    assert demos["assessor.recheck_candidate"] == []  # the twin takes no second look
    # a demonstration is the twin's own answer to the inputs it shows, in the signature's fields
    plan = demos["planner.plan_subqueries.predict"][0]
    fields = ("question", "date_constraint", "subquery_tree", "last_round", "checklist", "memory")
    again = teacher.planner(**{k: plan[k] for k in fields})
    assert plan.searches == again.searches and plan.is_complete == again.is_complete
    assert plan.reasoning and plan.checklist_update.startswith("the paper addresses:")
    labels = demos["assessor.label_candidates"][0]
    assert set(labels.relevance) == {c.paper_id for c in labels.candidates}
    assert set(labels.relevance.values()) <= {"relevant", "irrelevant"}
    assert all(not p.demos for _, p in gatherer.named_predictors())  # the student given is not changed


def test_the_offline_research_program_teaches_every_stage_a_run_calls(refusing_lm, scifact, scifact_bm25, train):
    program = dr.DeepResearch(retriever=scifact_bm25, depth=2, breadth=2)
    compiled = dspy.BootstrapFewShot(metric=dr.metrics.cited_recall, max_labeled_demos=0).compile(
        program, teacher=program.offline(), trainset=train
    )
    assert refusing_lm.scripted.calls == 0
    demos = _demos(compiled)
    called = [
        "planner.plan_queries.predict",
        "assessor.assess_relevance",
        "extractor.extract_learnings",
        "merger.merge_learnings",
        "enricher.find_gaps.predict",
        "writer.write_report",
        "verifier.verify_claims",
    ]
    assert all(demos[name] for name in called), {n: len(d) for n, d in demos.items()}
    # stages a run does not call (asked before it, or deliverables not asked for) have nothing to show
    assert demos["clarifier.clarify_question"] == [] and demos["answerer.write_answer"] == []
    extract = demos["extractor.extract_learnings"][0]
    numbers = [n for p in extract.passages for n in p.sentences]
    assert numbers == list(range(1, len(numbers) + 1))  # numbered on across the passages
    assert extract.quotes and set(extract.quotes) <= set(numbers)  # only sentences the LM is shown
    # each paper as the LM assessor reads it: its title and `assess_sentences` sentences, not the whole passage
    assess = demos["assessor.assess_relevance"][0]
    cut = program.config.assess_sentences
    assert cut and all(len(split_sentences(p.text)) <= cut for p in assess.papers)
    whole = {d.title: d.text for d in scifact}
    assert any(len(p.text) < len(whole[p.title]) for p in assess.papers)
    write = demos["writer.write_report"][0]  # sentences naming the numbered learnings they quote
    shown = {x.number: x.text for x in write.learnings}
    said = [x for section in write.sections for x in section.sentences]
    assert said and all(len(x.learnings) == 1 and shown[x.learnings[0]] == x.text for x in said)


def test_the_compiled_program_shows_the_teachers_demonstrations_to_the_lm(refusing_lm, scifact_bm25, train):
    gatherer = dr.Gatherer(scifact_bm25, iterations=1)
    compiled = dspy.BootstrapFewShot(metric=dr.metrics.gather_recall, max_labeled_demos=0).compile(
        gatherer, teacher=gatherer.offline(), trainset=train
    )
    seen = []

    def handler(messages):
        seen.append(messages)
        raise AssertionError("stop after the first request")

    with dspy.context(lm=scripted_lm(handler)):
        compiled(question="Does vitamin D reduce fracture risk?")
    demo = compiled.planner.plan_subqueries.predict.demos[0]
    assert len(seen[0]) > 2 and any(demo.question in m["content"] for m in seen[0][1:-1])


def test_offline_programs_score_with_dspy_evaluate_and_dr_metrics(scifact_bm25, train):
    evaluate = dspy.Evaluate(devset=train, metric=dr.metrics.gather_f1, num_threads=1)
    result = evaluate(dr.Gatherer(scifact_bm25, iterations=2, offline=True))
    per_query = [score for _, _, score in result.results]
    assert result.score == pytest.approx(100 * sum(per_query) / len(per_query), abs=0.01) and max(per_query) > 0
    question = "Does obesity increase the risk of type 2 diabetes?"
    out = dr.DeepResearch(retriever=scifact_bm25, depth=1, breadth=2, offline=True)(question=question)
    cited = [r.doc_id for r in out.references]
    gold = dspy.Example(question=question, relevant_ids=[cited[0], "not-cited"]).with_inputs("question")
    assert dr.metrics.cited_precision(gold, out) == pytest.approx(1 / len(cited))
    assert dr.metrics.cited_recall(gold, out) == 0.5
    assert 0.0 < dr.metrics.citation_support(gold, out) <= 1.0  # offline sentences are quoted from what they cite


def test_a_twin_out_of_step_with_its_signature_is_caught():
    predictor = dspy.ChainOfThought(PlanQueries)
    with dspy.context(trace=[]), pytest.raises(ValueError, match=r"lacks \['reasoning'\]"):
        teach(predictor, {"question": "q", "known": [], "max_tasks": 1}, tasks=[])
    with dspy.context(trace=[]):
        teach(predictor, {"question": "q", "known": [], "max_tasks": 1}, reasoning="r", tasks=[])
        (recorded, inputs, outputs) = dspy.settings.trace[0]
    assert recorded is predictor.predict and inputs["question"] == "q" and outputs.tasks == []


def _optimize(server, data_dir, out, *options: str) -> int:
    from deepresearch import cli

    return cli.main(
        [
            "optimize",
            "--program",
            "research",
            "--metric",
            "recall",
            "--data",
            str(data_dir / "scifact"),
            "--limit",
            "3",
            "--budget",
            "8",
            "--workers",
            "1",
            "--out",
            str(out),
            "--lm",
            "openai/local-model",
            "--api-base",
            server.base_url,
            "--no-cache",
            *options,
        ]
    )


def test_optimize_teacher_offline_saves_the_twins_demonstrations(data_dir, tmp_path):
    import json

    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    out = tmp_path / "compiled.json"
    with LocalOpenAIServer(research_handler()) as server:
        code = _optimize(server, data_dir, out, "--optimizer", "bootstrap-rs", "--teacher", "offline")
    assert code == 0
    assert json.loads(out.with_name("compiled.meta.json").read_text())["teacher"] == "offline"
    # the candidates the optimizer tried showed the LM the twins' answers as demonstrations (which candidate
    # wins on three examples is the optimizer's choice)
    twin = "The first task searches the question's key terms"  # the offline planner's reasoning, not the LM's
    assert any(twin in json.dumps(r) for r in server.requests)
    demos = json.loads(out.read_text())["planner.plan_queries.predict"]["demos"]
    assert all(d["reasoning"].startswith(twin) for d in demos if d.get("augmented"))


@pytest.mark.parametrize(
    "options,message",
    [
        (
            ("--optimizer", "gepa", "--teacher", "offline"),
            "--teacher offline needs --optimizer bootstrap-rs or miprov2",
        ),
        (("--optimizer", "bootstrap-rs", "--teacher", "offline", "--stage", "write"), "teaches a whole program"),
        (("--optimizer", "bootstrap-rs", "--choose-stages", "--stage", "write"), "chooses among a whole program's"),
    ],
)
def test_optimize_teacher_offline_refuses_what_it_cannot_teach_before_any_lm_request(
    options, message, data_dir, tmp_path, capsys
):
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    with LocalOpenAIServer(research_handler()) as server:
        code = _optimize(server, data_dir, tmp_path / "c.json", *options)
    assert code == 2 and server.requests == []
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "c.json").exists()
