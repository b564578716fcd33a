"""The stage registry: every stage of the research and gathering programs, named once.

A stage's `name` is its on-disk spelling: the key of `lms=` and `--stage-lm`, the `--stage` of
`optimize`, the rows of the usage table, the `stage` of events, failures and `stages.jsonl`, and the
output limits. Code refers to a stage as `STAGES.plan.name` (never the string `"plan"`), and reads the
rest of its contract here: the signature its module calls, the attribute holding that module in the
research program and in the gathering program (the prefix of its predictor paths in a saved program),
its offline twin, whether `optimize --stage` can tune it alone and on which metric, and what it may
spend of a run's LM budget.

Example:
    >>> from deepresearch.programs.stages.registry import STAGES
    >>> STAGES.orchestrate.research_attr, STAGES["progress_scorer"].name
    ('progress_scorer', 'orchestrate')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import dspy

from deepresearch.signatures.answer import WriteAnswer
from deepresearch.signatures.assess import AssessRelevance
from deepresearch.signatures.clarify import ClarifyQuestion
from deepresearch.signatures.enrich import FindGaps, WriteEnrichment
from deepresearch.signatures.extract import ExtractLearnings
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries, RecheckCandidate, WriteSearchQuery
from deepresearch.signatures.merge import MergeLearnings
from deepresearch.signatures.orchestrate import DecideDeepen, EvaluateProgress, PlanBreadth
from deepresearch.signatures.plan import PlanQueries
from deepresearch.signatures.taxonomy import BuildTaxonomy, MergeTaxonomies, PlacePapers, RepairJSON
from deepresearch.signatures.verify import VerifyClaims
from deepresearch.signatures.write import WriteReport

StageKind = Literal[
    "stage",  # a module of its own, called by the program or a strategy
    "output",  # a deliverable beside the report (every research program has it, whatever was asked)
    "call",  # a second predictor call inside another stage's module (accounted apart)
    "baseline",  # a module of a baseline program, outside the research and gathering programs
    "step",  # a step without a module or an LM (searching); it appears in failures and timings
]

DEFAULT_MAX_OUTPUT_TOKENS = 2048  # a predictor call under a stage name the registry does not hold


@dataclass(frozen=True)
class Tuning:
    """How `optimize --stage NAME` tunes a stage on its own (a stage without one is tuned only inside its
    whole program, on the program's metric).

    Args:
        target: The metric target (`deepresearch.optimize.metrics`) of the stage tuned alone.
        inputs: `frozen` (recorded candidates or planning + retrieval, see `optimize.targets`) or
            `recorded` (the inputs runs recorded in `stages.jsonl`: `optimize --from-runs`).
        reads: What the metric reads, in a few words (the `--stage` help and the reference page).
        program: The program (`optimize --program`) whose stage it is tuned as.
    """

    target: str
    inputs: Literal["frozen", "recorded"]
    reads: str
    program: str = "research"


@dataclass(frozen=True)
class StageSpec:
    """One stage's contract.

    Args:
        name: The stage's on-disk name (lms keys, usage rows, events, failures, traces, `--stage`).
        summary: What the stage does, in one line.
        signatures: The signatures its module calls (empty for a step without an LM).
        module: The class of its LM module (dotted path), None for a step.
        offline: Its no-LM twin (dotted path of a class, or of the function the module calls offline), None
            where the stage has none.
        research_attr: The attribute of `DeepResearch` holding its module (None: not in that program).
        gather_attr: The attribute of `Gatherer` holding its module (None: not in that program).
        strategy: The research strategy that adds it (None: every research program has it).
        kind: See `StageKind`.
        part_of: For a `call`, the stage whose module makes it.
        tuning: How `optimize` tunes it alone (None: only inside its program).
        unscored: Why no research metric sees its output (it cannot be tuned with the research program).
        loop_step: Its step name inside the gathering loop (`plan`, `assess`, `search`), as the standalone
            `Gatherer` records it in failures and search errors.
        max_output_tokens: The output tokens one of its predictor calls may write (a reply reaching it
            was truncated); `output_limits` overrides it.
        reserve: LM calls its calls leave unspent under `max_lm_calls` in a research run (`RunContext.call`):
            research stages leave one for the writer, the stages that finish a run spend to the limit. (The
            standalone `Gatherer` has no writer: its loop spends to the limit.)
    """

    name: str
    summary: str
    signatures: tuple[type[dspy.Signature], ...] = ()
    module: str | None = None
    offline: str | None = None
    research_attr: str | None = None
    gather_attr: str | None = None
    strategy: str | None = None
    kind: StageKind = "stage"
    part_of: str | None = None
    tuning: Tuning | None = None
    unscored: str | None = None
    loop_step: str | None = None
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    reserve: int = 1

    def attr(self, program: str) -> str | None:
        """The attribute holding the stage's module in `program` (`research` or `gather`)."""
        return {"research": self.research_attr, "gather": self.gather_attr}[program]


_STAGES = "deepresearch.programs.stages."
_OFFLINE = _STAGES + "offline."
_GATHER = "deepresearch.programs.gather."
_WRITING = "citation support of what it wrote"


@dataclass(frozen=True)
class Stages:
    """Every stage, one field each, in the order a run meets them; iterate, or index by name or attribute."""

    clarify: StageSpec = StageSpec(
        "clarify",
        "asks the questions a run should settle before research",
        (ClarifyQuestion,),
        _STAGES + "clarifier.Clarifier",
        _OFFLINE + "OfflineClarifier",
        research_attr="clarifier",
        unscored="clarifying questions are asked before a run, by the caller",
        max_output_tokens=512,
    )
    plan: StageSpec = StageSpec(
        "plan",
        "plans the search tasks of a question",
        (PlanQueries,),
        _STAGES + "planner.Planner",
        _OFFLINE + "OfflinePlanner",
        research_attr="planner",
        tuning=Tuning("planner", "frozen", "the ranks of the relevant papers its queries retrieve"),
        max_output_tokens=1024,
    )
    assess: StageSpec = StageSpec(
        "assess",
        "judges which retrieved papers are relevant to a task",
        (AssessRelevance,),
        _STAGES + "assessor.Assessor",
        _OFFLINE + "OfflineAssessor",
        research_attr="assessor",
        tuning=Tuning("assessor", "frozen", "kept vs relevant papers of recorded candidates"),
        max_output_tokens=1536,
    )
    extract: StageSpec = StageSpec(
        "extract",
        "pulls cited learnings out of the kept passages",
        (ExtractLearnings,),
        _STAGES + "extractor.Extractor",
        _OFFLINE + "OfflineExtractor",
        research_attr="extractor",
        tuning=Tuning("extract", "recorded", "learnings extracted from the passages"),
        max_output_tokens=2048,
    )
    merge: StageSpec = StageSpec(
        "merge",
        "merges a node's learnings into its summary",
        (MergeLearnings,),
        _STAGES + "merger.Merger",
        _OFFLINE + "OfflineMerger",
        research_attr="merger",
        tuning=Tuning("merge", "recorded", "the node summary merged from its learnings"),
        max_output_tokens=1536,
    )
    enrich: StageSpec = StageSpec(
        "enrich",
        "proposes follow-up tasks for a node's gaps",
        (FindGaps,),
        _STAGES + "enricher.Enricher",
        _OFFLINE + "OfflineEnricher",
        research_attr="enricher",
        tuning=Tuning("enrich", "recorded", "follow-up tasks proposed for a node's gaps"),
        max_output_tokens=1024,
    )
    enrich_write: StageSpec = StageSpec(
        "enrich_write",
        "writes the enrichment paragraph of a hero task",
        (WriteEnrichment,),
        _STAGES + "enrichment_writer.EnrichmentWriter",
        _OFFLINE + "OfflineEnrichmentWriter",
        research_attr="enrichment_writer",
        strategy="hero",
        tuning=Tuning("enrich_write", "recorded", "the enrichment paragraph written from follow-up learnings (hero)"),
        max_output_tokens=1024,
    )
    breadth: StageSpec = StageSpec(
        "breadth",
        "picks the subqueries of a planning node (parallel's breadth policy)",
        (PlanBreadth,),
        _STAGES + "policies.BreadthPolicy",
        _OFFLINE + "OfflineBreadthPolicy",
        research_attr="breadth_policy",
        strategy="parallel",
        max_output_tokens=1024,
    )
    deepen: StageSpec = StageSpec(
        "deepen",
        "decides whether a node goes one level deeper (parallel's depth policy)",
        (DecideDeepen,),
        _STAGES + "policies.DepthPolicy",
        _OFFLINE + "OfflineDepthPolicy",
        research_attr="depth_policy",
        strategy="parallel",
        max_output_tokens=512,
    )
    orchestrate: StageSpec = StageSpec(
        "orchestrate",
        "scores a running node's progress to prune its subtree (parallel's progress scorer)",
        (EvaluateProgress,),
        _STAGES + "policies.ProgressScorer",
        _OFFLINE + "OfflineProgressScorer",
        research_attr="progress_scorer",
        strategy="parallel",
        max_output_tokens=512,
    )
    gather_plan: StageSpec = StageSpec(
        "gather_plan",
        "plans a gathering round's searches",
        (PlanSubqueries,),
        _GATHER + "stages.SubqueryPlanner",
        _GATHER + "offline.OfflineSubqueryPlanner",
        research_attr="subquery_planner",
        gather_attr="planner",
        strategy="gather",
        loop_step="plan",
        max_output_tokens=1536,
    )
    gather_assess: StageSpec = StageSpec(
        "gather_assess",
        "labels a search's candidate papers",
        (LabelCandidates,),
        _GATHER + "stages.CandidateAssessor",
        _GATHER + "offline.OfflineCandidateAssessor",
        research_attr="candidate_assessor",
        gather_attr="assessor",
        strategy="gather",
        loop_step="assess",
        tuning=Tuning("assessor", "frozen", "kept vs ground-truth papers of a gathering run's candidates", "gather"),
        max_output_tokens=2048,
    )
    gather_recheck: StageSpec = StageSpec(
        "gather_recheck",
        "takes a second look at an uncertain candidate (inside gather_assess)",
        (RecheckCandidate,),
        kind="call",
        part_of="gather_assess",
        strategy="gather",
        max_output_tokens=512,
    )
    search: StageSpec = StageSpec("search", "searches the corpus (no LM)", kind="step", loop_step="search", reserve=0)
    write: StageSpec = StageSpec(
        "write",
        "writes the cited report from the findings",
        (WriteReport,),
        _STAGES + "writer.Writer",
        _OFFLINE + "OfflineWriter",
        research_attr="writer",
        tuning=Tuning("write", "recorded", "the report written from the findings"),
        max_output_tokens=4096,
        reserve=0,
    )
    verify: StageSpec = StageSpec(
        "verify",
        "checks every claim of the draft against its cited passages",
        (VerifyClaims,),
        _STAGES + "verifier.Verifier",
        _STAGES + "verifier.LexicalVerifier",
        research_attr="verifier",
        reserve=0,
    )
    answer: StageSpec = StageSpec(
        "answer",
        "writes the short cited answer beside the report",
        (WriteAnswer,),
        _STAGES + "answerer.Answerer",
        _OFFLINE + "OfflineAnswerer",
        research_attr="answerer",
        kind="output",
        unscored="the short answer is written beside the report",
        max_output_tokens=512,
        reserve=0,
    )
    taxonomy: StageSpec = StageSpec(
        "taxonomy",
        "maps the relevant papers into a taxonomy beside the report",
        (BuildTaxonomy, MergeTaxonomies, PlacePapers, RepairJSON),
        "deepresearch.programs.taxonomy.builder.TaxonomyBuilder",
        "deepresearch.programs.taxonomy.offline.cluster_taxonomy",
        research_attr="taxonomist",
        kind="output",
        unscored="the taxonomy is built beside the report",
        max_output_tokens=4096,
        reserve=0,
    )
    direct_query: StageSpec = StageSpec(
        "direct_query",
        "writes one search query for a question (the gathering baseline)",
        (WriteSearchQuery,),
        _GATHER + "baselines.DirectQuery",
        kind="baseline",
        max_output_tokens=256,
        reserve=0,
    )

    def __iter__(self) -> Iterator[StageSpec]:
        return (getattr(self, f.name) for f in dataclasses.fields(self))

    def __getitem__(self, key: str) -> StageSpec:
        """The stage named `key`, or whose module the research program holds under the attribute `key`
        (`Gatherer`'s attributes `planner` and `assessor` name research stages too: see `resolve`).

        Raises:
            KeyError: for no stage of that name or attribute (the message lists the names).
        """
        for spec in self:
            if key in (spec.name, spec.research_attr):
                return spec
        raise KeyError(f"unknown stage {key!r}; choose one of: {', '.join(self.names())}")

    def __contains__(self, key: object) -> bool:
        return any(key in (s.name, s.research_attr) for s in self)

    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self)

    def calls_of(self, name: str) -> tuple[StageSpec, ...]:
        """The stages accounted apart that stage `name`'s module calls (`gather_assess`: `gather_recheck`)."""
        return tuple(s for s in self if s.part_of == name)

    def research(self, strategy: str | None = None) -> dict[str, str]:
        """Stage name -> attribute of the research program's modules: the shared and output stages, and those
        of `strategy` (None: of every strategy)."""
        return {
            s.name: s.research_attr
            for s in sorted(self, key=_research_order)
            if s.research_attr and (s.strategy is None or strategy is None or s.strategy == strategy)
        }

    def shared(self) -> dict[str, str]:
        """The stages every research program calls (name -> attribute), outputs aside."""
        return {s.name: s.research_attr for s in self if s.research_attr and s.strategy is None and s.kind == "stage"}

    def outputs(self) -> dict[str, str]:
        """The deliverable stages beside the report (name -> attribute)."""
        return {s.name: s.research_attr for s in self if s.research_attr and s.kind == "output"}

    def of_strategy(self, strategy: str) -> dict[str, str]:
        """The research stages `strategy` adds (name -> attribute)."""
        return {s.name: s.research_attr for s in self if s.research_attr and s.strategy == strategy}

    def gather(self) -> dict[str, str]:
        """The gathering program's stages (name -> attribute of `Gatherer`)."""
        return {s.name: s.gather_attr for s in self if s.gather_attr}

    def unscored(self) -> dict[str, str]:
        """Research stages no research metric sees -> why."""
        return {s.name: s.unscored for s in self if s.unscored}

    def recorded(self) -> dict[str, str]:
        """The stages `optimize --from-runs` tunes alone -> what their metrics read."""
        return {s.name: s.tuning.reads for s in self if s.tuning and s.tuning.inputs == "recorded"}

    def frozen_target(self, program: str, stage: str) -> str | None:
        """The metric target of `stage` tuned alone on frozen inputs in `program`, None where it has none."""
        tuning = self[stage].tuning if stage in self else None
        is_frozen = tuning is not None and tuning.inputs == "frozen" and tuning.program == program
        return tuning.target if is_frozen else None

    def max_output_tokens(self) -> dict[str, int]:
        """Stage name -> the output tokens one of its predictor calls may write (every LM stage)."""
        return {s.name: s.max_output_tokens for s in self if s.signatures}


def _research_order(spec: StageSpec) -> int:
    # the order of the program's stage table (and of its saved state): shared, outputs, the strategy's own
    return {"stage": 0, "output": 1}.get(spec.kind, 2) + (2 if spec.strategy else 0)


STAGES = Stages()

__all__ = ["DEFAULT_MAX_OUTPUT_TOKENS", "STAGES", "StageKind", "StageSpec", "Stages", "Tuning"]
