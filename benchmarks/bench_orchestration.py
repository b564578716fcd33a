"""Orchestration: wall time of a research run against its critical path and against baseline schedules.

A simulated LM (an lm15 engine answering like tests/research_lm.py after a fixed latency plus jitter,
seeded by the prompt) and a simulated retriever (fixed latency) replace the network. Two latency
models: exponential jitter, and the same with a straggler tail (see `Latency`).

* wall: the async schedule, run in real time under the scenario's caps.
* critical path: the same program on a virtual clock (tests/virtual_clock.py) with unlimited caps, where
  only the simulated waits take time; that is the longest chain of dependent calls, the lower bound of
  any schedule. It flows through every join (a parent waiting for its children, hero's turns).
* baselines, on the virtual clock: `level` (spec 002's layer_barrier: a level starts when the level
  above has finished) and, for the eco tree, `gptr` (GPT-Researcher's layer-synchronous deep research:
  two siblings at a time, a barrier, then sequential recursion); sequential = the sum of all latencies.
* overhead: a stage call through the scheduler against a bare dspy.Predict loop, zero-latency LM.

Targets (issue 7): wall / critical path <= 1.15, >= 2x over a level-synchronous schedule, >= 10x over
a sequential one, overhead <= 1.3x. A schedule can beat the sequential one by at most the tree's sum of
latencies over its critical path; that bound is printed beside the speedup.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
from dataclasses import replace

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from programs.config import ResearchConfig, preset  # noqa: E402
from programs.research.program import DeepResearch  # noqa: E402
from retrievers.types import Doc, Hit  # noqa: E402
from signatures.enrich import WriteEnrichment  # noqa: E402
from tests.research_lm import research_handler  # noqa: E402
from tests.scripted import ScriptedEngine, request_to_chat  # noqa: E402
from tests.virtual_clock import run_virtual  # noqa: E402

LATENCY_S = 0.25
SEARCH_S = 0.02
UNLIMITED = dict(max_concurrency=10_000, lm_concurrency=10_000, search_concurrency=10_000)


class Latency:
    """Per-call latency: a fixed part plus jitter, drawn from a generator seeded by the request text.

    `exp`: exponential jitter with mean `base`. `tail`: the same, except that a call times out with
    probability `p_timeout` and is answered only after `timeout_x` times the fixed part (a provider's
    straggler or a retried request), the heavy tail real LM APIs have.
    """

    def __init__(self, model: str = "exp", base: float = LATENCY_S, p_timeout: float = 0.05, timeout_x: float = 10.0):
        self.model, self.base, self.p_timeout, self.timeout_x = model, base, p_timeout, timeout_x

    def __call__(self, text: str) -> float:
        if self.base == 0:
            return 0.0
        rng = random.Random(int(hashlib.sha1(text.encode()).hexdigest()[:8], 16))
        if self.model == "tail" and rng.random() < self.p_timeout:
            return self.base * self.timeout_x
        return self.base + rng.expovariate(1 / self.base)

    def describe(self) -> str:
        text = f"latency {self.base:g}s + exponential jitter (mean {self.base:g}s)"
        if self.model == "tail":
            text += f"; {self.p_timeout:.0%} of calls straggle to {self.timeout_x:g}x {self.base:g}s"
        return text


class Clock:
    """Sums what every call waited: the time a one-call-at-a-time schedule would take."""

    def __init__(self):
        self.total = 0.0
        self.calls = 0

    async def spend(self, latency: float) -> None:
        await asyncio.sleep(latency)
        self.total += latency
        self.calls += 1


class SimEngine:
    def __init__(self, clock: Clock, latency: Latency):
        self.sync = ScriptedEngine(research_handler({WriteEnrichment: lambda m: {"paragraph": "More [x]."}}))
        self.clock, self.latency = clock, latency

    async def complete(self, request):
        await self.clock.spend(self.latency(request_to_chat(request)[-1]["content"]))
        return self.sync.complete(request)


class SimRetriever:
    """Returns k synthetic documents per query after a fixed latency."""

    def __init__(self, clock: Clock, latency: float):
        self.clock, self.latency = clock, latency

    async def asearch(self, query, k=10, **kw):
        await self.clock.spend(self.latency)
        key = hashlib.sha1(query.encode()).hexdigest()[:6]
        return [Hit(doc=Doc(doc_id=f"{key}-{i}", title=f"Study {i} on {query[:40]}",
                            text=f"Result {i} for {query}. It reports a 12% change in the outcome."),
                    score=1.0 / (i + 1), rank=i + 1) for i in range(k)]

    def search(self, query, k=10, **kw):
        raise RuntimeError("the benchmark retriever is async only")


def run_once(config: ResearchConfig, latency: Latency, virtual: bool = False) -> dict:
    """One research run on the simulated LM; `virtual` runs it on a virtual clock (waits only)."""
    clock = Clock()
    lm = dspy.LM("sim/latency", engine=ScriptedEngine(lambda m: ""), async_engine=SimEngine(clock, latency),
                 cache=False)
    program = DeepResearch(retriever=SimRetriever(clock, SEARCH_S if latency.base else 0.0), config=config)

    async def go():
        with dspy.context(lm=lm, trace=None, disable_history=True):
            t0 = time.perf_counter()
            out = await program.acall(question="Does vitamin D supplementation reduce fracture risk?")
            return out, time.perf_counter() - t0

    if virtual:
        (out, _), wall = run_virtual(go())
    else:
        out, wall = asyncio.run(go())
    return {"wall": wall, "sequential": clock.total, "calls": clock.calls, "nodes": out.stats.nodes,
            "tree": out.report.tree}


def scenario(name: str, config: ResearchConfig, latency: Latency) -> None:
    fast = run_once(config, latency)
    critical = run_once(replace(config, **UNLIMITED), latency, virtual=True)
    baselines = {"level": "level-synchronous (layer barrier)"}
    if config.strategy == "eco":
        baselines["gptr"] = "GPT-Researcher's layer-synchronous deep research (gptr)"
    runs = {s: run_once(replace(config, schedule=s), latency, virtual=True) for s in baselines}
    assert all(r["tree"] == fast["tree"] for r in [critical, *runs.values()]), "a schedule built a different tree"
    print(f"{name}: {fast['nodes']} nodes, {fast['calls']} LM calls + searches, caps nodes/lm/search = "
          f"{config.max_concurrency}/{config.lm_concurrency}/{config.search_concurrency}")
    print(f"  async wall {fast['wall']:.2f}s  critical path {critical['wall']:.2f}s  "
          f"wall / critical path = {fast['wall'] / critical['wall']:.3f}  (target <= 1.15)")
    for schedule, label in baselines.items():
        t = runs[schedule]["wall"]
        print(f"  {label} {t:.2f}s  speedup = {t / fast['wall']:.2f}x  (target >= 2)")
    print(f"  sequential (sum of latencies) {fast['sequential']:.1f}s  speedup = "
          f"{fast['sequential'] / fast['wall']:.1f}x  (target >= 10)  [at most "
          f"{fast['sequential'] / critical['wall']:.1f}x on this tree: sum of latencies / critical path]")


def overhead(n: int = 300) -> None:
    """Zero-latency LM: a stage call through the scheduler against a bare dspy.Predict loop."""
    from programs.runtime.scheduler import CostMeter, Scheduler
    from programs.runtime.usage import metered
    from programs.stages.merger import Merger
    from signatures.types import Learning, Task

    lm = dspy.LM("sim/zero", engine=ScriptedEngine(research_handler()),
                 async_engine=SimEngine(Clock(), Latency(base=0.0)), cache=False)
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
    run_once(ResearchConfig(depth=2, breadth=2), Latency(base=0.0))  # warm up pydantic and DSPy caches
    for latency in (Latency("exp"), Latency("tail")):
        print(f"== simulated LM: {latency.describe()}; search {SEARCH_S:g}s")
        scenario("eco, depth 4 x breadth 4 (halving: 4, 2, 1, 1)", ResearchConfig(depth=4, breadth=4, **caps), latency)
        scenario("eco, depth 4 x breadth 4 (fixed breadth)",
                 ResearchConfig(depth=4, breadth=4, breadth_rule="fixed", **caps), latency)
        scenario("hero preset (T=3, k=3, k'=2, m=3, depths 24/8)",
                 preset("hero", hero=replace(preset("hero").hero, selection="first_k"), **caps), latency)
        print()
    overhead()


if __name__ == "__main__":
    main()
