"""Scheduler and budgets of DeepResearch: one pool, no level barriers, caps, rate limits, deadline, cost."""

import asyncio
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dspy
import pytest
from dspy.lm15 import RateLimitError

from deepresearch.programs.config import HeroConfig, ResearchConfig
from deepresearch.programs.lm import models
from deepresearch.programs.lm.models import DEFAULT_LM_CONCURRENCY, lm_concurrency
from deepresearch.programs.lm.usage import UsageMeter
from deepresearch.programs.render import cost_line
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.runtime.scheduler import Scheduler, TaskPool, model_cost
from deepresearch.signatures.enrich import WriteEnrichment
from tests.research_lm import research_handler
from tests.scripted import ScriptedEngine, inputs_of

QUESTION = "vitamin D and bone fractures"


class TimedEngine:
    """Async engine whose latency depends on what is asked; records how many calls are in flight."""

    def __init__(self, handler, delay_of=lambda messages: 0.0, fail_first: int = 0):
        self.sync = ScriptedEngine(handler)
        self.delay_of, self.fail_first = delay_of, fail_first
        self.in_flight = self.peak = self.rate_limited = 0
        self.lock = threading.Lock()  # runs in other threads call it too

    async def complete(self, request):
        from tests.scripted import request_to_chat

        if self.rate_limited < self.fail_first:
            self.rate_limited += 1
            raise RateLimitError("slow down", retry_after=0.01)
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay_of(request_to_chat(request)))
        finally:
            with self.lock:
                self.in_flight -= 1
        return self.sync.complete(request)


def timed_lm(delay_of=lambda m: 0.0, model="fake/timed", handler=None, **kw):
    engine = TimedEngine(handler or research_handler(), delay_of, kw.pop("fail_first", 0))
    lm = dspy.LM(model, engine=engine.sync, async_engine=engine, cache=False, **kw)
    lm.timed = engine
    return lm


def task_of(messages) -> str:
    asked = inputs_of(messages)
    return asked.get("task", "") or asked.get("focus", "")


def run(retriever, lm, **config):
    with dspy.context(lm=lm):
        return DeepResearch(retriever=retriever, config=ResearchConfig(**config))(question=QUESTION)


def order(out, kind, node_id):
    return next(i for i, e in enumerate(out.events) if e.kind == kind and e.node_id == node_id)


def test_the_eco_tree_and_report_do_not_depend_on_the_concurrency_limit(scifact_bm25):
    # jittered latencies make nodes finish in a different order under each limit
    delay = lambda m: (sum(map(ord, task_of(m))) % 7) / 1000  # noqa: E731
    outs = {
        n: run(scifact_bm25, timed_lm(delay), depth=3, breadth=3, max_concurrency=n, lm_concurrency=n)
        for n in (1, 2, 16)
    }
    seq = run(scifact_bm25, timed_lm(delay), depth=3, breadth=3, schedule="sequential")
    lvl = run(scifact_bm25, timed_lm(delay), depth=3, breadth=3, schedule="level")
    gptr = run(scifact_bm25, timed_lm(delay), depth=3, breadth=3, schedule="gptr")
    reference = outs[16]
    assert reference.stats.nodes == 3 + 6 + 6
    for out in [outs[1], outs[2], seq, lvl, gptr]:
        assert out.report.tree == reference.report.tree
        assert out.markdown == reference.markdown
        assert out.references == reference.references
        assert {k: v.calls for k, v in out.usage.items()} == {k: v.calls for k, v in reference.usage.items()}
    finish = {n: [e.node_id for e in o.events if e.kind == "node_end"] for n, o in outs.items()}
    assert finish[1] != finish[16]  # the schedules really differed


def test_a_child_starts_before_a_slow_sibling_finishes(scifact_bm25):
    slow = lambda m: 0.3 if "aspect 3" in task_of(m) and "gap" not in task_of(m) else 0.005  # noqa: E731
    out = run(scifact_bm25, timed_lm(slow), depth=2, breadth=3, max_concurrency=16)
    assert order(out, "node_start", "1.1") < order(out, "node_end", "3")
    barrier = run(scifact_bm25, timed_lm(slow), depth=2, breadth=3, max_concurrency=16, schedule="level")
    assert order(barrier, "node_start", "1.1") > order(barrier, "node_end", "3")
    assert barrier.report.tree == out.report.tree


def test_sequential_schedule_runs_one_node_at_a_time_depth_first(scifact_bm25):
    lm = timed_lm(lambda m: 0.002)
    out = run(scifact_bm25, lm, depth=2, breadth=2, schedule="sequential")
    starts = [e.node_id for e in out.events if e.kind == "node_start"]
    assert starts == ["1", "1.1", "2", "2.1"]
    assert lm.timed.peak == 1


def test_the_sequential_schedule_notes_a_nodes_later_calls_on_that_node(scifact_bm25):
    # it once ran a child in its parent's task, so the child stayed the node the meter noted calls under: hero's
    # closing enrichment paragraph (written after the node's children) was noted on the node's last child
    hero = HeroConfig(turns=1, tasks_per_turn=2, multiplier=1, enrichments=1, deep_depth=3, shallow_depth=3)
    handler = research_handler({WriteEnrichment: {"paragraph": "More [x]."}})
    outs = {
        s: run(scifact_bm25, timed_lm(handler=handler), strategy="hero", hero=hero, schedule=s)
        for s in ("async", "sequential")
    }
    tree = outs["sequential"].report.tree
    assert tree == outs["async"].report.tree
    assert len(tree) == 2 and all("enrich_write 1 calls" in node.notes[-1] for node in tree)
    assert not any("enrich_write" in note for node in tree for child in node.children for note in child.notes)


def test_lm_calls_and_searches_stay_under_their_global_caps(scifact_bm25):
    searching, peak_search = 0, 0

    class ProbeRetriever:
        async def asearch(self, query, k=10, **kw):
            nonlocal searching, peak_search
            searching += 1
            peak_search = max(peak_search, searching)
            await asyncio.sleep(0.01)
            searching -= 1
            return scifact_bm25.search(query, k)

        def search(self, query, k=10, **kw):
            return scifact_bm25.search(query, k)

    lm = timed_lm(lambda m: 0.01)
    out = run(ProbeRetriever(), lm, depth=2, breadth=4, max_concurrency=16, lm_concurrency=3, search_concurrency=2)
    assert out.stats.searches == 4 + 8
    assert 1 < lm.timed.peak <= 3 and 1 < peak_search <= 2
    assert out.stats.limits == {"nodes": 16, "lm": 3, "search": 2}


@pytest.fixture
def props_server():
    """An HTTP server on 127.0.0.1 serving the JSON pages the test puts in `pages` (404 for any other)."""
    pages: dict[str, dict] = {}

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path not in pages:
                self.send_error(404)
                return
            body = json.dumps(pages[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield pages, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_lm_calls_in_flight_are_the_slots_the_server_reports_unless_set(props_server):
    pages, url = props_server
    pages["/props"] = {"total_slots": 2}  # what llama-server says of a server started with --parallel 2

    async def cap(**config):
        return Scheduler(ResearchConfig(**config), UsageMeter()).lm_cap

    with dspy.context(lm=dspy.LM("openai/local", api_base=url)):
        assert asyncio.run(cap()) == 2
        assert asyncio.run(cap(lm_concurrency=3)) == 3
        assert asyncio.run(cap(schedule="sequential")) == 1


def served(lm, url):
    """`lm` as if it sent to the server at `url` (a custom engine takes no api_base of its own): where the run
    reads the server's slots."""
    lm.kwargs["api_base"] = url
    return lm


def test_runs_side_by_side_share_the_slots_the_server_reports(props_server, scifact_bm25):
    """Three runs at once, as an optimizer's threads evaluate them, against a server with two slots: each run
    alone keeps two requests in flight, and together they still keep two, not six (the others waited their
    turn here, not in the server's queue, where the wait counted against their timeout)."""
    pages, url = props_server
    pages["/props"] = {"total_slots": 2}
    lm = served(timed_lm(lambda m: 0.02), url)
    with ThreadPoolExecutor(max_workers=3) as pool:
        outs = list(pool.map(lambda _: run(scifact_bm25, lm, depth=2, breadth=3), range(3)))
    assert all(out.status == "done" and out.stats.nodes == 3 + 6 for out in outs)
    assert lm.timed.peak == 2
    alone = served(timed_lm(lambda m: 0.02), url)
    run(scifact_bm25, alone, depth=2, breadth=3, lm_concurrency=3)  # a cap set for the run is the run's own
    assert alone.timed.peak == 3


def test_a_stage_on_another_server_keeps_to_that_servers_slots(props_server, scifact_bm25):
    """The extractor's LM on a one-slot server, the run's on a two-slot one: each server gets its own slots, not
    the run's (the run's two would have let two extractions queue at the one-slot server)."""
    pages, url = props_server
    pages["/props"] = {"total_slots": 2}
    pages["/small/props"] = {"total_slots": 1}
    lm = served(timed_lm(lambda m: 0.02), url)
    extractor = served(timed_lm(lambda m: 0.02), url.replace("/v1", "/small/v1"))
    with dspy.context(lm=lm):
        program = DeepResearch(
            retriever=scifact_bm25, config=ResearchConfig(depth=2, breadth=3), lms={"extract": extractor}
        )
        out = program(question=QUESTION)
    assert out.status == "done" and out.usage["extract"].calls == extractor.timed.sync.calls >= 6
    assert extractor.timed.peak == 1
    assert lm.timed.peak == 2


# Takes a slot of the server at argv[1] once the file argv[2] exists, holds it half a second, prints when.
HOLD_A_SLOT = """
import os, sys, time
import dspy
from deepresearch.programs.lm.models import server_gate
gate = server_gate(dspy.LM("openai/local", api_base=sys.argv[1]))
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
while (slot := gate.take()) is None:
    time.sleep(0.01)
start = time.time()
time.sleep(0.5)
print(start, time.time(), flush=True)
slot.release()
"""


def test_processes_share_the_slots_the_server_reports(props_server, tmp_path):
    """Four processes (a batch's workers) at one two-slot server: two hold a slot at a time, not four."""
    pages, url = props_server
    pages["/props"] = {"total_slots": 2}
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", HOLD_A_SLOT, url, str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    assert all(p.stdout.readline().strip() == "ready" for p in procs)
    go.touch()
    spans = [tuple(map(float, p.communicate(timeout=60)[0].split())) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert max(sum(s <= t < e for s, e in spans) for t, _ in spans) == 2


def test_a_servers_slots_are_read_again_after_a_while(props_server, monkeypatch):
    """A server restarted on the same URL with other slots (or one that did not answer at first) is not
    remembered as it was for the rest of the process: its answer is kept `SLOTS_TTL_S` seconds."""
    pages, url = props_server
    lm = dspy.LM("openai/local", api_base=url)
    pages["/props"] = {"total_slots": 2}
    assert lm_concurrency(lm, None) == 2
    pages["/props"] = {"total_slots": 4}  # restarted with --parallel 4
    assert lm_concurrency(lm, None) == 2  # within the time an answer is kept
    monkeypatch.setattr(models, "SLOTS_TTL_S", 0.0)
    assert lm_concurrency(lm, None) == 4
    gate = models.server_gate(lm)  # and the slots shared with other runs are the four
    held = [gate.take() for _ in range(4)]
    assert all(held) and gate.take() is None
    for slot in held:
        slot.release()


def test_a_server_that_does_not_report_its_slots_gets_the_default(props_server):
    _, url = props_server  # no /props page: a vLLM or hosted server
    assert lm_concurrency(dspy.LM("openai/local", api_base=url), None) == DEFAULT_LM_CONCURRENCY
    assert lm_concurrency(dspy.LM("openai/local", api_base="http://127.0.0.1:9/v1"), None) == DEFAULT_LM_CONCURRENCY
    assert lm_concurrency(None, None) == DEFAULT_LM_CONCURRENCY


def test_the_run_counts_the_seconds_its_lm_was_busy(scifact_bm25):
    class SlowRetriever:
        async def asearch(self, query, k=10, **kw):
            await asyncio.sleep(0.1)
            return scifact_bm25.search(query, k)

        def search(self, query, k=10, **kw):
            return scifact_bm25.search(query, k)

    # one node at a time: no search overlaps an LM call, and no LM call another
    out = run(SlowRetriever(), timed_lm(lambda m: 0.02), depth=1, breadth=2, schedule="sequential")
    s = out.stats
    assert s.searches >= 2 and s.lm_calls >= 4
    assert s.lm_busy_s >= 0.02 * s.lm_calls
    assert s.lm_busy_s <= s.total_s - 0.1 * s.searches
    assert f"LM busy {s.lm_busy_s / s.total_s:.0%}" in cost_line(out.report)


def test_a_rate_limit_pauses_the_provider_and_the_call_is_retried(scifact_bm25):
    lm = timed_lm(fail_first=1, num_retries=0)  # DSPy gives up at once; the scheduler waits and retries
    out = run(scifact_bm25, lm, depth=1, breadth=2, backoff_s=0.01)
    assert out.stats.failed_nodes == 0 and out.stats.retries["lm"] == 1
    lm = timed_lm(fail_first=50, num_retries=0)
    out = run(scifact_bm25, lm, depth=1, breadth=2, backoff_s=0.001, lm_retries=1)
    # the plan fails after one retry; the question itself is searched instead, and that node's
    # assessment fails after one retry too: nothing was researched, and the report says why
    assert out.stats.plan_fallback and out.stats.nodes == 1 and out.stats.failed_nodes == 1
    assert out.stats.retries["lm"] == 2 and out.report.status == "failed"
    assert "rate limited by" in out.report.error and out.markdown.startswith("# Research failed")
    assert any(e.kind == "failure" and e.stage == "plan" and "RateLimit" in e.message for e in out.events)


def test_a_search_that_times_out_is_retried_then_recorded(scifact_bm25):
    calls = []

    class Flaky:
        async def asearch(self, query, k=10, **kw):
            calls.append(query)
            if len(calls) == 1:
                await asyncio.sleep(5)
            return scifact_bm25.search(query, k)

        def search(self, query, k=10, **kw):
            return scifact_bm25.search(query, k)

    out = run(Flaky(), timed_lm(), depth=1, breadth=1, search_timeout_s=0.05, backoff_s=0.001)
    assert out.stats.retries["search"] == 1 and out.stats.failed_nodes == 0 and len(calls) == 2


def test_the_deadline_cancels_running_work_and_the_report_uses_what_exists(scifact_bm25):
    # depth-1 nodes are quick; every deeper extraction takes far longer than the deadline
    slow_deep = lambda m: 30.0 if "gap" in task_of(m) and "passages" in inputs_of(m) else 0.0  # noqa: E731
    lm = timed_lm(slow_deep)

    async def go():
        with dspy.context(lm=lm):
            out = await DeepResearch(
                retriever=scifact_bm25, config=ResearchConfig(depth=3, breadth=2, deadline_s=1.0, max_concurrency=16)
            ).acall(question=QUESTION)
        return out, [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    out, pending = asyncio.run(go())
    statuses = {n.node_id: n.status for n in out.report.nodes()}
    assert statuses["1"] == statuses["2"] == "done"
    assert {statuses[i] for i in ("1.1", "2.1")} == {"cancelled"}
    assert pending == []
    assert "deadline" in out.stats.stopped and "stopped early" in out.markdown
    assert any(e.kind == "budget" and "deadline" in e.message for e in out.events)
    assert out.usage["write"].calls == 1 and out.stats.cancelled_nodes == 2
    # the writer reads the finished nodes' learnings, each under its node's query
    learnings = next(
        json.loads(inputs_of(p)["learnings"])
        for p in lm.timed.sync.prompts
        if "learnings" in inputs_of(p) and '"topic"' in inputs_of(p)["learnings"]
    )
    done = out.report.tree[:2]
    assert {x["topic"] for x in learnings} <= {n.query for n in done}  # nothing of a cancelled node
    assert all(any(x["text"].rstrip(".") in n.summary for x in learnings) for n in done)  # what each found


def test_the_lm_call_budget_stops_research_and_keeps_a_call_for_the_writer(scifact_bm25):
    out = run(scifact_bm25, timed_lm(), depth=2, breadth=3, max_lm_calls=9)
    total = sum(u.calls for u in out.usage.values())
    assert total <= 9 and out.usage["write"].calls == 1
    assert "LM call budget of 9" in out.stats.stopped
    assert out.stats.lm_calls == total


def test_the_token_budget_stops_research(scifact_bm25):
    out = run(scifact_bm25, timed_lm(), depth=2, breadth=3, max_tokens=60)  # 15 tokens per call
    assert "token budget of 60" in out.stats.stopped
    research_tokens = sum(u.total_tokens for s, u in out.usage.items() if s != "write")
    assert 60 <= research_tokens < 60 + 15 * 3  # checked before each call; calls in flight still finish


def test_cost_is_priced_per_stage_from_litellm_prices_and_unknown_models_cost_none(scifact_bm25):
    import litellm

    out = run(scifact_bm25, timed_lm(model="openai/gpt-4.1-mini"), depth=1, breadth=2)
    price = litellm.model_cost["gpt-4.1-mini"]
    per_call = 10 * price["input_cost_per_token"] + 5 * price["output_cost_per_token"]
    cost = out.stats.cost
    assert cost["stages"]["extract"] == pytest.approx(out.usage["extract"].calls * per_call)
    assert cost["total"] == pytest.approx(sum(u.calls for u in out.usage.values()) * per_call)
    unknown = run(scifact_bm25, timed_lm(model="fake/timed"), depth=1, breadth=2)
    assert unknown.stats.cost["total"] is None and unknown.stats.cost["stages"]["plan"] is None
    assert model_cost("fake/timed", 10, 5) is None


def test_a_model_of_a_provider_litellm_does_not_know_costs_none_and_prints_nothing(capsys):
    # LiteLLM prints a "Provider List" banner to stdout before raising for such a model; every run on a custom
    # engine (the scripted test LMs, the orchestration benchmark's simulated LM) priced its stages that way
    assert model_cost("sim/latency", 10, 5) is None
    assert model_cost("fake/scripted", 10, 5, cached_tokens=3) is None
    assert "Provider List" not in capsys.readouterr().out
    assert model_cost("openai/gpt-4.1-mini", 10, 5) == pytest.approx(model_cost("gpt-4.1-mini", 10, 5))


def test_spec_002_table_7_prices_reproduce_the_orchestration_cost():
    # ParallelResearch's o3-mini prices: $1.10 / M input, $4.40 / M output (o3-mini)
    import litellm

    litellm.model_cost["openai/test-o3-mini-prices"] = {"input_cost_per_token": 1.1e-6, "output_cost_per_token": 4.4e-6}
    # the same prices with a cache-read price (a second entry: LiteLLM keeps what it has read of an entry)
    litellm.model_cost["openai/test-o3-mini-cached"] = {
        "input_cost_per_token": 1.1e-6,
        "output_cost_per_token": 4.4e-6,
        "cache_read_input_token_cost": 0.55e-6,
    }
    try:
        assert model_cost("openai/test-o3-mini-prices", 9632, 1788) == pytest.approx(0.01846, abs=5e-6)
        assert model_cost("openai/test-o3-mini-prices", 25646, 4756) == pytest.approx(0.04914, abs=5e-6)
        # no cache-read price in the map: cached prompt tokens cost the input price
        assert model_cost("openai/test-o3-mini-prices", 9632, 1788, cached_tokens=5000) == pytest.approx(
            0.01846, abs=5e-6
        )
        assert model_cost("openai/test-o3-mini-cached", 9632, 1788, cached_tokens=5000) == pytest.approx(
            0.01846 - 5000 * 0.55e-6, abs=5e-6
        )
    finally:
        del litellm.model_cost["openai/test-o3-mini-prices"], litellm.model_cost["openai/test-o3-mini-cached"]


def test_the_pool_waits_for_tasks_spawned_while_joining_and_cancels_cleanly():
    async def go():
        pool, done = TaskPool(), []

        async def child():
            await asyncio.sleep(0.01)
            done.append("child")

        async def parent():
            await asyncio.sleep(0.01)
            pool.spawn(child())
            done.append("parent")

        pool.spawn(parent())
        await pool.join()
        pool.spawn(asyncio.sleep(10))
        cancelled = await pool.cancel()
        return done, cancelled, len(pool)

    assert asyncio.run(go()) == (["parent", "child"], 1, 0)


def figure_3_run(scifact_bm25, **config):
    """The tree of ParallelResearch's Figure 3 on a virtual clock: level-1 nodes A, B, C take 1, 1 and 5 s, A has
    children D and E, B has F, each 1 s; the LM answers at once, so a node's time is its search's.
    Returns the run, its virtual seconds and when each query's search started."""
    from deepresearch.signatures import FindGaps
    from tests.virtual_clock import run_virtual

    started: dict[str, float] = {}

    class TimedRetriever:
        async def asearch(self, query, k=10, **kw):
            started[query] = asyncio.get_running_loop().time()
            await asyncio.sleep(5 if query.endswith("aspect 3") else 1)
            return scifact_bm25.search(query, k)

        def search(self, query, k=10, **kw):
            raise AssertionError("the run must search asynchronously")

    children = {"1": 2, "2": 1, "3": 0}

    def gaps(messages):
        focus = inputs_of(messages)["focus"]
        return {"tasks": [{"query": f"{focus} gap {i + 1}", "goal": "g"} for i in range(children[focus[-1]])]}

    lm = timed_lm(handler=research_handler({FindGaps: gaps}))
    program = DeepResearch(
        retriever=TimedRetriever(), config=ResearchConfig(depth=2, breadth=3, max_concurrency=16, **config)
    )

    async def go():
        with dspy.context(lm=lm):
            return await program.acall(question=QUESTION)

    out, elapsed = run_virtual(go())
    return out, elapsed, started


@pytest.mark.parametrize(
    "schedule, tree_s, d_starts", [("async", 5, 1), ("level", 6, 5), ("gptr", 8, 6), ("sequential", 10, 1)]
)
def test_figure_3_tree_times_under_each_schedule(scifact_bm25, schedule, tree_s, d_starts):
    out, elapsed, started = figure_3_run(scifact_bm25, schedule=schedule)
    assert [n.node_id for root in out.report.tree for n in root.walk()] == ["1", "1.1", "1.2", "2", "2.1", "3"]
    assert elapsed == tree_s
    assert started[f"{QUESTION} aspect 1 gap 1"] == d_starts  # A ends at t = 1: dispatch latency d_starts - 1


def test_a_deadline_under_the_gptr_schedule_cancels_the_held_children(scifact_bm25):
    # at t = 3, A and B are done, C is still running and no child has passed gptr's barrier
    out, elapsed, started = figure_3_run(scifact_bm25, schedule="gptr", deadline_s=3)
    assert elapsed == pytest.approx(3, abs=0.05)  # the deadline counts real seconds spent before the join
    assert not any("gap" in query for query in started)
    assert {n.node_id: n.status for root in out.report.tree for n in root.walk()} == {
        "1": "done",
        "1.1": "skipped",
        "1.2": "skipped",
        "2": "done",
        "2.1": "skipped",
        "3": "cancelled",
    }
