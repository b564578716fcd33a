"""What the verify stage changes: ScholarQABench citation precision and recall before and after it.

For each report, Algorithm 1 (`deepresearch.eval.citations.scholarqa_citation_scores`) is computed
twice with the lexical-entailment rule as the entailment judge: on the writer's draft (its claim
sentences are exactly the sentences the verify stage judged, recorded in `Report.verdicts`, scored
against their source ids) and on the shipped report (renumbered citations, scored against the cited
documents). Also printed: the share of checked sentences rewritten, removed or marked, and the LM
calls the stage added.

Pipelines:
* `scripted`: scripted LMs at DSPy's LM boundary. The extractor quotes the first sentence of each
  passage, the merger joins the quotes with their ids, and the writer states every learning and adds to
  each topic a sentence naming a learning that does not state it (alternately wholly, and as a quote
  with an overreaching clause), and one factual sentence naming no learning to the report. The verify
  stage's LM judges with the lexical rule too, so these rows show the mechanics, not a judge's skill.
* `offline`: the extractive offline baseline with its lexical verifier.
* `smollm2` (`--real`): the offline research (its findings), then SmolLM2-135M-Instruct on llama-server
  writes the report and verifies it (research by the 135M model mostly ends with no learning: its
  extraction replies often do not parse).

Run: `python -m benchmarks.bench_verify [--real] [--data DIR]` (the real model needs tests/real_lm's llama-server build).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import dspy

from benchmarks._common import machine_line
from deepresearch.eval.citations import (
    claim_sentences,
    dataset_citation_f1,
    scholarqa_citation_scores,
)
from deepresearch.programs.citing.citations import source_id_for
from deepresearch.programs.citing.entailment import (
    Sentence,
    citations_in,
    lexical_entails,
    plain_sentence,
)
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.verifier import Verifier, lexical_verdict
from deepresearch.programs.stages.writer import Writer
from deepresearch.retrievers import BM25Retriever, load_corpus
from deepresearch.signatures import ExtractLearnings, MergeLearnings, WriteReport
from deepresearch.signatures.types import Source
from deepresearch.signatures.verify import VerifyClaims
from tests.research_lm import research_handler
from tests.scripted import inputs_of, scripted_lm

QUESTIONS = [
    "Does aspirin reduce the risk of colorectal cancer?",
    "Is vitamin D supplementation linked to fewer bone fractures?",
    "How does obesity affect insulin resistance?",
]
UNSTATED = "This effect was confirmed in every population studied so far, with no exception at all"
OVERREACH = "it doubled survival in every cohort followed for ten years"
UNCITED = "Most clinicians already recommend this approach to every adult patient they see in practice."


def _extract(messages):  # quotes the first sentence of each passage
    passages = json.loads(inputs_of(messages)["passages"])
    quotes = [int(next(iter(p["sentences"]))) for p in passages[:2] if p["sentences"]]
    return {"quotes": quotes, "follow_up_questions": []}


def _merge(messages):
    return {"order": [x["number"] for x in json.loads(inputs_of(messages)["learnings"])]}


def _write(messages):
    learnings = json.loads(inputs_of(messages)["learnings"])
    sections = [{"heading": "Answer", "sentences": [{"text": UNCITED, "learnings": []}]}]
    for i, topic in enumerate(dict.fromkeys(x["topic"] for x in learnings)):
        said = [{"text": x["text"], "learnings": [x["number"]]} for x in learnings if x["topic"] == topic]
        first = said[0]
        if i % 2:  # half right: a quote of the source with a claim it does not make
            extra = f"{first['text'].rstrip('.')}, and {OVERREACH}."
        else:
            extra = f"{UNSTATED}."
        sections.append({"heading": topic, "sentences": [*said, {"text": extra, "learnings": first["learnings"]}]})
    return {"sections": sections}


def _verify(messages):
    claims = json.loads(inputs_of(messages)["claims"])
    return {
        "verdicts": {
            c["claim_id"]: lexical_verdict(c["sentence"], [Source(**p) for p in c["passages"]]) for c in claims
        }
    }


SCRIPTED_ROUTES = {ExtractLearnings: _extract, MergeLearnings: _merge, WriteReport: _write, VerifyClaims: _verify}


def scores(report, texts: dict[str, str]) -> tuple:
    """(Algorithm 1 on the draft, Algorithm 1 on the shipped report) with the lexical rule as the judge."""
    by_source = {source_id_for(doc_id): text for doc_id, text in texts.items()}
    draft = [
        Sentence(text=plain_sentence(v["sentence"]), citations=tuple(citations_in(v["sentence"])))
        for v in report.verdicts
        if len(plain_sentence(v["sentence"])) >= 50
    ]
    before = scholarqa_citation_scores(draft, by_source, lexical_entails)
    numbered = {str(r.number): texts[r.doc_id] for r in report.references if r.doc_id in texts}
    after = scholarqa_citation_scores(claim_sentences(report.markdown), numbered, lexical_entails)
    return before, after


def run_pipeline(
    name: str, retriever, texts, policy: str, *, lm=None, offline=False, config=None, context=None, lm_writes=False
) -> dict:
    befores, afters, actions, verify_calls, calls = [], [], Counter(), 0, 0
    for q in QUESTIONS:
        cfg = config or ResearchConfig(depth=1, breadth=2, hits_per_query=5)
        program = DeepResearch(
            retriever=retriever, config=ResearchConfig(**{**cfg.__dict__, "verify": policy}), offline=offline
        )
        if lm_writes:  # offline research, then the LM writes the report and verifies it
            program.writer, program.verifier = Writer(), Verifier(policy, batch_size=cfg.verify_batch)
        with dspy.context(lm=lm, **(context or {})):
            report = program(question=q).report
        before, after = scores(report, texts)
        befores.append(before)
        afters.append(after)
        actions.update(v["action"] for v in report.verdicts)
        verify_calls += report.usage["verify"].calls if "verify" in report.usage else 0
        calls += report.stats.lm_calls
    p0, r0, _ = dataset_citation_f1(befores)
    p1, r1, _ = dataset_citation_f1(afters)
    checked = sum(actions.values())
    share = {a: actions[a] / checked if checked else 0.0 for a in ("rewritten", "removed", "marked")}
    return {
        "pipeline": name,
        "policy": policy,
        "reports": len(befores),
        "checked": checked,
        "P_before": p0,
        "R_before": r0,
        "P_after": p1,
        "R_after": r1,
        **share,
        "verify_calls": verify_calls,
        "lm_calls": calls,
    }


def print_rows(rows: list[dict]) -> None:
    head = (
        f"{'pipeline':<9} {'policy':<8} {'reports':>7} {'checked':>7} {'P before':>8} {'P after':>7} "
        f"{'R before':>8} {'R after':>7} {'rewritten':>9} {'removed':>7} {'marked':>6} {'verify calls':>12} "
        f"{'all calls':>9}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['pipeline']:<9} {r['policy']:<8} {r['reports']:>7} {r['checked']:>7} {r['P_before']:>8.2f} "
            f"{r['P_after']:>7.2f} {r['R_before']:>8.2f} {r['R_after']:>7.2f} {r['rewritten']:>9.0%} "
            f"{r['removed']:>7.0%} {r['marked']:>6.0%} {r['verify_calls']:>12} {r['lm_calls']:>9}"
        )


def main(real: bool = False, data: str | None = None) -> list[dict]:
    data = data or os.environ.get("DEEPRESEARCH_DATA")
    if not data:
        raise SystemExit(
            "bench_verify: set DEEPRESEARCH_DATA (or pass --data) to the shared data folder holding scifact/"
        )
    corpus = load_corpus(Path(data) / "scifact")
    texts = {d.doc_id: d.text for d in corpus}
    retriever = BM25Retriever(corpus)
    rows = []
    for policy in ("rewrite", "remove", "mark"):
        lm = scripted_lm(research_handler(SCRIPTED_ROUTES))
        rows.append(run_pipeline("scripted", retriever, texts, policy, lm=lm))
    rows.append(run_pipeline("offline", retriever, texts, "rewrite", offline=True))
    if real:
        from deepresearch.programs.lm.models import SchemaAdapter, make_lm
        from deepresearch.programs.lm.usage import output_limits
        from tests.real_lm.server import LlamaServer

        with LlamaServer() as server, output_limits(every=384):
            lm = make_lm("openai/smollm2", api_base=server.base_url, num_retries=0, cache=False, timeout_s=600)
            config = ResearchConfig(
                depth=1, breadth=2, hits_per_query=3, passage_chars=600, verify_batch=3, lm_timeout_s=600, lm_retries=0
            )
            rows.append(
                run_pipeline(
                    "smollm2",
                    retriever,
                    texts,
                    "rewrite",
                    lm=lm,
                    config=config,
                    offline=True,
                    lm_writes=True,
                    context={"adapter": SchemaAdapter()},
                )
            )
    print(machine_line())
    print(
        "protocol: ScholarQABench Algorithm 1 as the HERO paper prints it, corrected (scholarqa_citation_scores), "
        "lexical entailment; not the released compute_autoais rules (docs/reference/protocols.md)"
    )
    print_rows(rows)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="also run SmolLM2-135M on llama-server (slow)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--data", default=None, help="the shared data folder (default $DEEPRESEARCH_DATA)")
    args = parser.parse_args()
    result = main(real=args.real, data=args.data)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    sys.exit(0)
