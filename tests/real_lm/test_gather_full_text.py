"""The full-text second look against the real model (SmolLM2-135M-Instruct on llama-server).

A 135M model cannot be relied on to label a paper uncertain, so the planner and the first look are
scripted (their predictors get a scripted LM: the LM boundary) and only the second look goes to the real
model. The paper's PDF is served by a local HTTP server. Structure only, not wording: the second look is
sent to the real model with the PDF's passages in it, its verdict parses into a label, and the search
counts one paper browsed.
"""

from __future__ import annotations

import asyncio

import dspy

from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.lm.models import SchemaAdapter, make_lm
from deepresearch.programs.lm.usage import output_limits
from deepresearch.retrievers import BM25Retriever
from deepresearch.retrievers.fulltext import FullTextCache, FullTextRetriever
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries
from tests.programs.test_gather_full_text import ONE_SEARCH, QUESTION, SETTLING, assess, corpus, planner, server  # noqa: F401
from tests.scripted import routed_handler, scripted_lm

CAP = 384  # a verdict and three sentences of evidence


def test_second_look_on_the_real_model_reads_the_served_pdf(llama_server, server, tmp_path):  # noqa: F811
    reader = FullTextRetriever(BM25Retriever(corpus(f"{server.url}/paper.pdf")), FullTextCache(tmp_path / "ft"))
    scripted = scripted_lm(routed_handler({PlanSubqueries: planner(ONE_SEARCH), LabelCandidates: assess}))
    real = make_lm("openai/smollm2", api_base=llama_server.base_url, num_retries=0, cache=False, timeout_s=600)
    # one attempt, waited for: the machine is shared and the model slow
    gatherer = Gatherer(
        reader,
        GatherConfig(iterations=1, max_k=3, lm_timeout_s=600),
        lms={"gather_plan": scripted, "gather_assess": real},
    )
    gatherer.assessor.label_candidates.lm = scripted  # the first look is scripted; the second look is real
    with dspy.context(lm=real, adapter=SchemaAdapter()), output_limits(every=CAP):
        result = asyncio.run(gatherer.acall(question=QUESTION)).result
    (search,) = result.rounds[0].searches
    assert search.error is None, search.error  # the real model's verdict parsed
    (paper,) = [c for c in search.candidates if c.doc_id == "p1"]
    assert paper.label in ("relevant", "irrelevant") and paper.reason.startswith("[full text]")
    assert (search.rechecked, search.browsed, search.unread) == (1, 1, 0)
    assert server.requests == {"/paper.pdf": 1}
    sent = [m["content"] for entry in real.history for m in entry["messages"]]
    assert len(real.history) >= 1 and any(SETTLING in text for text in sent)  # the PDF's passages were shown
    assert result.usage["gather_recheck"].calls >= 1
