"""The offline baseline: every stage as a deterministic, extractive, non-LLM module.

It is an honest no-LLM baseline, not a mock: planning expands the question's key terms by
pseudo-relevance feedback from a first retrieval; relevance comes from retrieval scores; extraction
picks the sentences that best match the task and cites their documents; merging removes near
duplicates; follow-up tasks come from terms the findings did not cover; the report is an extractive
synthesis grouped by task, every sentence cited. The stages share the interfaces of the LM stages,
so the recursive program, trace, citation registry and report assembly are the same code.
"""

from __future__ import annotations

import math
import re

import dspy

from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.clarifier import plain_brief, split_brief
from deepresearch.programs.stages.merger import NO_INFORMATION
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.passages import split_sentences
from deepresearch.retrievers.stopwords import ENGLISH_STOP_WORDS
from deepresearch.retrievers.types import Retriever, search_async
from deepresearch.signatures.types import Finding, Judgement, Learning, Source, Task

_WORD = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]|[a-z]")
_CITED_SENTENCE = re.compile(r".+?(?:\[[^\]]+\])+\.(?=\s|$)", re.DOTALL)  # "claim [id]." units of a summary
STOP_WORDS = ENGLISH_STOP_WORDS | {
    "study",
    "studies",
    "using",
    "used",
    "use",
    "based",
    "results",
    "result",
    "showed",
    "shown",
    "show",
    "effect",
    "effects",
    "associated",
    "data",
    "analysis",
    "patients",
    "significant",
    "significantly",
    "compared",
    "evidence",
    "does",
    "did",
    "role",
    "new",
    "known",
    "relate",
    "report",
    "reported",
    "reports",
    "general",
    "implications",
    "review",
    "however",
    "including",
    "present",
    "provide",
    "provides",
    "suggest",
    "suggests",
}


def key_terms(text: str, min_len: int = 3) -> list[str]:
    """Content words of `text` in order of first appearance: lowercase, no stop words, `min_len`+ characters."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        if len(w) >= min_len and w not in STOP_WORDS and not w.isdigit():
            seen.setdefault(w, None)
    return list(seen)


def sentences(text: str) -> list[str]:
    return [s for s in split_sentences(text) if len(s) >= 25]


# Words a question uses to relate its concepts, not concepts themselves: a sentence sharing only these with
# the question ("risk", "reduce") is not about it.
GENERIC_TERMS = frozenset(
    {
        "reduce",
        "reduces",
        "reduced",
        "reducing",
        "increase",
        "increases",
        "increased",
        "risk",
        "risks",
        "affect",
        "affects",
        "cause",
        "causes",
        "improve",
        "improves",
        "lead",
        "leads",
        "level",
        "levels",
        "high",
        "higher",
        "low",
        "lower",
        "offer",
        "offers",
        "work",
        "works",
        "help",
        "helps",
        "change",
        "changes",
        "factor",
        "factors",
        "treatment",
        "outcome",
        "outcomes",
        "people",
        "patient",
        "type",
        "types",
    }
)


def concepts(question: str) -> list[str]:
    """The key concepts of a question: its key terms less `GENERIC_TERMS` (all of them when every one is
    generic), a one- or two-letter word joined to the term before it ("vitamin d")."""
    words = _WORD.findall(question.lower())
    found: list[str] = []
    for i, w in enumerate(words):
        if len(w) <= 2 and i and found and found[-1] == words[i - 1] and not w.isdigit() and w not in STOP_WORDS:
            found[-1] = f"{found[-1]} {w}"
        elif len(w) >= 3 and w not in STOP_WORDS and not w.isdigit() and w not in found:
            found.append(w)
    specific = [c for c in found if c not in GENERIC_TERMS]
    return specific or found


def mentioned(concept_list: list[str], text: str) -> int:
    """How many of `concept_list` (from `concepts`) `text` mentions: a word by its prefix stem, a joined pair
    ("vitamin d") as those two words in a row."""
    lowered = text.lower()
    stems = {stem(t) for t in key_terms(lowered, min_len=3)}
    count = 0
    for c in concept_list:
        if " " in c:
            head, tail = c.split(" ", 1)
            count += bool(re.search(rf"\b{re.escape(head)}\w*\s+{re.escape(tail)}\b", lowered))
        else:
            count += stem(c) in stems
    return count


def about(concept_list: list[str], text: str) -> bool:
    """Whether `text` mentions at least two of the question's concepts (all of them when it has fewer)."""
    return mentioned(concept_list, text) >= min(2, len(concept_list))


def goal_for(question: str, query: str) -> str:
    """A task's goal, in words, from its query: the main evidence when the query holds only the question's
    terms, else evidence that also mentions the terms it adds. The offline writer heads each finding's
    section with it."""
    asked = set(key_terms(plain_brief(question), min_len=1))
    extra = [t for t in key_terms(query, min_len=1) if t not in asked]
    if not extra:
        return "Main evidence on the question"
    listed = extra[0] if len(extra) == 1 else f"{', '.join(extra[:-1])} and {extra[-1]}"
    return f"Evidence that also mentions {listed}"


def feedback_terms(sources: list[Source], exclude: set[str], n: int, background: list[Source] = ()) -> list[str]:
    """Pseudo-relevance feedback: terms of the top documents, weighted by reciprocal rank and by how
    much rarer they are in the `background` (lower-ranked) documents, so generic words sink.

    Terms found in a single top document are ignored; ties keep first appearance.
    """
    weight: dict[str, float] = {}
    spread: dict[str, int] = {}
    for rank, s in enumerate(sources, start=1):
        for t in key_terms(f"{s.title} {s.text}", min_len=4):
            if t not in exclude:
                weight[t] = weight.get(t, 0.0) + 1.0 / rank
                spread[t] = spread.get(t, 0) + 1
    if background:
        df: dict[str, int] = {}
        for s in background:
            for t in set(key_terms(f"{s.title} {s.text}", min_len=4)):
                df[t] = df.get(t, 0) + 1
        weight = {t: w * math.log((1 + len(background)) / (1 + df.get(t, 0))) for t, w in weight.items()}
    ranked = sorted((t for t in weight if spread[t] >= 2 and weight[t] > 0), key=lambda t: -weight[t])
    return ranked[:n]


class OfflinePlanner(Stage):
    """Task 1 searches the question's key terms; each further task adds two feedback terms."""

    def __init__(self, retriever: Retriever, feedback_docs: int = 10, background_docs: int = 40):
        super().__init__()
        self.retriever = retriever
        self.feedback_docs, self.background_docs = feedback_docs, background_docs

    async def aforward(self, question: str, known: list[str], max_tasks: int) -> dspy.Prediction:
        question = plain_brief(question)  # a clarified brief: its question and answers, not its labels
        terms = key_terms(question, min_len=1)[:12] or question.split()[:12]
        hits = await search_async(self.retriever, question, self.feedback_docs + self.background_docs)
        sources = [Source(source_id=h.doc.doc_id, title=h.doc.title, text=h.doc.text) for h in hits]
        exclude = set(terms) | set(key_terms(" ".join(known)))
        expansion = feedback_terms(
            sources[: self.feedback_docs], exclude, 2 * max(max_tasks - 1, 0), background=sources[self.feedback_docs :]
        )
        base = " ".join(terms)
        tasks = [Task(query=base, goal=goal_for(question, base))]
        for i in range(0, len(expansion), 2):
            query = f"{base} {' '.join(expansion[i : i + 2])}"
            tasks.append(Task(query=query, goal=goal_for(question, query)))
        return dspy.Prediction(tasks=tasks[:max_tasks])


def stem(word: str) -> str:
    """A crude prefix stem, so `fractures` meets `fracture` and `supplementation` meets `supplements`."""
    return word[:6]


EVIDENCE_RULE = "score and coverage"


def evidence(wanted: set[str], title: str, text: str, score: float, best: float) -> tuple[float, float]:
    """The two figures of the offline relevance rule (`EVIDENCE_RULE`) for one hit: its retrieval score as a
    share of the best score of its search (1.0 when the best is not positive), and the share of the stemmed
    key terms `wanted` that its title and text contain."""
    present = {stem(t) for t in key_terms(f"{title} {text}", min_len=1)}
    coverage = len(wanted & present) / max(len(wanted), 1)
    return (score / best if best > 0 else 1.0), coverage


def evidence_reason(ratio: float, coverage: float, min_ratio: float, min_coverage: float) -> str:
    return (
        f"{EVIDENCE_RULE}: score {ratio:.2f} of the search's best (needs {min_ratio:.2f}), "
        f"covers {coverage:.0%} of the key terms (needs {min_coverage:.0%})"
    )


class OfflineAssessor(Stage):
    """The offline relevance rule (`EVIDENCE_RULE`, shared with the gathering loop's offline assessor): a
    source is relevant when its retrieval score is at least `relevant_ratio` of the task's best score and it
    contains at least `min_coverage` of the task query's key terms; uncertain when it has the coverage and a
    score down to `uncertain_ratio`; irrelevant otherwise. Each judgement's reason names the rule and its figures.
    """

    # relevant_ratio and min_coverage are the gathering loop's thresholds, tuned on SciFact's train claims
    # (programs/gather/offline.py); uncertain_ratio is a band below them, kept only with keep_uncertain.
    def __init__(
        self,
        keep_uncertain: bool = True,
        relevant_ratio: float = 0.9,
        uncertain_ratio: float = 0.75,
        min_coverage: float = 0.2,
    ):
        super().__init__()
        if not 0 <= uncertain_ratio <= relevant_ratio <= 1 or not 0 <= min_coverage <= 1:
            raise ValueError(
                f"need 0 <= uncertain_ratio <= relevant_ratio <= 1 and min_coverage in [0, 1], got "
                f"{uncertain_ratio}, {relevant_ratio} and {min_coverage}"
            )
        self.keep_uncertain = keep_uncertain
        self.relevant_ratio, self.uncertain_ratio, self.min_coverage = relevant_ratio, uncertain_ratio, min_coverage

    async def aforward(
        self, task: Task, sources: list[Source], scores: list[float] | None = None, sentences: int = 0
    ) -> dspy.Prediction:
        """`sentences` is the LM assessor's view of a paper; the rule reads the whole text and ignores it."""
        if not sources:
            return dspy.Prediction(judgements=[], kept=[])
        scores = scores or [1.0] * len(sources)
        best = max(scores)
        wanted = {stem(t) for t in key_terms(task.query, min_len=1)}
        judgements = []
        for s, score in zip(sources, scores):
            ratio, coverage = evidence(wanted, s.title, s.text, score, best)
            covered = coverage >= self.min_coverage
            label = (
                "relevant"
                if covered and ratio >= self.relevant_ratio
                else "uncertain"
                if covered and ratio >= self.uncertain_ratio
                else "irrelevant"
            )
            judgements.append(
                Judgement(
                    source_id=s.source_id,
                    label=label,
                    reason=evidence_reason(ratio, coverage, self.relevant_ratio, self.min_coverage),
                )
            )
        keep = {"relevant", "uncertain"} if self.keep_uncertain else {"relevant"}
        return dspy.Prediction(judgements=judgements, kept=[s for s, j in zip(sources, judgements) if j.label in keep])


class OfflineExtractor(Stage):
    """The sentences sharing most key terms with the task, at most two per source, each citing its source;
    a sentence that mentions fewer than two of the question's key concepts (`concepts`, `about`) is not quoted.

    Follow-up questions name the passages' frequent terms that no kept sentence covers.
    """

    def __init__(self, max_learnings: int = 5, min_overlap: int = 2):
        super().__init__()
        self.max_learnings, self.min_overlap = max_learnings, min_overlap

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        wanted = set(key_terms(task.query, min_len=1))
        asked = concepts(plain_brief(question))
        scored = []
        for order, s in enumerate(sources):
            for pos, sent in enumerate(sentences(s.text)):
                overlap = len(wanted & set(key_terms(sent)))
                if overlap >= min(self.min_overlap, len(wanted)) and about(asked, sent):
                    scored.append((-overlap, order, pos, sent, s.source_id))
        scored.sort()
        learnings, per_source = [], {}
        for _, _, _, sent, sid in scored:
            if per_source.get(sid, 0) < 2 and len(learnings) < self.max_learnings:
                per_source[sid] = per_source.get(sid, 0) + 1
                learnings.append(Learning(text=sent, source_ids=[sid]))
        covered = wanted | set(key_terms(" ".join(x.text for x in learnings)))
        uncovered = feedback_terms(sources, covered, 3)
        follow_ups = [f"What do studies report about {t} in relation to {task.query}?" for t in uncovered]
        return dspy.Prediction(learnings=learnings, follow_ups=follow_ups, invented=0, moved=0)


class OfflineMerger(Stage):
    """Keeps each learning once (term-set Jaccard below `max_overlap` with all kept ones), citation after each."""

    def __init__(self, max_overlap: float = 0.6):
        super().__init__()
        self.max_overlap = max_overlap

    async def aforward(self, task: Task, learnings: list[Learning]) -> dspy.Prediction:
        kept: list[tuple[set[str], Learning]] = []
        for x in learnings:
            terms = set(key_terms(x.text))
            if all(len(terms & t) / max(len(terms | t), 1) < self.max_overlap for t, _ in kept):
                kept.append((terms, x))
        if not kept:
            return dspy.Prediction(summary=NO_INFORMATION)
        parts = [f"{x.text.rstrip('. ')} {''.join(f'[{i}]' for i in x.source_ids)}." for _, x in kept]
        return dspy.Prediction(summary=" ".join(parts))


class OfflineEnricher(Stage):
    """One follow-up task per open-question term not yet covered by the summary, focus or sibling queries."""

    async def aforward(
        self,
        question: str,
        focus: str,
        summary: str,
        open_questions: list[str],
        sibling_queries: list[str],
        max_tasks: int,
    ) -> dspy.Prediction:
        focus_terms = key_terms(focus, min_len=1)
        taken = set(focus_terms) | set(key_terms(summary)) | set(key_terms(" ".join(sibling_queries)))
        fresh = [t for t in key_terms(" ".join(open_questions)) if t not in taken]
        base = " ".join(focus_terms[:8])
        tasks = [Task(query=f"{base} {t}", goal=goal_for(question, f"{base} {t}")) for t in fresh[:max_tasks]]
        return dspy.Prediction(tasks=tasks)


class OfflineWriter(Stage):
    """An extractive synthesis: the merged, cited findings, each section headed by its task's goal (`goal_for`);
    sentences that mention none of the question's key concepts (the offline extractor already asks for two)
    or were shown already are left out, and sections with the same goal are one section."""

    async def aforward(self, question: str, findings: list[Finding]) -> dspy.Prediction:
        asked = concepts(plain_brief(question))
        sections: dict[str, list[str]] = {}
        shown: set[str] = set()
        for f in findings:
            fresh = [
                c.strip() for c in _CITED_SENTENCE.findall(f.summary) if c.strip() not in shown and mentioned(asked, c)
            ]
            shown.update(fresh)
            if fresh:
                sections.setdefault(goal_for(question, f.query), []).extend(fresh)
        parts = [
            f"## {split_brief(question)[0]}",
            (
                "*Extractive synthesis by the offline baseline (no language model): every sentence below "
                "is quoted from the abstract it cites.*"
            ),
        ]
        parts += [f"### {goal}\n\n" + " ".join(quoted) for goal, quoted in sections.items()]
        return dspy.Prediction(report="\n\n".join(parts))


class OfflineAnswerer(Stage):
    """A short extractive answer: the cited sentences of the findings that share most of the question's
    key terms (at most `max_sentences`, each quoted with its citation), best first: most of the question's key
    concepts, then most key terms. A sentence that mentions none of its key concepts is not quoted (it also
    quotes an LM's findings, when the answer stage failed)."""

    def __init__(self, max_sentences: int = 3):
        super().__init__()
        self.max_sentences = max_sentences

    async def aforward(self, question: str, findings: list[Finding]) -> dspy.Prediction:
        terms = set(key_terms(plain_brief(question)))  # a clarified brief: its question and answers
        asked = concepts(plain_brief(question))
        scored: dict[str, tuple[int, int]] = {}
        for f in findings:
            for sentence in _CITED_SENTENCE.findall(f.summary):
                sentence = sentence.strip()
                overlap, hits = len(terms & set(key_terms(sentence))), mentioned(asked, sentence)
                if overlap and hits and sentence not in scored:
                    scored[sentence] = (hits, overlap)
        best = sorted(scored, key=lambda x: (-scored[x][0], -scored[x][1]))[
            : self.max_sentences
        ]  # stable: ties keep tree order
        answer = " ".join(best) if best else NO_ANSWER
        return dspy.Prediction(answer=answer)


NO_ANSWER = "The findings do not answer this question."


def offline_stages(retriever: Retriever, config: ResearchConfig) -> dict[str, Stage]:
    """The six offline stages, keyed like DeepResearch's stage attributes."""
    return {
        STAGES.plan.research_attr: OfflinePlanner(retriever),
        STAGES.assess.research_attr: OfflineAssessor(keep_uncertain=config.keep_uncertain),
        STAGES.extract.research_attr: OfflineExtractor(max_learnings=config.max_learnings),
        STAGES.merge.research_attr: OfflineMerger(),
        STAGES.enrich.research_attr: OfflineEnricher(),
        STAGES.write.research_attr: OfflineWriter(),
    }


class OfflineEnrichmentWriter(Stage):
    """The enrichment learnings not already in the summary, each with its citation (hero strategy)."""

    async def aforward(self, focus: str, summary: str, learnings: list[Learning]) -> dspy.Prediction:
        fresh = [x for x in learnings if x.text.rstrip(". ") not in summary]
        merged = (
            (await OfflineMerger().acall(task=Task(query=focus, goal=focus), learnings=fresh)).summary if fresh else ""
        )
        return dspy.Prediction(paragraph="" if merged == NO_INFORMATION else merged)


class OfflineBreadthPolicy(Stage):
    """Splits a query by the feedback terms of the findings it does not mention yet (parallel strategy).

    Returns no subqueries when the findings offer no new term, so the branch stops.
    """

    async def aforward(
        self, query: str, accumulated_findings: list[str], user_constraints: str, max_breadth: int
    ) -> dspy.Prediction:
        base = key_terms(query, min_len=1)[:8]
        sources = [Source(source_id=str(i), title="", text=f) for i, f in enumerate(accumulated_findings)]
        terms = feedback_terms(sources, set(base), max_breadth) if sources else []
        if not sources:
            return dspy.Prediction(subqueries=[" ".join(base)] if base else [])
        return dspy.Prediction(subqueries=[f"{' '.join(base)} {t}" for t in terms])


class OfflineDepthPolicy(Stage):
    """Deepens while the node found learnings and the maximum depth is not reached (parallel strategy)."""

    async def aforward(
        self, query: str, local_findings: list[str], user_constraints: str, depth: int, max_depth: int
    ) -> dspy.Prediction:
        deepen = bool(local_findings) and depth < max_depth
        return dspy.Prediction(deepen=deepen, rationale="findings to follow up" if deepen else "nothing to follow up")


class OfflineProgressScorer(Stage):
    """Goal satisfaction as the share of the goal's key terms the findings cover; quality as the share of
    findings that mention any of them (parallel strategy)."""

    async def aforward(
        self, goal: str, user_constraints: str, context_summary: str, findings: list[str]
    ) -> dspy.Prediction:
        wanted = set(key_terms(goal))
        found = [set(key_terms(f)) for f in findings]
        covered = set().union(*found) & wanted if found else set()
        satisfaction = len(covered) / len(wanted) if wanted else 0.0
        quality = sum(bool(f & wanted) for f in found) / len(found) if found else 0.0
        return dspy.Prediction(
            goal_satisfaction=satisfaction,
            quality=quality,
            rationale=f"{len(covered)} of {len(wanted)} goal terms covered",
        )


class OfflineClarifier(Stage):
    """Asks no clarifying question: without an LM nothing judges what a question leaves open. Answers the
    user gives (a file) are still folded into the research brief."""

    async def aforward(self, question: str, max_questions: int = 3) -> dspy.Prediction:
        return dspy.Prediction(questions=[], is_parsed=True)
