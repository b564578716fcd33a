"""Structured decoding on a real small model: parse failures per stage with `--structured schema` and `off`.

Runs the same depth 2 x breadth 3 research on SciFact twice against llama-server serving
SmolLM2-135M-Instruct (tests/real_lm/server.py builds and starts it, or pass --api-base), once with
each predictor's output schema sent as response_format and once with DSPy's text format (and its
JSON fallback), and prints per stage: requests, format fallbacks, predictor calls that never parsed,
replies cut at max_tokens, and seconds per request (wall time / requests; the server runs one
request at a time). The ratio line compares the two runs side by side.

    python -m benchmarks structured [--api-base http://127.0.0.1:8080/v1] [--model openai/smollm2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from benchmarks._common import table  # noqa: E402
from deepresearch.programs.config import ResearchConfig  # noqa: E402
from deepresearch.programs.lm.models import make_lm, structured_adapter  # noqa: E402
from deepresearch.programs.lm.usage import output_limits  # noqa: E402
from deepresearch.programs.research.program import DeepResearch  # noqa: E402
from deepresearch.retrievers import BM25Retriever, load_corpus  # noqa: E402

QUESTION = "Does omega-3 fatty acid supplementation reduce cardiovascular events?"
# small enough for two runs in minutes on 2 cores; the same for both modes
CONFIG = ResearchConfig(depth=2, breadth=3, hits_per_query=5, passage_chars=1000, lm_timeout_s=300.0)
MAX_OUTPUT_TOKENS = 1024  # fits every reply the schema bounds (see tests/real_lm)


def run_mode(mode: str, model: str, api_base: str, retriever) -> dict:
    lm = make_lm(model, api_base=api_base, num_retries=0, cache=False, temperature=0.0, timeout_s=300.0)
    adapter = structured_adapter(mode, lm)
    started = time.perf_counter()
    with dspy.context(lm=lm, **({"adapter": adapter} if adapter else {})), output_limits(every=MAX_OUTPUT_TOKENS):
        out = DeepResearch(retriever=retriever, config=CONFIG)(question=QUESTION)
    seconds = time.perf_counter() - started
    rows = []
    for stage, u in sorted(out.usage.items()):
        requests = u.calls + u.failed
        rows.append(
            {
                "mode": mode,
                "stage": stage,
                "requests": requests,
                "fallbacks": u.fallbacks,
                "parse_failures": u.parse_failures,
                "truncated": u.truncated,
            }
        )
    return {
        "rows": rows,
        "seconds": seconds,
        "requests": out.stats.lm_calls,
        "status": out.report.status,
        "nodes": out.stats.nodes,
        "failed_nodes": out.stats.failed_nodes,
        "learnings": out.stats.learnings,
        "citations": out.stats.citations,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks structured")
    parser.add_argument("--api-base", default=None, help="a running OpenAI-compatible server (default: start one)")
    parser.add_argument("--model", default="openai/smollm2")
    args = parser.parse_args(argv if argv is not None else [])
    data = Path(os.environ.get("DEEPRESEARCH_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    retriever = BM25Retriever(load_corpus(data / "scifact"))
    if args.api_base:
        server, api_base = nullcontext(), args.api_base
    else:
        from tests.real_lm.server import LlamaServer

        server = LlamaServer()
        api_base = None
    with server as running:
        api_base = api_base or running.base_url
        results = {mode: run_mode(mode, args.model, api_base, retriever) for mode in ("schema", "off")}
    rows = [r for mode in results.values() for r in mode["rows"]]
    print(
        f"{args.model} at depth {CONFIG.depth} x breadth {CONFIG.breadth}, {CONFIG.hits_per_query} hits, "
        f"max {MAX_OUTPUT_TOKENS} output tokens per request"
    )
    print(
        table(
            rows,
            [
                ("mode", "mode", "s"),
                ("stage", "stage", "s"),
                ("requests", "requests", "d"),
                ("fallbacks", "fallbacks", "d"),
                ("parse_failures", "never parsed", "d"),
                ("truncated", "cut at max_tokens", "d"),
            ],
        )
    )
    for mode, r in results.items():
        print(
            f"{mode}: {r['requests']} requests in {r['seconds']:.0f} s ({r['seconds'] / max(r['requests'], 1):.1f} "
            f"s/request) · status {r['status']} · nodes {r['nodes']} ({r['failed_nodes']} failed) · "
            f"learnings {r['learnings']} · citations {r['citations']}"
        )
    failures = {m: sum(x["parse_failures"] + x["fallbacks"] for x in r["rows"]) for m, r in results.items()}
    print(f"unparsed first replies, off / schema: {failures['off']} / {failures['schema']}")


if __name__ == "__main__":
    main(sys.argv[1:])
