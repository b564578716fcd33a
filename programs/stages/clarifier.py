"""Clarifying questions before research, and the research brief the answers make.

The `Clarifier` asks the LM what the question leaves open (at most three questions, none when it is
clear). The user answers outside the program (a terminal, a file, a notebook); `research_brief` folds
the answers into the question in DeepResearch-Eco's combined form, leaving blank answers out: the reference
batch runs passed empty answers, and published reports went on to mention them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import dspy
from dspy.utils.exceptions import AdapterParseError

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import collapse_whitespace, norm_text
from deepresearch.programs.stages.names import MAX_QUESTIONS
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.signatures.clarify import ClarifyQuestion

logger = logging.getLogger(__name__)

_HEAD, _PAIRS = "Initial Query: ", "\nFollow-up Questions and Answers:\n"  # the brief's labels (DeepResearch-Eco's)
_LIST_MARKER = re.compile(r"^(?:[-*•]|\(?\d{1,2}[.)])\s+")  # "- ", "2. ", "(3) " before a question


class ClarificationsError(ValueError):
    """Clarifications that cannot be used (a bad answers file, an item without a question)."""


def clean_questions(questions: Iterable[object], limit: int) -> list[str]:
    """The LM's questions on one line each, without list markers, empty ones and repeats (case-insensitive),
    at most `limit` of them."""
    seen, kept = set(), []
    for q in questions:
        text = _LIST_MARKER.sub("", collapse_whitespace(q if isinstance(q, str) else ""))
        key = norm_text(text)
        if key and key not in seen:
            seen.add(key)
            kept.append(text)
    return kept[:limit]


def is_blank(answer: str) -> bool:
    """Whether an answer says nothing: empty, or without a single letter or digit ("-", "?")."""
    return not any(ch.isalnum() for ch in answer)


def check_clarifications(items: Iterable[Mapping[str, str]]) -> tuple[dict[str, str], ...]:
    """`{"question": ..., "answer": ...}` items checked and put on one line each; an answer may be blank.

    Raises:
        ClarificationsError: for an item that is not a mapping, has no question, or an answer that is
            not a string; the message numbers the item from 1.
    """
    if isinstance(items, (str, bytes, Mapping)):
        raise ClarificationsError(
            f"clarifications must be a list of {{'question': ..., 'answer': ...}} items, got a {type(items).__name__}"
        )
    checked = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise ClarificationsError(
                f"clarification {i} is a {type(item).__name__}; each one is {{'question': ..., 'answer': ...}}"
            )
        question, answer = item.get("question"), item.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise ClarificationsError(f"clarification {i} has no question; give each one a non-empty 'question'")
        if answer is not None and not isinstance(answer, str):
            raise ClarificationsError(
                f"clarification {i} has an answer of type {type(answer).__name__}; answers are text (empty to skip one)"
            )
        checked.append({"question": collapse_whitespace(question), "answer": collapse_whitespace(answer)})
    return tuple(checked)


def research_brief(question: str, clarifications: Iterable[Mapping[str, str]]) -> str:
    """The question the research runs on: `question` with the answered clarifications.

    Blank answers are left out; with no answer left, the brief is `question` itself.

    Example:
        >>> print(research_brief("Does tea help?", [{"question": "Which tea?", "answer": "green"},
        ...                                         {"question": "In whom?", "answer": ""}]))
        Initial Query: Does tea help?
        Follow-up Questions and Answers:
        Q: Which tea?
        A: green
    """
    answered = [c for c in check_clarifications(clarifications) if not is_blank(c["answer"])]
    if not answered:
        return question
    pairs = "\n".join(f"Q: {c['question']}\nA: {c['answer']}" for c in answered)
    return f"{_HEAD}{question}{_PAIRS}{pairs}"


def split_brief(brief: str) -> tuple[str, tuple[dict[str, str], ...]]:
    """The question and the answered clarifications of a `research_brief` (`(brief, ())` for a plain question).

    Example:
        >>> split_brief(research_brief("Does tea help?", [{"question": "Which tea?", "answer": "green"}]))
        ('Does tea help?', ({'question': 'Which tea?', 'answer': 'green'},))
    """
    head, sep, pairs = brief.partition(_PAIRS)
    lines = pairs.split("\n")
    if not (
        sep
        and head.startswith(_HEAD)
        and len(lines) % 2 == 0
        and all(x.startswith("Q: ") for x in lines[::2])
        and all(x.startswith("A: ") for x in lines[1::2])
    ):
        return brief, ()
    return head[len(_HEAD) :], tuple({"question": q[3:], "answer": a[3:]} for q, a in zip(lines[::2], lines[1::2]))


def plain_brief(brief: str) -> str:
    """A brief's question followed by its answers, without labels or clarifying questions: the words to
    search for (the offline stages use it). A plain question is returned as it is."""
    question, answered = split_brief(brief)
    return " ".join([question, *(c["answer"] for c in answered)])


def read_clarifications(path: str | Path) -> tuple[dict[str, str], ...]:
    """Answers written down in a file, in one of two forms:

    - JSON: a list of `{"question": ..., "answer": ...}` (as trace.json records them), or a trace.json
      itself (its `clarifications`);
    - text: lines `Q: <question>`, each followed by an `A: <answer>` line (an answer may be empty or
      missing); blank lines and lines starting with `#` are ignored.

    Raises:
        ClarificationsError: the file is missing, unreadable or malformed; the message names the file
            (and the line or item) and the form expected.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err  # a UnicodeDecodeError has no strerror
        raise ClarificationsError(f"cannot read clarifying answers {path}: {reason}") from None
    if text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ClarificationsError(
                f"{path} is not valid JSON ({err.msg}, line {err.lineno}); expected a list of "
                f'{{"question": ..., "answer": ...}}'
            ) from None
        if isinstance(data, dict):
            if not isinstance(data.get("clarifications"), list):
                raise ClarificationsError(
                    f"{path} is a JSON object without a 'clarifications' list; expected a "
                    f'list of {{"question": ..., "answer": ...}} or a trace.json'
                )
            data = data["clarifications"]
        try:
            return check_clarifications(data)
        except ClarificationsError as err:
            raise ClarificationsError(f"{path}: {err}") from None
    return _read_pairs(path, text)


def _read_pairs(path: Path, text: str) -> tuple[dict[str, str], ...]:
    """The text form of `read_clarifications`: `Q:` lines, each followed by at most one `A:` line."""
    pairs: list[tuple[str, str | None]] = []  # (question, answer or None while unanswered)
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tag, value = line[:2].upper(), line[2:].strip()
        if tag == "Q:" and value:
            pairs.append((value, None))
        elif tag == "A:" and pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], value)
        else:
            expected = "the next 'Q:' line" if tag == "A:" and pairs else "a 'Q: <question>' line"
            raise ClarificationsError(
                f"{path}:{n}: expected {expected}, got {line[:60]!r}; write each question "
                f"on a 'Q:' line and its answer on the 'A:' line after it"
            )
    return check_clarifications({"question": q, "answer": a or ""} for q, a in pairs)


class Clarifier(Stage):
    """Research question -> at most `max_questions` clarifying questions (none when it is clear).

    A reply that does not parse gives no questions (`is_parsed` False): the run counts it as a parse
    failure of the `clarify` stage, and research goes on with the question as given.
    """

    def __init__(self):
        super().__init__()
        self.clarify_question = dspy.Predict(ClarifyQuestion)

    async def aforward(self, question: str, max_questions: int = MAX_QUESTIONS) -> dspy.Prediction:
        try:
            out = await call_predictor(SPEC, self.clarify_question, question=question, max_questions=max_questions)
        except AdapterParseError as err:  # counted and noted by call_predictor; no question is asked
            logger.warning("clarifying questions did not parse; asking none: %s", collapse_whitespace(str(err))[:200])
            return dspy.Prediction(questions=[], is_parsed=False)
        return dspy.Prediction(questions=clean_questions(out.questions or [], max_questions), is_parsed=True)


class OfflineClarifier(Clarifier):
    """Asks no clarifying question: without an LM nothing judges what a question leaves open. Answers the
    user gives (a file) are still folded into the research brief."""

    is_offline = True

    async def aforward(self, question: str, max_questions: int = MAX_QUESTIONS) -> dspy.Prediction:
        teach(self.clarify_question, {"question": question, "max_questions": max_questions}, questions=[])
        return dspy.Prediction(questions=[], is_parsed=True)


SPEC = StageSpec(
    "clarify",
    "asks the questions a run should settle before research",
    (ClarifyQuestion,),
    Clarifier,
    OfflineClarifier,
    research_attr="clarifier",
    unscored="clarifying questions are asked before a run, by the caller",
    max_output_tokens=512,
)
