"""The real HTTP path: dspy.LM("openai/...") against a local OpenAI-compatible server started here."""

import math

import dspy

from deepresearch.programs.lm.models import make_lm
from deepresearch.programs.research.program import DeepResearch
from deepresearch.signatures import WriteReport
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler, reworded_write


def test_research_over_http_with_an_openai_compatible_server(scifact, scifact_bm25):
    # the writer words its sentences itself, so the verify stage asks about each (a quote would ask nothing)
    with LocalOpenAIServer(research_handler({WriteReport: reworded_write})) as server:
        lm = make_lm("openai/local-model", api_base=server.base_url, api_key="sk-test-secret", cache=False)
        with dspy.context(lm=lm):
            program = DeepResearch(retriever=scifact_bm25, depth=2, breadth=2)
            out = program(question="omega-3 and heart disease")
    # 1 plan + per node (assess, extract, merge) for 2 + 2 nodes + 2 enrich + 1 write + the verify stage's
    # batches (verify_batch sentences per request)
    checked = out.stats.verification["checked"]
    assert checked > 0
    assert len(server.requests) == 1 + 3 * 4 + 2 + 1 + math.ceil(checked / program.config.verify_batch)
    assert {r["model"] for r in server.requests} == {"local-model"}
    assert all(h["Authorization"] == "Bearer sk-test-secret" for h in server.headers)
    assert out.references and all(r.doc_id in scifact for r in out.references)
    assert sum(u.calls for u in out.usage.values()) == len(server.requests)
    assert out.usage["write"].prompt_tokens == 12 and out.usage["write"].completion_tokens == 7
    assert "sk-test-secret" not in str(out.report.to_dict())
