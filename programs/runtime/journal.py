"""The run journal: one JSON line per finished step, flushed and fsynced, so a killed run can resume.

A research run appends an entry when a node finishes (its task, what it retrieved and kept, its
learnings and summary, the tasks it spawned, its status and the sources it registered) and when a
plan is made outside any node (the root plan, a `hero` turn). `--resume` reads the journal back and
runs only what has no entry: a finished node is restored as it was, without an LM call or a search.

The first line names the question; a journal of another question is refused. A line cut by a kill
(the last one) is ignored and cut before the next append (deepresearch.programs.formats.jsonl), so the file is
always readable.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from deepresearch.programs.formats.jsonl import JsonlAppender, JsonlError, read_jsonl

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
        records = self._read() if resume else []
        if not records:
            self.path.unlink(missing_ok=True)
        self._appender = JsonlAppender(self.path)
        if not records:
            self._appender.append({"kind": "header", "version": VERSION, "question": question})

    def _read(self) -> list[dict[str, Any]]:
        try:
            records = read_jsonl(self.path, hint="pass --overwrite to start the run afresh")
        except JsonlError as err:
            raise JournalError(str(err).replace("is not a JSON record", "is damaged")) from None
        if not records:
            return []
        header = records[0]
        if header.get("kind") != "header":
            raise JournalError(f"{self.path} is not a journal of this program; pass another --out")
        if header.get("question") != self.question:
            raise JournalError(
                f"journal {self.path} belongs to another question ({header.get('question')!r}); "
                f"pass --overwrite or another --out"
            )
        if header.get("version") != VERSION:
            raise JournalError(
                f"journal {self.path} has version {header.get('version')}, this program writes "
                f"{VERSION}; pass --overwrite to start afresh"
            )
        self.entries = {r["key"]: r for r in records[1:]}
        return records

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry an earlier run finished under `key`, or None."""
        return self.entries.get(key)

    def append(self, key: str, kind: str, **data: Any) -> None:
        """Records a finished step; an entry restored from the earlier run is not written twice."""
        with self._lock:
            if key in self.entries:
                return
            entry = {"kind": kind, "key": key, **data}
            self.entries[key] = entry
            self._appender.append(entry)

    def close(self) -> None:
        with self._lock:
            self._appender.close()
