"""Gathering metrics on hand-worked cases, and F1 against the published Table 3 of spec 004."""

import math

import pytest

from deepresearch.eval.f1 import harmonic_mean
from deepresearch.eval.gather import QueryTrace, distance, gt_ranks, query_curves, summarize
from deepresearch.programs.gather.artifacts import Candidate, GatherResult, Round, Search, Selection, Subquery


def trace(qid, gt, retrieved, selected, ranks=(), failed=False):
    return QueryTrace(query_id=qid, gt=frozenset(gt), retrieved=tuple(frozenset(r) for r in retrieved),
                      selected=tuple(frozenset(s) for s in selected), ranks=tuple(ranks), is_failed=failed)


def test_f1_is_the_harmonic_mean_of_macro_averages_not_the_mean_of_per_query_f1():
    # q1: G={a}, S={a}: P=1, R=1.  q2: G={b,c}, S={b,x,y,z}: P=1/4, R=1/2.
    traces = [trace("q1", {"a"}, [{"a"}], [{"a"}]), trace("q2", {"b", "c"}, [{"b", "x", "y", "z"}], [{"b", "x", "y", "z"}])]
    final = summarize(traces, iterations=1, bootstrap=0)["final"]
    assert final["precision"] == pytest.approx(0.625) and final["recall"] == pytest.approx(0.75)
    assert final["f1"] == pytest.approx(2 * 0.625 * 0.75 / 1.375)                 # 0.6818
    assert final["mean_query_f1"] == pytest.approx((1 + 2 * 0.25 * 0.5 / 0.75) / 2)  # 0.6667
    assert final["micro_precision"] == pytest.approx(2 / 5) and final["micro_recall"] == pytest.approx(2 / 3)
    assert final["gt_discard_rate"] is None  # every retrieved paper was selected: nothing discarded, rate undefined


def test_empty_selection_scores_zero_and_empty_ground_truth_is_skipped_and_counted():
    traces = [trace("none", {"a"}, [{"x"}], [set()]), trace("nogt", set(), [{"x"}], [{"x"}])]
    out = summarize(traces, iterations=1, bootstrap=0)
    assert (out["queries"], out["evaluated"], out["skipped_no_gt"]) == (2, 1, 1)
    assert out["final"]["precision"] == 0 and out["final"]["recall"] == 0 and out["final"]["f1"] == 0
    assert out["final"]["ret_precision"] == 0 and out["final"]["micro_precision"] == 0
    assert summarize([trace("nogt", set(), [], [])], iterations=1)["final"] == {}
    with pytest.raises(ValueError, match="no ground truth"):
        query_curves(trace("nogt", set(), [], []), 1)


def test_metrics_are_cumulative_over_iterations_and_an_early_stop_carries_forward():
    t = trace("q", {"a", "b"}, retrieved=[{"x", "y"}, {"a", "z"}], selected=[set(), {"a"}])
    curves = query_curves(t, iterations=3)
    assert curves["ret_recall"] == [0, 0.5, 0.5] and curves["ret_precision"] == [0, 0.25, 0.25]
    assert curves["recall"] == [0, 0.5, 0.5] and curves["precision"] == [0, 1, 1]


def test_avg_distance_cutoff_at_k():
    assert [distance(r) for r in (0, 15, 50, 99, 100, 150, None)] == pytest.approx([1, 0.85, 0.5, 0.01, 0, 0, 0])
    t = trace("q", {"a", "b"}, [{"a"}], [set()], ranks=[{"a": 20}])  # b never ranked
    assert query_curves(t, 1)["avg_distance"] == [pytest.approx(0.4)]
    assert query_curves(t, 1, k=40)["avg_distance"] == [pytest.approx(0.25)]


def test_avg_distance_variants_per_iteration_and_cumulative():
    # a found at rank 10 and selected in round 1 (so excluded later); b at 30 in round 1, only 60 in round 2.
    t = trace("q", {"a", "b"}, [{"a"}, {"x"}], [{"a"}, set()], ranks=[{"a": 10, "b": 30}, {"b": 60}])
    assert query_curves(t, 2)["avg_distance"] == pytest.approx([0.8, (0.9 + 0.4) / 2])   # non-monotone
    assert query_curves(t, 2, variant="cumulative")["avg_distance"] == pytest.approx([0.8, 0.8])
    out = summarize([t], iterations=2, bootstrap=0)
    assert out["final"]["avg_distance"] == pytest.approx((0.8 + 0.65) / 2)  # "Avg." = mean of It.1..It.T


def test_gt_discard_rate_averages_only_queries_that_discarded_something():
    t1 = trace("q1", {"a", "b"}, [{"a", "b", "c", "x"}, {"y"}], [{"a"}, set()])   # 1/3 of round 1's discards are GT
    t2 = trace("q2", {"d"}, [{"d"}, {"d2"}], [{"d"}, {"d2"}])                      # discards nothing
    curves = query_curves(t1, 2)["gt_discard_rate"]
    assert curves[0] == pytest.approx(100 / 3) and curves[1] == 0
    out = summarize([t1, t2], iterations=2, bootstrap=0)
    assert out["per_iteration"]["gt_discard_rate"] == pytest.approx([100 / 3, 0])
    assert out["final"]["gt_discard_rate"] == pytest.approx(100 / 6)
    assert out["final"]["gt_loss"] == pytest.approx(out["final"]["ret_recall"] - out["final"]["recall"])


def test_failed_queries_are_excluded_or_included_by_policy():
    traces = [trace("ok", {"a"}, [{"a"}], [{"a"}]), trace("bad", {"b"}, [{"x"}], [set()], failed=True)]
    excluded = summarize(traces, 1, bootstrap=0)
    included = summarize(traces, 1, failed="included", bootstrap=0)
    assert (excluded["evaluated"], excluded["failed"], excluded["final"]["recall"]) == (1, 1, 1.0)
    assert (included["evaluated"], included["final"]["recall"]) == (2, 0.5)


def test_bootstrap_interval_brackets_the_estimate_and_collapses_without_variance():
    varied = [trace(f"q{i}", {"a"}, [{"a", "x"}], [{"a"} if i % 3 else {"x"}]) for i in range(30)]
    out = summarize(varied, 1, bootstrap=500, seed=1)
    low, high = out["ci95"]["recall"]
    assert low < out["final"]["recall"] < high and out["ci95"]["ret_recall"] == [1.0, 1.0]
    assert out["ci95"] == summarize(varied, 1, bootstrap=500, seed=1)["ci95"]  # seeded


@pytest.mark.parametrize("p,r,f1", [  # spec 004 Table 3: every F1 is the harmonic mean of the reported P and R
    (0.042, 0.185, 0.069), (0.152, 0.483, 0.231), (0.290, 0.482, 0.362), (0.305, 0.837, 0.447),
    (0.199, 0.950, 0.329), (0.022, 0.550, 0.042), (0.058, 0.172, 0.087), (0.010, 0.504, 0.020)])
def test_harmonic_mean_reproduces_published_f1(p, r, f1):
    assert math.isclose(harmonic_mean(p, r), f1, abs_tol=0.0015)


def test_trace_from_a_result_reads_ranks_from_rankings_and_pages():
    search = Search(node_id=1, action="derive", text="q", k=2, offset=0,
                    candidates=(Candidate("x", 1, 2.0, "irrelevant"), Candidate("a", 2, 1.0, "relevant")),
                    ranking=("x", "a", "y", "b"))
    later = Search(node_id=1, action="continue", text="q", k=2, offset=1,
                   candidates=(Candidate("b", 2, 0.5, "irrelevant"),))
    result = GatherResult(question="q", date_constraint=None, tree=(Subquery(0, None, "root", "q", 0),),
                          rounds=(Round(1, (search,)), Round(2, (later,))),
                          selected=(Selection("a", 1, 1),), stop_reason="iterations")
    assert gt_ranks(result, frozenset({"a", "b"})) == [{"a": 1, "b": 3}, {"b": 1}]
    t = QueryTrace.from_result("q", ["a", "b"], result)
    assert t.retrieved == (frozenset({"x", "a"}), frozenset({"b"})) and t.selected == (frozenset({"a"}), frozenset())
