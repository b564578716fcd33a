"""Paper gathering: ScholarGym's planner-retriever-assessor loop (`loop.py`), its artifacts and baselines.

The loop's stages and their offline twins live with the other stages, in `programs/stages/gathering.py`.
"""
