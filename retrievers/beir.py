"""BEIR query sets: `queries.jsonl` (`_id`, `text`) and `qrels/<split>.tsv` (query-id, corpus-id, score)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from deepresearch.retrievers.corpus import CorpusError


def load_queries(folder: str | Path) -> dict[str, str]:
    """Query id -> query text from a BEIR folder's `queries.jsonl` (a CSFCube-style `title` is prefixed)."""
    path = Path(folder) / "queries.jsonl"
    if not path.exists():
        raise CorpusError(f"queries not found at {path}; pass a BEIR folder containing queries.jsonl")
    queries = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                queries[str(record["_id"])] = str(record["text"])
            except (json.JSONDecodeError, KeyError) as err:
                raise CorpusError(
                    f"{path}:{n}: expected a JSON object with _id and text; fix or remove the line"
                ) from err
    return queries


def load_qrels(folder: str | Path, split: str = "test") -> dict[str, dict[str, int]]:
    """Query id -> {corpus id: graded relevance} from `qrels/<split>.tsv` (header line skipped)."""
    path = Path(folder) / "qrels" / f"{split}.tsv"
    if not path.exists():
        available = sorted(p.stem for p in (Path(folder) / "qrels").glob("*.tsv"))
        raise CorpusError(f"qrels split {split!r} not found at {path}; available: {', '.join(available) or 'none'}")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t"), start=1):
            if n == 1 and row and not row[-1].lstrip("-").isdigit():
                continue  # header
            if len(row) < 3:
                raise CorpusError(f"{path}:{n}: expected query-id, corpus-id, score separated by tabs")
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels
