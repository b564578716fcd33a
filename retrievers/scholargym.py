"""ScholarGym's paper database: a JSON object keyed by paper id, read as a stream.

Each value has `arxiv_id`, `title`, `abstract`, `authors`, a publication date (`published` or `date`),
`categories` and usually `url`. The file is about 860 MB, so it is decoded one paper at a time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

from deepresearch.retrievers.corpus import Corpus, CorpusError, doc_from_record, read_jsonl
from deepresearch.retrievers.types import Doc

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20
_WHITESPACE = " \t\r\n"


def iter_json_object(path: Path, chunk_size: int = _CHUNK) -> Iterator[tuple[str, object]]:
    """Yields the (key, value) pairs of a top-level JSON object without holding the whole file."""
    decoder = json.JSONDecoder()
    with path.open(encoding="utf-8") as f:
        buf, pos, at_eof = f.read(chunk_size), 0, False

        def more() -> bool:
            nonlocal buf, pos, at_eof
            chunk = f.read(chunk_size)
            buf, pos = buf[pos:] + chunk, 0
            at_eof = not chunk
            return bool(chunk)

        def skip(chars: str) -> None:
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in chars:
                    pos += 1
                if pos < len(buf) or not more():
                    return

        def decode():
            nonlocal pos
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as err:
                    if at_eof or not more():
                        raise CorpusError(
                            f"{path}: not a JSON object of papers near character {err.pos} "
                            f"({err.msg}); check the file is complete"
                        ) from err
                    continue
                if end == len(buf) and not at_eof and more():
                    continue  # a number or literal may continue in the next chunk
                pos = end
                return value

        skip(_WHITESPACE)
        if buf[pos : pos + 1] != "{":
            raise CorpusError(
                f"{path}: expected a JSON object keyed by paper id; for one paper per line use a .jsonl file"
            )
        pos += 1
        while True:
            skip(_WHITESPACE + ",")
            if buf[pos : pos + 1] == "}":
                return
            if pos >= len(buf):
                raise CorpusError(f"{path}: the JSON object is not closed; check the file is complete")
            key = decode()
            skip(_WHITESPACE)
            if buf[pos : pos + 1] != ":":
                raise CorpusError(f"{path}: expected ':' after key {key!r}; check the file is valid JSON")
            pos += 1
            skip(_WHITESPACE)
            yield str(key), decode()


def paper_to_doc(key: str, paper: object, where: str) -> Doc:
    """A Doc from one paper record; the id is `arxiv_id`, else the key."""
    if not isinstance(paper, dict):
        raise CorpusError(f"{where}: paper {key!r} is a {type(paper).__name__}, expected an object; fix or remove it")
    record = dict(paper)
    record.setdefault("arxiv_id", key)
    if record.get("published") is None and record.get("date") is not None:
        record["published"] = record.pop("date")
    return doc_from_record(record, where)


def load_paper_db(path: str | Path, skip_bad: bool = False) -> Corpus:
    """Loads ScholarGym's paper DB (`scholargym_paper_db.json`, or the same records one per line as JSONL).

    Raises:
        CorpusError: for a missing file, malformed JSON, a paper without id or abstract (named), or no papers.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise CorpusError(f"paper DB not found at {path}; download scholargym_paper_db.json from shenhao/ScholarGym")
    if path.suffix == ".jsonl":
        docs, _ = read_jsonl(path, skip_bad=skip_bad)
        return Corpus(docs, name=path.stem)
    docs, skipped = [], 0
    for n, (key, paper) in enumerate(iter_json_object(path), start=1):
        try:
            docs.append(paper_to_doc(key, paper, f"{path} paper {n}"))
        except CorpusError:
            if not skip_bad:
                raise
            skipped += 1
    if skipped:
        logger.warning("skipped %d bad papers in %s", skipped, path)
    return Corpus(docs, name=path.stem)
