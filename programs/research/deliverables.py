"""What a research run delivers besides its report: a short answer and a map of the literature.

Both are written after research from what the run found, through the run's context (its meter,
failures and events), and both cite with source ids so that one renumbering gives the report, the
answer and the map the same reference numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from deepresearch.programs.artifacts import Node
from deepresearch.programs.citing.citations import CITATION, CitationRegistry, citation_labels, renumber_citations
from deepresearch.programs.runtime.context import RunContext
from deepresearch.programs.runtime.text import collapse_whitespace, inert_markdown
from deepresearch.programs.stages.answerer import OfflineAnswerer
from deepresearch.programs.stages.registry import STAGES
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from deepresearch.retrievers.passages import paper_id
from deepresearch.retrievers.types import Doc
from deepresearch.signatures.types import Finding

logger = logging.getLogger(__name__)

MAP_HEADING = "## Map of the literature"
NO_EVIDENCE_ANSWER = "The search found no relevant evidence for this question in the corpus."
_SEPARATOR = "\n\n\x1e\n\n"  # between texts renumbered together; no citation pattern can span it


def relevant_docs(roots: Sequence[Node], registry: CitationRegistry, corpus: Any = None) -> list[Doc]:
    """The documents the run judged relevant, each once, in tree order (a pruned or cancelled node's
    judgements count: the papers were read and judged), read from `corpus` when it has them. Of a paper
    read as passages (`deepresearch.retrievers.passages`), only its first relevant passage."""
    by_id = {doc.doc_id: doc for _, doc in registry.items()}
    ids = dict.fromkeys(i for root in roots for n in root.walk() for i in n.relevant_ids)
    docs = [by_id[i] for i in ids if i in by_id]
    if corpus is not None and hasattr(corpus, "get"):  # a resumed node's documents were journaled without text
        docs = [corpus.get(d.doc_id) or d for d in docs]
    first: dict[str, Doc] = {}  # a paper read as passages counts once: its first relevant passage stands for it
    for d in docs:
        first.setdefault(paper_id(d), d)
    return list(first.values())


def render_map(by_id: dict[str, Any], cite: dict[str, tuple[str, str]]) -> str:
    """The taxonomy as a nested Markdown list under `MAP_HEADING`: categories in bold, and in each leaf
    its papers by title, each cited with its source id (`cite[doc_id]` is (source id, title); renumbered later)."""
    lines = [MAP_HEADING, ""]

    def visit(node: dict[str, Any], depth: int) -> None:
        indent = "  " * depth
        name = inert_markdown(str(node.get("name", "")), one_line=True) or "Other"
        lines.append(f"{indent}- **{name}**")
        for child in node.get("subtopics", ()):
            visit(child, depth + 1)
        for doc_id in node.get("papers", ()):
            lines.append(f"{indent}  - {cite[doc_id][1]} [{cite[doc_id][0]}]")

    for child in by_id.get("subtopics", ()):
        visit(child, 0)
    if "papers" in by_id:  # a root that is itself a leaf: its papers directly
        lines += [f"- {cite[d][1]} [{cite[d][0]}]" for d in by_id["papers"]]
    return "\n".join(lines)


async def literature_map(
    ctx: RunContext, builder: TaxonomyBuilder, roots: Sequence[Node], late: bool
) -> tuple[dict[str, Any], str]:
    """Organises the papers the run judged relevant; returns the taxonomy record and the map section.

    The builder's LM calls count in the run's meter. When the run is late (deadline or interrupt) or
    the builder fails, the papers are organised by clustering instead (no LM), and the record says so.
    """
    found = relevant_docs(roots, ctx.registry, getattr(ctx.retriever, "corpus", None))
    docs = [d for d in found if d.title.strip()]
    untitled = len(found) - len(docs)
    papers = [{"paper_id": d.doc_id, "title": d.title, "abstract": d.text} for d in docs]
    repairs: list[dict[str, str]] = []
    if untitled:
        repairs.append({"kind": "untitled", "detail": f"{untitled} relevant papers have no title and are left out"})
    if late and not builder.is_offline:
        builder = TaxonomyBuilder(offline=True)
        repairs.append({"kind": "late", "detail": "the run was out of time; papers organised by clustering"})
    try:
        out = await builder.acall(topic=ctx.title, papers=papers, meter=ctx.meter)
    except Exception as err:
        ctx.fail("root", STAGES.taxonomy.name, err)
        out = await TaxonomyBuilder(offline=True).acall(topic=ctx.title, papers=papers)
        repairs.append({"kind": "failed", "detail": "the taxonomy stage failed; papers organised by clustering"})
    repairs += [{"kind": r.kind, "detail": r.detail} for r in out.repairs]
    for r in out.repairs:
        if r.kind == "lm_failed":  # the builder fell back to clustering: a failure of the run's taxonomy stage
            ctx.events.emit("failure", stage=STAGES.taxonomy.name, message=r.detail)
    cite = {
        d.doc_id: (ctx.registry.register(d), inert_markdown(collapse_whitespace(d.title).rstrip(". "), one_line=True))
        for d in docs
    }
    record = {
        "topic": ctx.title,
        "hierarchy_tree": out.tree,
        "retrieved_papers": list(out.retrieved_papers),
        "papers": [{"doc_id": c.paper_id, "title": c.title, "source_id": cite[c.paper_id][0]} for c in out.papers],
        "repairs": repairs,
    }
    ctx.events.emit(
        "stage_end", stage=STAGES.taxonomy.name, counts={"papers": len(out.papers), "repairs": len(repairs)}
    )
    section = render_map(out.by_id, cite) if out.papers else ""
    return record, section


async def short_answer(ctx: RunContext, call, findings: list[Finding]) -> str:
    """The answer stage's reply (source ids, not yet renumbered); `call` runs the stage with the run's
    late-call rules. A failed call is recorded and replaced by the extractive answer, marked as such."""
    if not findings:
        return NO_EVIDENCE_ANSWER
    why = "the answer stage failed"
    try:
        answer = (await call(STAGES.answer.name, question=ctx.question, findings=findings)).answer.strip()
        if cites_a_source(answer, ctx.registry):
            return inert_markdown(answer)  # the model's sentences: no heading, link, image or HTML of theirs
        # an answer citing nothing (or only ids that name no document) is not shipped as if it were grounded
        why = "the answer stage's reply cited no source"
        ctx.events.emit("fallback", stage=STAGES.answer.name, message=f"{why}: {answer[:200]!r}")
    except Exception as err:
        ctx.fail("root", STAGES.answer.name, err)

    extractive = (await OfflineAnswerer().acall(question=ctx.title, findings=findings)).answer
    return f"{inert_markdown(extractive)}\n\n> Note: {why}; these sentences are quoted from the findings."


def cites_a_source(text: str, registry: CitationRegistry) -> bool:
    """Whether `text` cites at least one document the run retrieved."""
    return any(registry.get(label) for m in CITATION.finditer(text) for label in citation_labels(m))


def renumber_together(texts: Sequence[str], registry: CitationRegistry):
    """Renumbers several texts as one (the report first), so a source has one number in all of them.

    Returns the texts rewritten, the references in order of first use, and the dropped citations.
    """
    joined = _SEPARATOR.join(t.replace("\x1e", "") for t in texts)
    out = renumber_citations(joined, registry)
    return out.markdown.split(_SEPARATOR), out.references, out.dropped
