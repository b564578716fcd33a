"""Saving and loading compiled programs: DSPy's JSON state plus a small metadata file."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import dspy

SECRET_KEYS = {"api_key", "apikey", "api_token", "token", "authorization"}


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k.lower() not in SECRET_KEYS}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _secrets() -> list[str]:
    """Values of environment variables that look like keys, to make sure none reaches a saved file."""
    return [v for k, v in os.environ.items() if len(v) >= 8 and any(w in k.upper() for w in ("KEY", "TOKEN", "SECRET"))]


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
    text = json.dumps(state, indent=2, ensure_ascii=False)
    if any(secret in text for secret in _secrets()):
        path.unlink()
        raise RuntimeError("refusing to save: a key from the environment appears in the program state")
    path.write_text(text, encoding="utf-8")
    info = {"saved": time.strftime("%Y-%m-%dT%H:%M:%S"), "versions": {"dspy": dspy.__version__,
            "python": platform.python_version()}, **meta}
    meta_path(path).write_text(json.dumps(_scrub(info), indent=2, default=str), encoding="utf-8")
    return path


def load_compiled(program: dspy.Module, path: str | Path) -> dspy.Module:
    """Loads compiled state into `program` (the same class that was compiled) and returns it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"compiled program not found: {path}; create one with `deepresearch optimize`")
    program.load(str(path))
    return program
