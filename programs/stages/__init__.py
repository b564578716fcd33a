"""The stages: one module per stage (or per strategy's set of stages) holding its dspy.Module, its offline twin
and its `StageSpec`; `registry.py` collects the specs into `STAGES`.
"""
