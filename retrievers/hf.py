"""Corpora from Hugging Face `datasets`: a hub name (with config and split) or a local path."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from deepresearch.retrievers.corpus import Corpus, CorpusError, doc_from_record
from deepresearch.retrievers.extras import require

logger = logging.getLogger(__name__)

# Doc attributes (and metadata keys) a field mapping may name: each becomes the record key of that name.
MAPPABLE = ("doc_id", "title", "text", "url", "published", "year", "categories", "authors")
_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".tsv": "csv"}


def hub_config(datasets, name: str, config: str | None, split: str, wanted: str) -> tuple[str | None, str]:
    """The configuration and split to read from a hub dataset (or a local copy in the hub's layout).

    BEIR datasets on the hub (`BeIR/scifact`) have no default configuration: the documents are the `corpus`
    configuration and the claims the `queries` one, each with one split of the same name. With no
    configuration given, `wanted` is taken when the dataset has it; a split the configuration lacks is
    replaced by its only split. Anything else is left to `datasets`, which names what it has.

    Args:
        datasets: The imported `datasets` module.
        name: A hub name or a local folder.
        config: The configuration asked for, or None.
        split: The split asked for.
        wanted: The configuration that holds what the caller reads (`corpus` or `queries`).
    """
    if config is None:
        configs = datasets.get_dataset_config_names(name)
        if wanted in configs and "default" not in configs:
            config = wanted
            logger.info("dataset %s: reading its %r configuration", name, config)
    if config is not None:
        splits = datasets.get_dataset_split_names(name, config)
        if split not in splits and len(splits) == 1:
            logger.info("dataset %s [%s] has no split %r; reading its only split %r", name, config, split, splits[0])
            split = splits[0]
    return config, split


def _open_dataset(name: str, config: str | None, split: str):
    datasets = require("datasets", "hf", "Hugging Face corpora (hf:NAME or a dataset file)")

    path = Path(name).expanduser()
    try:
        if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
            data = datasets.load_from_disk(str(path))
            return data[split] if isinstance(data, datasets.DatasetDict) else data
        if path.is_file():
            builder = _BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise CorpusError(f"cannot read {path} as a dataset; use one of: {', '.join(_BUILDERS)}")
            kwargs = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
            return datasets.load_dataset(builder, data_files=str(path), split="train", **kwargs)
        config, split = hub_config(datasets, name, config, split, "corpus")
        return datasets.load_dataset(name, config, split=split)
    except CorpusError:
        raise
    except (FileNotFoundError, ValueError, ConnectionError, KeyError) as err:
        raise CorpusError(
            f"cannot load dataset {name!r} (config {config!r}, split {split!r}): {err}; check the "
            f"name, config and split, or pass a local path"
        ) from err


def load_hf_corpus(
    name: str,
    config: str | None = None,
    split: str = "train",
    fields: Mapping[str, str] | None = None,
    skip_bad: bool = False,
) -> Corpus:
    """Loads a corpus from a Hugging Face dataset.

    Args:
        name: A hub dataset name (`BeIR/scifact`), a folder written by `save_to_disk`, or a data file.
        config: The dataset configuration; default: `corpus` when the dataset has one and no default
            configuration, as BEIR datasets on the hub (`hub_config`).
        split: The split to read (a configuration with one split, such as BEIR's `corpus`, gives that one).
        fields: Doc attribute -> column, e.g. {"doc_id": "arxiv_id", "text": "abstract"}. Columns not
            mapped are recognised by the usual names (`_id`, `title`, `text`, `abstract`...).
        skip_bad: Skip rows without an id or text (counted in a warning) instead of raising.

    Raises:
        CorpusError: for an unknown attribute or column in `fields`, a bad row (row number named), or no rows.
    """
    fields = dict(fields or {})
    unknown = set(fields) - set(MAPPABLE)
    if unknown:
        raise CorpusError(
            f"unknown field {sorted(unknown)[0]!r} in the field mapping; map any of: {', '.join(MAPPABLE)}"
        )
    rows = _open_dataset(name, config, split)
    missing = [col for col in fields.values() if col not in rows.column_names]
    if missing:
        raise CorpusError(f"dataset {name!r} has no column {missing[0]!r}; columns: {', '.join(rows.column_names)}")
    mapped_columns = set(fields.values())
    docs, skipped = [], 0
    for n, row in enumerate(rows):
        record = {k: v for k, v in row.items() if k not in mapped_columns}
        record.update({attr: row[col] for attr, col in fields.items()})
        try:
            docs.append(doc_from_record(record, f"{name} [{split}] row {n}"))
        except CorpusError:
            if not skip_bad:
                raise
            skipped += 1
    if skipped:
        logger.warning("skipped %d bad rows in %s", skipped, name)
    return Corpus(docs, name=Path(name).name or name)
