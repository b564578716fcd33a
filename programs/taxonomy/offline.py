"""A taxonomy without an LM: hierarchical clustering of paper embeddings.

Shape rule (stated, from TaxoBench's expert trees: 3.8 papers per category, branching 2.5):
    leaves = clamp(round(n / papers_per_leaf), 1, n); each coarser level has round(k / branching)
    clusters (at least 1), until a level with one cluster, which is the root. The levels are cuts of
    one Ward dendrogram over L2-normalised embeddings of "title. abstract", so they nest. A cluster
    that does not split at the next level is not repeated, so no node has a single child.
Labels are each cluster's most distinctive terms against the other clusters of its level (class-based
TF-IDF on title and abstract words and bigrams, stop words removed), title words counted twice.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from deepresearch.retrievers.embed import encode
from deepresearch.retrievers.stopwords import ENGLISH_STOP_WORDS

logger = logging.getLogger(__name__)

PAPERS_PER_LEAF = 3.8
BRANCHING = 2.5
_WORD = re.compile(r"[a-z][a-z0-9\-]+")


def level_sizes(n: int, papers_per_leaf: float = PAPERS_PER_LEAF, branching: float = BRANCHING) -> list[int]:
    """Cluster counts from the leaves up to the root's children (root excluded); [] for n < 2."""
    if papers_per_leaf <= 0 or branching <= 1:
        raise ValueError(f"need papers_per_leaf > 0 and branching > 1, got {papers_per_leaf} and {branching}")
    if n < 2:
        return []
    sizes = [min(max(round(n / papers_per_leaf), 1), n)]
    while sizes[-1] > 1:
        nxt = max(1, round(sizes[-1] / branching))
        if nxt == sizes[-1]:
            nxt -= 1
        sizes.append(nxt)
    return [s for s in sizes if s > 1]


def _terms(text: str, stop: frozenset[str]) -> list[str]:
    words = [w.strip("-") for w in _WORD.findall(text.lower())]
    words = [w for w in words if len(w) > 2 and w not in stop]
    return words + [f"{a} {b}" for a, b in zip(words, words[1:])]


def distinctive_terms(groups: Sequence[Counter], top: int = 3) -> list[list[str]]:
    """Per group, the `top` terms by class-based TF-IDF: tf in the group x log(1 + mean group size / total tf)."""
    total: Counter[str] = Counter()
    for g in groups:
        total.update(g)
    mean_size = sum(sum(g.values()) for g in groups) / max(len(groups), 1)
    out = []
    for g in groups:
        size = sum(g.values()) or 1
        ranked = sorted(g, key=lambda t: (-(g[t] / size) * math.log(1 + mean_size / total[t]), t))
        picked: list[str] = []
        for term in ranked:
            if not any(term in p or p in term for p in picked):
                picked.append(term)
            if len(picked) == top:
                break
        out.append(picked)
    return out


def _label(terms: list[str]) -> str:
    return ", ".join(terms).capitalize() if terms else "Other"


def cluster_taxonomy(
    topic: str,
    papers: Sequence[Any],
    *,
    papers_per_leaf: float = PAPERS_PER_LEAF,
    branching: float = BRANCHING,
    model: str | None = None,
) -> dict:
    """A TaxoBench tree over `papers` (objects with `title` and `abstract`, or dicts with those keys).

    Every paper appears exactly once, by its exact title, in a leaf; the root is named `topic`.
    """
    from scipy.cluster.hierarchy import fcluster, linkage

    titles = [_get(p, "title") for p in papers]
    abstracts = [_get(p, "abstract") or _get(p, "abs") for p in papers]
    sizes = level_sizes(len(papers), papers_per_leaf, branching)
    if not sizes:
        return (
            {"name": topic, "subtopics": [{"name": titles[0], "papers": titles}]}
            if titles
            else {"name": topic, "subtopics": []}
        )
    vectors = encode([f"{t}. {a}" for t, a in zip(titles, abstracts)], model=model)
    tree = linkage(vectors.astype(np.float64), method="ward")
    cuts = [fcluster(tree, t=k, criterion="maxclust") for k in reversed(sizes)]  # coarse to fine
    stop = frozenset(ENGLISH_STOP_WORDS) | frozenset(w for w in _terms(topic, frozenset()) if " " not in w)
    bags = [Counter(_terms(f"{t} {t} {a}", stop)) for t, a in zip(titles, abstracts)]

    def build(members: list[int], level: int, label: str) -> dict:
        while level < len(cuts) and len({cuts[level][i] for i in members}) == 1:
            level += 1  # no split here: skip the level rather than add a single-child node
        if level == len(cuts):
            return {"name": label, "papers": [titles[i] for i in members]}
        groups: dict[int, list[int]] = {}
        for i in members:
            groups.setdefault(int(cuts[level][i]), []).append(i)
        parts = list(groups.values())
        names = distinctive_terms([sum((bags[i] for i in g), Counter()) for g in parts])
        return {"name": label, "subtopics": [build(g, level + 1, _label(n)) for g, n in zip(parts, names)]}

    root = build(list(range(len(papers))), 0, topic)
    if "papers" in root:  # every paper landed in one cluster at every level
        root = {
            "name": topic,
            "subtopics": [{"name": _label(distinctive_terms([sum(bags, Counter())])[0]), "papers": root["papers"]}],
        }
    return root


def _get(paper: Any, key: str) -> str:
    value = paper.get(key) if isinstance(paper, dict) else getattr(paper, key, None)
    return value if isinstance(value, str) else ""
