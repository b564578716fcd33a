"""Orchestration: wall time of a research run against its critical path and against baseline schedules.

A simulated LM (an lm15 engine answering like tests/research_lm.py after a fixed latency plus an
exponential jitter, seeded by the prompt) and a simulated retriever (fixed latency) replace the
network. The critical path is measured, not assumed: every call adds its latency to a context
variable that child tasks inherit from their parent, so the largest sum is the longest chain of
dependent calls, the lower bound of any schedule with unlimited concurrency. The sequential time is
the sum of all call latencies, a lower bound of running them one after another (it is not run).
Limitation: a path does not flow back through a join (a parent awaiting its children, the hero
strategy's turn barrier), so for `hero` the measured critical path is too short and its ratio is
only an upper bound of the true one.

Prints, for the eco tree at depth 4 x breadth 4 (halving and fixed breadth) and the hero preset:
wall / critical path (target <= 1.15), level-synchronous / async (target >= 2) and sequential / async
(target >= 10); then the per-call overhead of a stage call through the scheduler against a bare
dspy.Predict loop with a zero-latency LM (target <= 1.3).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
import random
import time
from dataclasses import replace

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from programs.config import ResearchConfig, preset  # noqa: E402
from programs.research import DeepResearch  # noqa: E402
from retrievers.types import Doc, Hit  # noqa: E402
from signatures.enrich import WriteEnrichment  # noqa: E402
from signatures.write import WriteReport  # noqa: E402
from tests.research_lm import research_handler  # noqa: E402
from tests.scripted import ScriptedEngine, inputs_of, request_to_chat  # noqa: E402

LATENCY_S = 0.25
SEARCH_S = 0.02
_path = contextvars.ContextVar("bench_path", default=0.0)


class PathClock:
    """Adds each call's latency to the calling task's path; the writer waits for every path."""

    def __init__(self):
        self.longest = 0.0
        self.total = 0.0
        self.calls = 0

    async def spend(self, latency: float, after_all: bool = False) -> None:
        start = self.longest if after_all else _path.get()
        await asyncio.sleep(latency)
        _path.set(start + latency)
        self.longest = max(self.longest, start + latency)
        self.total += latency
        self.calls += 1


class SimEngine:
    def __init__(self, clock: PathClock, latency: float, jitter: float):
        self.sync = ScriptedEngine(research_handler({WriteEnrichment: lambda m: {"paragraph": "More [x]."}}))
        self.clock, self.latency, self.jitter = clock, latency, jitter

    async def complete(self, request):
        messages = request_to_chat(request)
        seed = int(hashlib.sha1(messages[-1]["content"].encode()).hexdigest()[:8], 16)
        latency = self.latency + random.Random(seed).expovariate(1 / self.jitter) if self.jitter else self.latency
        is_writer = "findings" in inputs_of(messages) and WriteReport.instructions[:30] in messages[0]["content"]
        await self.clock.spend(latency, after_all=is_writer)
        return self.sync.complete(request)


class SimRetriever:
    """Returns k synthetic documents per query after a fixed latency."""

    def __init__(self, clock: PathClock, latency: float):
        self.clock, self.latency = clock, latency

    async def asearch(self, query, k=10, **kw):
        await self.clock.spend(self.latency)
        key = hashlib.sha1(query.encode()).hexdigest()[:6]
        return [Hit(doc=Doc(doc_id=f"{key}-{i}", title=f"Study {i} on {query[:40]}",
                            text=f"Result {i} for {query}. It reports a 12% change in the outcome."),
                    score=1.0 / (i + 1), rank=i + 1) for i in range(k)]

    def search(self, query, k=10, **kw):
        raise RuntimeError("the benchmark retriever is async only")


def run_once(config: ResearchConfig, latency: float = LATENCY_S, jitter: float = LATENCY_S) -> dict:
    clock = PathClock()
    lm = dspy.LM("sim/latency", engine=ScriptedEngine(lambda m: ""), async_engine=SimEngine(clock, latency, jitter),
                 cache=False)
    program = DeepResearch(retriever=SimRetriever(clock, SEARCH_S), config=config)

    async def go():
        with dspy.context(lm=lm, trace=None, disable_history=True):
            t0 = time.perf_counter()
            out = await program.acall(question="Does vitamin D supplementation reduce fracture risk?")
            return out, time.perf_counter() - t0

    out, wall = asyncio.run(go())
    return {"wall": wall, "critical": clock.longest, "sequential": clock.total, "calls": clock.calls,
            "nodes": out.stats["nodes"], "tree": out.report.tree}


def scenario(name: str, config: ResearchConfig) -> None:
    fast = run_once(config)
    level = run_once(replace(config, schedule="level"))
    assert level["tree"] == fast["tree"], "the level schedule built a different tree"
    print(f"{name}: {fast['nodes']} nodes, {fast['calls']} LM calls + searches, caps nodes/lm/search = "
          f"{config.max_concurrency}/{config.lm_concurrency}/{config.search_concurrency}")
    print(f"  async wall {fast['wall']:.2f}s  critical path {fast['critical']:.2f}s  "
          f"wall / critical path = {fast['wall'] / fast['critical']:.3f}  (target <= 1.15)")
    print(f"  level-synchronous wall {level['wall']:.2f}s  speedup = {level['wall'] / fast['wall']:.2f}x  (target >= 2)")
    print(f"  sequential (sum of latencies) {fast['sequential']:.1f}s  speedup = "
          f"{fast['sequential'] / fast['wall']:.1f}x  (target >= 10)")


def overhead(n: int = 300) -> None:
    """Zero-latency LM: a stage call through the scheduler against a bare dspy.Predict loop."""
    from programs.merger import Merger
    from programs.scheduler import CostMeter, Scheduler
    from programs.usage import metered
    from signatures.types import Learning, Task

    lm = dspy.LM("sim/zero", engine=ScriptedEngine(research_handler()),
                 async_engine=SimEngine(PathClock(), 0.0, 0.0), cache=False)
    task = Task(query="vitamin D fractures", goal="g")
    learnings = [Learning(text="Fracture risk fell 12%.", source_ids=["ab12cd34_1"])]
    merger = Merger()

    async def bare():
        t0 = time.perf_counter()
        for _ in range(n):
            await merger.merge_learnings.acall(task=task, learnings=learnings)
        return time.perf_counter() - t0

    async def ours():
        meter = CostMeter()
        with metered(meter):
            sched = Scheduler(ResearchConfig(), meter)
            t0 = time.perf_counter()
            for _ in range(n):
                await sched.call(merger, task=task, learnings=learnings)
            return time.perf_counter() - t0

    async def both():
        with dspy.context(lm=lm, trace=None, disable_history=True):
            await bare(), await ours()  # warm up
            b = min([await bare() for _ in range(3)])
            o = min([await ours() for _ in range(3)])
            return b, o

    b, o = asyncio.run(both())
    print(f"per-call overhead, zero-latency LM: bare dspy.Predict {1e3 * b / n:.2f} ms/call, "
          f"through the scheduler {1e3 * o / n:.2f} ms/call, ratio = {o / b:.2f}x  (target <= 1.3)")


def main() -> None:
    caps = dict(max_concurrency=512, lm_concurrency=512, search_concurrency=512)
    run_once(ResearchConfig(depth=2, breadth=2), latency=0.0, jitter=0.0)  # warm up pydantic and DSPy caches
    scenario("eco, depth 4 x breadth 4 (halving: 4, 2, 1, 1)", ResearchConfig(depth=4, breadth=4, **caps))
    scenario("eco, depth 4 x breadth 4 (fixed breadth)",
             ResearchConfig(depth=4, breadth=4, breadth_rule="fixed", **caps))
    scenario("hero preset (T=3, k=3, k'=2, m=3, depths 24/8)",
             preset("hero", hero=replace(preset("hero").hero, selection="first_k"), **caps))
    overhead()


if __name__ == "__main__":
    main()
