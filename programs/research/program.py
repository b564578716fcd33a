"""DeepResearch: one recursive research module with four strategies as presets.

`eco` (the default) is DeepResearch-Eco's depth x breadth recursion with the stages of HERO
(programs/research/eco.py); `hero` runs HERO's turns of isolated pipelines (hero.py); `parallel`
runs ParallelResearch's adaptive tree (parallel.py); `gather` runs ScholarGym's gathering loop, then extracts
from what it selected (gather.py). A strategy researches through one `RunContext`
(programs/runtime/context.py), which owns every node's life; this module builds the stages, runs the
strategy, and assembles the report the same way for all four, with the deliverables asked for beside
it (a short answer, a map of the literature: deliverables.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import dspy

from deepresearch.programs.citing.citations import CitationRegistry
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.gather.loop import check_retired
from deepresearch.programs.lm.models import OFFLINE, structured_adapter
from deepresearch.programs.lm.usage import metered
from deepresearch.programs.prediction import ResultPrediction
from deepresearch.programs.research.finish import finish
from deepresearch.programs.research.strategies import STRATEGIES
from deepresearch.programs.runtime.context import RunContext, Snapshot
from deepresearch.programs.runtime.events import EventHandler, EventLog
from deepresearch.programs.runtime.journal import Journal
from deepresearch.programs.runtime.scheduler import CostMeter, Scheduler
from deepresearch.programs.runtime.stage import Shared, run_sync, set_stage_lms
from deepresearch.programs.runtime.stage_log import StageLog
from deepresearch.programs.runtime.text import printable
from deepresearch.programs.stages.choice import TwinChoice
from deepresearch.programs.stages.clarifier import MAX_QUESTIONS, check_clarifications, research_brief
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.fulltext import FullTextCache, FullTextRetriever
from deepresearch.retrievers.types import Retriever

logger = logging.getLogger(__name__)


class DeepResearch(TwinChoice, dspy.Module):
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
        offline: Give every stage its offline twin (deterministic and extractive, no LM) instead of its LM
            module; `offline()` returns such a copy of a program.
        lms: Per-stage LMs keyed by stage name: `clarify`, `plan`, `assess`, `extract`, `merge`, `enrich`,
            `write`, `verify`, `answer`, `taxonomy`, and the strategy's own (`enrich_write` for hero; `breadth`,
            `deepen`, `orchestrate` for parallel; `gather_plan`, `gather_assess` for gather). Other stages
            use the LM in `dspy.settings`. The value `"offline"` gives a stage its offline twin instead
            (`{"plan": "offline"}`: the offline planner, the LM everywhere else).
        on_event: Called with every progress `Event` of a run.

    Example:
        >>> program = DeepResearch(retriever=BM25Retriever(load_corpus("scifact")), depth=2, breadth=3)  # doctest: +SKIP
        >>> out = program(question="Does vitamin D reduce fracture risk?")                           # doctest: +SKIP
        >>> out.markdown, out.references, out.tree, out.usage, out.stats.cost                         # doctest: +SKIP
    """

    _NOT_SAVED = (
        "{path} is not a saved research program (its state has the wrong shape: {error}); pass a file saved by "
        "`deepresearch optimize --program research`"
    )

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
        overrides: dict[str, Any] = {k: v for k, v in {"depth": depth, "breadth": breadth}.items() if v is not None}
        self.config = replace(config, **overrides) if overrides else config
        if self.config.full_text and not isinstance(retriever, FullTextRetriever):  # hits with a PDF read as passages
            retriever = FullTextRetriever(
                retriever, FullTextCache(self.config.full_text_cache), passages_per_paper=self.config.full_text_passages
            )
        self._retriever = Shared(retriever)
        self.is_offline = offline
        self.on_event = on_event
        self.strategy = STRATEGIES[self.config.strategy]
        table = self.stage_table()
        # `lms={"plan": "offline"}`: that stage's offline twin, the LM for the others
        twins = {name for name, lm in (lms or {}).items() if isinstance(lm, str) and lm == OFFLINE}
        if unknown := sorted(twins - set(table)):
            raise ValueError(f"unknown stage {unknown[0]!r} in lms; choose from: {', '.join(table)}")
        for name, attr in table.items():
            setattr(self, attr, STAGES[name].build(self.config, retriever, offline=offline or name in twins))
        set_stage_lms(self, table, {name: lm for name, lm in (lms or {}).items() if name not in twins})

    def offline(self) -> DeepResearch:
        """This program with every stage's offline twin: same settings, retriever and predictor names, no LM.

        Each twin records its answers in DSPy's trace under the name of the LM predictor it stands in for,
        so the offline program teaches the LM program without a single LM call::

            compiled = dspy.BootstrapFewShot(metric=dr.metrics.cited_recall).compile(
                program, teacher=program.offline(), trainset=train)
        """
        return DeepResearch(self.retriever, self.config, offline=True, on_event=self.on_event)

    def stage_table(self) -> dict[str, str]:
        """Stage name -> the attribute holding its module, for this program's strategy."""
        return STAGES.research(self.strategy.name)

    def load_state(self, state: dict[str, Any], **options: Any) -> DeepResearch:
        """Loads saved (compiled) state. A stage the saved program did not have yet (one added in a later
        version, such as `clarify`, `answer` or `taxonomy`) keeps its default prompt, with a warning;
        a state holding none of this program's stages is refused."""
        check_retired(state, self)  # a stage whose signature changed shape: its old demos would not fit
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
        return super().load(path, **options)

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
                report = await finish(ctx, offline=self.is_offline, prune_reasons=self.strategy.prune_reasons)
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


def _with_question(on_snapshot: Snapshot, question: str) -> Snapshot:
    """`on_snapshot` given snapshots that name `question` (the run's context names the research brief)."""
    return lambda tree: on_snapshot({**tree, "question": question})
