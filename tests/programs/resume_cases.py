"""The three strategies in shapes small enough to kill and resume in a test, with their scripted LMs."""

from __future__ import annotations

from dataclasses import replace

from deepresearch.programs.config import HeroConfig, ParallelConfig, preset
from tests.programs.test_presets import hero_handler, parallel_handler
from tests.research_lm import research_handler

QUESTION = "vitamin D and bone fractures"


def case(name: str):
    """(config, scripted LM handler) of a deterministic run of preset `name` with several nodes."""
    if name == "eco":
        return preset("eco", depth=2, breadth=3, max_concurrency=1), research_handler()
    if name == "hero":
        hero = HeroConfig(turns=2, tasks_per_turn=2, multiplier=2, enrichments=1, selection="first_k")
        return preset("hero", hero=hero, max_concurrency=1, max_lm_calls=None), hero_handler()
    if name == "parallel":
        # no monitor: its ticks run on the wall clock, and a resumed run must replay the same decisions
        config = preset(
            "parallel",
            depth=2,
            deadline_s=None,
            max_concurrency=1,
            parallel=replace(ParallelConfig(), orchestrate=False, max_breadth=3),
        )
        return config, parallel_handler(breadth=3)
    raise ValueError(name)
