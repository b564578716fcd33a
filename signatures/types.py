"""Pydantic models the language model reads or writes. Their docstrings and field descriptions reach the LM."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Label = Literal["relevant", "irrelevant", "uncertain"]


class FrozenModel(BaseModel):
    """The base of the models the LM reads or writes: immutable once made."""

    model_config = ConfigDict(frozen=True)


class Task(FrozenModel):
    """A search to run and what it should establish."""

    query: str = Field(description="a search-engine style query: key terms, not a full question")
    goal: str = Field(description="what the results should establish, and how later searches can build on it")


class Source(FrozenModel):
    """A retrieved paper as the model sees it."""

    source_id: str
    title: str
    text: str


class Judgement(FrozenModel):
    """Whether one paper helps with the task."""

    source_id: str
    label: Label
    reason: str = Field(description="one short sentence")


class Learning(FrozenModel):
    """One finding, stated with its specifics, and the sources it rests on."""

    text: str = Field(description="a single self-contained finding that keeps names, numbers and units")
    source_ids: list[str] = Field(description="ids of the sources that state it, copied exactly")


class Finding(FrozenModel):
    """What one line of research found."""

    query: str
    summary: str
