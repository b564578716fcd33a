"""The LM router (programs/lm/router.py): several OpenAI-compatible servers behind one model name.

Servers here are real HTTP servers on 127.0.0.1 answering from a script (tests/integration/openai_server.py);
a dead server is a port nobody listens on. LiteLLM's Router is the real one.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from deepresearch import cli
from deepresearch.cli import run as run_cli
from deepresearch.programs.environment import server_keys
from deepresearch.programs.formats.config_file import command_defaults, read_config
from deepresearch.programs.lm.models import (
    LMPreflightError,
    SchemaAdapter,
    explain,
    preflight,
    server_of,
    structured_adapter,
)
from deepresearch.programs.lm.router import RouterConfigError, RoutingLog, Server, parse_server, router_lm
from tests.integration.openai_server import Error, LocalOpenAIServer

_HELD: list[socket.socket] = []  # bound and never listening: connections are refused, and no other server can
# take the port while the tests run (a port closed after it was found free could be)


def dead_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _HELD.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_server_specs_parse_with_their_limits_and_bad_ones_name_the_fix():
    assert parse_server("http://a:8000/v1") == Server("http://a:8000/v1")
    assert parse_server("http://a:8000/v1 max_parallel=4, rpm=600 weight=2 key_env=GPU_KEY") == Server(
        "http://a:8000/v1", max_parallel=4, rpm=600, weight=2, key_env="GPU_KEY"
    )
    with pytest.raises(RouterConfigError, match="unknown setting 'parallel=4'"):
        parse_server("http://a/v1 parallel=4")
    with pytest.raises(RouterConfigError, match="max_parallel must be a whole number"):
        parse_server("http://a/v1 max_parallel=many")
    with pytest.raises(RouterConfigError, match="must be a whole number >= 1"):
        parse_server("http://a/v1 rpm=0")
    with pytest.raises(RouterConfigError, match="must start with http"):
        parse_server("gpu1:8000")
    with pytest.raises(RouterConfigError, match="listed twice"):
        router_lm("openai/m", ["http://a/v1", "http://a/v1"])
    # credentials in a URL never reach the message
    with pytest.raises(RouterConfigError) as err:
        parse_server("http://user:hunter2secret@a/v1 bogus=1")
    assert "hunter2secret" not in str(err.value)


def test_the_settings_file_lists_the_servers_of_a_command(tmp_path):
    path = tmp_path / "deepresearch.toml"
    path.write_text('[run]\nlm = "openai/m"\nlm_server = ["http://a:1/v1 max_parallel=2", "http://b:2/v1 rpm=60"]\n')
    parser = cli.Parser(prog="deepresearch run")
    run_cli.add_arguments(parser)
    defaults = command_defaults(read_config(path), path, "run", parser)
    assert defaults["lm_server"] == ["http://a:1/v1 max_parallel=2", "http://b:2/v1 rpm=60"]
    parser.set_defaults(**defaults)
    args = parser.parse_args(["a question"])
    assert [parse_server(s) for s in args.lm_server] == [
        Server("http://a:1/v1", max_parallel=2),
        Server("http://b:2/v1", rpm=60),
    ]


def test_requests_are_spread_over_the_servers_and_each_keeps_its_parallel_limit():
    with LocalOpenAIServer(lambda m: "one", delay=0.05) as a, LocalOpenAIServer(lambda m: "two", delay=0.05) as b:
        lm = router_lm("openai/m", [f"{a.base_url} max_parallel=1", f"{b.base_url} max_parallel=1"], cache=False)

        async def many():
            return await asyncio.gather(*(lm.acall(f"question {i}") for i in range(16)))

        answers = asyncio.run(many())
        assert sorted({a[0] for a in answers}) == ["one", "two"]
        assert len(a.requests) + len(b.requests) == 16 and a.requests and b.requests
        assert a.most_in_flight == 1 and b.most_in_flight == 1
        routing = lm.routing()
        assert routing["answered"] == {a.base_url: len(a.requests), b.base_url: len(b.requests)}
        assert routing["failovers"] == []
        # the router is a server for the structured-output choice: the output schema goes to it
        assert server_of(lm) == a.base_url and isinstance(structured_adapter("auto", lm), SchemaAdapter)


def test_a_dead_server_fails_over_and_the_log_names_it():
    dead = dead_url()
    with LocalOpenAIServer(lambda m: "alive") as live:
        # weighted so the shuffle is all but sure to try the dead server (it then cools down)
        lm = router_lm("openai/m", [f"{dead} weight=1000", live.base_url], cache=False, timeout_s=5)
        preflight(lm)
        answers = [lm(f"q{i}")[0] for i in range(8)]
    assert answers == ["alive"] * 8
    routing = lm.routing()
    assert routing["answered"][live.base_url] == 8 + 1  # and the preflight's request
    assert routing["failovers"] and {f["server"] for f in routing["failovers"]} == {dead}


def test_a_failure_without_a_message_is_logged_by_its_type():
    # asyncio's TimeoutError() has an empty message: no first line to quote, and the failover still counts
    url = "http://127.0.0.1:9/v1"
    log = RoutingLog([parse_server(url)])
    log.failure(url, TimeoutError())
    log.failure(url, ConnectionError("refused\nby the host"))
    assert [(f["server"], f["error"]) for f in log.failovers] == [
        (url, "TimeoutError: "),
        (url, "ConnectionError: refused"),
    ]


def test_when_every_server_is_down_the_error_says_so_without_the_key(monkeypatch):
    monkeypatch.setenv("GPU_KEY", "sk-router-secret-123456")
    lm = router_lm(
        "openai/m",
        [f"{dead_url()} key_env=GPU_KEY", dead_url()],
        cache=False,
        timeout_s=2,
        failovers=1,
        keys=server_keys(["GPU_KEY"]),
    )  # the command line reads the variable
    with pytest.raises(LMPreflightError) as err:
        preflight(lm)
    assert "could not reach" in str(err.value) or "server error" in str(err.value)
    assert "sk-router-secret" not in str(err.value) and "sk-router-secret" not in json.dumps(lm.routing())


def test_a_server_that_refuses_the_key_is_reported_without_it(monkeypatch):
    monkeypatch.setenv("GPU_KEY", "sk-router-secret-123456")
    with LocalOpenAIServer(lambda m: Error(401, "bad key sk-router-secret-123456")) as server:
        lm = router_lm(
            "openai/m",
            [f"{server.base_url} key_env=GPU_KEY"],
            cache=False,
            failovers=0,
            keys=server_keys(["GPU_KEY"]),
        )
        with pytest.raises(Exception) as err:
            lm("hello")
        assert server.headers[0]["Authorization"] == "Bearer sk-router-secret-123456"  # the key reached the server
    text = explain(err.value, lm)
    assert "authentication error" in text and "sk-router-secret" not in text
    assert "sk-router-secret" not in json.dumps(lm.routing())


def test_api_base_and_servers_together_are_refused_before_any_request(tmp_path, capsys):
    code = cli.main(
        [
            "run",
            "a question",
            "--corpus",
            "scifact",
            "--lm",
            "openai/m",
            "--api-base",
            "http://x/v1",
            "--lm-server",
            "http://y/v1",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert "--api-base and --lm-server" in capsys.readouterr().err


def test_a_run_through_the_router_records_the_failover_in_its_trace(tmp_path, data_dir, monkeypatch, capsys):
    from tests.research_lm import research_handler

    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    dead, out = dead_url(), tmp_path / "run"
    # the dead server weighs 1000 to the live one's 1, so the first request almost surely tries it: with equal
    # weights a nine-request run never picked it about once in 500 and the trace had no failover to show
    with LocalOpenAIServer(research_handler()) as live:
        code = cli.main(
            [
                "run",
                "Does obesity increase the risk of type 2 diabetes?",
                "--corpus",
                "scifact",
                "--depth",
                "1",
                "--breadth",
                "2",
                "--lm",
                "openai/local",
                "--structured",
                "off",
                "--lm-server",
                f"{live.base_url} max_parallel=2",
                "--lm-server",
                f"{dead} weight=1000",
                "--no-cache",
                "-q",
                "--no-preflight",
                "--out",
                str(out),
            ]
        )
    assert code == 0, capsys.readouterr().err[-2000:]
    trace = json.loads((out / "trace.json").read_text())
    routing = trace["lm_routing"]
    assert routing["servers"] == [live.base_url, dead]
    assert routing["answered"][live.base_url] == len(live.requests) and routing["answered"][dead] == 0
    assert {f["server"] for f in routing["failovers"]} == {dead}
    assert trace["status"] == "done" and trace["stats"]["lm_calls"] >= 3


def test_the_preflight_fails_over_as_the_run_does():
    # a run builds its LMs with DSPy's num_retries=0 (its scheduler retries and counts each request); that once
    # also switched the Router's failover off, and the preflight failed whenever the shuffle picked the dead server
    with LocalOpenAIServer(lambda m: "OK") as live:
        for _ in range(6):  # each server is first about half the time: six passes leave no doubt
            lm = router_lm("openai/m", [dead_url(), live.base_url], cache=False, timeout_s=5, num_retries=0)
            preflight(lm)
            assert lm.routing()["answered"][live.base_url] == 1


def test_a_server_url_with_credentials_is_sent_basic_auth_and_shown_without_them(tmp_path, data_dir, monkeypatch):
    import base64

    from tests.research_lm import research_handler

    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    monkeypatch.delenv("DEEPRESEARCH_API_KEY", raising=False)
    out = tmp_path / "run"
    with LocalOpenAIServer(research_handler()) as server:
        url = server.base_url.replace("http://", "http://alice:s3cret-pw-77@")
        code = cli.main(
            ["-q", "run", "Does obesity increase the risk of type 2 diabetes?", "--corpus", "scifact", "--depth", "1"]
            + ["--breadth", "1", "--lm", "openai/local", "--lm-server", url, "--no-cache", "--out", str(out)]
        )
        sent = {h.get("Authorization") for h in server.headers}
    assert code == 0
    assert sent == {"Basic " + base64.b64encode(b"alice:s3cret-pw-77").decode()}  # every request, the preflight too
    trace = json.loads((out / "trace.json").read_text())
    assert trace["lm_routing"]["servers"] == [server.base_url] and trace["lm_routing"]["failovers"] == []
    written = "".join(p.read_text(errors="ignore") for p in out.rglob("*") if p.is_file())
    assert "s3cret-pw-77" not in written and "YWxpY2U6czNjcmV0LXB3LTc3" not in written


def test_every_server_down_is_named_as_unreachable_with_the_option_that_lists_them():
    first, second = dead_url(), dead_url()
    lm = router_lm("openai/m", [first, second], cache=False, timeout_s=2, num_retries=0)
    with pytest.raises(LMPreflightError) as err:
        preflight(lm)
    text = str(err.value)
    assert f"could not reach the LM servers ({first}, {second})" in text and "(--lm-server)" in text
    assert "rate limit" not in text and "--api-base" not in text and "--concurrency" not in text


def test_a_hanging_server_times_out_into_a_counted_failover():
    with LocalOpenAIServer(lambda m: "late", delay=30) as hanging, LocalOpenAIServer(lambda m: "alive") as live:
        # the shuffle is weighted: the hanging server is all but sure to be tried first, then it cools down
        servers = [f"{hanging.base_url} weight=1000", live.base_url]
        lm = router_lm("openai/m", servers, cache=False, timeout_s=1, num_retries=0)
        answers = [lm(f"q{i}")[0] for i in range(4)]
        tried_hanging = len(hanging.requests)
    assert answers == ["alive"] * 4
    failovers = lm.routing()["failovers"]
    assert tried_hanging >= 1 and len(failovers) == tried_hanging
    assert {f["server"] for f in failovers} == {hanging.base_url}
    assert all("Timeout" in f["error"] for f in failovers)
