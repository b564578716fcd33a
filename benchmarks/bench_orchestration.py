"""Orchestration: a research run's makespan against its critical path and against baseline schedules.

A simulated LM (an lm15 engine answering like tests/research_lm.py, then waiting a latency drawn per
request) and a simulated retriever (fixed latency) replace the network. Every schedule runs on ONE clock,
the virtual clock of tests/virtual_clock.py: waits take virtual time, computing takes none, so each
figure is deterministic and no other load on the machine changes it.

* async: the library's schedule (programs/runtime/scheduler.py's task pool) under the scenario's caps.
* critical path: the same program with unlimited caps, the longest chain of dependent waits, the lower
  bound of any schedule. It flows through every join (a parent waiting for its children, hero's turns).
* baselines: `level` (ParallelResearch's layer_barrier: a level starts when the level above has finished),
  `sequential` (one node at a time, depth first) and, for the eco trees, `gptr` (GPT-Researcher's
  layer-synchronous deep research); for the parallel strategy, ParallelResearch's -AP and -AP,-RO
  ablations run as scenarios of their own under the same schedules. The sum of all latencies is printed too.
* latency models (`Latency`): exponential jitter; the same with a 5% straggler tail; lognormal
  (sigma = 1); and `fitted`, seconds = a + b * completion tokens, with a and b fitted to the local
  llama-server's measured calls (benchmarks/llm_latency.json, written by measure_llm_latency.py).
* overhead: a stage call through the scheduler against a bare dspy.Predict loop, zero-latency LM, in
  CPU time of this process (min of 5 repeats), which other load on the machine barely changes. It is
  what the virtual clock leaves out: the computing between waits.
* every simulated call answered: a DSPy callback counts the LM calls the program makes (through any LM)
  and the scripted engine counts the ones it answers on the virtual clock; a scenario whose counts differ
  prints MISSED. The scripted answers depend only on what a request asks (as the latencies do), so the
  tree is the same under every schedule; the block says so, with the nodes and LM calls of each schedule.
  A node's notes are left out of that comparison: its `tokens:` line lists the calls finished when the
  node ended, in the order they finished, which is the schedule's. Where the parallel strategy adapts,
  the block says so: its monitor scores each running node every `interval_s` of the clock (a schedule
  that keeps subtrees running longer makes more evaluation calls on the same tree), and its speculative
  children, started alongside their parent and pruned when it does not deepen, get as far as the
  schedule lets them (the full strategy's tree differs by schedule).

Targets (issue 18): wall / critical path <= 1.05 for every tree, the async schedule never slower than
any baseline; (issue 7) overhead <= 1.3x.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import random
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
from dspy.utils.callback import BaseCallback

from benchmarks._common import machine_line, table
from deepresearch.programs.config import ParallelConfig, ResearchConfig, preset
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.types import Doc, Hit
from deepresearch.signatures.enrich import WriteEnrichment
from deepresearch.signatures.orchestrate import DecideDeepen, EvaluateProgress, PlanBreadth
from tests.research_lm import research_handler
from tests.scripted import ScriptedEngine, inputs_of, request_to_chat
from tests.virtual_clock import run_virtual

LATENCY_S = 0.25
SEARCH_S = 0.02
UNLIMITED = {"max_concurrency": 10_000, "lm_concurrency": 10_000, "search_concurrency": 10_000}
CAPS = {"max_concurrency": 512, "lm_concurrency": 512, "search_concurrency": 512}
FITTED = Path(__file__).resolve().parent / "llm_latency.json"
CHARS_PER_TOKEN = 4  # completion tokens of a simulated reply: its characters / 4
TARGET_RATIO = 1.05


class Latency:
    """Per-call latency drawn from a generator seeded by the request text (so every schedule sees the same).

    `exp`: a fixed part `base` plus exponential jitter with mean `base`. `tail`: the same, except that a
    call straggles with probability `p_timeout` and is answered only after `timeout_x` times `base` (a
    provider's straggler or a retried request). `lognormal`: `base` times exp(N(0, sigma^2)), sigma = 1,
    heavy-tailed (median `base`, mean 1.65 `base`). `fitted`: a + b * completion tokens, the constants
    fitted to the local llama-server (benchmarks/llm_latency.json); a search waits `base`-scaled fixed time.
    """

    def __init__(
        self,
        model: str = "exp",
        base: float = LATENCY_S,
        p_timeout: float = 0.05,
        timeout_x: float = 10.0,
        sigma: float = 1.0,
    ):
        self.model, self.base, self.p_timeout, self.timeout_x, self.sigma = model, base, p_timeout, timeout_x, sigma
        self.fit = json.loads(FITTED.read_text()) if model == "fitted" else None

    def __call__(self, text: str, completion_tokens: int = 0) -> float:
        if self.base == 0:
            return 0.0
        rng = random.Random(int(hashlib.sha1(text.encode()).hexdigest()[:8], 16))
        if self.model == "fitted":
            return self.fit["fit"]["a"] + self.fit["fit"]["b"] * completion_tokens
        if self.model == "lognormal":
            return self.base * rng.lognormvariate(0.0, self.sigma)
        if self.model == "tail" and rng.random() < self.p_timeout:
            return self.base * self.timeout_x
        return self.base + rng.expovariate(1 / self.base)

    def describe(self) -> str:
        if self.model == "fitted":
            f, m = self.fit["fit"], self.fit["machine"]
            return (
                f"fitted to the local llama-server ({self.fit['date'][:10]}, {m['cores']} cores, "
                f"{m['llama_threads']} thread(s), {len(self.fit['calls'])} calls): seconds = {f['a']:.3f} + "
                f"{f['b']:.5f} * completion tokens (R^2 {f['r2']:.3f}; tokens = reply chars / {CHARS_PER_TOKEN})"
            )
        if self.model == "lognormal":
            return f"lognormal: {self.base:g}s * exp(N(0, {self.sigma:g}^2))"
        text = f"latency {self.base:g}s + exponential jitter (mean {self.base:g}s)"
        if self.model == "tail":
            text += f"; {self.p_timeout:.0%} of calls straggle to {self.timeout_x:g}x {self.base:g}s"
        return text


class Clock:
    """Sums what every call waited: the time a one-call-at-a-time schedule would take."""

    def __init__(self):
        self.total = 0.0

    async def spend(self, latency: float) -> None:
        await asyncio.sleep(latency)
        self.total += latency


def handler(strategy: str, ablation: str):
    """The scripted LM; for the parallel strategy, policies that vary with the query (full) or fixed ones."""
    overrides = {WriteEnrichment: lambda m: {"paragraph": "More [x]."}}
    if strategy == "parallel":

        def plan(messages):
            asked = inputs_of(messages)
            h = int(hashlib.sha1(asked["query"].encode()).hexdigest()[:4], 16)
            n = 4 if ablation != "full" else 1 + h % 4
            return {"subqueries": [f"{asked['query'][:60]} part {i + 1}" for i in range(n)]}

        def deepen(messages):
            h = int(hashlib.sha1(inputs_of(messages).get("query", "").encode()).hexdigest()[:4], 16)
            return {"deepen": ablation != "full" or h % 3 != 0, "rationale": "scripted"}

        overrides.update(
            {
                PlanBreadth: plan,
                DecideDeepen: deepen,
                EvaluateProgress: {"goal_satisfaction": 0.1, "quality": 0.9, "rationale": "scripted"},
            }
        )
    return research_handler(overrides)


class SimEngine:
    """The scripted LM on the virtual clock; `answered` counts the requests it answered."""

    def __init__(self, clock: Clock, latency: Latency, script=None):
        self.sync = ScriptedEngine(script or handler("eco", "full"))
        self.clock, self.latency = clock, latency
        self.answered = 0

    async def complete(self, request):
        response = self.sync.complete(request)
        self.answered += 1
        tokens = len(response.message.text or "") // CHARS_PER_TOKEN
        await self.clock.spend(self.latency(request_to_chat(request)[-1]["content"], tokens))
        return response


class CallCounter(BaseCallback):
    """Counts the LM calls the program makes, at DSPy's LM boundary: through the configured LM or any other."""

    def __init__(self):
        self.made = 0
        self.models: set[str] = set()

    def on_lm_start(self, call_id, instance, inputs):
        self.made += 1
        self.models.add(str(getattr(instance, "model", instance)))


class SimRetriever:
    """Returns k synthetic documents per query after a fixed latency."""

    def __init__(self, clock: Clock, latency: float):
        self.clock, self.latency = clock, latency
        self.searches = 0

    async def asearch(self, query, k=10, **kw):
        self.searches += 1
        await self.clock.spend(self.latency)
        key = hashlib.sha1(query.encode()).hexdigest()[:6]
        return [
            Hit(
                doc=Doc(
                    doc_id=f"{key}-{i}",
                    title=f"Study {i} on {query[:40]}",
                    text=f"Result {i} for {query}. It reports a 12% change in the outcome.",
                ),
                score=1.0 / (i + 1),
                rank=i + 1,
            )
            for i in range(k)
        ]

    def search(self, query, k=10, **kw):
        raise RuntimeError("the benchmark retriever is async only")


def run_once(config: ResearchConfig, latency: Latency, ablation: str = "full") -> dict:
    """One research run on the simulated LM, on a virtual clock (only the simulated waits take time)."""
    clock, counter = Clock(), CallCounter()
    script = handler(config.strategy, ablation)
    off_clock = ScriptedEngine(script)  # the sync path: the program is async, so nothing should come here
    engine = SimEngine(clock, latency, script)
    lm = dspy.LM("sim/latency", engine=off_clock, async_engine=engine, cache=False)
    retriever = SimRetriever(clock, SEARCH_S if latency.base else 0.0)
    program = DeepResearch(retriever=retriever, config=config)

    async def go():
        with dspy.context(lm=lm, trace=None, disable_history=True, callbacks=[counter]):
            return await program.acall(question="Does vitamin D supplementation reduce fracture risk?")

    out, wall = run_virtual(go())
    return {
        "wall": wall,
        "sequential": clock.total,
        "made": counter.made,
        "answered": engine.answered,
        "off_clock": off_clock.calls,
        "models": counter.models,
        "searches": retriever.searches,
        "by_stage": {stage: u.calls + u.failed for stage, u in out.usage.items()},
        "nodes": out.stats.nodes,
        "tree": out.report.tree,
    }


def shape(tree: tuple) -> tuple:
    """The research tree without the nodes' notes (a node's `tokens:` line lists the calls finished when it
    ended, in the order they finished: the schedule's order, not the tree's)."""
    return tuple(dataclasses.replace(n, notes=(), children=shape(n.children)) for n in tree)


def scenario(name: str, config: ResearchConfig, latency: Latency, ablation: str = "full") -> dict:
    """Runs the async schedule, its critical path and every baseline on the virtual clock; prints a block."""
    config = replace(config, lm_timeout_s=None)  # a fitted writer's reply may outlast the default timeout
    fast = run_once(config, latency, ablation)
    critical = run_once(replace(config, **UNLIMITED), latency, ablation)
    baselines = {"level": "level-synchronous (layer barrier)", "sequential": "sequential (one node at a time)"}
    if config.strategy == "eco":
        baselines["gptr"] = "GPT-Researcher's layer-synchronous deep research (gptr)"
    runs = {s: run_once(replace(config, schedule=s), latency, ablation) for s in baselines}
    every = {"async": fast, "critical": critical, **runs}
    made, answered = sum(r["made"] for r in every.values()), sum(r["answered"] for r in every.values())
    trees: list[tuple[tuple, list[str]]] = []  # the distinct trees, each with the schedules that built it
    for s, r in every.items():
        tree = shape(r["tree"])
        match = next((names for t, names in trees if t == tree), None)
        match.append(s) if match is not None else trees.append((tree, [s]))
    is_same = len(trees) == 1
    p = config.parallel
    is_speculative = config.strategy == "parallel" and p.adaptive_depth and p.speculation != "none"
    ratio = fast["wall"] / critical["wall"]
    slowest_ratio = min(r["wall"] / fast["wall"] for r in runs.values())
    print(
        f"{name}: {fast['nodes']} nodes, {fast['made']} LM calls + {fast['searches']} searches, caps "
        f"nodes/lm/search = {config.max_concurrency}/{config.lm_concurrency}/{config.search_concurrency}"
    )
    print(
        f"  LM calls answered by the scripted engine / made, {len(every)} runs: {answered}/{made}: "
        + ("all answered" if answered == made else f"MISSED {made - answered}")
        + "".join(
            f"; {s}: {r['off_clock']} answered off the clock, models called {sorted(r['models'])}"
            for s, r in every.items()
            if r["answered"] != r["made"]
        )
    )
    per_schedule = ", ".join(f"{s} {r['nodes']}/{r['made']}" for s, r in every.items())
    print(f"  same tree under every schedule: {is_same} (nodes/LM calls: {per_schedule})")
    if not is_same:
        print(f"  trees built: {' | '.join(', '.join(names) for _, names in trees)}")
    if not is_same and is_speculative:
        print(
            "  adaptivity is the point here: children are planned and started alongside their parent "
            f"(speculation {p.speculation}) and pruned when the depth policy does not deepen; how far they got "
            "is the schedule's (async: part of their research; level: none, held behind their level; "
            "sequential: all of it, and their own children, run before the parent decides)"
        )
    stages = {k for r in every.values() for k in r["by_stage"]}
    varying = sorted(k for k in stages if len({r["by_stage"].get(k, 0) for r in every.values()}) > 1)
    if varying == [STAGES.orchestrate.name]:
        print(
            f"  the LM calls differ in stage {varying[0]} only: the monitor scores each running node every "
            f"{p.interval_s:g}s of the clock, and a slower schedule keeps subtrees running longer "
            "(adaptive orchestration, by design)"
        )
    elif varying:
        print(f"  the LM calls differ by schedule in stages {', '.join(varying)}")
    print(
        f"  async {fast['wall']:.2f}s  critical path {critical['wall']:.2f}s  wall / critical path = "
        f"{ratio:.3f}  (target <= {TARGET_RATIO}): {'MET' if ratio <= TARGET_RATIO else 'MISSED'}"
    )
    for schedule, label in baselines.items():
        t = runs[schedule]["wall"]
        print(f"  {label} {t:.2f}s  baseline / async = {t / fast['wall']:.2f}x")
    print(
        f"  sum of latencies {fast['sequential']:.1f}s = {fast['sequential'] / fast['wall']:.1f}x async [at most "
        f"{fast['sequential'] / critical['wall']:.1f}x on this tree: sum of latencies / critical path]; async never "
        f"slower than a baseline: {'MET' if slowest_ratio >= 1.0 else 'MISSED'} (min baseline / async "
        f"{slowest_ratio:.2f}x)"
    )
    return {
        "name": name,
        "latency": latency.model,
        "nodes": fast["nodes"],
        "made": made,
        "answered": answered,
        "is_same": is_same,
        "is_explained": is_same or is_speculative,
        "ratio": ratio,
        "min_speedup": slowest_ratio,
        **{f"x_{s}": runs[s]["wall"] / fast["wall"] for s in runs},
    }


def overhead(n: int = 300) -> None:
    """Zero-latency LM: a stage call through the scheduler against a bare dspy.Predict loop."""
    from deepresearch.programs.lm.usage import metered
    from deepresearch.programs.runtime.scheduler import CostMeter, Scheduler
    from deepresearch.programs.stages.merger import Merger
    from deepresearch.signatures.merge import NumberedLearning
    from deepresearch.signatures.types import Learning, Task

    lm = dspy.LM(
        "sim/zero",
        engine=ScriptedEngine(research_handler()),
        async_engine=SimEngine(Clock(), Latency(base=0.0)),
        cache=False,
    )
    task = Task(query="vitamin D fractures", goal="g")
    learnings = [Learning(text="Fracture risk fell 12%.", source_ids=["ab12cd34_1"])]
    numbered = [NumberedLearning(number=1, text=x.text) for x in learnings]  # what the merger's predictor reads
    merger = Merger()

    async def bare():
        t0 = time.process_time()
        for _ in range(n):
            await merger.merge_learnings.acall(task=task, learnings=numbered)
        return time.process_time() - t0

    async def ours():
        meter = CostMeter()
        with metered(meter):
            sched = Scheduler(ResearchConfig(), meter)
            t0 = time.process_time()
            for _ in range(n):
                await sched.call(merger, task=task, learnings=learnings)
            return time.process_time() - t0

    async def both():
        with dspy.context(lm=lm, trace=None, disable_history=True):
            await bare(), await ours()  # warm up
            b = min([await bare() for _ in range(5)])
            o = min([await ours() for _ in range(5)])
            return b, o

    b, o = asyncio.run(both())
    print(
        f"per-call overhead, zero-latency LM, CPU time (min of 5): bare dspy.Predict {1e3 * b / n:.2f} ms/call, "
        f"through the scheduler {1e3 * o / n:.2f} ms/call, ratio = {o / b:.2f}x  (target <= 1.3)"
    )


def main() -> None:
    logging.disable(logging.WARNING)  # budget stops and retries of the simulated runs are expected; not figures
    print(machine_line())
    run_once(ResearchConfig(depth=2, breadth=2), Latency(base=0.0))  # warm up pydantic and DSPy caches
    models = [Latency("exp"), Latency("tail"), Latency("lognormal")]
    if FITTED.exists():
        models.append(Latency("fitted"))
    else:
        print(
            f"no {FITTED.name}: run `flock /tmp/llama.lock python -m benchmarks.measure_llm_latency` for the "
            "fitted latency model"
        )
    results = []
    for latency in models:
        print(f"== simulated LM, virtual clock: {latency.describe()}; search {SEARCH_S:g}s")
        results.append(
            scenario(
                "eco, depth 4 x breadth 4 (halving: 4, 2, 1, 1)", ResearchConfig(depth=4, breadth=4, **CAPS), latency
            )
            | {"short": "eco 4x4 half"}
        )
        results.append(
            scenario(
                "eco, depth 4 x breadth 4 (fixed breadth)",
                ResearchConfig(depth=4, breadth=4, breadth_rule="fixed", **CAPS),
                latency,
            )
            | {"short": "eco 4x4 fixed"}
        )
        results.append(
            scenario(
                "hero preset (T=3, k=3, k'=2, m=3, depths 24/8)",
                preset("hero", hero=replace(preset("hero").hero, selection="first_k"), **CAPS),
                latency,
            )
            | {"short": "hero"}
        )
        for ablation, label, switches in PARALLEL_ABLATIONS:
            config = preset(
                "parallel", depth=3, deadline_s=None, **CAPS, parallel=replace(ParallelConfig(), **switches)
            )
            results.append(
                scenario(f"parallel {label}, max depth 3", config, latency, ablation) | {"short": f"par {ablation}"}
            )
        print()
    print(
        table(
            results,
            [
                ("latency", "latency", ""),
                ("short", "tree", ""),
                ("nodes", "nodes", "d"),
                ("answered", "answered", "d"),
                ("made", "LM calls", "d"),
                ("is_same", "same tree", ""),
                ("ratio", "wall/critical", ".3f"),
                ("x_level", "level/async", ".2f"),
                ("x_gptr", "gptr/async", ".2f"),
                ("x_sequential", "seq/async", ".2f"),
            ],
        )
    )
    worst = max(results, key=lambda r: r["ratio"])
    slowest = min(results, key=lambda r: r["min_speedup"])
    made, answered = sum(r["made"] for r in results), sum(r["answered"] for r in results)
    differing = [f"{r['latency']} {r['short']}" for r in results if not r["is_explained"]]
    adaptive = sorted({r["short"] for r in results if not r["is_same"] and r["is_explained"]})
    print(
        f"verdict, {len(results)} trees x latency models on the virtual clock: worst wall / critical path "
        f"{worst['ratio']:.3f} ({worst['name']}; target <= {TARGET_RATIO}): "
        f"{'MET' if worst['ratio'] <= TARGET_RATIO else 'MISSED'}; smallest baseline / async "
        f"{slowest['min_speedup']:.2f}x ({slowest['name']}; target >= 1): "
        f"{'MET' if slowest['min_speedup'] >= 1 else 'MISSED'}"
    )
    print(
        f"verdict, simulated calls: {answered} of {made} LM calls answered by the scripted engine: "
        f"{'MET' if answered == made else 'MISSED'}; same tree under every schedule: "
        + ("MET" if not differing else f"MISSED ({', '.join(differing)})")
        + (f", except where adaptivity is the point ({', '.join(adaptive)}: speculative children)" if adaptive else "")
    )
    overhead()


PARALLEL_ABLATIONS = [
    ("full", "full (adaptive breadth and depth, orchestration)", {}),
    ("no_ap", "-AP (breadth 4, always deepen)", {"adaptive_breadth": False, "adaptive_depth": False}),
    (
        "no_ap_no_ro",
        "-AP,-RO (and no orchestration)",
        {"adaptive_breadth": False, "adaptive_depth": False, "orchestrate": False},
    ),
]


if __name__ == "__main__":
    main()
