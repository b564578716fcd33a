"""Paper gathering: ScholarGym's planner-retriever-assessor loop, its baselines and offline floor."""

from programs.gather.artifacts import GatherResult
from programs.gather.loop import GatherConfig, Gatherer

__all__ = ["GatherConfig", "GatherResult", "Gatherer"]
