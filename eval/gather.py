"""Information-gathering metrics, as ScholarGym publishes them.

Per query and iteration t, with G the ground truth, R_t and S_t the papers retrieved and selected in
round t, and R_{<=t}, S_{<=t} their unions over rounds 1..t:
  Ret.R = |G ∩ R_{<=t}| / |G|      Ret.P = |G ∩ R_{<=t}| / |R_{<=t}|   (0 when nothing was retrieved)
  R     = |G ∩ S_{<=t}| / |G|      P     = |G ∩ S_{<=t}| / |S_{<=t}|   (0 when nothing was selected)
P, R, Ret.P, Ret.R are averaged over queries (macro) and F1 = 2·P̄·R̄ / (P̄ + R̄), the harmonic mean of the
means; the mean of per-query F1 and micro P/R are reported beside it under their own names.
Avg.Distance: d(g) = max(0, 1 - r_g / K), K = 100, r_g the 0-based best rank of g; per query the mean over G.
GT discard rate: |G ∩ (R_t \\ S_t)| / |R_t \\ S_t| per round, averaged over queries, then over iterations.
Queries with an empty G are skipped and counted.

Two protocols settle the edges, and every summary names the one it used:
  official (default) — the rules of ScholarGym's released scorer (code/deeprag.py, code/eval.py,
      code/metrics.py at commit f426fd1), which computed the paper's tables: an empty plan (or a failed plan)
      at any iteration, or the completion flag at iteration 1, fails the query; R, P, Ret.R and Ret.P of a
      query that stopped early hold their last value up to T, while Avg.Distance and the discard rate average
      only the queries that reached the iteration; a round that discarded nothing has discard rate 0, a
      fraction; a ground-truth paper selected in round t keeps the best of its rank at t and its earlier ranks.
  spec — this library's reading of the paper's prose: the loop's own failure flag (the completion flag before
      anything was selected, or an empty first plan), every curve held at its last value up to T, a round
      that discarded nothing left out of the discard mean (in percent), and only papers selected before
      round t keep their earlier ranks.

The same metrics come from a research run's trace.json when it ran the `gather` strategy
(`deepresearch run --preset gather`): `metrics_from_trace`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepresearch.eval.f1 import harmonic_mean
from deepresearch.eval.protocols import DISTANCE_VARIANTS, FAILED_POLICIES, PROTOCOLS
from deepresearch.programs.gather.artifacts import GatherResult

DISTANCE_K = 100
# What each protocol's numbers match, written into every summary.
PROTOCOL_SOURCES = {
    "official": "ScholarGym's released scorer (shenhao-stu/ScholarGym@f426fd1 code/deeprag.py, code/eval.py, "
    "code/metrics.py)",
    "spec": "the ScholarGym paper's prose as this library read it before the released scorer was checked",
}
# Stops the released workflow turns into a dropped query whatever the round: an empty plan returns None
# (an unparseable reply parses to an empty plan), and a raised error drops the query in eval.py.
OFFICIAL_FAILING_STOPS = ("no_new_subqueries", "plan_failed")
RATES = ("recall", "precision", "ret_recall", "ret_precision")  # each query's cumulative rates, per iteration


@dataclass(frozen=True)
class QueryTrace:
    """What the metrics need from one query: per round, the retrieved and selected ids and the 0-based best
    rank of each ground-truth paper among that round's subqueries (absent when not ranked)."""

    query_id: str
    gt: frozenset[str]
    retrieved: tuple[frozenset[str], ...]
    selected: tuple[frozenset[str], ...]
    ranks: tuple[dict[str, int], ...] = ()
    is_failed: bool = False
    stop_reason: str = ""

    @classmethod
    def from_result(cls, query_id: str, gt: Iterable[str], result: GatherResult) -> QueryTrace:
        truth = frozenset(gt)
        iterations = [r.iteration for r in result.rounds]
        return cls(
            query_id=query_id,
            gt=truth,
            retrieved=tuple(frozenset(result.retrieved_in(t)) for t in iterations),
            selected=tuple(frozenset(result.selected_in(t)) for t in iterations),
            ranks=tuple(gt_ranks(result, truth)),
            is_failed=result.is_failed,
            stop_reason=result.stop_reason,
        )

    def failed_under(self, protocol: str) -> bool:
        """Whether the query leaves the means under `protocol` (see the module docstring).

        `spec` reads the loop's own flag. `official` follows the released workflow: an empty or failed plan at
        any round, or the completion flag before the first round ran; stops the released code does not have
        (budget, deadline, interruption) keep the loop's flag.
        """
        if protocol == "spec":
            return self.is_failed
        if self.stop_reason in OFFICIAL_FAILING_STOPS:
            return True
        if self.stop_reason == "complete":
            return not self.retrieved
        return self.is_failed


def gt_ranks(result: GatherResult, gt: frozenset[str]) -> list[dict[str, int]]:
    """Per round, the best 0-based rank of each ground-truth paper over that round's searches: its position in
    the recorded top of the ranking, or in the page returned (a 1-based Hit rank minus one)."""
    per_round = []
    for r in result.rounds:
        best: dict[str, int] = {}
        for s in r.searches:
            positions = [(doc_id, i) for i, doc_id in enumerate(s.ranking) if doc_id in gt]
            positions += [(c.doc_id, c.rank - 1) for c in s.candidates if c.doc_id in gt]
            for doc_id, i in positions:
                best[doc_id] = min(i, best.get(doc_id, i))
        per_round.append(best)
    return per_round


def precision_recall(gt: frozenset[str], found: set[str] | frozenset[str]) -> tuple[float, float]:
    """(|G ∩ F| / |F|, |G ∩ F| / |G|); precision is 0 for an empty F. G must not be empty."""
    hits = len(gt & found)
    return (hits / len(found) if found else 0.0), hits / len(gt)


def distance(rank: int | None, k: int = DISTANCE_K) -> float:
    """d = max(0, 1 - rank / k) for a 0-based rank; a paper never ranked scores 0."""
    return 0.0 if rank is None else max(0.0, 1.0 - rank / k)


def _padded(trace: QueryTrace, iterations: int) -> tuple[list, list, list]:
    """Rounds 1..iterations; after an early stop nothing new is retrieved or selected and the last ranks hold."""
    retrieved, selected, ranks = list(trace.retrieved), list(trace.selected), list(trace.ranks)
    ranks += [{}] * (len(retrieved) - len(ranks))
    last = ranks[-1] if ranks else {}
    while len(retrieved) < iterations:
        retrieved.append(frozenset())
        selected.append(frozenset())
        ranks.append(last)
    return retrieved[:iterations], selected[:iterations], ranks[:iterations]


def query_curves(
    trace: QueryTrace, iterations: int, variant: str = "per_iteration", k: int = DISTANCE_K, protocol: str = "official"
) -> dict[str, list[float]]:
    """Per-iteration values for one query: cumulative recall/precision on selected and retrieved sets,
    Avg.Distance, and the GT discard rate.

    NaN marks a value left out of the iteration's mean: under `official`, Avg.Distance and the discard rate
    of the rounds after an early stop; under `spec`, the discard rate of a round that discarded nothing.
    """
    if variant not in DISTANCE_VARIANTS:
        raise ValueError(f"unknown Avg.Distance variant {variant!r}; choose one of: {', '.join(DISTANCE_VARIANTS)}")
    _check_protocol(protocol)
    if not trace.gt:
        raise ValueError(f"query {trace.query_id!r} has no ground truth; skip it before scoring")
    official = protocol == "official"
    reached = len(trace.retrieved)
    retrieved, selected, ranks = _padded(trace, iterations)
    curves: dict[str, list[float]] = {m: [] for m in (*RATES, "avg_distance", "gt_discard_rate", "selected_size")}
    all_r, all_s = set(), set()
    best_ever: dict[str, int] = {}
    selected_before: set[str] = set()
    for t, (r_t, s_t, ranks_t) in enumerate(zip(retrieved, selected, ranks)):
        all_r |= r_t
        all_s |= s_t
        p, r = precision_recall(trace.gt, all_s)
        ret_p, ret_r = precision_recall(trace.gt, all_r)
        # official: the released tracker already holds this round's selections when distances are computed
        carried = selected_before | s_t if official else selected_before
        if variant == "cumulative":
            current = {g: min(i, best_ever.get(g, i)) for g, i in ranks_t.items()}
            current = {**best_ever, **current}
        else:  # this round's subqueries, plus the best earlier rank of papers already selected (now excluded)
            current = dict(ranks_t)
            for g in carried & trace.gt:
                if g in best_ever:
                    current[g] = min(best_ever[g], current.get(g, best_ever[g]))
        for g, i in ranks_t.items():
            best_ever[g] = min(i, best_ever.get(g, i))
        selected_before |= s_t
        discarded = r_t - s_t
        curves["recall"].append(r)
        curves["precision"].append(p)
        curves["ret_recall"].append(ret_r)
        curves["ret_precision"].append(ret_p)
        curves["selected_size"].append(float(len(all_s)))
        if official and t >= reached:  # the released scorer has no round here: left out, not padded
            curves["avg_distance"].append(np.nan)
            curves["gt_discard_rate"].append(np.nan)
            continue
        curves["avg_distance"].append(sum(distance(current.get(g), k) for g in trace.gt) / len(trace.gt))
        if official:  # a fraction, 0 when the round discarded nothing
            curves["gt_discard_rate"].append(len(trace.gt & discarded) / len(discarded) if discarded else 0.0)
        else:
            curves["gt_discard_rate"].append(100 * len(trace.gt & discarded) / len(discarded) if discarded else np.nan)
    return curves


def _check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown scoring protocol {protocol!r}; choose one of: {', '.join(PROTOCOLS)}")


def _iteration_means(values: np.ndarray) -> np.ndarray:
    """Per-iteration means of a (queries, iterations) array over its non-NaN entries (NaN where none)."""
    counts = (~np.isnan(values)).sum(axis=0)
    sums = np.nansum(values, axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _mean_or_none(values: np.ndarray) -> float | None:
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else None


def _aggregate(m: dict[str, np.ndarray], hits: dict[str, np.ndarray]) -> dict[str, float | None]:
    """Final-iteration summary from per-query arrays of shape (queries, iterations); None where no query has a
    value (`avg_distance`, `gt_discard_rate`)."""
    last = {name: float(m[name][:, -1].mean()) for name in (*RATES, "selected_size")}
    final: dict[str, float | None] = dict(last)
    final["f1"] = harmonic_mean(last["precision"], last["recall"])
    final["ret_f1"] = harmonic_mean(last["ret_precision"], last["ret_recall"])
    per_query_f1 = [harmonic_mean(p, r) for p, r in zip(m["precision"][:, -1], m["recall"][:, -1])]
    per_query_ret_f1 = [harmonic_mean(p, r) for p, r in zip(m["ret_precision"][:, -1], m["ret_recall"][:, -1])]
    final["mean_query_f1"] = float(np.mean(per_query_f1))
    final["mean_query_ret_f1"] = float(np.mean(per_query_ret_f1))
    # the paper's "Avg." is the mean of the It.1..It.T values; each averages the queries that have a value there
    final["avg_distance"] = _mean_or_none(_iteration_means(m["avg_distance"]))
    final["gt_discard_rate"] = _mean_or_none(_iteration_means(m["gt_discard_rate"]))
    g, s, r = hits["gt"].sum(), hits["selected"].sum(), hits["retrieved"].sum()
    final["micro_recall"] = float(hits["gt_selected"].sum() / g)
    final["micro_precision"] = float(hits["gt_selected"].sum() / s) if s else 0.0
    final["micro_ret_recall"] = float(hits["gt_retrieved"].sum() / g)
    final["micro_ret_precision"] = float(hits["gt_retrieved"].sum() / r) if r else 0.0
    final["gt_retention"] = last["recall"] / last["ret_recall"] if last["ret_recall"] else 0.0
    final["gt_loss"] = last["ret_recall"] - last["recall"]
    return final


CI_METRICS = ("recall", "precision", "f1", "ret_recall", "ret_precision", "ret_f1", "avg_distance")


def summarize(
    traces: Sequence[QueryTrace],
    iterations: int,
    *,
    variant: str = "per_iteration",
    failed: str = "excluded",
    k: int = DISTANCE_K,
    bootstrap: int = 1000,
    seed: int = 0,
    protocol: str = "official",
) -> dict:
    """Scores a run.

    Args:
        traces: One per query, empty ground truth included (skipped and counted).
        iterations: T; every curve has T points and the final values are at T.
        variant: Avg.Distance rank rule, `per_iteration` (default, the reference) or `cumulative`.
        failed: `excluded` (paper parity: failed queries leave the means) or `included`.
        k: Avg.Distance cutoff K.
        bootstrap: Resamples of queries for the 95% intervals (0 for none).
        seed: Seed of the resampling.
        protocol: `official` (default: the released scorer's edge rules, comparable to the paper's tables)
            or `spec`; see the module docstring.

    Returns:
        A dict with counts (`queries`, `evaluated`, `skipped_no_gt`, `failed`, `failed_by_stop`), the
        `protocol` and what it matches (`protocol_source`), `gt_discard_unit` (`fraction` or `percent`),
        `final` metrics, `per_iteration` curves (lists of T values, None where no query has a value) and
        `ci95` ([low, high] per metric in CI_METRICS).
    """
    if failed not in FAILED_POLICIES:
        raise ValueError(f"unknown failed-query policy {failed!r}; choose one of: {', '.join(FAILED_POLICIES)}")
    _check_protocol(protocol)
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    scored = [t for t in traces if t.gt]
    failing = [t for t in scored if t.failed_under(protocol)]
    by_stop: dict[str, int] = {}
    for t in failing:
        by_stop[t.stop_reason or "unknown"] = by_stop.get(t.stop_reason or "unknown", 0) + 1
    if failed == "excluded":
        scored = [t for t in scored if not t.failed_under(protocol)]
    counts = {
        "protocol": protocol,
        "protocol_source": PROTOCOL_SOURCES[protocol],
        "queries": len(traces),
        "evaluated": len(scored),
        "skipped_no_gt": len(traces) - sum(bool(t.gt) for t in traces),
        "failed": len(failing),
        "failed_by_stop": dict(sorted(by_stop.items())),
        "failed_policy": failed,
        "iterations": iterations,
        "distance_variant": variant,
        "gt_discard_unit": "fraction" if protocol == "official" else "percent",
    }
    if not scored:
        return {**counts, "final": {}, "per_iteration": {}, "ci95": {}}
    curves = [query_curves(t, iterations, variant, k, protocol) for t in scored]
    m = {name: np.array([c[name] for c in curves], dtype=float) for name in curves[0]}
    hits = {
        "gt": np.array([len(t.gt) for t in scored]),
        "selected": np.array([len(frozenset().union(*t.selected)) for t in scored]),
        "retrieved": np.array([len(frozenset().union(*t.retrieved)) for t in scored]),
        "gt_selected": np.array([len(t.gt & frozenset().union(*t.selected)) for t in scored]),
        "gt_retrieved": np.array([len(t.gt & frozenset().union(*t.retrieved)) for t in scored]),
    }
    means = {name: [float(x) for x in m[name].mean(axis=0)] for name in RATES}
    per_iteration: dict[str, Sequence[float | None]] = dict(means)
    per_iteration["f1"] = [harmonic_mean(p, r) for p, r in zip(means["precision"], means["recall"])]
    for name in ("avg_distance", "gt_discard_rate"):
        per_iteration[name] = [None if np.isnan(x) else float(x) for x in _iteration_means(m[name])]
    return {
        **counts,
        "final": _aggregate(m, hits),
        "per_iteration": per_iteration,
        "ci95": bootstrap_ci(m, hits, bootstrap, seed),
    }


def bootstrap_ci(
    m: dict[str, np.ndarray], hits: dict[str, np.ndarray], resamples: int = 1000, seed: int = 0
) -> dict[str, list[float]]:
    """Percentile 95% intervals of the final metrics over query resamples (F1 recomputed from resampled means)."""
    if resamples <= 0:
        return {}
    rng = np.random.default_rng(seed)
    n = next(iter(m.values())).shape[0]
    idx = rng.integers(0, n, size=(resamples, n))
    samples: dict[str, np.ndarray] = {name: m[name][:, -1][idx].mean(axis=1) for name in RATES}
    # Avg.Distance as `_aggregate` takes it: per-iteration means over the queries with a value, then their mean
    distances = m["avg_distance"]
    weights = np.zeros((resamples, n))
    np.add.at(weights, (np.arange(resamples)[:, None], idx), 1.0)
    sums, counts = weights @ np.nan_to_num(distances), weights @ (~np.isnan(distances))
    with np.errstate(invalid="ignore", divide="ignore"):
        columns = np.where(counts > 0, sums / counts, np.nan)
        have = (~np.isnan(columns)).sum(axis=1)
        samples["avg_distance"] = np.where(have > 0, np.nansum(columns, axis=1) / np.maximum(have, 1), np.nan)
    for f1, (p, r) in {"f1": ("precision", "recall"), "ret_f1": ("ret_precision", "ret_recall")}.items():
        total = samples[p] + samples[r]
        samples[f1] = np.divide(2 * samples[p] * samples[r], total, out=np.zeros_like(total), where=total > 0)
    return {
        name: [float(np.nanpercentile(samples[name], 2.5)), float(np.nanpercentile(samples[name], 97.5))]
        for name in CI_METRICS
        if not np.isnan(samples[name]).all()
    }


def metrics_from_trace(
    trace: Mapping[str, Any],
    relevant_ids: Iterable[str],
    *,
    iterations: int | None = None,
    failed: str = "included",
    bootstrap: int = 0,
    **options: Any,
) -> dict:
    """ScholarGym's metrics of one research run of the `gather` strategy, from its trace.

    Args:
        trace: The parsed trace.json of `deepresearch run ... --preset gather` (or `Report.to_dict()`).
        relevant_ids: The question's ground truth G.
        iterations: T; by default the run's `config.gather.iterations` as the trace records it, else the
            rounds it ran (a loop that stopped early is padded to T, as in `summarize`).
        failed: As in `summarize`; `included` by default, so a failed loop scores zeros instead of nothing.
        bootstrap: As in `summarize`; none by default (one query).
        **options: Passed on to `summarize` (`protocol`, `variant`, `k`, `seed`).

    Returns:
        `summarize`'s dict for this one query.

    Raises:
        ValueError: when the trace holds no gathering result (the run used another strategy).
    """
    if not trace.get("gathered"):
        raise ValueError(
            "the trace has no gathering result (`gathered`); it comes from runs of the gather "
            "strategy: deepresearch run ... --preset gather"
        )
    result = GatherResult.from_dict(trace["gathered"])
    query = QueryTrace.from_result(result.question, relevant_ids, result)
    if iterations is None:
        iterations = (trace.get("config") or {}).get("gather", {}).get("iterations") or max(len(query.retrieved), 1)
    return summarize([query], iterations, failed=failed, bootstrap=bootstrap, **options)
