"""The report as one self-contained HTML page: `report_html(report)` is the view of a finished run.

A pure function from the run's artifacts (the `Report`: its Markdown, references, cited passages, verdicts,
tree and usage) to one HTML string. The page needs nothing else: its CSS and a small script are inlined,
nothing is fetched (a Content-Security-Policy forbids it), and it works from `file://`. The same function
writes `report.html` beside report.md, renders the report in Jupyter (`programs/notebook.py`, embedded in a
notebook cell) and feeds `deepresearch view`.

What it shows: the report with every citation a link (hovering or focusing one shows the cited passage with
the sentence that best supports the citing sentence marked, and the verify stage's verdict on that
sentence; activating it jumps to the reference card); the short answer; the reference cards (title,
authors, year, venue, DOI or URL, every passage used); the research tree, collapsible; the run's budget
and its calls, tokens, cost and time per stage. A failed or interrupted run says so at the top.

Every string that came from a corpus, an engine or an LM is data: the Jinja2 template escapes it
(autoescape), nothing of it is marked safe, and a link is made only of an http(s) URL or a DOI. The
Markdown of the report is read here into blocks, sentences and inline segments (text, emphasis, code,
citations) that the template writes out escaped; no Markdown renderer's HTML is trusted. A backslash escape
(`\\#`, `\\[`, `\\<`: how report.md keeps corpus and model text inert) is read as the character it escapes,
so that text shows as written and makes no heading, link or image here either; no string of the view keeps a
control character.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from deepresearch.programs.artifacts import NODE_STATUSES
from deepresearch.programs.citing.entailment import content_tokens
from deepresearch.programs.citing.provenance import RULE, TABLE_RULE, body_of, split_sentences
from deepresearch.programs.runtime.text import collapse_whitespace, printable
from deepresearch.retrievers.passages import clip_sentences

if TYPE_CHECKING:
    from deepresearch.programs.artifacts import Node, Reference, Report
    from deepresearch.programs.citing.citations import CitationRegistry

PASSAGE_CHARS = 6000  # a cited passage's text kept for the view (abstracts and full-text passages are shorter)
_ASSETS = ("report_view.html.j2", "report_view.css", "report_view.js")

# Inline Markdown the report uses: backslash escapes, citation groups "[3]" / "[1, 4]" (not a link's text),
# links, bold, italics, code. Anything else is text.
_INLINE = re.compile(
    r"\\(?P<esc>[!-/:-@\[-`{-~])"
    r"|(?P<cite>\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\](?!\())"
    r"|\[(?P<ltext>[^\]\n]+)\]\((?P<lurl>(?:[^()\s]|\([^()\s]*\))+)\)"
    r"|\*\*(?P<strong>[^*\n]+?)\*\*"
    r"|(?<![\w*])\*(?P<em>[^*\n]+?)\*(?![\w*])"
    r"|(?<!\w)_(?P<em2>[^_\n]+?)_(?!\w)"
    r"|`(?P<code>[^`\n]+)`"
)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_NUMBER = re.compile(r"\d+")
_VERDICT_CITATION = re.compile(r"\[[^\]\n]{1,200}\]")
_MARK = re.compile(r"\*\(unverified\)\*")
VERDICTS = ("supported", "partially", "unsupported", "unchecked")


def cited_passages(
    references: Sequence[Reference], registry: CitationRegistry, corpus: Any = None, max_chars: int = PASSAGE_CHARS
) -> dict[str, str]:
    """The text of every passage the references stand for, by source id (`Report.passages`).

    A document journaled without its text (a resumed node) is read from `corpus` when it can give it.
    """
    out: dict[str, str] = {}
    for ref in references:
        for sid in ref.passages or (ref.source_id,):
            doc = registry.get(sid)
            if doc is None:
                continue
            if not doc.text.strip() and corpus is not None and hasattr(corpus, "get"):
                doc = corpus.get(doc.doc_id) or doc
            out[sid] = clip_sentences(doc.text, max_chars)
    return out


def safe_url(url: str | None) -> str | None:
    """`url` when it is an absolute http(s) URL (the only links the view makes), else None."""
    if not url:
        return None
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return (
        url
        if parts.scheme.lower() in ("http", "https") and parts.netloc and not any(c in url for c in "\r\n\t ")
        else None
    )


def reference_link(ref: Reference) -> str | None:
    """Where a reference opens: its DOI at doi.org, else its http(s) URL; None for a corpus document only."""
    if ref.doi and ref.doi.strip():
        return "https://doi.org/" + quote(ref.doi.strip(), safe="/:;()._-")
    return safe_url(ref.url)


def _sentences(text: str) -> list[str]:
    return split_sentences(collapse_whitespace(text)) if text.strip() else []


def _scores(claim: str, sentences: Sequence[str]) -> list[float]:
    """The share of `claim`'s content words each sentence holds."""
    wanted = set(content_tokens(claim))
    return [len(wanted & set(content_tokens(s))) / (len(wanted) or 1) for s in sentences]


def _best_sentence(claim: str, sentences: Sequence[str]) -> int:
    """Index of the passage sentence that shares most content words with `claim` (-1 when none shares any)."""
    scores = _scores(claim, sentences)
    best = max(scores, default=0.0)
    return scores.index(best) if best > 0 else -1


def _normalized(sentence: str) -> str:
    """A sentence as the view and the verdicts both know it: no citations, marks or emphasis, words only."""
    text = _MARK.sub(" ", _VERDICT_CITATION.sub(" ", sentence))
    return " ".join(re.findall(r"\w+", text.lower()))


class _Builder:
    """Reads the report into what the template shows; one per render (it numbers the citations)."""

    def __init__(self, report: Report, prefix: str):
        self.report = report
        self.prefix = prefix
        self.refs = {r.number: r for r in report.references}
        self.passage_sentences = {sid: _sentences(text) for sid, text in report.passages.items()}
        self.verdicts: dict[str, dict[str, Any]] = {}
        for v in report.verdicts:
            for key in (v.get("shipped"), v.get("sentence")):
                if key and _normalized(key):
                    self.verdicts.setdefault(_normalized(key), v)
        self.sid_number = {sid: r.number for r in report.references for sid in (r.passages or (r.source_id,))}
        self.citations = 0
        self.headings = 0

    # --- the report's Markdown as blocks -> sentences -> segments
    def blocks(self, markdown: str, *, checked: bool) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        paragraph: list[str] = []
        lines = markdown.splitlines()

        def flush() -> None:
            if paragraph:
                blocks.append({"kind": "p", "sentences": self.sentences(" ".join(paragraph), checked)})
                paragraph.clear()

        i = 0
        while i < len(lines):
            line, stripped = lines[i], lines[i].strip()
            if stripped.startswith(("```", "~~~")):
                flush()
                fence, code = stripped[:3], []
                i += 1
                while i < len(lines) and not lines[i].strip().startswith(fence):
                    code.append(lines[i])
                    i += 1
                blocks.append({"kind": "code", "text": "\n".join(code)})
            elif not stripped:
                flush()
            elif m := _HEADING.match(stripped):
                flush()
                if not blocks and _normalized(m.group(2)) == _normalized(self.report.question):
                    i += 1  # the report's title repeats the question, which the page's heading shows
                    continue
                self.headings += 1
                blocks.append(
                    {
                        "kind": "heading",
                        "level": min(max(len(m.group(1)), 2), 6),
                        "id": f"{self.prefix}-h{self.headings}",
                        "segments": self.segments(m.group(2)),
                    }
                )
            elif RULE.match(stripped):
                flush()
                blocks.append({"kind": "rule"})
            elif stripped.startswith(">"):
                flush()
                quoted = []
                while i < len(lines) and lines[i].strip().startswith(">"):
                    quoted.append(lines[i].strip().lstrip(">").strip())
                    i += 1
                blocks.append({"kind": "quote", "sentences": self.sentences(" ".join(q for q in quoted if q), False)})
                continue
            elif stripped.startswith("|"):
                flush()
                rows = []
                while i < len(lines) and lines[i].strip().startswith("|"):
                    row = lines[i].strip()
                    if not TABLE_RULE.match(row):
                        rows.append([self.segments(c.strip()) for c in row.strip("|").split("|")])
                    i += 1
                blocks.append({"kind": "table", "rows": rows})
                continue
            elif _LIST_ITEM.match(line):
                flush()
                items: list[list[Any]] = []  # [indent, text]
                while i < len(lines) and lines[i].strip():
                    item = _LIST_ITEM.match(lines[i])
                    if item:
                        items.append([len(item.group(1).expandtabs(4)), item.group(2)])
                    elif items:
                        items[-1][1] += " " + lines[i].strip()
                    i += 1
                blocks.append({"kind": "list", "items": self.nest(items, checked)})
                continue
            else:
                paragraph.append(stripped)
            i += 1
        flush()
        return blocks

    def nest(self, items: list[list[Any]], checked: bool) -> list[dict[str, Any]]:
        """List items (indent, text) as a tree: an item indented deeper than the one before is its child."""
        root: list[dict[str, Any]] = []
        stack: list[tuple[int, list[dict[str, Any]]]] = [(-1, root)]
        for indent, text in items:
            while len(stack) > 1 and indent <= stack[-1][0]:
                stack.pop()
            item = {"sentences": self.sentences(text, checked), "children": []}
            stack[-1][1].append(item)
            stack.append((indent, item["children"]))
        return root

    def sentences(self, text: str, checked: bool) -> list[dict[str, Any]]:
        out = []
        for sentence in _sentences(text):
            verdict = self.verdicts.get(_normalized(sentence)) if checked else None
            out.append({"segments": self.segments(sentence, sentence), "verdict": _verdict(verdict)})
        return out

    def segments(self, text: str, sentence: str | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        at = 0
        for m in _INLINE.finditer(text):
            if m.start() > at:
                out.append({"kind": "text", "text": text[at : m.start()]})
            if m.group("esc"):
                out.append({"kind": "text", "text": m.group("esc")})
            elif m.group("cite"):
                out.append(
                    {
                        "kind": "cite",
                        "cites": [self.cite(int(n), sentence or text) for n in _NUMBER.findall(m.group("cite"))],
                    }
                )
            elif m.group("ltext"):
                out.append({"kind": "link", "text": m.group("ltext"), "href": safe_url(m.group("lurl"))})
            elif m.group("strong"):
                out.append({"kind": "strong", "text": m.group("strong")})
            elif m.group("em") or m.group("em2"):
                out.append({"kind": "em", "text": m.group("em") or m.group("em2")})
            else:
                out.append({"kind": "code", "text": m.group("code")})
            at = m.end()
        if at < len(text):
            out.append({"kind": "text", "text": text[at:]})
        return out

    def cite(self, number: int, sentence: str) -> dict[str, Any]:
        """One citation number: the reference it names, the passage shown for it and the sentence marked."""
        ref = self.refs.get(number)
        if ref is None:
            return {"number": number, "ref": None}
        self.citations += 1
        candidates = ref.passages or (ref.source_id,)
        sid = max(
            candidates, key=lambda s: (_best_score(sentence, self.passage_sentences.get(s, ())), -candidates.index(s))
        )
        mark = _best_sentence(sentence, self.passage_sentences.get(sid, ()))
        return {
            "number": number,
            "ref": f"{self.prefix}-ref-{number}",
            "src": self.src_id(sid),
            "mark": mark,
            "id": f"{self.prefix}-c{self.citations}",
        }

    def src_id(self, sid: str) -> str:
        return f"{self.prefix}-src-{re.sub(r'[^A-Za-z0-9_-]', '_', sid)}"

    # --- reference cards, the tree, the usage table
    def reference(self, ref: Reference) -> dict[str, Any]:
        passages = []
        for sid in ref.passages or (ref.source_id,):
            label = f"passage {sid.rsplit('_', 1)[-1]}" if ref.passages else "the text"
            passages.append(
                {
                    "id": self.src_id(sid),
                    "label": label,
                    "sentences": self.passage_sentences.get(sid, []),
                    "is_known": sid in self.report.passages,
                }
            )
        title = collapse_whitespace(ref.title).rstrip(". ") or ref.doc_id
        return {
            "number": ref.number,
            "id": f"{self.prefix}-ref-{ref.number}",
            "title": title,
            "authors": list(ref.authors),
            "year": ref.year,
            "venue": ref.venue,
            "doi": ref.doi,
            "url": ref.url,
            "href": reference_link(ref),
            "doc_id": ref.doc_id,
            "passages": passages,
        }

    def node(self, node: Node) -> dict[str, Any]:
        learnings = [
            {
                "text": x.text,
                "cites": [
                    {
                        "sid": s,
                        "number": self.sid_number.get(s),
                        "ref": f"{self.prefix}-ref-{self.sid_number[s]}" if s in self.sid_number else None,
                    }
                    for s in x.source_ids
                ],
            }
            for x in node.learnings
        ]
        error = None
        if node.error is not None:
            error = {
                "stage": node.error.stage,
                "type": node.error.error_type,
                "message": node.error.message,
                "cause": node.error.cause,
            }
        return {
            "id": node.node_id,
            "query": node.query,
            "goal": node.goal,
            "status": node.status if node.status in NODE_STATUSES else "other",
            "status_text": node.status,
            "retrieved": list(node.retrieved_ids),
            "relevant": list(node.relevant_ids),
            "learnings": learnings,
            "follow_ups": list(node.follow_ups),
            "notes": list(node.notes),
            "error": error,
            "children": [self.node(c) for c in node.children],
        }


def _best_score(claim: str, sentences: Sequence[str]) -> float:
    return max(_scores(claim, sentences), default=0.0)


def _verdict(v: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not v:
        return None
    verdict = str(v.get("verdict", ""))
    return {
        "verdict": verdict,
        "kind": verdict if verdict in VERDICTS else "other",
        "judge": str(v.get("judge", "")),
        "action": str(v.get("action", "")),
    }


def _usage_rows(report: Report) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    costs = (report.stats.cost or {}).get("stages") or {}
    rows: list[dict[str, Any]] = []
    for stage, u in sorted(report.usage.items()):
        rows.append(
            {
                "stage": stage,
                "calls": u.calls,
                "failed": u.failed,
                "prompt": u.prompt_tokens,
                "completion": u.completion_tokens,
                "cached": u.cached_tokens,
                "cost": costs.get(stage),
                "seconds": u.seconds,
            }
        )
    total_cost = (report.stats.cost or {}).get("total")
    keys = ("calls", "failed", "prompt", "completion", "cached", "seconds")
    total: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    total["cost"] = total_cost if isinstance(total_cost, (int, float)) else None
    return rows, total


def _banner(report: Report) -> dict[str, str] | None:
    if report.status == "failed":
        return {"kind": "failed", "title": "This run failed", "text": report.error or "nothing was researched"}
    if report.status == "interrupted":
        return {
            "kind": "interrupted",
            "title": "This run was interrupted",
            "text": (report.error or "") + "; the report covers what was done before (continue it with --resume)",
        }
    if report.stats.stopped:
        return {
            "kind": "stopped",
            "title": "This run stopped early",
            "text": f"{report.stats.stopped}; the report covers what was gathered before",
        }
    return None


def _budget(config: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    if not config:
        return []
    names = (
        ("max_lm_calls", "LM calls"),
        ("max_tokens", "tokens"),
        ("deadline_s", "deadline (s)"),
        ("max_failures", "failed branches"),
        ("depth", "depth"),
        ("breadth", "breadth"),
    )
    return [
        (label, str(config[key]) if config.get(key) is not None else "no limit")
        for key, label in names
        if key in config
    ]


def report_view(
    report: Report, *, config: Mapping[str, Any] | None = None, run: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the template shows, as plain data (strings still raw: the template escapes them).

    Args:
        report: The finished run's report.
        config: The run's `ResearchConfig` as a dict (trace.json's `config`), for the budget it ran under.
        run: Other facts of the run worth a line (trace.json's `corpus` and `models`).
    """
    digest = hashlib.sha256(f"{report.question}\x00{report.markdown}".encode()).hexdigest()[:10]
    builder = _Builder(report, f"dr{digest}")
    body = builder.blocks(body_of(report.markdown), checked=True)
    answer = builder.blocks(report.answer, checked=False) if report.answer.strip() else []
    usage, total = _usage_rows(report)
    s = report.stats
    run = dict(run or {})
    corpus = run.get("corpus") or {}
    models = run.get("models") or {}
    facts = [
        ("status", report.status),
        ("strategy", "offline" if s.offline else s.strategy),
        ("nodes", f"{s.nodes or len(report.nodes())} ({s.failed_nodes} failed)"),
        ("searches", str(s.searches)),
        ("learnings", str(s.learnings or len(report.learnings))),
        ("references", str(len(report.references))),
        ("LM calls", str(s.lm_calls)),
        ("tokens", f"{s.tokens:,}"),
    ]
    if isinstance(total["cost"], (int, float)) and s.lm_calls:
        facts.append(("cost", f"${total['cost']:.4f}"))
    if s.total_s is not None:
        facts.append(("time", f"{s.total_s:.1f} s"))
    if isinstance(corpus, Mapping) and corpus.get("name"):
        facts.append(("corpus", str(corpus["name"])))
    if isinstance(models, Mapping):
        shown = sorted({str(m) for m in models.values() if m})
        if shown:
            facts.append(("models", ", ".join(shown)))
    verification = s.verification or {}
    return _printable(
        {
            "prefix": builder.prefix,
            "question": report.question,
            "status": report.status,
            "banner": _banner(report),
            "body": body,
            "answer": answer,
            "references": [builder.reference(r) for r in report.references],
            "tree": [builder.node(n) for n in report.tree],
            "usage": usage,
            "total": total,
            "facts": facts,
            "budget": _budget(config),
            "stopped": s.stopped,
            "verification": {
                "policy": verification.get("policy"),
                "verdicts": dict(verification.get("verdicts") or {}),
                "actions": dict(verification.get("actions") or {}),
            }
            if verification
            else None,
            "citations": builder.citations,
            "node_count": len(report.nodes()),
        }
    )


def _printable(value: Any) -> Any:
    """`value` (the view's data) with every string's control characters and terminal escapes removed: a NUL, an
    ESC or a BEL of a corpus record, a model's reply or an error message never reaches the page."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {k: _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    if type(value) is tuple:
        return tuple(_printable(v) for v in value)
    return value


@cache
def _assets() -> tuple[str, str, str]:
    folder = resources.files("deepresearch.programs")
    return tuple(folder.joinpath(name).read_text(encoding="utf-8") for name in _ASSETS)  # type: ignore[return-value]


@cache
def _template():
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(_assets()[0])


def report_html(
    report: Report,
    *,
    embedded: bool = False,
    config: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
) -> str:
    """The report as one self-contained HTML page (or, `embedded`, a fragment for a notebook cell).

    Args:
        report: The finished run's report (`Report.from_dict(trace)` for a saved run).
        embedded: A fragment sized for a notebook cell (its own scroll box, styles scoped to it) instead
            of a whole page.
        config: trace.json's `config`, to show the budget the run ran under.
        run: trace.json's `corpus` and `models`, shown in the run's summary.

    Returns:
        The HTML. Nothing in it is fetched: styles and script are inlined and, in a page, a
        Content-Security-Policy allows no request and only this script.

    Example:
        >>> Path("report.html").write_text(report_html(result.report))  # doctest: +SKIP
    """
    from markupsafe import Markup

    _, css, js = _assets()
    script_hash = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    # css and js are this package's own files, not data: the only strings the template does not escape
    return _template().render(
        view=report_view(report, config=config, run=run),
        embedded=embedded,
        css=Markup(css),
        js=Markup(js),
        script_hash=script_hash,
    )
