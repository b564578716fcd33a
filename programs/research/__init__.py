"""The research program (`DeepResearch`) and its strategies: `eco`, `hero` and `parallel`."""

from deepresearch.programs.research.program import STAGES, DeepResearch, tree_size

__all__ = ["STAGES", "DeepResearch", "tree_size"]
