"""The finish of a research run: from the researched tree to the `Report`, the same for every strategy.

`finish` reads top to bottom, in the order it runs:

1. the run's status (`run_status`): done, partial, interrupted or failed, and why;
2. the report: the writer's draft of the findings (restored from the journal on resume), or the merged
   findings as they are (`fallback_report`) when the writer fails or twice cites nothing (`UncitedReport`);
3. verification: every claim of the draft checked against its passages (`verify_report`; the lexical rule when
   the stage fails or the run is late);
4. the map of the literature (`config.taxonomy`) and the short answer (`config.answer`), from
   deliverables.py;
5. one renumbering of report and answer, the notes, the references, the run's statistics and `run_end`.

Stages called after research run outside the call budget, with a grace period only once the run is late.
It asks the run's context (`RunContext`) for what the run holds and never imports the program.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import dspy

from deepresearch.programs.artifacts import Failure, Node, Report, RunStats, RunStatus
from deepresearch.programs.citing.citations import render_references
from deepresearch.programs.citing.entailment import citations_in
from deepresearch.programs.lm.models import summarize_failures
from deepresearch.programs.report_view import cited_passages
from deepresearch.programs.research.deliverables import (
    MAP_HEADING,
    NO_EVIDENCE_ANSWER,
    cites_a_source,
    literature_map,
    renumber_together,
    short_answer,
)
from deepresearch.programs.runtime.context import RunContext
from deepresearch.programs.runtime.scheduler import BudgetExceeded
from deepresearch.programs.runtime.text import inert_markdown
from deepresearch.programs.stages.merger import NO_INFORMATION
from deepresearch.programs.stages.registry import STAGES
from deepresearch.programs.stages.verifier import LexicalVerifier, remove_injected
from deepresearch.programs.stages.writer import (
    OFFLINE_HEADER,
    TWIN_HEADER,
    drop_labels_and_titles,
    drop_repeated_sentences,
)
from deepresearch.retrievers.passages import clip_sentences
from deepresearch.signatures.types import Finding, Learning, Source

logger = logging.getLogger(__name__)

Verdicts = tuple[dict[str, Any], ...]


# why a run whose extractive writer found no sentence about the question is partial
NOTHING_RELEVANT = (
    "nothing the run found is about the question: no finding mentions its key terms; "
    "ask again with the words a paper on it would use"
)


# why a run whose searches ran but kept no learning is partial
NOTHING_FOUND = (
    "the run found nothing about the question: no search hit was kept as evidence; ask again with the words "
    "a paper on it would use, or search a corpus that covers it"
)


def stopped_empty(reason: str) -> str:
    """Why a run that a budget or the deadline stopped before it kept any evidence is partial."""
    return f"the run stopped early ({reason}) before it kept any evidence; give it a larger budget or more time"


class UncitedReport(RuntimeError):
    """The writer's report cited no source, twice, although the learnings it was given cite sources."""


async def finish(ctx: RunContext, *, offline: bool, prune_reasons: Sequence[str] = ()) -> Report:
    """The run's report: status, written and verified body, deliverables, references and statistics.

    Args:
        ctx: The run's context, after its strategy researched.
        offline: Whether the stages are the extractive ones (the writer is not asked twice).
        prune_reasons: The reasons the strategy prunes nodes for, counted in `RunStats.pruned`.
    """
    roots = ctx.store.tree()
    nodes = [n for r in roots for n in r.walk()]
    findings = _findings(ctx, nodes)
    learnings = tuple({x.text: x for n in nodes for x in n.learnings}.values())  # first-seen order, exact dedup
    status, error = run_status(ctx, nodes)
    body, write_failed, verdicts, emptied = await _body(ctx, status, error, findings, learnings, offline)
    # the draft is the writer's text (and the corpus's, quoted): its sections stay, its links, images, HTML,
    # fences and control characters do not (the map, the answer and the references are made inert where written)
    body = inert_markdown(body, headings=True)
    verify_failed = ctx.stats.verification.get("failed")  # then the report was checked by the fallback rule
    if status == "done" and write_failed:  # a list of findings is no written report
        status, error = "partial", f"{write_failed}, so the report lists the merged findings as they are"
    elif status == "done" and verify_failed:
        status = "partial"
        error = f"the verify stage failed ({verify_failed}); the lexical-entailment rule judged the report instead"
    elif status == "done" and emptied:  # an answer left with no evidence is no finished report
        status, error = "partial", emptied
    elif status == "done" and not findings:  # searches that ran and kept nothing: no answer, and not a success
        status, error = "partial", stopped_empty(ctx.stop_reason) if ctx.is_stopped else NOTHING_FOUND
    if status == "interrupted":
        body = f"# Research interrupted: {error}\n\n{body}"
    taxonomy, answer = None, ""
    if ctx.config.taxonomy and status != "failed":
        taxonomy, section = await literature_map(ctx, ctx.modules[STAGES.taxonomy.name], roots, is_late(ctx))
        body += f"\n\n{section}" if section else f"\n\n{MAP_HEADING}\n\nNo paper was judged relevant."
    if ctx.config.answer and status != "failed":
        answer = await short_answer(ctx, lambda stage, **inputs: _late_call(ctx, stage, **inputs), findings)
        # the answer ships no sentence repeating a paper's instruction-like text either
        answer, removed = remove_injected(answer, _sources(ctx, answer, learnings), ctx.question)
        verdicts += tuple(c.to_dict() for c in removed)
    (body, answer), references, dropped = renumber_together([body, answer], ctx.registry)
    markdown = body + _notes(ctx, nodes, status, error, write_failed)
    markdown += "\n\n" + render_references(references) + "\n"
    usage = ctx.meter.snapshot()
    found = {"learnings": len(learnings), "citations": len(references), "dropped_citations": dropped}
    stats = _stats(ctx, nodes, usage, offline, prune_reasons, **found)
    ctx.events.emit("run_end", message=status, counts=stats.to_dict())
    return Report(
        question=ctx.question,
        markdown=markdown,
        references=references,
        learnings=learnings,
        tree=roots,
        usage=usage,
        stats=stats,
        events=tuple(ctx.events.events),
        status=status,
        error=error,
        gathered=ctx.gathered,
        answer=answer.strip(),
        taxonomy=taxonomy,
        verdicts=verdicts,
        passages=cited_passages(references, ctx.registry, getattr(ctx.retriever, "corpus", None)),
    )


def _findings(ctx: RunContext, nodes: list[Node]) -> list[Finding]:
    """What the writer is given: each finished node's merged summary under its query."""
    return [
        Finding(query=n.query, summary=n.summary)
        for n in nodes
        if n.status in ("done", "pruned", "cancelled")
        and n.learnings
        and n.summary
        and n.summary != NO_INFORMATION
        and ctx.finding_depth in (None, n.depth)
    ]


async def _body(
    ctx: RunContext,
    status: RunStatus,
    error: str | None,
    findings: list[Finding],
    learnings: Sequence[Learning],
    offline: bool,
) -> tuple[str, str, Verdicts, str]:
    """The report's body, why the writer failed (else ""), the verify stage's verdicts, and, when the
    checks left a draft that cited sources citing none, one line saying so (else "")."""
    if status == "failed":
        body = (
            f"# Research failed: {error}\n\nNo report was written for: {ctx.title}\n\n"
            f"Every error is recorded in the trace (trace.json), node by node."
        )
        return body, "", (), ""
    if not findings:
        return f"## {ctx.title}\n\n{NO_EVIDENCE_ANSWER}", "", (), ""
    write_failed = ""
    try:
        body = await write_report(ctx, findings, learnings, offline)
    except UncitedReport as err:
        if offline:  # the extractive program quotes only sentences about the question: none of its findings is
            return f"## {ctx.title}\n\n{NO_EVIDENCE_ANSWER}", "", (), NOTHING_RELEVANT
        ctx.fail("root", STAGES.write.name, err)
        write_failed = str(err)
        body = fallback_report(ctx.title, findings)
    except Exception as err:
        failure = ctx.fail("root", STAGES.write.name, err)
        write_failed = f"the writer failed ({failure.cause or failure.error_type})"
        body = fallback_report(ctx.title, findings)
    # a sentence that only restates a cited paper's title is no finding, and verification would find it
    # "supported" by the paper it names
    titles = [doc.title for i in citations_in(body) if (doc := ctx.registry.get(i)) is not None and doc.title]
    body, left_out = drop_labels_and_titles(body, titles)
    if left_out:
        logger.info("report: %d sentences that only restate a title or a section label left out", left_out)
    verified, verdicts = await verify_report(ctx, body, learnings)
    if verified != body:  # a corrected sentence can say again what another does, or copy its passage's label
        verified, said_again = drop_repeated_sentences(verified, per_section=False)
        verified, relabelled = drop_labels_and_titles(verified, titles)
        if said_again or relabelled:
            logger.info("report: %d corrected sentences said again or left out as labels", said_again + relabelled)
    uncited = cites_a_source(body, ctx.registry) and not cites_a_source(verified, ctx.registry)  # by the checks
    emptied = _emptied(verdicts) if uncited else ""
    return verified, write_failed, verdicts, emptied


def _emptied(verdicts: Verdicts) -> str:
    """Why a report that cited sources cites none after its checks, in one line."""
    cited = [v for v in verdicts if v.get("was_cited")]
    injected = sum(v["verdict"] == "injected" for v in cited)
    counted = ((len(cited) - injected, "judged unsupported"), (injected, "repeating instruction-like text of a paper"))
    why = [f"{n} {what}" for n, what in counted if n]
    counts = f" ({len(cited)} cited in the draft: {', '.join(why)})" if why else ""
    return (
        f"no cited sentence of the report survived its checks{counts}, so it cites no source; the learnings "
        "and their passages are in the trace"
    )


def _notes(ctx: RunContext, nodes: list[Node], status: RunStatus, error: str | None, write_failed: str) -> str:
    """The notes under the report's body (empty when there is nothing to note)."""
    failed = sum(n.status == "failed" for n in nodes)
    notes = []
    if failed:
        notes.append(f"{failed} of {len(nodes)} research branches failed; their errors are recorded in the trace.")
    if write_failed and (error is None or write_failed not in error):  # else the partial line says it
        notes.append(
            f"{write_failed[0].upper()}{write_failed[1:]}, so this report lists the merged findings as they are."
        )
    if status == "partial":
        notes.insert(0, f"This report is partial: {error}.")
    if ctx.is_stopped and status != "interrupted":  # an interrupted report says so in its first line
        notes.append(f"The run stopped early ({ctx.stop_reason}); this report covers what was gathered before.")
    # an error may quote a server's or a model's words: one line of text in the note, no markup of theirs
    return "\n\n" + "\n".join(f"> Note: {inert_markdown(n, one_line=True)}" for n in notes) if notes else ""


def _stats(
    ctx: RunContext, nodes: list[Node], usage: dict[str, Any], offline: bool, prune_reasons: Sequence[str], **found: Any
) -> RunStats:
    """The run's statistics: its nodes by status, LM calls, costs, limits, retries and time."""
    costs = ctx.meter.costs()
    pruned = {r: sum(f"pruned: {r}" in n.notes for n in nodes) for r in prune_reasons}
    c = ctx.config
    return replace(
        ctx.stats,
        **found,
        nodes=len(nodes),
        failed_nodes=sum(n.status == "failed" for n in nodes),
        skipped_nodes=sum(n.status == "skipped" for n in nodes),
        cancelled_nodes=sum(n.status == "cancelled" for n in nodes),
        pruned_nodes=sum(n.status == "pruned" for n in nodes),
        registered_sources=len(ctx.registry),
        stopped=ctx.stop_reason or None,
        offline=offline,
        lm_calls=ctx.meter.total_calls,
        tokens=ctx.meter.total_tokens,
        cost={
            "stages": costs,
            "total": None if any(v is None for v in costs.values()) else round(sum(costs.values()), 8),
        },
        limits={"nodes": c.max_concurrency, "lm": ctx.sched.lm_cap, "search": c.search_concurrency},
        failed_requests=sum(u.failed for u in usage.values()),
        parse_failures=sum(u.parse_failures for u in usage.values()),
        format_fallbacks=sum(u.fallbacks for u in usage.values()),
        truncated_replies=sum(u.truncated for u in usage.values()),
        root_notes=ctx.meter.notes("root"),  # notes of calls made outside any node (planning, writing)
        retries=dict(ctx.sched.retries),
        total_s=round(ctx.sched.elapsed(), 4),
        lm_busy_s=round(ctx.meter.busy_s, 4),
        pruned=pruned,
        wasted_speculative=pruned.get(STAGES.deepen.research_attr_name, 0),
    )


def run_status(ctx: RunContext, nodes: list[Node]) -> tuple[RunStatus, str | None]:
    """The run's status and, unless `done`, one line saying why.

    A run is `done` only when every LM stage it needed answered: a run that sent requests and received no
    reply at all is `failed`, and one whose searches found hits that no assessment judged (the deadline, a
    budget or a failure cut them) is `failed` when nothing else was judged, else `partial`.
    """
    if ctx.interrupted:
        return "interrupted", f"{ctx.interrupted}; the report covers what was done before"
    started = [n for n in nodes if n.status != "skipped"]
    researched = ctx.stats.searches + ctx.stats.resumed_nodes
    sent = ctx.meter.total_calls
    if sent and not ctx.meter.replies:
        cause = summarize_failures(ctx.causes) or ctx.stop_reason or "every request was cancelled"
        return "failed", (
            f"no LM reply was received ({sent} request{'s' if sent > 1 else ''} sent, none answered): {cause}"
        )
    unjudged = [  # offline stages judge at once
        n
        for n in nodes
        if sent and n.retrieved_ids and n.status in ("failed", "cancelled") and not n.relevant_ids and not n.learnings
    ]
    judged = [n for n in nodes if n.status in ("done", "pruned") or n.relevant_ids or n.learnings]
    if researched and not (started and all(n.status == "failed" for n in started)):
        if not unjudged:
            return "done", None
        why = ctx.stop_reason or summarize_failures(ctx.causes) or "their assessment did not finish"
        what = f"the hits of {len(unjudged)} of {len(nodes)} searches were left unjudged ({why})"
        if judged:
            return "partial", f"{what}; the report covers the rest"
        return "failed", f"{what}; no evidence was judged, so no report was written"
    # nothing was researched because of failures: say so, never "no relevant evidence"
    cause = summarize_failures(ctx.causes) or ctx.stop_reason or "no search ran"
    failed = sum(n.status == "failed" for n in nodes)
    what = "no search ran" if not researched else f"every research branch failed ({failed} of {len(nodes)})"
    return "failed", f"{what}: {cause}"


async def write_report(ctx: RunContext, findings: list[Finding], learnings: Sequence[Learning], offline: bool) -> str:
    """The writer's report, journaled: a resumed run whose findings are the same restores it instead of
    calling the writer again. See `_draft`."""
    digest = hashlib.blake2b(json.dumps([f.model_dump() for f in findings], sort_keys=True).encode(), digest_size=12)
    key = f"write:{digest.hexdigest()}"
    saved = ctx.journal.get(key) if ctx.journal is not None else None
    if saved is not None:  # a resumed run with the same findings: the draft written before, no LM call
        ctx.events.emit(
            "fallback",
            stage=STAGES.write.name,
            message="the draft of the same findings was restored from the journal",
        )
        return saved["report"]
    body = await _draft(ctx, findings, learnings, offline)
    if not offline:  # the extractive writer answered for the model: its findings are the model's, not quotes
        body = body.replace(OFFLINE_HEADER, TWIN_HEADER)
    if ctx.journal is not None:
        try:
            ctx.journal.append(key, STAGES.write.name, report=body)
        except OSError as err:
            ctx.write_failed(err)
    return body


async def _draft(ctx: RunContext, findings: list[Finding], learnings: Sequence[Learning], offline: bool) -> str:
    """The writer's report. One that cites no source while cited learnings exist is a failure of the
    writer: it is asked once more (offline, where it would write the same, not), then `UncitedReport`."""
    body = (await _late_call(ctx, STAGES.write.name, question=ctx.question, findings=findings)).report
    if not any(x.source_ids for x in learnings) or cites_a_source(body, ctx.registry):
        return body
    ctx.count(uncited_drafts=1)
    message = "the writer's report cites no source although cited learnings exist"
    logger.warning("%s", message)
    ctx.events.emit(
        "fallback",
        stage=STAGES.write.name,
        message=f"{message}; " + ("the fallback report is shipped" if offline else "asking the writer once more"),
    )
    if not offline:
        body = (await _late_call(ctx, STAGES.write.name, question=ctx.question, findings=findings, attempt=1)).report
        if cites_a_source(body, ctx.registry):
            return body
        ctx.count(uncited_drafts=1)
        if ctx.has_twin(STAGES.write.name):  # two drafts the run cannot use: the extractive writer writes it
            twin = await ctx.answer_offline(
                STAGES.write.name, f"{message}, twice", question=ctx.question, findings=findings
            )
            if cites_a_source(twin.report, ctx.registry):
                return twin.report
    raise UncitedReport(f"{message}, twice" if not offline else message)


def fallback_report(question: str, findings: list[Finding]) -> str:
    """The merged findings under their queries, used when the writer cannot produce a report; a summary
    another finding already gave is not repeated under a second heading."""
    parts, shown = [f"## {question}"], set()
    for f in findings:
        if f.summary not in shown:
            shown.add(f.summary)
            summary = drop_repeated_sentences(f.summary)[0]  # a merge that said one finding twice says it once
            parts.append(f"### {inert_markdown(f.query, one_line=True)}\n\n{inert_markdown(summary)}")
    return "\n\n".join(parts)


async def verify_report(ctx: RunContext, body: str, learnings: Sequence[Learning]) -> tuple[str, Verdicts]:
    """The report after the verify stage (unchanged with policy `off`), and every verdict for the trace.

    The stage sees the passages the report cites and those of every learning (the candidates for a
    sentence citing nothing). If it fails, the lexical rule judges instead (recorded as a failure).
    """
    policy = ctx.config.verify
    sources = _sources(ctx, body, learnings)
    if policy == "off":  # no check of support; a sentence repeating a paper's instruction-like text still goes
        body, removed = remove_injected(body, sources, ctx.question)
        if removed:
            ctx.count(
                verification={
                    "policy": policy,
                    "checked": len(removed),
                    "verdicts": {"injected": len(removed)},
                    "actions": {"removed": len(removed)},
                }
            )
        return body, tuple(c.to_dict() for c in removed)
    out, failure = await _judged(ctx, policy, {"question": ctx.question, "report": body, "sources": sources})
    checks = list(out.checks)
    counts = {
        "policy": policy,
        "checked": len(checks),
        "verdicts": dict(Counter(c.verdict for c in checks)),
        "actions": dict(Counter(c.action for c in checks)),
    }
    if failure is not None:  # the run is then partial (`finish`): its verdicts are not the stage's
        counts["failed"] = failure.cause
    ctx.count(verification=counts)
    ctx.events.emit("stage_end", stage=STAGES.verify.name, counts=counts)
    return out.report, tuple(c.to_dict() for c in checks)


async def _judged(ctx: RunContext, policy: str, inputs: dict[str, Any]) -> tuple[dspy.Prediction, Failure | None]:
    """The verify stage's reply, or the lexical rule's when the run is late or the stage fails (with the
    failure)."""
    try:
        if is_late(ctx):  # past the deadline or interrupted: no LM wait, the lexical rule judges at once
            ctx.events.emit(
                "fallback",
                stage=STAGES.verify.name,
                message="the run is past its deadline or interrupted; the lexical-entailment rule judged the report",
            )
            return await LexicalVerifier(policy).acall(**inputs), None
        return await _late_call(ctx, STAGES.verify.name, **inputs), None
    except Exception as err:
        failure = ctx.fail("root", STAGES.verify.name, err)
        ctx.events.emit(
            "fallback",
            stage=STAGES.verify.name,
            message="the verify stage failed; the lexical-entailment rule judged the report instead",
        )
        # a budget the caller set running out is no failure of the stage: the run says it stopped early
        return await LexicalVerifier(policy).acall(**inputs), None if isinstance(err, BudgetExceeded) else failure


def _sources(ctx: RunContext, body: str, learnings: Sequence[Learning]) -> list[Source]:
    """The passages `body` cites and those of every learning, as the verify stage sees them."""
    ids = dict.fromkeys([*citations_in(body), *(i for x in learnings for i in x.source_ids)])
    return [
        Source(source_id=i, title=doc.title, text=clip_sentences(_text(ctx, doc), ctx.config.passage_chars))
        for i in ids
        if (doc := ctx.registry.get(i)) is not None
    ]


def _text(ctx: RunContext, doc) -> str:
    """A cited document's text; a node restored from the journal kept none, so its corpus is asked
    (a retriever without one leaves it empty, and the sentences citing it unchecked)."""
    if doc.text:
        return doc.text
    corpus = getattr(ctx.retriever, "corpus", None)
    found = corpus.get(doc.doc_id) if corpus is not None and hasattr(corpus, "get") else None
    return found.text if found is not None else ""


def is_late(ctx: RunContext) -> bool:
    """Whether the run is past its deadline or interrupted (the stages after research then get a grace)."""
    c = ctx.config
    return bool(ctx.interrupted) or (c.deadline_s is not None and ctx.sched.elapsed() >= c.deadline_s)


async def _late_call(ctx: RunContext, stage: str, **inputs: Any) -> dspy.Prediction:
    """Calls a stage that runs after research (writer, answer) outside the call budget; after the
    deadline or an interrupt it gets a grace period only, then the caller's fallback stands.

    The grace is a tenth of the deadline (at least 5 s, at most the LM timeout), so a server that
    never answers cannot hold the run long past `deadline_s`, nor long past a Ctrl-C.
    """
    call = ctx.call(stage, **inputs)  # with the stage's reserve: none, the late stages spend to the limit
    c = ctx.config
    if not is_late(ctx):
        return await call
    grace = max(5.0, 0.1 * (c.deadline_s or 0.0))
    if c.lm_timeout_s is not None:
        grace = min(grace, c.lm_timeout_s)
    return await asyncio.wait_for(call, grace)
