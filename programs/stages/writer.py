import logging
import re

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.types import Finding
from deepresearch.signatures.write import WriteReport

logger = logging.getLogger(__name__)

_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def drop_repeated_lines(markdown: str) -> tuple[str, int]:
    """`markdown` with each line that repeats the line before it (blank lines between do not count) left out,
    and how many were. A small model that loops writes one sentence again and again until the token cap, often
    as a numbered list; lines are compared without their list mark, case or surrounding space. Headings and
    blank lines always stay, and a paragraph that two sections share is not touched."""
    kept, dropped, previous = [], 0, None
    for line in markdown.splitlines():
        key = _LIST_MARK.sub("", line).strip().lower()
        if key and not key.startswith("#"):
            if key == previous:
                dropped += 1
                continue
            previous = key
        elif key:
            previous = None  # a heading starts a new section
        kept.append(line)
    return "\n".join(kept), dropped


class Writer(Stage):
    """Question + findings -> Markdown report citing source ids (renumbered later by the program).

    A line the draft repeats back to back is kept once (`drop_repeated_lines`; the count is `repeated`)."""

    def __init__(self):
        super().__init__()
        self.write_report = dspy.Predict(WriteReport)

    async def aforward(self, question: str, findings: list[Finding], attempt: int = 0) -> dspy.Prediction:
        # a second attempt (the first draft cited nothing) samples anew: cached and greedy, it would repeat the first
        config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
        out = await call_predictor(
            STAGES.write.name, self.write_report, question=question, findings=findings, config=config
        )
        report, repeated = drop_repeated_lines(out.report.strip())
        if repeated:
            logger.warning("writer: %d repeated lines of the draft left out", repeated)
        return dspy.Prediction(report=report, repeated=repeated)
