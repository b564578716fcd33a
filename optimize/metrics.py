"""Benchmark metrics in DSPy's metric forms.

A score function takes `(example, prediction)` and returns a float in [0, 1], higher is better; a
feedback function says in words what went wrong (for GEPA's reflection). `as_metric` gives the
`(example, pred, trace=None)` form of Bootstrap*, MIPROv2 and SIMBA; `as_gepa_metric` gives GEPA's
five-argument form returning a score with feedback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dspy

Score = Callable[[dspy.Example, dspy.Prediction], float]
Feedback = Callable[[dspy.Example, dspy.Prediction], str]


@dataclass(frozen=True)
class MetricSpec:
    """A named objective: its score, its feedback, and what it means."""

    name: str
    score: Score
    feedback: Feedback
    description: str


def as_metric(spec: MetricSpec):
    def metric(example, pred, trace=None) -> float:
        return float(spec.score(example, pred))

    metric.__name__ = spec.name
    return metric


def as_gepa_metric(spec: MetricSpec):
    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None) -> dspy.Prediction:
        return dspy.Prediction(score=float(spec.score(gold, pred)), feedback=spec.feedback(gold, pred))

    metric.__name__ = f"{spec.name}_with_feedback"
    return metric


def _names(ids, titles: dict[str, str], limit: int = 5) -> str:
    shown = [f"{i} ({titles[i][:60]})" if titles.get(i) else i for i in list(ids)[:limit]]
    more = len(ids) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


# --- research program: did the report find and cite what the benchmark says is relevant? -------------

def cited_ids(pred) -> set[str]:
    return {r.doc_id for r in pred.references}


def retrieved_ids(pred) -> set[str]:
    return {d for n in pred.report.nodes() for d in n.retrieved_ids}


def _recall(found: set[str], gold: list[str]) -> float:
    return len(found & set(gold)) / len(gold) if gold else 0.0


def cited_recall(example, pred) -> float:
    """Share of the example's relevant documents that the report cites."""
    return _recall(cited_ids(pred), example.relevant_ids)


def retrieved_recall(example, pred) -> float:
    """Share of the example's relevant documents retrieved anywhere in the research tree."""
    return _recall(retrieved_ids(pred), example.relevant_ids)


def research_feedback(example, pred) -> str:
    gold = set(example.relevant_ids)
    missed_search = gold - retrieved_ids(pred)
    missed_cite = (gold - cited_ids(pred)) - missed_search
    titles = dict(getattr(example, "titles", {}) or {})
    parts = []
    if missed_search:
        parts.append(f"No search found these relevant papers: {_names(missed_search, titles)}; "
                     f"plan queries that use their terminology.")
    if missed_cite:
        parts.append(f"These relevant papers were retrieved but not cited: {_names(missed_cite, titles)}; "
                     f"do not discard or skip them.")
    return " ".join(parts) or "Every relevant paper was found and cited."


# --- assessor on frozen candidates: which candidates did it keep? -------------------------------------

def _kept(pred) -> set[str]:
    return {s.source_id for s in pred.kept}


def assess_f1(example, pred) -> float:
    """F1 of the kept candidates against the relevant ones among them (both empty: 1)."""
    gold, kept = set(example.relevant_ids), _kept(pred)
    if not gold and not kept:
        return 1.0
    tp = len(gold & kept)
    return 0.0 if tp == 0 else 2 * tp / (len(gold) + len(kept))


def assess_keep_rate(example, pred) -> float:
    """1 - GT discard rate: share of relevant candidates the assessor kept (no relevant ones: 1)."""
    gold = set(example.relevant_ids)
    return len(gold & _kept(pred)) / len(gold) if gold else 1.0


def assess_feedback(example, pred) -> str:
    gold, kept = set(example.relevant_ids), _kept(pred)
    titles = {s.source_id: s.title for s in example.sources}
    parts = []
    if gold - kept:
        parts.append(f"Relevant papers were discarded: {_names(gold - kept, titles)}.")
    if kept - gold:
        parts.append(f"Irrelevant papers were kept: {_names(kept - gold, titles)}.")
    return " ".join(parts) or "All judgements were right."


# --- planner with retrieval: how early do the planned queries rank the relevant papers? -------------

def plan_recall(example, pred) -> float:
    """Ret.R: share of relevant papers retrieved by any planned query."""
    return _recall(set(pred.best_rank), example.relevant_ids)


def plan_avg_distance(example, pred) -> float:
    """Avg.Distance (spec 004): mean over relevant papers of max(0, 1 - best_rank / 100); missing counts 0."""
    gold = example.relevant_ids
    if not gold:
        return 0.0
    return sum(max(0.0, 1 - pred.best_rank[d] / 100) if d in pred.best_rank else 0.0 for d in gold) / len(gold)


def plan_feedback(example, pred) -> str:
    missed = [d for d in example.relevant_ids if d not in pred.best_rank]
    late = [d for d in example.relevant_ids if pred.best_rank.get(d, 0) > 10]
    titles = dict(getattr(example, "titles", {}) or {})
    parts = []
    if missed:
        parts.append(f"No query retrieved: {_names(missed, titles)}.")
    if late:
        parts.append(f"Ranked below 10: {_names(late, titles)}; make queries more specific to them.")
    return " ".join(parts) or "Every relevant paper ranked in the top 10."


METRICS: dict[str, dict[str, MetricSpec]] = {
    "research": {
        "recall": MetricSpec("recall", cited_recall, research_feedback, "relevant papers cited by the report"),
        "retrieved_recall": MetricSpec("retrieved_recall", retrieved_recall, research_feedback,
                                       "relevant papers retrieved anywhere in the tree"),
    },
    "assessor": {
        "f1": MetricSpec("f1", assess_f1, assess_feedback, "F1 of kept vs relevant candidates"),
        "discard": MetricSpec("discard", assess_keep_rate, assess_feedback, "1 - GT discard rate"),
    },
    "planner": {
        "recall": MetricSpec("recall", plan_recall, plan_feedback, "Ret.R of the planned queries"),
        "avg_distance": MetricSpec("avg_distance", plan_avg_distance, plan_feedback,
                                   "Avg.Distance of the relevant papers' best ranks"),
    },
}


def metric_spec(target: str, name: str) -> MetricSpec:
    """The metric `name` for optimization target `target`, with a message listing the choices."""
    if target not in METRICS:
        raise ValueError(f"no metrics for {target!r}; choose one of: {', '.join(METRICS)}")
    if name not in METRICS[target]:
        raise ValueError(f"unknown metric {name!r} for {target}; choose one of: {', '.join(METRICS[target])}")
    return METRICS[target][name]
