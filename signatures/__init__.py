"""One DSPy signature per research stage. Depends on nothing else of ours."""

from signatures.answer import WriteAnswer
from signatures.assess import AssessRelevance
from signatures.enrich import FindGaps
from signatures.extract import ExtractLearnings
from signatures.merge import MergeLearnings
from signatures.plan import PlanQueries
from signatures.types import Finding, Judgement, Label, Learning, Source, Task
from signatures.write import WriteReport

__all__ = ["AssessRelevance", "ExtractLearnings", "Finding", "FindGaps", "Judgement", "Label", "Learning",
           "MergeLearnings", "PlanQueries", "Source", "Task", "WriteAnswer", "WriteReport"]
