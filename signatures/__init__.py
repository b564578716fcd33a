"""One DSPy signature per research stage. Depends on nothing else of ours."""

from deepresearch.signatures.answer import WriteAnswer
from deepresearch.signatures.assess import AssessRelevance
from deepresearch.signatures.enrich import FindGaps
from deepresearch.signatures.extract import ExtractLearnings
from deepresearch.signatures.merge import MergeLearnings
from deepresearch.signatures.plan import PlanQueries
from deepresearch.signatures.types import Finding, Judgement, Label, Learning, Source, Task
from deepresearch.signatures.write import WriteReport

__all__ = [
    "AssessRelevance",
    "ExtractLearnings",
    "Finding",
    "FindGaps",
    "Judgement",
    "Label",
    "Learning",
    "MergeLearnings",
    "PlanQueries",
    "Source",
    "Task",
    "WriteAnswer",
    "WriteReport",
]
