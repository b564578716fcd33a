"""DeepResearch: one recursive research module with four strategies as presets.

`eco` (the default) is spec 000 §3's depth x breadth recursion with the stages of spec 001
(programs/research/eco.py); `hero` runs spec 001's turns of isolated pipelines (hero.py); `parallel`
runs spec 002's adaptive tree (parallel.py); `gather` runs spec 004's gathering loop, then extracts
from what it selected (gather.py). A strategy researches through one `RunContext`
(programs/runtime/context.py), which owns every node's life; this module builds the stages, runs the
strategy, and assembles the report the same way for all four, with the deliverables asked for beside
it (a short answer, a map of the literature: deliverables.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import dspy

from deepresearch.programs.artifacts import Node, Report, RunStats, RunStatus
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.render import ResultPrediction
from deepresearch.programs.report_view import cited_passages
from deepresearch.programs.research.deliverables import (
    MAP_HEADING,
    NO_EVIDENCE_ANSWER,
    literature_map,
    renumber_together,
    short_answer,
)
from deepresearch.programs.research.eco import Eco, tree_size
from deepresearch.programs.research.gather import Gather
from deepresearch.programs.research.hero import Hero
from deepresearch.programs.research.parallel import PRUNE_REASONS, Parallel
from deepresearch.programs.research.strategy import Strategy
from deepresearch.programs.runtime.citations import (
    CitationRegistry,
    render_references,
)
from deepresearch.programs.runtime.context import RunContext, Snapshot
from deepresearch.programs.runtime.entailment import citations_in
from deepresearch.programs.runtime.events import EventHandler, EventLog
from deepresearch.programs.runtime.journal import Journal
from deepresearch.programs.runtime.lm import structured_adapter, summarize_failures
from deepresearch.programs.runtime.scheduler import CostMeter, Scheduler
from deepresearch.programs.runtime.stage import Shared, run_sync, set_stage_lms
from deepresearch.programs.runtime.stage_log import StageLog
from deepresearch.programs.runtime.text import printable
from deepresearch.programs.runtime.usage import metered
from deepresearch.programs.stages.clarifier import (
    MAX_QUESTIONS,
    Clarifier,
    check_clarifications,
    research_brief,
)
from deepresearch.programs.stages.merger import NO_INFORMATION
from deepresearch.programs.stages.registry import STAGES
from deepresearch.programs.stages.verifier import LexicalVerifier, Verifier, remove_injected
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from deepresearch.retrievers.fulltext import FullTextCache, FullTextRetriever
from deepresearch.retrievers.types import Retriever
from deepresearch.signatures.types import Finding, Learning, Source

logger = logging.getLogger(__name__)

STRATEGIES: dict[str, Strategy] = {"eco": Eco(), "hero": Hero(), "parallel": Parallel(), "gather": Gather()}
# Stages that turn what a run found into deliverables beside the report (deliverables.py); every
# program has them, so a compiled program's state does not depend on which deliverables are asked for.
OUTPUT_STAGES: dict[str, str] = STAGES.outputs()


class UncitedReport(RuntimeError):
    """The writer's report cited no source, twice, although the learnings it was given cite sources."""


def stage_names() -> tuple[str, ...]:
    """Every stage name any research program may have: the shared, output and strategies' stages."""
    return tuple(STAGES.research())


class DeepResearch(dspy.Module):
    """Plans tasks, researches each as a node of a recursive tree, and writes a cited report.

    With the default `eco` strategy every node retrieves, assesses relevance, extracts cited learnings,
    merges them and asks for follow-up tasks; children recurse with depth - 1 and the next breadth
    (ceil(b/2) by default). `config.strategy` selects `hero`, `parallel` or `gather` instead (see the
    presets in programs/config.py); `config.answer` and `config.taxonomy` add a short cited answer and a
    taxonomy of the papers judged relevant to the report. Predictors are created once here and shared by all nodes, so
    `named_predictors()` lists each stage once whatever the depth.

    Args:
        retriever: Any object with `search(query, k)` (and optionally `asearch`) returning hits.
        config: Tree shape, strategy, schedule, caps and budgets; `depth` and `breadth` override it.
        offline: Use the deterministic extractive stages of `deepresearch.programs.stages.offline` instead of an LM.
        lms: Per-stage LMs keyed by stage name: `clarify`, `plan`, `assess`, `extract`, `merge`, `enrich`,
            `write`, `verify`, `answer`, `taxonomy`, and the strategy's own (`enrich_write` for hero; `breadth`,
            `deepen`, `orchestrate` for parallel; `gather_plan`, `gather_assess` for gather). Other stages
            use the LM in `dspy.settings`.
        on_event: Called with every progress `Event` of a run.

    Example:
        >>> program = DeepResearch(retriever=BM25Retriever(load_corpus("scifact")), depth=2, breadth=3)  # doctest: +SKIP
        >>> out = program(question="Does vitamin D reduce fracture risk?")                           # doctest: +SKIP
        >>> out.markdown, out.references, out.tree, out.usage, out.stats.cost                         # doctest: +SKIP
    """

    def __init__(
        self,
        retriever: Retriever,
        config: ResearchConfig | None = None,
        *,
        depth: int | None = None,
        breadth: int | None = None,
        offline: bool = False,
        lms: dict[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ):
        super().__init__()
        if not hasattr(retriever, "search"):
            raise TypeError(f"retriever must have a search(query, k) method, got {type(retriever).__name__}")
        config = config or ResearchConfig()
        overrides = {k: v for k, v in {"depth": depth, "breadth": breadth}.items() if v is not None}
        self.config = replace(config, **overrides) if overrides else config
        if self.config.full_text and not isinstance(retriever, FullTextRetriever):  # hits with a PDF read as passages
            retriever = FullTextRetriever(
                retriever, FullTextCache(self.config.full_text_cache), passages_per_paper=self.config.full_text_passages
            )
        self._retriever = Shared(retriever)
        self.is_offline = offline
        self.on_event = on_event
        self.strategy = STRATEGIES[self.config.strategy]
        if offline:
            from deepresearch.programs.stages.offline import OfflineClarifier, offline_stages

            stages = offline_stages(retriever, self.config)
        else:
            from deepresearch.programs.stages.answerer import Answerer
            from deepresearch.programs.stages.assessor import Assessor
            from deepresearch.programs.stages.enricher import Enricher
            from deepresearch.programs.stages.extractor import Extractor
            from deepresearch.programs.stages.merger import Merger
            from deepresearch.programs.stages.planner import Planner
            from deepresearch.programs.stages.writer import Writer

            stages = {
                STAGES.plan.research_attr: Planner(),
                STAGES.assess.research_attr: Assessor(keep_uncertain=self.config.keep_uncertain),
                STAGES.extract.research_attr: Extractor(max_learnings=self.config.max_learnings),
                STAGES.merge.research_attr: Merger(),
                STAGES.enrich.research_attr: Enricher(),
                STAGES.write.research_attr: Writer(),
                STAGES.answer.research_attr: Answerer(),
            }
        if offline:
            from deepresearch.programs.stages.offline import OfflineAnswerer

            stages[STAGES.answer.research_attr] = OfflineAnswerer()
        stages[STAGES.taxonomy.research_attr] = TaxonomyBuilder(
            offline=offline, lm_timeout_s=self.config.lm_timeout_s, max_concurrency=self.config.lm_concurrency
        )
        # asks before research (`clarify`)
        stages[STAGES.clarify.research_attr] = OfflineClarifier() if offline else Clarifier()
        c = self.config  # every claim of the draft checked against its passages (`verify`; offline: the lexical rule)
        stages[STAGES.verify.research_attr] = (
            LexicalVerifier(c.verify)
            if offline
            else Verifier(c.verify, batch_size=c.verify_batch, max_chars=c.verify_chars)
        )
        for attr, module in {**stages, **self.strategy.modules(offline)}.items():
            setattr(self, attr, module)
        set_stage_lms(self, self.stage_table(), lms)

    @property
    def retriever(self) -> Retriever:
        return self._retriever.obj

    def stage_table(self) -> dict[str, str]:
        """Stage name -> the attribute holding its module, for this program's strategy."""
        return STAGES.research(self.strategy.name)

    def load_state(self, state: dict[str, Any], **options: Any) -> DeepResearch:
        """Loads saved (compiled) state. A stage the saved program did not have yet (one added in a later
        version, such as `clarify`, `answer` or `taxonomy`) keeps its default prompt, with a warning;
        a state holding none of this program's stages is refused."""
        from deepresearch.programs.gather.loop import check_retired

        check_retired(state)  # a stage whose signature changed shape: its old demos would not fit
        names = [name for name, _ in self.named_parameters()]
        missing = [name for name in names if name not in state]
        if len(missing) == len(names):
            raise ValueError(
                "the saved state holds none of this research program's stages; load a program "
                "compiled with `deepresearch optimize --program research`"
            )
        if missing:
            logger.warning(
                "the saved program has no state for %s; those stages keep their default prompts", ", ".join(missing)
            )
            current = self.dump_state()
            state = {**{name: current[name] for name in missing}, **state}
        super().load_state(state, **options)
        return self

    def load(self, path: str | Path, **options: Any) -> DeepResearch:
        """Loads a program saved with `save` into this one and returns it: `DeepResearch(...).load(path)`.

        Raises:
            ValueError: one line naming the file, when it is no saved research program (wrong shape, not JSON).
        """
        try:
            super().load(path, **options)
        except (KeyError, TypeError, AttributeError, IndexError, UnicodeDecodeError) as err:
            raise ValueError(
                f"{path} is not a saved research program (its state has the wrong shape: "
                f"{type(err).__name__} {err}); pass a file saved by `deepresearch optimize "
                f"--program research`"
            ) from None
        except ValueError as err:  # not JSON, or none of this program's stages
            raise ValueError(f"{path}: {str(err).splitlines()[0] if str(err) else 'not a saved program'}") from None
        return self

    def planned_nodes(self) -> int:
        """The most nodes a run plans at the start (an adaptive strategy's tree grows past it as it runs)."""
        return self.strategy.planned_nodes(self.config)

    def forward(self, question: str, **run_options: Any) -> dspy.Prediction:
        return run_sync(self.aforward(question=question, **run_options))

    async def aforward(
        self,
        question: str,
        *,
        clarifications: Sequence[Mapping[str, str]] = (),
        interrupt: asyncio.Event | None = None,
        journal: str | Path | None = None,
        resume: bool = False,
        on_snapshot: Snapshot | None = None,
        meter: CostMeter | None = None,
        stage_log: str | Path | None = None,
    ) -> dspy.Prediction:
        """Researches `question`; the Prediction carries the `Report` fields, `report` itself and `brief`.

        Args:
            question: The research question.
            clarifications: The user's answers to clarifying questions (`clarify`), as `{"question": ...,
                "answer": ...}`. Research runs on the brief they make with the question (`brief`: the
                question followed by the answers, blank answers left out); the report keeps `question` as its question
                and records them in `clarifications`.
            interrupt: Set it (from a signal handler, another task) to stop the run: running work is
                cancelled and the report of what exists is written, with status `interrupted`.
            journal: A JSON-lines file where every finished node is recorded as it finishes.
            resume: Restore the nodes `journal` holds from an earlier run of the same question instead of
                researching them again (no LM call, no search); the rest runs as usual.
            on_snapshot: Called with the tree so far (a dict) at most every 2 s as nodes finish, e.g. to
                keep a trace file current.
            meter: The usage meter to count the run's LM calls in (a new one by default); pass the one
                `clarify` counted in, so that the report's usage includes the clarifying questions.
            stage_log: A JSON-lines file where every stage call's inputs and outputs are recorded
                (`deepresearch.programs.runtime.stage_log`), the training pool of `optimize --from-runs`.
        """
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question is empty; pass the research question as a non-empty string")
        self._check_lm()
        question = printable(question).strip()
        clarified = check_clarifications(clarifications)
        brief = research_brief(question, clarified)
        log = Journal(journal, brief, resume=resume) if journal is not None else None  # resumed with the same answers
        calls = StageLog(stage_log, resume=resume) if stage_log is not None else None
        adapter = self._adapter()
        meter = CostMeter() if meter is None else meter
        if on_snapshot is not None and brief != question:  # the trace names the user's question, as the report
            on_snapshot = _with_question(on_snapshot, question)
        try:
            with metered(meter), dspy.context(adapter=adapter) if adapter else contextlib.nullcontext():
                modules = {name: getattr(self, attr) for name, attr in self.stage_table().items()}
                ctx = RunContext(
                    brief,
                    self.config,
                    modules=modules,
                    retriever=self.retriever,
                    registry=CitationRegistry(),
                    events=EventLog(self.on_event),
                    meter=meter,
                    journal=log,
                    interrupt=interrupt,
                    on_snapshot=on_snapshot,
                    title=question,
                    stage_log=calls,
                )
                c = self.config
                ctx.events.emit(
                    "run_start",
                    counts={
                        "planned_nodes": self.planned_nodes(),
                        "depth": c.depth,
                        "breadth": c.breadth,
                        "strategy": c.strategy,
                        "schedule": c.schedule,
                    },
                )
                await ctx.run(self.strategy.research(ctx))
                if ctx.write_error is not None:  # a full disk: the run ends as an error, not as a report
                    raise ctx.write_error
                report = await self._report(ctx)
        finally:
            for opened in (log, calls):
                if opened is not None:
                    opened.close()
        report = replace(report, question=question, clarifications=clarified)
        return ResultPrediction(
            report=report, brief=brief, **{k: getattr(report, k) for k in report.__dataclass_fields__}
        )

    def clarify(
        self, question: str, *, max_questions: int = MAX_QUESTIONS, meter: CostMeter | None = None
    ) -> list[str]:
        """The clarifying questions to ask the user before researching `question`.

        At most `max_questions`, none when the question is clear, when the LM's reply does not parse
        (counted as a parse failure of the `clarify` stage) or when the program is offline. The call runs
        under the run's rules: the `clarify` stage's LM, the timeout, retries and the call budget.

        Args:
            question: The research question.
            max_questions: The most questions to ask.
            meter: Count the call in this usage meter; pass the same one to the run so that its report's
                usage includes it.

        Returns:
            The questions. Answer them and pass the answers to the run as `clarifications`.

        Example:
            >>> meter = CostMeter()                                                              # doctest: +SKIP
            >>> asked = program.clarify("Does green tea prevent cancer?", meter=meter)           # doctest: +SKIP
            >>> answers = [{"question": q, "answer": input(q + " ")} for q in asked]             # doctest: +SKIP
            >>> out = program(question="Does green tea prevent cancer?", clarifications=answers, meter=meter)  # doctest: +SKIP
            >>> out.brief, out.report.clarifications                                             # doctest: +SKIP
        """
        return run_sync(self.aclarify(question, max_questions=max_questions, meter=meter))

    async def aclarify(
        self, question: str, *, max_questions: int = MAX_QUESTIONS, meter: CostMeter | None = None
    ) -> list[str]:
        """`clarify`, asynchronously."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question is empty; pass the research question as a non-empty string")
        if max_questions < 1:
            raise ValueError(f"max_questions must be >= 1, got {max_questions}")
        self._check_lm()
        meter = CostMeter() if meter is None else meter
        adapter = self._adapter()
        with metered(meter), dspy.context(adapter=adapter) if adapter else contextlib.nullcontext():
            out = await Scheduler(self.config, meter).call(
                self.clarifier, question=question.strip(), max_questions=max_questions
            )
        return list(out.questions)

    def _adapter(self) -> dspy.Adapter | None:
        """The structured-output adapter of `config.structured` when the caller set none (None offline)."""
        if self.config.structured and dspy.settings.adapter is None and not self.is_offline:
            return structured_adapter(self.config.structured, dspy.settings.lm)
        return None

    def _check_lm(self) -> None:
        """Raises before any work when an LM stage has no LM: neither its own nor one in dspy.settings."""
        if self.is_offline or dspy.settings.lm is not None:
            return
        bare = sorted({name.split(".", 1)[0] for name, p in self.named_predictors() if p.lm is None})
        if bare:
            raise dspy.utils.exceptions.LMNotConfiguredError(
                f"no LM configured for {', '.join(bare)}: call dspy.configure(lm=dspy.LM(...)) or run inside "
                f"dspy.context(lm=...), or pass offline=True for the extractive baseline"
            )

    async def _report(self, ctx: RunContext) -> Report:
        roots = ctx.store.tree()
        nodes = [n for r in roots for n in r.walk()]
        findings = [
            Finding(query=n.query, summary=n.summary)
            for n in nodes
            if n.status in ("done", "pruned", "cancelled")
            and n.learnings
            and n.summary
            and n.summary != NO_INFORMATION
            and ctx.finding_depth in (None, n.depth)
        ]
        learnings = tuple({x.text: x for n in nodes for x in n.learnings}.values())  # first-seen order, exact dedup
        status, error = _run_status(ctx, nodes)
        write_failed = False
        verdicts: tuple[dict[str, Any], ...] = ()
        if status == "failed":
            body = (
                f"# Research failed: {error}\n\nNo report was written for: {ctx.title}\n\n"
                f"Every error is recorded in the trace (trace.json), node by node."
            )
        elif findings:
            try:
                body = await self._write(ctx, findings, learnings)
            except Exception as err:
                ctx.fail("root", STAGES.write.name, err)
                write_failed = True
                body = fallback_report(ctx.title, findings)
            body, verdicts = await self._verify(ctx, body, learnings)
        else:
            body = f"## {ctx.title}\n\n{NO_EVIDENCE_ANSWER}"
        if status == "interrupted":
            body = f"# Research interrupted: {error}\n\n{body}"
        taxonomy, answer = None, ""
        if self.config.taxonomy and status != "failed":
            taxonomy, section = await literature_map(ctx, self.taxonomist, roots, self._late(ctx))
            body += f"\n\n{section}" if section else f"\n\n{MAP_HEADING}\n\nNo paper was judged relevant."
        if self.config.answer and status != "failed":
            answer = await short_answer(ctx, lambda stage, **inputs: self._late_call(ctx, stage, **inputs), findings)
            # the answer ships no sentence repeating a paper's instruction-like text either
            answer, removed = remove_injected(answer, self._sources(ctx, answer, learnings))
            verdicts += tuple(c.to_dict() for c in removed)
        (body, answer), references, dropped = renumber_together([body, answer], ctx.registry)
        failed = sum(n.status == "failed" for n in nodes)
        notes = []
        if failed:
            notes.append(f"{failed} of {len(nodes)} research branches failed; their errors are recorded in the trace.")
        if write_failed:
            notes.append("The writer failed, so this report lists the merged findings as they are.")
        if status == "partial":
            notes.insert(0, f"This report is partial: {error}.")
        if ctx.is_stopped and status != "interrupted":  # an interrupted report says so in its first line
            notes.append(f"The run stopped early ({ctx.stop_reason}); this report covers what was gathered before.")
        markdown = body
        if notes:
            markdown += "\n\n" + "\n".join(f"> Note: {n}" for n in notes)
        markdown += "\n\n" + render_references(references) + "\n"
        usage = ctx.meter.snapshot()
        costs = ctx.meter.costs()
        pruned = (
            {r: sum(f"pruned: {r}" in n.notes for n in nodes) for r in PRUNE_REASONS}
            if self.config.strategy == "parallel"
            else {}
        )
        stats = replace(
            ctx.stats,
            nodes=len(nodes),
            failed_nodes=failed,
            skipped_nodes=sum(n.status == "skipped" for n in nodes),
            cancelled_nodes=sum(n.status == "cancelled" for n in nodes),
            pruned_nodes=sum(n.status == "pruned" for n in nodes),
            learnings=len(learnings),
            citations=len(references),
            dropped_citations=dropped,
            registered_sources=len(ctx.registry),
            stopped=ctx.stop_reason or None,
            offline=self.is_offline,
            lm_calls=ctx.meter.total_calls,
            tokens=ctx.meter.total_tokens,
            cost={
                "stages": costs,
                "total": None if any(v is None for v in costs.values()) else round(sum(costs.values()), 8),
            },
            limits={
                "nodes": self.config.max_concurrency,
                "lm": self.config.lm_concurrency,
                "search": self.config.search_concurrency,
            },
            failed_requests=sum(u.failed for u in usage.values()),
            parse_failures=sum(u.parse_failures for u in usage.values()),
            format_fallbacks=sum(u.fallbacks for u in usage.values()),
            truncated_replies=sum(u.truncated for u in usage.values()),
            root_notes=ctx.meter.notes("root"),  # notes of calls made outside any node (planning, writing)
            retries=dict(ctx.sched.retries),
            total_s=round(ctx.sched.elapsed(), 4),
            pruned=pruned,
            wasted_speculative=pruned.get(STAGES.deepen.research_attr, 0),
        )
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

    async def _write(self, ctx: RunContext, findings: list[Finding], learnings: Sequence[Learning]) -> str:
        """The writer's report, journaled: a resumed run whose findings are the same restores it instead of
        calling the writer again. See `_draft`."""
        key = (
            "write:"
            + hashlib.blake2b(
                json.dumps([f.model_dump() for f in findings], sort_keys=True).encode(), digest_size=12
            ).hexdigest()
        )
        saved = ctx.journal.get(key) if ctx.journal is not None else None
        if saved is not None:  # a resumed run with the same findings: the draft written before, no LM call
            ctx.events.emit(
                "fallback",
                stage=STAGES.write.name,
                message="the draft of the same findings was restored from the journal",
            )
            return saved["report"]
        body = await self._draft(ctx, findings, learnings)
        if ctx.journal is not None:
            try:
                ctx.journal.append(key, STAGES.write.name, report=body)
            except OSError as err:
                ctx.write_failed(err)
        return body

    async def _draft(self, ctx: RunContext, findings: list[Finding], learnings: Sequence[Learning]) -> str:
        """The writer's report. One that cites no source while cited learnings exist is a failure of the
        writer: it is asked once more (offline, where it would write the same, not), then `UncitedReport`."""
        body = (await self._late_call(ctx, STAGES.write.name, question=ctx.question, findings=findings)).report
        if not any(x.source_ids for x in learnings) or _cites(body, ctx):
            return body
        ctx.count(uncited_drafts=1)
        message = "the writer's report cites no source although cited learnings exist"
        logger.warning("%s", message)
        ctx.events.emit(
            "fallback",
            stage=STAGES.write.name,
            message=f"{message}; "
            + ("the fallback report is shipped" if self.is_offline else "asking the writer once more"),
        )
        if not self.is_offline:
            body = (
                await self._late_call(ctx, STAGES.write.name, question=ctx.question, findings=findings, attempt=1)
            ).report
            if _cites(body, ctx):
                return body
            ctx.count(uncited_drafts=1)
        raise UncitedReport(f"{message}, twice" if not self.is_offline else message)

    async def _verify(
        self, ctx: RunContext, body: str, learnings: Sequence[Learning]
    ) -> tuple[str, tuple[dict[str, Any], ...]]:
        """The report after the verify stage (unchanged with policy `off`), and every verdict for the trace.

        The stage sees the passages the report cites and those of every learning (the candidates for a
        sentence citing nothing). If it fails, the lexical rule judges instead (recorded as a failure).
        """
        policy = self.config.verify
        sources = self._sources(ctx, body, learnings)
        if policy == "off":  # no check of support; a sentence repeating a paper's instruction-like text still goes
            body, removed = remove_injected(body, sources)
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
        inputs = {"question": ctx.question, "report": body, "sources": sources}
        try:
            if self._late(ctx):  # past the deadline or interrupted: no LM wait, the lexical rule judges at once
                ctx.events.emit(
                    "fallback",
                    stage=STAGES.verify.name,
                    message="the run is past its deadline or "
                    "interrupted; the lexical-entailment rule judged the report",
                )
                out = await LexicalVerifier(policy).acall(**inputs)
            else:
                out = await self._late_call(ctx, STAGES.verify.name, **inputs)
        except Exception as err:
            ctx.fail("root", STAGES.verify.name, err)
            ctx.events.emit(
                "fallback",
                stage=STAGES.verify.name,
                message="the verify stage failed; the lexical-entailment rule judged the report instead",
            )
            out = await LexicalVerifier(policy).acall(**inputs)
        checks = list(out.checks)
        counts = {
            "policy": policy,
            "checked": len(checks),
            "verdicts": dict(Counter(c.verdict for c in checks)),
            "actions": dict(Counter(c.action for c in checks)),
        }
        ctx.count(verification=counts)
        ctx.events.emit("stage_end", stage=STAGES.verify.name, counts=counts)
        return out.report, tuple(c.to_dict() for c in checks)

    def _sources(self, ctx: RunContext, body: str, learnings: Sequence[Learning]) -> list[Source]:
        """The passages `body` cites and those of every learning, as the verify stage sees them."""
        ids = dict.fromkeys([*citations_in(body), *(i for x in learnings for i in x.source_ids)])
        return [
            Source(source_id=i, title=doc.title, text=self._text(doc)[: self.config.passage_chars])
            for i in ids
            if (doc := ctx.registry.get(i)) is not None
        ]

    def _text(self, doc) -> str:
        """A cited document's text; a node restored from the journal kept none, so its corpus is asked
        (a retriever without one leaves it empty, and the sentences citing it unchecked)."""
        if doc.text:
            return doc.text
        corpus = getattr(self.retriever, "corpus", None)
        found = corpus.get(doc.doc_id) if hasattr(corpus, "get") else None
        return found.text if found is not None else ""

    @staticmethod
    def _late(ctx: RunContext) -> bool:
        """Whether the run is past its deadline or interrupted (the stages after research then get a grace)."""
        c = ctx.config
        return bool(ctx.interrupted) or (c.deadline_s is not None and ctx.sched.elapsed() >= c.deadline_s)

    async def _late_call(self, ctx: RunContext, stage: str, **inputs: Any) -> dspy.Prediction:
        """Calls a stage that runs after research (writer, answer) outside the call budget; after the
        deadline or an interrupt it gets a grace period only, then the caller's fallback stands.

        The grace is a tenth of the deadline (at least 5 s, at most the LM timeout), so a server that
        never answers cannot hold the run long past `deadline_s`, nor long past a Ctrl-C.
        """
        call = ctx.call(stage, **inputs)  # with the stage's reserve: none, the late stages spend to the limit
        c = ctx.config
        if not self._late(ctx):
            return await call
        grace = max(5.0, 0.1 * (c.deadline_s or 0.0))
        if c.lm_timeout_s is not None:
            grace = min(grace, c.lm_timeout_s)
        return await asyncio.wait_for(call, grace)


def _cites(body: str, ctx: RunContext) -> bool:
    """Whether `body` cites at least one registered source."""
    return any(label in ctx.registry for label in citations_in(body))


def _run_status(ctx: RunContext, nodes: list[Node]) -> tuple[RunStatus, str | None]:
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
    unjudged = (
        [
            n
            for n in nodes
            if n.retrieved_ids and n.status in ("failed", "cancelled") and not n.relevant_ids and not n.learnings
        ]
        if sent
        else []
    )  # offline stages judge at once
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


def _with_question(on_snapshot: Snapshot, question: str) -> Snapshot:
    """`on_snapshot` given snapshots that name `question` (the run's context names the research brief)."""
    return lambda tree: on_snapshot({**tree, "question": question})


def fallback_report(question: str, findings: list[Finding]) -> str:
    """The merged findings under their queries, used when the writer cannot produce a report."""
    parts = [f"## {question}"]
    parts += [f"### {f.query}\n\n{f.summary}" for f in findings]
    return "\n\n".join(parts)


__all__ = ["STAGES", "STRATEGIES", "DeepResearch", "Learning", "RunStats", "fallback_report", "tree_size"]
