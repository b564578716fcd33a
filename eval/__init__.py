"""Metrics, benchmark loaders and runners, LLM judges."""
