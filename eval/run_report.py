"""The runner of `deepresearch eval report` (its options: deepresearch.cli.eval_report): run DeepResearch over
a question set and score every report.

Scores per report: DeepResearch-Eco's source integration and eco heuristics; DeepResearchGym's citation
recall and precision; ScholarQABench citation P/R/F1 under the released scorer's citation
rules (`scholarqa_official_scores`) with the offline lexical entailment; and, with a judge LM, graded citation precision, key-point recall and contradiction
(when the questions carry key points) and the six 0-10 criteria. Without a judge LM the citation
precision is the offline lexical-entailment fallback, reported under its own name.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
from dataclasses import dataclass
from typing import Any

import dspy

from deepresearch.eval.citations import (
    answer_sentences,
    citation_precision,
    citation_recall,
    claim_sentences,
    grade_claims,
    lexical_entails,
    lexical_support,
    scholarqa_official_scores,
)
from deepresearch.eval.eco import eco_scores
from deepresearch.eval.judges import CitationSupportJudge, CriteriaJudge, JudgeCache, KeyPointJudge
from deepresearch.eval.questions import Question
from deepresearch.eval.report import source_stats, unique_urls
from deepresearch.programs.artifacts import Report
from deepresearch.programs.config import preset
from deepresearch.programs.lm.session import open_lm
from deepresearch.programs.retrieval import open_from_args

logger = logging.getLogger(__name__)


@dataclass
class Judges:
    """The LLM judges of one evaluation; all share a judge LM and a cache."""

    support: CitationSupportJudge
    key_points: KeyPointJudge
    criteria: CriteriaJudge

    @classmethod
    def build(cls, lm: dspy.LM, cache: JudgeCache | None = None, max_concurrency: int = 8) -> Judges:
        kw = {"lm": lm, "cache": cache, "max_concurrency": max_concurrency}
        return cls(CitationSupportJudge(**kw), KeyPointJudge(**kw), CriteriaJudge(**kw))


def cited_passages(report: Report, text_of) -> dict[str, str]:
    """Citation number (as text) -> text of the cited document, for the report's references."""
    out = {}
    for ref in report.references:
        text = text_of(ref.doc_id)
        if text:
            out[str(ref.number)] = f"{ref.title}\n{text}" if ref.title else text
    return out


async def score_report(question: Question, report: Report, text_of, judges: Judges | None = None) -> dict[str, Any]:
    """Every metric of one report of the program.

    Args:
        question: The question, with key points when the benchmark has them.
        report: The program's report.
        text_of: doc id -> document text (or None), to resolve citations from the corpus.
        judges: LLM judges; without them only the offline metrics are computed.
    """
    md = report.markdown
    stats = source_stats(md)
    claims = claim_sentences(md)
    passages = cited_passages(report, text_of)
    recall = citation_recall(claims)
    # the released scorer's citation rules; an answer without a sentence leaves the means (no keys)
    sqa = scholarqa_official_scores(answer_sentences(md), passages, lexical_entails)
    visited = {d for n in report.nodes() for d in n.retrieved_ids}
    row: dict[str, Any] = {
        "qid": question.qid,
        "question": question.text,
        "n_sources": stats.n_sources,
        "n_url_sources": len(unique_urls(md)),
        "n_visited_sources": len(visited),
        "words": stats.words,
        "sources_per_1k_words": stats.sources_per_1k_words,
        "eco_overall": eco_scores(md).overall,
        "n_claims": recall.n_claims,
        "citation_recall": recall.recall,
        "citation_precision_lexical": citation_precision(grade_claims(claims, passages, lexical_support)),
    }
    if sqa is not None:
        row.update(
            scholarqa_cite_precision_lexical=sqa.precision,
            scholarqa_cite_recall_lexical=sqa.recall,
            scholarqa_cite_f1_lexical=sqa.f1,
        )
    if judges is None:
        return row
    support = await judges.support.acall(claims=claims, passages=passages)
    criteria = await judges.criteria.acall(question=question.text, report=md)
    row["citation_precision"] = support.precision
    row.update({f"criterion_{k}": v for k, v in criteria.scores.items()})
    if question.key_points:
        kp = await judges.key_points.acall(question=question.text, report=md, key_points=list(question.key_points))
        row.update(kpr=kp.kpr, kpc=kp.kpc, key_point_labels=kp.verdicts)
    return row


async def evaluate(
    questions: list[Question], program, text_of, judges: Judges | None = None, on_report=None
) -> list[dict[str, Any]]:
    """Runs `program` on each question in turn and scores the report; `on_report(question, report)` sees each."""
    rows = []
    for q in questions:
        out = await program.acall(question=q.text)
        if on_report is not None:
            on_report(q, out.report)
        rows.append(await score_report(q, out.report, text_of, judges))
    return rows


def research_one(job: tuple[argparse.Namespace, str]) -> dict[str, Any]:
    """One question researched in a worker process (`--workers`, `--ray`): its report as a dict.

    The worker opens its own LM session and corpus from the command's options, as the command does.
    """
    from deepresearch.programs.research.program import DeepResearch  # lazy: start-up

    args, question = job
    overrides = {k: v for k, v in {"depth": args.depth, "breadth": args.breadth}.items() if v is not None}
    config = preset(args.preset, **overrides, lm_timeout_s=args.lm_timeout)
    session = open_lm(argparse.Namespace(**{**vars(args), "no_preflight": True}), num_retries=0)  # checked once
    retrieval = open_from_args(args, args.corpus or (None if args.index else "scifact"))
    program = DeepResearch(retriever=retrieval.retriever, config=config, offline=session.is_offline)
    with session.context():
        return asyncio.run(program.acall(question=question)).report.to_dict()


def evaluate_on(
    executor, args: argparse.Namespace, questions: list[Question], text_of, judges: Judges | None = None, on_report=None
) -> list[dict[str, Any]]:
    """`evaluate`, with the questions researched on `executor` (programs/runtime/executor.py), scored here."""
    from deepresearch.programs.runtime.executor import JobFailed  # lazy: start-up

    reports: dict[int, Report] = {}
    with executor as pool:
        for index, result in pool.map_unordered(research_one, [(args, q.text) for q in questions]):
            if isinstance(result, JobFailed):
                raise RuntimeError(f"question {questions[index].qid}: {result.error}")
            reports[index] = Report.from_dict(result)
            if on_report is not None:
                on_report(questions[index], reports[index])

    async def score_all():
        return [await score_report(q, reports[i], text_of, judges) for i, q in enumerate(questions)]

    return asyncio.run(score_all())


def mean_table(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean of every numeric column over the rows that have it."""
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float)) and not isinstance(rows[0][k], bool)]
    keys += [k for r in rows for k in r if k not in keys and isinstance(r[k], (int, float))]
    return {k: statistics.fmean(float(r[k]) for r in rows if k in r) for k in dict.fromkeys(keys)}
