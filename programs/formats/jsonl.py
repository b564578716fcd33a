"""Record files that survive a kill: the research journal's and the eval runners' JSON Lines.

A run appends one JSON line per finished item (a node, a query, a survey) with `JsonlAppender.append`, which
flushes and fsyncs before it returns, so a line on disk is an item done. A kill mid-append can leave only
the last line cut short: `read_jsonl` ignores that line with a warning and `JsonlAppender` cuts it before
appending, so a rerun redoes that one item. A damaged line anywhere else is an error naming the file and
the line. Whole files (summaries, scores) are written with `deepresearch.programs.runtime.outputs.atomic_write_text`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from deepresearch.programs.lm.secrets import redact_json
from deepresearch.programs.runtime.outputs import atomic_write_text

logger = logging.getLogger(__name__)


class JsonlError(ValueError):
    """A record file with a damaged line before its last one; the message names the file, the line and the fix."""


def _record(raw: bytes) -> dict[str, Any] | None:
    """The JSON object on one line, or None when the line is not one (cut short, not UTF-8, not an object)."""
    try:
        value = json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        return None
    return value if isinstance(value, dict) else None


def read_jsonl(path: str | Path, *, hint: str = "fix or remove the line") -> list[dict[str, Any]]:
    """The records of a JSON Lines file, in file order; a missing file holds none.

    Blank lines are skipped. The last line, when it is not a JSON object, is the one a kill cut short: it is
    ignored with a warning.

    Args:
        path: The file.
        hint: What the user should do about a damaged line, ending the error message.

    Raises:
        JsonlError: when a line other than the last is not a JSON object.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = [(n, raw) for n, raw in enumerate(path.read_bytes().split(b"\n"), 1) if raw.strip()]
    records = []
    for i, (n, raw) in enumerate(lines):
        record = _record(raw)
        if record is None:
            if i == len(lines) - 1:
                logger.warning("%s: line %d is incomplete (an interrupted write); ignored, its item is redone", path, n)
                break
            raise JsonlError(f"{path} line {n} is not a JSON record; {hint}")
        records.append(record)
    return records


class JsonlAppender:
    """Appends records to a JSON Lines file, one line each, durable once `append` returns.

    Opening cuts a last line that is not a JSON object (what a kill mid-append leaves), so the next record
    starts on a line of its own; the lines before it are left as they are (`read_jsonl` checks them). One
    writer at a time.

    Args:
        path: The file; it and its folder are created when missing.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a+b")
        try:
            self._mend_tail()
        except BaseException:
            self._file.close()
            raise

    def _mend_tail(self) -> None:
        self._file.seek(0)
        data = self._file.read()
        body = data.rstrip()
        start = body.rfind(b"\n") + 1
        if body and _record(body[start:]) is None:
            logger.debug("%s: cutting the incomplete last line (%d bytes)", self.path, len(data) - start)
            self._file.truncate(start)
        elif body and not data.endswith(b"\n"):  # a whole record whose newline the kill cut
            self._file.write(b"\n")
        else:
            return
        self._file.flush()
        os.fsync(self._file.fileno())

    def append(self, record: dict[str, Any]) -> None:
        """Writes `record` as one line, then flushes and fsyncs it."""
        self._file.write(redact_json(record, ensure_ascii=False).encode("utf-8") + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl_atomic(path: str | Path, records: list[dict[str, Any]]) -> Path:
    """Replaces `path` with `records`, one JSON line each, in one step (`atomic_write_text`)."""
    return atomic_write_text(path, "".join(redact_json(r, ensure_ascii=False) + "\n" for r in records), redacted=True)
