"""What an optimization run tunes: a program (or one stage of it), its examples, and how results go back.

Stage-level targets tune one stage on cheap, frozen inputs and then install the tuned state into the
full research program, so the saved file always loads into `DeepResearch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import dspy

from deepresearch.programs.artifacts import as_source
from deepresearch.programs.citing.citations import source_id_for
from deepresearch.programs.gather.loop import GATHER_STAGES
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.research.strategy import SHARED_STAGES
from deepresearch.programs.runtime.stage import Shared, Stage
from deepresearch.programs.stages.assessor import Assessor
from deepresearch.programs.stages.gathering import CandidateAssessor
from deepresearch.programs.stages.planner import OfflinePlanner, Planner
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.types import Hit, Retriever, SyncSearchMixin, search_async
from deepresearch.signatures.gather import PaperPreview
from deepresearch.signatures.types import Task


class PlanAndSearch(Stage):
    """The planner with retrieval: plans tasks for a question and records each paper's best rank.

    Lets the planner be tuned against Ret.R and Avg.Distance without extraction or writing. Ranks are
    recorded to `depth` (Avg.Distance reads them to 100); `read_k` is how many hits of each query a research
    run reads (`hits_per_query`), the cut-off of Ret.R.
    """

    def __init__(self, retriever: Retriever, breadth: int = 3, depth: int = 100, read_k: int = 10):
        super().__init__()
        self.planner = Planner()
        self._retriever = Shared(retriever)
        self.breadth, self.depth, self.read_k = breadth, max(depth, read_k), read_k

    async def aforward(self, question: str) -> dspy.Prediction:
        tasks = (await self.planner.acall(question=question, known=[], max_tasks=self.breadth)).tasks
        best_rank: dict[str, int] = {}
        for task in tasks:
            for hit in await search_async(self._retriever.obj, task.query, self.depth):
                best_rank[hit.doc.doc_id] = min(best_rank.get(hit.doc.doc_id, hit.rank), hit.rank)
        return dspy.Prediction(tasks=tasks, best_rank=best_rank, read_k=self.read_k)


def freeze_all_but(program: dspy.Module, stage: str, stages: dict[str, str] = SHARED_STAGES) -> None:
    """Hides every stage but `stage` from optimizers (DSPy skips submodules marked compiled).

    `stages` maps stage names (the vocabulary of `--stage`) to the attributes holding their modules.
    """
    if stage not in stages:
        raise ValueError(f"unknown stage {stage!r}; choose one of: all, {', '.join(stages)}")
    freeze(program, {name: attr for name, attr in stages.items() if name != stage})
    getattr(program, stages[stage])._compiled = False


def freeze(program: dspy.Module, stages: dict[str, str]) -> None:
    """Hides the modules of `stages` (stage name -> attribute) from optimizers."""
    for attr in stages.values():
        getattr(program, attr)._compiled = True


def idle_stages(program: DeepResearch) -> dict[str, str]:
    """The stages a research run with the program's config never calls: `clarify` (asked before a run, by
    the caller), and `answer` and `taxonomy` unless the config asks for them. Tuning `all` leaves them be:
    no trace of the run could show an optimizer what they do."""
    table = program.stage_table()
    idle = (
        {STAGES.clarify.name}
        | ({STAGES.answer.name} if not program.config.answer else set())
        | ({STAGES.taxonomy.name} if not program.config.taxonomy else set())
    )
    return {name: table[name] for name in idle if name in table}


def install(stage_program: dspy.Module, full: dspy.Module, attr: str) -> dspy.Module:
    """Copies a tuned stage's state into the full program's module `attr` (same predictor paths under it)."""
    module = stage_program.planner if isinstance(stage_program, PlanAndSearch) else stage_program
    getattr(full, attr).load_state(module.dump_state())
    return full


async def record_candidates(program: DeepResearch, examples: list[dspy.Example]) -> list[dspy.Example]:
    """The assessor's frozen candidates from retrieval alone (no LM call): for each example, the sources a
    search of its question returns, as a research node would show them, and which of them the benchmark marks
    relevant. Each recorded example replays one assessment: its task, its sources, the relevant source ids.
    """
    recorded = []
    for ex in examples:
        hits = await search_async(program.retriever, ex.question, program.config.hits_per_query)
        sources = [as_source(h, source_id_for(h.doc.doc_id), program.config.passage_chars) for h in hits]
        relevant = set(ex.relevant_ids)
        recorded.append(
            dspy.Example(
                task=Task(query=ex.question, goal=ex.question),
                sources=sources,
                relevant_ids=[s.source_id for s, h in zip(sources, hits) if h.doc.doc_id in relevant],
                scores=[h.score for h in hits],  # the offline rule reads them; the LM is not shown them
            ).with_inputs("task", "sources", "scores")
        )
    return recorded


@dataclass
class Target:
    """A program to tune and the full program its state ends up in (the same object, or its parent)."""

    program: dspy.Module
    full: dspy.Module
    stage: str  # a stage name, or `all`
    stages: dict[str, str] = field(default_factory=lambda: dict(SHARED_STAGES))  # stage name -> attribute

    def finish(self) -> dspy.Module:
        if self.program is self.full:
            for attr in self.stages.values():
                getattr(self.full, attr)._compiled = False
            return self.full
        return install(self.program, self.full, self.stages[self.stage])


def research_target(full: DeepResearch, stage: str, kind: str) -> Target:
    """`kind` is `program` (tune the whole program, or one stage inside it), `planner` or `assessor`."""
    if kind == STAGES.plan.tuning_target:
        planner = PlanAndSearch(full.retriever, breadth=full.config.breadth, read_k=full.config.hits_per_query)
        return Target(planner, full, STAGES.plan.name)
    if kind == STAGES.assess.tuning_target:
        return Target(Assessor(keep_uncertain=full.config.keep_uncertain), full, STAGES.assess.name)
    stages = full.stage_table()  # the shared, output and strategy stages: every module of the program
    if stage == "all":
        freeze(full, idle_stages(full))
    else:
        freeze_all_but(full, stage, stages)
    return Target(full, full, stage, stages)


class RecordedOnly(SyncSearchMixin):
    """The retriever of a program tuned on recorded stage inputs (`--from-runs`): it holds no documents,
    and a search through it is a mistake worth an error, not an empty result."""

    def search(self, query: str, k: int = 10, **filters) -> list[Hit]:
        raise RuntimeError("this program was built to tune one stage on recorded inputs; it cannot search")


def stage_target(full: DeepResearch, stage: str) -> Target:
    """One stage of the research program alone, tuned on recorded inputs; its state goes back into `full`."""
    attr = full.stage_table()[stage]
    return Target(getattr(full, attr).deepcopy(), full, stage, {stage: attr})


def with_gold_labels(examples: list[dspy.Example], assessor: CandidateAssessor | Assessor) -> list[dspy.Example]:
    """Assessor examples that also carry what its LM call reads, as `assessor` shows it, and the label the
    benchmark gives each paper: relevant for a ground-truth paper, else irrelevant.

    The gathering assessor's examples (question, subquery, hits, gt_ids) get `candidates` and `relevance`; the
    research assessor's (task, sources, relevant_ids, sentences) get `papers` and `relevance`. An example
    holding every field of a predictor can be shown to it as a demonstration (`deepresearch.optimize.compile`):
    the optimizer may then pick demos with the right labels, not only the model's own answers that happened to
    score well.
    """
    labelled = []
    for ex in examples:
        shown: Sequence[PaperPreview]
        if isinstance(assessor, Assessor):  # the research assessor (`research`)
            field, sources, gold = "papers", list(ex.sources), set(ex.relevant_ids)
            shown = assessor.shown(ex.task, sources, ex.get("sentences", 0))
            wanted = [s.source_id in gold for s in sources]
        else:
            field, hits, gold = "candidates", list(ex.hits), set(ex.gt_ids)
            shown = assessor.shown(ex.question, ex.subquery, hits)
            wanted = [h.doc.doc_id in gold for h in hits]
        relevance = {p.paper_id: "relevant" if w else "irrelevant" for p, w in zip(shown, wanted)}
        labelled.append(ex.copy(**{field: shown, "relevance": relevance}))
    return labelled


# the planner thinks before it plans (chain of thought): a reference plan's reasoning says how it was made
REFERENCE_REASONING = (
    "First search the key terms of the question as they stand; then add, two at a time, terms that the "
    "papers found by that search share, so each search reaches other papers on the same point."
)


async def with_reference_plans(examples: list[dspy.Example], target: PlanAndSearch) -> list[dspy.Example]:
    """Planner examples that also carry a reference plan for their question: the offline planner's (the
    question's key terms, then those terms with two feedback terms each), under the target's breadth.

    The offline plan is what the planner must beat on Ret.R, and it reaches most relevant papers. Carried as
    `tasks` (with `known` empty, `max_tasks` the breadth and a `reasoning` saying how it was made), it lets
    the optimizers show the model keyword queries that work as demonstrations (`deepresearch.optimize.compile`),
    beside its own plans that happened to score well. Demonstrations come from the training split only; a dev
    example's plan is never read.
    """
    teacher = OfflinePlanner(target._retriever.obj)
    labelled = []
    for ex in examples:
        plan = await teacher.acall(question=ex.question, known=[], max_tasks=target.breadth)
        labelled.append(
            ex.copy(known=[], max_tasks=target.breadth, reasoning=REFERENCE_REASONING, tasks=list(plan.tasks))
        )
    return labelled


def gather_target(full: dspy.Module, stage: str, kind: str) -> Target:
    """The gathering loop, or its assessor alone on frozen candidates (`kind == "assessor"`)."""
    if kind == STAGES.gather_assess.tuning_target:
        assessor = CandidateAssessor(second_look=full.config.second_look, preview_chars=full.config.preview_chars)
        return Target(assessor, full, STAGES.gather_assess.name, GATHER_STAGES)
    if stage != "all":
        freeze_all_but(full, stage, GATHER_STAGES)
    return Target(full, full, stage, GATHER_STAGES)
