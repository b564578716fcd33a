"""The `hero` strategy's own stage: an enrichment paragraph appended to a task's summary."""

from __future__ import annotations

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.stages.merger import NO_INFORMATION, OfflineMerger
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.signatures.enrich import WriteEnrichment
from deepresearch.signatures.types import Learning, Task


class EnrichmentWriter(Stage):
    """Summary + enrichment learnings -> a paragraph to append. No LM call without learnings."""

    def __init__(self):
        super().__init__()
        self.write_enrichment = dspy.Predict(WriteEnrichment)

    async def aforward(self, focus: str, summary: str, learnings: list[Learning]) -> dspy.Prediction:
        if not learnings:
            return dspy.Prediction(paragraph="")
        out = await call_predictor(SPEC, self.write_enrichment, focus=focus, summary=summary, learnings=learnings)
        return dspy.Prediction(paragraph=out.paragraph.strip())


class OfflineEnrichmentWriter(EnrichmentWriter):
    """The enrichment learnings not already in the summary, each with its citation (hero strategy)."""

    is_offline = True

    async def aforward(self, focus: str, summary: str, learnings: list[Learning]) -> dspy.Prediction:
        fresh = [x for x in learnings if x.text.rstrip(". ") not in summary]
        merged = (
            (await OfflineMerger().acall(task=Task(query=focus, goal=focus), learnings=fresh)).summary if fresh else ""
        )
        paragraph = "" if merged == NO_INFORMATION else merged
        if learnings:
            teach(
                self.write_enrichment,
                {"focus": focus, "summary": summary, "learnings": learnings},
                paragraph=paragraph,
            )
        return dspy.Prediction(paragraph=paragraph)


SPEC = StageSpec(
    "enrich_write",
    "writes the enrichment paragraph of a hero task",
    (WriteEnrichment,),
    EnrichmentWriter,
    OfflineEnrichmentWriter,
    research_attr="enrichment_writer",
    strategy="hero",
    tuning=Tuning("enrich_write", "recorded", "the enrichment paragraph written from follow-up learnings (hero)"),
    max_output_tokens=1024,
)
