"""TaxoBench trees: internal nodes `name` + `subtopics`, leaves `name` + `papers`.

Papers are identified by title (a string, or a dict with a `title`). Every helper tolerates what a model
may produce: missing names, non-list children, papers without titles.
"""

from __future__ import annotations

from typing import Any

Tree = dict[str, Any]


def coerce_tree(tree: Any, topic: str = "") -> Tree:
    """A tree dict from a prediction: a list of nodes is wrapped under a root named `topic`; a failed
    parse ("FIX FAILED", None, text) becomes a root-only tree named `topic`, TaxoBench's fallback when the
    JSON repair fails."""
    if isinstance(tree, dict):
        return tree
    if isinstance(tree, list):
        return {"name": topic, "subtopics": [n for n in tree if isinstance(n, dict)]}
    return {"name": topic, "subtopics": []}


def paper_title(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("title"), str):
        return entry["title"]
    return None


def children_of(node: Tree) -> list[Tree]:
    subs = node.get("subtopics")
    return [c for c in subs if isinstance(c, dict)] if isinstance(subs, list) else []


def papers_of(node: Tree) -> list[str]:
    papers = node.get("papers")
    if not isinstance(papers, list):
        return []
    return [t for t in (paper_title(p) for p in papers) if t is not None]


def name_of(node: Tree) -> str:
    name = node.get("name")
    return name if isinstance(name, str) else ""


def leaf_clusters(tree: Tree) -> list[tuple[str, list[str]]]:
    """(name, papers) of every node carrying papers, in preorder (a mixed node's papers come first)."""
    out: list[tuple[str, list[str]]] = []

    def visit(node: Tree) -> None:
        papers = papers_of(node)
        if papers:
            out.append((name_of(node), papers))
        for child in children_of(node):
            visit(child)

    visit(tree)
    return out


def tree_titles(tree: Tree) -> list[str]:
    """Distinct paper titles of a tree in order of first appearance."""
    return list(dict.fromkeys(t for _, papers in leaf_clusters(tree) for t in papers))


def paper_assignment(tree: Tree) -> dict[str, int]:
    """Title -> index of its cluster in `leaf_clusters` order; a title in several leaves keeps the last."""
    return {t: i for i, (_, papers) in enumerate(leaf_clusters(tree)) for t in papers}


def paper_paths(tree: Tree) -> dict[str, list[tuple[str, ...]]]:
    """Title -> every root-to-category label chain holding it (root included, paper excluded)."""
    paths: dict[str, list[tuple[str, ...]]] = {}

    def visit(node: Tree, prefix: tuple[str, ...]) -> None:
        chain = prefix + (name_of(node),)
        for title in papers_of(node):
            paths.setdefault(title, []).append(chain)
        for child in children_of(node):
            visit(child, chain)

    visit(tree, ())
    return paths


def category_labels(tree: Tree) -> list[str]:
    """Category labels in preorder, root included, papers excluded."""
    return [name_of(tree)] + [x for c in children_of(tree) for x in category_labels(c)]


def tree_stats(tree: Tree) -> dict[str, int]:
    """Category nodes, hierarchy levels (longest root-to-category chain) and paper categories."""

    def depth(node: Tree) -> int:
        return 1 + max((depth(c) for c in children_of(node)), default=0)

    return {
        "categories": len(category_labels(tree)),
        "depth": depth(tree),
        "leaves": len(leaf_clusters(tree)),
        "papers": len(tree_titles(tree)),
    }


def render_tree(tree: Tree) -> str:
    """The category labels as an indented text tree with `├──` / `└──` connectors; papers are left out.

    Example:
        >>> print(render_tree({"name": "R", "subtopics": [{"name": "A", "subtopics": [{"name": "A1"}]},
        ...                                                {"name": "B", "papers": ["p"]}]}))
        R
        ├── A
        │   └── A1
        └── B
    """
    lines = [name_of(tree)]

    def visit(node: Tree, indent: str) -> None:
        children = children_of(node)
        for i, child in enumerate(children):
            is_last = i == len(children) - 1
            lines.append(f"{indent}{'└── ' if is_last else '├── '}{name_of(child)}")
            visit(child, indent + ("    " if is_last else "│   "))

    visit(tree, "")
    return "\n".join(lines)
