"""Query sets for the gathering runner: ScholarGym's real file, its README shape, BEIR qrels, splits."""

import json

import pytest

from deepresearch.eval.querysets import (
    GatherQuery,
    QuerySetError,
    find_queryset,
    load_beir_queryset,
    load_queryset,
    load_scholargym,
    parse_scholargym,
)


@pytest.fixture(scope="module")
def bench(data_dir):
    return load_scholargym(data_dir / "scholargym" / "scholargym_bench.jsonl")


def test_scholargym_file_matches_its_published_counts(bench):
    assert len(bench) == 2536
    by_source = {s: sum(q.source == s for q in bench) for s in ("PASA_AutoScholar", "LitSearch", "PASA_RealScholar")}
    assert by_source == {"PASA_AutoScholar": 2000, "LitSearch": 486, "PASA_RealScholar": 50}
    assert sum(not q.gt_ids for q in bench) == 78  # AutoScholar queries with an empty ground truth
    assert len({g for q in bench for g in q.gt_ids}) == 4498 and sum(len(q.gt_ids) for q in bench) == 5836
    first = bench[0]
    assert (first.query_id, first.gt_ids, first.date_constraint, first.split) == (
        "AutoScholarQuery_test_0",
        ("2009.02040",),
        "2020-09",
        "test",
    )


def test_scholargym_splits_are_disjoint(data_dir, bench):
    path = data_dir / "scholargym" / "scholargym_bench.jsonl"
    dev, test = load_scholargym(path, "dev"), load_scholargym(path, "test")
    assert len(dev) == 1000 and len(test) == 1536
    assert not {q.query_id for q in dev} & {q.query_id for q in test}
    with pytest.raises(QuerySetError, match="choose one of"):
        load_scholargym(path, "train")


def test_readme_shape_and_labels_are_read():
    q = parse_scholargym(
        {
            "query_id": "x1",
            "query": "q",
            "gt_arxiv_ids": ["1", "2"],
            "date_constraint": "2020-01",
            "source": "s",
            "split": "test",
        },
        "line 1",
    )
    assert q == GatherQuery("x1", "q", ("1", "2"), "2020-01", "s", "test")
    q = parse_scholargym(
        {
            "qid": "A_dev_3",
            "query": "q",
            "cited_paper": [{"arxiv_id": "1"}, {"arxiv_id": "2"}],
            "gt_label": [0, 1],
            "date": "2019-02",
            "source": "s",
        },
        "line 2",
    )
    assert (q.gt_ids, q.split) == (("2",), "dev")
    with pytest.raises(QuerySetError, match="line 3"):
        parse_scholargym({"query": "q"}, "line 3")


def test_a_bad_line_is_named(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps({"query_id": "a", "query": "q", "gt_arxiv_ids": []}) + "\n{oops\n")
    with pytest.raises(QuerySetError, match=f"{path}:2"):
        load_scholargym(path)
    with pytest.raises(QuerySetError, match="not found"):
        load_scholargym(tmp_path / "missing.jsonl")


def test_beir_query_sets_take_ground_truth_from_one_qrels_split(data_dir):
    test = load_queryset(data_dir / "scifact")
    train = load_beir_queryset(data_dir / "scifact", "train")
    assert len(test) == 300 and len(train) == 809 and all(q.gt_ids for q in test)
    assert {q.split for q in test} == {"test"}
    assert not {q.query_id for q in train} & {q.query_id for q in test}
    assert sum(len(q.gt_ids) for q in test) == 339


def test_csfcube_relevance_threshold(data_dir):
    loose = load_beir_queryset(data_dir / "csfcube", "test", min_relevance=1)
    strict = load_beir_queryset(data_dir / "csfcube", "test", min_relevance=3)
    assert len(loose) == 50 and sum(len(q.gt_ids) for q in loose) == 1348 + 412 + 84
    assert sum(len(q.gt_ids) for q in strict) == 84


def test_query_sets_are_found_by_name_as_corpora_are(data_dir):
    assert find_queryset("scifact", data_dir) == ("beir", data_dir / "scifact")
    assert find_queryset("BeIR/SciFact", data_dir) == ("beir", data_dir / "scifact")
    kind, path = find_queryset("shenhao/ScholarGym", data_dir)  # the local copy of the hub dataset
    assert (kind, path) == ("scholargym", data_dir / "scholargym" / "scholargym_bench.jsonl")
    assert find_queryset("shenhao/ScholarGym") == ("scholargym", "shenhao/ScholarGym")  # no data folder: the hub
    assert len(load_queryset("scholargym", "dev", data_dir=data_dir)) == 1000
    assert len(load_queryset("CSFCube", data_dir=data_dir)) == 50
    with pytest.raises(QuerySetError, match=r"query file not found: nothing; .*\(csfcube, "):
        find_queryset("nothing", data_dir)
