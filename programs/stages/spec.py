"""What a stage is: its contract (`StageSpec`), held by the module that implements the stage.

Each stage module under `programs/stages/` ends with a `SPEC`: the stage's name, the signatures its
LM module calls, the LM module and its offline twin (classes), where the programs hold it, how it is
tuned and what it may spend. The registry (`registry.py`) collects the specs into `STAGES`, and the
programs build their stages by walking it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import dspy

if TYPE_CHECKING:
    from deepresearch.programs.config import ResearchConfig
    from deepresearch.programs.gather.loop import GatherConfig
    from deepresearch.retrievers.types import Retriever

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
        module: The class of its LM module, None for a step.
        offline: The class of its offline twin (a subclass of `module` that answers without an LM, under
            the same predictor names), None where the stage has none.
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
    module: type | None = None
    offline: type | None = None
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

    def build(
        self, config: ResearchConfig | GatherConfig, retriever: Retriever | None, *, offline: bool = False
    ) -> Any:
        """The stage's module for a run of `config` (a research run's, or the standalone `Gatherer`'s) over
        `retriever`: its offline twin when `offline`.

        Raises:
            ValueError: for a step without a module, or `offline` for a stage without a twin.
        """
        cls = self.offline if offline else self.module
        if cls is None:
            raise ValueError(f"stage {self.name!r} has no {'offline twin' if offline else 'module'}")
        return cast(Any, cls).from_config(config, retriever)  # every stage module has this classmethod

    @property
    def tuning_target(self) -> str:
        """The metric target of the stage tuned alone (`tuning.target`).

        Raises:
            ValueError: for a stage tuned only inside its program (no `tuning`).
        """
        if self.tuning is None:
            raise ValueError(f"stage {self.name!r} is tuned only inside its program: it has no tuning target")
        return self.tuning.target

    @property
    def research_attr_name(self) -> str:
        """The attribute of `DeepResearch` holding the stage's module (`research_attr`).

        Raises:
            ValueError: for a stage that is not part of the research program.
        """
        if self.research_attr is None:
            raise ValueError(f"stage {self.name!r} is not part of the research program")
        return self.research_attr

    @property
    def loop_step_name(self) -> str:
        """The stage's step name inside the gathering loop (`loop_step`).

        Raises:
            ValueError: for a stage the gathering loop does not run.
        """
        if self.loop_step is None:
            raise ValueError(f"stage {self.name!r} is not a step of the gathering loop")
        return self.loop_step
