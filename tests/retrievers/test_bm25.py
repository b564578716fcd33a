import asyncio
import dataclasses
import logging

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.retrievers.bm25 import doc_text
from deepresearch.retrievers.tokenize import english_tokenize, get_tokenizer, scholargym_tokenize
from deepresearch.retrievers.types import passes_filters
from tests.retrievers.test_index import is_mapped

# The BM25 acceptance corpus: four papers, searched with ScholarGym's tokenizer.
SPEC_DOCS = [
    (
        "Sparse attention for efficient transformers",
        "We propose sparse attention patterns that reduce transformer cost.",
    ),
    ("Dense retrieval with dual encoders", "Dual encoders embed queries and passages for retrieval."),
    ("Efficient transformers: a survey", "A survey of efficient transformer models and attention variants."),
    ("BM25 revisited", "Lexical retrieval with BM25 remains a strong transformer-free baseline."),
]


@pytest.fixture(scope="module")
def spec_bm25():
    corpus = Corpus([Doc(doc_id=str(i), title=t, text=a) for i, (t, a) in enumerate(SPEC_DOCS)])
    return BM25Retriever(corpus, tokenizer="scholargym")


def test_scholargym_tokenizer_drops_words_with_digits_or_accents():
    assert scholargym_tokenize("café naïve résumé über schrödinger x2 bm25 state-of-the-art") == [
        "state",
        "of",
        "the",
        "art",
    ]


def test_english_tokenizer_stems_and_drops_stop_words():
    assert english_tokenize("The studies of running mice's genes") == ["studi", "run", "mice", "gene"]


def test_spec_corpus_lengths_and_idf(spec_bm25):
    assert spec_bm25.doc_len.tolist() == [16, 15, 15, 12]
    row = {t: spec_bm25.vocab[t] for t in ("sparse", "attention", "transformer", "title")}
    # weight / saturated tf = idf; recover idf from doc 0, which holds each of these terms
    w = spec_bm25.weights.toarray()
    tf0 = {"sparse": 2, "attention": 2, "transformer": 1, "title": 1}
    avgdl = 14.5
    for term, tf in tf0.items():
        sat = tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * 16 / avgdl))
        idf = w[row[term], 0] / sat
        expected = {"sparse": 0.847298, "attention": 0.0, "transformer": 0.104751, "title": 0.104751}[term]
        assert idf == pytest.approx(expected, abs=1e-6)


def test_spec_query_scores_and_rankings(spec_bm25):
    assert spec_bm25.scores("efficient sparse attention") == pytest.approx([1.171473, 0, 0, 0], abs=1e-6)
    assert spec_bm25.scores("sparse sparse")[0] == pytest.approx(2.342946, abs=1e-6)
    assert spec_bm25.scores("transformer retrieval") == pytest.approx([0.100091, 0, 0.103150, 0.113562], abs=1e-6)
    assert [h.doc.doc_id for h in spec_bm25.search("transformer retrieval", k=10)] == ["3", "2", "0"]


# The 300 test queries here (rank-bm25 needs ~0.03 s per query); all 1,109 in benchmarks/bench_retrieval.py.
@pytest.mark.parametrize("tokenizer", ["scholargym", "words"])
def test_scores_and_top100_match_rank_bm25_on_scifact_queries(scifact, scifact_test_queries, tokenizer):
    tokenize = get_tokenizer(tokenizer)
    ours = BM25Retriever(scifact, tokenizer=tokenizer)
    reference = BM25Okapi([tokenize(doc_text(d.title, d.text)) for d in scifact])
    queries = list(scifact_test_queries.values())
    if tokenizer == "words":
        queries = queries[::5]
    worst, mismatched = 0.0, []
    for q in queries:
        expected = np.asarray(reference.get_scores(tokenize(q)))
        worst = max(worst, float(np.abs(ours.scores(q) - expected).max()))
        order = [int(i) for i in np.argsort(-expected, kind="stable") if expected[i] > 0][:100]
        if [h.doc.doc_id for h in ours.search(q, 100)] != [scifact[i].doc_id for i in order]:
            mismatched.append(q)
    assert worst <= 1e-6
    assert mismatched == []


def test_ties_break_by_corpus_order_and_repeat_identically():
    docs = [
        Doc(doc_id=f"d{i}", title="", text=text)
        for i, text in enumerate(["alpha beta", "gamma", "alpha beta", "beta alpha", "delta", "eta", "theta", "iota"])
    ]
    bm25 = BM25Retriever(Corpus(docs))
    first = bm25.search("alpha", k=3)
    assert [h.doc.doc_id for h in first] == ["d0", "d2", "d3"]
    assert first[0].score == first[1].score == first[2].score
    assert bm25.search("alpha", k=3) == first


def test_lucene_method_uses_non_negative_idf():
    docs = [Doc(doc_id=str(i), title="", text=t) for i, t in enumerate(["a b", "a c", "a d"])]
    bm25 = BM25Retriever(Corpus(docs), tokenizer="words", method="lucene", text_format="plain")
    n, df = 3, 3
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    assert bm25.scores("a") == pytest.approx([idf] * 3)  # every doc has tf 1 and average length


def dated_corpus():
    months = ["2024-08", "2024-09-30", "2024-10-01", None, "2024-09"]
    cats = ["cs.CL", "cs.LG cs.CL", "cs.CL", "stat.ML", ["cs.IR"]]
    papers = [
        Doc(
            doc_id=f"p{i}",
            title="retrieval",
            text=f"retrieval study {'x ' * i}",
            published=m,
            metadata={"categories": c},
        )
        for i, (m, c) in enumerate(zip(months, cats))
    ]
    filler = [Doc(doc_id=f"f{i}", title="filler", text="unrelated words only") for i in range(6)]
    return Corpus(papers + filler)


def test_filters_date_categories_exclusion():
    bm25 = BM25Retriever(dated_corpus())

    def ids(hits):
        return [h.doc.doc_id for h in hits]

    assert ids(bm25.search("retrieval", 10, before="2024-09")) == ["p0", "p1", "p3", "p4"]
    assert ids(bm25.search("retrieval", 10, categories=["cs.CL"])) == ["p0", "p1", "p2"]
    assert ids(bm25.search("retrieval", 10, categories=["cs.IR", "stat.ML"])) == ["p3", "p4"]
    hits = bm25.search("retrieval", 10, exclude={"p0", "unknown"}, before="2024-09")
    assert ids(hits) == ["p1", "p3", "p4"] and [h.rank for h in hits] == [1, 2, 3]


def test_pages_concatenate_to_one_ranking(scifact_bm25):
    whole = scifact_bm25.search("vitamin D deficiency and cancer risk", 30)
    pages = [scifact_bm25.search("vitamin D deficiency and cancer risk", 10, offset=o) for o in (0, 10, 20)]
    assert [h for page in pages for h in page] == whole
    assert [h.rank for h in whole] == list(range(1, 31))


def test_unknown_words_give_no_hits_and_bad_page_raises(scifact_bm25):
    assert scifact_bm25.search("zzzqqq", 5) == []
    with pytest.raises(ValueError, match="k must be >= 1"):
        scifact_bm25.search("cancer", 0)


def test_asearch_equals_search(scifact_bm25):
    assert asyncio.run(scifact_bm25.asearch("cancer", 5, offset=5)) == scifact_bm25.search("cancer", 5, offset=5)


def test_save_and_load_round_trip(tmp_path, small_corpus):
    bm25 = BM25Retriever(small_corpus, tokenizer="english", method="lucene", k1=1.2)
    bm25.save(tmp_path)
    loaded = BM25Retriever.load(tmp_path, small_corpus)
    assert loaded.params() == bm25.params()
    assert loaded.search("cell differentiation", 20) == bm25.search("cell differentiation", 20)


def test_unregistered_tokenizer_cannot_be_saved(tmp_path, small_corpus):
    bm25 = BM25Retriever(small_corpus, tokenizer=str.split)
    with pytest.raises(ValueError, match="unregistered tokenizer"):
        bm25.save(tmp_path)


# Search ranks without scoring every posting (retrievers/bm25.py, BM25Retriever._best); these tests hold
# it to the plain ranking of `scores()`: same documents, bit-equal scores, ties by corpus order.
def ranking_by_scores(bm25, query, k, offset=0, exclude=(), before=None, categories=()):
    scores = bm25.scores(query)
    mask = bm25.filters.mask(exclude, before, categories)
    allowed = np.ones(scores.size, dtype=bool) if mask is None else mask
    index = np.flatnonzero(allowed & (scores > 0))
    index = index[np.lexsort((index, -scores[index]))][offset : offset + k]
    return [(bm25.corpus[int(i)].doc_id, float(scores[i])) for i in index]


def assert_search_is_ranking_by_scores(bm25, queries, filters):
    mismatched = []
    for n, query in enumerate(queries):
        for k, offset in ((1, 0), (10, 0), (100, 0), (10, 10), (7, 93)):
            for f in filters:
                kwargs = f(bm25, query, n) if callable(f) else f
                got = [(h.doc.doc_id, h.score) for h in bm25.search(query, k, offset=offset, **kwargs)]
                if got != ranking_by_scores(bm25, query, k, offset, **kwargs):
                    mismatched.append((query, k, offset, kwargs))
    assert mismatched == []


def exclude_leaders(bm25, query, n):
    """The query's own top documents (a different number each time) and an unknown id."""
    top = [h.doc.doc_id for h in bm25.search(query, 1 + n % 12)]
    return {"exclude": set(top) | {"no-such-id"}}


def with_dates_and_categories(corpus):
    return Corpus(
        [
            dataclasses.replace(
                d,
                published=f"{2010 + i % 15}-{1 + i % 12:02d}" if i % 7 else None,
                metadata={"categories": ("cs.IR", "cs.CL stat.ML", ["q-bio"])[i % 3]},
            )
            for i, d in enumerate(corpus)
        ],
        name=f"{corpus.name}-dated",
    )


FILTERS = [
    {},
    exclude_leaders,
    {"before": "2016-06"},
    {"categories": ["stat.ML", "q-bio"]},
    {"before": "2019-01", "categories": ["cs.IR"], "exclude": {"4983"}},
]


@pytest.fixture(scope="module")
def dated_scifact_bm25(scifact):
    return BM25Retriever(with_dates_and_categories(scifact), tokenizer="scholargym")


def test_filter_masks_are_passes_filters(dated_scifact_bm25):
    query = "vitamin D deficiency and cancer risk"
    for f in FILTERS:
        kwargs = f(dated_scifact_bm25, query, 5) if callable(f) else f
        mask = dated_scifact_bm25.filters.mask(**kwargs)
        got = [True] * len(dated_scifact_bm25.corpus) if mask is None else mask.tolist()
        assert got == [passes_filters(d, **kwargs) for d in dated_scifact_bm25.corpus]


def test_search_equals_ranking_by_scores_on_scifact(dated_scifact_bm25, scifact_test_queries):
    assert_search_is_ranking_by_scores(dated_scifact_bm25, list(scifact_test_queries.values())[::3], FILTERS)


def zipf_corpus(n_docs: int, vocabulary: int, seed: int = 7) -> Corpus:
    """Documents of words drawn with Zipf frequencies (exponent 1.1), dated and in categories."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    words = np.array([f"w{r}" for r in range(vocabulary)], dtype=object)
    lengths = rng.integers(8, 60, n_docs)
    tokens = words[rng.choice(vocabulary, size=int(lengths.sum()), p=p / p.sum())]
    ends = np.cumsum(lengths)
    return with_dates_and_categories(
        Corpus(
            [
                Doc(doc_id=str(i), title="", text=" ".join(tokens[e - n : e]))
                for i, (e, n) in enumerate(zip(ends, lengths))
            ],
            name="zipf",
        )
    )


@pytest.fixture(scope="module")
def zipf_queries():
    rng = np.random.default_rng(11)  # two rare words and four of the most common ones
    return [
        " ".join([f"w{r}" for r in rng.integers(200, 2000, 2)] + [f"w{r}" for r in rng.integers(0, 8, 4)])
        for _ in range(40)
    ]


@pytest.mark.parametrize("method", ["okapi", "lucene"])
def test_search_skips_postings_and_still_equals_ranking_by_scores(method, zipf_queries, caplog):
    bm25 = BM25Retriever(zipf_corpus(60_000, 3000), method=method, text_format="plain")
    with caplog.at_level(logging.DEBUG, logger="deepresearch.retrievers.bm25"):
        assert_search_is_ranking_by_scores(bm25, zipf_queries, FILTERS)
    assert any("looked up, not scanned" in r.getMessage() for r in caplog.records)


def test_negative_weights_rank_like_scores():
    # most words in most documents: rank-bm25's IDF floor is then negative, and so are some weights
    texts = ["a b c", "a b c d", "a b c e", "a b d", "b c e a"] * 3 + ["f a"]
    bm25 = BM25Retriever(
        Corpus([Doc(doc_id=str(i), title="", text=t) for i, t in enumerate(texts)]), text_format="plain"
    )
    assert bm25.has_negative_weights
    assert_search_is_ranking_by_scores(bm25, ["a d", "e f a", "b b c", "d e"], [{}, {"exclude": {"1"}}])


def _arrays(bm25):
    return {
        "indptr": bm25.indptr,
        "indices": bm25.indices,
        "codes": bm25.codes,
        "levels": bm25.levels,
        "idf": bm25.idf,
        "weights": bm25.weights.data,
        "doc_len": bm25.doc_len,
        "max_weight": bm25.max_weight,
        "dense_rows": bm25.dense_ids,
        "dense_weights": bm25.dense_weights,
    }


@pytest.mark.parametrize("method", ["okapi", "lucene"])
def test_a_build_streamed_in_tiny_batches_and_blocks_writes_the_same_arrays(scifact, method, monkeypatch, tmp_path):
    from deepresearch.retrievers import bm25 as bm25_module

    corpus = Corpus(list(scifact)[:700], name="scifact-700")
    whole = BM25Retriever(corpus, tokenizer="scholargym", method=method)  # one batch, one block
    monkeypatch.setattr(bm25_module, "BATCH_DOCS", 37)  # batches end mid-corpus; later ones add new terms
    monkeypatch.setattr(bm25_module, "BLOCK_POSTINGS", 101)  # blocks cut through the vocabulary, some one row
    streamed = BM25Retriever(corpus, tokenizer="scholargym", method=method)
    on_disk = BM25Retriever.build(corpus, tmp_path / "bm25", tokenizer="scholargym", method=method)
    assert whole.dense_ids.size > 0 and whole.weights.shape[0] > 1000  # the dense rows are exercised too
    for built in (streamed, on_disk):
        assert dict(built.vocab) == dict(whole.vocab)
        for name, values in _arrays(whole).items():
            assert np.array_equal(_arrays(built)[name], values), name  # bit for bit
    assert all(is_mapped(a) for a in (on_disk.codes, on_disk.indices, on_disk.doc_len))
    assert not [p.name for p in (tmp_path / "bm25").iterdir() if p.name.startswith(".")]  # no spill left
    reloaded = BM25Retriever.load(tmp_path / "bm25", corpus)
    assert reloaded.params() == whole.params()
    for query in ("vitamin D deficiency fractures", "the of and cells"):
        assert np.array_equal(reloaded.scores(query), whole.scores(query))
        assert reloaded.search(query, 20) == whole.search(query, 20)


def test_a_posting_takes_six_bytes_and_its_weight_keeps_every_bit(scifact, tmp_path):
    """A posting stores its document and the code of its (tf, length) pair; idf · level is the weight the
    saturated-tf formula gives that posting, bit for bit."""
    from deepresearch.retrievers.scoring import IDF, tf_saturation

    corpus = Corpus(list(scifact)[:700], name="scifact-700")
    bm25 = BM25Retriever.build(corpus, tmp_path / "bm25", tokenizer="scholargym")
    nnz = int(bm25.indptr[-1])
    postings = sum((tmp_path / "bm25" / f"{name}.npy").stat().st_size for name in ("indices", "codes"))
    assert bm25.codes.dtype == np.uint16 and 6 * nnz <= postings < 6 * nnz + 512  # two .npy headers
    assert bm25.levels.size < nnz / 10  # pairs are few: the table is small beside the postings
    tokens = [bm25.tokenize(doc_text(d.title, d.text)) for d in corpus]
    rows = np.repeat(np.arange(len(bm25.vocab)), np.diff(bm25.indptr))
    terms = [t for t, _ in sorted(bm25.vocab.items(), key=lambda item: item[1])]
    tf = np.array([tokens[d].count(terms[t]) for t, d in zip(rows.tolist(), bm25.indices.tolist())])
    doc_len = np.array([len(t) for t in tokens])
    doc_freq = np.diff(bm25.indptr)
    expected = IDF["okapi"](doc_freq, len(corpus), 0.25)[rows] * tf_saturation(
        tf, doc_len[bm25.indices], doc_len.mean(), 1.5, 0.75
    )
    assert np.array_equal(bm25.weights.data, expected)


def test_more_pairs_than_a_uint16_holds_take_uint32_codes_and_score_the_same(scifact, monkeypatch):
    from deepresearch.retrievers import bm25 as bm25_module

    corpus = Corpus(list(scifact)[:300], name="scifact-300")
    small = BM25Retriever(corpus, tokenizer="scholargym")
    monkeypatch.setattr(bm25_module, "UINT16_CODES", 40)
    wide = BM25Retriever(corpus, tokenizer="scholargym")
    assert small.codes.dtype == np.uint16 and wide.codes.dtype == np.uint32 and small.levels.size > 40
    assert np.array_equal(wide.codes, small.codes) and np.array_equal(wide.levels, small.levels)
    for query in ("vitamin D deficiency fractures", "the of and cells cells"):
        assert np.array_equal(wide.scores(query), small.scores(query))
        assert wide.search(query, 20) == small.search(query, 20)


def test_build_refuses_an_unregistered_tokenizer_before_writing(tmp_path, small_corpus):
    with pytest.raises(ValueError, match="unregistered tokenizer"):
        BM25Retriever.build(small_corpus, tmp_path / "bm25", tokenizer=str.split)
    assert not (tmp_path / "bm25").exists()
