"""What a real provider or local server sees and does, over real HTTP (tests/integration/openai_server.py):
keys from the environment, structured decoding, bounded and counted requests, honest failure,
preflight, redaction and a cache that knows its server."""

from __future__ import annotations

import json
import time

import dspy
import pytest

import deepresearch as dr
from deepresearch import cli
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.lm.models import configure_lm_cache, make_lm
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.registry import STAGES
from tests.integration.openai_server import Error, LocalOpenAIServer
from tests.research_lm import research_handler
from tests.scripted import universal_handler

QUESTION = "omega-3 and heart disease"
SECRET = "sk-proj-Zx81TestSecretValue0000aaaa"


pytestmark = pytest.mark.usefixtures("clean_lm_env")


def run_cli(*argv, out):
    return cli.main(
        ["run", QUESTION, "--corpus", "scifact", "--preset", "quick", "-q", "--no-cache", "--out", str(out), *argv]
    )


def trace_of(out):
    return json.loads((out / "trace.json").read_text())


def test_keys_come_from_the_provider_variable_for_every_lm_of_the_run(monkeypatch, tmp_path):
    with LocalOpenAIServer(research_handler()) as server:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # LiteLLM's base-URL variable
        code = run_cli("--lm", "openai/gpt-4o-mini", "--stage-lm", "write=openai/gpt-4.1-mini", out=tmp_path / "r")
    assert code == 0
    assert server.headers and all(h["Authorization"] == f"Bearer {SECRET}" for h in server.headers)
    models = {r["model"] for r in server.requests}
    assert {"gpt-4o-mini", "gpt-4.1-mini"} <= models  # the stage LM reached the same server with the same key
    assert SECRET not in (tmp_path / "r" / "trace.json").read_text()


def test_an_api_base_server_gets_the_deepresearch_key_never_the_provider_key(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", "local-server-key-123")
    with LocalOpenAIServer(research_handler()) as server:
        assert run_cli("--lm", "openai/gpt-4o-mini", "--api-base", server.base_url, out=tmp_path / "r") == 0
    assert {h["Authorization"] for h in server.headers} == {"Bearer local-server-key-123"}


def test_auto_sends_each_stage_output_schema_to_an_api_base_server_and_off_sends_none(tmp_path):
    with LocalOpenAIServer(research_handler()) as server:
        assert run_cli("--lm", "openai/local", "--api-base", server.base_url, out=tmp_path / "a") == 0
        schema_requests = [r for r in server.requests if len(r["messages"]) > 1]  # not the preflight
        server.requests.clear()
        assert (
            run_cli("--lm", "openai/local", "--api-base", server.base_url, "--structured", "off", out=tmp_path / "b")
            == 0
        )
        text_requests = [r for r in server.requests if len(r["messages"]) > 1]
    formats = [r["response_format"] for r in schema_requests]
    assert formats and all(f["type"] == "json_schema" for f in formats)
    plan = next(f["json_schema"]["schema"] for f in formats if "tasks" in f["json_schema"]["schema"]["properties"])
    assert plan["required"] == ["reasoning", "tasks"] and plan["additionalProperties"] is False
    assert text_requests and not any("response_format" in r for r in text_requests)
    assert trace_of(tmp_path / "a")["stats"]["parse_failures"] == 0


def limit_of(request: dict) -> int | None:
    return request.get("max_tokens") or request.get("max_completion_tokens")


def test_every_request_is_bounded_per_stage_and_the_cap_can_be_set(tmp_path):
    with LocalOpenAIServer(research_handler()) as server:
        assert run_cli("--lm", "openai/local", "--api-base", server.base_url, out=tmp_path / "a") == 0
        limits = {limit_of(r) for r in server.requests[1:]}
        server.requests.clear()
        assert (
            run_cli(
                "--lm", "openai/local", "--api-base", server.base_url, "--max-output-tokens", "77", out=tmp_path / "b"
            )
            == 0
        )
        capped = {limit_of(r) for r in server.requests[1:]}
    assert None not in limits and limits <= set(STAGES.max_output_tokens().values())
    assert STAGES.write.max_output_tokens in limits and STAGES.plan.max_output_tokens in limits
    assert capped == {77}


def test_a_reply_cut_at_max_tokens_is_recorded_on_its_node(tmp_path):
    # the server reports as many completion tokens as the merger was allowed: its replies were cut
    def tokens(body):
        return limit_of(body) if "summary" in body["messages"][0]["content"] else 5

    with LocalOpenAIServer(research_handler(), completion_tokens=tokens) as server:
        assert run_cli("--lm", "openai/local", "--api-base", server.base_url, out=tmp_path / "r") == 0
    trace = trace_of(tmp_path / "r")
    assert trace["stats"]["truncated_replies"] >= 1 and trace["usage"]["merge"]["truncated"] >= 1
    notes = [n for node in trace["tree"] for n in node["notes"]]
    assert any("merge: reply cut at max_tokens" in n for n in notes)


def test_every_request_sent_is_counted_with_retries_and_retry_after_is_capped(scifact_bm25):
    sent = {"n": 0}
    base = research_handler()

    def flaky(messages):  # every third request is rate limited with a long Retry-After
        sent["n"] += 1
        return Error(429, "slow down", {"Retry-After": "3600"}) if sent["n"] % 3 == 0 else base(messages)

    with LocalOpenAIServer(flaky) as server:
        lm = make_lm("openai/local", api_base=server.base_url, num_retries=0, cache=False)
        config = ResearchConfig(depth=1, breadth=2, retry_after_cap_s=0.05, lm_retries=3)
        started = time.monotonic()
        with dspy.context(lm=lm):
            out = DeepResearch(retriever=scifact_bm25, config=config)(question=QUESTION)
        elapsed = time.monotonic() - started
    assert out.report.status == "done" and out.stats.failed_nodes == 0
    assert out.stats.retries["lm"] >= 1 and out.stats.failed_requests == out.stats.retries["lm"]
    assert out.stats.lm_calls == len(server.requests)  # answered and rate-limited requests alike
    assert elapsed < 30  # Retry-After: 3600 was capped


def test_python_api_without_an_lm_raises_naming_both_ways_out(scifact_bm25):
    with pytest.raises(dspy.utils.exceptions.LMNotConfiguredError) as err:
        DeepResearch(retriever=scifact_bm25, depth=1, breadth=1)(question=QUESTION)
    assert "dspy.configure(lm=" in str(err.value) and "offline=True" in str(err.value)


def test_a_rejected_key_fails_the_run_with_exit_3_and_says_why(tmp_path, capsys):
    with LocalOpenAIServer(lambda messages: Error(401, "Incorrect API key provided: Bearer local")) as server:
        code = run_cli("--lm", "openai/local", "--api-base", server.base_url, "--no-preflight", out=tmp_path / "r")
    assert code == 3
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "authentication error" in err[0] and "DEEPRESEARCH_API_KEY" in err[0]
    trace = trace_of(tmp_path / "r")
    report = (tmp_path / "r" / "report.md").read_text()
    assert trace["status"] == "failed" and report.startswith("# Research failed")
    assert "no relevant evidence" not in report
    assert trace["stats"]["plan_fallback"] and trace["stats"]["searches"] >= 1  # the question was still searched
    assert trace["stats"]["lm_calls"] == len(server.requests)


@pytest.mark.parametrize(
    "reply,message",
    [
        (Error(401, "bad key"), "authentication error"),
        (None, "could not reach"),
    ],
)
def test_preflight_fails_in_seconds_before_the_corpus_is_loaded(reply, message, tmp_path, capsys):
    with LocalOpenAIServer(lambda messages: reply) as server:
        base = server.base_url if reply is not None else "http://127.0.0.1:9/v1"  # nothing listens on port 9
        started = time.monotonic()
        code = cli.main(
            [
                "run",
                QUESTION,
                "--corpus",
                "/no/such/corpus",
                "--lm",
                "openai/local",
                "--api-base",
                base,
                "--out",
                str(tmp_path / "r"),
            ]
        )
    assert code == 2 and time.monotonic() - started < 20
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "LM check failed" in err[0] and message in err[0]


def test_a_bad_temperature_is_refused_before_any_request(tmp_path, capsys):
    assert (
        cli.main(
            [
                "run",
                QUESTION,
                "--corpus",
                "scifact",
                "--lm",
                "openai/local",
                "--api-base",
                "http://127.0.0.1:9/v1",
                "--temperature",
                "nan",
            ]
        )
        == 2
    )
    assert "--temperature must be from 0 to 2, got nan" in capsys.readouterr().err


def test_credentials_in_the_api_base_and_keys_echoed_by_the_server_are_redacted(tmp_path, capsys, monkeypatch):
    # URL credentials with DEEPRESEARCH_API_KEY set too are refused (tests/faults/test_secrets.py); here the URL's
    # password is the secret the server echoes
    monkeypatch.delenv("DEEPRESEARCH_API_KEY", raising=False)
    with LocalOpenAIServer(lambda messages: Error(500, f"upstream refused Authorization: Bearer {SECRET}")) as server:
        base = server.base_url.replace("http://", f"http://user:{SECRET}@")
        code = run_cli(
            "--lm", "openai/local", "--api-base", base, "--no-preflight", "--lm-timeout", "5", out=tmp_path / "r"
        )
    printed = capsys.readouterr()
    assert code == 3
    for text in (
        printed.err,
        printed.out,
        (tmp_path / "r" / "trace.json").read_text(),
        (tmp_path / "r" / "report.md").read_text(),
    ):
        assert SECRET not in text
    assert "[REDACTED]" in (tmp_path / "r" / "trace.json").read_text()


def test_a_server_that_never_answers_cannot_hold_the_run_past_its_deadline(tmp_path):
    with LocalOpenAIServer(research_handler(), delay=60) as server:
        started = time.monotonic()
        code = run_cli(
            "--lm",
            "openai/local",
            "--api-base",
            server.base_url,
            "--no-preflight",
            "--deadline",
            "2",
            out=tmp_path / "r",
        )
        elapsed = time.monotonic() - started
    assert code == 3 and elapsed < 15  # deadline 2 s, plus at most 5 s for the writer's grace
    assert trace_of(tmp_path / "r")["status"] == "failed"


def test_the_cache_keys_answers_by_server_and_can_be_turned_off(tmp_path):
    def ask(server, **cache):
        configure_lm_cache(cache_dir=tmp_path / "cache", **cache)
        return make_lm("openai/local", api_base=server.base_url, num_retries=0)("same prompt")[0]

    with LocalOpenAIServer(lambda m: "from A") as a, LocalOpenAIServer(lambda m: "from B") as b:
        assert ask(a) == "from A" and ask(b) == "from B"  # same model string, another server: not A's answer
        assert ask(a) == "from A" and len(a.requests) == 1  # the same server again: from the cache
        assert ask(a, enabled=False) == "from A" and len(a.requests) == 2  # --no-cache: asked again
    assert any((tmp_path / "cache").iterdir())  # the cache folder setting is where answers are kept


def test_optimize_also_takes_the_key_from_the_provider_variable(monkeypatch, tmp_path, data_dir):
    with LocalOpenAIServer(research_handler()) as server:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code = cli.main(
            [
                "optimize",
                "--program",
                "research",
                "--stage",
                "assess",
                "--metric",
                "f1",
                "--optimizer",
                "bootstrap-rs",
                "--data",
                str(data_dir / "scifact"),
                "--limit",
                "3",
                "--budget",
                "8",
                "--preset",
                "quick",
                "--no-cache",
                "--lm",
                "openai/gpt-4o-mini",
                "--out",
                str(tmp_path / "compiled.json"),
            ]
        )
    assert code == 0 and len(server.headers) > 1
    assert all(h["Authorization"] == f"Bearer {SECRET}" for h in server.headers)
    assert SECRET not in (tmp_path / "compiled.json").read_text() + (tmp_path / "compiled.meta.json").read_text()


def test_with_only_an_lm_configured_the_python_programs_send_the_schema_to_an_api_base_server(scifact_bm25):
    """`dspy.configure(lm=dspy.LM(...))` alone: replies are asked for as `deepresearch run` asks for them."""
    with LocalOpenAIServer(universal_handler()) as server:
        lm = dspy.LM("openai/local", api_base=server.base_url, api_key="none", cache=False, num_retries=0)
        with dspy.context(lm=lm):
            dr.Gatherer(scifact_bm25, iterations=1)(question=QUESTION)
            gathering = list(server.requests)
            server.requests.clear()
            dr.DeepResearch(retriever=scifact_bm25, config=dr.preset("quick"))(question=QUESTION)
        research = list(server.requests)
    for requests in (gathering, research):
        assert requests and all(r["response_format"]["type"] == "json_schema" for r in requests)
    assert any("searches" in r["response_format"]["json_schema"]["schema"]["properties"] for r in gathering)
