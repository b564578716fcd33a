"""The stage log: what every stage of a run was given and what it answered, one JSON line per call.

Beside the journal (which records finished nodes, for `--resume`), a run records each stage call
(`stages.jsonl` in the run folder): the stage's name, the node it worked for, its inputs and its
outputs as plain JSON. `deepresearch optimize --from-runs DIR` replays these recorded inputs to tune one
stage (the extractor on recorded passages, the writer on recorded findings...) without retrieval and
without running the stages before it. `read_calls` rebuilds typed inputs from the stage's `aforward`
annotations, so a recorded `Task` comes back as a `Task`.

A retrieved passage (a `Source`) is written once per log, on a `{"passage": ...}` line, and the calls that
read it refer to it by id, so a tree whose nodes see the same papers does not store them again and again.
Lines are buffered, not fsynced: losing the last calls to a kill costs a few training examples, never a
resume.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from deepresearch.programs.formats.jsonl import read_jsonl
from deepresearch.programs.lm.secrets import redact_json
from deepresearch.programs.runtime.files import STAGE_LOG

PASSAGE_REF = "passage_ref"
_SOURCE_KEYS = {"source_id", "title", "text"}  # a `deepresearch.signatures.types.Source` as JSON


def _plain(value: Any) -> Any:
    """JSON values of a stage's inputs or outputs (pydantic models and dataclasses become objects)."""
    return to_jsonable_python(value, fallback=str)


class StageLog:
    """Appends one line per stage call to `path` (started afresh unless `resume`).

    Args:
        path: The log file (`--out/stages.jsonl`).
        resume: Keep the calls of an earlier run of the same question (a resumed run adds its own).
    """

    def __init__(self, path: str | Path, *, resume: bool = False):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file = self.path.open("a" if resume else "w", encoding="utf-8")
        self._written: set[str] = set()  # ids of the passages already on a line of this log

    def _by_reference(self, value: Any, lines: list[str]) -> Any:
        """`value` with each passage replaced by `{"passage_ref": id}`; first sightings go to `lines`."""
        if isinstance(value, list):
            return [self._by_reference(v, lines) for v in value]
        if isinstance(value, dict) and set(value) == _SOURCE_KEYS:
            sid = value["source_id"]
            if sid not in self._written:
                self._written.add(sid)
                lines.append(redact_json({"passage": value}, ensure_ascii=False))
            return {PASSAGE_REF: sid}
        return value

    def record(
        self,
        stage: str,
        node_id: str | None,
        inputs: Mapping[str, Any],
        outputs: dspy.Prediction | None,
        *,
        seconds: float,
        error: str | None = None,
    ) -> None:
        plain = _plain(dict(inputs))
        outs = _plain(dict(outputs.items())) if outputs is not None else None
        with self._lock:
            if self._file.closed:
                return
            lines: list[str] = []
            plain = {k: self._by_reference(v, lines) for k, v in plain.items()}
            if outs is not None:
                outs = {k: self._by_reference(v, lines) for k, v in outs.items()}
            line = {
                "stage": stage,
                "node_id": node_id,
                "seconds": round(seconds, 4),
                "ok": error is None,
                "inputs": plain,
                "outputs": outs,
            }
            if error is not None:
                line["error"] = error
            lines.append(redact_json(line, ensure_ascii=False))
            self._file.write("\n".join(lines) + "\n")

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


@dataclass(frozen=True)
class RecordedCall:
    """One successful stage call of a recorded run, with typed inputs."""

    stage: str
    node_id: str | None
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    run: Path  # the run folder it came from


def typed_inputs(module: dspy.Module, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """`inputs` validated against the annotations of `module.aforward` (recorded JSON back to models).

    Raises:
        ValueError: when a recorded input does not fit the stage (a log of another version of it).
    """
    hints = typing.get_type_hints(type(module).aforward)
    out = {}
    for name, value in inputs.items():
        hint = hints.get(name)
        out[name] = TypeAdapter(hint).validate_python(value) if hint is not None else value
    return out


def find_logs(folder: str | Path) -> list[Path]:
    """The stage logs of a run folder, or of every run folder under `folder`, in path order."""
    folder = Path(folder).expanduser()
    if folder.is_file():
        return [folder]
    return sorted(folder.rglob(STAGE_LOG))


def _resolve(value: Any, passages: Mapping[str, dict]) -> Any:
    if isinstance(value, list):
        return [_resolve(v, passages) for v in value]
    if isinstance(value, dict) and set(value) == {PASSAGE_REF}:
        return passages[value[PASSAGE_REF]]
    return value


def read_log(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """The call records of one stage log, with their passages put back, and the log's passages by id."""
    records = read_jsonl(path, hint="remove the line or record the run again")
    passages = {r["passage"]["source_id"]: r["passage"] for r in records if "passage" in r}
    calls = [
        {
            **r,
            "inputs": {k: _resolve(v, passages) for k, v in r["inputs"].items()},
            "outputs": {k: _resolve(v, passages) for k, v in (r.get("outputs") or {}).items()},
        }
        for r in records
        if "stage" in r
    ]
    return calls, passages


def read_calls(folder: str | Path, stage: str) -> Iterator[RecordedCall]:
    """The successful calls of `stage` recorded under `folder` (a run folder or a folder of them)."""
    for path in find_logs(folder):
        calls, _ = read_log(path)
        for record in calls:
            if record.get("stage") == stage and record.get("ok"):
                yield RecordedCall(
                    stage=stage,
                    node_id=record.get("node_id"),
                    inputs=record["inputs"],
                    outputs=record.get("outputs") or {},
                    run=path.parent,
                )
