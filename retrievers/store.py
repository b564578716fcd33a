"""On-disk tables an index opens without reading them whole: sorted strings and a corpus of documents.

Both are memory-mapped, so opening costs the same for 5,000 documents as for 570,000: nothing is parsed
until it is asked for, and the operating system pages in only what a query touches.

Layout (file names under one folder, each with a prefix):
    {prefix}.bin        the strings' UTF-8 bytes, sorted by those bytes, back to back
    {prefix}.offsets.npy  int64, n + 1: string i is bin[offsets[i]:offsets[i + 1]]
    {prefix}.values.npy   int64, n: the value (a row, a corpus position) of string i

    docs.jsonl          one JSON array per document: [doc_id, title, text, url, year, published, metadata]
    docs.offsets.npy    int64, n + 1: document i is docs.jsonl[offsets[i]:offsets[i + 1]]
    docs.months.npy     int32, n: each document's publication month as YYYYMM (0 unknown), for date filters
    ids.*               a string table: doc id -> corpus position
"""

from __future__ import annotations

import bisect
import json
import mmap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from deepresearch.retrievers.corpus import Corpus, CorpusError
from deepresearch.retrievers.ranking import month_key
from deepresearch.retrievers.types import Doc


def _map(path: Path) -> mmap.mmap | bytes:
    """A read-only memory map of the file (an empty file maps to b"")."""
    with path.open("rb") as f:
        if f.seek(0, 2) == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class StringTable(Mapping[str, int]):
    """A read-only str -> int mapping on disk, found by binary search over sorted UTF-8 bytes.

    Opening maps three files and reads none of them; a lookup touches about log2(n) strings.
    Iteration yields the keys in order of their values (the order they were given to `write`).
    """

    def __init__(self, folder: str | Path, prefix: str):
        folder = Path(folder)
        self._bytes = _map(folder / f"{prefix}.bin")
        self._offsets = np.load(folder / f"{prefix}.offsets.npy", mmap_mode="r")
        self._values = np.load(folder / f"{prefix}.values.npy", mmap_mode="r")
        self._at = memoryview(self._offsets)  # plain ints, no numpy scalars
        self._n = int(self._values.size)

    @staticmethod
    def write(folder: str | Path, prefix: str, keys: Iterable[str]) -> None:
        """Writes `keys` (distinct), each mapped to its position in the iteration."""
        folder = Path(folder)
        encoded = [k.encode("utf-8") for k in keys]
        order = sorted(range(len(encoded)), key=encoded.__getitem__)
        lengths = np.fromiter((len(encoded[i]) for i in order), dtype=np.int64, count=len(order))
        with (folder / f"{prefix}.bin").open("wb") as f:
            f.writelines(encoded[i] for i in order)
        np.save(folder / f"{prefix}.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        np.save(folder / f"{prefix}.values.npy", np.asarray(order, dtype=np.int64))

    def _key(self, i: int) -> bytes:
        return self._bytes[self._at[i] : self._at[i + 1]]

    def get(self, key: str, default=None):
        wanted = key.encode("utf-8")
        lo = bisect.bisect_left(range(self._n), wanted, key=self._key)
        if lo < self._n and self._key(lo) == wanted:
            return int(self._values[lo])
        return default

    def __getitem__(self, key: str) -> int:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[str]:
        for i in np.argsort(self._values, kind="stable").tolist():
            yield self._key(i).decode("utf-8")


def _record(doc: Doc) -> list:
    return [doc.doc_id, doc.title, doc.text, doc.url, doc.year, doc.published, dict(doc.metadata)]


def write_docs(corpus: Sequence[Doc], folder: str | Path) -> None:
    """Writes the documents of `corpus`, in order, as `StoredCorpus` reads them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    offsets = np.zeros(len(corpus) + 1, dtype=np.int64)
    months = np.zeros(len(corpus), dtype=np.int32)
    with (folder / "docs.jsonl").open("wb") as f:
        for i, doc in enumerate(corpus):
            line = (
                json.dumps(_record(doc), ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n"
            )
            f.write(line)
            offsets[i + 1] = offsets[i] + len(line)
            months[i] = month_key(doc.published)
    np.save(folder / "docs.offsets.npy", offsets)
    np.save(folder / "docs.months.npy", months)
    StringTable.write(folder, "ids", (d.doc_id for d in corpus))


class StoredCorpus(Corpus):
    """A corpus whose documents stay on disk (written by `write_docs`) and are parsed one at a time.

    Behaves like `Corpus` (len, index, iteration, `get`, `index_of`, `in`); opening reads no document.
    `fingerprint()` returns the fingerprint recorded when the documents were written, since computing it
    would read them all; `deepresearch.retrievers.index.open_index(verify=True)` recomputes it from the corpus source.

    Args:
        folder: What `write_docs` wrote.
        name: The corpus name, for messages and traces.
        fingerprint: The `Corpus.fingerprint()` of the documents written.
    """

    def __init__(self, folder: str | Path, name: str, fingerprint: str):  # no super().__init__: nothing to load
        self.folder = Path(folder)
        self.name = name
        self._fingerprint = fingerprint
        self._bytes = _map(self.folder / "docs.jsonl")
        self._offsets = np.load(self.folder / "docs.offsets.npy", mmap_mode="r")
        self._at = memoryview(self._offsets)
        self._months = np.load(self.folder / "docs.months.npy", mmap_mode="r")
        self._ids = StringTable(self.folder, "ids")
        self._n = int(self._months.size)
        if self._n == 0:
            raise CorpusError(f"the document store in {self.folder} is empty; rebuild the index")

    @property  # `Corpus.docs` is the list of documents; this read-only sequence stands in for it
    def docs(self) -> StoredCorpus:  # type: ignore[override]  # a Doc sequence, not a list (the override is deliberate)
        return self

    def _doc(self, i: int) -> Doc:
        return Doc(*json.loads(self._bytes[self._at[i] : self._at[i + 1]]))  # the fields in `_record`'s order

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._doc(j) for j in range(*i.indices(self._n))]
        i = int(i)
        if not -self._n <= i < self._n:
            raise IndexError(f"document {i} out of range for a corpus of {self._n}")
        return self._doc(i % self._n)

    def __iter__(self) -> Iterator[Doc]:
        for i in range(self._n):
            yield self._doc(i)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._ids

    def get(self, doc_id: str) -> Doc | None:
        i = self._ids.get(doc_id)
        return None if i is None else self._doc(i)

    def index_of(self, doc_id: str) -> int:
        return self._ids[doc_id]

    def month_keys(self) -> np.ndarray:
        return self._months

    def fingerprint(self) -> str:
        return self._fingerprint
