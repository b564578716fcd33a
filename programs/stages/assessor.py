import logging

import dspy

from programs.runtime.stage import Stage
from programs.runtime.usage import call_predictor
from signatures.assess import AssessRelevance
from signatures.types import Judgement, Source, Task

logger = logging.getLogger(__name__)


class Assessor(Stage):
    """Task + candidate sources -> one judgement per source, and the sources worth reading.

    A source the LM did not judge is treated as `uncertain`; judgements naming unknown ids are ignored.
    """

    def __init__(self, keep_uncertain: bool = True):
        super().__init__()
        self.assess_relevance = dspy.Predict(AssessRelevance)
        self.keep_uncertain = keep_uncertain

    async def aforward(self, task: Task, sources: list[Source], scores: list[float] | None = None) -> dspy.Prediction:
        # Retrieval scores are not shown to the LM (a Source is its view of a hit); offline assessment uses them.
        if not sources:
            return dspy.Prediction(judgements=[], kept=[])
        out = await call_predictor("assess", self.assess_relevance, task=task, papers=sources)
        by_id = {j.source_id: j for j in out.judgements if j.source_id in {s.source_id for s in sources}}
        judgements = [by_id.get(s.source_id) or Judgement(source_id=s.source_id, label="uncertain",
                                                          reason="not judged") for s in sources]
        keep = {"relevant", "uncertain"} if self.keep_uncertain else {"relevant"}
        kept = [s for s, j in zip(sources, judgements) if j.label in keep]
        logger.debug("assessor kept %d of %d sources for %r", len(kept), len(sources), task.query)
        return dspy.Prediction(judgements=judgements, kept=kept)
