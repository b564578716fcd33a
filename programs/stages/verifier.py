"""The verify stage: every claim of a draft report checked against the passages it cites, before it ships.

The draft's prose is split into sentences (deepresearch.programs.citing.entailment). A sentence that cites sources
is judged against the texts of its first three cited passages; a sentence with a factual claim (at
least `MIN_CLAIM_CHARS` characters) and no citation is judged against the candidate passages that
share most of its words, and cites them when they support it. A judge returns `supported`,
`partially` or `unsupported`. The policy then keeps, rewrites, removes or marks each sentence not fully
supported:

* `rewrite`: the sentence of its passages that covers most of it (`correction`), with the original
  citations (removed when no passage sentence covers enough of it);
* `remove`: the sentence is dropped;
* `mark`: the sentence stays, followed by `MARK`.

`Verifier` asks an LM (`VerifyClaims`, `batch_size` sentences per call); `LexicalVerifier` is the
offline judge: the named lexical-entailment rule (`lexical_support`: 75 % of the sentence's content
words in the passages is support, 40 % is partial). Both return every verdict (`SentenceCheck`) for the
trace.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import dspy

from deepresearch.programs.citing.citations import CITATION
from deepresearch.programs.citing.entailment import (
    LIST_MARK,
    NOTE,
    PARTIAL_SUPPORT,
    citations_in,
    lexical_coverage,
    lexical_support,
    plain_sentence,
    split_block,
)
from deepresearch.programs.citing.injection import carries_injection, clean_passage
from deepresearch.programs.config import VERIFY_POLICIES
from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.scheduler import BudgetExceeded
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.stages.lexical import best_sentences
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.retrievers.passages import split_sentences
from deepresearch.signatures.types import Source
from deepresearch.signatures.verify import ClaimToCheck, Support, VerifyClaims

logger = logging.getLogger(__name__)

MARK = " *(unverified)*"
MIN_CLAIM_CHARS = 50  # ScholarQABench's claim rule: shorter sentences (answers, transitions) carry no claim
MAX_CITATIONS = 3  # the passages of a sentence's first three citations are checked, as in ScholarQABench
_GRADE: dict[float, Support] = {1.0: "supported", 0.5: "partially", 0.0: "unsupported"}


@dataclass(frozen=True)
class SentenceCheck:
    """One verdict of the verify stage, as the trace records it.

    Attributes:
        sentence: The sentence as the writer wrote it (citation markers kept).
        passage_ids: The source ids it was judged against: its citations, or for an uncited sentence
            the candidates found for it.
        verdict: `supported`, `partially` or `unsupported`; `unchecked` when no cited passage's text is
            known (a node restored from the journal, with a retriever that has no corpus to ask).
        action: `kept`, `cited` (an uncited sentence the candidates support, now citing them),
            `rewritten`, `removed` or `marked`.
        shipped: The sentence as it ships ('' when removed).
        was_cited: Whether the writer cited anything in it.
        judge: `lm` or `lexical` (the offline rule, also the stand-in for a verdict the LM left out);
            `quote` for a sentence that is word for word a sentence of its passages (`quoted`: no LM is asked);
            `floor` when the lexical rule overruled an LM verdict of support it found no ground for;
            `guard` for a sentence removed because it repeats instruction-like text of a passage (verdict
            `injected`); `none` when unchecked.
    """

    sentence: str
    passage_ids: tuple[str, ...]
    verdict: str
    action: str
    shipped: str
    was_cited: bool
    judge: str

    def to_dict(self) -> dict:
        return {**asdict(self), "passage_ids": list(self.passage_ids)}


@dataclass
class _Unit:
    """A checked sentence of the draft: where it is and what it is judged against."""

    claim_id: int
    raw: str
    text: str
    cited: list[str]  # resolvable citations, first MAX_CITATIONS
    passages: list[Source]


def _with_citations(sentence: str, ids: Sequence[str]) -> str:
    """`sentence` ending with `[id, ...]` before its final punctuation."""
    body = CITATION.sub("", sentence).rstrip()
    end = body[-1] if body and body[-1] in ".!?" else "."
    body = body.rstrip(".!? ")
    return f"{body} [{', '.join(ids)}]{end}" if ids else f"{body}{end}"


def _readable(unit: _Unit) -> bool:
    """Whether the sentence can be judged: it cites nothing, or one of its cited passages has text."""
    return not unit.cited or any(p.text for p in unit.passages)


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def quoted(sentence: str, passages: Sequence[Source]) -> bool:
    """Whether `sentence` is, word for word, a whole sentence of one of `passages`. Such a sentence is supported
    by construction, so the LM judge is not asked about it: the extractor quotes its passages' sentences, and a
    small model's writer often copies those quotes. A part of a sentence is judged: cut out of its sentence, it
    may say what the passage does not."""
    said = _words(sentence)
    return bool(said) and any(said == _words(s) for p in passages for s in split_sentences(p.text))


def _candidates(text: str, pool: Sequence[Source], k: int = MAX_CITATIONS) -> list[Source]:
    """The passages of `pool` that share most of `text`'s content words (at least the partial share)."""
    scored = sorted(((lexical_coverage(p.text, text), i) for i, p in enumerate(pool)), key=lambda x: (-x[0], x[1]))
    return [pool[i] for score, i in scored[:k] if score >= PARTIAL_SUPPORT]


def _premise(source: Source) -> str:
    """What a passage states, for the lexical rule: its title and text."""
    return f"{source.title}\n{source.text}"


def _cleaned(source: Source) -> Source:
    """The passage with its instruction-like sentences taken out (they are never evidence)."""
    clean = clean_passage(source.text)
    return source if clean == source.text else source.model_copy(update={"text": clean})


def _grounded(sentence: str, passages: Sequence[Source]) -> bool:
    """The lexical floor: at least `PARTIAL_SUPPORT` of the sentence's content words are in the passages, and
    it repeats no instruction-like text. An LM's `supported` stands only above it."""
    premises = [_premise(p) for p in passages]
    return lexical_support(sentence, premises) > 0.0 and not carries_injection(sentence, premises)


def guarded_lines(report: str, sources: Sequence[Source], question: str = "") -> tuple[list, list[SentenceCheck]]:
    """The report's lines (a raw line, or [prefix, [sentence parts]] for a prose block), with every sentence
    that repeats instruction-like text of `sources` (or is instruction-like itself) emptied, unless `question`
    is about what it says, and a check for each one emptied (verdict `injected`, action `removed`, judge
    `guard`)."""
    lines: list[str | list] = []
    is_open = False
    for line in report.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|", ">", "```")) or NOTE.match(stripped):
            lines.append(line)
            is_open = False
            continue
        mark = LIST_MARK.match(line)
        if mark or not is_open:
            lines.append([mark.group(0) if mark else "", [LIST_MARK.sub("", line).strip()]])
            is_open = True
        else:
            block = lines[-1]
            assert isinstance(block, list)  # is_open: the last line is the open prose block
            block[1][0] += " " + stripped
    premises = [_premise(s) for s in sources]
    checks: list[SentenceCheck] = []
    for item in lines:
        if isinstance(item, str):
            continue
        item[1] = split_block(item[1][0])
        for j, part in enumerate(item[1]):
            text = plain_sentence(part)
            if text and carries_injection(text, premises, question):
                item[1][j] = ""
                checks.append(
                    SentenceCheck(
                        sentence=part,
                        passage_ids=tuple(citations_in(part)),
                        verdict="injected",
                        action="removed",
                        shipped="",
                        was_cited=bool(citations_in(part)),
                        judge="guard",
                    )
                )
    return lines, checks


def _joined(lines: list) -> str:
    out = []
    for item in lines:
        if isinstance(item, str):
            out.append(item)
        elif any(p.strip() for p in item[1]):
            out.append(item[0] + " ".join(p.strip() for p in item[1] if p.strip()))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def remove_injected(text: str, sources: Sequence[Source], question: str = "") -> tuple[str, list[SentenceCheck]]:
    """`text` (a report with verify `off`, a short answer) without the sentences that repeat instruction-like
    text of `sources` (unless `question` is about it), and a check for each one removed."""
    lines, checks = guarded_lines(text, sources, question)
    return (_joined(lines) if checks else text), checks


def marked(sentence: str) -> str:
    """`sentence` with `MARK` before its closing punctuation, so that the mark stays with the sentence it
    qualifies (after the period, a sentence splitter reads it as the start of the next sentence)."""
    text = sentence.rstrip()
    end = re.search(r"[.!?]+[\"')\]]*$", text)
    return text[: end.start()] + MARK + text[end.start() :] if end else text + MARK


def lexical_verdict(text: str, passages: Sequence[Source]) -> Support:
    """The lexical-entailment rule's verdict on one sentence."""
    return _GRADE[lexical_support(text, [p.text for p in passages]) if passages else 0.0]


def correction(text: str, passages: Sequence[Source]) -> str:
    """What a sentence not fully supported becomes: the sentence of its passages that covers most of its words
    (a quote from the cited source, so the lexical rule supports it by construction), or "" when none covers
    `PARTIAL_SUPPORT` of them."""
    quotes = [s for p in passages for s in split_sentences(p.text)]
    best = max(quotes, key=lambda s: lexical_coverage(s, text), default="")
    return best if best and lexical_coverage(best, text) >= PARTIAL_SUPPORT else ""


class Verifier(Stage):
    """Draft report + the passages it may cite -> the report with each claim checked by an LM.

    Sentences go to the LM in batches of at most `batch_size`, and of at most `max_chars` characters of
    sentences and passages together, so a runaway draft (hundreds of sentences, a sentence of pages) cannot
    overflow the model's context: a sentence longer than a quarter of `max_chars` is cut for the LM. A batch
    the server still finds too long for its context is split in two and sent again; a single sentence that
    does not fit is left to the lexical rule. A verdict the LM leaves out (or gives for an id it was not
    asked about) is replaced by the lexical rule's, recorded with judge `lexical`. A sentence that quotes its
    passages word for word (`quoted`) is not sent: it is supported. With `sentences` > 0 the LM
    reads each cited passage cut to its sentences nearest the claim (`shown`); the rule reads it whole.
    """

    def __init__(
        self,
        policy: str = "rewrite",
        batch_size: int = 6,
        min_claim_chars: int = MIN_CLAIM_CHARS,
        max_chars: int = 24000,
        sentences: int = 0,
    ):
        super().__init__()
        if policy not in VERIFY_POLICIES:
            raise ValueError(f"unknown verify policy {policy!r}; choose one of: {', '.join(VERIFY_POLICIES)}")
        if batch_size < 1:
            raise ValueError(f"verify batch_size must be >= 1, got {batch_size}")
        if max_chars < 1000:
            raise ValueError(f"verify max_chars must be >= 1000, got {max_chars}")
        self.policy, self.min_claim_chars = policy, min_claim_chars
        self.batch_size, self.max_chars, self.sentences = batch_size, max_chars, sentences
        self.verify_claims = dspy.Predict(VerifyClaims)

    @classmethod
    def from_config(cls, config: Any, retriever: Any) -> Verifier:
        return cls(
            config.verify,
            batch_size=config.verify_batch,
            max_chars=config.verify_chars,
            sentences=config.verify_sentences,
        )

    async def aforward(self, question: str, report: str, sources: list[Source]) -> dspy.Prediction:
        """Checks `report` (a draft citing source ids) against `sources` (every passage it may cite).

        Every sentence that repeats a passage's instruction-like text is removed first, whatever the policy
        (`deepresearch.programs.citing.injection`); the others are judged against the passages with that
        text taken out, and a verdict of support the lexical rule finds no ground for is overruled by it.

        Returns:
            `report`: the draft with the policy applied; `checks`: a `SentenceCheck` per judged sentence.
        """
        lines, checks = guarded_lines(report, sources, question)
        sources = [_cleaned(s) for s in sources]
        by_id = {s.source_id: s for s in sources}
        units: dict[tuple[int, int], _Unit] = {}
        for i, item in enumerate(lines):
            if isinstance(item, str):
                continue
            for j, part in enumerate(item[1]):
                unit = self._unit(len(units), part, by_id, sources) if part else None
                if unit is not None:
                    units[(i, j)] = unit
        claims = [
            ClaimToCheck(claim_id=u.claim_id, sentence=u.text, passages=u.passages)
            for u in units.values()
            if u.passages and _readable(u)
        ]
        verdicts, judge = await self.judge(question, claims) if claims else ({}, "lexical")
        for (i, j), unit in units.items():
            if not _readable(unit):  # its passages' text is unknown (a node restored without it): left as written
                checks.append(
                    SentenceCheck(
                        sentence=unit.raw,
                        passage_ids=tuple(unit.cited),
                        verdict="unchecked",
                        action="kept",
                        shipped=unit.raw,
                        was_cited=True,
                        judge="none",
                    )
                )
                continue
            verdict = verdicts.get(unit.claim_id)
            used = judge if verdict is not None else "lexical"
            if quoted(unit.text, unit.passages):
                verdict, used = "supported", "quote"
            elif verdict is None:
                verdict = lexical_verdict(unit.text, unit.passages)
            elif verdict != "unsupported" and not _grounded(unit.text, unit.passages):
                # the LM found support the passages' words do not give: the lexical rule overrules it
                verdict, used = lexical_verdict(unit.text, unit.passages), "floor"
            shipped, action = self._apply(unit, verdict)
            lines[i][1][j] = shipped
            checks.append(
                SentenceCheck(
                    sentence=unit.raw,
                    passage_ids=tuple(p.source_id for p in unit.passages),
                    verdict=verdict,
                    action=action,
                    shipped=shipped,
                    was_cited=bool(unit.cited),
                    judge=used,
                )
            )
        return dspy.Prediction(report=_joined(lines), checks=checks)

    def _unit(self, claim_id: int, part: str, by_id: dict[str, Source], pool: list[Source]) -> _Unit | None:
        text = plain_sentence(part)
        if not text:
            return None
        cited = [c for c in citations_in(part) if c in by_id][:MAX_CITATIONS]
        if cited:
            return _Unit(claim_id, part, text, cited, [by_id[c] for c in cited])
        if len(text) < self.min_claim_chars:
            return None
        return _Unit(claim_id, part, text, [], _candidates(text, [p for p in pool if p.text]))

    def _apply(self, unit: _Unit, verdict: Support) -> tuple[str, str]:
        ids = [p.source_id for p in unit.passages]
        if verdict == "supported":
            return (unit.raw, "kept") if unit.cited else (_with_citations(unit.raw, ids), "cited")
        if self.policy == "mark":
            return marked(unit.raw), "marked"
        corrected = plain_sentence(correction(unit.text, unit.passages)) if self.policy == "rewrite" else ""
        if corrected and ids:
            return _with_citations(corrected, ids), "rewritten"
        return "", "removed"

    def shown(self, claim: ClaimToCheck) -> ClaimToCheck:
        """The claim as the LM judge reads it: each passage cut to its `sentences` sentences that share the most
        terms with the claim, in their order (the whole passage when `sentences` is 0)."""
        if self.sentences <= 0:
            return claim
        cut = []
        for p in claim.passages:
            parts = split_sentences(p.text)
            best = best_sentences(parts, claim.sentence, self.sentences)
            cut.append(
                p if len(best) == len(parts) else p.model_copy(update={"text": " ".join(parts[i] for i in best)})
            )
        return claim.model_copy(update={"passages": cut})

    def batches(self, claims: list[ClaimToCheck]) -> list[list[ClaimToCheck]]:
        """The claims in batches of at most `batch_size` claims and `max_chars` characters (a claim that alone
        is larger than `max_chars` is a batch of its own)."""
        cap = self.max_chars // 4
        out: list[list[ClaimToCheck]] = []
        size = 0
        for claim in claims:
            if len(claim.sentence) > cap:
                claim = claim.model_copy(update={"sentence": claim.sentence[:cap] + " …"})
            n = _claim_chars(claim)
            if not out or len(out[-1]) >= self.batch_size or size + n > self.max_chars:
                out.append([])
                size = 0
            out[-1].append(claim)
            size += n
        return out

    async def judge(self, question: str, claims: list[ClaimToCheck]) -> tuple[dict[int, Support], str]:
        verdicts: dict[int, Support] = {}
        queue = self.batches([self.shown(c) for c in claims if not quoted(c.sentence, c.passages)])
        while queue:
            batch = queue.pop(0)
            asked = {c.claim_id for c in batch}
            try:
                out = await call_predictor(SPEC, self.verify_claims, question=question, claims=batch)
            except BudgetExceeded:
                if not verdicts:  # the LM judged nothing: the stage failed, and says so
                    raise
                # the budget ran out between batches: what the LM judged stands, the lexical rule judges the rest
                logger.info(
                    "verify: the LM call budget ran out after %d of %d sentences; the lexical rule judges the rest",
                    len(verdicts),
                    len(claims),
                )
                break
            except dspy.utils.exceptions.LMInvalidRequestError as err:
                if not _too_long(err):
                    raise
                if len(batch) > 1:  # smaller requests: the two halves, in order
                    half = len(batch) // 2
                    queue[:0] = [batch[:half], batch[half:]]
                    continue
                logger.info(
                    "verify: sentence %d does not fit the model's context; the lexical rule judges it",
                    batch[0].claim_id,
                )
                continue
            verdicts.update({i: v for i, v in out.verdicts.items() if i in asked})
        return verdicts, "lm"


def _claim_chars(claim: ClaimToCheck) -> int:
    """Characters a claim adds to a verify request: its sentence, its passages, and the JSON around them."""
    return len(claim.sentence) + sum(len(p.title) + len(p.text) + 60 for p in claim.passages) + 40


def _too_long(err: Exception) -> bool:
    """Whether an invalid-request error says the prompt exceeds the context (llama.cpp, vLLM, OpenAI wordings)."""
    text = str(err).lower()
    return isinstance(err, dspy.utils.exceptions.ContextWindowExceededError) or any(
        w in text for w in ("context", "too long", "maximum context", "exceeds", "n_ctx")
    )


class LexicalVerifier(Verifier):
    """The offline verify stage: the lexical-entailment rule (`lexical_verdict`) judges every claim, no LM."""

    is_offline = True

    @classmethod
    def from_config(cls, config: Any, retriever: Any) -> LexicalVerifier:
        return cls(config.verify, sentences=config.verify_sentences)

    async def judge(self, question: str, claims: list[ClaimToCheck]) -> tuple[dict[int, Support], str]:
        verdicts = {c.claim_id: lexical_verdict(c.sentence, c.passages) for c in claims}
        for batch in self.batches([self.shown(c) for c in claims]):
            teach(
                self.verify_claims,
                {"question": question, "claims": batch},
                verdicts={c.claim_id: verdicts[c.claim_id] for c in batch},
            )
        return verdicts, "lexical"


SPEC = StageSpec(
    "verify",
    "checks every claim of the draft against its cited passages",
    (VerifyClaims,),
    Verifier,
    LexicalVerifier,
    research_attr="verifier",
    reserve=0,
)
