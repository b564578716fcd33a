"""Taxonomies of papers: the LM builder with its validation and repairs, and the offline clustering."""
