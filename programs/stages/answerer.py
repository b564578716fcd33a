"""The `answer` stage: the question and the tree's findings -> a short cited answer beside the report."""

from __future__ import annotations

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import collapse_whitespace
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.programs.stages.lexical import CITED_SENTENCE, concepts, key_terms, mentioned
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.signatures.answer import WriteAnswer
from deepresearch.signatures.types import Finding


class Answerer(Stage):
    """Question + findings -> a short answer citing source ids (renumbered with the report by the program)."""

    def __init__(self):
        super().__init__()
        self.write_answer = dspy.Predict(WriteAnswer)

    async def aforward(self, question: str, findings: list[Finding]) -> dspy.Prediction:
        out = await call_predictor(SPEC, self.write_answer, question=question, findings=findings)
        return dspy.Prediction(answer=out.answer.strip())


class OfflineAnswerer(Answerer):
    """A short extractive answer: the cited sentences of the findings that share most of the question's
    key terms (at most `max_sentences`, each quoted with its citation), best first: most of the question's key
    concepts, then most key terms. A sentence that mentions none of its key concepts is not quoted (it also
    quotes an LM's findings, when the answer stage failed)."""

    is_offline = True

    def __init__(self, max_sentences: int = 3):
        super().__init__()
        self.max_sentences = max_sentences

    async def aforward(self, question: str, findings: list[Finding]) -> dspy.Prediction:
        terms = set(key_terms(plain_brief(question)))  # a clarified brief: its question and answers
        asked = concepts(plain_brief(question))
        scored: dict[str, tuple[int, int]] = {}
        for f in findings:
            for sentence in CITED_SENTENCE.findall(f.summary):
                sentence = sentence.strip()
                overlap, hits = len(terms & set(key_terms(sentence))), mentioned(asked, sentence)
                if overlap and hits and sentence not in scored:
                    scored[sentence] = (hits, overlap)
        # stable: ties keep tree order
        best = sorted(scored, key=lambda x: (-scored[x][0], -scored[x][1]))[: self.max_sentences]
        answer = " ".join(collapse_whitespace(s) for s in best) if best else NO_ANSWER  # quoted sentences, one line
        teach(self.write_answer, {"question": question, "findings": findings}, answer=answer)
        return dspy.Prediction(answer=answer)


NO_ANSWER = "The findings do not answer this question."


SPEC = StageSpec(
    "answer",
    "writes the short cited answer beside the report",
    (WriteAnswer,),
    Answerer,
    OfflineAnswerer,
    research_attr="answerer",
    kind="output",
    unscored="the short answer is written beside the report",
    max_output_tokens=512,
    reserve=0,
)
