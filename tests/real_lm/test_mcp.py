"""`deepresearch mcp --lm ... --api-base ...` against a real model (SmolLM2-135M-Instruct on llama-server), called
by the MCP SDK's own stdio client: the research tool runs the program with the server's LM options and
answers with a status and its run folder. A 135M model proves the plumbing, not the report's quality."""

from __future__ import annotations

import json
from pathlib import Path

from deepresearch.programs.artifacts import FOLDER_STATUSES
from tests.mcp_client import converse, server_env

QUESTION = "Does omega-3 fatty acid supplementation reduce cardiovascular events?"
# as tests/real_lm/test_pipelines.py runs `deepresearch run`: replies capped, a slow reply on a busy machine is
# no failure, no answer cache; one node, three papers, no verify stage
LM_OPTIONS = ["--structured", "schema", "--max-output-tokens", "1024", "--lm-timeout", "600", "--no-cache"]
LIMIT_S = 900  # a minute or two on two idle cores; the limit only stops a hung server


def test_research_over_mcp_with_the_real_model_answers_with_a_status_and_its_run_folder(
    llama_server, scifact, tmp_path
):
    secret = "sk-mcp-real-0123456789abcdefghijklmnop"  # sent to the model server; never shown
    progress = []

    async def on_progress(done, total, message):
        progress.append((done, total))

    async def talk(session):
        arguments = {"question": QUESTION, "depth": 1, "breadth": 1, "hits": 3, "verify": "off"}
        return await session.call_tool("research", arguments, progress_callback=on_progress)

    options = ["--out", "runs", "--lm", "openai/smollm2", "--api-base", llama_server.base_url, *LM_OPTIONS]
    result = converse(tmp_path, talk, *options, env=server_env(DEEPRESEARCH_API_KEY=secret), limit_s=LIMIT_S)
    log = (tmp_path / "server.log").read_text()
    assert not result.is_error, (result.content, log[-3000:])
    run = result.structured_content
    assert run["status"] in FOLDER_STATUSES and run["status"] != "running", run["status"]
    folder = Path(run["folder"])
    assert folder.parent == tmp_path / "runs" and (folder / "run.json").is_file()
    trace = json.loads((folder / "trace.json").read_text())
    assert trace["models"]["default"] == "openai/smollm2" and trace["status"] == run["status"]
    assert trace["stats"]["lm_calls"] >= 1 and trace["config"]["verify"] == "off"
    assert all(r["doc_id"] in scifact for r in run["references"])
    assert progress and progress[-1][0] == len(progress)  # one notification per finished node
    assert secret not in json.dumps(run) and secret not in log
