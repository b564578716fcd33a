"""Can a real model add to the offline gathering floor? The LM as a veto over the offline rule's keeps.

The offline loop (no LM) keeps a candidate when its score is close to its search's best and it covers the
question's key terms. On SciFact its errors are mostly extra keeps: claims where it keeps two or more papers
hold most of its false positives. This benchmark runs the offline loop over the first `--claims` SciFact claims
of `--qrels` (train by default: choose a rule there, then report it on test), shows the gathering assessor
(`CandidateAssessor`, second look off, one label per candidate) only those claims' kept papers, and scores
each rule of combining its labels with the offline selection against the offline floor on the same claims:
F1 of the mean recall and precision (ScholarGym's), and the paired bootstrap 95% interval of the change in
per-claim F1. Claims with fewer than two keeps are left as the offline loop left them.

    python -m benchmarks.lm_veto --lm openai/qwen05 --api-base http://127.0.0.1:8091/v1 \\
        --qrels test --claims 100 --out benchmarks/lm_veto_qwen05_test.json

LM answers are cached (DSPy's disk cache), so an interrupted run resumes where it stopped. Not collected by
pytest and not run by `python -m benchmarks` (it needs a model server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dspy

from deepresearch.eval.f1 import harmonic_mean

DEFAULT_DATA = Path(os.environ.get("DEEPRESEARCH_DATA", "../shared/data"))

Rule = Callable[[list[str], list[str]], list[str]]
# How the LM's labels of a claim's kept papers (in the order the loop kept them) become its selection.
RULES: dict[str, Rule] = {
    "offline": lambda kept, labels: kept,
    "keep_relevant_else_all": lambda kept, labels: [d for d, x in zip(kept, labels) if x == "relevant"] or kept,
    "keep_relevant_else_first": lambda kept, labels: [d for d, x in zip(kept, labels) if x == "relevant"] or kept[:1],
    "drop_irrelevant_else_all": lambda kept, labels: [d for d, x in zip(kept, labels) if x != "irrelevant"] or kept,
    "first_only (no LM)": lambda kept, labels: kept[:1],
}


def offline_run(folder: Path, qrels: str, claims: int) -> list[dict]:
    """The offline loop's per-claim results over the first `claims` claims of the `qrels` split (cached)."""
    from deepresearch import cli

    results = folder / "results.jsonl"
    if not results.exists():
        code = cli.main(
            [
                "eval",
                "gather",
                "--queries",
                "scifact",
                "--qrels",
                qrels,
                "--lm",
                "offline",
                "--limit",
                str(claims),
                "--out",
                str(folder),
                "--no-progress",
                "--bootstrap",
                "0",
            ]
        )
        if code != 0:
            raise SystemExit(f"the offline loop failed (exit {code})")
    return [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()]


def kept_papers(row: dict) -> list[str]:
    """The ids the offline loop kept for one claim, in the order it kept them."""
    kept: list[str] = []
    for round_ in row["result"]["rounds"]:
        for search in round_["searches"]:
            for cand in search["candidates"]:
                if cand["label"] == "relevant" and cand["doc_id"] not in kept:
                    kept.append(cand["doc_id"])
    return kept


def claim_scores(selected: list[str], gt: set[str]) -> tuple[float, float, float]:
    """Recall, precision and F1 of one claim's selection."""
    tp = len(set(selected) & gt)
    r, p = (tp / len(gt) if gt else 0.0), (tp / len(selected) if selected else 0.0)
    return r, p, harmonic_mean(r, p)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", required=True)
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--qrels", default="train", help="SciFact split: train (choose a rule) or test (report)")
    parser.add_argument("--claims", type=int, default=100, help="first N claims of the split")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--lm-timeout", type=float, default=900.0)
    parser.add_argument("--pool", default=None, help="offline run folder (default: beside --out)")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args(argv)

    from deepresearch.optimize.compile import paired_bootstrap
    from deepresearch.programs.lm.models import SchemaAdapter
    from deepresearch.programs.stages.gathering import CandidateAssessor
    from deepresearch.retrievers.corpus import load_corpus
    from deepresearch.retrievers.types import Hit

    out = Path(args.out)
    rows = offline_run(Path(args.pool or out.with_suffix(".pool")), args.qrels, args.claims)
    docs = {d.doc_id: d for d in load_corpus(DEFAULT_DATA / "scifact")}
    lm = dspy.LM(
        args.lm,
        api_base=args.api_base,
        api_key=os.environ.get("DEEPRESEARCH_API_KEY", "local"),
        max_tokens=args.max_tokens,
        temperature=0.0,
        timeout=args.lm_timeout,
        num_retries=1,
    )
    assessor = CandidateAssessor(second_look=False)
    adapter = SchemaAdapter() if args.api_base else None
    labels: dict[str, list[str]] = {}
    started, failed = time.perf_counter(), 0
    asked = [r for r in rows if len(kept_papers(r)) >= 2]
    for i, row in enumerate(asked, 1):
        kept = kept_papers(row)
        hits = [Hit(doc=docs[d], score=0.0, rank=n) for n, d in enumerate(kept, 1)]
        try:
            with dspy.context(lm=lm, adapter=adapter):
                pred = asyncio.run(
                    assessor.acall(question=row["query"], subquery=row["query"], checklist="", hits=hits)
                )
            labels[row["query_id"]] = [j.label for j in pred.judgements]
        except Exception as err:  # a reply that cannot be used: the claim keeps the offline selection
            failed += 1
            labels[row["query_id"]] = ["failed"] * len(kept)
            print(f"claim {row['query_id']}: {type(err).__name__}", file=sys.stderr)
        print(f"{i}/{len(asked)} claims asked", file=sys.stderr, flush=True)

    per_rule: dict[str, list[tuple[float, float, float]]] = {name: [] for name in RULES}
    for row in rows:
        gt, kept = set(row["gt_ids"]), kept_papers(row)
        for name, rule in RULES.items():
            chosen = rule(kept, labels[row["query_id"]]) if row["query_id"] in labels else kept
            per_rule[name].append(claim_scores(chosen, gt))
    floor = [f for _, _, f in per_rule["offline"]]
    report = {
        "benchmark": "lm_veto",
        "lm": args.lm,
        "split": args.qrels,
        "claims": len(rows),
        "claims_asked": len(asked),
        "replies_failed": failed,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs; LM on llama-server"
        if args.api_base
        else platform.machine(),
        "command": "python -m benchmarks.lm_veto " + " ".join(argv if argv is not None else sys.argv[1:]),
        "rules": {},
    }
    print(f"| rule ({args.qrels}, {len(rows)} claims) | R | P | F1 | change in per-claim F1 (95% CI) |")
    print("|---|---|---|---|---|")
    for name, scores in per_rule.items():
        r = sum(s[0] for s in scores) / len(scores)
        p = sum(s[1] for s in scores) / len(scores)
        f1 = harmonic_mean(r, p)
        per_claim = [s[2] for s in scores]
        ci = paired_bootstrap(floor, per_claim)
        change = (sum(per_claim) - sum(floor)) / len(floor)
        report["rules"][name] = {"R": r, "P": p, "F1": f1, "change_per_claim_f1": change, "ci95": ci}
        print(f"| {name} | {r:.3f} | {p:.3f} | {f1:.3f} | {change:+.3f} ({ci[0]:+.3f} to {ci[1]:+.3f}) |")
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
