"""`deepresearch run --preset gather` against the real model (SmolLM2-135M-Instruct on llama-server).

The preset is shrunk to what a 135M model on two cores runs in a minute or two (one round, two actions,
pages of three); the test asserts structure only: the run completes, the loop's result is on the trace
and scores with ScholarGym's metrics, citations resolve, and every failure is recorded where it happened.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import get_args

import pytest

from deepresearch import cli
from deepresearch.eval.gather import metrics_from_trace
from deepresearch.eval.querysets import load_beir_queryset
from deepresearch.programs.config import PRESETS, GatherLoopConfig
from deepresearch.programs.gather.artifacts import GatherResult, StopReason
from tests.real_lm.test_pipelines import CAP, check_run, lm_args, nodes_of

SMALL_LOOP = GatherLoopConfig(iterations=1, max_actions=2, max_k=3, second_look=False, preview_chars=400)
MAX_CALLS = 12  # one plan, two assessments, an extraction and a merge per subquery, the writer: 8 at most


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch, data_dir):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPRESEARCH_LM"):
        monkeypatch.delenv(var, raising=False)


def test_gather_preset_completes_and_its_trace_scores(llama_server, scifact, data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "gather", replace(PRESETS["gather"], gather=SMALL_LOOP, passage_chars=600))
    query = next(q for q in load_beir_queryset(data_dir / "scifact") if q.query_id == "51")
    out = tmp_path / "gather"
    code = cli.main(
        [
            "run",
            query.query,
            "--corpus",
            "scifact",
            "--preset",
            "gather",
            "--out",
            str(out),
            "--hits",
            "3",
            "--max-lm-calls",
            str(MAX_CALLS),
            "--max-output-tokens",
            str(CAP),
            "--no-cache",
            "-q",
            *lm_args(llama_server),
        ]
    )
    printed = capsys.readouterr()
    assert code in (0, 3), printed.err[-2000:]  # done, or failed with the reason on stderr
    trace = check_run(out, scifact)
    assert trace["stats"]["strategy"] == "gather" and trace["stats"]["lm_calls"] <= MAX_CALLS
    result = GatherResult.from_dict(trace["gathered"])
    assert result.stop_reason in get_args(StopReason) and len(result.rounds) <= 1
    assert trace["usage"]["gather_plan"]["calls"] + trace["usage"]["gather_plan"]["failed"] >= 1
    searches = [s for r in result.rounds for s in r.searches]
    assert all(s.k <= 3 and len(s.candidates) <= 3 for s in searches)
    failures = [e for e in trace["events"] if e["kind"] == "failure"]
    assert sum(s.error is not None and "BudgetExceeded" not in s.error for s in searches) <= len(failures)
    if code == 3:  # a failed run says why, in its first line
        assert trace["error"] and (out / "report.md").read_text().startswith("# Research failed")
    # the subquery nodes show what the loop retrieved and selected
    loop_nodes = [n for n in nodes_of(trace) if n["query"] in {s.text for s in result.tree[1:]}]
    assert {d for n in loop_nodes for d in n["relevant_ids"]} == {x.doc_id for x in result.selected}
    metrics = metrics_from_trace(json.loads((out / "trace.json").read_text()), query.gt_ids)
    assert metrics["evaluated"] == 1 and metrics["iterations"] == 1
    assert all(0.0 <= metrics["final"][m] <= 1.0 for m in ("recall", "precision", "ret_recall", "ret_precision"))
