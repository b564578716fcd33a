"""Question sets for report benchmarks: the ecology questions of DeepResearch-Eco, DeepResearchGym's
Researchy Questions and ScholarQABench, from local files or the Hugging Face hub."""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearch.retrievers.extras import require
from deepresearch.retrievers.hf import hub_config

logger = logging.getLogger(__name__)

# Hugging Face dataset used when a benchmark is named and no local file is given. Override with `hf:owner/name`.
HF_DATASETS: dict[str, tuple[str, str]] = {
    "researchy": ("corbyrosset/researchy_questions", "test"),
    "scholarqa": ("OpenSciLM/ScholarQABench", "test"),
}
# Local folder (under a data directory) and file names tried before the hub.
LOCAL_FILES: dict[str, tuple[str, ...]] = {
    "eco": ("deepresearch_eco/questions.csv",),
    "researchy": ("researchy_questions/questions.jsonl", "deepresearchgym/questions.jsonl"),
    "scholarqa": ("scholarqabench/questions.jsonl",),
}
ID_KEYS = ("id", "qid", "query_id", "_id", "question_id")
TEXT_KEYS = ("question", "query", "input", "text", "prompt")
KEY_POINT_KEYS = ("key_points", "keypoints", "ground_truth_key_points")
ANSWER_KEYS = ("answer", "reference_answer", "output", "gold_answer")
ECO_QUESTION_COLUMN = "Your research question."


@dataclass(frozen=True)
class Question:
    """One benchmark question.

    Attributes:
        qid: Identifier within its set (the ecology set uses the 1-based row number, as its report files do).
        text: The question.
        key_points: Points a good answer covers (DeepResearchGym), when the set has them.
        reference_answer: An expert's or the benchmark's answer, when known.
        metadata: Other fields of the record.
    """

    qid: str
    text: str
    key_points: tuple[str, ...] = ()
    reference_answer: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


class QuestionsError(ValueError):
    """A question set that cannot be read, with the file and what to do."""


def load_eco_questions(path: str | Path) -> list[Question]:
    """The 49 DeepResearch^Eco questions from the form's CSV (or a folder holding `questions.csv`).

    The CSV's index column repeats 44 and skips 45, so ids are row numbers 1..49, as the report files use.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "questions.csv"
    if not path.exists():
        raise QuestionsError(f"ecology questions not found at {path}; pass the questions.csv of deepresearch_eco")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:  # the published form export is Windows-1252
        text = raw.decode("cp1252", errors="replace")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header, rows = rows[0], [r for r in rows[1:] if any(c.strip() for c in r)]
    if ECO_QUESTION_COLUMN not in header:
        raise QuestionsError(f"{path} has no column {ECO_QUESTION_COLUMN!r}; is it the ecology questions CSV?")
    q_col = header.index(ECO_QUESTION_COLUMN)
    out = []
    for i, row in enumerate(rows, start=1):
        named = {h.strip(): v.strip() for h, v in zip(header, row) if h.strip() and v.strip()}
        expected = row[q_col + 9].strip() if len(row) > q_col + 9 else ""
        out.append(
            Question(
                qid=str(i),
                text=row[q_col].strip(),
                reference_answer=expected or None,
                metadata={
                    "subdomain": row[q_col + 1].strip(),
                    "purpose": row[q_col + 2].strip(),
                    "form_index": row[0].strip(),
                    "fields": named,
                },
            )
        )
    return out


def _first(record: Mapping[str, Any], keys: Iterable[str]) -> Any:
    return next((record[k] for k in keys if record.get(k) not in (None, "", [])), None)


def _key_points(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str):
        value = [value]
    texts = [p if isinstance(p, str) else _first(p, ("point", "key_point", "text", "content")) for p in value]
    return tuple(str(text).strip() for text in texts if text)


def question_from_record(record: Mapping[str, Any], position: int) -> Question:
    """A Question from a JSON record with usual field names (`question`/`query`, `id`, `key_points`, `answer`)."""
    text = _first(record, TEXT_KEYS)
    if not isinstance(text, str) or not text.strip():
        raise QuestionsError(f"record {position} has no question text (expected one of: {', '.join(TEXT_KEYS)})")
    qid = _first(record, ID_KEYS)
    answer = _first(record, ANSWER_KEYS)
    rest = {k: v for k, v in record.items() if k not in (*TEXT_KEYS, *ID_KEYS, *KEY_POINT_KEYS, *ANSWER_KEYS)}
    return Question(
        qid=str(qid if qid is not None else position),
        text=text.strip(),
        key_points=_key_points(_first(record, KEY_POINT_KEYS)),
        reference_answer=answer if isinstance(answer, str) else None,
        metadata=rest,
    )


def load_question_file(path: str | Path) -> list[Question]:
    """Questions from a JSONL file (one record per line), a JSON list, or a text file (one question per line)."""
    path = Path(path)
    if not path.exists():
        raise QuestionsError(f"question file not found: {path}")
    if path.suffix == ".csv":
        return load_eco_questions(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise QuestionsError(f"{path} line {n} is not JSON; fix or remove the line") from err
    elif path.suffix == ".json":
        records = json.loads(text)
        if isinstance(records, dict):
            records = records.get("data") or records.get("questions") or list(records.values())
    else:
        records = [{"question": line} for line in text.splitlines() if line.strip()]
    return [question_from_record(r if isinstance(r, dict) else {"question": r}, i) for i, r in enumerate(records, 1)]


def load_hf_questions(name: str, split: str = "test", limit: int | None = None) -> list[Question]:
    """Questions from a Hugging Face dataset (needs the hub, or its local cache)."""
    datasets = require("datasets", "hf", "loading questions from the hub")
    try:
        config, split = hub_config(datasets, name, None, split, "queries")  # BEIR's claims: the `queries` config
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as err:
        raise QuestionsError(
            f"could not load {name} (split {split}) from the Hugging Face hub: "
            f"{type(err).__name__}; go online or pass a local question file"
        ) from err
    rows = ds.select(range(min(limit, len(ds)))) if limit else ds
    return [question_from_record(r, i) for i, r in enumerate(rows, 1)]


def load_questions(spec: str, data_dir: str | Path | None = None, limit: int | None = None) -> list[Question]:
    """Loads a question set by file path or name.

    Args:
        spec: A file (`.csv` ecology form, `.jsonl`, `.json`, `.txt`), a benchmark name (`eco`,
            `researchy`, `scholarqa`) or `hf:owner/name[:split]`.
        data_dir: Folder searched for the benchmarks' local files before the hub.
        limit: Keep the first `limit` questions (DeepResearchGym uses the first 100, ScholarQABench 50).
    """
    path = Path(spec).expanduser()
    if path.exists():
        questions = load_eco_questions(path) if path.is_dir() else load_question_file(path)
    elif spec.startswith("hf:"):
        name, _, split = spec[3:].partition(":")
        questions = load_hf_questions(name, split or "test", limit)
    elif spec in LOCAL_FILES:
        local = [Path(data_dir) / f for f in LOCAL_FILES[spec]] if data_dir else []
        found = next((p for p in local if p.exists()), None)
        if found is not None:
            questions = load_question_file(found)
        elif spec in HF_DATASETS:
            logger.info("no local %s questions under %s; trying the hub", spec, data_dir)
            questions = load_hf_questions(*HF_DATASETS[spec], limit=limit)
        else:
            raise QuestionsError(f"{spec} questions not found under {data_dir}; pass the data folder or the CSV path")
    else:
        raise QuestionsError(
            f"unknown question set {spec!r}; pass a file or one of: {', '.join(LOCAL_FILES)}, hf:owner/name"
        )
    return questions[:limit] if limit else questions
