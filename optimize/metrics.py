"""Benchmark metrics in DSPy's metric forms.

A score function takes `(example, prediction)` and returns a float in [0, 1], higher is better; a
feedback function says in words what went wrong (for GEPA's reflection). `as_metric` gives the
`(example, pred, trace=None)` form of Bootstrap*, MIPROv2 and SIMBA; `as_gepa_metric` gives GEPA's
five-argument form returning a score with feedback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dspy

from deepresearch.eval.citations import citations_in, claim_sentences, lexical_coverage
from deepresearch.eval.f1 import harmonic_mean
from deepresearch.eval.gather import precision_recall
from deepresearch.programs.stages.registry import STAGES

if TYPE_CHECKING:
    from deepresearch.eval.quality import Support

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


def gold_ids(example) -> list[str]:
    """The example's gold paper ids: `relevant_ids` (`dr.examples`, research trainsets) or `gt_ids` (gathering)."""
    ids = example.get("relevant_ids")
    return list(ids if ids is not None else example.get("gt_ids") or ())


def cited_recall(example, pred, trace=None) -> float:
    """Share of the example's relevant documents that the report cites."""
    return _recall(cited_ids(pred), gold_ids(example))


def cited_precision(example, pred, trace=None) -> float:
    """Share of the documents the report cites that are among the example's relevant ones (0 for no citation)."""
    cited = cited_ids(pred)
    return len(cited & set(gold_ids(example))) / len(cited) if cited else 0.0


def citation_support(example, pred, trace=None) -> float:
    """Share of the report's cited sentences that the passages they cite support, by the lexical rule
    (`deepresearch.eval.quality`): the report's own passages are the evidence, so no corpus and no LM are needed.
    A report that cites nothing scores 0."""
    texts = dict(pred.report.passages)
    by_doc = {r.doc_id: texts.get(r.source_id) for r in pred.report.references}
    return _quality(Judging(text_of=by_doc.get), "research", example, pred).citation_precision


def retrieved_recall(example, pred, trace=None) -> float:
    """Share of the example's relevant documents retrieved anywhere in the research tree."""
    return _recall(retrieved_ids(pred), gold_ids(example))


def research_feedback(example, pred) -> str:
    gold = set(example.relevant_ids)
    missed_search = gold - retrieved_ids(pred)
    missed_cite = (gold - cited_ids(pred)) - missed_search
    titles = dict(getattr(example, "titles", {}) or {})
    parts = []
    if missed_search:
        parts.append(
            f"No search found these relevant papers: {_names(missed_search, titles)}; "
            f"plan queries that use their terminology."
        )
    if missed_cite:
        parts.append(
            f"These relevant papers were retrieved but not cited: {_names(missed_cite, titles)}; "
            f"do not discard or skip them."
        )
    return " ".join(parts) or "Every relevant paper was found and cited."


# --- assessors on frozen candidates: which candidates did it keep? -----------------------------------
# Works for the research program's Assessor (kept Sources, example.relevant_ids) and the gathering loop's
# CandidateAssessor (judgements by doc id, example.gt_ids restricted to the candidates).


def _kept(pred) -> set[str]:
    if "kept" in pred:
        return {s.source_id for s in pred.kept}
    return {j.source_id for j in pred.judgements if j.label == "relevant"}


def _gold(example) -> set[str]:
    if "relevant_ids" in example:
        return set(example.relevant_ids)
    return set(example.gt_ids) & {h.doc.doc_id for h in example.hits}


def _titles(example) -> dict[str, str]:
    if "sources" in example:
        return {s.source_id: s.title for s in example.sources}
    return {h.doc.doc_id: h.doc.title for h in example.hits}


def assess_f1(example, pred) -> float:
    """F1 of the kept candidates against the relevant ones among them (both empty: 1)."""
    gold, kept = _gold(example), _kept(pred)
    if not gold and not kept:
        return 1.0
    tp = len(gold & kept)
    return 0.0 if tp == 0 else 2 * tp / (len(gold) + len(kept))


def assess_keep_rate(example, pred) -> float:
    """1 - GT discard rate: share of relevant candidates the assessor kept (no relevant ones: 1)."""
    gold = _gold(example)
    return len(gold & _kept(pred)) / len(gold) if gold else 1.0


def assess_feedback(example, pred) -> str:
    gold, kept, titles = _gold(example), _kept(pred), _titles(example)
    parts = []
    if gold - kept:
        parts.append(f"Relevant papers were discarded: {_names(sorted(gold - kept), titles)}.")
    if kept - gold:
        parts.append(f"Irrelevant papers were kept: {_names(sorted(kept - gold), titles)}.")
    return " ".join(parts) or "All judgements were right."


# --- planner with retrieval: how early do the planned queries rank the relevant papers? -------------


def plan_recall(example, pred) -> float:
    """Ret.R: share of relevant papers that some planned query ranks within the hits a run reads (`read_k`)."""
    k = getattr(pred, "read_k", None)
    return _recall({d for d, rank in pred.best_rank.items() if k is None or rank <= k}, example.relevant_ids)


def plan_avg_distance(example, pred) -> float:
    """ScholarGym's Avg.Distance: mean over relevant papers of max(0, 1 - best_rank / 100); missing counts 0."""
    gold = example.relevant_ids
    if not gold:
        return 0.0
    return sum(max(0.0, 1 - pred.best_rank[d] / 100) if d in pred.best_rank else 0.0 for d in gold) / len(gold)


def plan_feedback(example, pred) -> str:
    k = getattr(pred, "read_k", None) or 10
    missed = [d for d in example.relevant_ids if d not in pred.best_rank]
    late = [d for d in example.relevant_ids if pred.best_rank.get(d, 0) > k]
    titles = dict(getattr(example, "titles", {}) or {})
    parts = []
    if missed:
        parts.append(f"No query retrieved: {_names(missed, titles)}.")
    if late:
        parts.append(f"Ranked below {k}: {_names(late, titles)}; make queries more specific to them.")
    return " ".join(parts) or f"Every relevant paper ranked in the top {k}."


# --- the gathering loop (ScholarGym): selected and retrieved sets of one query -----------------------


def gather_f1(example, pred, trace=None) -> float:
    """F1 of the selected papers (final iteration); 0 for a query without ground truth."""
    gt = frozenset(gold_ids(example))
    return harmonic_mean(*precision_recall(gt, set(pred.selected))) if gt else 0.0


def gather_recall(example, pred, trace=None) -> float:
    """Share of the ground-truth papers the gathering loop selected."""
    return _recall(set(pred.selected), gold_ids(example))


def gather_ret_recall(example, pred, trace=None) -> float:
    """Ret.R: share of ground-truth papers retrieved by any subquery."""
    return _recall(set(pred.candidates), gold_ids(example))


def gather_avg_distance(example, pred) -> float:
    """Avg.Distance over the whole run: max(0, 1 - best rank / 100) per ground-truth paper, missing = 0."""
    gt = list(example.gt_ids)
    if not gt:
        return 0.0
    best = {d: min(ranks.values()) for d, ranks in pred.candidates.items()}
    return sum(max(0.0, 1 - best[d] / 100) if d in best else 0.0 for d in gt) / len(gt)


def gather_keep_rate(example, pred) -> float:
    """1 - GT discard rate: share of retrieved ground-truth papers that were selected (none retrieved: 1)."""
    found = set(gold_ids(example)) & set(pred.candidates)
    return len(found & set(pred.selected)) / len(found) if found else 1.0


def gather_feedback(example, pred) -> str:
    gt, retrieved, selected = set(gold_ids(example)), set(pred.candidates), set(pred.selected)
    parts = []
    if gt - retrieved:
        parts.append(
            f"Ground-truth papers no subquery retrieved: {_names(sorted(gt - retrieved), {})}; "
            f"derive or expand subqueries toward them."
        )
    if (gt & retrieved) - selected:
        parts.append(f"Ground-truth papers retrieved but discarded: {_names(sorted((gt & retrieved) - selected), {})}.")
    wrong = selected - gt
    if wrong:
        parts.append(f"{len(wrong)} selected papers are not in the ground truth.")
    return " ".join(parts) or "Every ground-truth paper was found and selected."


# --- taxonomies (TaxoBench): the predicted tree against the expert tree -------------------------------


def _survey_score(example, pred):
    from deepresearch.eval.taxonomy import score_survey  # lazy: start-up

    cache = getattr(pred, "_score", None)
    if cache is None:
        cache = score_survey(example.gt, pred.tree, survey_id=example.get("survey_id"), topic=example.topic)
        pred._score = cache
    return cache


def taxonomy_ari(example, pred) -> float:
    """Leaf-level ARI of the paper grouping (negative values count as 0)."""
    return max(0.0, _survey_score(example, pred).leaf["ari"])


def taxonomy_sem_path(example, pred) -> float:
    return _survey_score(example, pred).sem_path


def taxonomy_ted(example, pred) -> float:
    """1 - US-NTED: 1 for a tree identical to the expert's."""
    return 1.0 - _survey_score(example, pred).us_nted


def taxonomy_feedback(example, pred) -> str:
    score = _survey_score(example, pred)
    top = [n.get("name", "") for n in example.gt.get("subtopics", [])][:8]
    parts = [f"Leaf grouping ARI {score.leaf['ari']:.2f}, SEM-PATH {score.sem_path:.2f}, US-NTED {score.us_nted:.2f}."]
    if top:
        parts.append(f"The expert organises the topic under: {'; '.join(top)}.")
    if score.unmatched_model:
        parts.append(f"{len(score.unmatched_model)} titles in the tree match no input paper; copy titles exactly.")
    return " ".join(parts)


METRICS: dict[str, dict[str, MetricSpec]] = {
    "research": {
        "recall": MetricSpec("recall", cited_recall, research_feedback, "relevant papers cited by the report"),
        "retrieved_recall": MetricSpec(
            "retrieved_recall", retrieved_recall, research_feedback, "relevant papers retrieved anywhere in the tree"
        ),
    },
    STAGES.assess.tuning_target: {
        "f1": MetricSpec("f1", assess_f1, assess_feedback, "F1 of kept vs relevant candidates"),
        "discard": MetricSpec("discard", assess_keep_rate, assess_feedback, "1 - GT discard rate"),
    },
    STAGES.plan.tuning_target: {
        "recall": MetricSpec("recall", plan_recall, plan_feedback, "Ret.R of the planned queries"),
        "avg_distance": MetricSpec(
            "avg_distance", plan_avg_distance, plan_feedback, "Avg.Distance of the relevant papers' best ranks"
        ),
    },
    "gather": {
        "f1": MetricSpec("f1", gather_f1, gather_feedback, "F1 of the selected papers"),
        "recall": MetricSpec("recall", gather_recall, gather_feedback, "recall of the selected papers"),
        "ret_recall": MetricSpec("ret_recall", gather_ret_recall, gather_feedback, "Ret.R of all subqueries"),
        "avg_distance": MetricSpec(
            "avg_distance", gather_avg_distance, gather_feedback, "Avg.Distance of ground-truth papers' best ranks"
        ),
        "discard": MetricSpec("discard", gather_keep_rate, gather_feedback, "1 - GT discard rate"),
    },
    "taxonomy": {
        "ari": MetricSpec("ari", taxonomy_ari, taxonomy_feedback, "leaf-level ARI against the expert tree"),
        "sem_path": MetricSpec("sem_path", taxonomy_sem_path, taxonomy_feedback, "SEM-PATH against the expert tree"),
        "us_nted": MetricSpec("us_nted", taxonomy_ted, taxonomy_feedback, "1 - US-NTED against the expert tree"),
    },
}


# --- what the writing stages produce (deepresearch.eval.quality): citation support, key points, integration


@dataclass(frozen=True)
class Judging:
    """What the writing metrics judge with: an entailment judge, and the corpus text of a cited document.

    Args:
        support: `deepresearch.eval.quality.Support`: a judge LM with cached verdicts, or the offline lexical rule.
        text_of: doc id -> text, to read the papers a research report cites (its references hold ids only).
    """

    support: Support | None = None  # None: `__post_init__` sets the offline lexical rule
    text_of: Callable[[str], str | None] | None = None

    def __post_init__(self):
        if self.support is None:
            from deepresearch.eval.quality import Support  # lazy: start-up

            object.__setattr__(self, "support", Support())


QUALITY_NAMES = ("citation_f1", "citation_precision", "citation_recall", "quality")
# Metric names of each writing target; `quality` is the composite (deepresearch.eval.quality.COMPOSITE_WEIGHTS, times
# retention where the stage was given citations to keep).
WRITING_METRICS: dict[str, tuple[str, ...]] = {
    "research": (*QUALITY_NAMES, "kpr", "integration"),
    STAGES.extract.name: QUALITY_NAMES,
    STAGES.merge.name: (*QUALITY_NAMES, "retention"),
    STAGES.write.name: (*QUALITY_NAMES, "kpr", "integration", "retention"),
    STAGES.enrich_write.name: (*QUALITY_NAMES, "retention"),
    STAGES.enrich.name: ("gaps",),
}


def _ids(learnings) -> list[str]:
    return list(dict.fromkeys(sid.lower() for lr in learnings for sid in lr.source_ids))


def _quality(judging: Judging, target: str, example, pred):
    """The `deepresearch.eval.quality.Quality` of a prediction, computed once per prediction and judge."""
    from deepresearch.eval.quality import learning_claims, score_claims  # lazy: start-up

    cache = pred.__dict__.setdefault("_quality", {})
    if id(judging) in cache:
        return cache[id(judging)]
    support, key_points = judging.support, tuple(example.get("key_points") or ())
    assert support is not None  # Judging.__post_init__ sets it
    question = example.get("question") or ""
    if target == "research":
        if judging.text_of is None:
            raise ValueError("the research report metrics read the cited papers: pass Judging(text_of=...)")
        from deepresearch.eval.run_report import cited_passages  # lazy: start-up

        md = pred.report.markdown
        q = score_claims(
            claim_sentences(md),
            cited_passages(pred.report, judging.text_of),
            support,
            text=md,
            question=question,
            key_points=key_points,
        )
    elif target == STAGES.extract.name:
        passages = {s.source_id: f"{s.title}\n{s.text}" for s in example.sources}
        q = score_claims(learning_claims(pred.learnings), passages, support, integration=False)
    elif target in (STAGES.merge.name, STAGES.enrich_write.name):
        text = pred.summary if target == STAGES.merge.name else pred.paragraph
        q = score_claims(claim_sentences(text), example.passages, support, text=text, given=_ids(example.learnings))
    elif target == STAGES.write.name:
        given = list(dict.fromkeys(c for f in example.findings for c in citations_in(f.summary)))
        q = score_claims(
            claim_sentences(pred.report),
            example.passages,
            support,
            text=pred.report,
            question=question,
            key_points=key_points,
            given=given,
        )
    else:
        raise ValueError(f"no writing metrics for {target!r}")
    cache[id(judging)] = q
    return q


def gap_score(example, pred) -> float:
    """Follow-up tasks that ask about the question's open points and reach past what the node has.

    An offline heuristic, named as such: per task, the share of its query's content words found in the
    question, focus or open questions (on topic) averaged with the share not already in the summary (new);
    the mean over tasks, scaled by how many of the `max_tasks` slots the open questions call for.
    """
    tasks = list(pred.tasks)
    wanted = min(example.max_tasks, max(1, len(example.open_questions)))
    if not tasks:
        return 0.0 if example.open_questions else 1.0
    topic = " ".join([example.question, example.focus, *example.open_questions])
    per_task = [
        0.5 * lexical_coverage(topic, t.query) + 0.5 * (1 - lexical_coverage(example.summary, t.query)) for t in tasks
    ]
    return sum(per_task) / len(per_task) * min(1.0, len(tasks) / wanted)


def gap_feedback(example, pred) -> str:
    if not pred.tasks:
        return (
            "No follow-up task was proposed although the sources left these open: "
            f"{'; '.join(example.open_questions[:3])}."
            if example.open_questions
            else "No follow-up task, and nothing was left open: right."
        )
    topic = " ".join([example.question, example.focus, *example.open_questions])
    parts = []
    for t in pred.tasks:
        if lexical_coverage(topic, t.query) < 0.5:
            parts.append(f'"{t.query}" strays from the question and its open points.')
        if lexical_coverage(example.summary, t.query) > 0.8:
            parts.append(f'"{t.query}" asks again what the summary already covers.')
    return " ".join(parts) or "The follow-up tasks target open points the summary does not cover."


def writing_spec(target: str, name: str, judging: Judging) -> MetricSpec:
    """A writing metric of `target` judged by `judging`."""
    if name == "gaps":
        return MetricSpec("gaps", gap_score, gap_feedback, "follow-up tasks on the open points (heuristic)")

    def score(example, pred) -> float:
        q = _quality(judging, target, example, pred)
        value = q.composite if name == "quality" else getattr(q, name)
        if value is None:
            raise ValueError(
                f"metric {name} needs what this example lacks (key points for kpr; given "
                f"citations for retention); choose another metric"
            )
        return float(value)

    def feedback(example, pred) -> str:
        return _quality(judging, target, example, pred).feedback()

    judge = judging.support
    assert judge is not None  # Judging.__post_init__ sets it
    return MetricSpec(name, score, feedback, f"{name} of the {target} output, judged by {judge.name}")


def metric_names(target: str) -> tuple[str, ...]:
    return (*METRICS.get(target, {}), *WRITING_METRICS.get(target, ()))


def metric_spec(target: str, name: str, judging: Judging | None = None) -> MetricSpec:
    """The metric `name` for optimization target `target`, with a message listing the choices.

    Writing metrics (`WRITING_METRICS`) are judged by `judging` (default: the offline lexical rule).
    """
    if target not in METRICS and target not in WRITING_METRICS:
        raise ValueError(f"no metrics for {target!r}; choose one of: {', '.join({*METRICS, *WRITING_METRICS})}")
    if name in METRICS.get(target, {}):
        return METRICS[target][name]
    if name in WRITING_METRICS.get(target, ()):
        return writing_spec(target, name, judging or Judging())
    raise ValueError(f"unknown metric {name!r} for {target}; choose one of: {', '.join(metric_names(target))}")
