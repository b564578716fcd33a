"""The stage modules: one dspy.Module per signature, and their deterministic offline counterparts."""
