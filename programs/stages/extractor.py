"""The `extract` stage: a task's kept passages -> cited learnings and follow-up questions."""

from __future__ import annotations

import logging
from typing import Any

import dspy

from deepresearch.programs.citing.entailment import FULL_SUPPORT, lexical_coverage
from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import strip_label
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.programs.stages.lexical import about, concepts, feedback_terms, key_terms, sentences
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.programs.stages.writer import drop_repeated_sentences, drop_reporting_frames
from deepresearch.signatures.extract import ExtractLearnings, NumberedPassage, PassageLearning
from deepresearch.signatures.types import Learning, Source, Task

logger = logging.getLogger(__name__)


def holding_passage(text: str, named: int, sources: list[Source]) -> int:
    """The number of the passage to cite for a learning whose model named passage `named`.

    A small model often copies one passage's sentences and names another (numbering its learnings 1, 2, 3
    down the list). When the named passage does not hold the learning's content words (the lexical rule's
    full support) and another passage does, that one is cited; otherwise the model's choice stands.
    """
    coverage = [lexical_coverage(f"{s.title}\n{s.text}", text) for s in sources]
    best = max(range(len(sources)), key=lambda i: coverage[i])
    if coverage[named - 1] < FULL_SUPPORT <= coverage[best]:
        return best + 1
    return named


def keep_cited(learnings: list[PassageLearning], sources: list[Source], limit: int) -> tuple[list[Learning], int, int]:
    """Cites each learning with the source of the passage that states it; drops learnings naming no shown passage.

    A learning's reporting frames and repeated sentences are left out (`drop_reporting_frames`,
    `drop_repeated_sentences`), and a learning whose text repeats an earlier one (same words, any case) is kept
    once. Returns the kept
    learnings (at most `limit`), the number of learnings that named a passage not shown, and the number cited
    with another passage than the one named (`holding_passage`).
    """
    kept, invented, moved, seen = [], 0, 0, set()
    for x in learnings:
        if not 1 <= x.passage <= len(sources):
            invented += 1
            continue
        text = strip_label(x.text.strip())  # a small model copies an abstract's "BACKGROUND" with its sentence
        # ...and frames what it read ("The passage states that X. The passage also mentions that X.")
        text = drop_repeated_sentences(drop_reporting_frames(text)[0])[0]
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            number = holding_passage(text, x.passage, sources)
            moved += number != x.passage
            kept.append(Learning(text=text, source_ids=[sources[number - 1].source_id]))
    return kept[:limit], invented, moved


class Extractor(Stage):
    """Task + passages -> cited learnings and follow-up questions.

    The LM reads the passages numbered 1, 2, ... and names, for each learning, the one passage that states
    it; the learning is cited here with that passage's source id, or with another passage's when only that
    one holds the learning's words (`moved`). A learning naming a number not shown is dropped and counted as
    `invented`.
    """

    def __init__(self, max_learnings: int = 5):
        super().__init__()
        self.extract_learnings = dspy.ChainOfThought(ExtractLearnings)
        self.max_learnings = max_learnings

    @classmethod
    def from_config(cls, config: Any, retriever: Any) -> Extractor:
        return cls(max_learnings=config.max_learnings)

    @staticmethod
    def numbered(sources: list[Source]) -> list[NumberedPassage]:
        """The passages as the LM reads them, numbered 1, 2, ... in their order."""
        return [NumberedPassage(number=n, title=s.title, text=s.text) for n, s in enumerate(sources, start=1)]

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        if not sources:
            return dspy.Prediction(learnings=[], follow_ups=[], invented=0, moved=0)
        out = await call_predictor(
            SPEC, self.extract_learnings, question=question, task=task, passages=self.numbered(sources)
        )
        learnings, invented, moved = keep_cited(out.learnings, sources, self.max_learnings)
        if moved:
            logger.info(
                "extractor: %d learnings cited with the passage that holds their words, not the one named", moved
            )
        follow_ups = list(out.follow_up_questions)[:3]
        return dspy.Prediction(learnings=learnings, follow_ups=follow_ups, invented=invented, moved=moved)


class OfflineExtractor(Extractor):
    """The sentences sharing most key terms with the task, at most two per source, each citing its source;
    a sentence that mentions fewer than two of the question's key concepts (`concepts`, `about`) is not quoted.

    Follow-up questions name the passages' frequent terms that no kept sentence covers.
    """

    is_offline = True

    def __init__(self, max_learnings: int = 5, min_overlap: int = 2):
        super().__init__(max_learnings=max_learnings)
        self.min_overlap = min_overlap

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        wanted = set(key_terms(task.query, min_len=1))
        asked = concepts(plain_brief(question))
        scored = []
        for order, s in enumerate(sources):
            for pos, sent in enumerate(sentences(s.text)):
                overlap = len(wanted & set(key_terms(sent)))
                if overlap >= min(self.min_overlap, len(wanted)) and about(asked, sent):
                    scored.append((-overlap, order, pos, sent))
        scored.sort()
        quoted: list[PassageLearning] = []
        per_source: dict[str, int] = {}
        for _, order, _, sent in scored:
            sid = sources[order].source_id
            if per_source.get(sid, 0) < 2 and len(quoted) < self.max_learnings:
                per_source[sid] = per_source.get(sid, 0) + 1
                quoted.append(PassageLearning(passage=order + 1, text=sent))
        learnings = [Learning(text=x.text, source_ids=[sources[x.passage - 1].source_id]) for x in quoted]
        covered = wanted | set(key_terms(" ".join(x.text for x in learnings)))
        uncovered = feedback_terms(sources, covered, 3)
        follow_ups = [f"What do studies report about {t} in relation to {task.query}?" for t in uncovered]
        if sources:
            teach(
                self.extract_learnings,
                {"question": question, "task": task, "passages": self.numbered(sources)},
                reasoning="Each learning quotes a sentence of one passage that bears on the task and the question.",
                learnings=quoted,
                follow_up_questions=follow_ups,
            )
        return dspy.Prediction(learnings=learnings, follow_ups=follow_ups, invented=0, moved=0)


SPEC = StageSpec(
    "extract",
    "pulls cited learnings out of the kept passages",
    (ExtractLearnings,),
    Extractor,
    OfflineExtractor,
    research_attr="extractor",
    tuning=Tuning("extract", "recorded", "learnings extracted from the passages"),
    max_output_tokens=2048,
)
