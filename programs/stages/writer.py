import logging
import re

import dspy

from deepresearch.programs.citing.entailment import LIST_MARK, citations_in, plain_sentence
from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.passages import split_sentences
from deepresearch.signatures.types import Finding
from deepresearch.signatures.write import WriteReport

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")


def drop_repeated_lines(markdown: str) -> tuple[str, int]:
    """`markdown` with each line that repeats the line before it (blank lines between do not count) left out,
    and how many were. A small model that loops writes one sentence again and again until the token cap, often
    as a numbered list; lines are compared without their list mark, case or surrounding space. Headings and
    blank lines always stay, and a paragraph that two sections share is not touched."""
    kept, dropped, previous = [], 0, None
    for line in markdown.splitlines():
        key = LIST_MARK.sub("", line).strip().lower()
        if key and not key.startswith("#"):
            if key == previous:
                dropped += 1
                continue
            previous = key
        elif key:
            previous = None  # a heading starts a new section
        kept.append(line)
    return "\n".join(kept), dropped


def drop_repeated_sentences(markdown: str, min_chars: int = 25) -> tuple[str, int]:
    """`markdown` with each prose sentence that repeats an earlier one of its section left out, and how many
    were. Seen with the 0.5B model: a paragraph that ends by saying its second sentence again, citation and
    all. Sentences are compared by their words (no citations, emphasis, case or punctuation), and a repeat
    that cites a source the earlier one did not stays, so no citation is lost. Short sentences (answers
    such as "Yes.") and headings, tables, quotes and code blocks are not touched. A heading starts a new
    section."""
    kept, dropped, fenced = [], 0, False
    seen: dict[str, set[str]] = {}  # a sentence's words -> the citations it has carried so far
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        if fenced or stripped.startswith("```") or not stripped or stripped.startswith(("|", ">")):
            kept.append(line)
            continue
        if stripped.startswith("#"):
            seen = {}
            kept.append(line)
            continue
        mark = LIST_MARK.match(line)
        prefix = mark.group(0) if mark else ""
        parts = split_sentences(line[len(prefix) :])
        fresh = []
        for part in parts:
            key = " ".join(_WORD.findall(plain_sentence(part).casefold()))
            cites = set(citations_in(part))
            if len(key) >= min_chars and key in seen and cites <= seen[key]:
                dropped += 1
                continue
            seen.setdefault(key, set()).update(cites)
            fresh.append(part)
        if len(fresh) == len(parts):
            kept.append(line)
        elif fresh:  # a line wholly repeated goes
            kept.append(prefix + " ".join(fresh))
    return "\n".join(kept), dropped


class Writer(Stage):
    """Question + findings -> Markdown report citing source ids (renumbered later by the program).

    A line the draft repeats back to back, and a sentence its section already said, are kept once
    (`drop_repeated_lines`, `drop_repeated_sentences`; the count of both is `repeated`)."""

    def __init__(self):
        super().__init__()
        self.write_report = dspy.Predict(WriteReport)

    async def aforward(self, question: str, findings: list[Finding], attempt: int = 0) -> dspy.Prediction:
        # a second attempt (the first draft cited nothing) samples anew: cached and greedy, it would repeat the first
        config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
        out = await call_predictor(
            STAGES.write.name, self.write_report, question=question, findings=findings, config=config
        )
        report, lines = drop_repeated_lines(out.report.strip())
        report, sentences = drop_repeated_sentences(report)
        repeated = lines + sentences
        if repeated:
            logger.warning("writer: %d lines or sentences the draft repeated left out", repeated)
        return dspy.Prediction(report=report, repeated=repeated)
