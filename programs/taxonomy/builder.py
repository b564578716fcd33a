"""TaxonomyBuilder: organise papers into a TaxoBench taxonomy tree.

Topic + papers -> tree (TaxoBench's bottom-up mode). Deep-research mode, where the research program
finds the papers first, is `DeepResearch` with `taxonomy=True` (programs/research/deliverables.py),
which hands this builder the papers the run judged relevant. Whatever the LM answers, the tree that comes out
has one root, papers only in leaves, and every input paper exactly once under its exact input title:
the answer is validated, then repaired (a targeted LM call places left-out papers; embedding
similarity places the rest), and every repair is recorded. Paper sets larger than one prompt are
split into groups of similar papers, organised per group, and the groups' categories merged.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy
import json_repair
import numpy as np

from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.lm.models import lm_concurrency
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.lm.usage import UsageMeter, call_predictor, metered
from deepresearch.programs.prediction import ResultPrediction
from deepresearch.programs.runtime.events import EventHandler, EventLog
from deepresearch.programs.runtime.scheduler import BudgetExceeded, Scheduler
from deepresearch.programs.runtime.stage import run_sync
from deepresearch.programs.runtime.text import norm_title
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.programs.taxonomy.offline import cluster_taxonomy
from deepresearch.retrievers.embed import encode
from deepresearch.signatures.taxonomy import (
    BuildTaxonomy,
    CategoryCard,
    MergeTaxonomies,
    PaperCard,
    PlacePapers,
    RepairJSON,
    TopicNode,
)

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]
PATH_SEP = " > "


class TaxonomyError(ValueError):
    """Unusable input to the taxonomy program; the message says what to pass instead."""


@dataclass(frozen=True)
class Repair:
    """One change made to the LM's taxonomy so that it meets the guarantees."""

    kind: str
    detail: str


# ---------------------------------------------------------------- inputs


def paper_cards(papers: Sequence[Any], abstract_chars: int = 1200) -> list[PaperCard]:
    """PaperCards from cards, dicts (`title`, `abs`/`abstract`, optional `paper_id`/`id`), Docs or titles.

    Ids default to P1, P2, ...; a paper whose normalised title repeats an earlier one is dropped.
    """
    cards: list[PaperCard] = []
    seen: set[str] = set()
    for i, p in enumerate(papers):
        if isinstance(p, PaperCard):
            title, abstract, pid = p.title, p.abstract, p.paper_id
        elif isinstance(p, str):
            title, abstract, pid = p, "", None
        elif isinstance(p, dict):
            title, abstract = p.get("title") or "", p.get("abs") or p.get("abstract") or ""
            pid = p.get("paper_id") or p.get("id")
        else:  # a deepresearch.retrievers.types.Doc or anything shaped like one
            title, abstract, pid = getattr(p, "title", ""), getattr(p, "text", ""), getattr(p, "doc_id", None)
        if not isinstance(title, str) or not title.strip():
            raise TaxonomyError(
                f"paper {i} has no title; every paper needs a title (TaxoBench identifies papers by title)"
            )
        key = norm_title(title)
        if key in seen:
            logger.debug("dropping repeated paper title %r", title)
            continue
        seen.add(key)
        pid = str(pid) if pid else f"P{len(cards) + 1}"
        cards.append(PaperCard(paper_id=pid, title=title, abstract=(abstract or "")[:abstract_chars]))
    ids = [c.paper_id for c in cards]
    if len(set(ids)) != len(ids):
        cards = [c.model_copy(update={"paper_id": f"P{i + 1}"}) for i, c in enumerate(cards)]
    return cards


def _resolver(keys: dict[str, str]) -> Callable[[Any], str | None]:
    """Maps what the LM wrote for an item (its id, or its title, possibly altered) to the item's key.

    Titles match when equal after normalisation, or when the best SequenceMatcher ratio is >= 0.6
    and one normalised title contains the other (TaxoBench's `paper` rule).
    """
    by_id = {k.lower(): k for k in keys}
    by_title = {norm_title(t): k for k, t in keys.items()}

    def resolve(entry: Any) -> str | None:
        if isinstance(entry, dict):
            entry = entry.get("paper_id") or entry.get("id") or entry.get("category_id") or entry.get("title")
        if not isinstance(entry, str) or not entry.strip():
            return None
        text = entry.strip()
        head = text.split()[0].strip("[]():.,").lower()
        if text.lower() in by_id:
            return by_id[text.lower()]
        n = norm_title(text)
        if n in by_title:
            return by_title[n]
        if head in by_id and len(text.split()) > 1:  # "P3: Some Title"
            return by_id[head]
        matches = [(difflib.SequenceMatcher(None, n, t).ratio(), t, k) for t, k in by_title.items()]
        score, title, key = max(matches, key=lambda m: m[0], default=(0.0, "", None))  # the first of the best
        return key if score >= 0.6 and n and (n in title or title in n) else None

    return resolve


# ---------------------------------------------------------------- parsing LM text


def parse_tree_text(text: str) -> Any:
    """The first fenced JSON block (else the outermost braces) of `text` as JSON, or None.

    json_repair (a dependency of DSPy) parses it, mending what models get wrong: unescaped inner
    quotes, trailing commas, a cut-off end.
    """
    if not isinstance(text, str):
        return None
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        return None
    end = max(body.rfind("}"), body.rfind("]")) + 1 or None  # no closer at all: a cut-off answer, keep it whole
    parsed = json_repair.loads(body[min(starts) : end])
    is_tree = isinstance(parsed, dict) or (isinstance(parsed, list) and all(isinstance(x, dict) for x in parsed))
    return parsed if parsed and is_tree else None  # prose with braces mends into strings, not a tree


# ---------------------------------------------------------------- validation


def clean_tree(raw: Any, topic: str, resolve: Callable[[Any], str | None], repairs: list[Repair]) -> dict:
    """A tree of item keys with one root, items only in leaves, no unknown or repeated items, no empty nodes."""
    if isinstance(raw, TopicNode):
        raw = raw.model_dump()
    if isinstance(raw, list):
        repairs.append(Repair("wrapped_root", f"{len(raw)} top-level nodes put under a root named after the topic"))
        raw = {"name": topic, "subtopics": raw}
    if not isinstance(raw, dict):
        return {"name": topic, "subtopics": []}
    seen: set[str] = set()

    def clean(node: dict) -> dict | None:
        name = str(node.get("name") or "").strip() or "Untitled"
        keys = []
        papers = node.get("papers")
        entries = papers if isinstance(papers, list) else []
        for entry in entries:
            key = resolve(entry)
            if key is None:
                repairs.append(Repair("dropped_unknown", f"{str(entry)[:120]!r} in {name!r} matches no input"))
            elif key in seen:
                repairs.append(Repair("dropped_duplicate", f"{key} repeated in {name!r}; kept its first place"))
            else:
                seen.add(key)
                keys.append(key)
        subtopics = node.get("subtopics")
        subs = subtopics if isinstance(subtopics, list) else []
        children = [c for c in (clean(s) for s in subs if isinstance(s, dict)) if c is not None]
        if keys and children:
            repairs.append(Repair("split_mixed", f"{len(keys)} items of {name!r} moved into a new leaf of that name"))
            children.insert(0, {"name": name, "papers": keys})
            keys = []
        if not keys and not children:
            repairs.append(Repair("removed_empty", f"empty node {name!r} removed"))
            return None
        return {"name": name, "subtopics": children} if children else {"name": name, "papers": keys}

    root = clean(raw)
    return root if root is not None else {"name": str(raw.get("name") or topic), "subtopics": []}


def leaves_of(tree: dict, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict]]:
    """(root-to-leaf labels, leaf node) of every leaf, in preorder."""
    path = prefix + (tree["name"],)
    if "papers" in tree:
        return [(path, tree)]
    return [x for child in tree.get("subtopics", []) for x in leaves_of(child, path)]


def keys_of(tree: dict) -> list[str]:
    return [k for _, leaf in leaves_of(tree) for k in leaf["papers"]]


def place_by_similarity(
    tree: dict, missing: list[str], texts: dict[str, str], embed: Embed, repairs: list[Repair], what: str = "paper"
) -> None:
    """Appends each missing key to the leaf whose label is most similar to the key's text."""
    leaves = leaves_of(tree)
    if not missing or not leaves:
        return
    vectors = embed([texts[k] for k in missing] + [PATH_SEP.join(p[1:]) or p[0] for p, _ in leaves])
    scores = vectors[: len(missing)] @ vectors[len(missing) :].T
    for key, row in zip(missing, scores):
        path, leaf = leaves[int(np.argmax(row))]
        leaf["papers"].append(key)
        repairs.append(Repair("placed_by_similarity", f"{what} {key} put in {PATH_SEP.join(path)!r}"))


def with_titles(tree: dict, title_of: dict[str, str]) -> dict:
    """The tree with item keys replaced by exact titles (TaxoBench's JSON)."""
    if "papers" in tree:
        return {"name": tree["name"], "papers": [title_of[k] for k in tree["papers"]]}
    return {"name": tree["name"], "subtopics": [with_titles(c, title_of) for c in tree["subtopics"]]}


def group_papers(cards: list[PaperCard], max_size: int, embed: Embed) -> list[list[PaperCard]]:
    """Splits cards into ceil(n / max_size) near-equal groups of similar papers (dendrogram leaf order)."""
    from scipy.cluster.hierarchy import leaves_list, linkage

    n_groups = math.ceil(len(cards) / max_size)
    vectors = embed([f"{c.title}. {c.abstract}" for c in cards]).astype(np.float64)
    order = leaves_list(linkage(vectors, method="ward"))
    bounds = np.linspace(0, len(cards), n_groups + 1).round().astype(int)
    return [[cards[i] for i in order[a:b]] for a, b in zip(bounds, bounds[1:])]


# ---------------------------------------------------------------- the program


@dataclass
class _Run:
    """One LM build's scheduler, events and repairs, kept off the module so one builder serves concurrent runs."""

    sched: Scheduler
    events: EventLog
    repairs: list[Repair]
    stopped: str = ""

    def budget(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = reason
            self.events.emit("budget", message=f"stopping: {reason}")


def _clustered(topic: str, cards: list[PaperCard]) -> dict:
    """`cards` organised by clustering (no LM), keyed by paper id as the LM trees are."""
    return clean_tree(cluster_taxonomy(topic, cards), topic, _resolver({c.paper_id: c.title for c in cards}), [])


class TaxonomyBuilder(dspy.Module):
    """Builds a TaxoBench taxonomy for a topic from a set of papers.

    Args:
        max_papers_per_call: The most papers shown in one prompt; larger sets are grouped and merged.
        target_depth: Levels below the root to ask for (None: the LM chooses).
        target_leaves: Leaf topics to ask for (None: the LM chooses).
        abstract_chars: Characters of each abstract shown to the LM.
        offline: Build with hierarchical clustering (`deepresearch.programs.taxonomy.offline`), no LM.
        embed: texts -> L2-normalised vectors, for grouping and similarity repairs (default all-MiniLM-L6-v2).
        max_lm_calls, deadline_s, lm_timeout_s, max_concurrency: The run limits of the shared scheduler
            (deepresearch.programs.runtime.scheduler): past the call budget or the deadline, what the LM has not organised
            is clustered (a `budget` or `deadline` repair), so a tree always comes out.
        on_event: Called with the run's progress events (run_start, stage_end per group, budget, run_end).

    Example:
        >>> builder = TaxonomyBuilder()                                                   # doctest: +SKIP
        >>> out = builder(topic="Personalized alignment of LLMs", papers=[{"title": ..., "abs": ...}])  # doctest: +SKIP
        >>> out.tree, out.repairs                                                         # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_papers_per_call: int = 60,
        target_depth: int | None = None,
        target_leaves: int | None = None,
        abstract_chars: int = 1200,
        offline: bool = False,
        embed: Embed | None = None,
        max_lm_calls: int | None = None,
        deadline_s: float | None = None,
        lm_timeout_s: float | None = 120.0,
        max_concurrency: int = 8,
        on_event: EventHandler | None = None,
    ):
        super().__init__()
        if max_papers_per_call < 2:
            raise ValueError(f"max_papers_per_call must be >= 2, got {max_papers_per_call}")
        self.build_taxonomy = dspy.Predict(BuildTaxonomy)
        self.merge_taxonomies = dspy.Predict(MergeTaxonomies)
        self.place_papers = dspy.Predict(PlacePapers)
        self.repair_json = dspy.Predict(RepairJSON)
        self.max_papers_per_call = max_papers_per_call
        self.target_depth, self.target_leaves = target_depth, target_leaves
        self.abstract_chars = abstract_chars
        self.is_offline = offline
        self.embed = embed or encode
        self.limits = ResearchConfig(
            max_concurrency=max_concurrency,
            lm_concurrency=max_concurrency,
            max_lm_calls=max_lm_calls,
            deadline_s=deadline_s,
            lm_timeout_s=lm_timeout_s,
        )
        self.on_event = on_event

    @classmethod
    def from_config(cls, config: ResearchConfig, retriever: Any = None) -> TaxonomyBuilder:
        """The taxonomy stage of a research run: under the run's request timeout and LM concurrency."""
        return cls(
            lm_timeout_s=config.lm_timeout_s, max_concurrency=lm_concurrency(dspy.settings.lm, config.lm_concurrency)
        )

    def forward(self, topic: str, papers: Sequence[Any] | None = None) -> dspy.Prediction:
        return run_sync(self.aforward(topic=topic, papers=papers))

    async def aforward(
        self, topic: str, papers: Sequence[Any] | None = None, *, meter: UsageMeter | None = None
    ) -> dspy.Prediction:
        """Returns a Prediction with `tree` (TaxoBench JSON, exact input titles), `by_id` (the same tree
        with paper ids in its leaves), `papers` (the cards organised), `retrieved_papers` (their titles),
        `repairs` (list[Repair]) and `mode` ("bottom-up").

        `meter` counts the builder's LM calls into a caller's meter (a research run's); by default
        they are counted apart.
        """
        if not isinstance(topic, str) or not topic.strip():
            raise TaxonomyError("topic is empty; pass the survey topic as a non-empty string")
        if papers is None:
            raise TaxonomyError(
                "no papers given; pass the papers to organise, or run the research program "
                "with taxonomy=True (`deepresearch run ... --taxonomy`) to organise what it finds"
            )
        topic = topic.strip()
        cards = paper_cards(papers, self.abstract_chars)
        repairs: list[Repair] = []
        if not cards:
            by_id = {"name": topic, "subtopics": []}
        elif self.is_offline:
            by_id = _clustered(topic, cards)
        else:
            by_id = await self._run(topic, cards, repairs, meter or UsageMeter())
        tree = with_titles(by_id, {c.paper_id: c.title for c in cards})
        return ResultPrediction(
            tree=tree,
            by_id=by_id,
            papers=cards,
            retrieved_papers=[c.title for c in cards],
            repairs=repairs,
            mode="bottom-up",
        )

    async def _run(self, topic: str, cards: list[PaperCard], repairs: list[Repair], meter: UsageMeter) -> dict:
        """Organises `cards` with the LM on the run's scheduler; the tree keys papers by id."""
        events = EventLog(self.on_event)
        with metered(meter):
            run = _Run(sched=Scheduler(self.limits, meter), events=events, repairs=repairs)
            events.emit("run_start", counts={"papers": len(cards)})
            left = run.sched.remaining()
            try:
                work = self._organise(topic, cards, run)
                keyed = await (asyncio.wait_for(work, left) if left is not None else work)
            except Exception as err:
                if isinstance(err, asyncio.TimeoutError) and left is not None and not run.sched.remaining():
                    # the deadline: every paper still gets a place, by clustering
                    events.emit("budget", message=f"deadline of {self.limits.deadline_s:g}s reached")
                    repairs.append(Repair("deadline", f"deadline reached; {len(cards)} papers organised by clustering"))
                    keyed = _clustered(topic, cards)
                else:  # an LM call that timed out or failed past its retries: still a tree
                    keyed = self._failed(topic, cards, err, run)
            events.emit("run_end", message="done", counts={"lm_calls": meter.total_calls, "repairs": len(repairs)})
        return keyed

    @staticmethod
    def _failed(topic: str, cards: list[PaperCard], err: BaseException, run: _Run) -> dict:
        """The tree when the LM work failed: every paper organised by clustering, the failure recorded."""
        what = redact(f"{type(err).__name__}: {err}".strip().rstrip(":"))
        logger.warning("taxonomy LM work failed (%s); organising %d papers by clustering", what, len(cards))
        run.events.emit("failure", stage=SPEC.name, message=what)
        run.repairs.append(Repair("lm_failed", f"{what}; {len(cards)} papers organised by clustering"))
        return _clustered(topic, cards)

    async def _call(self, run: _Run, predictor: dspy.Module, **inputs: Any) -> dspy.Prediction:
        """One LM call of the builder under the run's caps, timeout, retries and call budget."""
        return await run.sched.guard(predictor, lambda: call_predictor(SPEC, predictor, **inputs), reserve=SPEC.reserve)

    async def _organise(self, topic: str, cards: list[PaperCard], run: _Run) -> dict:
        repairs = run.repairs
        if len(cards) <= self.max_papers_per_call:
            return await self._build_group(topic, cards, run)
        groups = group_papers(cards, self.max_papers_per_call, self.embed)
        repairs.append(Repair("grouped", f"{len(cards)} papers organised in {len(groups)} groups, then merged"))
        partials = await asyncio.gather(*[self._build_group(topic, g, run) for g in groups])
        members: dict[str, list[str]] = {}
        categories: list[CategoryCard] = []
        title_of = {c.paper_id: c.title for c in cards}
        for partial in partials:
            for path, leaf in leaves_of(partial):
                cid = f"C{len(categories) + 1}"
                members[cid] = leaf["papers"]
                categories.append(
                    CategoryCard(
                        category_id=cid,
                        path=list(path[1:]) or [path[0]],
                        examples=[title_of[k] for k in leaf["papers"][:3]],
                    )
                )
        label = {c.category_id: PATH_SEP.join(c.path) for c in categories}
        try:
            raw = (await self._call(run, self.merge_taxonomies, topic=topic, categories=categories)).taxonomy
        except dspy.AdapterParseError as err:
            raw = await self._recover(err.lm_response, run)
        except BudgetExceeded as err:
            run.budget(str(err))
            raw = None
        skeleton = clean_tree(raw, topic, _resolver(label), repairs)
        missing = [c for c in label if c not in set(keys_of(skeleton))]
        if missing and not leaves_of(skeleton):
            repairs.append(Repair("merge_fallback", "the merged tree had no leaves; each group kept as a subtree"))
            return {"name": topic, "subtopics": list(partials)}
        place_by_similarity(skeleton, missing, label, self.embed, repairs, what="category")
        for _, leaf in leaves_of(skeleton):
            leaf["papers"] = [k for cid in leaf["papers"] for k in members[cid]]
        return skeleton

    async def _build_group(self, topic: str, cards: list[PaperCard], run: _Run) -> dict:
        repairs = run.repairs
        try:
            out = await self._call(
                run,
                self.build_taxonomy,
                topic=topic,
                papers=cards,
                target_depth=self.target_depth,
                target_leaves=self.target_leaves,
            )
            raw = out.taxonomy
        except dspy.AdapterParseError as err:
            raw = await self._recover(err.lm_response, run)
        except BudgetExceeded as err:  # no LM call left: this group is clustered
            run.budget(str(err))
            repairs.append(Repair("budget", f"LM call budget spent; {len(cards)} papers organised by clustering"))
            return _clustered(topic, cards)
        title_of = {c.paper_id: c.title for c in cards}
        tree = clean_tree(raw, topic, _resolver(title_of), repairs)
        placed = set(keys_of(tree))
        missing = [c for c in cards if c.paper_id not in placed]
        if missing and not leaves_of(tree):
            repairs.append(Repair("clustered", f"no usable leaves; {len(missing)} papers organised by clustering"))
            return _clustered(topic, missing)
        if missing:
            missing = await self._place_with_lm(topic, tree, missing, run)
        place_by_similarity(tree, [c.paper_id for c in missing], title_of, self.embed, repairs)
        run.events.emit("stage_end", stage=SPEC.name, counts={"papers": len(cards), "left_out": len(missing)})
        return tree

    async def _place_with_lm(self, topic: str, tree: dict, missing: list[PaperCard], run: _Run) -> list[PaperCard]:
        """Asks the LM where the left-out papers go; returns those it did not place in a real leaf."""
        leaves = {PATH_SEP.join(p): leaf for p, leaf in leaves_of(tree)}
        try:
            out = await self._call(run, self.place_papers, topic=topic, leaves=list(leaves), papers=missing)
            placements = out.placements
        except Exception as err:  # a budget stop included: the similarity fallback still places every paper
            logger.warning(
                "placing %d left-out papers failed (%s); using label similarity", len(missing), type(err).__name__
            )
            return missing
        by_id = {c.paper_id: c for c in missing}
        for p in placements:
            leaf = leaves.get(p.leaf.strip())
            if leaf is not None and p.paper_id in by_id:
                leaf["papers"].append(p.paper_id)
                run.repairs.append(Repair("placed_by_lm", f"paper {p.paper_id} put in {p.leaf.strip()!r}"))
                del by_id[p.paper_id]
        return list(by_id.values())

    async def _recover(self, text: str | None, run: _Run) -> Any:
        """Parses an answer the adapter could not: JSON extraction, then one RepairJSON call."""
        repairs = run.repairs
        parsed = parse_tree_text(text or "")
        if parsed is not None:
            repairs.append(Repair("json_parsed", "answer parsed from raw text"))
            return parsed
        try:
            fixed = (await self._call(run, self.repair_json, text=text or "")).json_text
            parsed = parse_tree_text(fixed)
        except Exception as err:
            logger.warning("JSON repair call failed: %s", type(err).__name__)
        if parsed is not None:
            repairs.append(Repair("json_repaired", "answer fixed by the JSON repair call"))
            return parsed
        repairs.append(Repair("fix_failed", "answer could not be parsed or repaired"))
        return None


class OfflineTaxonomyBuilder(TaxonomyBuilder):
    """The taxonomy stage's offline twin: hierarchical clustering of the papers' embeddings, no LM."""

    def __init__(self, **options: Any):
        super().__init__(**{**options, "offline": True})


SPEC = StageSpec(
    "taxonomy",
    "maps the relevant papers into a taxonomy beside the report",
    (BuildTaxonomy, MergeTaxonomies, PlacePapers, RepairJSON),
    TaxonomyBuilder,
    OfflineTaxonomyBuilder,
    research_attr="taxonomist",
    kind="output",
    unscored="the taxonomy is built beside the report",
    max_output_tokens=4096,
    reserve=0,
)
