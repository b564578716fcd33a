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
import json
import logging
import statistics
from dataclasses import dataclass
from pathlib import Path
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
from deepresearch.eval.judges import CitationSupportJudge, CriteriaJudge, JudgeCache, KeyPointJudge, open_judge
from deepresearch.eval.protocols import protocol_lines, protocols_of
from deepresearch.eval.questions import Question, load_questions
from deepresearch.eval.report import source_stats, unique_urls
from deepresearch.programs import environment
from deepresearch.programs.artifacts import Report
from deepresearch.programs.config import preset
from deepresearch.programs.lm.session import open_lm
from deepresearch.programs.retrieval import open_from_args
from deepresearch.programs.runtime.outputs import atomic_write_text

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


def corpus_text(corpus):
    """doc id -> the text of that document of `corpus` (None for an unknown id, or without a corpus)."""

    def text_of(doc_id: str) -> str | None:
        doc = corpus.get(doc_id) if corpus is not None else None
        return doc.text if doc is not None else None

    return text_of


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


def run(args: argparse.Namespace) -> int:
    from deepresearch.programs.research.program import DeepResearch  # lazy: start-up

    overrides = {k: v for k, v in {"depth": args.depth, "breadth": args.breadth}.items() if v is not None}
    config = preset(args.preset, **overrides, lm_timeout_s=args.lm_timeout)
    # both LMs are checked before the questions and the corpus are loaded: a bad key or a dead server fails
    # in seconds, not after the program ran over every question
    session = open_lm(args, num_retries=0)  # the program's scheduler retries, and counts each request
    judges = None
    out = Path(args.out)
    if args.judge_lm and args.judge_lm != "offline":
        judge = open_judge(args, session.model)
        judges = Judges.build(judge, JudgeCache(args.judge_cache or out / "judge_cache"))
    questions = load_questions(args.data, data_dir=environment.data_dir(), limit=args.limit)
    retrieval = open_from_args(args, args.corpus or (None if args.index else "scifact"))
    corpus = retrieval.corpus
    assert corpus is not None  # a corpus (scifact by default) or an index: a local corpus is searched
    program = DeepResearch(retriever=retrieval.retriever, config=config, offline=session.is_offline)
    reports_dir = out / "reports"
    reports_dir.mkdir(parents=True, exist_ok=True)
    text_of = corpus_text(corpus)

    def save(q: Question, report: Report) -> None:
        (reports_dir / f"{q.qid}.md").write_text(report.markdown, encoding="utf-8")

    if args.workers or args.ray:
        from deepresearch.programs.runtime.executor import open_executor  # lazy: start-up

        with session.context():  # the judges' LM
            rows = evaluate_on(
                open_executor(workers=args.workers, ray=args.ray), args, questions, text_of, judges, on_report=save
            )
    else:
        with session.context():
            rows = asyncio.run(evaluate(questions, program, text_of, judges, on_report=save))
    with (out / "scores.jsonl").open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(
        f"{len(rows)} questions from {args.data} · program LM {session.model} · judge "
        f"{args.judge_lm or 'none (offline metrics only)'}"
    )
    means = mean_table(rows)
    for key, value in means.items():
        print(f"  {key:<34} {value:10.4f}")
    # every figure names the released scorer it was checked against and how ours differs
    protocols = protocols_of(means)
    atomic_write_text(out / "protocols.json", json.dumps(protocols, indent=2))
    print("what each metric matches (docs/reference/protocols.md):")
    for line in protocol_lines(means):
        print(f"  {line}")
    print(f"reports: {reports_dir}")
    print(f"scores:  {out / 'scores.jsonl'}")
    print(f"protocols: {out / 'protocols.json'}")
    return 0
