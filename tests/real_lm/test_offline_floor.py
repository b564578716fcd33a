"""The gathering evaluation with the real model beside the offline floor, on the same SciFact claims.

The loop is shrunk to what SmolLM2-135M on two cores answers in a minute or two (one round, two searches of
three candidates, no second look): a plan and at most two assessments per claim. Both runs go through the
eval runner's own code (`run_queries`, `summarize`) and the comparison is written to a file. The test asserts
what the real model must satisfy honestly: it was called, every claim finished, both runs are scored with
the same metrics, and the comparison is recorded. It does not assert that the LM beats the floor; the README
reports the 10-claim comparison, where at this size it does not.
"""

from __future__ import annotations

import asyncio
import json
from typing import get_args

import dspy

from deepresearch.eval.gather import summarize
from deepresearch.eval.querysets import load_beir_queryset
from deepresearch.eval.run_gather import run_queries, trace_for
from deepresearch.programs.gather.artifacts import StopReason
from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.lm.models import SchemaAdapter, make_lm
from deepresearch.programs.lm.usage import output_limits
from tests.real_lm.test_pipelines import CAP

CLAIMS = 2  # the first two SciFact test claims
# a generous timeout: on a shared two-core machine one planning reply has taken over two minutes
SMALL_LOOP = GatherConfig(
    iterations=1,
    max_actions=2,
    max_k=3,
    second_look=False,
    preview_chars=400,
    ranking_depth=20,
    max_lm_calls=3,
    lm_timeout_s=600.0,
)  # a plan, two assessments


def gather(program, queries) -> list[dict]:
    records: list[dict] = []
    with dspy.context(trace=None, disable_history=True):
        asyncio.run(run_queries(program, queries, workers=1, sink=records, on_done=lambda record: None))
    return records


def test_the_real_model_and_the_offline_floor_are_scored_alike_on_the_same_claims(
    llama_server, scifact_bm25, data_dir, tmp_path
):
    queries = [q for q in load_beir_queryset(data_dir / "scifact") if q.gt_ids][:CLAIMS]
    floor = gather(Gatherer(scifact_bm25, SMALL_LOOP, offline=True), queries)
    lm = make_lm("openai/smollm2", api_base=llama_server.base_url, num_retries=0, cache=False)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), output_limits(every=CAP):
        real = gather(Gatherer(scifact_bm25, SMALL_LOOP), queries)
    comparison = {}
    for name, records in (("offline", floor), ("smollm2", real)):
        # a query that raised is a bug of ours, not the model's: the loop records the model's failures itself
        assert [r["status"] for r in records] == ["done"] * CLAIMS, [r.get("error") for r in records]
        assert all(r["result"]["stop_reason"] in get_args(StopReason) for r in records)
        summary = summarize([trace_for(r) for r in records], SMALL_LOOP.iterations, bootstrap=0)
        assert summary["evaluated"] + summary["failed"] == CLAIMS
        calls = sum(s.get("calls", 0) + s.get("failed", 0) for r in records for s in r["result"]["usage"].values())
        comparison[name] = {"final": summary["final"], "lm_calls": calls, "failed_queries": summary["failed"]}
    assert comparison["offline"]["lm_calls"] == 0 and comparison["offline"]["failed_queries"] == 0
    # the model answered (a request that timed out is recorded as a failed loop, not counted here), a handful
    assert 1 <= comparison["smollm2"]["lm_calls"] <= SMALL_LOOP.max_lm_calls * CLAIMS
    for row in comparison.values():
        if row["final"]:  # empty only when every claim's loop failed, which the trace says (failed_queries)
            assert all(0.0 <= row["final"][m] <= 1.0 for m in ("recall", "precision", "f1", "ret_recall"))
    out = tmp_path / "offline_floor.json"
    out.write_text(json.dumps(comparison, indent=2))
    assert json.loads(out.read_text()).keys() == {"offline", "smollm2"}
