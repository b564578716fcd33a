"""Scale-out: questions per minute with 1 vs 2 batch workers, and with 1 vs 2 LM servers behind the router.

* workers: `deepresearch batch`'s local process pool (cli/batch.py) over QUESTIONS offline runs
  (the extractive baseline over SciFact, preset quick), 1 worker then 2. Offline runs compute (BM25,
  sentence scoring), so the figure is bounded by free cores as well as by the schedule. The bound is
  the critical path of the batch: with 2 workers the makespan is at least max(sum / 2, the longest
  question), from the per-question times of the 1-worker run; `bound` is the speed-up that allows.
* servers: research runs (depth 1, breadth 3) against simulated OpenAI-compatible servers on 127.0.0.1
  (tests/integration/openai_server.py answering like tests/research_lm.py, each reply after a fixed
  LATENCY_S), each held to one request at a time (max_parallel=1, as llama-server --parallel 1), behind
  the LM router (programs/lm/router.py): 1 server, then 2. The bound is the critical path: the
  same runs against one server with no limit on parallel requests, the longest chain of dependent calls;
  a makespan is at least max(critical path, reply seconds / servers), and `bound` is the speed-up those
  floors allow. `servers busy` is the share of the time the servers spent answering: where the 1-server
  run is under 1 (the router's wait for a free slot polls every 50 ms), the 2-server speed-up can pass
  the bound computed from the floors.

Figures are ratios of runs side by side in this process; the machine line says what else was running.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine_line, table  # noqa: E402

QUESTIONS = [
    "Does obesity increase the risk of type 2 diabetes?",
    "Do statins reduce cardiovascular mortality?",
    "Does vitamin D prevent fractures?",
    "Does smoking cause lung cancer?",
    "Does aspirin prevent colorectal cancer?",
    "Does exercise reduce depression?",
]
LATENCY_S = 0.3  # one simulated LM reply
RUN = ["--corpus", "scifact", "--lm", "offline", "--preset", "quick"]


def workers() -> list[dict]:
    from deepresearch.cli.batch import run_batch

    qs = [{"id": f"q{i}", "question": q} for i, q in enumerate(QUESTIONS)]
    rows, per_question = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, 2):
            started = time.perf_counter()
            records = run_batch(qs, Path(tmp) / f"w{n}", RUN, workers=n, quiet=True)
            wall = time.perf_counter() - started
            assert all(r["status"] == "done" for r in records), records
            if n == 1:
                per_question = {r["id"]: r["seconds"] for r in records}
            rows.append({"what": f"{n} worker(s)", "wall": wall, "qpm": 60 * len(qs) / wall})
    total, longest = sum(per_question.values()), max(per_question.values())
    bound = total / max(total / 2, longest)
    rows[1].update(ratio=rows[1]["qpm"] / rows[0]["qpm"], bound=bound)
    return rows


def servers() -> list[dict]:
    import dspy

    from deepresearch.programs.lm.router import router_lm
    from deepresearch.programs.research.program import DeepResearch
    from deepresearch.retrievers import BM25Retriever, load_corpus
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    data = Path(os.environ.get("DEEPRESEARCH_DATA", ROOT.parent / "shared" / "data"))
    retriever = BM25Retriever(load_corpus(data / "scifact"))

    def questions_per_minute(urls: list[str]) -> tuple[float, float]:
        lm = router_lm("openai/sim", urls, cache=False)
        program = DeepResearch(retriever=retriever, depth=1, breadth=3)
        started = time.perf_counter()
        with dspy.context(lm=lm):

            async def all_questions():
                return await asyncio.gather(*(program.acall(question=q) for q in QUESTIONS))

            outs = asyncio.run(all_questions())
        wall = time.perf_counter() - started
        assert all(o.report.status == "done" for o in outs)
        return wall, 60 * len(QUESTIONS) / wall

    rows = []
    with (
        LocalOpenAIServer(research_handler(), delay=LATENCY_S) as a,
        LocalOpenAIServer(research_handler(), delay=LATENCY_S) as b,
    ):
        for what, n, urls in (
            ("1 server", 1, [f"{a.base_url} max_parallel=1"]),
            ("2 servers", 2, [f"{a.base_url} max_parallel=1", f"{b.base_url} max_parallel=1"]),
            ("critical path", None, [a.base_url]),
        ):
            before = len(a.requests) + len(b.requests)
            wall, qpm = questions_per_minute(urls)
            work = (len(a.requests) + len(b.requests) - before) * LATENCY_S  # seconds of replies asked for
            rows.append(
                {
                    "what": what,
                    "wall": wall,
                    "qpm": qpm,
                    "work": work,
                    "servers": n,
                    "busy": work / (wall * n) if n else None,
                }
            )
    one, two, path = rows
    # the lower bound of a makespan: the critical path, and the replies' seconds shared by the servers
    floor = {n: max(path["wall"], one["work"] / n) for n in (1, 2)}
    two.update(ratio=two["qpm"] / one["qpm"], bound=floor[1] / floor[2])
    return rows


def main() -> None:
    print(machine_line())
    columns = [
        ("what", "", "s"),
        ("wall", "seconds", ".1f"),
        ("qpm", "questions/min", ".1f"),
        ("ratio", "speed-up", ".2f"),
        ("bound", "bound", ".2f"),
    ]
    print(f"batch workers ({len(QUESTIONS)} offline questions, preset quick):")
    print(table(workers(), columns))
    print(
        f"LM servers ({len(QUESTIONS)} questions at once, depth 1 x breadth 3, {LATENCY_S:g} s a reply, "
        f"one request at a time per server):"
    )
    print(table(servers(), columns + [("busy", "servers busy", ".2f")]))


if __name__ == "__main__":
    main()
