"""`deepresearch mcp`, as an agent meets it: the real command started by the MCP SDK's own stdio client.

Offline (no LM) over the bundled SciFact corpus: the three tools and their arguments, a search, a research run
into its folder with progress notifications, that folder read back, and bad arguments answered as tool errors
carrying the library's message while the server goes on. Nothing of ours is replaced. The run with a real
model is tests/real_lm/test_mcp.py.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deepresearch.programs.config import preset
from deepresearch.retrievers.extras import install_hint
from tests.mcp_client import converse, server_env
from tests.research_lm import CITATION_NUMBER

QUESTION = "Does obesity increase the risk of type 2 diabetes?"


def test_the_server_lists_search_research_and_read_run_with_their_arguments(tmp_path):
    async def talk(session):
        return {t.name: t for t in (await session.list_tools()).tools}

    tools = converse(tmp_path, talk)
    assert set(tools) == {"search", "research", "read_run"}
    schema = {name: tool.input_schema for name, tool in tools.items()}
    assert schema["search"]["required"] == ["query"]
    assert schema["search"]["properties"]["k"]["default"] == 10
    assert schema["search"]["properties"]["corpus"]["default"] == "scifact"
    assert schema["research"]["required"] == ["question"]
    assert {"depth", "breadth", "hits", "preset", "corpus", "verify"} <= set(schema["research"]["properties"])
    assert "ctx" not in schema["research"]["properties"]  # the protocol's context is no argument
    assert schema["read_run"]["required"] == ["path"]
    assert all(tool.description for tool in tools.values())


def test_search_returns_the_best_scifact_papers_with_ids_titles_scores_and_snippets(tmp_path, scifact):
    async def talk(session):
        return await session.call_tool("search", {"query": "vitamin D supplementation and bone fractures", "k": 4})

    result = converse(tmp_path, talk)
    assert not result.is_error, result.content
    hits = result.structured_content["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4]
    assert all(h["doc_id"] in scifact for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert all(h["title"] and 0 < len(h["snippet"]) <= 300 for h in hits)
    assert any("vitamin d" in (h["title"] + h["snippet"]).lower() for h in hits)


def test_research_writes_a_run_folder_reports_progress_and_read_run_reads_it_back(tmp_path, scifact):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async def talk(session):
        arguments = {"question": QUESTION, "depth": 1, "breadth": 2}
        ran = await session.call_tool("research", arguments, progress_callback=on_progress)
        folder = (ran.structured_content or {}).get("folder", "")
        return ran, await session.call_tool("read_run", {"path": folder})

    ran, read = converse(tmp_path, talk, "--out", "runs")
    assert not ran.is_error, ran.content
    run = ran.structured_content
    assert run["status"] == "done" and run["error"] == "" and run["question"] == QUESTION
    folder = Path(run["folder"])
    assert folder.parent == tmp_path / "runs" and folder.name.endswith(
        "does-obesity-increase-the-risk-of-type-2-diabete"
    )
    assert {"report.md", "trace.json", "report.html", "run.json"} <= {p.name for p in folder.iterdir()}
    assert run["report"] == (folder / "report.md").read_text(encoding="utf-8")
    references = run["references"]
    assert references and all(r["doc_id"] in scifact and r["title"] for r in references)
    cited = {int(n) for n in CITATION_NUMBER.findall(run["report"].split("## References")[0])}
    assert cited and cited <= {r["number"] for r in references}
    # one notification per finished node, counting up to the nodes planned: the root's two tasks
    assert [(done, total) for done, total, _ in progress] == [(1, 2), (2, 2)]
    assert all(message and message.startswith("node ") for _, _, message in progress)
    assert not read.is_error, read.content
    assert read.structured_content == run


def test_each_call_gets_its_own_folder(tmp_path):
    async def talk(session):
        arguments = {"question": QUESTION, "depth": 1, "breadth": 1}
        return [await session.call_tool("research", arguments) for _ in range(2)]

    first, second = converse(tmp_path, talk)  # the default --out: runs/mcp where the server started
    folders = {Path(r.structured_content["folder"]) for r in (first, second)}
    assert len(folders) == 2 and all(f.parent == tmp_path / "runs" / "mcp" and f.is_dir() for f in folders)


def library_message(**overrides) -> str:
    with pytest.raises(ValueError) as raised:
        preset("standard", **overrides)
    return str(raised.value)


BAD_CALLS = [
    ("research", {"question": "   "}, "question is empty; pass the research question as a non-empty string"),
    ("research", {"question": QUESTION, "depth": 0}, library_message(depth=0)),
    ("research", {"question": QUESTION, "preset": "huge"}, "unknown preset 'huge'; choose one of: "),
    ("research", {"question": QUESTION, "verify": "maybe"}, "unknown verify policy 'maybe'; choose one of: "),
    ("research", {"question": QUESTION, "corpus": "no-such-corpus"}, "corpus not found: no-such-corpus; pass "),
    ("search", {"query": "fractures", "corpus": "no-such-corpus"}, "corpus not found: no-such-corpus; pass "),
    ("search", {"query": "fractures", "k": 0}, "k must be >= 1"),
    ("search", {"query": " "}, "query is empty; pass the words to search for"),
    ("read_run", {"path": "no-such-folder"}, "no-such-folder is not a folder; pass a run folder"),
    ("read_run", {"path": "."}, "holds no run (no run.json or trace.json); pass a run folder"),
]


def test_bad_arguments_are_tool_errors_with_the_library_message_and_the_server_goes_on(tmp_path):
    async def talk(session):
        answers = [await session.call_tool(name, arguments) for name, arguments, _ in BAD_CALLS]
        return answers, await session.call_tool("search", {"query": "fractures", "k": 1})

    answers, after = converse(tmp_path, talk, "--out", "runs")
    for (name, arguments, message), answer in zip(BAD_CALLS, answers):
        text = answer.content[0].text
        assert answer.is_error, (name, arguments, text)
        assert text.startswith(f"Error executing tool {name}: ") and message in text, text
        assert "\n" not in text and "Traceback" not in text
    assert not after.is_error and len(after.structured_content["hits"]) == 1
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # bad input: no run folder
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log, log[-3000:]


def test_a_run_whose_lm_cannot_be_reached_ends_failed_saying_why_and_no_key_is_shown(tmp_path):
    secret = "sk-mcp-test-0123456789abcdefghijklmnop"
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lm = ["--lm", "openai/local", "--api-base", f"http://127.0.0.1:{port}/v1", "--no-preflight", "--lm-timeout", "5"]

    async def talk(session):
        return await session.call_tool("research", {"question": QUESTION, "depth": 1, "breadth": 1})

    result = converse(tmp_path, talk, "--out", "runs", *lm, env=server_env(DEEPRESEARCH_API_KEY=secret))
    assert not result.is_error, result.content  # the run ran: its status says how it went
    run = result.structured_content
    assert run["status"] == "failed" and f"could not reach http://127.0.0.1:{port}/v1" in run["error"]
    assert run["report"].startswith("# Research failed") and run["references"] == []
    written = [p.read_text(encoding="utf-8") for p in Path(run["folder"]).iterdir() if p.is_file()]
    assert secret not in str(result.content) and secret not in (tmp_path / "server.log").read_text()
    assert not any(secret in text for text in written)


BLOCKING_RUNNER = textwrap.dedent("""
    import sys

    class Blocker:  # the import boundary: the MCP SDK is not installed here
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "mcp":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    from deepresearch.cli import main

    sys.exit(main(sys.argv[1:]))
""")


def test_without_the_sdk_the_command_fails_in_one_line_naming_the_install_command(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", BLOCKING_RUNNER, "mcp", "--out", "runs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **server_env()},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert re.match(r"deepresearch mcp: error: .*needs the 'mcp' extra: ", line), line
    assert line.endswith(install_hint("mcp"))
    assert not (tmp_path / "runs").exists()  # it stopped before anything else
