"""Frozen pools: one stage's recorded inputs, replayed to tune it alone.

A run with `--out` records every stage call in `stages.jsonl` (`deepresearch.programs.runtime.stage_log`).
`stage_pool(DIR, stage)` turns the successful calls of one stage, in every run folder under DIR, into
`dspy.Example`s whose inputs are exactly what the stage was given (typed again from its `aforward`
annotations) and whose `passages` map each source id of the run to its text, so the writing metrics can
check every citation without retrieval and without running the stages before it.
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy

from deepresearch.optimize.trainsets import TrainsetError
from deepresearch.programs.runtime.stage_log import STAGE_LOG, find_logs, read_log, typed_inputs
from deepresearch.programs.stages.registry import STAGES

# The stages a recorded run can tune alone, with what their metrics read. The assessor has its own frozen
# candidates (--candidates), the planner needs retrieval (PlanAndSearch), the policies steer a live tree.
POOL_STAGES: dict[str, str] = STAGES.recorded()


_MATERIAL = ("sources", "learnings", "findings")  # the inputs a writing stage works from


def stage_pool(folder: str | Path, stage: str, module: dspy.Module, limit: int | None = None) -> list[dspy.Example]:
    """Examples of `stage` from the runs recorded under `folder`, each input set once.

    Args:
        folder: A run folder (`deepresearch run ... --out DIR`) or a folder holding several.
        stage: A stage name of `POOL_STAGES`.
        module: The stage's module (its `aforward` annotations type the recorded inputs).
        limit: Keep at most this many examples (in the order the runs recorded them).

    Raises:
        TrainsetError: for a folder with no stage log, or no recorded call of `stage` (one line, what to do).
    """
    if stage not in POOL_STAGES:
        raise TrainsetError(f"--from-runs tunes one of: {', '.join(POOL_STAGES)}; got --stage {stage}")
    logs = find_logs(folder)
    if not logs:
        raise TrainsetError(
            f"no {STAGE_LOG} under {folder}; record runs first with `deepresearch run QUESTION "
            f"--out {Path(folder) / 'q1'} --lm ...`"
        )
    examples, seen = [], set()
    for log in logs:
        calls, passages = read_log(log)
        texts = {sid: f"{p['title']}\n{p['text']}" if p.get("title") else p["text"] for sid, p in passages.items()}
        for call in calls:
            if call.get("stage") != stage or not call.get("ok"):
                continue
            key = json.dumps(call["inputs"], sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            if any(call["inputs"].get(name) == [] for name in _MATERIAL):
                continue  # nothing to work on: the stage answered without its LM, so there is nothing to tune
            try:
                inputs = typed_inputs(module, call["inputs"])
            except ValueError as err:
                raise TrainsetError(
                    f"{log}: a recorded {stage} call does not fit the stage "
                    f"({str(err).splitlines()[0]}); record the runs again"
                ) from None
            examples.append(
                dspy.Example(
                    **inputs, passages=texts, recorded=call.get("outputs") or {}, run=str(log.parent)
                ).with_inputs(*inputs)
            )
    if not examples:
        raise TrainsetError(
            f"the runs under {folder} recorded no successful {stage} call; record runs whose "
            f"preset uses it (enrich_write: --preset hero)"
        )
    return examples[:limit] if limit else examples
