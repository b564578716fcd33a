"""The `hero` strategy's own stage: an enrichment paragraph appended to a task's summary (spec 001 §2)."""

from __future__ import annotations

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.enrich import WriteEnrichment
from deepresearch.signatures.types import Learning


class EnrichmentWriter(Stage):
    """Summary + enrichment learnings -> a paragraph to append. No LM call without learnings."""

    def __init__(self):
        super().__init__()
        self.write_enrichment = dspy.Predict(WriteEnrichment)

    async def aforward(self, focus: str, summary: str, learnings: list[Learning]) -> dspy.Prediction:
        if not learnings:
            return dspy.Prediction(paragraph="")
        out = await call_predictor(
            STAGES.enrich_write.name, self.write_enrichment, focus=focus, summary=summary, learnings=learnings
        )
        return dspy.Prediction(paragraph=out.paragraph.strip())
