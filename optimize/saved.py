"""Saving and loading compiled programs: DSPy's JSON state plus a small metadata file."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import dspy

from deepresearch.programs.lm.secrets import env_secrets, registered_secrets

COMPILED_KEY = "deepresearch"  # under the saved state's `metadata`: the compile record
SECRET_KEYS = {"api_key", "apikey", "api_token", "token", "authorization"}


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k.lower() not in SECRET_KEYS}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _checked(state: dict, path: Path, what: str) -> str:
    """`state` as the JSON text to write, after making sure no key redaction knows (credential-named environment
    variables, keys the run was given) is in it; else `path` is removed and the save refused."""
    text = json.dumps(state, indent=2, ensure_ascii=False)
    if any(secret in text for secret in [*env_secrets(), *registered_secrets()]):
        path.unlink()
        raise RuntimeError(f"refusing to save: a key from the environment appears in the {what}")
    return text


def meta_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.stem + ".meta.json")


def save_compiled(program: dspy.Module, path: str | Path, meta: dict[str, Any]) -> Path:
    """Writes `program`'s state to `path` (JSON, loadable with plain `program.load(path)`) and
    `<stem>.meta.json` beside it. No API key is written.

    Raises:
        RuntimeError: if a secret from the environment would still appear in the file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    state = _scrub(json.loads(path.read_text(encoding="utf-8")))
    _checked(state, path, "program state")
    saved = time.strftime("%Y-%m-%dT%H:%M:%S")
    versions = {"dspy": dspy.__version__, "python": platform.python_version()}
    info = _scrub(json.loads(json.dumps({"saved": saved, "versions": versions, **meta}, default=str)))
    # the record travels inside the program file (DSPy's loader reads only metadata.dependency_versions there)
    state.setdefault("metadata", {})[COMPILED_KEY] = info
    path.write_text(_checked(state, path, "compile record"), encoding="utf-8")
    meta_path(path).write_text(json.dumps(info, indent=2), encoding="utf-8")
    return path


def compile_record(path: str | Path) -> dict[str, Any]:
    """What `deepresearch optimize` recorded about a compiled program: model, optimizer, metric, data and split,
    the dev figures before and after, LM calls. Read from the program file (or, for files saved before the
    record moved inside it, its `.meta.json`).

    Raises:
        FileNotFoundError, ValueError: for a missing file, or one that is no compiled program (one line).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"compiled program not found: {path}; create one with `deepresearch optimize`")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{path} is not a compiled program (not JSON: {err}); pass the .json file that "
            f"`deepresearch optimize --out` wrote"
        ) from None
    record = (state.get("metadata") or {}).get(COMPILED_KEY) if isinstance(state, dict) else None
    if record is None and meta_path(path).exists():
        record = json.loads(meta_path(path).read_text(encoding="utf-8"))
    if record is None:
        raise ValueError(f"{path} holds no compile record; it was not written by `deepresearch optimize --out`")
    return record


def describe(record: dict[str, Any]) -> str:
    """The compile record as lines of `key: value`, the figures first."""
    keys = (
        "program",
        "stage",
        "lm",
        "optimizer",
        "teacher",
        "offline_stages",
        "metric",
        "data",
        "split",
        "n_train",
        "n_dev",
        "before",
        "after",
        "change",
        "ci95",
        "metric_calls",
        "lm_calls",
        "seconds",
        "saved",
    )
    shown = {k: record[k] for k in keys if k in record}
    if "before" in record and "after" in record and "change" not in record:
        shown["change"] = record["after"] - record["before"]
    lines = []
    for k in (*keys, *sorted(k for k in record if k not in keys)):
        value = shown.get(k, record.get(k))
        if value is None or k in ("before_scores", "after_scores"):
            continue
        if isinstance(value, float):
            value = f"{value:+.4f}" if k == "change" else f"{value:.4f}"
        elif isinstance(value, (dict, list)):
            value = json.dumps(value, default=str)
        lines.append(f"{k}: {value}")
    return "\n".join(lines)


def load_compiled(program: dspy.Module, path: str | Path) -> dspy.Module:
    """Loads compiled state into `program` (the same class that was compiled) and returns it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"compiled program not found: {path}; create one with `deepresearch optimize`")
    program.load(str(path))
    return program
