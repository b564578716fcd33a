"""TaxoBench loaders: benchmark instances (local JSONL or the Hugging Face dataset) and prediction files."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearch.retrievers.extras import require

logger = logging.getLogger(__name__)

HF_DATASET = "konglongge/TaxoBench"
PROFILES = ("paper", "public_scorer")  # how predicted titles are aligned with the expert papers (eval/taxonomy.py)
LOCAL_FILES = ("data.jsonl", "data_subset.jsonl")


class TaxoBenchError(ValueError):
    """A benchmark or prediction file that cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class Survey:
    """One benchmark instance: a survey topic, its expert-cited papers and the expert taxonomy."""

    survey_id: int
    topic: str
    papers: tuple[dict[str, str], ...]
    gt: dict[str, Any]


def survey_from_record(record: dict[str, Any], where: str) -> Survey:
    missing = [k for k in ("id", "gt") if k not in record]
    if missing:
        raise TaxoBenchError(f"{where} lacks {', '.join(missing)}; TaxoBench instances need id, survey_topic, pdfs, gt")
    topic = record.get("survey_topic") or record.get("survey") or record["gt"].get("name", "")
    papers = tuple(
        {"title": p.get("title", ""), "abs": p.get("abs") or p.get("abstract") or ""}
        for p in record.get("pdfs") or []
        if isinstance(p, dict) and p.get("title")
    )
    return Survey(survey_id=int(record["id"]), topic=topic, papers=papers, gt=record["gt"])


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise TaxoBenchError(f"{path} line {n} is not JSON ({err.msg}); fix or remove the line") from err
    return rows


def load_taxobench(source: str | Path = HF_DATASET, limit: int | None = None) -> list[Survey]:
    """Benchmark instances from a JSONL file, a folder holding data.jsonl (or data_subset.jsonl), or the
    Hugging Face dataset `konglongge/TaxoBench` (needs network or a local datasets cache).

    Raises:
        TaxoBenchError: when the source is missing or malformed.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        found = [path / name for name in LOCAL_FILES if (path / name).exists()]
        if not found:
            raise TaxoBenchError(f"no {' or '.join(LOCAL_FILES)} in {path}; pass the benchmark JSONL file")
        path = found[0]
    if path.is_file():
        records = _read_jsonl(path)
        where = str(path)
    elif "/" in str(source) and not str(source).startswith((".", "/", "~")):
        records, where = _load_hub(str(source)), str(source)
    else:
        raise TaxoBenchError(
            f"TaxoBench data not found: {source}; pass a JSONL file, a folder with data.jsonl, "
            f"or the dataset name {HF_DATASET}"
        )
    surveys = [survey_from_record(r, f"{where} record {i + 1}") for i, r in enumerate(records)]
    return surveys[:limit] if limit else surveys


def _load_hub(name: str) -> list[dict[str, Any]]:
    datasets = require("datasets", "hf", "loading TaxoBench from the hub")

    try:
        ds = datasets.load_dataset(name)
    except Exception as err:
        raise TaxoBenchError(
            f"cannot load {name} from the Hugging Face hub ({type(err).__name__}); go online "
            f"or pass a local TaxoBench JSONL file"
        ) from err
    split = ds["train"] if "train" in ds else ds[next(iter(ds))]
    rows = []
    for row in split:
        row = dict(row)
        if isinstance(row.get("gt"), str):  # trees may be stored as JSON text
            row["gt"] = json.loads(row["gt"])
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Prediction:
    """A system's output for one survey in TaxoBench's scorer format."""

    survey_id: int
    tree: Any
    retrieved_papers: tuple[str, ...] | None = None


def load_predictions(path: str | Path) -> dict[int, Prediction]:
    """Predictions keyed by survey id from a JSONL of {"id", "hierarchy_tree", optional "retrieved_papers"}."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise TaxoBenchError(f"prediction file not found: {path}; pass a JSONL with id and hierarchy_tree per line")
    out: dict[int, Prediction] = {}
    for n, row in enumerate(_read_jsonl(path), 1):
        if "id" not in row or "hierarchy_tree" not in row:
            raise TaxoBenchError(f"{path} line {n} lacks id or hierarchy_tree; each line needs both")
        tree = row["hierarchy_tree"]
        if isinstance(tree, str) and tree.strip().startswith(("{", "[")):
            try:
                tree = json.loads(tree)
            except json.JSONDecodeError:
                logger.warning("survey %s: hierarchy_tree is unparseable text; scored as a failed tree", row["id"])
        retrieved = row.get("retrieved_papers")
        if int(row["id"]) in out:
            logger.warning("survey %s predicted twice in %s; keeping the last", row["id"], path)
        out[int(row["id"])] = Prediction(
            int(row["id"]), tree, tuple(retrieved) if isinstance(retrieved, list) else None
        )
    return out
