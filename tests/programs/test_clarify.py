"""Clarifying questions (issue 14 item 5): the signature, the `Clarifier` stage, the research
brief, the answers file, `DeepResearch.clarify` and the run on the brief, and `deepresearch run --clarify /
--clarify-answers` end to end (a local HTTP server answers as the LM; the terminal is a pseudo-terminal)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import dspy
import pytest

from deepresearch import cli
from deepresearch.programs.lm.usage import metered
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.runtime.scheduler import CostMeter
from deepresearch.programs.stages.clarifier import (
    ClarificationsError,
    Clarifier,
    check_clarifications,
    clean_questions,
    plain_brief,
    read_clarifications,
    research_brief,
    split_brief,
)
from deepresearch.signatures.clarify import ClarifyQuestion
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler
from tests.scripted import (
    input_fields,
    inputs_of,
    is_signature_prompt,
    routed_handler,
    scripted_lm,
)

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Does vitamin D supplementation reduce fracture risk?"
ASKED = ["Which population do you mean?", "Which fractures count?"]
# a clarifying question the user leaves blank: its text must never reach a research prompt
BLANK = "Over what follow-up period?"


def asked(questions):
    return {ClarifyQuestion: {"questions": questions}}


def is_clarify(messages) -> bool:
    return is_signature_prompt(messages) and input_fields(messages) == ["question", "max_questions"]


def research_prompts(prompts) -> list[str]:
    """The rendered user messages of every research request (not the clarify step, not the preflight)."""
    return [m[-1]["content"] for m in prompts if is_signature_prompt(m) and not is_clarify(m)]


# ---- the signature ---------------------------------------------------------------------------------------


def test_the_signature_takes_the_question_and_a_cap_and_gives_a_list_of_questions():
    assert list(ClarifyQuestion.input_fields) == ["question", "max_questions"]
    assert {k: v.annotation for k, v in ClarifyQuestion.output_fields.items()} == {"questions": list[str]}
    assert 2 <= len([s for s in ClarifyQuestion.instructions.split(".") if s.strip()]) <= 6


# ---- the research brief ------------------------------------------------------------------------------------


def test_the_brief_is_the_question_with_the_answered_pairs_in_the_spec_form():
    brief = research_brief(
        QUESTION,
        [
            {"question": ASKED[0], "answer": " adults over 65 "},
            {"question": BLANK, "answer": ""},
            {"question": ASKED[1], "answer": "hip\nfractures"},
        ],
    )
    assert brief == (
        f"Initial Query: {QUESTION}\nFollow-up Questions and Answers:\n"
        f"Q: {ASKED[0]}\nA: adults over 65\nQ: {ASKED[1]}\nA: hip fractures"
    )


@pytest.mark.parametrize("answers", [[], ["", "   "], ["-", "?"], ["\n"]])
def test_blank_answers_are_left_out_and_without_an_answer_the_brief_is_the_question(answers):
    items = [{"question": f"Question {i}?", "answer": a} for i, a in enumerate(answers)]
    assert research_brief(QUESTION, items) == QUESTION
    assert research_brief(QUESTION, [*items, {"question": BLANK, "answer": "ten years"}]).count("Q: ") == 1


def test_a_brief_splits_back_into_its_question_and_answers():
    items = ({"question": ASKED[0], "answer": "adults"}, {"question": ASKED[1], "answer": "hip"})
    assert split_brief(research_brief(QUESTION, items)) == (QUESTION, items)
    assert split_brief(QUESTION) == (QUESTION, ())
    assert plain_brief(research_brief(QUESTION, items)) == f"{QUESTION} adults hip"
    assert plain_brief(QUESTION) == QUESTION


@pytest.mark.parametrize(
    "items,message",
    [
        ("adults", "must be a list"),
        ([{"question": "Which?", "answer": "a"}, "adults"], "clarification 2 is a str"),
        ([{"answer": "adults"}], "clarification 1 has no question"),
        ([{"question": "  ", "answer": "adults"}], "clarification 1 has no question"),
        ([{"question": "Which?", "answer": 65}], "clarification 1 has an answer of type int"),
    ],
)
def test_bad_clarifications_are_refused_naming_the_item(items, message):
    with pytest.raises(ClarificationsError, match=message):
        check_clarifications(items)


def test_a_missing_answer_is_blank():
    assert check_clarifications([{"question": "Which?"}]) == ({"question": "Which?", "answer": ""},)


# ---- the answers file ----------------------------------------------------------------------------------------


def test_answers_are_read_from_json_a_trace_or_text(tmp_path):
    expected = ({"question": ASKED[0], "answer": "adults"}, {"question": BLANK, "answer": ""})
    listed = tmp_path / "answers.json"
    listed.write_text(json.dumps([dict(x) for x in expected]))
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"question": QUESTION, "clarifications": [dict(x) for x in expected]}))
    text = tmp_path / "answers.txt"
    text.write_text(f"# my answers\nQ: {ASKED[0]}\nA: adults\n\nq: {BLANK}\n")
    assert read_clarifications(listed) == read_clarifications(trace) == read_clarifications(text) == expected


@pytest.mark.parametrize(
    "content,message",
    [
        ('[{"question": ', "answers.txt is not valid JSON"),
        ('{"question": "x"}', "without a 'clarifications' list"),
        ('[{"answer": "adults"}]', "answers.txt: clarification 1 has no question"),
        ("A: adults\n", "answers.txt:1: expected a 'Q: <question>' line"),
        ("Q: Which?\nA: adults\nA: children\n", "answers.txt:3: expected the next 'Q:' line"),
        ("Q: Which?\nadults\n", "answers.txt:2: expected a 'Q: <question>' line"),
    ],
)
def test_a_bad_answers_file_is_named_with_its_line(tmp_path, content, message):
    path = tmp_path / "answers.txt"
    path.write_text(content)
    with pytest.raises(ClarificationsError, match=message):
        read_clarifications(path)
    with pytest.raises(ClarificationsError, match="cannot read clarifying answers"):
        read_clarifications(tmp_path / "missing.txt")


def test_an_answers_file_that_is_not_utf8_is_refused_with_the_reason(tmp_path):
    # a UnicodeDecodeError has no `strerror`: the message once raised AttributeError instead
    path = tmp_path / "answers.txt"
    path.write_bytes(b"Q: Which population?\nA: adults \xff\xfe\n")
    with pytest.raises(ClarificationsError, match="cannot read clarifying answers .*answers.txt: 'utf-8' codec"):
        read_clarifications(path)


# ---- the Clarifier stage -----------------------------------------------------------------------------------


def test_questions_are_trimmed_deduplicated_and_capped():
    assert clean_questions(
        [
            "  1. Which  population?",
            "which population?",
            "",
            7,
            "- Which dose?",
            "(3) Since when?",
            "Which COVID-19 variant?",
        ],
        3,
    ) == ["Which population?", "Which dose?", "Since when?"]


def test_a_reply_with_more_than_three_questions_gives_three(make_lm):
    reply = ["Which population?", "Which population?", "Which dose?", "Since when?", "Which outcome?", "Where?"]
    lm = make_lm(routed_handler(asked(reply)))
    with dspy.context(lm=lm):
        out = asyncio.run(Clarifier().acall(question=QUESTION))
    assert out.questions == ["Which population?", "Which dose?", "Since when?"] and out.is_parsed
    assert inputs_of(lm.scripted.prompts[0]) == {"question": QUESTION, "max_questions": "3"}


def test_a_clear_question_gets_no_question(make_lm):
    with dspy.context(lm=make_lm(routed_handler(asked([])))):
        out = asyncio.run(Clarifier().acall(question=QUESTION))
    assert out.questions == [] and out.is_parsed


def test_an_unparseable_reply_gives_no_question_and_is_counted_as_a_parse_failure(make_lm):
    lm = make_lm(lambda messages: "I would ask about the population and the dose.")
    meter = CostMeter()
    with dspy.context(lm=lm), metered(meter):
        out = asyncio.run(Clarifier().acall(question=QUESTION))
    assert out.questions == [] and not out.is_parsed
    usage = meter.snapshot()["clarify"]
    assert usage.parse_failures == 1 and usage.calls == lm.scripted.calls == 2  # the text format, then JSON
    assert any("clarify: no reply parsed" in note for note in meter.notes("root"))


# ---- DeepResearch: clarify, then research on the brief -------------------------------------------------------


def test_clarify_then_research_on_the_brief_keeps_the_question_and_counts_the_clarify_call(scifact_bm25):
    lm = scripted_lm(research_handler(asked([*ASKED, BLANK])))
    program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)
    meter = CostMeter()
    with dspy.context(lm=lm):
        questions = program.clarify(QUESTION, meter=meter)
        assert questions == [*ASKED, BLANK]
        answers = [
            {"question": ASKED[0], "answer": "postmenopausal women"},
            {"question": ASKED[1], "answer": "hip fractures"},
            {"question": BLANK, "answer": " "},
        ]
        snapshots = []
        out = program(question=QUESTION, clarifications=answers, meter=meter, on_snapshot=snapshots.append)
    assert out.report.question == QUESTION and out.question == QUESTION
    assert out.report.clarifications == (*answers[:2], {"question": BLANK, "answer": ""})
    assert out.brief == research_brief(QUESTION, answers) and "postmenopausal women" in out.brief
    prompts = research_prompts(lm.scripted.prompts)
    plan = [p for p in prompts if "[[ ## max_tasks ## ]]" in p]
    assert plan and all("A: postmenopausal women" in p and "A: hip fractures" in p for p in plan)
    assert not any(BLANK in p for p in prompts)  # a blank answer never reaches the LM, nor its question
    assert snapshots and all(s["question"] == QUESTION for s in snapshots)  # the trace names the user's question
    assert out.usage["clarify"].calls == 1
    assert out.stats.lm_calls == sum(u.calls + u.failed for u in out.usage.values()) == lm.scripted.calls


def test_without_clarifications_the_run_is_unchanged(scifact_bm25):
    lm = scripted_lm(research_handler())
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=1)(question=QUESTION)
    assert out.brief == QUESTION and out.report.clarifications == () and "clarify" not in out.usage
    assert not any("Initial Query" in p for p in research_prompts(lm.scripted.prompts))


def test_the_clarify_stage_takes_its_own_lm(scifact_bm25):
    main_lm = scripted_lm(research_handler())
    clarify_lm = scripted_lm(routed_handler(asked(ASKED[:1])), model="fake/clarifier")
    program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=1, lms={"clarify": clarify_lm})
    with dspy.context(lm=main_lm):
        assert program.clarify(QUESTION) == ASKED[:1]
    assert clarify_lm.scripted.calls == 1 and main_lm.scripted.calls == 0


def test_bad_clarifications_fail_before_any_lm_call(scifact_bm25):
    lm = scripted_lm(research_handler())
    with dspy.context(lm=lm), pytest.raises(ClarificationsError, match="clarification 1 has no question"):
        DeepResearch(retriever=scifact_bm25, depth=1, breadth=1)(question=QUESTION, clarifications=[{"answer": "x"}])
    assert lm.scripted.calls == 0


def test_offline_asks_nothing_but_researches_the_answers(scifact_bm25):
    program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=1, offline=True)
    assert program.clarify(QUESTION) == []
    out = program(question=QUESTION, clarifications=[{"question": ASKED[0], "answer": "postmenopausal women"}])
    assert "postmenopausal" in out.report.tree[0].query and "initial" not in out.report.tree[0].query
    assert out.markdown.startswith(f"## {QUESTION}\n") and out.report.question == QUESTION


def test_every_strategy_and_deliverable_names_the_question_and_searches_the_answers(scifact_bm25):
    # the brief's labels ("Initial Query", "Q:") are never searched, headed or used as a topic
    from deepresearch.programs.config import preset

    answers = [{"question": ASKED[0], "answer": "postmenopausal women"}]
    config = preset("gather", answer=True, taxonomy=True, gather=preset("gather").gather.__class__(iterations=1))
    out = DeepResearch(retriever=scifact_bm25, offline=True, config=config)(question=QUESTION, clarifications=answers)
    queries = [n.query for n in out.report.nodes()]
    assert queries and all("initial" not in q.lower() and "follow-up" not in q.lower() for q in queries)
    assert any("postmenopausal" in q for q in queries)
    assert out.markdown.startswith(f"## {QUESTION}\n") and out.report.taxonomy["topic"] == QUESTION
    assert out.report.taxonomy["hierarchy_tree"]["name"] == QUESTION and out.report.answer


# ---- the command line ----------------------------------------------------------------------------------------


def clarify_handler(questions=ASKED, reply: str | None = None):
    """The research handler, answering the clarify step with `questions` (or the raw text `reply`)."""
    research = research_handler(asked(list(questions)))

    def handler(messages):
        if reply is not None and is_clarify(messages):
            return reply
        return research(messages)

    return handler


def run_args(*extra, out, server=None):
    lm = ["--lm", "openai/local", "--api-base", server.base_url, "--no-cache"] if server else []
    return [
        "run",
        QUESTION,
        "--corpus",
        "scifact",
        "--depth",
        "1",
        "--breadth",
        "2",
        "-q",
        "--out",
        str(out),
        *lm,
        *extra,
    ]


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_offline_answers_from_a_file_join_the_brief(tmp_path, capsys):
    answers = tmp_path / "answers.txt"
    answers.write_text(f"Q: {ASKED[0]}\nA: postmenopausal women\nQ: {BLANK}\nA:\n")
    assert cli.main(run_args("--clarify-answers", str(answers), out=tmp_path / "r")) == 0
    trace = json.loads((tmp_path / "r" / "trace.json").read_text())
    assert trace["question"] == QUESTION and trace["status"] == "done"
    assert trace["clarifications"] == [
        {"question": ASKED[0], "answer": "postmenopausal women"},
        {"question": BLANK, "answer": ""},
    ]
    assert (
        trace["brief"] == f"Initial Query: {QUESTION}\nFollow-up Questions and Answers:\nQ: {ASKED[0]}\n"
        f"A: postmenopausal women"
    )
    assert all("postmenopausal" in node["query"] for node in trace["tree"])
    assert (tmp_path / "r" / "report.md").read_text().startswith(f"## {QUESTION}\n")
    assert "--clarify" not in capsys.readouterr().err


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_resume_keeps_the_answers_the_trace_recorded(tmp_path, capsys):
    answers = tmp_path / "answers.txt"
    answers.write_text(f"Q: {ASKED[0]}\nA: postmenopausal women\n")
    out = tmp_path / "r"
    assert cli.main(run_args("--clarify-answers", str(answers), out=out)) == 0
    first = json.loads((out / "trace.json").read_text())
    capsys.readouterr()
    # the journal is keyed by the brief: resuming without the answers file researches the same brief
    assert cli.main(run_args("--resume", out=out)) == 0
    assert "resumed: 2 nodes restored" in capsys.readouterr().out
    trace = json.loads((out / "trace.json").read_text())
    assert trace["clarifications"] == first["clarifications"] and trace["brief"] == first["brief"]
    assert trace["stats"]["resumed_nodes"] == 2 and trace["markdown"] == first["markdown"]


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_offline_clarify_says_in_one_line_that_nothing_is_asked(tmp_path, capsys):
    assert cli.main(run_args("--clarify", out=tmp_path / "r")) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "--clarify" in x]
    assert len(lines) == 1 and "offline" in lines[0] and "researching the question as given" in lines[0]
    trace = json.loads((tmp_path / "r" / "trace.json").read_text())
    assert trace["clarifications"] == [] and trace["brief"] == QUESTION and trace["status"] == "done"


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_clarify_without_a_terminal_asks_nothing_and_researches(tmp_path, capsys):
    with LocalOpenAIServer(clarify_handler()) as server:
        assert cli.main(run_args("--clarify", out=tmp_path / "r", server=server)) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "--clarify" in x]
    assert len(lines) == 1 and "not a terminal" in lines[0] and "--clarify-answers" in lines[0]
    assert not any(is_clarify(r["messages"]) for r in server.requests)
    trace = json.loads((tmp_path / "r" / "trace.json").read_text())
    assert trace["status"] == "done" and trace["clarifications"] == [] and "clarify" not in trace["usage"]


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_answers_file_with_an_lm_reach_every_research_prompt_but_blank_ones(tmp_path):
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps([{"question": ASKED[0], "answer": "postmenopausal women"}, {"question": BLANK, "answer": ""}])
    )
    with LocalOpenAIServer(clarify_handler()) as server:
        assert (
            cli.main(run_args("--clarify", "--clarify-answers", str(answers), out=tmp_path / "r", server=server)) == 0
        )
    prompts = [r["messages"][-1]["content"] for r in server.requests if len(r["messages"]) > 1]
    assert not any(is_clarify(r["messages"]) for r in server.requests)  # answers given: nothing is asked
    plan = [p for p in prompts if "max_tasks" in p]
    assert plan and all("postmenopausal women" in p for p in plan)
    assert not any(BLANK in p for p in prompts)
    trace = json.loads((tmp_path / "r" / "trace.json").read_text())
    assert trace["question"] == QUESTION and len(trace["clarifications"]) == 2
    assert "A: postmenopausal women" in trace["brief"] and BLANK not in trace["brief"]


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_a_bad_answers_file_is_one_line_before_any_lm_request(tmp_path, capsys):
    answers = tmp_path / "answers.txt"
    answers.write_text("A: before any question\n")
    with LocalOpenAIServer(clarify_handler()) as server:
        assert cli.main(run_args("--clarify-answers", str(answers), out=tmp_path / "r", server=server)) == 2
    errors = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert len(errors) == 1 and f"{answers}:1" in errors[0]
    assert server.requests == [] and not (tmp_path / "r").exists()


def run_on_terminal(argv: list[str], answers: list[str], timeout: float = 180.0) -> tuple[int, str, str]:
    """Runs `deepresearch` with stdin and stdout on a pseudo-terminal; types each answer after a `> ` prompt.

    Returns the exit code, what the terminal showed and stderr.
    """
    main, term = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepresearch.cli", *argv],
        cwd=ROOT,
        stdin=term,
        stdout=term,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        close_fds=True,
    )
    os.close(term)
    shown, pending, deadline = b"", list(answers), time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
                if pending and shown.rstrip(b" ").endswith(b">"):
                    os.write(main, pending.pop(0).encode() + b"\n")
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"no exit in {timeout:.0f} s; the terminal showed: {shown[-2000:]!r}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return code, shown.decode(errors="replace").replace("\r\n", "\n"), proc.stderr.read().decode()


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_clarify_on_a_terminal_asks_and_folds_the_answers(tmp_path):
    out = tmp_path / "r"
    with LocalOpenAIServer(clarify_handler([*ASKED, BLANK])) as server:
        code, shown, err = run_on_terminal(
            run_args("--clarify", out=out, server=server), ["postmenopausal women", "hip fractures", ""]
        )
    assert code == 0, err[-2000:]
    assert "3 clarifying questions before research" in shown
    assert f"[1/3] {ASKED[0]}" in shown and f"[3/3] {BLANK}" in shown
    trace = json.loads((out / "trace.json").read_text())
    assert trace["clarifications"] == [
        {"question": ASKED[0], "answer": "postmenopausal women"},
        {"question": ASKED[1], "answer": "hip fractures"},
        {"question": BLANK, "answer": ""},
    ]
    assert trace["brief"] == research_brief(QUESTION, trace["clarifications"]) and trace["question"] == QUESTION
    assert trace["usage"]["clarify"]["calls"] == 1
    assert trace["stats"]["lm_calls"] == sum(u["calls"] + u["failed"] for u in trace["usage"].values())
    research = [
        r["messages"][-1]["content"]
        for r in server.requests
        if len(r["messages"]) > 1 and not is_clarify(r["messages"])
    ]
    assert research and not any(BLANK in p for p in research)
    assert all("postmenopausal women" in p for p in research if "max_tasks" in p)


@pytest.mark.usefixtures("clean_lm_env")
def test_cli_clarify_on_a_terminal_with_an_unparseable_reply_says_so_and_researches(tmp_path):
    out = tmp_path / "r"
    with LocalOpenAIServer(clarify_handler(reply="Which population, and which dose")) as server:
        code, shown, err = run_on_terminal(run_args("--clarify", out=out, server=server), [])
    assert code == 0, err[-2000:]
    lines = [x for x in err.splitlines() if "--clarify" in x]
    assert len(lines) == 1 and "did not parse" in lines[0] and "clarifying questions before" not in shown
    trace = json.loads((out / "trace.json").read_text())
    assert trace["status"] == "done" and trace["clarifications"] == [] and trace["brief"] == QUESTION
    assert trace["usage"]["clarify"]["parse_failures"] == 1
    assert any("clarify: no reply parsed" in n for n in trace["stats"]["root_notes"])
