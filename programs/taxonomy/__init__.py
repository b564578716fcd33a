"""Taxonomies of papers: the LM builder with its validation and repairs, and the offline clustering."""

from deepresearch.programs.taxonomy.builder import TaxonomyBuilder, TaxonomyError

__all__ = ["TaxonomyBuilder", "TaxonomyError"]
