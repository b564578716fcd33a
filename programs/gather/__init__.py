"""Paper gathering: ScholarGym's planner-retriever-assessor loop, its baselines and offline floor."""

from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.gather.loop import GatherConfig, Gatherer

__all__ = ["GatherConfig", "GatherResult", "Gatherer"]
