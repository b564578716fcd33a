"""A run whose LM never answered, or answered too late, never ends `done` (issue 30, item 2): a server
that hangs, and one whose replies outlast the deadline, end failed or partial with exit 3, and every
request the server received is counted."""

from __future__ import annotations

import json

from deepresearch.cli import main
from tests.integration.openai_server import Error, LocalOpenAIServer
from tests.research_lm import research_handler
from tests.scripted import input_fields, is_signature_prompt, output_fields


def run(tmp_path, scifact_head, server, *options):
    return main(
        [
            "-q",
            "run",
            "omega-3 fatty acids and heart disease",
            "--corpus",
            str(scifact_head(300)),
            "--lm",
            "openai/faulty",
            "--api-base",
            server.base_url,
            "--no-cache",
            "--out",
            str(tmp_path / "out"),
            *options,
        ]
    )


def trace_of(tmp_path):
    return json.loads((tmp_path / "out" / "trace.json").read_text())


def test_a_server_that_never_answers_fails_the_run_and_every_request_is_counted(
    tmp_path, capfd, scifact_head, clean_lm_env
):
    with LocalOpenAIServer(research_handler(), delay=600) as server:
        code = run(tmp_path, scifact_head, server, "--lm-timeout", "1", "--deadline", "6", "--no-preflight")
        received = len(server.requests)
    err = capfd.readouterr().err
    trace = trace_of(tmp_path)
    assert code == 3 and trace["status"] == "failed"
    assert "no LM reply was received" in trace["error"] and "no LM reply was received" in err
    assert received >= 1 and trace["stats"]["lm_calls"] == received == trace["stats"]["failed_requests"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.startswith("# Research failed") and "no relevant evidence" not in report
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "failed"


def test_replies_that_outlast_the_deadline_leave_hits_unjudged_and_the_run_says_so(
    tmp_path, capfd, scifact_head, clean_lm_env
):
    with LocalOpenAIServer(research_handler(), delay=2.5) as server:
        code = run(tmp_path, scifact_head, server, "--deadline", "4", "--breadth", "2", "--depth", "1")
        received = len(server.requests)
    trace = trace_of(tmp_path)
    assert code == 3 and trace["status"] in ("failed", "partial")
    assert "left unjudged" in trace["error"]
    # the preflight's request is the command's, not the run's; every other request is counted
    assert trace["stats"]["lm_calls"] == received - 1
    assert "no relevant evidence" not in (tmp_path / "out" / "report.md").read_text()


def test_a_server_error_on_every_request_fails_the_run(tmp_path, capfd, scifact_head, clean_lm_env):
    def handler(messages):
        return "OK" if "Reply with the word OK" in messages[-1]["content"] else Error(500, "boom")

    with LocalOpenAIServer(handler) as server:
        code = run(tmp_path, scifact_head, server, "--deadline", "30")
        received = len(server.requests)
    trace = trace_of(tmp_path)
    assert code == 3 and trace["status"] == "failed" and "no LM reply was received" in trace["error"]
    assert trace["stats"]["lm_calls"] == received - 1  # all but the preflight


def test_a_writer_that_fails_makes_the_run_partial_with_the_reason(tmp_path, capfd, scifact_head, clean_lm_env):
    # every stage answers but the writer, whose every request is a server error: the report can only list the
    # findings as they are, which is no finished report
    routed = research_handler()
    writer = []

    def handler(messages):
        if is_signature_prompt(messages) and "learnings" in input_fields(messages):
            if "sections" in [name for name, _ in output_fields(messages)]:
                writer.append(1)
                return Error(500, "the writer's model crashed")
        return routed(messages)

    with LocalOpenAIServer(handler) as server:
        code = run(tmp_path, scifact_head, server, "--depth", "1", "--breadth", "2", "--deadline", "60")
    trace = trace_of(tmp_path)
    assert writer and code == 3 and trace["status"] == "partial", trace["error"]
    assert trace["error"].startswith("the writer failed") and "merged findings" in trace["error"]
    assert "the writer failed" in capfd.readouterr().err
    report = (tmp_path / "out" / "report.md").read_text()
    assert "> Note: This report is partial: the writer failed" in report
    assert report.count("the writer failed") + report.count("The writer failed") == 1  # said once, not twice
