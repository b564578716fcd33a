"""Gathering metrics on hand-worked cases, and F1 against the published Table 3 of ScholarGym.

Under both protocols: `official`, the released scorer's edge rules, is the default; `spec`
tests name it. The official cases are worked out by hand from those rules in their comments, and were replayed
through the released code (shenhao-stu/ScholarGym at f426fd1: metrics.py's distance and iteration metrics,
eval.py's aggregation) with the same values.
"""

import math

import pytest

from deepresearch.eval.f1 import harmonic_mean
from deepresearch.eval.gather import QueryTrace, distance, gt_ranks, query_curves, summarize
from deepresearch.programs.gather.artifacts import Candidate, GatherResult, Round, Search, Selection, Subquery


def trace(qid, gt, retrieved, selected, ranks=(), failed=False, stop="iterations"):
    return QueryTrace(
        query_id=qid,
        gt=frozenset(gt),
        retrieved=tuple(frozenset(r) for r in retrieved),
        selected=tuple(frozenset(s) for s in selected),
        ranks=tuple(ranks),
        is_failed=failed,
        stop_reason=stop,
    )


def test_f1_is_the_harmonic_mean_of_macro_averages_not_the_mean_of_per_query_f1():
    # q1: G={a}, S={a}: P=1, R=1.  q2: G={b,c}, S={b,x,y,z}: P=1/4, R=1/2.
    traces = [
        trace("q1", {"a"}, [{"a"}], [{"a"}]),
        trace("q2", {"b", "c"}, [{"b", "x", "y", "z"}], [{"b", "x", "y", "z"}]),
    ]
    final = summarize(traces, iterations=1, bootstrap=0, protocol="spec")["final"]
    assert final["precision"] == pytest.approx(0.625) and final["recall"] == pytest.approx(0.75)
    assert final["f1"] == pytest.approx(2 * 0.625 * 0.75 / 1.375)  # 0.6818
    assert final["mean_query_f1"] == pytest.approx((1 + 2 * 0.25 * 0.5 / 0.75) / 2)  # 0.6667
    assert final["micro_precision"] == pytest.approx(2 / 5) and final["micro_recall"] == pytest.approx(2 / 3)
    assert final["gt_discard_rate"] is None  # every retrieved paper was selected: nothing discarded, rate undefined
    official = summarize(traces, iterations=1, bootstrap=0)["final"]  # the released scorer: 0, averaged in
    assert official["gt_discard_rate"] == 0 and official["f1"] == final["f1"]


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
    assert query_curves(t, 2)["avg_distance"] == pytest.approx([0.8, (0.9 + 0.4) / 2])  # non-monotone
    assert query_curves(t, 2, variant="cumulative")["avg_distance"] == pytest.approx([0.8, 0.8])
    out = summarize([t], iterations=2, bootstrap=0)
    assert out["final"]["avg_distance"] == pytest.approx((0.8 + 0.65) / 2)  # "Avg." = mean of It.1..It.T


def test_spec_gt_discard_rate_averages_only_queries_that_discarded_something():
    t1 = trace("q1", {"a", "b"}, [{"a", "b", "c", "x"}, {"y"}], [{"a"}, set()])  # 1/3 of round 1's discards are GT
    t2 = trace("q2", {"d"}, [{"d"}, {"d2"}], [{"d"}, {"d2"}])  # discards nothing
    curves = query_curves(t1, 2, protocol="spec")["gt_discard_rate"]
    assert curves[0] == pytest.approx(100 / 3) and curves[1] == 0
    out = summarize([t1, t2], iterations=2, bootstrap=0, protocol="spec")
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


@pytest.mark.parametrize(
    "p,r,f1",
    [  # ScholarGym's Table 3: every F1 is the harmonic mean of the reported P and R
        (0.042, 0.185, 0.069),
        (0.152, 0.483, 0.231),
        (0.290, 0.482, 0.362),
        (0.305, 0.837, 0.447),
        (0.199, 0.950, 0.329),
        (0.022, 0.550, 0.042),
        (0.058, 0.172, 0.087),
        (0.010, 0.504, 0.020),
    ],
)
def test_harmonic_mean_reproduces_published_f1(p, r, f1):
    assert math.isclose(harmonic_mean(p, r), f1, abs_tol=0.0015)


def test_trace_from_a_result_reads_ranks_from_rankings_and_pages():
    search = Search(
        node_id=1,
        action="derive",
        text="q",
        k=2,
        offset=0,
        candidates=(Candidate("x", 1, 2.0, "irrelevant"), Candidate("a", 2, 1.0, "relevant")),
        ranking=("x", "a", "y", "b"),
    )
    later = Search(
        node_id=1, action="continue", text="q", k=2, offset=1, candidates=(Candidate("b", 2, 0.5, "irrelevant"),)
    )
    result = GatherResult(
        question="q",
        date_constraint=None,
        tree=(Subquery(0, None, "root", "q", 0),),
        rounds=(Round(1, (search,)), Round(2, (later,))),
        selected=(Selection("a", 1, 1),),
        stop_reason="iterations",
    )
    assert gt_ranks(result, frozenset({"a", "b"})) == [{"a": 1, "b": 3}, {"b": 1}]
    t = QueryTrace.from_result("q", ["a", "b"], result)
    assert t.retrieved == (frozenset({"x", "a"}), frozenset({"b"})) and t.selected == (frozenset({"a"}), frozenset())
    assert t.stop_reason == "iterations" and not t.failed_under("official")


# ---- the official protocol: the released scorer's edge rules, worked by hand ----


def test_official_failure_rules_drop_empty_plans_at_any_round_and_completion_only_at_the_first():
    # One ground-truth paper per query; `failed` is the loop's own flag, as `GatherLoop.run` records it.
    traces = [
        # no valid action at round 3: the released workflow returns nothing (dropped); the loop's flag says no
        trace("empty_late", {"a"}, [{"x"}, {"y"}], [set(), set()], stop="no_new_subqueries"),
        # no valid action at round 1: failed under both
        trace("empty_first", {"b"}, [], [], failed=True, stop="no_new_subqueries"),
        # completion flag at round 1: failed under both
        trace("complete_first", {"c"}, [], [], failed=True, stop="complete"),
        # completion flag at round 2, nothing selected: the loop fails it (spec); the released tracker is a
        # non-empty mapping after round 1, so it stands (official), with R = 0
        trace("complete_late_nothing", {"d"}, [{"d", "z"}], [set()], failed=True, stop="complete"),
        # completion flag at round 2 after a selection: stands under both, R = 1
        trace("complete_late", {"e"}, [{"e"}], [{"e"}], stop="complete"),
        # the plan call failed at round 2: the released code drops a query whose plan is empty or raised
        trace("plan_failed_late", {"f"}, [{"f"}], [{"f"}], stop="plan_failed"),
        # a budget stop has no released counterpart: the loop's flag holds under both, R = 1
        trace("budget", {"g"}, [{"g"}], [{"g"}], stop="budget"),
    ]
    official = summarize(traces, iterations=2, bootstrap=0)
    # official: failed = empty_late, empty_first, complete_first, plan_failed_late (4);
    # evaluated = complete_late_nothing (R 0), complete_late (R 1), budget (R 1): R̄ = 2/3
    assert (official["protocol"], official["evaluated"], official["failed"]) == ("official", 3, 4)
    assert official["failed_by_stop"] == {"complete": 1, "no_new_subqueries": 2, "plan_failed": 1}
    assert official["final"]["recall"] == pytest.approx(2 / 3)
    # spec: failed = empty_first, complete_first, complete_late_nothing (3);
    # evaluated = empty_late (R 0), complete_late, plan_failed_late, budget (R 1 each): R̄ = 3/4
    spec = summarize(traces, iterations=2, bootstrap=0, protocol="spec")
    assert (spec["protocol"], spec["evaluated"], spec["failed"]) == ("spec", 4, 3)
    assert spec["final"]["recall"] == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="unknown scoring protocol 'paper'; choose one of: official, spec"):
        summarize(traces, iterations=2, protocol="paper")


def early_stop_runs():
    # T = 3. q1 runs all three rounds; q2 stops after round 1 with the completion flag (not failed: a round ran).
    q1 = trace(
        "q1",
        {"a", "b"},
        retrieved=[{"a", "x"}, {"b", "y", "z"}, {"v"}],
        selected=[{"a"}, {"y"}, set()],
        ranks=[{"a": 0, "b": 50}, {"b": 20}, {}],
    )
    q2 = trace("q2", {"c"}, retrieved=[{"c", "u"}], selected=[{"c"}], ranks=[{"c": 40}], stop="complete")
    return [q1, q2]


def test_official_early_stops_hold_recall_and_precision_but_leave_distance_and_discard_unpadded():
    # Hand computation, official (d = 1 - rank/100; discard = |G ∩ (R_t \ S_t)| / |R_t \ S_t|, 0 if empty):
    # q1 It.1: a rank 0 -> 1.0, b rank 50 -> 0.5: 0.75; discarded {x}, no GT: 0.
    #    It.2: a selected (carried, best 0) -> 1.0, b rank 20 -> 0.8: 0.9; discarded {b, z}, GT b: 1/2.
    #    It.3: a carried -> 1.0, b not ranked, not selected -> 0: 0.5; discarded {v}: 0.
    #    R 1/2, 1/2, 1/2; P 1/1, 1/2, 1/2.
    # q2 It.1: c rank 40 -> 0.6; discarded {u}: 0. R 1, P 1; It.2 and It.3 not reached.
    # Per iteration (R, P held at the last value; distance and discard over the queries that reached t):
    #    R 3/4, 3/4, 3/4;  P (1+1)/2 = 1, (1/2+1)/2 = 3/4, 3/4
    #    Avg.Distance (0.75+0.6)/2 = 0.675, 0.9, 0.5 -> "Avg." (0.675+0.9+0.5)/3 = 0.691667
    #    discard (0+0)/2 = 0, 0.5, 0 -> mean 1/6, a fraction
    out = summarize(early_stop_runs(), iterations=3, bootstrap=0)
    it = out["per_iteration"]
    assert it["recall"] == pytest.approx([0.75, 0.75, 0.75]) and it["precision"] == pytest.approx([1, 0.75, 0.75])
    assert it["avg_distance"] == pytest.approx([0.675, 0.9, 0.5])
    assert it["gt_discard_rate"] == pytest.approx([0, 0.5, 0])
    assert out["final"]["avg_distance"] == pytest.approx(2.075 / 3)
    assert out["final"]["gt_discard_rate"] == pytest.approx(1 / 6) and out["gt_discard_unit"] == "fraction"
    assert out["final"]["recall"] == pytest.approx(0.75) and out["final"]["precision"] == pytest.approx(0.75)
    # spec pads q2 with its last ranks (c carried at 40 -> 0.6 in It.2 and It.3) and leaves its empty rounds
    # out of the discard mean: distance 0.675, (0.9+0.6)/2 = 0.75, (0.5+0.6)/2 = 0.55 -> 1.975/3; discard
    # 0, 50, 0 percent -> 50/3
    spec = summarize(early_stop_runs(), iterations=3, bootstrap=0, protocol="spec")
    assert spec["per_iteration"]["avg_distance"] == pytest.approx([0.675, 0.75, 0.55])
    assert spec["final"]["avg_distance"] == pytest.approx(1.975 / 3)
    assert spec["final"]["gt_discard_rate"] == pytest.approx(50 / 3) and spec["gt_discard_unit"] == "percent"
    assert spec["final"]["recall"] == out["final"]["recall"]


def test_official_rounds_that_discard_nothing_score_zero_and_are_averaged_in():
    # q1 round 1 discards {b, c, x} of which b is GT: 1/3; round 2 selects all it retrieved: 0.
    # q2 selects all it retrieves in both rounds: 0, 0.
    # Per iteration (1/3 + 0)/2 = 1/6, (0 + 0)/2 = 0; the single value (1/6 + 0)/2 = 1/12.
    t1 = trace("q1", {"a", "b"}, [{"a", "b", "c", "x"}, {"y"}], [{"a"}, {"y"}])
    t2 = trace("q2", {"d"}, [{"d"}, {"d2"}], [{"d"}, {"d2"}])
    assert query_curves(t2, 2)["gt_discard_rate"] == [0, 0]
    out = summarize([t1, t2], iterations=2, bootstrap=0)
    assert out["per_iteration"]["gt_discard_rate"] == pytest.approx([1 / 6, 0])
    assert out["final"]["gt_discard_rate"] == pytest.approx(1 / 12)
    # spec leaves the empty rounds out: It.1 only q1's 100/3 %, It.2 no query at all
    spec = summarize([t1, t2], iterations=2, bootstrap=0, protocol="spec")
    assert spec["per_iteration"]["gt_discard_rate"] == pytest.approx([100 / 3, None])


def test_official_distance_of_a_paper_selected_this_round_keeps_its_best_earlier_rank():
    # e is ranked 10 in round 1 (not selected) and 30 in round 2, where it is selected.
    # official: the tracker holds e when round 2's distances are computed: min(30, 10) = 10 -> 0.9.
    # spec: only papers selected before round 2 carry: 30 -> 0.7. Round 1 is 0.9 under both.
    t = trace("q", {"e"}, [{"k"}, {"e"}], [set(), {"e"}], ranks=[{"e": 10}, {"e": 30}])
    assert query_curves(t, 2)["avg_distance"] == pytest.approx([0.9, 0.9])
    assert query_curves(t, 2, protocol="spec")["avg_distance"] == pytest.approx([0.9, 0.7])
    # round 3 does not rank e (it is excluded once selected): the best rank so far, 10, holds under both
    t3 = trace("q", {"e"}, [{"k"}, {"e"}, {"m"}], [set(), {"e"}, set()], ranks=[{"e": 10}, {"e": 30}, {}])
    assert query_curves(t3, 3)["avg_distance"][2] == pytest.approx(0.9)
    assert query_curves(t3, 3, protocol="spec")["avg_distance"][2] == pytest.approx(0.9)


def test_official_bootstrap_interval_uses_the_per_iteration_means():
    runs = early_stop_runs()
    out = summarize(runs * 5, iterations=3, bootstrap=300, seed=2)
    low, high = out["ci95"]["avg_distance"]
    assert low <= out["final"]["avg_distance"] <= high
    # one query cannot vary: the interval collapses onto the value
    single = summarize(runs[:1], iterations=3, bootstrap=50)
    assert single["ci95"]["avg_distance"] == pytest.approx([single["final"]["avg_distance"]] * 2)
