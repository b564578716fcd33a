"""The command line's vocabulary: one spelling per concept, and the option groups several commands share.

Every command builds its parser from these functions (and from `add_retriever_arguments` and
`add_lm_arguments` for the retrieval and LM options), so one concept is spelled one way everywhere:
`--data` is the examples a command runs over, `--workers` how many it works on at once, `--overwrite`
discards what an earlier run left in `--out`, `--hits` is documents retrieved per search and `--depth` the
levels of the research tree. `VOCABULARY` lists each concept's canonical spelling and the synonyms it
replaced; an old spelling still parses for one release, hidden from --help, and prints one line saying
which spelling to use (`deprecated`). tests/test_cli_vocabulary.py walks every command's parser against
this table.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass
from typing import Any, cast

from deepresearch.programs.config import PRESETS

# concept -> (canonical spelling, spellings no command may show; the deprecated ones still parse)
VOCABULARY: dict[str, tuple[str, tuple[str, ...]]] = {
    "the examples a command runs over": ("--data", ("--train", "--questions", "--queries", "--dataset")),
    "how many things work at once": ("--workers", ("--concurrency", "--threads", "--jobs", "--parallel")),
    "discard what an earlier run left in --out": ("--overwrite", ("--restart", "--force", "--fresh")),
    "documents retrieved per search": ("--hits", ("--top-k", "--cutoff", "--k")),
    "levels of the research tree": ("--depth", ()),
    "no progress bars or lines": ("-q", ("--no-progress", "--silent")),
    "the dense encoder": ("--dense-model", ("--dense", "--encoder", "--embedding-model")),
}


class _Deprecated:
    """Mixin of a hidden alias's action: one line on stderr naming the spelling to use, then the action."""

    replacement = ""

    def __call__(self, parser, namespace, values, option_string=None):
        warned = parser.__dict__.setdefault("_deprecated_warned", set())
        if option_string not in warned:
            warned.add(option_string)
            print(f"{parser.prog}: {option_string} is deprecated; use {self.replacement}", file=sys.stderr)
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


def deprecated(container, old: str, new: str, **kwargs: Any) -> None:
    """Adds `old` as a hidden alias of the option `new` that warns once when used.

    Args:
        container: The parser or argument group that holds `new`.
        old: The old spelling, e.g. "--restart".
        new: The spelling to use instead, as the warning names it (e.g. "--overwrite", "-q").
        **kwargs: `add_argument` keywords for an alias with no option of its own to copy (`--no-progress`
            sets `quiet`, the dispatcher's -q); without them the alias copies `new`'s action.
    """
    if kwargs:
        action = container.add_argument(old, help=argparse.SUPPRESS, **kwargs)
    else:  # argparse has no public way to alias an option after it was added: a copy under the old name
        target = next(a for a in container._actions if new in a.option_strings)
        action = copy.copy(target)
        action.option_strings, action.help = [old], argparse.SUPPRESS
        container._add_action(action)
    action.__class__ = type(f"Deprecated{type(action).__name__}", (_Deprecated, type(action)), {})
    action.replacement = new


def add_data_arguments(
    parser,
    *,
    help: str,
    required: bool = False,
    limit_help: str = "use the first N examples",
    old: tuple[str, ...] = (),
) -> None:
    """--data (the examples the command runs over) and --limit; `old` spellings parse as deprecated aliases."""
    # argparse counts a required option as given only when that very option is; a required group of it and
    # its aliases accepts either spelling
    holder = parser.add_mutually_exclusive_group(required=True) if required else parser
    holder.add_argument("--data", default=None, help=help)
    for spelling in old:
        deprecated(holder, spelling, "--data")
    parser.add_argument("--limit", type=int, default=None, help=limit_help)


def add_tree_arguments(
    parser,
    *,
    preset_default: str | None = None,
    preset_help: str = "",
    depth_default: int | None = None,
    depth_help: str = "levels of search (overrides the preset)",
    breadth_default: int | None = None,
    breadth_help: str = "tasks planned at the root (overrides the preset)",
) -> None:
    """--preset (when `preset_help` is given), --depth and --breadth: the research tree's shape."""
    if preset_help:
        parser.add_argument("--preset", default=preset_default, choices=tuple(sorted(PRESETS)), help=preset_help)
    parser.add_argument("--depth", type=int, default=depth_default, help=depth_help)
    parser.add_argument("--breadth", type=int, default=breadth_default, help=breadth_help)


def add_judge_arguments(
    parser, *, lm_help: str, cache_help: str | None = None, api_base_help: str | None = None
) -> None:
    """--judge-lm, and --judge-cache and --judge-api-base where the command has them."""
    parser.add_argument("--judge-lm", default=None, help=lm_help)
    if api_base_help:
        parser.add_argument("--judge-api-base", default=None, help=api_base_help)
    if cache_help:
        parser.add_argument("--judge-cache", default=None, metavar="DIR", help=cache_help)


def add_workers_arguments(
    parser, *, help: str, default: int | None = None, ray_help: str | None = None, old: tuple[str, ...] = ()
) -> None:
    """--workers (how many at once) and, where the work can go to a cluster, --ray."""
    parser.add_argument("--workers", type=int, default=default, metavar="N", help=help)
    for spelling in old:
        deprecated(parser, spelling, "--workers")
    if ray_help:
        parser.add_argument("--ray", default=None, metavar="auto|ADDRESS", help=ray_help)


def add_output_arguments(
    parser,
    *,
    out_help: str,
    out_default: str | None = None,
    required: bool = False,
    overwrite_help: str | None = None,
    old: tuple[str, ...] = (),
) -> None:
    """--out, and --overwrite where an earlier run's files in --out can be discarded."""
    parser.add_argument("--out", default=out_default, required=required, help=out_help)
    if overwrite_help:
        add_overwrite_argument(parser, help=overwrite_help, old=old)


def add_overwrite_argument(parser, *, help: str, old: tuple[str, ...] = ()) -> None:
    """--overwrite: discard what an earlier run left in --out."""
    parser.add_argument("--overwrite", action="store_true", help=help)
    for spelling in old:
        deprecated(parser, spelling, "--overwrite")


@dataclass(frozen=True)
class Bound:
    """The values a numeric option takes: at least `minimum`, and at most `maximum` when there is one."""

    minimum: int | float
    maximum: int | float | None = None
    above: bool = False  # the minimum itself is out too: a time limit of 0 s

    def problem(self, value: Any) -> str | None:
        """`must be >= 1, got 0` for a value out of bounds (NaN is); None for one within, or for None.

        A list (a repeatable option) is checked item by item."""
        for item in value if isinstance(value, list) else [value]:
            if item is None:
                continue
            low = item > self.minimum if self.above else item >= self.minimum
            if not low or (self.maximum is not None and not item <= self.maximum):
                limits = f"{'>' if self.above else '>='} {self.minimum}"
                limits = limits if self.maximum is None else f"from {self.minimum} to {self.maximum}"
                return f"must be {limits}, got {item}"
        return None


# The bounds of numeric options, by option (its dest): 0 workers, rounds, examples or LM calls, a time limit of
# 0 s, a negative temperature make no sense. One table for every command (the dispatcher bounds each parser with
# `bound_numbers`), checked on the command line (`check_numbers`) and in the settings file
# (programs/formats/config_file.py) alike; an option left out must be in FREE_NUMBERS, saying why.
BOUNDS: dict[str, Bound] = {
    "limit": Bound(1),
    "budget": Bound(1),
    "max_lm_calls": Bound(1),
    "depth": Bound(1),
    "breadth": Bound(1),
    "hits": Bound(1),
    "iterations": Bound(1),
    "workers": Bound(1),
    "max_output_tokens": Bound(1),
    "ranking_depth": Bound(0),
    "bootstrap": Bound(0),  # 0: no intervals
    "min_relevance": Bound(0),
    "k1": Bound(0),
    "b": Bound(0, 1),
    "epsilon": Bound(0),
    "temperature": Bound(0, 2),
    "lm_timeout": Bound(0, above=True),
    "deadline": Bound(0, above=True),
    "max_tokens": Bound(1),
    "batch_size": Bound(1),
    "rrf_k": Bound(0),
    "max_papers_per_call": Bound(2),  # a call groups papers: one alone is no grouping
}
FREE_NUMBERS = {"seed": "any integer seeds the random choices"}


class _Bounded:
    """Mixin of a bounded numeric option's action: remembers the spelling the value was given under, so that
    a refusal names the option as typed (a deprecated alias too)."""

    bound: Bound
    dest: str  # argparse.Action's

    def __call__(self, parser, namespace, values, option_string=None):
        parser.__dict__.setdefault("_typed_as", {})[self.dest] = option_string
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


def bound_numbers(parser: argparse.ArgumentParser) -> None:
    """Gives each numeric option of `parser` that `BOUNDS` names its bound, which `check_numbers` (the
    command line) and the settings file check before the command runs. Call it once all options are added."""
    for action in parser._actions:  # argparse has no public list of a parser's options
        if action.dest in BOUNDS and action.type in (int, float) and not isinstance(action, _Bounded):
            action.__class__ = type(f"Bounded{type(action).__name__}", (_Bounded, type(action)), {})
            cast(_Bounded, action).bound = BOUNDS[action.dest]  # its class is a _Bounded one now


def check_numbers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses a bounded option's value out of its bounds (`bound_numbers`), naming the option as typed.

    Raises:
        ValueError: one line, `--workers must be >= 1, got 0`.
    """
    typed = parser.__dict__.get("_typed_as", {})
    for action in parser._actions:
        bound = getattr(action, "bound", None)
        problem = bound.problem(getattr(args, action.dest, None)) if bound is not None else None
        if problem is not None:
            raise ValueError(f"{typed.get(action.dest, action.option_strings[0])} {problem}")
