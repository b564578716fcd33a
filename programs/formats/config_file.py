"""Settings files for the command line: `deepresearch.toml` in the working directory, or `--config FILE`.

A table per command holds that command's options under their long names (`--max-lm-calls` is `max_lm_calls`
or `max-lm-calls`); `run` also takes `ResearchConfig`'s names for the options that set its fields
(`hits_per_query` for `--hits`). The group tables of older files (`[run.budgets]`) still load, their keys
read as if written in `[run]`, with one deprecation line. Options given on the command line win over the
file; the file wins over the defaults. Top-level keys: `verbose` (0, 1 or 2) and `quiet` (true or false),
for every command.

    verbose = 1

    [run]
    preset = "quick"
    corpus = "scifact"
    lm = "openai/gpt-4.1-mini"
    max_lm_calls = 200
    hits_per_query = 5

    [eval.retrieval]
    corpus = "scifact"

Every value is checked with pydantic against the option it sets before anything runs, and a bad one is
reported in one line naming the file and the key.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from types import GenericAlias
from typing import Any, Literal, get_args, get_origin

from deepresearch.programs.config import OLD_GROUPS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

logger = logging.getLogger(__name__)

CONFIG_FILE = "deepresearch.toml"
GLOBAL_KEYS: dict[str, Any] = {"verbose": (Literal[0, 1, 2], 0), "quiet": (bool, False)}
# ResearchConfig's field -> the `run` option that sets it, where the names differ
RESEARCH_CONFIG_NAMES = {
    "hits_per_query": "hits",
    "max_concurrency": "workers",
    "deadline_s": "deadline",
    "lm_timeout_s": "lm_timeout",
}


class ConfigFileError(ValueError):
    """A settings file that cannot be read or holds a bad key or value; one line naming the file and the key."""


def find_config(path: str | None, cwd: Path | None = None) -> Path | None:
    """The settings file to read: `path` (which must exist), else `deepresearch.toml` in `cwd`, else None."""
    if path is not None:
        if not Path(path).is_file():
            raise ConfigFileError(f"--config {path}: no such file; pass the path of a TOML settings file")
        return Path(path)
    default = (cwd or Path.cwd()) / CONFIG_FILE
    return default if default.is_file() else None


def read_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigFileError(f"{path}: cannot read it ({err}); check the file") from err
    except tomllib.TOMLDecodeError as err:
        raise ConfigFileError(f"{path}: not valid TOML ({err})") from err


def global_settings(
    data: dict[str, Any], path: Path, commands: set[str], groups: Mapping[str, set[str]] | None = None
) -> dict[str, Any]:
    """The top-level `verbose` and `quiet` of a settings file, checked; other top-level keys must be tables
    named after a command. The table of a command group (`groups`: [eval]) holds only its commands' tables
    ([eval.gather]): no command reads a key of its own."""
    plain = {k: v for k, v in data.items() if not isinstance(v, dict)}
    groups = groups or {}
    for key, value in data.items():
        if isinstance(value, dict) and key not in commands:
            raise ConfigFileError(
                f"{path}: unknown table [{key}]; tables are named after a command: {', '.join(sorted(commands))}"
            )
        if isinstance(value, dict) and key in groups:
            for name, setting in value.items():
                if not isinstance(setting, dict):
                    tables = ", ".join(f"[{key}.{c}]" for c in sorted(groups[key]))
                    raise ConfigFileError(
                        f"{path}: [{key}] key {name!r}: no command reads it there; [{key}] holds the tables of "
                        f"its commands ({tables}): set {name} in the table of the command it is for"
                    )
    if isinstance(plain.get("verbose"), bool):
        raise _not_a_number(path, "", "verbose", plain["verbose"], int)
    from pydantic import ConfigDict, create_model  # here, not at the top: `deepresearch --help` stays fast

    model = create_model("GlobalSettings", __config__=ConfigDict(extra="forbid"), **GLOBAL_KEYS)
    return _validate(model, plain, path, "", allowed=sorted(GLOBAL_KEYS))


def command_table(data: dict[str, Any], command: str) -> dict[str, Any]:
    """The table of `command` ("run", "eval retrieval" -> [eval.retrieval]); {} when the file has none."""
    table: Any = data
    for part in command.split():
        table = table.get(part, {}) if isinstance(table, dict) else {}
    return table if isinstance(table, dict) else {}


def option_types(parser: argparse.ArgumentParser) -> dict[str, tuple[Any, argparse.Action]]:
    """The options a settings file may set for `parser`'s command: dest -> (the type pydantic checks, action)."""
    out: dict[str, tuple[Any, argparse.Action]] = {}
    for action in parser._actions:  # argparse has no public list of a parser's options
        if not action.option_strings or action.dest in ("help", argparse.SUPPRESS):
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            kind: Any = bool
        elif isinstance(action, argparse._CountAction):
            kind = int
        else:
            base: Any = action.type if action.type in (int, float) else str
            if action.choices is not None:
                base = Literal[tuple(action.choices)]
            is_list = isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+")
            kind = GenericAlias(list, (base,)) if is_list else base  # list[base]
        out[action.dest] = (kind, action)
    return out


def command_defaults(data: dict[str, Any], path: Path, command: str, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The defaults `command`'s table of the settings file sets, checked against `parser`'s options.

    Raises:
        ConfigFileError: for an unknown key or a value of the wrong type, naming the file and the key.
    """
    table = command_table(data, command)
    if command == "run":
        table = ungroup_run_table(table, path)
    if not table:
        return {}
    options = option_types(parser)
    aliases = RESEARCH_CONFIG_NAMES if command == "run" else {}
    # a deprecated spelling still works as a key for one release (`restart` sets --overwrite's value)
    spellings = {
        o[2:].replace("-", "_"): a.dest
        for a in parser._actions
        for o in a.option_strings
        if o.startswith("--") and getattr(a, "replacement", None)
    }
    where = f"[{command.replace(' ', '.')}] "
    values: dict[str, Any] = {}
    written: dict[str, str] = {}  # dest -> the key as the file spells it
    for key, value in table.items():
        dest = key.replace("-", "_")
        dest = aliases.get(dest, spellings.get(dest, dest))
        if dest not in options:
            if isinstance(value, dict):  # a nested command's table, [eval.retrieval] inside [eval]
                continue
            raise ConfigFileError(f"{path}: {where}unknown key {key!r}; known: {', '.join(sorted(options))}")
        number = _number_type(options[dest][0])
        if number is not None and any(isinstance(v, bool) for v in (value if isinstance(value, list) else [value])):
            raise _not_a_number(path, where, key, value, number)  # pydantic would read true as 1
        values[dest] = value
        written[dest] = key
    from pydantic import ConfigDict, create_model

    definitions: dict[str, Any] = {d: (options[d][0] | None, None) for d in values}
    model = create_model("Settings", __config__=ConfigDict(extra="forbid"), **definitions)
    checked = _validate(model, values, path, where, allowed=sorted(options))
    for dest, value in checked.items():  # the option's own converter (e.g. --source's engine names)
        action = options[dest][1]
        convert = action.type
        if callable(convert) and convert not in (int, float, str) and value is not None:
            try:
                checked[dest] = [convert(v) for v in value] if isinstance(value, list) else convert(value)
            except (argparse.ArgumentTypeError, ValueError, TypeError) as err:
                raise ConfigFileError(f"{path}: {where}key {dest!r}: {err}") from err
        bound = getattr(action, "bound", None)  # cli/options.py bound_numbers: the command line's bounds
        problem = bound.problem(checked[dest]) if bound is not None else None
        if problem is not None:
            raise ConfigFileError(f"{path}: {where}key {written[dest]!r} {problem}")
    return checked


def _number_type(kind: Any) -> type | None:
    """int or float when an option takes numbers (one or a list of them), else None."""
    if get_origin(kind) is list:
        kind = get_args(kind)[0]
    return kind if kind in (int, float) else None


def _not_a_number(path: Path, where: str, key: str, value: Any, number: type) -> ConfigFileError:
    """The error for a boolean given to a numeric key, naming the file, the key and the type it takes."""
    shown = json.dumps(value, default=str)  # as TOML writes it: true, [1, true]
    expected = "an integer" if number is int else "a number"
    return ConfigFileError(
        f"{path}: {where}key {key!r}: expected {expected}, got {shown} (true and false are not numbers)"
    )


def ungroup_run_table(table: dict[str, Any], path: Path) -> dict[str, Any]:
    """`[run]` with the group tables of older files (`[run.budgets]`) folded in, with one deprecation line.

    Raises:
        ConfigFileError: for a table that is not an old group, or a key set both in [run] and in a group.
    """
    flat = {k: v for k, v in table.items() if not isinstance(v, dict)}
    given = {RESEARCH_CONFIG_NAMES.get(k.replace("-", "_"), k.replace("-", "_")): k for k in flat}
    groups = {k: v for k, v in table.items() if isinstance(v, dict)}
    for group, entries in groups.items():
        if group not in OLD_GROUPS:
            raise ConfigFileError(f"{path}: unknown table [run.{group}]; write the run's settings in [run] itself")
        for key, value in entries.items():
            name = key.replace("-", "_")
            dest = RESEARCH_CONFIG_NAMES.get(name, name)
            if dest in given:
                raise ConfigFileError(f"{path}: [run.{group}] {key!r} is also set as {given[dest]!r}; keep one")
            given[dest] = f"[run.{group}] {key}"
            flat[name] = value
    if groups:
        tables = ", ".join(f"[run.{g}]" for g in groups)
        logger.warning("%s: the tables %s are deprecated; write their keys in [run] itself", path, tables)
    return flat


def _validate(model, values: dict[str, Any], path: Path, where: str, allowed: list[str]) -> dict[str, Any]:
    from pydantic import ValidationError

    try:
        return model.model_validate(values).model_dump(exclude_unset=True)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "?"
        if first["type"] == "extra_forbidden":
            raise ConfigFileError(f"{path}: {where}unknown key {key!r}; known: {', '.join(allowed)}") from None
        raise ConfigFileError(f"{path}: {where}key {key!r}: {first['msg']} (got {first.get('input')!r})") from None
