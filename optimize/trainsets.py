"""Training and development sets as `dspy.Example`s, with explicit inputs and held-out dev splits."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import dspy

from deepresearch.eval.querysets import load_queryset
from deepresearch.eval.taxobench import load_taxobench
from deepresearch.retrievers.beir import load_qrels, load_queries
from deepresearch.retrievers.corpus import Corpus
from deepresearch.signatures.types import Source, Task


class TrainsetError(ValueError):
    """A training file that cannot be used, with the file and what to fix."""


def from_beir(folder: str | Path, split: str = "train", corpus: Corpus | None = None) -> list[dspy.Example]:
    """Questions with their relevant documents from a BEIR folder (SciFact claims, CSFCube facets).

    Queries without a relevant document in `split` are left out. With `corpus`, titles are attached
    (used in GEPA feedback).
    """
    queries, qrels = load_queries(folder), load_qrels(folder, split)
    examples = []
    for qid in sorted(qrels, key=lambda q: (len(q), q)):
        relevant = sorted(d for d, grade in qrels[qid].items() if grade > 0)
        if qid not in queries or not relevant:
            continue
        titles = {d: doc.title for d in relevant if corpus is not None and (doc := corpus.get(d))}
        example = dspy.Example(question=queries[qid], relevant_ids=relevant, titles=titles, query_id=qid)
        examples.append(example.with_inputs("question"))
    return examples


def from_jsonl(path: str | Path) -> list[dspy.Example]:
    """User questions: one JSON object per line with `question` and optional `references` (document ids)."""
    path = Path(path)
    if not path.exists():
        raise TrainsetError(f'training file not found: {path}; pass a JSONL file of {{"question": ...}} lines')
    examples = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            question = record["question"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise TrainsetError(f"{path}:{n}: expected a JSON object with a question; fix or remove the line") from err
        refs = [str(r) for r in record.get("references", [])]
        key_points = [str(k) for k in record.get("key_points", [])]  # for the kpr and quality metrics
        examples.append(
            dspy.Example(
                question=question,
                relevant_ids=refs,
                titles={},
                key_points=key_points,
                query_id=str(record.get("id", n)),
            ).with_inputs("question")
        )
    if not examples:
        raise TrainsetError(f"{path} has no questions")
    return examples


def split_dev(examples: list[dspy.Example], dev_fraction: float = 0.3, seed: int = 0) -> tuple[list, list]:
    """A seeded (train, dev) split; dev gets at least one example when there are two or more."""
    if not 0 < dev_fraction < 1:
        raise ValueError(f"dev_fraction must be between 0 and 1, got {dev_fraction}")
    order = list(examples)
    random.Random(seed).shuffle(order)
    n_dev = max(1, round(len(order) * dev_fraction)) if len(order) > 1 else 0
    return order[n_dev:], order[:n_dev]


def fingerprint(examples: list[dspy.Example]) -> str:
    """A short hash of the examples' inputs and labels, recorded with compiled programs."""
    h = hashlib.sha1()
    for ex in examples:
        h.update(
            json.dumps(
                {k: ex[k] for k in sorted(ex.keys()) if k not in ("sources", "passages", "recorded")},
                sort_keys=True,
                default=str,
            ).encode()
        )
    return h.hexdigest()[:12]


# --- frozen candidates: the assessor's inputs, recorded once and replayed ---------------------------


def candidates_to_jsonl(examples: list[dspy.Example], path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for ex in examples:
            sources = [s.model_dump() for s in ex.sources]
            row = {"task": ex.task.model_dump(), "sources": sources, "relevant_ids": list(ex.relevant_ids)}
            f.write(json.dumps({**row, "scores": ex.get("scores")}) + "\n")


def candidates_from_jsonl(path: str | Path) -> list[dspy.Example]:
    """Assessor examples (task, sources -> relevant source ids) from a recorded candidates file."""
    path = Path(path)
    if not path.exists():
        raise TrainsetError(f"candidates file not found: {path}; record one with --record-candidates")
    examples = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                r = json.loads(line)
                examples.append(
                    dspy.Example(
                        task=Task(**r["task"]),
                        sources=[Source(**s) for s in r["sources"]],
                        relevant_ids=r["relevant_ids"],
                        scores=r.get("scores"),  # retrieval scores; None in files recorded before they were kept
                    ).with_inputs("task", "sources", "scores")
                )
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise TrainsetError(f"{path}:{n}: not a recorded candidate pool; re-record the file") from err
    return examples


# --- gathering (ScholarGym) and taxonomy (TaxoBench) examples -----------------------------------------


def from_queryset(
    spec: str | Path, split: str | None = None, limit: int | None = None, data_dir: str | Path | None = None
) -> list[dspy.Example]:
    """Gathering examples from a ScholarGym file/dataset or a BEIR folder (a name is looked up in `data_dir`, as
    `deepresearch.eval.querysets.load_queryset` does); queries without ground truth are left out."""
    queries = [q for q in load_queryset(spec, split, data_dir=data_dir) if q.gt_ids]
    return [
        dspy.Example(
            question=q.query, date_constraint=q.date_constraint, gt_ids=list(q.gt_ids), query_id=q.query_id
        ).with_inputs("question", "date_constraint")
        for q in queries[:limit]
    ]


def examples(
    name: str | Path, split: str, limit: int | None = None, *, data_dir: str | Path | None = None
) -> list[dspy.Example]:
    """A benchmark's questions as `dspy.Example`s, for `compile` and `dspy.Evaluate`.

    Each example's input is `question`; its labels are the gold paper ids (`relevant_ids`), the question's
    `date_constraint` (empty where the benchmark has none) and `query_id`. `name` is what the evaluation
    harness reads: `scifact` (bundled), a BEIR folder, a ScholarGym file or dataset, or a name in `data_dir`.
    Questions without a gold paper are left out.

    Example:
        >>> train = dr.examples("scifact", "train", limit=40)    # doctest: +SKIP
        >>> train[0].question, train[0].relevant_ids              # doctest: +SKIP
    """
    queries = [q for q in load_queryset(name, split, data_dir=data_dir) if q.gt_ids]
    return [
        dspy.Example(
            question=q.query, relevant_ids=list(q.gt_ids), date_constraint=q.date_constraint or "", query_id=q.query_id
        ).with_inputs("question")
        for q in queries[:limit]
    ]


def from_frozen_cases(cases) -> list[dspy.Example]:
    """Assessor examples from the candidates a gathering run recorded (`deepresearch.eval.run_gather.load_frozen_cases`)."""
    return [
        dspy.Example(
            question=c.question,
            subquery=c.subquery,
            checklist=c.checklist,
            hits=list(c.hits),
            gt_ids=list(c.gt_ids),
            query_id=c.query_id,
        ).with_inputs("question", "subquery", "checklist", "hits")
        for c in cases
    ]


def from_taxobench(source: str | Path, limit: int | None = None) -> list[dspy.Example]:
    """Bottom-up taxonomy examples: a survey's topic and papers in, its expert tree as the label."""
    return [
        dspy.Example(topic=s.topic, papers=list(s.papers), gt=s.gt, survey_id=s.survey_id).with_inputs(
            "topic", "papers"
        )
        for s in load_taxobench(source, limit=limit)
    ]
