"""Papers as passages: bounded, overlapping chunks of a document's text, each a Doc of its own.

A passage of paper `smith2020` is the Doc `smith2020#3` (1-based), carrying its paper's title, link and
bibliographic fields, plus `metadata["paper_id"]` ("smith2020"), `metadata["passage"]` (3) and
`metadata["passages"]` (how many the paper has). Retrievers rank passages like any document; whoever
lists references (`deepresearch.programs.citing.citations`) groups them back by `paper_id`, so a paper is named once.

Splitting is sentence-aware and cheap: the text is cut into sentences (a sentence longer than a passage
is cut at word boundaries), sentences are packed into passages of at most `max_chars` characters, and
each passage after the first starts with the last sentences of the one before, at most `overlap`
characters of them (or the last `overlap` characters, cut at a word, when no whole sentence fits).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from deepresearch.retrievers.types import Doc

PASSAGE_SEP = "#"
MAX_CHARS = 1200  # about 250 words: a paragraph or two, well under the 2,000 characters a source shows the LM
OVERLAP = 200  # about one sentence carried over, so a finding cut at a boundary is whole in one passage

_HYPHEN_BREAK = re.compile(r"(\w)-\s*\n\s*(\w)")
# A sentence ends at . ! or ? (then closing quotes, then any citations written after it) before a space and
# a capital, digit, quote, emphasis or bracket that does not open a citation.
_BOUNDARY = re.compile(r"[.!?][\"')]*((?:\s*\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\](?!\())*)\s+(?=[A-Z0-9(\"'*_]|\[(?!\s*\d))")
_ABBREVIATIONS = frozenset(
    "al e.g i.e vs fig figs ca cf approx eq eqs no nos ref refs dr mr mrs ms prof st vol pp p resp".split()
)
_INITIAL_NEXT = re.compile(r"[A-Z]\.\s")


def clean_text(text: str) -> str:
    """Joins words hyphenated across line breaks and collapses whitespace (PDF text breaks every line)."""
    return " ".join(_HYPHEN_BREAK.sub(r"\1\2", text).split())


def _is_initial(word: str, previous: str) -> bool:
    """Whether `word` before a period is a name's initial: "J. Doe", "John F. Kennedy", "A. B. Smith", but
    not the end of "vitamin D." or "type A." (a capital letter after a lowercase word)."""
    if len(word) != 1 or not word.isupper():
        return False
    return not previous or previous[-1] in ".!?])" or previous[:1].isupper()


def split_sentences(block: str) -> list[str]:
    """The sentences of one paragraph: the one sentence splitter of papers, reports and passages.

    A sentence ends at `.`, `!` or `?` before a space and a capital, digit, bracket, quote or emphasis, not
    after a common abbreviation (et al., e.g., Fig., ...) or a name's initial; a citation written after the
    period stays with the sentence before it.

    Example:
        >>> split_sentences("Rates fell (Smith et al. 2020) [1]. Fig. 2 shows it. [2] Then more [3].")
        ['Rates fell (Smith et al. 2020) [1].', 'Fig. 2 shows it. [2]', 'Then more [3].']
    """
    sentences, start = [], 0
    for end, after in _sentence_ends(block):
        sentences.append(block[start:end].strip())
        start = after
    sentences.append(block[start:].strip())
    return [s for s in sentences if s]


def _sentence_ends(block: str) -> Iterator[tuple[int, int]]:
    """Where each sentence of `block` but the last ends (after its punctuation, closing quotes and any
    citations written after it) and where the next one starts."""
    for m in _BOUNDARY.finditer(block):
        before = block[max(0, m.start() - 40) : m.start()].split()
        word = before[-1].lstrip("(\"'") if before else ""
        if (
            word.lower() in _ABBREVIATIONS
            or _is_initial(word, before[-2] if len(before) > 1 else "")
            or (len(word) == 1 and _INITIAL_NEXT.match(block, m.end()))
        ):  # "A. B. Smith"
            continue
        yield m.end(1), m.end()


def clip_sentences(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` characters after its last whole sentence, so that nobody (a model
    quoting sentences, a verifier matching them, a reader) takes half a sentence for one; when not even the
    first sentence fits, it is cut at a word and ends with "...".

    Example:
        >>> clip_sentences("Rates fell by 10%. Deaths rose in men.", 30)
        'Rates fell by 10%.'
    """
    if len(text) <= max_chars:
        return text
    ends = [end for end, _ in _sentence_ends(text[: max_chars + 80]) if end <= max_chars]
    if ends:
        return text[: ends[-1]]
    if max_chars < 10:  # no room for a word and the "..."
        return text[:max_chars]
    cut = text[: max_chars - 3]
    return (cut.rpartition(" ")[0] or cut).rstrip() + "..."


def sentences(text: str) -> list[str]:
    """The sentences of `text` after `clean_text` (`split_sentences`)."""
    return split_sentences(clean_text(text))


def _pieces(sentence: str, width: int) -> list[str]:
    """`sentence` cut at word boundaries into pieces of at most `width` characters (a longer word is cut)."""
    out, cur = [], ""
    for word in sentence.split(" "):
        while len(word) > width:
            if cur:
                out.append(cur)
                cur = ""
            out.append(word[:width])
            word = word[width:]
        if cur and len(cur) + 1 + len(word) > width:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        out.append(cur)
    return out


def _tail(units: list[str], overlap: int) -> list[str]:
    """The last units of a passage that fit in `overlap` characters; else the end of the last one, cut at a word."""
    kept: list[str] = []
    size = -1
    for unit in reversed(units):
        if size + 1 + len(unit) > overlap:
            break
        kept.insert(0, unit)
        size += 1 + len(unit)
    if kept or overlap <= 0:
        return kept
    end = units[-1][-overlap:]
    cut = end.find(" ")
    end = end[cut + 1 :] if 0 <= cut < len(end) - 1 else end
    return [end] if end else []


def split_passages(text: str, max_chars: int = MAX_CHARS, overlap: int = OVERLAP) -> list[str]:
    """Splits `text` into passages of at most `max_chars` characters, consecutive ones sharing up to `overlap`.

    Args:
        text: Any text; whitespace is collapsed and words hyphenated across lines are joined.
        max_chars: Longest passage, in characters (at least 100).
        overlap: Characters of the previous passage a passage may start with (0 for none; below `max_chars / 2`).

    Raises:
        ValueError: for `max_chars` below 100 or an overlap of half a passage or more.

    Example:
        >>> split_passages("One. Two is here. Three.", max_chars=100, overlap=0)
        ['One. Two is here. Three.']
    """
    if max_chars < 100:
        raise ValueError(f"passages of {max_chars} characters are too short; use at least 100")
    if not 0 <= overlap < max_chars // 2:
        raise ValueError(f"overlap {overlap} must be between 0 and half the passage length ({max_chars // 2 - 1})")
    width = max_chars - overlap - 1  # a carried-over tail plus any one unit always fits in a passage
    units = [p for s in sentences(text) for p in _pieces(s, width)]
    passages: list[str] = []
    cur: list[str] = []
    for unit in units:
        if cur and len(" ".join(cur)) + 1 + len(unit) > max_chars:
            passages.append(" ".join(cur))
            cur = _tail(cur, overlap)
        cur.append(unit)
    if cur:
        passages.append(" ".join(cur))
    return passages


def passage_docs(paper: Doc, max_chars: int = MAX_CHARS, overlap: int = OVERLAP) -> list[Doc]:
    """The passages of `paper` as Docs `<paper id>#1`..`#n` (none for a paper without text).

    Each keeps the paper's title, link, dates and metadata, and adds `paper_id`, `passage` and `passages`.
    """
    chunks = split_passages(paper.text, max_chars, overlap)
    return [
        replace(
            paper,
            doc_id=f"{paper.doc_id}{PASSAGE_SEP}{n}",
            text=chunk,
            metadata={**paper.metadata, "paper_id": paper.doc_id, "passage": n, "passages": len(chunks)},
        )
        for n, chunk in enumerate(chunks, start=1)
    ]


def paper_id(doc: Doc) -> str:
    """The id of the paper a Doc belongs to: its `paper_id` for a passage, else its own id."""
    pid = doc.metadata.get("paper_id") if doc.metadata else None
    return str(pid) if pid not in (None, "") else doc.doc_id


def best_passages(query: str, passages: Sequence[Doc], k: int = 3) -> list[Doc]:
    """The `k` passages of one paper that best match `query` (BM25 over the paper's own passages), best first.

    Passages no query word matches come last, in text order, so a paper always gives `k` passages when
    it has them.
    """
    if len(passages) <= k:
        return list(passages)
    from deepresearch.retrievers.bm25 import BM25Retriever  # lazy: start-up
    from deepresearch.retrievers.corpus import Corpus  # lazy: start-up

    # Lucene IDF stays positive for a word every passage has (a paper's few passages share many words);
    # the English analyzer matches "fractures" to "fracture". The settings of the default BM25 preset.
    bm25 = BM25Retriever(
        Corpus(passages, name="passages"), k1=1.2, b=0.75, tokenizer="english", method="lucene", text_format="plain"
    )
    ranked = [h.doc for h in bm25.search(query, k)]
    seen = {d.doc_id for d in ranked}
    return ranked + [d for d in passages if d.doc_id not in seen][: k - len(ranked)]
