"""Query sets with ground truth for the gathering runner: ScholarGym's benchmark file and BEIR folders.

ScholarGym lines come in two shapes and both are read: the released file (`qid`, `query`, `cited_paper`,
`gt_label`, `date`, `source`, `valid`; ground truth = cited papers labelled 1) and the README's form
(`query_id`, `query`, `gt_arxiv_ids`, `date_constraint`, `source`, `split`). BEIR query sets take their
ground truth from `qrels/<split>.tsv` (score >= `min_relevance`). Splits never mix: a run reads one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from deepresearch.retrievers.beir import load_qrels, load_queries
from deepresearch.retrievers.corpus import CorpusError
from deepresearch.retrievers.extras import require
from deepresearch.retrievers.sources import find_local, not_found_message

HF_DATASET = "shenhao/ScholarGym"
SCHOLARGYM_SPLITS = ("all", "test", "dev")


class QuerySetError(ValueError):
    """A query set that cannot be read or split, naming the file or split and what to do."""


@dataclass(frozen=True)
class GatherQuery:
    """One research query and the papers that answer it."""

    query_id: str
    query: str
    gt_ids: tuple[str, ...]
    date_constraint: str | None = None
    source: str = ""
    split: str = ""


def parse_scholargym(record: dict, where: str) -> GatherQuery:
    """One benchmark line in either shape."""
    try:
        if "cited_paper" in record:
            labels = record.get("gt_label") or [1] * len(record["cited_paper"])
            gt = tuple(str(p["arxiv_id"]) for p, label in zip(record["cited_paper"], labels) if label == 1)
            query_id = str(record["qid"])
            date = record.get("date")
        else:
            gt = tuple(str(x) for x in record["gt_arxiv_ids"])
            query_id = str(record["query_id"])
            date = record.get("date_constraint")
        return GatherQuery(
            query_id=query_id,
            query=str(record["query"]),
            gt_ids=gt,
            date_constraint=date or None,
            source=str(record.get("source", "")),
            split=str(record.get("split") or ("dev" if "_dev_" in query_id else "test")),  # `..._dev_N` is dev
        )
    except (KeyError, TypeError) as err:
        raise QuerySetError(
            f"{where}: expected qid/query/cited_paper/gt_label or query_id/query/gt_arxiv_ids "
            f"(missing {err}); fix or remove the line"
        ) from err


def load_scholargym(source: str | Path, split: str = "all") -> list[GatherQuery]:
    """ScholarGym queries of one split, from a local file or from the Hugging Face dataset when online.

    Args:
        source: A JSONL path, or `shenhao/ScholarGym` (read with `datasets`; needs the network or its cache).
        split: `all`, `test` or `dev`.
    """
    if split not in SCHOLARGYM_SPLITS:
        raise QuerySetError(f"unknown ScholarGym split {split!r}; choose one of: {', '.join(SCHOLARGYM_SPLITS)}")
    if Path(source).expanduser().exists():  # a local file: the benchmark, or a subset such as test_fast.jsonl
        path = Path(source).expanduser()
        queries = []
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise QuerySetError(
                            f"{path}:{n}: line is not valid JSON ({err.msg}); fix or remove it"
                        ) from err
                    queries.append(parse_scholargym(record, f"{path}:{n}"))
    elif str(source) == HF_DATASET:
        queries = _from_hub(str(source))
    else:
        raise QuerySetError(f"query file not found: {source}; pass a ScholarGym JSONL file or {HF_DATASET}")
    return queries if split == "all" else [q for q in queries if q.split == split]


def _from_hub(name: str) -> list[GatherQuery]:
    load_dataset = require("datasets", "hf", "loading a query set from the hub").load_dataset

    try:
        data = load_dataset(name, data_files="scholargym_bench.jsonl", split="train")
    except Exception as err:  # offline, or the file moved: say what to do instead
        raise QuerySetError(
            f"could not load {name} from the Hugging Face hub ({type(err).__name__}); "
            f"download scholargym_bench.jsonl and pass its path"
        ) from err
    return [parse_scholargym(dict(r), f"{name}[{i}]") for i, r in enumerate(data)]


def load_beir_queryset(folder: str | Path, qrels: str = "test", min_relevance: int = 1) -> list[GatherQuery]:
    """The queries judged in `qrels/<qrels>.tsv` of a BEIR folder, each with the documents scored at least
    `min_relevance` (CSFCube grades 0-3, so 1 keeps every relevant grade). A judged query with no relevant
    document stays in the set with empty ground truth, to be skipped and counted."""
    texts = load_queries(folder)
    judged = load_qrels(folder, qrels)
    missing = [q for q in judged if q not in texts]
    if missing:
        raise CorpusError(f"{len(missing)} qrels queries (e.g. {missing[0]!r}) are not in {folder}/queries.jsonl")
    source = Path(folder).name
    return [
        GatherQuery(
            query_id=q,
            query=texts[q],
            gt_ids=tuple(d for d, s in docs.items() if s >= min_relevance),
            source=source,
            split=qrels,
        )
        for q, docs in judged.items()
    ]


def find_queryset(spec: str | Path, data_dir: str | Path | None = None) -> tuple[str, Path | str]:
    """What a query-set spec names, found as corpora are (`deepresearch.retrievers.sources`): ("beir", folder) for a
    folder with queries.jsonl, ("scholargym", file) for a JSONL file or a folder holding one benchmark file
    (the data folder's `scholargym`), ("scholargym", name) for the hub dataset.

    Raises:
        QuerySetError: for a spec that names nothing usable.
    """
    path = find_local(spec, data_dir)
    if path is None:
        if str(spec) == HF_DATASET:
            return "scholargym", HF_DATASET
        raise QuerySetError(not_found_message(str(spec), data_dir, what="query file"))
    if path.is_file():
        return "scholargym", path
    if (path / "queries.jsonl").exists():
        return "beir", path
    files = sorted(path.glob("*.jsonl"))
    if len(files) == 1:
        return "scholargym", files[0]
    raise QuerySetError(
        f"{path} holds no queries.jsonl (BEIR) and not exactly one ScholarGym .jsonl file "
        f"(found {len(files)}); pass the file itself"
    )


def load_queryset(
    spec: str | Path, split: str | None = None, min_relevance: int = 1, data_dir: str | Path | None = None
) -> list[GatherQuery]:
    """A BEIR folder (split = its qrels file, default `test`) or a ScholarGym file/dataset (default `all`),
    named as `find_queryset` reads it (`scifact`, `BeIR/scifact` and `shenhao/ScholarGym` find the local
    copies in `data_dir`)."""
    kind, found = find_queryset(spec, data_dir)
    if kind == "beir":
        return load_beir_queryset(found, split or "test", min_relevance)
    return load_scholargym(found, split or "all")
