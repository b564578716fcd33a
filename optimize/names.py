"""The optimizers' names, in a module that imports nothing: `deepresearch optimize --help` lists them without
loading DSPy (`compile` runs them)."""

from __future__ import annotations

OPTIMIZERS = ("gepa", "miprov2", "bootstrap-rs", "simba")
