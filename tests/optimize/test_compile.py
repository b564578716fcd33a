"""Each supported optimizer must raise the dev metric of a real stage, and the saved program must keep it.

The task LM is deterministic and answers well only when the prompt carries what an optimizer can add:
few-shot demos, or an instruction containing the rule the prompt LM proposes. Without either it keeps
every paper (F1 2/3 on these pools); with either it keeps exactly the papers whose title names the topic.
Sampled at temperature 1 (as SIMBA does to find better trajectories) it applies the rule on a seeded
coin flip, so sampling can surface good trajectories but only demos or the rule make them reliable.
"""

import json
import random
from statistics import fmean

import dspy
import pytest

from deepresearch.optimize.compile import (
    NoModelAnswer,
    compile_program,
    evaluate_scores,
    paired_bootstrap,
)
from deepresearch.optimize.metrics import metric_spec
from deepresearch.optimize.saved import load_compiled, meta_path, save_compiled
from deepresearch.programs.citing.citations import source_id_for
from deepresearch.programs.stages.assessor import Assessor
from deepresearch.signatures import AssessRelevance, Source, Task
from tests.scripted import inputs_of, routed_handler, scripted_lm, universal_handler

RULE = "Keep a paper only when its title names the task's topic."
TOPICS = [
    "cancer",
    "insulin",
    "malaria",
    "vitamin",
    "hiv",
    "influenza",
    "obesity",
    "tuberculosis",
    "microbiota",
    "diabetes",
]


def pools(corpus):
    examples = []
    for topic in TOPICS:
        on = [d for d in corpus if topic in d.title.lower()][:3]
        off = [d for d in corpus if topic not in d.title.lower() and d.title][TOPICS.index(topic) * 3 :][:3]
        sources = [Source(source_id=source_id_for(d.doc_id), title=d.title, text=d.text[:300]) for d in on + off]
        examples.append(
            dspy.Example(
                task=Task(query=topic, goal=f"papers about {topic}"),
                sources=sources,
                relevant_ids=[s.source_id for s in sources[:3]],
            ).with_inputs("task", "sources")
        )
    return examples


def make_assess():
    coin = random.Random(0)

    def assess(messages, request):
        return judge(messages, lucky=request.config.temperature == 1.0 and coin.random() < 0.5)

    return assess


def judge(messages, lucky=False):
    asked = inputs_of(messages)
    topic = json.loads(asked["task"])["query"]
    skilled = lucky or len(messages) > 2 or RULE in messages[0]["content"]  # demos present, or the proposed rule
    return {
        "relevance": {
            p["paper_id"]: "relevant" if (not skilled or topic in p["title"].lower()) else "irrelevant"
            for p in json.loads(asked["papers"])
        }
    }


@pytest.fixture
def lms():
    task = scripted_lm(routed_handler({AssessRelevance: make_assess()}))
    proposer = scripted_lm(
        universal_handler(
            {
                "proposed_instruction": RULE,
                "new_instruction": RULE,
                "module_advice": lambda m: (
                    {name: RULE for name in json.loads(inputs_of(m).get("module_names", "[]") or "[]")}
                    if inputs_of(m).get("module_names", "").startswith("[")
                    else {"self": RULE}
                ),
            }
        )
    )
    return task, proposer


@pytest.mark.parametrize("optimizer,budget", [("bootstrap-rs", 30), ("gepa", 40), ("miprov2", 30), ("simba", 30)])
def test_optimizer_raises_the_dev_metric_and_the_saved_program_keeps_it(scifact, lms, tmp_path, optimizer, budget):
    task_lm, prompt_lm = lms
    examples = pools(scifact)
    trainset, devset = examples[:6], examples[6:]
    spec = metric_spec("assessor", "f1")
    with dspy.context(lm=task_lm):
        result = compile_program(
            Assessor(),
            optimizer=optimizer,
            spec=spec,
            trainset=trainset,
            devset=devset,
            budget=budget,
            prompt_lm=prompt_lm,
            num_threads=1,
        )  # one thread: a seeded LM
    assert result.before == pytest.approx(2 / 3)
    assert result.after > result.before and result.after == pytest.approx(1.0)
    assert result.lm_calls > 0 and "| after" in result.table()

    path = save_compiled(result.program, tmp_path / "compiled.json", {"optimizer": optimizer, "after": result.after})
    assert "api_key" not in path.read_text()
    assert json.loads(meta_path(path).read_text())["optimizer"] == optimizer
    reloaded = load_compiled(Assessor(), path)
    with dspy.context(lm=task_lm):
        assert fmean(evaluate_scores(reloaded, devset, spec, num_threads=2)) == pytest.approx(result.after)
        assert fmean(evaluate_scores(Assessor(), devset, spec, num_threads=2)) == pytest.approx(result.before)


def test_an_example_the_program_fails_on_logs_one_line_and_scores_zero(scifact, caplog):
    examples = pools(scifact)[:3]
    bad = scripted_lm(lambda messages: "no fields here " + "x" * 5000)  # unparseable in every adapter
    with dspy.context(lm=bad), caplog.at_level("WARNING"):
        scores = evaluate_scores(Assessor(), examples, metric_spec("assessor", "f1"), num_threads=1)
    assert scores == [0.0, 0.0, 0.0]
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 3 and all("\n" not in m and len(m) < 400 for m in failures)
    assert all(examples[0].sources[0].text not in r.getMessage() for r in caplog.records)  # never the example
    assert all(m.startswith("example ") and "AdapterParseError" in m for m in failures)


def test_progress_lines_count_metric_calls_within_the_budget_and_keep_the_best_training_score(scifact):
    examples = pools(scifact)
    lines = []
    with dspy.context(lm=scripted_lm(routed_handler({AssessRelevance: make_assess()}))):
        result = compile_program(
            Assessor(),
            optimizer="bootstrap-rs",
            spec=metric_spec("assessor", "f1"),
            trainset=examples[:4],
            devset=examples[4:7],
            budget=16,
            num_threads=1,
            on_progress=lines.append,
        )
    assert result.metric_calls == len(lines) > 0
    assert result.metric_calls <= 16  # the budget holds: DSPy's own extra candidates run no LM call past it
    assert lines[-1].startswith(f"metric calls {result.metric_calls}/16 · best training score so far ")
    best = [float(line.rsplit(" ", 1)[1]) for line in lines if not line.endswith("–")]
    assert best == sorted(best) and best[-1] > best[0]  # a candidate with demos beat the zero-shot program
    assert len(result.before_scores) == len(result.after_scores) == 3


def test_random_search_scores_its_candidates_on_part_of_a_training_set_the_budget_cannot_cover(scifact):
    # 8 training examples, budget 16: scoring DSPy's 3 seed programs and one candidate on all 8 would take 32
    # metric calls, so the zero-shot program would spend the budget and the candidates with demos score 0 unseen
    examples = pools(scifact)
    with dspy.context(lm=scripted_lm(routed_handler({AssessRelevance: make_assess()}))):
        result = compile_program(
            Assessor(),
            optimizer="bootstrap-rs",
            spec=metric_spec("assessor", "f1"),
            trainset=examples[:8],
            devset=examples[8:],
            budget=16,
            num_threads=1,
        )
    assert result.metric_calls <= 16
    assert result.before == pytest.approx(2 / 3) and result.after == pytest.approx(1.0)  # the demos were seen
    assert sum(len(p.demos) for _, p in result.program.named_predictors()) > 0


def test_a_program_that_scores_zero_on_real_answers_is_still_tuned(scifact):
    # a score of 0 is no failure: the model answered, every paper judged irrelevant (F1 0)
    examples = pools(scifact)
    nothing = {
        AssessRelevance: lambda m: {
            "relevance": {p["paper_id"]: "irrelevant" for p in json.loads(inputs_of(m)["papers"])}
        }
    }
    with dspy.context(lm=scripted_lm(routed_handler(nothing))):
        result = compile_program(
            Assessor(),
            optimizer="bootstrap-rs",
            spec=metric_spec("assessor", "f1"),
            trainset=examples[:4],
            devset=examples[4:6],
            budget=8,
            num_threads=1,
        )
    assert result.before == result.after == 0.0 and result.metric_calls > 0


def test_a_program_that_fails_on_every_dev_example_is_not_tuned(scifact):
    # no LM configured: every example fails before any LM call, so no example got an answer from the model
    examples = pools(scifact)
    with pytest.raises(NoModelAnswer, match="the program failed on every example \\(2 examples; first: "):
        compile_program(
            Assessor(),
            optimizer="bootstrap-rs",
            spec=metric_spec("assessor", "f1"),
            trainset=examples[:4],
            devset=examples[4:6],
            budget=8,
            num_threads=1,
        )


def test_paired_bootstrap_interval_covers_the_mean_change():
    lo, hi = paired_bootstrap([0.0, 0.5, 0.5, 1.0], [0.5, 1.0, 0.5, 1.0])
    assert 0.0 <= lo <= 0.25 <= hi <= 0.5
    assert paired_bootstrap([0.2] * 5, [0.2] * 5) == (0.0, 0.0)
    with pytest.raises(ValueError, match="one length"):
        paired_bootstrap([1.0], [1.0, 0.0])
