"""The stage registry: every stage of the research and gathering programs, named once.

Each stage's module (`programs/stages/*.py`) holds its contract, a `StageSpec`, beside its LM module and
offline twin; this module collects them into `STAGES`, and the programs build their stages by walking it
(`StageSpec.build`). A stage's `name` is its on-disk spelling: the key of `lms=` and `--stage-lm`, the
`--stage` of `optimize`, the rows of the usage table, the `stage` of events, failures and `stages.jsonl`,
and the output limits. Code refers to a stage as `STAGES.plan.name` (never the string `"plan"`).

Example:
    >>> from deepresearch.programs.stages.registry import STAGES
    >>> STAGES.orchestrate.research_attr, STAGES["progress_scorer"].name
    ('progress_scorer', 'orchestrate')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from deepresearch.programs.gather import baselines
from deepresearch.programs.stages import (
    answerer,
    assessor,
    clarifier,
    enricher,
    enrichment_writer,
    extractor,
    gathering,
    merger,
    planner,
    policies,
    verifier,
    writer,
)
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.programs.taxonomy import builder as taxonomy


@dataclass(frozen=True)
class Stages:
    """Every stage, one field each, in the order a run meets them; iterate, or index by name or attribute."""

    clarify: StageSpec = clarifier.SPEC
    plan: StageSpec = planner.SPEC
    assess: StageSpec = assessor.SPEC
    extract: StageSpec = extractor.SPEC
    merge: StageSpec = merger.SPEC
    enrich: StageSpec = enricher.SPEC
    enrich_write: StageSpec = enrichment_writer.SPEC
    breadth: StageSpec = policies.BREADTH
    deepen: StageSpec = policies.DEEPEN
    orchestrate: StageSpec = policies.ORCHESTRATE
    gather_plan: StageSpec = gathering.GATHER_PLAN
    gather_assess: StageSpec = gathering.GATHER_ASSESS
    gather_recheck: StageSpec = gathering.GATHER_RECHECK
    search: StageSpec = StageSpec("search", "searches the corpus (no LM)", kind="step", loop_step="search", reserve=0)
    write: StageSpec = writer.SPEC
    verify: StageSpec = verifier.SPEC
    answer: StageSpec = answerer.SPEC
    taxonomy: StageSpec = taxonomy.SPEC
    direct_query: StageSpec = baselines.SPEC

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # each field holds the stage of its own name
            if getattr(self, f.name).name != f.name:
                raise ValueError(f"the registry's field {f.name!r} holds stage {getattr(self, f.name).name!r}")

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
        if tuning is not None and tuning.inputs == "frozen" and tuning.program == program:
            return tuning.target
        return None

    def max_output_tokens(self) -> dict[str, int]:
        """Stage name -> the output tokens one of its predictor calls may write (every LM stage)."""
        return {s.name: s.max_output_tokens for s in self if s.signatures}


def _research_order(spec: StageSpec) -> int:
    # the order of the program's stage table (and of its saved state): shared, outputs, the strategy's own
    return {"stage": 0, "output": 1}.get(spec.kind, 2) + (2 if spec.strategy else 0)


STAGES = Stages()
