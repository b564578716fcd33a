"""The `write` stage: the question and the tree's findings -> the cited Markdown report."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import dspy

from deepresearch.programs.citing.citations import CITATION, DRAFT_CITATION
from deepresearch.programs.citing.entailment import LIST_MARK, citations_in, plain_sentence, strip_citations
from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import collapse_whitespace, inert_markdown, strip_label
from deepresearch.programs.stages.clarifier import plain_brief, split_brief
from deepresearch.programs.stages.lexical import (
    CITED_SENTENCE,
    GENERIC_TERMS,
    STOP_WORDS,
    concepts,
    key_terms,
    mentioned,
    stem,
)
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.retrievers.passages import split_sentences
from deepresearch.signatures.types import Finding
from deepresearch.signatures.write import ReportSection, ReportSentence, TopicLearning, WriteReport

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
_BRACKETS = re.compile(r"\[[^\]]*\]")  # citation markers, whatever their ids
_LAST_GROUP = re.compile(CITATION.pattern + r"$", re.IGNORECASE)  # a sentence body that ends with a citation


def _lines(markdown: str):
    """Each line of `markdown` with what it is: ("prose", its list mark or ""), ("heading", None), or
    ("other", None) for a blank line, a table row, a quote, a code fence or the code inside one."""
    fenced = False
    for line in markdown.splitlines():
        stripped = line.strip()
        fence = stripped.startswith("```")
        fenced ^= fence
        if fenced or fence or not stripped or stripped.startswith(("|", ">")):
            yield line, "other", None
        elif stripped.startswith("#"):
            yield line, "heading", None
        else:
            mark = LIST_MARK.match(line)
            yield line, "prose", mark.group(0) if mark else ""


def _cite_also(sentence: str, labels: Iterable[str]) -> str:
    """`sentence` citing `labels` too, their markers after its own, before its closing punctuation."""
    end = re.search(r"[.!?]+$", sentence.rstrip())
    body, stop = (sentence.rstrip()[: end.start()], end.group(0)) if end else (sentence.rstrip(), "")
    labels = ", ".join(labels)
    if _LAST_GROUP.search(body):  # one group: "[a][b]" would read as a Markdown reference link, not citations
        return f"{body[:-1]}, {labels}]{stop}"
    return f"{body} [{labels}]{stop}"


def drop_repeated_sentences(markdown: str, min_chars: int = 16, per_section: bool = True) -> tuple[str, int]:
    """`markdown` with each prose sentence that repeats an earlier one of its section (of the whole report
    when not `per_section`) left out, and how many were. Seen with the 0.5B model: a paragraph that ends by
    saying its second sentence again, citation and all, or the same sentence once per source it read.
    Sentences are compared by their words (no citations, emphasis, case or punctuation); a repeat that cites
    a source the earlier one did not gives that citation to the earlier one, so no citation is lost. Short
    sentences (answers such as "Yes.") and headings, tables, quotes and code blocks are not touched."""
    kept: list[str | tuple] = []  # a line, or (a prose line, its sentences, its list mark, those it keeps)
    dropped = 0
    seen: dict[str, tuple[list[str], int, set[str]]] = {}  # words -> (the sentences holding it, where, its cites)
    for line, kind, prefix in _lines(markdown):
        if kind != "prose":
            seen = {} if kind == "heading" and per_section else seen
            kept.append(line)
            continue
        parts = split_sentences(line[len(prefix) :])
        fresh: list[str] = []
        for part in parts:
            key = " ".join(_WORD.findall(plain_sentence(part).casefold()))
            cites = citations_in(part)
            if len(key) >= min_chars and key in seen:
                holder, at, known = seen[key]
                new = [c for c in cites if c not in known]
                if new:
                    holder[at] = _cite_also(holder[at], new)
                    known.update(new)
                dropped += 1
                continue
            fresh.append(part)
            seen[key] = (fresh, len(fresh) - 1, set(cites))
        if fresh:  # a line wholly repeated goes
            kept.append((line, parts, prefix, fresh))
    # a prose line is written as it was unless it lost a sentence or a later repeat gave one more citations
    out = [
        item if isinstance(item, str) else item[0] if item[3] == item[1] else item[2] + " ".join(item[3])
        for item in kept
    ]
    return "\n".join(out), dropped


# How a small model quotes its material instead of stating it: "The passage states that X", "It also
# mentions that X". The frame names the prompt's material, not a study, so X alone says the same.
_FRAME = re.compile(
    r"^(?:(?:the|this|that|each|both|these|those)\s+(?:(?:given|provided|above|second|first|other)\s+)?"
    r"(?:passages?|texts?|abstracts?|documents?|sources?|excerpts?)|it|they)\s+(?:also\s+)?"
    r"(?:states?|mentions?|says?|notes?|explains?|indicates?|describes?|highlights?|discusses?)\s+(?:that\s+)?",
    re.IGNORECASE,
)


def drop_reporting_frames(markdown: str) -> tuple[str, int]:
    """`markdown` with the reporting frame of each prose sentence that has one left out ("The passage states
    that obesity is a risk factor [1]." -> "Obesity is a risk factor [1]."), and how many were. Headings,
    tables, quotes and code blocks are not touched."""
    out, changed = [], 0
    for line, kind, prefix in _lines(markdown):
        if kind != "prose":
            out.append(line)
            continue
        parts, before = [], changed
        for part in split_sentences(line[len(prefix) :]):
            frame = _FRAME.match(part)
            rest = part[frame.end() :] if frame else ""
            if frame and len(_WORD.findall(rest)) >= 3:
                part = rest[0].upper() + rest[1:]
                changed += 1
            parts.append(part)
        out.append(prefix + " ".join(parts) if changed > before else line)
    return "\n".join(out), changed


def drop_labels_and_titles(markdown: str, titles: Iterable[str] = ()) -> tuple[str, int]:
    """`markdown` without what no reader wants as a sentence, and how many were left out: the section label of
    a structured abstract at a sentence's start ("AIMS", "RESULTS:"; the rest of the sentence stays), a
    sentence that is only a label, and a sentence that only restates one of `titles` (the papers it may cite).
    Headings, tables, quotes and code blocks are not touched."""
    known = {k for t in titles if (k := _words(t))}
    kept, dropped = [], 0
    for line, kind, prefix in _lines(markdown):
        if kind != "prose":
            kept.append(line)
            continue
        parts, fresh = split_sentences(line[len(prefix) :]), []
        for part in parts:
            bare = plain_sentence(part).strip("*_ ")
            cleaned = strip_label(bare)
            if not cleaned or _words(cleaned) in known or not _words(cleaned):
                dropped += 1
                continue
            fresh.append(part if cleaned == bare else part.replace(bare[: len(bare) - len(cleaned)], "", 1).lstrip())
        if fresh:
            kept.append(prefix + " ".join(fresh))
    return "\n".join(kept), dropped


def _words(text: str) -> str:
    """The words of `text`, lowercase, for comparing a sentence with a title (citations and punctuation aside)."""
    return " ".join(_WORD.findall(_BRACKETS.sub(" ", plain_sentence(text)).casefold()))


def numbered_learnings(findings: list[Finding]) -> tuple[list[TopicLearning], list[list[str]]]:
    """The findings' cited sentences as the writer reads them, numbered 1, 2, ... in their order, each under
    its finding's query and without its citations; and the source ids of each, in the same order. A sentence
    two findings state is one learning citing the sources of both."""
    sources: dict[str, list[str]] = {}
    topics: dict[str, str] = {}
    for f in findings:
        for unit in CITED_SENTENCE.findall(f.summary):
            text = strip_citations(collapse_whitespace(unit))
            if _WORD.search(text):
                topics.setdefault(text, f.query)
                sources.setdefault(text, []).extend(citations_in(unit))
    learnings = [TopicLearning(number=n, topic=topics[t], text=t) for n, t in enumerate(sources, start=1)]
    return learnings, [list(dict.fromkeys(ids)) for ids in sources.values()]


def _inert(text: str) -> str:
    """Model or corpus text as one line of Markdown that shows as written and cites nothing of its own: a
    bracket group that reads as a citation goes, any other bracket is escaped (the code alone cites)."""
    text = DRAFT_CITATION.sub("", text).replace("[", r"\[").replace("]", r"\]")
    return inert_markdown(text, one_line=True)


def _sentence(sentence: ReportSentence, sources: list[list[str]]) -> str:
    """One written sentence citing, before its closing punctuation, the sources of the learnings it names
    (a number not shown names none; a sentence naming none is not cited)."""
    text = _inert(sentence.text)
    if not _WORD.search(text):
        return ""
    named = [n for n in sentence.learnings if 1 <= n <= len(sources)]
    ids = list(dict.fromkeys(i for n in named for i in sources[n - 1]))
    end = re.search(r"[.!?]+$", text)
    # a text the grammar's length bound cut ends mid-clause ("... fatty acids,"): the mark follows its last word
    body, stop = (text[: end.start()], end.group(0)) if end else (text, ".")
    body = body.rstrip(" ,;:")
    return f"{body} [{', '.join(ids)}]{stop}" if ids else f"{body}{stop}"


def _stems(text: str) -> set[str]:
    return {stem(w) for w in key_terms(text)}


def attribute(sentence: ReportSentence, learnings: list[TopicLearning]) -> ReportSentence:
    """`sentence` naming the learnings whose words it states, and shown whole where it copies part of one.

    The 0.5B model copies a learning and names it with its neighbour, or cuts a copy short (a heading took
    the start, or the length bound the end). So a sentence cites the learning holding most of its content
    words (a named one on a tie), if it holds at least half of them, and a second learning it named only if
    that one holds at least a quarter of the words the first did not; one no learning holds is not cited. A
    sentence whose words run inside one learning, in its order, is that learning's text."""
    words = _stems(_inert(sentence.text))
    by_number = {x.number: x for x in learnings}
    named = [by_number[n] for n in dict.fromkeys(sentence.learnings) if n in by_number]
    chosen = named  # too few words to weigh: as named
    if len(words) >= 3:
        holds = {x.number: words & _stems(x.text) for x in learnings}
        chosen = []
        first = max(learnings, key=lambda x: (len(holds[x.number]), x in named))  # a named one on a tie
        if 2 * len(holds[first.number]) >= len(words):
            left = words - holds[first.number]
            second = max((x for x in named if x is not first), key=lambda x: len(left & holds[x.number]), default=None)
            add = second is not None and 4 * len(left & holds[second.number]) >= max(len(left), 4)
            chosen = [first, second] if add and second is not None else [first]
            chosen.sort(key=lambda x: named.index(x) if x in named else -1)  # in the order the model named them
    text = sentence.text
    if len(chosen) == 1:
        said = " ".join(_WORD.findall(_inert(text).casefold()))
        if f" {said} " in f" {' '.join(_WORD.findall(chosen[0].text.casefold()))} ":
            text = chosen[0].text
    return ReportSentence(text=text, learnings=[x.number for x in chosen])


def _copied_heading(heading: str, learnings: list[TopicLearning]) -> bool:
    """Whether `heading` is the start of a learning's text (five words or more), not a theme's name."""
    said = " ".join(_WORD.findall(heading.casefold()))
    return len(said.split()) >= 5 and any(
        f"{' '.join(_WORD.findall(x.text.casefold()))} ".startswith(f"{said} ") for x in learnings
    )


FURTHER_HEADING = "Further evidence"


def attributed(
    question: str, sections: list[ReportSection], learnings: list[TopicLearning], sources: list[list[str]]
) -> list[ReportSection]:
    """`sections` with each sentence `attribute`d and a heading that copies a learning's start left blank; a
    learning citing a source no sentence cites, of those the offline writer keeps (they mention the question's
    key concepts), follows as written under `FURTHER_HEADING`: a model's draft drops no source the extractive
    one reports."""
    out = [
        ReportSection(
            heading="" if _copied_heading(s.heading, learnings) else s.heading,
            sentences=[attribute(x, learnings) for x in s.sentences],
        )
        for s in sections
    ]
    stated = [n for s in out for x in s.sentences for n in x.learnings]  # `attribute` names shown ones only
    cited = {i for n in stated for i in sources[n - 1]}
    asked = concepts(plain_brief(question))
    missed = []
    for x in learnings:
        if not cited.issuperset(sources[x.number - 1]) and mentioned(asked, x.text):
            missed.append(x)
            cited.update(sources[x.number - 1])
    if missed and stated:  # a draft that states no learning stays uncited: the run asks again
        out.append(
            ReportSection(
                heading=FURTHER_HEADING, sentences=[ReportSentence(text=x.text, learnings=[x.number]) for x in missed]
            )
        )
    return out


def _said(text: str) -> str:
    """A sentence as the report will show it, reduced to its words: no case, punctuation, brackets, section
    label or reporting frame."""
    return " ".join(_WORD.findall(_FRAME.sub("", strip_label(_inert(text)), count=1).casefold()))


def say_once(sections: list[ReportSection], min_chars: int = 16) -> tuple[list[ReportSection], int]:
    """`sections` with each sentence an earlier one of the report already said left out, and how many were.

    Sentences are compared one by one, also inside a drafted sentence that holds several (a learning copied
    whole), by `_said`. A drafted sentence left with nothing to say goes; when it was one sentence, the
    learnings it named are given to the one that said it first, so no citation is lost (of several, each was
    said by a sentence citing its own). Sections under the same heading become one, and a section left with
    no sentence goes. The 0.5B model wrote one finding under several headings, and the
    same heading over several sections."""
    kept: dict[str, tuple[str, list[ReportSentence]]] = {}  # heading's words -> (the heading, its sentences)
    first: dict[str, tuple[list[ReportSentence], int]] = {}  # a sentence's words -> (the list holding it, where)
    dropped = 0
    for n, section in enumerate(sections):
        heading = " ".join(_WORD.findall(_inert(section.heading).casefold())) or f"untitled {n}"
        said = kept.setdefault(heading, (section.heading, []))[1]
        for sentence in section.sentences:
            parts = [(part, _said(part)) for part in split_sentences(sentence.text) or [sentence.text]]
            again = [key for _, key in parts if len(key) >= min_chars and key in first]
            dropped += len(again)
            new = [(part, key) for part, key in parts if key not in again]
            if not new:
                if len(parts) == 1:  # the same sentence: what it named supports the one said first too
                    holder, at = first[again[0]]
                    named = list(dict.fromkeys([*holder[at].learnings, *sentence.learnings]))
                    holder[at] = holder[at].model_copy(update={"learnings": named})
                continue
            if again:
                sentence = sentence.model_copy(update={"text": " ".join(part for part, _ in new)})
            for _, key in new:
                first.setdefault(key, (said, len(said)))
            said.append(sentence)
    return [ReportSection(heading=h, sentences=said) for h, said in kept.values() if said], dropped


def render_report(question: str, sections: list[ReportSection], sources: list[list[str]], note: str = "") -> str:
    """The report in Markdown: the question as its title, `note` under it, then each section under its heading
    as one paragraph of cited sentences (`_sentence`); a section left with no sentence is left out."""
    parts = [f"## {split_brief(question)[0]}", *([note] if note else [])]
    for section in sections:
        sentences = [s for x in section.sentences if (s := _sentence(x, sources))]
        if sentences:
            heading = _inert(section.heading)
            parts.append((f"### {heading}\n\n" if _WORD.search(heading) else "") + " ".join(sentences))
    return "\n\n".join(parts)


class Writer(Stage):
    """Question + findings -> Markdown report citing source ids (renumbered later by the program).

    The LM reads the findings' cited sentences as learnings numbered 1, 2, ... (`numbered_learnings`) and
    writes sections of sentences, each naming the learnings it states; the code cites each sentence with the
    sources of those whose words it holds (`attributed`), so the LM never types a source id. A sentence the
    report already said, under any heading, and one a sentence's own text repeats are kept once (`say_once`,
    `drop_repeated_sentences`; the count of both is `repeated`). No LM call without learnings."""

    def __init__(self):
        super().__init__()
        self.write_report = dspy.Predict(WriteReport)

    async def aforward(self, question: str, findings: list[Finding], attempt: int = 0) -> dspy.Prediction:
        learnings, sources = numbered_learnings(findings)
        if not learnings:
            return dspy.Prediction(report=render_report(question, [], sources), repeated=0)
        # a second attempt (the first draft cited nothing) samples anew: cached and greedy, it would repeat the first
        config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
        out = await call_predictor(SPEC, self.write_report, question=question, learnings=learnings, config=config)
        sections, said_again = say_once(attributed(question, out.sections or [], learnings, sources))
        report, _ = drop_reporting_frames(render_report(question, sections, sources))
        report, sentences = drop_repeated_sentences(report)
        report, _ = drop_labels_and_titles(report)  # the titles are the run's to check (finish)
        repeated = said_again + sentences
        if repeated:
            logger.warning("writer: %d lines or sentences the draft repeated left out", repeated)
        return dspy.Prediction(report=report, repeated=repeated)


OFFLINE_HEADER = (
    "*Extractive synthesis by the offline baseline (no language model): every sentence below is quoted from the "
    "abstract it cites.*"
)
# the same writer in a run whose findings a model stated (its drafts were unusable): what it lists is theirs
TWIN_HEADER = (
    "*The model's drafts cited no source, so this report lists the findings the research stages stated, "
    "extractively and without a language model, each with the source it cites.*"
)


MAIN_HEADING = "Main evidence on the question"
_CLAUSE = re.compile(r"[^,;:.()\[\]]+")  # a two-word phrase never spans punctuation
_PHRASE_WORD = re.compile(r"[A-Za-z][A-Za-z-]*[A-Za-z]")


def _phrases(text: str, asked: set[str]) -> dict[str, str]:
    """The two-word phrases of `text` that name something the question does not ("breast cancer" in a finding
    on obesity and diabetes): adjacent content words, neither a stop word, a generic term or a question
    concept. Lowercase phrase -> its first spelling."""
    found: dict[str, str] = {}
    for clause in _CLAUSE.findall(text):
        words = clause.split()
        for a, b in zip(words, words[1:]):
            if not (_PHRASE_WORD.fullmatch(a) and _PHRASE_WORD.fullmatch(b)):
                continue
            pair = (a.lower(), b.lower())
            if any(w in STOP_WORDS or w in GENERIC_TERMS or stem(w) in asked or len(w) < 3 for w in pair):
                continue
            found.setdefault(" ".join(pair), f"{a} {b}")
    return found


def themed_sections(
    question: str, learnings: list[TopicLearning], max_themes: int = 4, lead: int = 2
) -> list[ReportSection]:
    """The learnings that mention the question's key concepts, as sections: the first `lead` of them (the best
    ranked evidence of the first searches) and those no theme takes come first, under `MAIN_HEADING`; a theme
    is a two-word phrase beyond the question that at least two of the others share (the most shared first),
    and it heads them. Each learning is said once, in its number's order."""
    asked = concepts(plain_brief(question))
    stems = {stem(w) for c in asked for w in c.split()}
    kept = [x for x in learnings if mentioned(asked, x.text)]
    phrases = {x.number: _phrases(x.text, stems) for x in kept}
    themes: list[tuple[str, list[TopicLearning]]] = []
    left = kept[lead:]
    while len(themes) < max_themes:
        shared: dict[str, list[TopicLearning]] = {}
        for x in left:
            for p in phrases[x.number]:
                shared.setdefault(p, []).append(x)
        best = max(shared, key=lambda p: (len(shared[p]), -shared[p][0].number), default=None)
        if best is None or len(shared[best]) < 2:
            break
        spelled = phrases[shared[best][0].number][best]
        themes.append((spelled[0].upper() + spelled[1:], shared[best]))
        left = [x for x in left if x not in shared[best]]
    main = kept[:lead] + left
    groups = ([(MAIN_HEADING, main)] if main else []) + themes
    return [
        ReportSection(heading=h, sentences=[ReportSentence(text=x.text, learnings=[x.number]) for x in xs])
        for h, xs in groups
    ]


class OfflineWriter(Writer):
    """An extractive synthesis: each learning once, as written, citing its sources; learnings that mention none
    of the question's key concepts (the offline extractor already asks for two) left out, and the rest grouped
    by the themes they share (`themed_sections`)."""

    is_offline = True

    async def aforward(self, question: str, findings: list[Finding], attempt: int = 0) -> dspy.Prediction:
        learnings, sources = numbered_learnings(findings)
        sections = themed_sections(question, learnings)
        if learnings:  # what the LM module would have been asked, and this answer
            teach(self.write_report, {"question": question, "learnings": learnings}, sections=sections)
        return dspy.Prediction(report=render_report(question, sections, sources, OFFLINE_HEADER), repeated=0)


SPEC = StageSpec(
    "write",
    "writes the cited report from the findings",
    (WriteReport,),
    Writer,
    OfflineWriter,
    research_attr="writer",
    tuning=Tuning("write", "recorded", "the report written from the findings"),
    max_output_tokens=4096,
    reserve=0,
)
