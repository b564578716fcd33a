"""BM25 over a Corpus, computed on a sparse term-by-document matrix of weights.

Scores equal rank-bm25's `BM25Okapi` (method "okapi"); a query is a sum of the matrix rows of its
terms, each row counted as often as the term repeats in the query. A weight is idf(t) times a saturated
tf, and the saturated tf depends only on the pair (tf, document length), of which a corpus has few
(5,849 among the 57 million postings of 570,205 abstracts). So a posting stores its document (int32) and
the code of its pair (uint16, uint32 past 65,536 pairs): 6 bytes instead of 12 with a float64 weight, and
each weight is made again as idf(t) · level[code], the float operation the build used, so scores keep
every bit. `search` finds the exact top k without always reading every posting of every term (MaxScore,
see `BM25Retriever._best_pruned`), and when it does read them all, scores the corpus a block of documents
at a time (`_best_in_blocks`).
"""

from __future__ import annotations

import functools
import json
import logging
import tempfile
from array import array
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np
from scipy import sparse

from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.ranking import (
    FilterIndex,
    best_among,
    best_positive,
    check_page,
    nth_largest,
    nth_largest_positive,
    ranked_hits,
    score_sample,
)
from deepresearch.retrievers.scoring import IDF, tf_saturation
from deepresearch.retrievers.settings import TEXT_FORMATS
from deepresearch.retrievers.store import StringTable
from deepresearch.retrievers.tokenize import Tokenizer, get_tokenizer, tokenizer_name
from deepresearch.retrievers.types import Hit, SyncSearchMixin

logger = logging.getLogger(__name__)

# Version of the files `save` writes (2: one memory-mappable .npy per array, the vocabulary as a string table;
# 3: postings hold a (tf, length) code instead of a weight).
STORE_FORMAT = 3
# The arrays an index holds, each one `.npy` file.
ARRAYS = ("indptr", "indices", "codes", "levels", "idf", "doc_len", "max_weight", "dense_rows", "dense_weights")


def doc_text(title: str, text: str, text_format: str = "scholargym") -> str:
    """The text a document is indexed under (default: ScholarGym's `title: … abstract: …` form)."""
    if text_format not in TEXT_FORMATS:
        raise ValueError(f"unknown text format {text_format!r}; choose one of: {', '.join(TEXT_FORMATS)}")
    return TEXT_FORMATS[text_format].format(title=title, text=text)


# The build streams: documents are tokenized BATCH_DOCS at a time and each batch's postings (document, tf),
# grouped by term, are spilled to a temporary file; then the matrix is written BLOCK_POSTINGS postings at a
# time, in term order, straight to its arrays. Nothing proportional to the corpus's postings is held in
# memory but the output (none of it when writing to files).
BATCH_DOCS = 32_768
BLOCK_POSTINGS = 4_000_000
# Up to this many (tf, length) pairs, a posting's code is a uint16; past it, a uint32.
UINT16_CODES = 2**16


class _Column:
    """One output array of known length, filled front to back: in memory, or a `.npy` file written as it goes."""

    def __init__(self, path: Path | None, dtype, size: int):
        self.path, self.dtype, self.size, self.at = path, np.dtype(dtype), size, 0
        self.array: np.ndarray | None = np.empty(size, dtype=self.dtype) if path is None else None
        self.file: BinaryIO | None = None
        if path is not None:
            self.file = path.open("wb")
            np.lib.format.write_array_header_1_0(
                self.file, {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (size,)}
            )

    def write(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if self.file is None:
            assert self.array is not None  # no file: the column is in memory
            self.array[self.at : self.at + values.size] = values
        else:
            self.file.write(values.tobytes())
        self.at += values.size

    def result(self) -> np.ndarray:
        if self.at != self.size:
            raise RuntimeError(f"BM25 build wrote {self.at} of {self.size} values of {self.path or 'an array'}")
        if self.file is None or self.path is None:
            assert self.array is not None  # no file: the column is in memory
            return self.array
        self.file.close()
        return np.load(self.path, mmap_mode="r")


def pair_keys(tf: np.ndarray, doc_len: np.ndarray) -> np.ndarray:
    """One int64 per posting that orders (tf, document length) pairs: tf << 32 | length."""
    return (tf.astype(np.int64) << 32) | doc_len.astype(np.int64)


class _Spill:
    """Each batch's postings grouped by term on disk (document ids, then tfs), with per-term offsets in memory."""

    def __init__(self, folder: Path):
        self.docs, self.tfs = (folder / "docs.bin").open("w+b"), (folder / "tfs.bin").open("w+b")
        self.batches: list[tuple[int, np.ndarray]] = []  # (first posting in the files, offsets by term)
        self.postings = 0
        self.pairs = np.zeros(0, dtype=np.int64)  # every (tf, document length) seen, as tf << 32 | length, sorted

    def add(self, term_ids: np.ndarray, lengths: np.ndarray, first_doc: int, n_terms: int) -> np.ndarray:
        """Spills one batch of documents (their term ids back to back); returns postings per term."""
        n = max(1, lengths.size)
        local = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
        keys, tf = np.unique(term_ids.astype(np.int64) * n + local, return_counts=True)  # by term, then doc
        terms = keys // n
        per_term = np.bincount(terms, minlength=n_terms)
        local = keys % n
        (local + first_doc).astype(np.int32).tofile(self.docs)
        tf.astype(np.int32).tofile(self.tfs)
        self.pairs = np.union1d(self.pairs, pair_keys(tf, lengths[local]))
        offsets = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(per_term, out=offsets[1:])
        self.batches.append((self.postings, offsets))
        self.postings += int(keys.size)
        return per_term

    def block(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Terms, documents and tfs of the postings of terms lo..hi-1, by term then document."""
        terms: list[np.ndarray] = []
        docs: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        for base, offsets in self.batches:
            top = offsets.size - 1
            a, z = min(lo, top), min(hi, top)
            start, stop = int(offsets[a]), int(offsets[z])
            if stop == start:
                continue
            terms.append(np.repeat(np.arange(a, z, dtype=np.int32), np.diff(offsets[a : z + 1])))
            for out, f in ((docs, self.docs), (tfs, self.tfs)):
                f.seek(4 * (base + start))
                out.append(np.fromfile(f, dtype=np.int32, count=stop - start))
        if not terms:
            empty = np.zeros(0, dtype=np.int32)
            return empty, empty, empty
        all_terms, all_docs, all_tfs = np.concatenate(terms), np.concatenate(docs), np.concatenate(tfs)
        order = np.argsort(all_terms, kind="stable")  # batches come in document order, so documents stay sorted
        return all_terms[order], all_docs[order], all_tfs[order]

    def close(self) -> None:
        self.docs.close()
        self.tfs.close()


def build_arrays(
    token_lists: Iterable[list[str]],
    n_docs: int,
    k1: float,
    b: float,
    epsilon: float,
    method: str = "okapi",
    dtype=np.float64,
    folder: Path | None = None,
) -> tuple[dict[str, int], dict]:
    """The vocabulary (term -> row, first-seen order) and every array of the term-by-document matrix of
    idf(t)·saturated tf(t, d), streamed (see BATCH_DOCS); with `folder`, written there as memory-mapped `.npy`
    files (the names `BM25Retriever.save` uses), else in memory.

    Returns (vocab, arrays): arrays holds ARRAYS (CSR rows of documents ascending in indptr and indices, each
    posting's pair code in codes, the saturated tf of each code in levels, idf per term; doc_len, max_weight,
    dense_rows, dense_weights) and has_negative_weights.
    """
    vocab: dict[str, int] = {}
    doc_len = np.zeros(n_docs, dtype=np.int64)
    doc_freq = np.zeros(0, dtype=np.int64)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".bm25-build-") as tmp:
        spill = _Spill(Path(tmp))
        try:
            ids, first, i = array("i"), 0, -1
            for i, tokens in enumerate(token_lists):
                ids.extend([vocab.setdefault(t, len(vocab)) for t in tokens])
                doc_len[i] = len(tokens)
                if i + 1 - first >= BATCH_DOCS:
                    per_term = spill.add(np.frombuffer(ids, dtype=np.int32), doc_len[first : i + 1], first, len(vocab))
                    doc_freq = np.pad(doc_freq, (0, len(vocab) - doc_freq.size)) + per_term
                    ids, first = array("i"), i + 1
            if i + 1 != n_docs:
                raise ValueError(f"BM25 build was told {n_docs} documents but read {i + 1}")
            if first < n_docs:
                per_term = spill.add(np.frombuffer(ids, dtype=np.int32), doc_len[first:], first, len(vocab))
                doc_freq = np.pad(doc_freq, (0, len(vocab) - doc_freq.size)) + per_term
            del ids
            doc_freq = np.pad(doc_freq, (0, len(vocab) - doc_freq.size))
            return vocab, _write_matrix(spill, doc_freq, doc_len, k1, b, epsilon, method, dtype, folder)
        finally:
            spill.close()


def _write_matrix(
    spill: _Spill,
    doc_freq: np.ndarray,
    doc_len: np.ndarray,
    k1: float,
    b: float,
    epsilon: float,
    method: str,
    dtype,
    folder: Path | None,
) -> dict:
    n_terms, n_docs = doc_freq.size, doc_len.size
    nnz = int(doc_freq.sum())
    idf = IDF[method](doc_freq, n_docs, epsilon)
    avgdl = float(doc_len.mean()) if n_docs else 0.0
    index_type = np.int32 if nnz < 2**31 else np.int64
    indptr = np.zeros(n_terms + 1, dtype=index_type)
    np.cumsum(doc_freq, out=indptr[1:])
    dense_ids = np.flatnonzero(doc_freq >= max(1.0, DENSE_FRACTION * n_docs))
    dense_weights = np.zeros((dense_ids.size, n_docs), dtype=dtype)
    dense_at = {row: j for j, row in enumerate(dense_ids.tolist())}
    max_weight = np.zeros(n_terms)
    path = (lambda name: None) if folder is None else (lambda name: folder / f"{name}.npy")
    # the saturated tf of every (tf, length) pair, computed as the weights always were, so idf · level is
    # bit for bit the weight (t, d) had when the matrix stored it
    pairs, idf = spill.pairs, idf.astype(dtype)
    levels = tf_saturation(pairs >> 32, pairs & 0xFFFFFFFF, avgdl, k1, b).astype(dtype)
    code_type = np.uint16 if pairs.size <= UINT16_CODES else np.uint32
    indices, codes = _Column(path("indices"), np.int32, nnz), _Column(path("codes"), code_type, nnz)
    negative = False
    lo = 0
    while lo < n_terms:  # blocks of whole rows, about BLOCK_POSTINGS postings each
        hi = max(lo + 1, int(np.searchsorted(indptr, int(indptr[lo]) + BLOCK_POSTINGS, side="right")) - 1)
        hi = min(hi, n_terms)
        terms, docs, tfs = spill.block(lo, hi)
        code = np.searchsorted(pairs, pair_keys(tfs, doc_len[docs])).astype(code_type)
        weights = idf[terms] * levels[code]
        indices.write(docs)
        codes.write(code)
        if weights.size:
            negative = negative or bool(weights.min() < 0)
            starts = indptr[lo:hi].astype(np.int64) - int(indptr[lo])
            filled = np.flatnonzero(doc_freq[lo:hi])
            max_weight[lo + filled] = np.maximum.reduceat(weights, starts[filled])
            for row in dense_ids[(dense_ids >= lo) & (dense_ids < hi)].tolist():
                s = int(indptr[row] - indptr[lo])
                dense_weights[dense_at[row], docs[s : s + doc_freq[row]]] = weights[s : s + doc_freq[row]]
        lo = hi
    arrays = {
        "indptr": indptr,
        "indices": indices.result(),
        "codes": codes.result(),
        "levels": levels,
        "idf": idf,
        "doc_len": doc_len,
        "max_weight": max_weight,
        "dense_rows": dense_ids,
        "dense_weights": dense_weights,
    }
    if folder is not None:
        for name in ("indptr", "levels", "idf", "doc_len", "max_weight", "dense_rows", "dense_weights"):
            np.save(folder / f"{name}.npy", arrays[name])
            arrays[name] = np.load(folder / f"{name}.npy", mmap_mode="r")
    return {**arrays, "has_negative_weights": negative}


# A query term as search reads it: (start, end, repeat, bound, dense, idf), see `_query_terms`.
Term = tuple[int, int, int, float, int, float]
# A term in at least this fraction of the documents also gets a dense row of weights (a few dozen terms
# in English text), so adding it is one vector addition and looking it up one gather.
DENSE_FRACTION = 0.5
# A sparse term in at least n_docs / LONG documents is long: search may look it up for a few candidates
# instead of adding all its postings. Dense terms are long too.
LONG = 8
# Search counts its work in postings added. Adding a dense row counts n_docs * DENSE_COST; checking
# whether the remaining terms can be skipped, n_docs + CHECK_COST. Per candidate, a lookup in a dense
# row counts DENSE_LOOKUP, a binary search in a posting list 2 log2(n_docs), pruning and ranking RANK_COST.
DENSE_COST, CHECK_COST, DENSE_LOOKUP, RANK_COST = 0.5, 20_000, 2, 10
# A check takes its threshold from the documents in the first SEEN postings of the short terms.
SEEN = 4096
# Documents per slice when a repeated dense term is added.
DENSE_CHUNK = 65_536
# Documents scored at once when search adds every posting of every term (`_best_in_blocks`).
SCORE_BLOCK = 131_072
# Relative allowance for float rounding when a partial score plus a bound is compared with a threshold.
SLACK = 1e-9
# Postings whose weights are made at once when a posting list is added: the temporary arrays (weights and
# documents, 64 KiB each) stay small whatever the list's length, and in the processor's cache.
ADD_CHUNK = 8_192


def _leaders(
    acc: np.ndarray,
    rest: float,
    need: int,
    mask: np.ndarray | None,
    max_candidates: float,
    seen: np.ndarray,
    repeats: int,
) -> tuple[np.ndarray, float] | None:
    """Allowed documents whose partial score plus `rest` can reach the `need` best, and the threshold.

    The threshold is a score that `need` allowed documents already reach, taken from the documents in
    `seen` (where each appears at most `repeats` times) or, without them, from a sample of the scores.
    None when a document with no partial score yet could still enter the top, or when there would be
    more than about `max_candidates`.
    """
    if mask is not None:
        seen = seen[mask[seen]]
    sample = None
    if repeats and seen.size >= need * repeats:  # the need * repeats best entries hold `need` documents or more
        threshold = nth_largest(acc[seen], need * repeats)
    else:
        sample = score_sample(acc, mask)
        threshold = nth_largest_positive(sample, need)
    margin = threshold * SLACK
    if threshold - margin <= rest:
        return None
    if sample is None:
        sample = score_sample(acc, mask)
    cut = threshold - rest - margin  # below it, even all remaining terms cannot reach the threshold
    if np.count_nonzero(sample >= cut) * (acc.size / sample.size) > max_candidates:
        return None
    candidates = (acc >= cut).nonzero()[0]
    return (candidates if mask is None else candidates[mask[candidates]]), threshold


class BM25Retriever(SyncSearchMixin):
    """Okapi BM25 (k1, b, epsilon as in rank-bm25's BM25Okapi) on a sparse matrix.

    Args:
        corpus: The documents to index.
        k1: Term-frequency saturation.
        b: Length normalisation.
        epsilon: Floor for negative IDF, as a fraction of the mean IDF (method "okapi" only).
        tokenizer: A tokenizer name (`words`, `scholargym`, `english`) or a callable.
        method: "okapi" (rank-bm25's IDF with its floor) or "lucene" (Lucene's non-negative IDF).
        text_format: How title and text are joined before tokenizing (`scholargym` or `plain`).
        dtype: Float type of the idf and tf levels weights are made of; float64 keeps scores within 1e-6
            of rank-bm25.

    Ranking is score descending, ties by corpus order; documents scoring 0 are not returned.

    Example:
        >>> BM25Retriever(corpus, tokenizer="scholargym").search("sparse attention", k=5)  # doctest: +SKIP
    """

    def __init__(
        self,
        corpus: Corpus,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        tokenizer: str | Tokenizer = "words",
        *,
        method: str = "okapi",
        text_format: str = "scholargym",
        dtype=np.float64,
    ):
        self._configure(corpus, k1, b, epsilon, tokenizer, method, text_format)
        self._take(*self._build(None, dtype))

    def _build(self, folder: Path | None, dtype) -> tuple[dict[str, int], dict]:
        tokens = (self.tokenize(doc_text(d.title, d.text, self.text_format)) for d in self.corpus)
        return build_arrays(tokens, len(self.corpus), self.k1, self.b, self.epsilon, self.method, dtype, folder)

    def _take(self, vocab: Mapping[str, int], arrays: dict) -> None:
        self._index(vocab, {name: arrays[name] for name in ARRAYS}, has_negative_weights=arrays["has_negative_weights"])

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        folder: str | Path,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        tokenizer: str | Tokenizer = "words",
        *,
        method: str = "okapi",
        text_format: str = "scholargym",
        dtype=np.float64,
    ) -> BM25Retriever:
        """Builds the index straight into `folder` (what `save` writes) and returns it memory-mapped.

        The matrix is streamed to its files block by block, so the build holds in memory the vocabulary,
        one batch of documents and one block of postings, not the corpus's postings.

        Raises:
            ValueError: for an unregistered tokenizer callable (checked before any work).
        """
        retriever = cls.__new__(cls)
        retriever._configure(corpus, k1, b, epsilon, tokenizer, method, text_format)
        retriever.dtype = np.dtype(dtype)  # for params(), before the build
        retriever.vocab = {}
        retriever.params()
        folder = Path(folder)
        vocab, arrays = retriever._build(folder, dtype)
        retriever._take(vocab, arrays)
        retriever._write_settings(folder)
        return retriever

    def _configure(
        self,
        corpus: Corpus,
        k1: float,
        b: float,
        epsilon: float,
        tokenizer: str | Tokenizer,
        method: str,
        text_format: str,
    ) -> None:
        if method not in IDF:
            raise ValueError(f"unknown BM25 method {method!r}; choose one of: {', '.join(IDF)}")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        doc_text("", "", text_format)
        self.corpus = corpus
        self.tokenizer = tokenizer
        self.tokenize = get_tokenizer(tokenizer)
        self.k1, self.b, self.epsilon, self.method, self.text_format = k1, b, epsilon, method, text_format

    def _index(self, vocab: Mapping[str, int], arrays: Mapping[str, np.ndarray], *, has_negative_weights: bool) -> None:
        """Takes the computed (or memory-mapped) ARRAYS; costs O(1) beyond the few dense rows."""
        # a memory map as a plain array over the same pages: slicing an np.memmap runs Python code (its
        # __array_finalize__) each time, and a query slices a posting list per term and block
        arrays = {name: a.view(np.ndarray) if isinstance(a, np.memmap) else a for name, a in arrays.items()}
        self._arrays = arrays  # for `save`
        self.vocab = vocab
        self.indptr, self.indices, self.codes = arrays["indptr"], arrays["indices"], arrays["codes"]
        self.levels, self.idf, self.dtype = arrays["levels"], arrays["idf"], arrays["levels"].dtype
        self.doc_len, self.max_weight = arrays["doc_len"], arrays["max_weight"]
        self.dense_ids, self.dense_weights = arrays["dense_rows"], arrays["dense_weights"]
        self._dense_row = {row: i for i, row in enumerate(self.dense_ids.tolist())}
        self.has_negative_weights = has_negative_weights
        # per-term reads in `_query_terms` as plain Python numbers, without numpy scalars
        # numpy's stubs give ndarray `__buffer__` for Python 3.12+ only
        self._indptr = memoryview(self.indptr)  # type: ignore[arg-type]
        self._max_weight = memoryview(self.max_weight)  # type: ignore[arg-type]
        self._idf = memoryview(self.idf)  # type: ignore[arg-type]
        self._long = max(1.0, self.doc_len.size / LONG)

    @property
    def weights(self) -> sparse.csr_matrix:
        """The term-by-document matrix of weights, made whole in memory (as large as the postings times 12
        bytes): for inspecting a small index; search never makes it."""
        rows = np.repeat(np.arange(len(self.vocab)), np.diff(self.indptr))
        data = self.idf[rows] * self.levels[self.codes]
        matrix = sparse.csr_matrix(
            (data, np.asarray(self.indices), np.asarray(self.indptr)), shape=(len(self.vocab), self.doc_len.size)
        )
        matrix.has_sorted_indices = True
        return matrix

    def _add_postings(self, acc: np.ndarray, idf: float, repeat: int, start: int, end: int, first: int = 0) -> None:
        """Adds the weights of postings start..end (times `repeat`) to `acc`, whose entry 0 is document
        `first`, ADD_CHUNK postings at a time. A weight is idf times the posting's tf level, the build's own
        float operation, so the same bits."""
        indices, codes, levels = self.indices, self.codes, self.levels
        for lo in range(start, end, ADD_CHUNK):
            hi = min(end, lo + ADD_CHUNK)
            weights = levels.take(codes[lo:hi])  # 3-4x faster than fancy indexing by uint16
            weights *= idf
            if repeat > 1:
                weights *= repeat
            # np.add.at runs about twice as fast with intp indices as with the stored int32
            np.add.at(acc, np.subtract(indices[lo:hi], first, dtype=np.intp), weights)

    @functools.cached_property
    def filters(self) -> FilterIndex:
        return FilterIndex(self.corpus)

    def _query_terms(self, query: str) -> list[Term]:
        """The query's known terms, each once, in scoring order, as (start, end, repeat, bound, dense, idf).

        A term's postings are `indices[start:end]` and `codes[start:end]`; `repeat` is how often it occurs
        in the query (its weights count that many times); `bound` is repeat times its largest weight, the
        most it adds to one document; `dense` is its row in `dense_weights`, or -1; `idf` its idf.

        Every score of the query sums its terms in this one order, in `scores` and in `search`, so equal
        weights give bit-equal scores: sparse terms, then dense ones, each group by bound, highest first,
        then by vocabulary row.
        """
        counts: dict[int, int] = {}
        get = self.vocab.get
        for token in self.tokenize(query):
            row = get(token)
            if row is not None:
                counts[row] = counts.get(row, 0) + 1
        indptr, max_weight, dense_row, idf = self._indptr, self._max_weight, self._dense_row, self._idf
        keyed = []
        for row, repeat in counts.items():
            start, end = indptr[row], indptr[row + 1]
            if end > start:
                bound, dense = max_weight[row] * repeat, dense_row.get(row, -1)
                keyed.append((dense >= 0, -bound, row, (start, end, repeat, bound, dense, idf[row])))
        keyed.sort()
        return [key[3] for key in keyed]

    def _add(self, acc: np.ndarray, terms: list[Term]) -> None:
        """Adds the terms' weights (times their repeats), in order, to every document's score in `acc`."""
        dense_weights = self.dense_weights
        for start, end, repeat, _, dense, idf in terms:
            if dense >= 0:  # adding 0.0 for a document without the term leaves its score as it was
                weights = dense_weights[dense]
                if repeat == 1:
                    np.add(acc, weights, out=acc)
                else:  # a slice at a time, so the repeated weights never take a second corpus-sized array
                    for lo in range(0, acc.size, DENSE_CHUNK):
                        acc[lo : lo + DENSE_CHUNK] += weights[lo : lo + DENSE_CHUNK] * repeat
            else:
                self._add_postings(acc, idf, repeat, start, end)

    def _sum_sparse(self, terms: list[Term]) -> tuple[np.ndarray, np.ndarray]:
        """Scores from sparse terms alone, and the documents of their first SEEN postings, in term order.

        Each term's postings are added in place (`_add`), so the one array the size of the corpus is the
        scores themselves; concatenating every posting first, as one bincount needs, held three more
        arrays the size of the query's postings (documents, weights, the documents widened to intp).
        Each document's weights are summed in term order either way, so the scores are the same bits.
        """
        acc = np.zeros(self.doc_len.size)
        self._add(acc, terms)
        indices, seen, covered = self.indices, [], 0
        for start, end, *_ in terms:
            if covered >= SEEN:
                break
            seen.append(indices[start : min(end, start + SEEN - covered)])
            covered += seen[-1].size
        return acc, np.concatenate(seen) if seen else indices[:0]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (float64, corpus order)."""
        out = np.zeros(self.doc_len.size)
        self._add(out, self._query_terms(query))
        return out

    def _best(self, terms: list[Term], need: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Corpus indices and scores of the `need` best allowed documents scoring above 0, best first.

        Every term is added, a block of documents at a time (`_best_in_blocks`), unless there are enough
        long terms to try skipping some: then the short ones are summed over the corpus and `_best_pruned`
        goes on.
        """
        n_docs, n_sparse = self.doc_len.size, 0
        while n_sparse < len(terms) and terms[n_sparse][4] < 0:
            n_sparse += 1
        n_short = 0
        while n_short < n_sparse and terms[n_short][1] - terms[n_short][0] < self._long:
            n_short += 1
        long_cost = (
            sum(end - start for start, end, *_ in terms[n_short:n_sparse])
            + (len(terms) - n_sparse) * n_docs * DENSE_COST
        )
        if self.has_negative_weights or long_cost <= n_docs + CHECK_COST:  # the bounds need weights >= 0
            return self._best_in_blocks(terms, need, mask)
        acc, seen = self._sum_sparse(terms[:n_short])
        return self._best_pruned(acc, terms, n_short, seen, need, mask)

    def _best_in_blocks(self, terms: list[Term], need: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """`_best` adding every term: the corpus scored SCORE_BLOCK documents at a time.

        Only one block's scores exist at once; each block's `need` best are kept and ranked together at
        the end, since the best of all are among the best of their blocks. A posting list is sorted by
        document, so a block's postings are one slice of it. Each document's weights are added in the
        order `scores()` adds them, so the scores are the same bits.
        """
        n_docs = self.doc_len.size
        indices, dense_weights = self.indices, self.dense_weights
        edges = np.append(np.arange(0, n_docs, SCORE_BLOCK), n_docs).astype(indices.dtype)
        # where each block starts in each sparse posting list (edges in the lists' dtype: no copy of them)
        cuts = [
            None if dense >= 0 else (np.searchsorted(indices[start:end], edges) + start).tolist()
            for start, end, _, _, dense, _ in terms
        ]
        found, found_scores = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
        for b in range(edges.size - 1):
            lo, hi = int(edges[b]), int(edges[b + 1])
            acc = np.zeros(hi - lo)
            for (_, _, repeat, _, dense, idf), cut in zip(terms, cuts):
                if dense >= 0:
                    weights = dense_weights[dense, lo:hi]
                    np.add(acc, weights * repeat if repeat > 1 else weights, out=acc)
                elif cut is not None and cut[b + 1] > cut[b]:  # a sparse term: its cuts are known
                    self._add_postings(acc, idf, repeat, cut[b], cut[b + 1], first=lo)
            index, scores = best_positive(acc, need, None if mask is None else mask[lo:hi])
            found.append(index + lo)
            found_scores.append(scores)
        index, scores = np.concatenate(found), np.concatenate(found_scores)
        order = np.lexsort((index, -scores))[:need]  # score descending, then corpus order
        return index[order], scores[order]

    def _best_pruned(
        self, acc: np.ndarray, terms: list[Term], done: int, seen: np.ndarray, need: int, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_best` for many long terms, `terms[:done]` already in `acc`, the documents of their first SEEN
        postings in `seen`.

        Term-at-a-time MaxScore (Turtle and Flood, "Query evaluation: strategies and optimizations",
        1995). Before a long term, if `need` allowed documents already have a partial score above the
        most that all remaining terms can add (the sum of their bounds), no other document can reach
        them, and only the candidates (documents whose partial score plus that bound reaches the need-th
        best) are kept. From then on a term is looked up for the candidates alone, and they shrink as the
        bound does. Every score is still summed in the one scoring order, so it equals `scores()`.
        """
        n_docs, n_terms = acc.size, len(terms)
        repeats, covered = 0, 0  # the first SEEN entries of `seen` hold each document at most `repeats` times
        for start, end, *_ in terms[:done]:
            if covered >= SEEN:
                break
            repeats, covered = repeats + 1, covered + end - start
        seen = seen[:SEEN]
        lookup = 2 * n_docs.bit_length()  # steps of a binary search in a posting list
        rest_bound = [0.0] * (n_terms + 1)  # rest_bound[j]: the most terms[j:] add to one document
        rest_cost = [0.0] * (n_terms + 1)  # rest_cost[j]: adding terms[j:] to every document
        rest_lookup = [RANK_COST] * (n_terms + 1)  # rest_lookup[j]: looking terms[j:] up for one candidate
        for j in range(n_terms - 1, -1, -1):
            start, end, _, bound, dense, _ = terms[j]
            rest_bound[j] = rest_bound[j + 1] + bound
            rest_cost[j] = rest_cost[j + 1] + (n_docs * DENSE_COST if dense >= 0 else end - start)
            rest_lookup[j] = rest_lookup[j + 1] + (DENSE_LOOKUP if dense >= 0 else lookup)
        leaders = None
        for j in range(max(done, 1), n_terms):
            # a check is worth it while enough work remains and the remaining terms could be outweighed
            if rest_cost[j] <= n_docs + CHECK_COST:
                break
            if rest_bound[j] >= rest_bound[0] - rest_bound[j]:
                continue
            self._add(acc, terms[done:j])
            done = j
            leaders = _leaders(acc, rest_bound[j], need, mask, (rest_cost[j] - n_docs) / rest_lookup[j], seen, repeats)
            if leaders is not None:
                break
        if leaders is None:
            self._add(acc, terms[done:])
            return best_positive(acc, need, mask)
        candidates, threshold = leaders
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "BM25 search: %d candidates after %d of %d terms; %d postings of the other terms "
                "looked up, not scanned",
                candidates.size,
                done,
                n_terms,
                sum(end - start for start, end, *_ in terms[done:]),
            )
        indices, dense_weights = self.indices, self.dense_weights
        docs = candidates.astype(indices.dtype)  # searchsorted would otherwise copy each posting list
        for j in range(done, n_terms):
            start, end, repeat, _, dense, idf = terms[j]
            if candidates.size > 4 * need:
                partial = acc[candidates]
                threshold = max(threshold, nth_largest(partial, need))
                keep = partial >= threshold - rest_bound[j] - threshold * SLACK
                candidates, docs = candidates[keep], docs[keep]
            if dense >= 0:
                found_weights = dense_weights[dense, candidates]
            elif candidates.size * lookup < end - start:  # binary search in the sorted posting list
                row = indices[start:end]
                at = np.searchsorted(row, docs)
                found = np.take(row, at, mode="clip") == docs
                levels = self.levels.take(np.take(self.codes[start:end], at, mode="clip"))
                found_weights = np.where(found, levels * idf, 0.0)  # + 0.0 changes nothing
            else:
                self._add(acc, terms[j : j + 1])
                continue
            acc[candidates] += found_weights * repeat if repeat > 1 else found_weights
        return best_among(candidates, acc[candidates], need)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        offset: int = 0,
        exclude: Collection[str] = (),
        before: str | None = None,
        categories: Collection[str] = (),
    ) -> list[Hit]:
        check_page(k, offset)
        mask = self.filters.mask(exclude, before, categories) if exclude or before or categories else None
        index, scores = self._best(self._query_terms(query), offset + k, mask)
        return ranked_hits(self.corpus, index[offset:], scores[offset:], offset)

    def params(self) -> dict:
        """The settings an index records; raises for an unregistered tokenizer, which cannot be saved."""
        name = tokenizer_name(self.tokenizer)
        if name is None:
            raise ValueError(
                "cannot save a BM25 index built with an unregistered tokenizer callable; "
                "add it to deepresearch.retrievers.tokenize.TOKENIZERS or pass a tokenizer name"
            )
        return {
            "k1": self.k1,
            "b": self.b,
            "epsilon": self.epsilon,
            "method": self.method,
            "tokenizer": name,
            "text_format": self.text_format,
            "dtype": str(self.dtype),
            "vocabulary": len(self.vocab),
        }

    def save(self, folder: str | Path) -> dict:
        """Writes the settings (`bm25.json`), the vocabulary and every array search reads into `folder`.

        Each array is its own `.npy` file, so `load` memory-maps them: opening reads nothing but the settings.
        Returns the settings.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.params()  # refuses an unregistered tokenizer before writing anything
        for name in ARRAYS:
            np.save(folder / f"{name}.npy", np.ascontiguousarray(self._arrays[name]))
        return self._write_settings(folder)

    def _write_settings(self, folder: Path) -> dict:
        """Writes the vocabulary and `bm25.json` beside the arrays; returns the settings."""
        params = self.params()
        StringTable.write(folder, "vocab", self.vocab)
        stored = {
            **params,
            "format": STORE_FORMAT,
            "documents": int(self.doc_len.size),
            "has_negative_weights": self.has_negative_weights,
        }
        (folder / "bm25.json").write_text(json.dumps(stored, indent=2), encoding="utf-8")
        return params

    @classmethod
    def load(cls, folder: str | Path, corpus: Corpus) -> BM25Retriever:
        """Memory-maps what `save` wrote; `corpus` must be the one it was built from.

        Opening costs O(1) in the corpus size: nothing is recomputed, and the operating system reads only
        the pages a query touches.

        Raises:
            ValueError: for files of another format, or a corpus of another size (rebuild the index).
        """
        folder = Path(folder)
        params = json.loads((folder / "bm25.json").read_text(encoding="utf-8"))
        if params.get("format") != STORE_FORMAT:
            raise ValueError(
                f"BM25 files in {folder} are of format {params.get('format', 1)!r}, this version "
                f"reads {STORE_FORMAT}; rebuild the index with `deepresearch index`"
            )
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
        n_docs = arrays["doc_len"].size
        if n_docs != len(corpus):
            raise ValueError(
                f"BM25 index in {folder} has {n_docs} documents but the corpus has "
                f"{len(corpus)}; rebuild the index with `deepresearch index`"
            )
        vocab = StringTable(folder, "vocab")
        retriever = cls.__new__(cls)
        retriever._configure(
            corpus,
            params["k1"],
            params["b"],
            params["epsilon"],
            params["tokenizer"],
            params["method"],
            params["text_format"],
        )
        retriever._index(vocab, arrays, has_negative_weights=params["has_negative_weights"])
        return retriever
