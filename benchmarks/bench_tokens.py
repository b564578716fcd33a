"""What a run costs in tokens, per stage, before and after the prompt cuts, with report quality beside it.

Each preset (`eco`, `hero`, `parallel`, `gather`) researches the same SciFact questions at depth 2 x
breadth 3 several times in this process: the reference with the cuts off (`assess_sentences=0`,
`skip_seen="off"`: the assessor and the extractor both read whole passages, and a passage is sent again
whenever it is retrieved), the assessor's cut alone (it reads each paper's title and its three sentences
that bear most on the task), the defaults (that, and a paper's text once per node), and the defaults with
`skip_seen="lineage"` (nor a passage already sent for an ancestor node). Figures are ratios against the
reference.

The LM is scripted at DSPy's LM boundary (tests/research_lm.py's stages, with an extractor that quotes the
first sentence of each passage it is given, so the report's citations can be checked). Its usage figures
count words and punctuation marks of the rendered messages and replies (no tokenizer is involved: an
approximation of a real tokenizer's count, the same rule before and after). Quality is ScholarQABench's
Algorithm 1 (`deepresearch.eval.quality.score_claims`) on the shipped reports with the lexical entailment rule as the
judge: citation precision and recall, micro-averaged over the questions.

Real-model figures (SmolLM2-135M-Instruct on llama-server, whose usage is the server's own token count):
`python -m benchmarks.bench_tokens --real [--presets eco,hero] [--depth 1 --breadth 2 --hits 3]`; every
use of the shared server should run under `flock /tmp/llama.lock`. `--load a.json,b.json` prints the tables
again from rows saved with `--json`. `--held-out` researches three questions no prompt or setting was tuned on;
`--compile-train N` runs each preset compiled first (BootstrapFewShot, one demonstration a stage, the offline
program teaching). The 0.5B model's runs, uncompiled and compiled, are in docs/reference/cost.md.

Measured with the real model, 2026-11-23, each stage at its own output cap
(each stage's `max_output_tokens`; the grammar bounds every string but the report): SmolLM2-135M-Instruct (llama-server,
2 threads), one question (aspirin and colorectal cancer), depth 2 x breadth 3, 3 hits per search,
passage_chars 2,000, each row in its own process under the lock; load average 1.1-4.2 (this machine's own
test suite beside some rows). Rows: benchmarks/tokens_real_d2b3_p2000_stagecaps.json (`--load` prints
the tables). Prompt / completion tokens, nodes, LM calls, parse failures / truncated replies:

    preset     on                              off                             per node on / off
    eco        42,233 / 11,667, 6 n, 26 c, 0/1  75,712 / 18,676, 9 n, 36 c, 1/2  7,039 / 8,412 (-16 %)
    hero       19,295 /  7,907, 6 n, 16 c, 0/1  19,289 /  8,077, 6 n, 16 c, 0/1  3,216 / 3,215
    parallel    4,960 /  1,194, 3 n,  7 c, 0/0   5,384 /  1,594, 3 n,  7 c, 0/0  1,653 / 1,795 (-8 %)
    gather     11,765 /  5,144, 1 loop, 7 c, 0/1 12,970 / 5,034, 1 loop, 7 c, 0/1 (-9 %)

Every row finished (`done`) with at most one parse failure, where the same runs with every reply capped
at 256 tokens (below) had failed with up to 10. Per request, the assessor's cut shrinks the assess prompt
by 30-54 % (eco 2,112 -> 1,068, gather 2,216 -> 1,011, parallel 1,408 -> 984 tokens) and the other stages' requests
stay the same size (extract 2,068-2,402, merge 528-640, plan 557, verify 3,317-5,662). Run totals still
compare different trees where the model's replies differ with its prompts: eco `on` researched 6 nodes to
`off`'s 9 (-44 % prompt tokens in all, -16 % per node); hero has no assessor and no passage repeated inside
a node, so its two runs sent the same requests. The writer is where this model fails: eco's cited nothing
when asked twice (the findings are shipped as they are), gather's only when asked again, hero's report ran
to the 4,096-token cap and then made the verify request 11,851 tokens, past the server's 8,192-token
context (one failed request; the lexical rule judged instead). Citation precision
/ recall under the lexical judge: hero 0.30 / 1.00 on both rows, 0 elsewhere on both; so quality is unchanged
by the cuts where it can be measured, and cannot be judged from this model where it is 0.

Against ParallelResearch's Table 7: with its breadth policy planning one subquery and the monitor pruning one of
three nodes, `parallel`'s three policies (`breadth`, `deepen`, `orchestrate`) took 44-48 % of prompt tokens
against Table 7's 6.2 % (2 min) and 5.3 % (10 min), which counts only the monitor's scores: a policy request
(436-536 tokens) does not shrink with the tree, and Table 7's share comes from 19-98 nodes per question. Prompt tokens per node,
1,653-12,970 here, against Table 7's 4,948-12,493; completion / prompt 24-44 % against 5.6-7.5 %, the
report and merge replies of this model being long. Table 7 has no assess/extract split (its research
component is one figure), nor does it cover eco, hero or gather, so those compare only per node.

Earlier the same day, with every reply capped at 256 tokens (rows in tokens_real_d2b3_p600.json,
_p2000.json and _p2000_q2.json; passage_chars 600 and 2,000, a second question): the `plan` and
`gather_plan` replies ran to the cap in every run, most extract and enrich replies too (parse failures in
18 of 20 rows, up to 10), so the trees had 1-5 nodes; the assess request fell by 43-58 % at 2,000
characters and by 5-10 % at 600 (three sentences are most of a 600-character passage).

Run: `python -m benchmarks.bench_tokens [--data DIR]` (needs $DEEPRESEARCH_DATA/scifact).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import dspy
from dspy.lm15 import Usage

from benchmarks._common import machine_line
from deepresearch.eval.citations import claim_sentences, dataset_citation_f1
from deepresearch.eval.quality import Support, score_claims
from deepresearch.programs.config import GatherLoopConfig, HeroConfig, preset
from deepresearch.programs.research.program import DeepResearch
from deepresearch.retrievers import BM25Retriever, load_corpus
from deepresearch.signatures import ExtractLearnings, MergeLearnings
from deepresearch.signatures.enrich import WriteEnrichment
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries
from deepresearch.signatures.orchestrate import DecideDeepen, EvaluateProgress, PlanBreadth
from tests.research_lm import research_handler
from tests.scripted import (
    AsyncScriptedEngine,
    ScriptedEngine,
    inputs_of,
    request_to_chat,
)

QUESTIONS = [
    "Does aspirin reduce the risk of colorectal cancer?",
    "Is vitamin D supplementation linked to fewer bone fractures?",
]
# questions no prompt or setting was tuned on (`--held-out`): first used to measure the cuts, after they were made
HELD_OUT = [
    "Do statins reduce the risk of dementia?",
    "Does smoking cessation lower the risk of cardiovascular disease?",
    "Does physical exercise improve cognitive function in older adults?",
]
PRESETS = ("eco", "hero", "parallel", "gather")
BEFORE = {"assess_sentences": 0, "skip_seen": "off"}
# the reference, the assessor's cut alone, the defaults, and the defaults with `skip_seen="lineage"`
CUTS = {"off": BEFORE, "assess": {"skip_seen": "off"}, "on": {}, "lineage": {"skip_seen": "lineage"}}
TOKEN = re.compile(r"\w+|[^\w\s]")
# prompt-token shares printed. `orchestrate` is what ParallelResearch's Table 7 counts as orchestration: its runtime
# orchestration, the periodic scoring of running nodes (the paper: "periodic quality and goal satisfaction
# assessments"); `policies` are the adaptive planner's breadth and depth decisions, which the paper counts with the
# research it plans. Rows before 2026-11-29 printed the three together as orchestration.
COMPONENTS = {
    "assess": ("assess",),
    "extract": ("extract",),
    "orchestrate": ("orchestrate",),
    "policies": ("breadth", "deepen"),
}
# ParallelResearch's Table 7 (on DeepResearchGym): orchestration's share of input tokens at 2 and 10 min
TABLE_7_ORCHESTRATION = {"2 min": 9_632 / 155_409, "10 min": 25_646 / 487_023}
# Table 7's runs beside Table 2's node counts: (nodes, input tokens, output tokens) per question
TABLE_7_RUNS = {
    "GPT-Researcher 2 min": (8.00, 97_170, 5_428),
    "ParallelResearch 2 min": (19.42, 155_409, 10_031),
    "GPT-Researcher 10 min": (23.94, 299_093, 18_432),
    "ParallelResearch 10 min": (98.43, 487_023, 36_409),
}


def count_tokens(text: str) -> int:
    return len(TOKEN.findall(text))


class CountingEngine(ScriptedEngine):
    """A scripted engine whose usage counts the words and punctuation of the messages and of the reply."""

    def _respond(self, request):
        response = super()._respond(request)
        prompt = sum(count_tokens(m["content"]) for m in request_to_chat(request))
        usage = Usage(input_tokens=prompt, output_tokens=count_tokens(response.message.text or ""))
        return dataclasses.replace(response, usage=usage)


def _extract(messages):  # quotes the first sentence of each passage
    passages = json.loads(inputs_of(messages)["passages"])
    quotes = [int(next(iter(p["sentences"]))) for p in passages[:5] if p["sentences"]]
    return {"quotes": quotes, "follow_up_questions": ["What remains unclear?"]}


def _merge(messages):
    return {"order": [x["number"] for x in json.loads(inputs_of(messages)["learnings"])]}


def _gather_plan(messages):
    asked = inputs_of(messages)
    size = len(json.loads(asked["subquery_tree"]))
    searches = (
        [
            {"action": "derive", "source_id": 0, "text": f"{asked['question'].rstrip('?')} {w}", "target_k": 5}
            for w in ("trial", "cohort", "mechanism")
        ]
        if size == 1
        else []
    )
    return {"searches": searches, "checklist_update": "c", "memory_update": "m", "is_complete": size > 1}


def _gather_assess(messages):
    papers = json.loads(inputs_of(messages)["candidates"])
    return {"relevance": {p["paper_id"]: "relevant" if i < 3 else "irrelevant" for i, p in enumerate(papers)}}


def _enrichment(messages):
    learnings = json.loads(inputs_of(messages)["learnings"])
    return {"paragraph": " ".join(f"{x['text'].rstrip('.')} [{x['source_ids'][0]}]." for x in learnings)}


def _breadth(messages):
    asked = inputs_of(messages)
    return {"subqueries": [f"{asked['query']} part {i + 1}" for i in range(int(asked["max_breadth"]))]}


ROUTES = {
    ExtractLearnings: _extract,
    MergeLearnings: _merge,
    PlanSubqueries: _gather_plan,
    LabelCandidates: _gather_assess,
    WriteEnrichment: _enrichment,
    PlanBreadth: _breadth,
    DecideDeepen: {"deepen": True, "rationale": "scripted"},
    EvaluateProgress: {"goal_satisfaction": 0.1, "quality": 0.9, "rationale": "scripted"},
}


def scripted_counting_lm() -> dspy.LM:
    engine = CountingEngine(research_handler(ROUTES))
    return dspy.LM("fake/scripted", engine=engine, async_engine=AsyncScriptedEngine(engine), cache=False)


def config_of(name: str, depth: int, breadth: int, hits: int | None, cuts: dict, extra: dict | None = None):
    shape = {"depth": depth, "breadth": breadth, "deadline_s": None, "max_lm_calls": None}
    if hits is not None:
        shape["hits_per_query"] = hits
    return preset(name, **shape, **cuts, **(extra or {}))


def run(
    name: str,
    retriever,
    texts: dict[str, str],
    questions: list[str],
    cuts: str,
    depth: int,
    breadth: int,
    hits: int | None,
    lm_factory,
    extra: dict | None = None,
    context: dict | None = None,
    state: dict | None = None,
) -> dict:
    """Runs `questions` with preset `name` (its predictors set to `state`, a compiled program's, when given);
    returns tokens per stage and the citation scores."""
    # per stage: calls, prompt tokens, completion tokens, parse failures, fallbacks, truncated replies, failed,
    # prompt tokens the server read from its prompt cache
    stages: dict[str, list[int]] = defaultdict(lambda: [0] * 8)
    trouble: dict[str, int] = defaultdict(int)
    scores, seconds, nodes, refs = [], 0.0, 0, 0
    busy = wall = 0.0  # seconds with an LM request in flight, of the runs' own wall time
    support = Support()
    for q in questions:
        program = DeepResearch(retriever=retriever, config=config_of(name, depth, breadth, hits, CUTS[cuts], extra))
        if state is not None:
            program.load_state(state)
        started = time.perf_counter()
        with dspy.context(lm=lm_factory(), **(context or {})):
            report = program(question=q).report
        seconds += time.perf_counter() - started
        nodes += len(report.nodes())
        refs += len(report.references)
        for stage, u in report.usage.items():
            for i, v in enumerate(
                (
                    u.calls,
                    u.prompt_tokens,
                    u.completion_tokens,
                    u.parse_failures,
                    u.fallbacks,
                    u.truncated,
                    u.failed,
                    u.cached_tokens,
                )
            ):
                stages[stage][i] += v
        st = report.stats
        busy, wall = busy + (st.lm_busy_s or 0.0), wall + (st.total_s or 0.0)
        for k, v in (
            ("parse_failures", st.parse_failures),
            ("parse_retries", st.retries.get("parse", 0)),
            ("truncated", st.truncated_replies),
            ("failed_requests", st.failed_requests),
            ("failed_nodes", st.failed_nodes),
            ("learnings", st.learnings),
            ("invented_citations", st.invented_citations),
            ("dropped_citations", st.dropped_citations),
            ("pruned_nodes", st.pruned_nodes),
            ("skipped_nodes", st.skipped_nodes),
            ("cancelled_nodes", st.cancelled_nodes),
            ("evaluations", st.evaluations),
        ):
            trouble[k] += v
        for reason, v in (st.pruned or {}).items():
            trouble["pruned: " + reason] += v
        if st.stopped:
            trouble["stopped: " + st.stopped] += 1
        numbered = {str(r.number): texts[r.doc_id] for r in report.references if r.doc_id in texts}
        scores.append(score_claims(claim_sentences(report.markdown), numbered, support, integration=False).citations)
    p, r, _ = dataset_citation_f1(scores)
    return {
        "preset": name,
        "cuts": cuts,
        "questions": list(questions),
        "demos": sum(len(p.demos) for _, p in program.named_predictors()),
        "stages": dict(stages),
        "nodes": nodes,
        "calls": sum(v[0] for v in stages.values()),
        "prompt": sum(v[1] for v in stages.values()),
        "completion": sum(v[2] for v in stages.values()),
        "cached": sum(v[7] for v in stages.values()),
        "P": p,
        "R": r,
        "claims": sum(s.n_claims for s in scores),
        "references": refs,
        "seconds": seconds,
        "lm_busy": busy / wall if wall else None,
        "trouble": dict(trouble),
        "status": report.status,
    }


def print_rows(rows: list[dict]) -> None:
    print(
        f"{'preset':<9} {'cuts':<6} {'nodes':>5} {'calls':>5} {'prompt':>9} {'ratio':>6} {'compl.':>7} "
        f"{'assess':>7} {'extract':>7} {'orch.':>6} {'b+d':>6} {'other':>6} {'cached':>6} {'claims':>6} {'refs':>5} {'cit. P':>6} "
        f"{'cit. R':>6} {'s':>7} {'busy':>5}"
    )
    ref = {r["preset"]: r for r in rows if r["cuts"] == "off"}
    for r in rows:
        share = {
            k: sum(r["stages"].get(s, [0, 0, 0])[1] for s in group) / r["prompt"] if r["prompt"] else 0.0
            for k, group in COMPONENTS.items()
        }
        base = ref.get(r["preset"])
        ratio = r["prompt"] / base["prompt"] if base and base["prompt"] else float("nan")
        # rows saved before the cached count was kept have no "cached"
        cached = f"{r['cached'] / r['prompt']:.0%}" if "cached" in r and r["prompt"] else "-"
        busy = f"{r['lm_busy']:.0%}" if r.get("lm_busy") is not None else "-"  # kept since 2026-11-28
        print(
            f"{r['preset']:<9} {r['cuts']:<6} {r['nodes']:>5} {r['calls']:>5} {r['prompt']:>9} {ratio:>6.2f} "
            f"{r['completion']:>7} {share['assess']:>7.0%} {share['extract']:>7.0%} {share['orchestrate']:>6.1%} {share['policies']:>6.1%} "
            f"{1 - sum(share.values()):>6.0%} {cached:>6} {r['claims']:>6} {r['references']:>5} {r['P']:>6.2f} "
            f"{r['R']:>6.2f} {r['seconds']:>7.1f} {busy:>5}"
        )
    print(
        "cuts: off = assess_sentences=0, skip_seen=off (the reference); assess = the assessor's cut alone; "
        "on = the defaults (assess_sentences=3, skip_seen=node); lineage = the defaults with skip_seen=lineage"
    )
    print(
        "claims: cited claim sentences of the reports (Algorithm 1's); refs: papers the reports cite; cit. P / R: "
        "Algorithm 1's citation precision and recall, lexical entailment as the judge"
    )
    print(
        "ratio: prompt tokens / the same preset's reference (cuts off) in this run; assess, extract, orch., b+d, "
        "other: shares of the run's prompt tokens (orch.: the monitor's scoring of running nodes, Table 7's "
        "orchestration; b+d: the breadth and depth policies); cached: share of them the server read from its "
        "prompt cache; "
        "busy: share of the runs' wall time with an LM request in flight"
    )
    print(
        "ParallelResearch paper, Table 7: orchestration takes "
        + ", ".join(f"{v:.1%} of input tokens at {k}" for k, v in TABLE_7_ORCHESTRATION.items())
    )
    print(
        "ParallelResearch paper, Table 7, per question: "
        + "; ".join(
            f"{k}: {i / n:,.0f} input tokens per node, output / input {o / i:.1%}"
            for k, (n, i, o) in TABLE_7_RUNS.items()
        )
    )
    print(
        "this run: "
        + "; ".join(
            f"{r['preset']} {r['cuts']}: {r['prompt'] / max(r['nodes'], 1):,.0f} per node, {r['completion'] / max(r['prompt'], 1):.1%}"
            for r in rows
        )
    )


def print_per_request(rows: list[dict]) -> None:
    """Prompt tokens per request, by stage: with a real model the tree (and so the number of requests)
    changes with its parse failures, while the size of one request of a stage stays comparable."""
    names = sorted({s for r in rows for s in r["stages"]})
    print("prompt tokens per request by stage (calls in brackets); parse: parse failures / truncated replies")
    print(f"{'preset':<9} {'cuts':<6} " + " ".join(f"{n:>15}" for n in names) + f" {'parse':>7}")
    for r in rows:
        cells = []
        for n in names:
            v = r["stages"].get(n)
            cells.append(f"{v[1] / v[0]:>8.0f} ({v[0]:>3})" if v and v[0] else f"{'-':>15}")
        t = r.get("trouble", {})
        print(
            f"{r['preset']:<9} {r['cuts']:<6} "
            + " ".join(f"{c:>15}" for c in cells)
            + f" {t.get('parse_failures', 0):>3}/{t.get('truncated', 0):<3}"
        )
    print("share of each stage's prompt tokens the server read from its prompt cache")
    for r in rows:
        cells = []
        for n in names:
            v = r["stages"].get(n)
            cells.append(f"{v[7] / v[1]:>15.0%}" if v and len(v) > 7 and v[1] else f"{'-':>15}")
        print(f"{r['preset']:<9} {r['cuts']:<6} " + " ".join(cells))


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("DEEPRESEARCH_DATA"))
    parser.add_argument("--real", action="store_true", help="SmolLM2-135M on llama-server instead of the scripted LM")
    parser.add_argument("--lm", default=None, help="--real: this model on --api-base instead (e.g. openai/qwen05)")
    parser.add_argument("--api-base", default=None, help="--real: the running server --lm names")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--breadth", type=int, default=3)
    parser.add_argument("--hits", type=int, default=None, help="hits per query (default: the preset's)")
    parser.add_argument("--held-out", action="store_true", help="research the held-out questions instead")
    parser.add_argument("--questions", type=int, default=None, help="how many of the questions (default: all)")
    parser.add_argument("--first", type=int, default=0, help="index of the first question run")
    parser.add_argument("--passage-chars", type=int, default=600, help="--real: characters of each passage shown")
    parser.add_argument(
        "--max-output-tokens",
        type=int,
        default=None,
        help="--real: one output-token cap for every stage (default: each stage's own, "
        "the stages' max_output_tokens in deepresearch.programs.stages.registry)",
    )
    parser.add_argument(
        "--cuts", default=None, help=f"settings to run, of {', '.join(CUTS)} (default: all; --real: off,on,lineage)"
    )
    parser.add_argument(
        "--compile-train",
        type=int,
        default=0,
        help="--real: run each preset compiled by BootstrapFewShot (one demonstration a stage, the offline program "
        "teaching, no LM call) on this many SciFact train claims",
    )
    parser.add_argument(
        "--compiled-stages",
        default=None,
        help="with --compile-train: keep the demonstrations of these predictors only (comma-separated name "
        "prefixes, e.g. planner), the others as uncompiled",
    )
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument(
        "--load",
        default=None,
        help="print the tables of rows saved with --json (comma-separated files) and run nothing",
    )
    args = parser.parse_args(argv if argv is not None else [])
    if args.load:
        rows = [r for f in args.load.split(",") for r in json.loads(Path(f).read_text())]
        print_rows(rows)
        print_per_request(rows)
        return rows
    if not args.data:
        raise SystemExit(
            "bench_tokens: set DEEPRESEARCH_DATA (or pass --data) to the shared data folder holding scifact/"
        )
    corpus = load_corpus(Path(args.data) / "scifact")
    texts = {d.doc_id: d.text for d in corpus}
    retriever = BM25Retriever(corpus)
    pool = HELD_OUT if args.held_out else QUESTIONS
    questions = pool[args.first : args.first + (args.questions or len(pool))]
    presets = [p for p in args.presets.split(",") if p]
    rows = []
    if args.real:
        from benchmarks.report_quality import compile_on_train
        from deepresearch.programs.lm.models import SchemaAdapter, make_lm
        from deepresearch.programs.lm.usage import output_limits
        from tests.real_lm.server import LlamaServer

        hits = args.hits or 3
        extra = {
            "lm_timeout_s": 900,
            "lm_retries": 0,
            "passage_chars": args.passage_chars,
            # hero and gather at the same small shape: one turn of `breadth` pipelines with one enrichment
            # each, `hits` passages per search; one gathering round
            "hero": HeroConfig(
                turns=1,
                tasks_per_turn=args.breadth,
                multiplier=2,
                enrichments=1,
                deep_depth=hits,
                shallow_depth=hits,
                batch_size=hits,
            ),
            "gather": GatherLoopConfig(iterations=1, max_actions=args.breadth, max_k=hits, ranking_depth=100),
        }
        if bool(args.lm) != bool(args.api_base):
            parser.error("--lm and --api-base go together")
        model = args.lm or "openai/smollm2"
        server = nullcontext(SimpleNamespace(base_url=args.api_base)) if args.api_base else LlamaServer()
        with server as serving, output_limits(every=args.max_output_tokens):

            def factory():
                return make_lm(model, api_base=serving.base_url, num_retries=0, cache=False, timeout_s=900)

            for name in presets:
                for cuts in (args.cuts or "off,on,lineage").split(","):
                    state = None
                    if args.compile_train:
                        program = DeepResearch(
                            retriever=retriever,
                            config=config_of(name, args.depth, args.breadth, hits, CUTS[cuts], extra),
                        )
                        with dspy.context(lm=factory(), adapter=SchemaAdapter()):
                            compiled = compile_on_train(
                                program, SimpleNamespace(seed=0, compile_train=args.compile_train, demos=1), {}
                            )
                            if args.compiled_stages:
                                kept = tuple(args.compiled_stages.split(","))
                                for predictor_name, predictor in compiled.named_predictors():
                                    if not predictor_name.startswith(kept):
                                        predictor.demos = []
                            state = compiled.dump_state()
                    rows.append(
                        run(
                            name,
                            retriever,
                            texts,
                            questions,
                            cuts,
                            args.depth,
                            args.breadth,
                            hits,
                            factory,
                            extra=extra,
                            context={"adapter": SchemaAdapter()},
                            state=state,
                        )
                    )
                    print(json.dumps({k: v for k, v in rows[-1].items()}), flush=True)
                    if args.json:  # kept row by row: a run cut short still leaves the rows it finished
                        Path(args.json).write_text(json.dumps(rows, indent=2))
        print(
            f"model: {args.lm or 'SmolLM2-135M-Instruct'} on llama-server (usage as the server counts it); "
            f"passage_chars={args.passage_chars}, "
            f"output caps: {args.max_output_tokens or 'each stage its own'}; hero: 1 turn of {args.breadth} pipelines, 1 enrichment "
            f"each, {hits} passages per search; gather: 1 round"
        )
    else:
        for name in presets:
            for cuts in args.cuts.split(",") if args.cuts else CUTS:
                rows.append(
                    run(
                        name,
                        retriever,
                        texts,
                        questions,
                        cuts,
                        args.depth,
                        args.breadth,
                        args.hits,
                        scripted_counting_lm,
                    )
                )
        print("model: scripted (tests/research_lm.py); tokens = words and punctuation marks of messages and replies")
    print(
        f"shape: depth {args.depth} x breadth {args.breadth}, hits per query "
        f"{(args.hits or 3) if args.real else (args.hits or 'as the preset')}, {len(questions)} {'held-out ' if args.held_out else ''}questions per row over SciFact's corpus"
    )
    print(machine_line())
    print_rows(rows)
    print_per_request(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
