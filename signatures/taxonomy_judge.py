"""The LLM judge of a taxonomy against an expert one (spec 003 §4.8)."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class DimensionScore(BaseModel):
    """The verdict on one dimension: the reasoning first, then the score it leads to."""

    reasoning: str = Field(description="the evidence from both trees and the gaps found, in two to four sentences")
    score: int = Field(description="an integer from 1 (worst) to 5 (best)")


# Behaviour: spec 003 §4.8 (persona, evidence -> gap analysis -> score, the four rubrics). Wording is ours.
# The spec asks for the expert persona, so the docstring keeps it despite the style guide's "no role-play".
class JudgeTaxonomy(dspy.Signature):
    """You are a rigorous and objective expert in the research field of the topic, comparing a generated taxonomy with one written by experts.
    For each dimension, first collect evidence by pointing to specific branches of both trees, then analyse the gaps between them, and only then give an integer score from 1 to 5 that follows the rubric.
    Judge the category names and their arrangement only; the trees list no papers, and the expert tree is the standard, not a template to be copied word for word."""

    topic: str = dspy.InputField()
    reference_tree: str = dspy.InputField(desc="the expert taxonomy as an indented text tree")
    model_tree: str = dspy.InputField(desc="the taxonomy to judge, in the same form")
    semantic_coverage: DimensionScore = dspy.OutputField(
        desc="how many of the expert tree's core concepts the model tree recalls. 1: more than half of the core "
             "first- and second-level branches are missing; 4: more than 90% of the core concepts are present; "
             "5: all of them are, possibly with useful branches the experts lacked")
    sibling_organization: DimensionScore = dspy.OutputField(
        desc="whether the children of each node are mutually exclusive and jointly exhaustive. 1: siblings overlap "
             "by more than half, or follow no visible logic; 5: every level divides its parent along one strict "
             "criterion")
    hierarchical_logic: DimensionScore = dspy.OutputField(
        desc="whether each child is truly a kind or a part of its parent. 1: many parent-child relations are "
             "inverted or invented; 5: every relation follows strict academic definitions at the depth the experts "
             "used")
    structural_topology: DimensionScore = dspy.OutputField(
        desc="how closely the shape of the model tree matches the expert tree. 1: badly deformed, for example flat "
             "where the experts go deep; 5: it reproduces how the experts spread detail across levels and branches")
