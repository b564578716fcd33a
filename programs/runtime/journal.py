"""The run journal: one JSON line per finished step, flushed and fsynced, so a killed run can resume.

A research run appends an entry when a node finishes (its task, what it retrieved and kept, its
learnings and summary, the tasks it spawned, its status and the sources it registered) and when a
plan is made outside any node (the root plan, a `hero` turn). `--resume` reads the journal back and
runs only what has no entry: a finished node is restored as it was, without an LM call or a search.

The first line names the question; a journal of another question is refused. A line cut by a kill
(the last one, written when the process died) is ignored, so the file is always readable.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

VERSION = 1


class JournalError(ValueError):
    """A journal that cannot be resumed (another question, another version); the message says what to do."""


class Journal:
    """Append-only JSON lines; `entries` holds what an earlier run of the same question finished.

    Args:
        path: The journal file (`--out/journal.jsonl`).
        question: The run's question, written on the first line and checked on resume.
        resume: Read the entries of an earlier run; without it the file is started afresh.
    """

    def __init__(self, path: str | Path, question: str, *, resume: bool = False):
        self.path = Path(path)
        self.question = question
        self.entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if resume and self.path.exists():
            self.entries = self._read()
            mode = "a"
        else:
            mode = "w"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, mode, encoding="utf-8")
        if mode == "w":
            self._write({"kind": "header", "version": VERSION, "question": question})

    def _read(self) -> dict[str, dict[str, Any]]:
        entries: dict[str, dict[str, Any]] = {}
        with open(self.path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:  # cut by the kill that ended the earlier run
                    logger.warning("journal %s: last line is incomplete; ignored", self.path)
                    continue
                raise JournalError(f"journal {self.path} is damaged at line {i + 1}; "
                                   f"pass --overwrite to start the run afresh") from None
            if entry.get("kind") == "header":
                if entry.get("question") != self.question:
                    raise JournalError(f"journal {self.path} belongs to another question "
                                       f"({entry.get('question')!r}); pass --overwrite or another --out")
                if entry.get("version") != VERSION:
                    raise JournalError(f"journal {self.path} has version {entry.get('version')}, this program "
                                       f"writes {VERSION}; pass --overwrite to start afresh")
                continue
            entries[entry["key"]] = entry
        if lines and not entries and not lines[0].startswith('{"kind": "header"'):
            raise JournalError(f"{self.path} is not a journal of this program; pass another --out")
        return entries

    def _write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry an earlier run finished under `key`, or None."""
        return self.entries.get(key)

    def append(self, key: str, kind: str, **data: Any) -> None:
        """Records a finished step; an entry restored from the earlier run is not written twice."""
        if key in self.entries:
            return
        entry = {"kind": kind, "key": key, **data}
        self.entries[key] = entry
        self._write(entry)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()
