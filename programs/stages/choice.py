"""Which stages of a program answer with their offline twin: a choice a compile can make per stage, and that a
saved program keeps.

`DeepResearch` and `Gatherer` take this mixin. `with_twins(["plan"])` returns a copy whose `plan` stage is its
offline twin (the LM answers the others); the choice is saved in the program's state under `offline_stages`,
so plain `program.load(path)` applies it again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dspy

from deepresearch.programs.runtime.executor import one_run_per_example
from deepresearch.programs.stages.registry import STAGES

logger = logging.getLogger(__name__)

TWINS_KEY = "offline_stages"  # in a saved program's state: the stages its offline twins answer

if TYPE_CHECKING:  # the type checker reads the mixin as the dspy.Module it is combined with (its super())
    from dspy import Module as _Program

    from deepresearch.retrievers.types import Retriever
else:
    _Program = object


class TwinChoice(_Program):
    """Per-stage choice between a stage's LM module and its offline twin, for a program with a stage table.

    The program provides `stage_table()` (stage name -> attribute), `config`, `_retriever` (a `Shared`
    retriever) and `is_offline`, and `_NOT_SAVED`: the message for a file that is no saved program of its kind.
    """

    _NOT_SAVED = "{path} is not a saved program ({error})"  # `error`: the exception's type and text

    @property
    def retriever(self) -> Retriever:
        return self._retriever.obj

    def stage_table(self) -> dict[str, str]:
        raise NotImplementedError

    def twin_stages(self) -> tuple[str, ...]:
        """The stages whose offline twin answers, in the program's order (every stage of an offline program)."""
        table = self.stage_table()
        return tuple(name for name, attr in table.items() if getattr(getattr(self, attr), "is_offline", False))

    def with_twins(self, stages: Iterable[str]) -> Any:
        """A copy of this program in which `stages` answer with their offline twins (demos are kept).

        Raises:
            ValueError: for a name that is not a stage of this program with a twin (the message lists them).
        """
        copy = self.deepcopy()
        copy._use_twins(stages)
        return copy

    def _use_twins(self, stages: Iterable[str]) -> None:
        table = self.stage_table()
        choices = [name for name in table if STAGES[name].offline is not None]
        for name in stages:
            if name not in choices:
                raise ValueError(f"no offline twin for stage {name!r} here; choose from: {', '.join(choices)}")
            module = getattr(self, table[name])
            if getattr(module, "is_offline", False):
                continue
            twin = STAGES[name].build(self.config, self.retriever, offline=True)
            twin.load_state(module.dump_state())  # the demos stay with the program, for a later choice
            setattr(self, table[name], twin)

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        state = super().dump_state(json_mode=json_mode)
        twins = self.twin_stages()
        if twins and not self.is_offline:  # a compiled choice; an offline program answers with twins anyway
            state[TWINS_KEY] = list(twins)
        return state

    def load_state(self, state: dict[str, Any], **options: Any) -> Any:
        state = dict(state)
        twins = state.pop(TWINS_KEY, None) or ()
        super().load_state(state, **options)
        if twins:
            logger.info("the saved program answers %s with offline twins", ", ".join(twins))
            self._use_twins(twins)
        return self

    def load(self, path: str | Path, **options: Any) -> Any:
        """Loads a program saved with `save` into this one and returns it.

        Raises:
            ValueError: one line naming the file, when it is no saved program of this kind (wrong shape, not JSON).
        """
        try:
            super().load(path, **options)
        except (KeyError, TypeError, AttributeError, IndexError, UnicodeDecodeError) as err:
            raise ValueError(self._NOT_SAVED.format(path=path, error=f"{type(err).__name__} {err}")) from None
        except ValueError as err:  # not JSON, or a state `load_state` refuses
            raise ValueError(f"{path}: {str(err).splitlines()[0] if str(err) else 'not a saved program'}") from None
        return self


@one_run_per_example()
def choose_twins(
    program: Any, trainset: list[dspy.Example], metric: Any, *, num_threads: int = 1
) -> tuple[Any, dict[str, float]]:
    """For each stage in turn, the LM module (with its demos) or its offline twin, whichever scores higher end
    to end on `trainset`; the program returned is never below the offline program (every twin) there.

    Greedy, in the program's stage order: a stage's twin is kept when the program with it scores higher than
    without it. Each try is one `dspy.Evaluate` of `trainset`: a program of n stages with twins costs n + 2.

    Returns:
        The chosen program, and the training score of each program tried (`lm`, `offline`, `+twin:STAGE`).
    """
    evaluate = dspy.Evaluate(devset=trainset, metric=metric, num_threads=num_threads, max_errors=len(trainset) + 1)
    scores = {"lm": evaluate(program).score, "offline": evaluate(program.offline()).score}
    best, best_score = program, scores["lm"]
    table = program.stage_table()
    for name in table:
        if STAGES[name].offline is None or STAGES[name].unscored or name in best.twin_stages():
            continue  # no twin, or a stage no run of the metric calls (clarify, answer, taxonomy)
        candidate = best.with_twins([*best.twin_stages(), name])
        scores[f"+twin:{name}"] = score = evaluate(candidate).score
        if score > best_score:
            best, best_score = candidate, score
    if best_score < scores["offline"]:  # never below the floor on the data it was chosen on
        best = program.with_twins([n for n in table if STAGES[n].offline is not None])
    return best, scores
