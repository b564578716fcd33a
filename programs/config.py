"""Run configuration and named presets. Holds no secrets, so it is always safe to print or save.

`ResearchConfig` is one frozen dataclass: every setting under its own name (`config.depth`,
`config.max_lm_calls`), beside each strategy's own settings (`hero`, `parallel`, `gather`).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from deepresearch.programs.lm.defaults import STRUCTURED_MODES

logger = logging.getLogger(__name__)

BREADTH_RULES = ("ceil_half", "floor_half", "fixed")
STRATEGIES = ("eco", "hero", "parallel", "gather")
SCHEDULES = ("async", "level", "gptr", "sequential")
SELECTIONS = ("submodular", "random", "first_k")
SPECULATION = ("after_initial_research", "immediate", "none")
YIELD_MODES = ("share_of_batch", "relative_to_total")
VERIFY_POLICIES = ("rewrite", "remove", "mark", "off")
SKIP_SEEN = ("node", "lineage", "off")


def check_minimum(settings: Any, names: Iterable[str], minimum: float, prefix: str = "") -> None:
    """Raises ValueError naming the first of the fields `names` of `settings` that is below `minimum`."""
    for name in names:
        value = getattr(settings, name)
        if value < minimum:
            raise ValueError(f"{prefix}{name} must be >= {minimum}, got {value}")


@dataclass(frozen=True)
class HeroConfig:
    """Settings of the `hero` strategy.

    Args:
        turns: Turns T; from the second on, the planner sees earlier queries and summaries.
        tasks_per_turn: Tasks k kept per turn (the tree's `breadth` is not used by this strategy).
        multiplier: Candidates m·k are planned and cut to k by `selection`.
        enrichments: Enrichment tasks k' per task (0 turns enrichment off).
        deep_depth: Passages examined for a main task.
        shallow_depth: Passages examined for an enrichment task.
        batch_size: Passages given to the extractor at once.
        min_yield: A batch is low-yield below this share (see `yield_mode`).
        low_yield_patience: Consecutive low-yield batches that stop extraction (2 = one extra tolerated).
        yield_mode: `share_of_batch` (passages citing a new source / batch size) or `relative_to_total`.
        alpha: Facility-location α for the main selection (anchor: the question).
        enrich_alpha: α' for the enrichment selection (anchor: the task's query).
        selection: `submodular`, `random` (seeded ablation) or `first_k`.
        seed: Seed of the `random` selection.
    """

    turns: int = 3
    tasks_per_turn: int = 3
    multiplier: int = 3
    enrichments: int = 2
    deep_depth: int = 24
    shallow_depth: int = 8
    batch_size: int = 8
    min_yield: float = 0.10
    low_yield_patience: int = 2
    yield_mode: str = "share_of_batch"
    alpha: float = 0.6
    enrich_alpha: float = 0.65
    selection: str = "submodular"
    seed: int = 0

    def __post_init__(self):
        check_minimum(
            self,
            (
                "turns",
                "tasks_per_turn",
                "multiplier",
                "deep_depth",
                "shallow_depth",
                "batch_size",
                "low_yield_patience",
            ),
            1,
            prefix="hero.",
        )
        check_minimum(self, ("enrichments",), 0, prefix="hero.")
        if self.selection not in SELECTIONS:
            raise ValueError(f"unknown hero.selection {self.selection!r}; choose one of: {', '.join(SELECTIONS)}")
        if self.yield_mode not in YIELD_MODES:
            raise ValueError(f"unknown hero.yield_mode {self.yield_mode!r}; choose one of: {', '.join(YIELD_MODES)}")
        for name in ("alpha", "enrich_alpha", "min_yield"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"hero.{name} must be in [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class ParallelConfig:
    """Settings of the `parallel` strategy. Each switch can be turned off for ablations.

    Args:
        adaptive_breadth: A breadth policy picks 1..max_breadth subqueries per planning node; off: `breadth`.
        max_breadth: b_max.
        adaptive_depth: A depth policy decides after each research node whether to go deeper; off: always,
            down to the tree's `depth`.
        orchestrate: Score running nodes every `interval_s` and prune subtrees (goal met, or low value).
        speculation: `after_initial_research` (children planned with their parent, started after its
            research), `immediate` (started as soon as planned) or `none` (planned after the depth decision).
        interval_s: Seconds between two evaluations of a running node.
        orchestration_share: The monitor asks for a score only while its prompt tokens, with the next request's,
            stay within this share of the run's prompt tokens so far (the cost of steering kept in proportion to
            the research it steers, whatever the model's speed and the tree's size); None: at every tick.
        satisfied_goal, satisfied_quality: A node scoring at least both is stopped with its subtree (`satisfied`).
        prune_quality: A node scoring below this quality twice in a row is stopped with its subtree (`low_value`).
        constraints: The user's constraints on sources, shown to every policy.
    """

    adaptive_breadth: bool = True
    max_breadth: int = 6
    adaptive_depth: bool = True
    orchestrate: bool = True
    speculation: str = "after_initial_research"
    interval_s: float = 8.0
    orchestration_share: float | None = 0.1
    satisfied_goal: float = 0.8
    satisfied_quality: float = 0.7
    prune_quality: float = 0.3
    constraints: str = ""

    def __post_init__(self):
        if self.max_breadth < 1:
            raise ValueError(f"parallel.max_breadth must be >= 1, got {self.max_breadth}")
        if self.speculation not in SPECULATION:
            raise ValueError(
                f"unknown parallel.speculation {self.speculation!r}; choose one of: {', '.join(SPECULATION)}"
            )
        if self.interval_s <= 0:
            raise ValueError(f"parallel.interval_s must be > 0, got {self.interval_s}")
        if self.orchestration_share is not None and not 0 < self.orchestration_share <= 1:
            raise ValueError(
                f"parallel.orchestration_share must be in (0, 1], or None for no limit; got {self.orchestration_share}"
            )


@dataclass(frozen=True)
class GatherLoopConfig:
    """Settings of ScholarGym's gathering loop, for the `gather` strategy and the standalone
    `Gatherer` (whose `GatherConfig` adds the run limits a research run takes from `ResearchConfig`).

    Args:
        iterations: Rounds of plan -> retrieve -> assess (T; 5 in the paper).
        max_actions: Valid actions kept per plan.
        max_pages: Pages one subquery may fetch, its first search included.
        max_k: Largest page size; planned `target_k` values are clamped to [1, max_k] (in a research run
            also to `hits_per_query`).
        ranking_depth: Ids of the top positions recorded per search, for Avg.Distance (0 records none).
        memory_chars: Longest checklist and memory carried to the next round (the bounded experience buffer).
        preview_chars: Characters of each abstract shown at the first look.
        second_look: Re-judge candidates labelled uncertain on their full text.
    """

    iterations: int = 5
    max_actions: int = 6
    max_pages: int = 3
    max_k: int = 10
    ranking_depth: int = 0
    memory_chars: int = 1500
    preview_chars: int = 1000
    second_look: bool = True

    def __post_init__(self):
        check_minimum(
            self,
            ("iterations", "max_actions", "max_pages", "max_k", "memory_chars", "preview_chars"),
            1,
            prefix="gather.",
        )
        check_minimum(self, ("ranking_depth",), 0, prefix="gather.")


# The tables older runs and settings files grouped the settings in (`{"tree": {"depth": 2}}`, `[run.tree]`);
# still read, each setting under its own name, with one deprecation line
OLD_GROUPS = ("tree", "retrieval", "budgets", "lm", "outputs")
# Each strategy's own settings, kept whole: read as `config.hero.turns`
STRATEGY_SETTINGS: dict[str, type] = {"hero": HeroConfig, "parallel": ParallelConfig, "gather": GatherLoopConfig}


def check_names(names: Iterable[str], kind: type, prefix: str = "") -> None:
    """Raises TypeError for the first of `names` that is not a field of the dataclass `kind`, naming the closest."""
    known = [f.name for f in fields(kind)]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"settings are: {', '.join(known)}"
            raise TypeError(f"unknown {kind.__name__} setting {prefix + name!r}; {hint}")


@dataclass(frozen=True)
class ResearchConfig:
    """How large the research tree grows, how each node works, how it is scheduled and what it may spend.

    Every setting has one name, `ResearchConfig(depth=2, max_lm_calls=50)`, and `dataclasses.replace(config,
    depth=3)` changes it; each strategy's own settings are a table of their own (`config.hero.turns`). The
    arguments below go by concern: the tree (`depth` to `schedule`), what a node reads (`hits_per_query` to
    `full_text_cache`), what the run may spend (`max_lm_calls` to `retry_after_cap_s`), how replies are asked
    for (`structured`, `parse_retries`) and what is written (`answer` to `verify_chars`).

    Args:
        depth: Levels of search along any root-to-leaf path (1 = only the planned tasks); the maximum
            depth for the `parallel` strategy.
        breadth: Tasks planned at the root; deeper levels get next_breadth() of their parent's.
        breadth_rule: `ceil_half` (b -> ceil(b/2), never 0), `floor_half` (b // 2;
            a level whose breadth reaches 0 is not run) or `fixed` (b at every level).
        max_learnings: Learnings kept per node.
        strategy: `eco` (the depth x breadth recursion), `hero` (turns of isolated pipelines),
            `parallel` (an adaptive tree) or `gather` (ScholarGym's gathering loop, then one research
            node per subquery).
        schedule: `async` (a node starts as soon as its parent is done), or a baseline schedule:
            `level` (a level starts when the whole level above is done), `gptr` (GPT-Researcher's deep
            research: the children of one node run two at a time, wait for each other, then recurse one
            after another; eco only) or `sequential` (one node at a time, depth first).
        hits_per_query: Documents retrieved per search.
        max_passages: Passages (relevant hits) given to the extractor per node.
        keep_uncertain: Pass papers judged `uncertain` on to extraction.
        passage_chars: Characters of each document shown to the LM.
        assess_sentences: Sentences of each passage the assessor sees besides the title: those sharing the
            most terms with the task, in their order (0: the whole passage, as the extractor sees it). Only
            the LM assessor; the offline rule reads whole passages.
        extract_sentences: Sentences of each passage the extractor may quote: those sharing the most terms
            with the task, in their order (0: every one). Only the LM extractor; the offline one reads all.
        skip_seen: Which passages the extractor is not sent again: `node` (one already sent for this node,
            by id or by identical text: a paper's text once per node), `lineage` (nor one sent for an
            ancestor on the same line of research, whose findings already hold it: a `hero` enrichment does
            not re-read its pipeline's papers, an `eco` child its parent's; fewer tokens, but children and
            enrichments then find only new papers, and a resumed run may re-send what a restored ancestor
            read), or `off`. The LM extractor only.
        full_text: Where a hit has an open-access PDF link (`metadata["pdf_url"]`, given by the search
            engines), fetch the PDF (cached on disk), split it into passages and give the extractor the
            `full_text_passages` of them that best match the node's query instead of the abstract; a
            failed fetch keeps the abstract (one warning line). The `gather` strategy still selects whole
            papers; its second look at an uncertain paper and its extraction read the passages.
        full_text_passages: Passages of one paper given in its place with `full_text`.
        full_text_cache: Folder of fetched PDFs (None: ~/.cache/dspy-deepresearch/fulltext).
        max_lm_calls: LM calls the run may make, the writer's included (None: no cap).
        max_tokens: Tokens (prompt + completion) after which research stops (None: no cap).
        deadline_s: Wall-clock seconds for the research; on expiry running work is cancelled and the
            report is written from what exists (the writer runs after the deadline).
        max_failures: Failed nodes tolerated before the run stops and writes what it has.
        max_concurrency: Nodes doing their own work at the same time, across the whole tree.
        lm_concurrency: LM calls in flight at once, across the run (None: the parallel slots the LM's
            server reports, as llama-server does, shared with this user's other runs; else 16). More than
            the server's slots would only queue there, where the wait counts against `lm_timeout_s`.
        search_concurrency: Searches in flight at once, across the run.
        rate_limits: (provider, requests per second) pairs, e.g. (("openai", 5.0),).
        lm_timeout_s: Seconds before an LM call is abandoned and retried (None: no limit).
        search_timeout_s: Seconds before a search is abandoned and retried (None: no limit).
        lm_retries: Extra attempts of an LM call after a transient error (rate limit, timeout, server or
            transport error).
        search_retries: Extra attempts of a search that timed out or lost its connection.
        backoff_s: First backoff; doubles with each attempt.
        retry_after_cap_s: Longest wait a server's Retry-After may impose before a retry.
        structured: How replies are formatted when no adapter is configured: `auto` (the default, as on
            the command line: the schema for an api_base server, native structured output where the model
            supports it, else text), `schema` (each predictor's output schema sent as response_format),
            `off` (DSPy's text format), or None (leave DSPy's default).
        parse_retries: Extra attempts of an LM call whose reply did not parse into the stage's fields;
            each draws a new sample (cache bypassed; a temperature-0 LM is sampled at 0.7), since asking
            a deterministic model the same prompt again returns the same unparseable reply.
        answer: Also write a short answer (a few cited sentences) from the same findings.
        taxonomy: Also organise the papers the run judged relevant into a TaxoBench tree
            and add it to the report as a map of the literature.
        verify: What the verify stage does with a sentence of the draft that its cited passages do not
            fully support (or a factual sentence citing nothing that no passage supports): `rewrite` it to
            what the passages state (the default: the reader gets only checked text and keeps the supported
            part of a half-right sentence; removed when nothing is supported), `remove` it, `mark` it
            "(unverified)" and keep it, or `off` (no check).
        verify_batch: Sentences judged per LM call of the verify stage.
        verify_chars: The most characters of sentences and passages one verify call sends (about 6,000
            tokens, within an 8K context with the instructions): a runaway draft is judged in more, smaller
            calls; a call the server still finds too long is split in two.
        verify_sentences: Sentences of each cited passage the LM judge reads with a claim: those sharing
            the most terms with the claim, in their order (0: the whole passage). The lexical rule that
            overrules an unfounded verdict, and the offline judge, read whole passages.
        hero: Settings of the `hero` strategy.
        parallel: Settings of the `parallel` strategy.
        gather: Settings of the `gather` strategy's loop.

    Raises:
        ValueError: for a value out of range, naming the field.
    """

    # The tree: how it grows and is scheduled
    depth: int = 2
    breadth: int = 3
    breadth_rule: str = "ceil_half"
    max_learnings: int = 5
    strategy: str = "eco"
    schedule: str = "async"
    # Retrieval: what each node reads
    hits_per_query: int = 10
    max_passages: int = 8
    keep_uncertain: bool = True
    passage_chars: int = 2000
    assess_sentences: int = 3
    extract_sentences: int = 4
    skip_seen: str = "node"
    full_text: bool = False
    full_text_passages: int = 3
    full_text_cache: str | None = None
    # Budgets: what the run may spend, how much of it at once, and how long it waits
    max_lm_calls: int | None = None
    max_tokens: int | None = None
    deadline_s: float | None = None
    max_failures: int = 5
    max_concurrency: int = 8
    lm_concurrency: int | None = None
    search_concurrency: int = 8
    rate_limits: tuple[tuple[str, float], ...] = ()
    lm_timeout_s: float | None = 120.0
    search_timeout_s: float | None = 60.0
    lm_retries: int = 2
    search_retries: int = 2
    backoff_s: float = 1.0
    retry_after_cap_s: float = 60.0
    # LM: how replies are asked for
    structured: str | None = "auto"
    parse_retries: int = 1
    # Outputs: what is written besides the report, and how the report is checked
    answer: bool = False
    taxonomy: bool = False
    verify: str = "rewrite"
    verify_batch: int = 6
    verify_chars: int = 24000
    verify_sentences: int = 3
    # Each strategy's own settings
    hero: HeroConfig = field(default_factory=HeroConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    gather: GatherLoopConfig = field(default_factory=GatherLoopConfig)

    def __post_init__(self):
        if self.depth < 1 or self.breadth < 1:
            raise ValueError(f"depth and breadth must be >= 1, got depth={self.depth}, breadth={self.breadth}")
        for name, what, choices in (
            ("breadth_rule", "breadth_rule", BREADTH_RULES),
            ("strategy", "strategy", STRATEGIES),
            ("schedule", "schedule", SCHEDULES),
            ("skip_seen", "skip_seen", SKIP_SEEN),
            ("structured", "structured mode", (None, *STRUCTURED_MODES)),
            ("verify", "verify policy", VERIFY_POLICIES),
        ):
            if getattr(self, name) not in choices:
                shown = ", ".join(c for c in choices if c is not None)
                raise ValueError(f"unknown {what} {getattr(self, name)!r}; choose one of: {shown}")
        if self.schedule == "gptr" and self.strategy != "eco":
            raise ValueError(
                f"schedule 'gptr' models the eco recursion; use it with strategy 'eco', not {self.strategy!r}"
            )
        check_minimum(self, ("max_learnings", "hits_per_query", "max_passages", "passage_chars", "verify_batch"), 1)
        check_minimum(self, ("full_text_passages", "max_concurrency", "search_concurrency"), 1)
        check_minimum(
            self,
            (
                "assess_sentences",
                "extract_sentences",
                "verify_sentences",
                "max_failures",
                "lm_retries",
                "search_retries",
                "parse_retries",
            ),
            0,
        )
        check_minimum(self, ("backoff_s", "retry_after_cap_s"), 0)
        check_minimum(self, ("verify_chars",), 1000)
        for name in ("deadline_s", "max_lm_calls", "max_tokens", "lm_timeout_s", "search_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:  # `not >` so that nan is refused too
                raise ValueError(f"{name} must be > 0 or None, got {value}")
        if self.lm_concurrency is not None and not self.lm_concurrency >= 1:
            raise ValueError(f"lm_concurrency must be >= 1 or None, got {self.lm_concurrency}")
        for provider, rps in self.rate_limits:
            if rps <= 0:
                raise ValueError(f"rate limit of {provider!r} must be > 0 requests per second, got {rps}")

    def next_breadth(self, breadth: int) -> int:
        """Breadth of the level below one with `breadth` tasks."""
        if self.breadth_rule == "fixed":
            return breadth
        return math.ceil(breadth / 2) if self.breadth_rule == "ceil_half" else breadth // 2

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data in its saved form (run.json and trace.json's `config`): every
        setting by its name, each strategy's settings as a table of their own."""
        data = dataclasses.asdict(self)
        data["rate_limits"] = [list(pair) for pair in self.rate_limits]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResearchConfig:
        """The config a saved dict describes (`to_dict`'s form, what every run.json and trace.json holds).

        The grouped form older runs saved (`{"tree": {"depth": 2}, ...}`) still loads, with one deprecation
        line naming the settings to write at the top level.

        Raises:
            TypeError: for an unknown name, naming the closest setting.
        """
        settings = dict(data)
        old = [name for name in OLD_GROUPS if isinstance(settings.get(name), Mapping)]
        if old:
            moved = {key: value for name in old for key, value in settings.pop(name).items()}
            logger.warning(
                "ResearchConfig's grouped settings (%s) are deprecated; write %s at the top level",
                ", ".join(old),
                ", ".join(moved),
            )
            settings = moved | settings
        check_names(settings, cls)
        for name, kind in STRATEGY_SETTINGS.items():
            if isinstance(settings.get(name), Mapping):
                check_names(settings[name], kind, prefix=f"{name}.")
                settings[name] = kind(**settings[name])
        if "rate_limits" in settings:  # JSON lists back to the tuple pairs the config holds
            settings["rate_limits"] = tuple((str(provider), float(rps)) for provider, rps in settings["rate_limits"])
        return cls(**settings)


PRESETS: dict[str, ResearchConfig] = {
    "quick": ResearchConfig(depth=1, breadth=2),
    "standard": ResearchConfig(),
    "deep": ResearchConfig(depth=4, breadth=4),
    # DeepResearch-Eco's reference setup: its command line's breadth of 4 at depth 2 (`standard` runs the same
    # recursion at the paper's breadth of 3)
    "eco": ResearchConfig(strategy="eco", depth=2, breadth=4),
    # HERO's settings for DeepResearchGym: T=3, k=3, k'=2, m=3, depths 24/8, 76 LM calls at most
    "hero": ResearchConfig(strategy="hero", depth=2, breadth=3, max_lm_calls=76),
    # ParallelResearch's setup: max depth 10, breadth 4 (adaptive up to 6), a 10-minute budget
    "parallel": ResearchConfig(
        strategy="parallel",
        depth=10,
        breadth=4,
        breadth_rule="fixed",
        max_concurrency=16,
        deadline_s=600.0,
    ),
    # ScholarGym's loop: T=5 rounds of 3-6 subqueries, pages of at most 10, then extraction from what was selected;
    # the top 100 ids of every search are kept in the trace, so Avg.Distance is computable from it
    "gather": ResearchConfig(strategy="gather", gather=GatherLoopConfig(ranking_depth=100)),
}


def preset(name: str, **overrides) -> ResearchConfig:
    """A named configuration with some fields replaced.

    A `breadth` given to the `parallel` preset also caps its adaptive breadth (`parallel.max_breadth`),
    unless `parallel` is given too: "breadth 3" then means at most 3 subqueries a
    node, as it does for the other tree presets. Given to `hero` (without `hero`), it is the tasks kept
    per turn (`hero.tasks_per_turn`).

    Raises:
        ValueError: for an unknown preset name (the message lists the known ones).
        TypeError: for an unknown setting, naming the closest one.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    check_names(overrides, ResearchConfig)
    config = dataclasses.replace(PRESETS[name], **overrides)
    if "breadth" in overrides and "parallel" not in overrides:
        config = dataclasses.replace(config, parallel=dataclasses.replace(config.parallel, max_breadth=config.breadth))
    if "breadth" in overrides and "hero" not in overrides and config.strategy == "hero":
        # hero's breadth is the tasks it keeps per turn (k); its tree's `breadth` field is otherwise unused
        config = dataclasses.replace(config, hero=dataclasses.replace(config.hero, tasks_per_turn=config.breadth))
    return config
