"""TaxoBench metrics: title alignment, retrieval, leaf-level partitions, US-TED, SEM-PATH, NSR/NSP.

Every metric here is a pure function of trees in TaxoBench's JSON form (internal nodes `name` +
`subtopics`, leaves `name` + `papers`, papers identified by title) or of label lists. Label
similarity is a callable `sim(xs, ys) -> matrix` so tests can pass exact or constant similarities;
the default embeds labels with all-MiniLM-L6-v2 and clips cosine at 0.
"""

from __future__ import annotations

import difflib
import functools
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, homogeneity_completeness_v_measure

from deepresearch.eval.f1 import harmonic_mean
from deepresearch.eval.taxobench import PROFILES
from deepresearch.eval.taxonomy_tree import (
    Tree,
    category_labels,
    children_of,
    coerce_tree,
    name_of,
    paper_assignment,
    paper_paths,
    tree_stats,
    tree_titles,
)
from deepresearch.programs.runtime.text import norm_text, norm_title
from deepresearch.retrievers.embed import encode

logger = logging.getLogger(__name__)

LabelSim = Callable[[Sequence[str], Sequence[str]], np.ndarray]
UNRETRIEVED = "\u22a5"  # the one label all unretrieved expert papers share in the end-to-end view


# ---------------------------------------------------------------- title alignment


def _public_norm(title: str) -> str:
    """`public_scorer` profile key: like `norm_title`, but punctuation becomes a space instead of vanishing."""
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", title.lower())).strip()


@dataclass(frozen=True)
class Alignment:
    """One-to-one pairs (expert index, model index) and the titles left unmatched on each side."""

    pairs: tuple[tuple[int, int], ...]
    unmatched_expert: tuple[str, ...]
    unmatched_model: tuple[str, ...]


def align_titles(expert: Sequence[str], model: Sequence[str], profile: str = "paper") -> Alignment:
    """Greedy one-to-one title matching, expert papers in the given order.

    `paper`: best SequenceMatcher ratio among unused model titles (first on ties); accepted when
    equal, or ratio >= 0.6 and one normalised title contains the other. `public_scorer`: similarity
    1 for equal or containing titles, else the ratio; accepted at >= 0.92.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown alignment profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    norm = norm_title if profile == "paper" else _public_norm
    model_norm = [norm(t) for t in model]
    used = [False] * len(model)
    pairs = []
    for i, title in enumerate(expert):
        a = norm(title)
        best, best_s = -1, -1.0
        for j, b in enumerate(model_norm):
            if used[j]:
                continue
            if profile == "paper":
                s = 1.0 if a == b else difflib.SequenceMatcher(None, a, b).ratio()
            else:
                s = 1.0 if (a == b or (a and b and (a in b or b in a))) else difflib.SequenceMatcher(None, a, b).ratio()
            if s > best_s:
                best, best_s = j, s
        if best < 0:
            continue
        b = model_norm[best]
        if profile == "paper":
            ok = a == b or (0.6 <= best_s < 1.0 and bool(a) and bool(b) and (a in b or b in a))
        else:
            ok = best_s >= 0.92
        if ok:
            used[best] = True
            pairs.append((i, best))
    matched_e = {i for i, _ in pairs}
    unmatched_e = tuple(t for i, t in enumerate(expert) if i not in matched_e)
    unmatched_m = tuple(t for j, t in enumerate(model) if not used[j])
    if unmatched_e:
        logger.debug("unmatched expert titles: %s", unmatched_e)
    return Alignment(tuple(pairs), unmatched_e, unmatched_m)


# ---------------------------------------------------------------- retrieval


def retrieval_scores(hits: int, n_expert: int, n_model: int) -> dict[str, float]:
    """Recall = hits/|P*|, precision = hits/|P̂|, F1 their harmonic mean (0 when undefined)."""
    recall = hits / n_expert if n_expert else 0.0
    precision = hits / n_model if n_model else 0.0
    return {"recall": recall, "precision": precision, "f1": harmonic_mean(precision, recall)}


# ---------------------------------------------------------------- leaf level


def leaf_scores(labels_true: Sequence[Any], labels_pred: Sequence[Any]) -> dict[str, float]:
    """ARI, HOM, COMP and V (natural log) of one evaluated universe; all 0 with fewer than 2 papers.

    scikit-learn's scores, which TaxoBench takes as the definition.
    """
    if len(labels_true) < 2:
        return {"ari": 0.0, "hom": 0.0, "comp": 0.0, "v": 0.0}
    labels_true, labels_pred = list(labels_true), list(labels_pred)
    hom, comp, v = homogeneity_completeness_v_measure(labels_true, labels_pred)
    return {
        "ari": float(adjusted_rand_score(labels_true, labels_pred)),
        "hom": float(hom),
        "comp": float(comp),
        "v": float(v),
    }


# ---------------------------------------------------------------- label similarity


def exact_sim(xs: Sequence[str], ys: Sequence[str]) -> np.ndarray:
    """1 when two labels are equal after lowercasing and collapsing whitespace, else 0."""
    key = [norm_text(x) for x in xs]
    other = [norm_text(y) for y in ys]
    return np.array([[float(a == b) for b in other] for a in key], dtype=np.float64).reshape(len(xs), len(ys))


class EmbeddingSim:
    """max(0, cos) of sentence embeddings (all-MiniLM-L6-v2 by default); each label is embedded once."""

    def __init__(self, model: str | None = None):
        self.model = model
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, labels: Sequence[str]) -> np.ndarray:
        missing = [x for x in dict.fromkeys(labels) if x not in self._cache]
        if missing:
            for label, vec in zip(missing, encode(missing, model=self.model)):
                self._cache[label] = vec.astype(np.float64)
        return np.stack([self._cache[x] for x in labels])

    def __call__(self, xs: Sequence[str], ys: Sequence[str]) -> np.ndarray:
        if not xs or not ys:
            return np.zeros((len(xs), len(ys)))
        return np.clip(self._vectors(xs) @ self._vectors(ys).T, 0.0, 1.0)


@functools.cache
def default_sim() -> EmbeddingSim:
    """The shared embedding similarity (its label cache lives for the process)."""
    return EmbeddingSim()


# ---------------------------------------------------------------- US-TED / US-NTED


@dataclass
class _Flat:
    labels: list[str]
    children: list[list[int]]
    sizes: list[int]


def _flatten(tree: Tree) -> _Flat:
    flat = _Flat([], [], [])

    def visit(node: Tree) -> int:
        idx = len(flat.labels)
        flat.labels.append(name_of(node))
        flat.children.append([])
        flat.sizes.append(1)
        for child in children_of(node):
            c = visit(child)
            flat.children[idx].append(c)
            flat.sizes[idx] += flat.sizes[c]
        return idx

    visit(tree)
    return flat


def us_ted(expert: Tree, model: Tree, sim: LabelSim | None = None) -> tuple[float, float]:
    """(US-TED, US-NTED) between the category trees (papers dropped) of two taxonomies.

    D(u, v) = rename(u, v) + the cheapest matching of their children (Hungarian algorithm), where an
    unmatched child subtree costs its size (insert or delete); rename = 1 - max(0, cos).
    US-NTED = US-TED / (|T*| + |T̂|).
    """
    a, b = _flatten(expert), _flatten(model)
    rename = 1.0 - np.clip((sim or default_sim())(a.labels, b.labels), 0.0, 1.0)

    @functools.cache
    def dist(u: int, v: int) -> float:
        cu, cv = a.children[u], b.children[v]
        cost = float(rename[u, v])
        if cu or cv:
            k = max(len(cu), len(cv))
            matrix = np.zeros((k, k))
            for i in range(k):
                for j in range(k):
                    if i < len(cu) and j < len(cv):
                        matrix[i, j] = dist(cu[i], cv[j])
                    elif i < len(cu):
                        matrix[i, j] = a.sizes[cu[i]]
                    elif j < len(cv):
                        matrix[i, j] = b.sizes[cv[j]]
            rows, cols = linear_sum_assignment(matrix)
            cost += float(matrix[rows, cols].sum())
        return cost

    ted = dist(0, 0)
    return ted, ted / (a.sizes[0] + b.sizes[0])


# ---------------------------------------------------------------- SEM-PATH


def path_cost(s: Sequence[str], t: Sequence[str], sim: LabelSim | None = None, gap: float = 1.0) -> float:
    """J: order-preserving alignment of the shorter chain into the longer, plus `gap` per skipped label."""
    short, long_ = (s, t) if len(s) <= len(t) else (t, s)
    p, q = len(short), len(long_)
    delta = 1.0 - np.clip((sim or default_sim())(list(short), list(long_)), 0.0, 1.0)
    dp = np.full((p + 1, q + 1), math.inf)
    dp[0, :] = 0.0
    for i in range(1, p + 1):
        for j in range(i, q + 1):
            dp[i, j] = min(dp[i - 1, j - 1] + delta[i - 1, j - 1], dp[i, j - 1])
    return float(dp[p, q]) + gap * (q - p)


def path_score(
    s_paths: Sequence[Sequence[str]], t_paths: Sequence[Sequence[str]], sim: LabelSim | None = None
) -> float:
    """1 / (1 + J) for the best pair of chains; 0 when either side has no (or only empty) chains."""
    costs = [path_cost(s, t, sim) for s in s_paths for t in t_paths if s and t]
    return 1.0 / (1.0 + min(costs)) if costs else 0.0


# ---------------------------------------------------------------- NSR / NSP


def _soft_cardinality(matrix: np.ndarray) -> float:
    sums = matrix.sum(axis=1)
    return float(sum(1.0 / s for s in sums if s > 0))


def soft_recall_precision(
    expert_labels: Sequence[str], model_labels: Sequence[str], sim: LabelSim | None = None
) -> dict[str, float]:
    """NSR, NSP and Soft-F1 from soft cardinalities of the two label multisets and their union."""
    sim = sim or default_sim()
    both = list(expert_labels) + list(model_labels)
    if not expert_labels or not model_labels:
        return {"nsr": 0.0, "nsp": 0.0, "soft_f1": 0.0}
    full = np.clip(sim(both, both), 0.0, 1.0)
    m = len(expert_labels)
    c_a, c_b, c_ab = _soft_cardinality(full[:m, :m]), _soft_cardinality(full[m:, m:]), _soft_cardinality(full)
    overlap = c_a + c_b - c_ab
    nsr = overlap / c_a if c_a else 0.0
    nsp = overlap / c_b if c_b else 0.0
    return {"nsr": nsr, "nsp": nsp, "soft_f1": harmonic_mean(nsr, nsp)}


# ---------------------------------------------------------------- one survey, then the average


@dataclass
class SurveyScore:
    """Every metric of one survey (fractions, not ×100). `leaf` scores aligned papers only (Bottom-Up
    view and Deep Research ∩ view); `leaf_e2e` scores all expert papers, unretrieved ones sharing one label."""

    survey_id: Any
    n_expert: int
    n_model: int
    aligned: int
    retrieval: dict[str, float]
    leaf: dict[str, float]
    leaf_e2e: dict[str, float]
    us_ted: float
    us_nted: float
    sem_path: float
    soft: dict[str, float]
    expert_stats: dict[str, int]
    model_stats: dict[str, int]
    unmatched_expert: list[str] = field(default_factory=list)
    unmatched_model: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        """Expert papers the model dropped or altered beyond matching."""
        return self.n_expert - self.aligned

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dropped": self.dropped}


def score_survey(
    expert: Tree,
    model: Any,
    retrieved: Sequence[str] | None = None,
    *,
    survey_id: Any = None,
    topic: str = "",
    profile: str = "paper",
    sim: LabelSim | None = None,
) -> SurveyScore:
    """Scores one predicted taxonomy against the expert tree.

    Args:
        expert: The expert tree.
        model: The predicted tree (a dict, a list of nodes, or "FIX FAILED").
        retrieved: Titles the system returned; by default the titles in the predicted tree.
        topic: Root name used when the prediction is not a tree.
        profile: Title alignment profile, `paper` (default) or `public_scorer`.
        sim: Label similarity; default all-MiniLM-L6-v2 cosine clipped at 0.
    """
    sim = sim or default_sim()
    model = coerce_tree(model, topic)
    expert_titles = tree_titles(expert)
    model_titles = list(dict.fromkeys(retrieved)) if retrieved is not None else tree_titles(model)
    alignment = align_titles(expert_titles, model_titles, profile)
    expert_of, model_of = paper_assignment(expert), paper_assignment(model)
    pairs = [(expert_titles[i], model_titles[j]) for i, j in alignment.pairs]

    truth = [expert_of[e] for e, _ in pairs]
    pred = [model_of.get(m, UNRETRIEVED) for _, m in pairs]  # a retrieved title may be absent from the tree
    matched = {e: m for e, m in pairs}
    truth_e2e = [expert_of[e] for e in expert_titles]
    pred_e2e = [model_of.get(matched[e], UNRETRIEVED) if e in matched else UNRETRIEVED for e in expert_titles]

    ted, nted = us_ted(expert, model, sim)
    expert_paths, model_paths = paper_paths(expert), paper_paths(model)
    per_paper = [path_score(expert_paths.get(e, []), model_paths.get(m, []), sim) for e, m in pairs]
    sem = sum(per_paper) / len(pairs) if pairs else 0.0

    return SurveyScore(
        survey_id=survey_id,
        n_expert=len(expert_titles),
        n_model=len(model_titles),
        aligned=len(pairs),
        retrieval=retrieval_scores(len(pairs), len(expert_titles), len(model_titles)),
        leaf=leaf_scores(truth, pred),
        leaf_e2e=leaf_scores(truth_e2e, pred_e2e),
        us_ted=ted,
        us_nted=nted,
        sem_path=sem,
        soft=soft_recall_precision(category_labels(expert), category_labels(model), sim),
        expert_stats=tree_stats(expert),
        model_stats=tree_stats(model),
        unmatched_expert=list(alignment.unmatched_expert),
        unmatched_model=list(alignment.unmatched_model),
    )


SUMMARY_COLUMNS = (
    "recall",
    "precision",
    "f1",
    "f1_mean",
    "ari",
    "hom",
    "comp",
    "v",
    "ari_e2e",
    "v_e2e",
    "us_ted",
    "us_nted",
    "sem_path",
    "nsr",
    "nsp",
    "soft_f1",
)


def summarize(scores: Sequence[SurveyScore]) -> dict[str, float]:
    """Macro averages over surveys, ×100 except US-TED (an edit count) and NSR/NSP/Soft-F1 (fractions).

    `f1` is the harmonic mean of the averaged precision and recall, as the paper's tables report;
    `f1_mean` is the mean of per-survey F1.
    """
    if not scores:
        return {k: 0.0 for k in SUMMARY_COLUMNS} | {"surveys": 0}

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    recall = mean([s.retrieval["recall"] for s in scores])
    precision = mean([s.retrieval["precision"] for s in scores])
    out = {
        "recall": 100 * recall,
        "precision": 100 * precision,
        "f1": 100 * harmonic_mean(precision, recall),
        "f1_mean": 100 * mean([s.retrieval["f1"] for s in scores]),
        **{k: 100 * mean([s.leaf[k] for s in scores]) for k in ("ari", "hom", "comp", "v")},
        "ari_e2e": 100 * mean([s.leaf_e2e["ari"] for s in scores]),
        "v_e2e": 100 * mean([s.leaf_e2e["v"] for s in scores]),
        "us_ted": mean([s.us_ted for s in scores]),
        "us_nted": 100 * mean([s.us_nted for s in scores]),
        "sem_path": 100 * mean([s.sem_path for s in scores]),
        **{k: mean([s.soft[k] for s in scores]) for k in ("nsr", "nsp", "soft_f1")},
    }
    return out | {"surveys": len(scores), "dropped": sum(s.dropped for s in scores)}
