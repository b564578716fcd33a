"""The `extract` stage: a task's kept passages -> cited learnings and follow-up questions."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.programs.stages.lexical import about, best_sentences, concepts, feedback_terms, key_terms, sentences
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.signatures.extract import ExtractLearnings, QuotablePassage
from deepresearch.signatures.types import Learning, Source, Task


def quotable(
    sources: list[Source], task: Task, n: int = 0, keep: Collection[tuple[int, int]] = ()
) -> tuple[list[QuotablePassage], dict[int, tuple[int, str]]]:
    """The passages as the LM reads them, and what each sentence number names: (passage index, sentence).

    Each passage shows its quotable sentences (`sentences`), numbered 1, 2, ... on across the passages; with
    `n` > 0 only its `n` that bear most on the task (`best_sentences`), and those whose (passage, position)
    is in `keep`, in their order.
    """
    passages: list[QuotablePassage] = []
    named: dict[int, tuple[int, str]] = {}
    for order, s in enumerate(sources):
        parts = sentences(s.text)
        shown = set(best_sentences(parts, f"{task.query} {task.goal}", n))
        shown |= {pos for o, pos in keep if o == order}
        numbered = {}
        for pos in sorted(shown):
            named[len(named) + 1] = (order, parts[pos])
            numbered[len(named)] = parts[pos]
        passages.append(QuotablePassage(title=s.title, sentences=numbered))
    return passages, named


def quoted(
    numbers: list[int], named: dict[int, tuple[int, str]], sources: list[Source], limit: int
) -> tuple[list[Learning], int]:
    """The learnings the sentence `numbers` name, each citing its passage's source, a sentence quoted once
    (at most `limit`), and how many numbers named no shown sentence."""
    learnings: list[Learning] = []
    invented, seen = 0, set()
    for number in numbers:
        if number not in named:
            invented += 1
        elif number not in seen and len(learnings) < limit:
            seen.add(number)
            order, text = named[number]
            learnings.append(Learning(text=text, source_ids=[sources[order].source_id]))
    return learnings, invented


class Extractor(Stage):
    """Task + passages -> cited learnings and follow-up questions.

    The LM reads the passages' sentences, numbered across the passages (`quotable`, at most `sentences` a
    passage when that is > 0), and names the ones that state findings for the task. Each named sentence
    becomes a learning, quoted as the paper says it and cited with its passage's source, so a learning is
    supported by its citation by construction. A number not shown is dropped and counted as `invented`.
    """

    def __init__(self, max_learnings: int = 5, sentences: int = 0):
        super().__init__()
        self.extract_learnings = dspy.Predict(ExtractLearnings)
        self.max_learnings = max_learnings
        self.sentences = sentences

    @classmethod
    def from_config(cls, config: Any, retriever: Any) -> Extractor:
        return cls(max_learnings=config.max_learnings, sentences=config.extract_sentences)

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        passages, named = quotable(sources, task, self.sentences)
        if not named:  # no passage holds a sentence to quote: nothing to ask
            return dspy.Prediction(learnings=[], follow_ups=[], invented=0)
        out = await call_predictor(SPEC, self.extract_learnings, question=question, task=task, passages=passages)
        learnings, invented = quoted(list(out.quotes), named, sources, self.max_learnings)
        follow_ups = list(out.follow_up_questions)[:3]
        return dspy.Prediction(learnings=learnings, follow_ups=follow_ups, invented=invented)


class OfflineExtractor(Extractor):
    """The sentences sharing most key terms with the task, at most two per source, each citing its source;
    a sentence that mentions fewer than two of the question's key concepts (`concepts`, `about`) is not quoted.
    It reads every sentence of every passage; what it records for the LM shows the LM's view of them with
    its quotes added.

    Follow-up questions name the passages' frequent terms that no kept sentence covers.
    """

    is_offline = True

    def __init__(self, max_learnings: int = 5, sentences: int = 0, min_overlap: int = 2):
        super().__init__(max_learnings=max_learnings, sentences=sentences)
        self.min_overlap = min_overlap

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        wanted = set(key_terms(task.query, min_len=1))
        asked = concepts(plain_brief(question))
        scored = []
        for order, s in enumerate(sources):
            for pos, sent in enumerate(sentences(s.text)):
                overlap = len(wanted & set(key_terms(sent)))
                if overlap >= min(self.min_overlap, len(wanted)) and about(asked, sent):
                    scored.append((-overlap, order, pos))
        scored.sort()
        chosen: list[tuple[int, int]] = []
        per_source: dict[str, int] = {}
        for _, order, pos in scored:
            sid = sources[order].source_id
            if per_source.get(sid, 0) < 2 and len(chosen) < self.max_learnings:
                per_source[sid] = per_source.get(sid, 0) + 1
                chosen.append((order, pos))
        passages, named = quotable(sources, task, self.sentences, keep=chosen)
        number_of = {(order, text): k for k, (order, text) in named.items()}
        parts = [sentences(s.text) for s in sources]
        quotes = [number_of[(order, parts[order][pos])] for order, pos in chosen]
        learnings, _ = quoted(quotes, named, sources, self.max_learnings)
        covered = wanted | set(key_terms(" ".join(x.text for x in learnings)))
        uncovered = feedback_terms(sources, covered, 3)
        follow_ups = [f"What do studies report about {t} in relation to {task.query}?" for t in uncovered]
        if sources:
            teach(
                self.extract_learnings,
                {"question": question, "task": task, "passages": passages},
                quotes=quotes,
                follow_up_questions=follow_ups,
            )
        return dspy.Prediction(learnings=learnings, follow_ups=follow_ups, invented=0)


SPEC = StageSpec(
    "extract",
    "pulls cited learnings out of the kept passages",
    (ExtractLearnings,),
    Extractor,
    OfflineExtractor,
    research_attr="extractor",
    tuning=Tuning("extract", "recorded", "learnings extracted from the passages"),
    max_output_tokens=512,
)
