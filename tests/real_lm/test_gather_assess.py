"""The gathering assessor's labels against the real model (SmolLM2-135M-Instruct on llama-server).

Structure only, not quality: with the schema the server enforces (`SchemaAdapter`), the reply is one label for
each candidate's number and nothing else, so it parses, labels every candidate, and names no other; the
prompt shows each candidate's title and best sentences, not its whole abstract.
"""

from __future__ import annotations

import asyncio

import dspy

from deepresearch.programs.lm.models import SchemaAdapter, make_lm
from deepresearch.programs.lm.usage import output_limits
from deepresearch.programs.stages.gathering import CandidateAssessor


def test_real_model_labels_each_candidate_once_under_the_schema(llama_server, scifact_bm25):
    question = "Vitamin D supplementation reduces the risk of bone fractures in older adults."
    hits = scifact_bm25.search("vitamin D fracture", 5)
    lm = make_lm("openai/smollm2", api_base=llama_server.base_url, num_retries=0, cache=False, timeout_s=600)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), output_limits(every=200):
        out = asyncio.run(
            CandidateAssessor(second_look=False).acall(
                question=question, subquery="vitamin D fracture", checklist="", hits=hits
            )
        )
    assert [j.source_id for j in out.judgements] == [h.doc.doc_id for h in hits]
    assert (out.unlabelled, out.unknown) == (0, 0)  # the schema made every number a required key, no others
    assert all(j.label in ("relevant", "irrelevant", "uncertain") for j in out.judgements)
    prompt = lm.history[-1]["messages"][-1]["content"]
    assert all(h.doc.text not in prompt for h in hits if len(h.doc.text) > 600)  # previews, not abstracts
