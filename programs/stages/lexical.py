"""The words of a text, as the offline twins read them: key terms, a question's concepts, crude stems,
pseudo-relevance feedback, and the offline relevance rule.

Pure functions of text, shared by the offline twins of every stage and by the views the LM stages cut
from long passages (a paper's sentences that bear most on a task).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from deepresearch.programs.runtime.text import split_label
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.retrievers.passages import split_sentences
from deepresearch.retrievers.stopwords import ENGLISH_STOP_WORDS
from deepresearch.signatures.types import Source

_WORD = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]|[a-z]")
CITED_SENTENCE = re.compile(r".+?(?:\[[^\]]+\])+\.(?=\s|$)", re.DOTALL)  # "claim [id]." units of a summary
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


# A sentence that states what a study set out to do, not what it found: "To determine whether ...", "We
# aimed to ...", "The objective of this study was ...". It shares the most words with a question (it restates
# one), so it is the sentence a lexical extractor, and a small model, quote first; as a finding it says nothing.
# A purpose clause before a main one ("To test this, we measured ...") is not an aim.
_AIM_VERBS = (
    "determine|assess|investigate|evaluate|examine|estimate|compare|test|identify|describe|explore|characteri[sz]e"
    "|quantify|analy[sz]e|clarify|establish|elucidate|review|study|understand|measure|define|develop|explain"
)
AIM = re.compile(
    rf"^(?:to (?:{_AIM_VERBS})\b(?!.*,\s+(?:we|our|the authors|investigators|researchers)\b)"
    r"|(?:we|this|the present|the current|our)\s+(?:\w+\s+){0,2}?"
    rf"(?:aimed|aims|sought|seeks|was designed|is designed|were designed|set out|hypothesi[sz]ed|will (?:{_AIM_VERBS}))\b"
    r"|(?:the|our)\s+(?:\w+\s+)?(?:aims?|objectives?|purposes?|goals?)\s+(?:(?:was|were|is|are)\s+to"
    r"|of\s+(?:this|the|our)\s+(?:\w+\s+)?(?:study|trial|review|analysis|work|investigation|research))\b)",
    re.IGNORECASE,
)

# A sentence that says how a study chose its papers or patients, in an abstract without labels ("Exclusion
# criteria were: ...", "We searched MEDLINE ..."). Kept narrow: "Patients were enrolled ..." often goes on with
# what was found, and none of the sentences SciFact's annotators marked as evidence opens this way.
PROCEDURE = re.compile(
    r"^(?:(?:inclusion|exclusion|eligibility) criteria\b|(?:we|the authors) searched\b"
    r"|data (?:were|was) (?:collected|extracted|abstracted|obtained)\b)",
    re.IGNORECASE,
)

# The parts of a structured abstract that say what a study set out to do or how it was done ("OBJECTIVE",
# "DESIGN, SETTING, AND PARTICIPANTS", "MAIN OUTCOME MEASURES", "FUNDING"). Their sentences describe the
# study ("Incident cases of type 2 diabetes, identified through ..."): true of the paper, but as a finding
# they say nothing. A label that also names what was found ("METHODS AND RESULTS", "DATA SYNTHESIS") opens a
# part worth quoting, and so does one of neither kind ("BACKGROUND", "UNLABELLED").
_STUDY_PARTS = frozenset(
    """acquisition aim aims analysis availability collection criteria design exposure exposures extraction
    funding goal goals hypothesis implementation intervention interventions materials measure measurement
    measurements measures method methodology methods objective objectives outcome outcomes participants patients
    population procedures purpose registration sample search selection setting settings sources subjects""".split()
)
_FINDING_PARTS = frozenset(
    "conclusion conclusions discussion findings interpretation observations result results significance summary "
    "synthesis".split()
)


def _describes_study(label: str) -> bool:
    words = set(re.findall(r"[a-z']+", label.lower()))
    return bool(words & _STUDY_PARTS) and not words & _FINDING_PARTS


def sentences(text: str) -> list[str]:
    """The sentences of `text` worth quoting as findings: a structured abstract's section label left out
    ("RESULTS We found ..." is quoted from "We"), none shorter than 25 characters, none that states only what
    a study set out to do (`AIM`) or how it chose its data (`PROCEDURE`), and none in a part of the abstract
    that describes the study's aim or methods (from a label such as "DESIGN" to the next label)."""
    kept, in_methods = [], False
    for sentence in split_sentences(text):
        label, rest = split_label(sentence)
        if label:
            in_methods = _describes_study(label)
        if not in_methods and len(rest) >= 25 and not AIM.match(rest) and not PROCEDURE.match(rest):
            kept.append(rest)
    return kept


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
    terms, else evidence that also mentions the terms it adds."""
    asked = set(key_terms(plain_brief(question), min_len=1))
    extra = [t for t in key_terms(query, min_len=1) if t not in asked]
    if not extra:
        return "Main evidence on the question"
    listed = extra[0] if len(extra) == 1 else f"{', '.join(extra[:-1])} and {extra[-1]}"
    return f"Evidence that also mentions {listed}"


def feedback_terms(sources: list[Source], exclude: set[str], n: int, background: Sequence[Source] = ()) -> list[str]:
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


def stem(word: str) -> str:
    """A crude prefix stem, so `fractures` meets `fracture` and `supplementation` meets `supplements`."""
    return word[:6]


def best_sentences(parts: Sequence[str], task_text: str, n: int) -> list[int]:
    """The positions of the `n` of `parts` sharing the most stemmed key terms with `task_text`, in their order
    (ties to the earlier); every position when `n` <= 0 or there are at most `n` parts."""
    if n <= 0 or len(parts) <= n:
        return list(range(len(parts)))
    wanted = {stem(t) for t in key_terms(task_text)}
    hits = [len(wanted & {stem(t) for t in key_terms(p)}) for p in parts]
    return sorted(sorted(range(len(parts)), key=lambda i: (-hits[i], i))[:n])


EVIDENCE_RULE = "score and coverage"


def score_share(score: float, best: float) -> float:
    """A hit's retrieval score as a share of the best score of its search (1.0 when the best is not positive)."""
    return score / best if best > 0 else 1.0


def evidence(wanted: set[str], title: str, text: str, score: float, best: float) -> tuple[float, float]:
    """The two figures of the offline relevance rule (`EVIDENCE_RULE`) for one hit: its retrieval score as a
    share of the best score of its search (1.0 when the best is not positive), and the share of the stemmed
    key terms `wanted` that its title and text contain."""
    present = {stem(t) for t in key_terms(f"{title} {text}", min_len=1)}
    coverage = len(wanted & present) / max(len(wanted), 1)
    return score_share(score, best), coverage


def evidence_reason(ratio: float, coverage: float, min_ratio: float, min_coverage: float) -> str:
    return (
        f"{EVIDENCE_RULE}: score {ratio:.2f} of the search's best (needs {min_ratio:.2f}), "
        f"covers {coverage:.0%} of the key terms (needs {min_coverage:.0%})"
    )
