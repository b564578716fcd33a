"""What each figure we set beside a paper's matches: the released scoring code checked, and where ours differs.

One table for the report metrics (`deepresearch eval report`, `eval reports`) and the taxonomy metrics
(`eval taxonomy`, `score-taxonomy`); the gathering metrics name theirs in `deepresearch.eval.gather`
(`PROTOCOL_SOURCES`, chosen with --protocol). The runners print these lines under their tables and
write them into their summaries, so no number leaves without the code it is comparable to.
docs/reference/protocols.md is the long form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MetricProtocol:
    """The released code a metric was checked against, and the verdict.

    Attributes:
        code: Repository, file and commit of the released scorer read for the check.
        status: `matches` (same rule and aggregation; the scale may differ, as `note` says), `differs`
            (the rule differs; `note` says how), or `ours` (no released counterpart).
        note: The difference, or what matches, in one or two sentences.
    """

    code: str
    status: str
    note: str


# the gathering scorer's choices (`deepresearch.eval.gather`; `eval gather --protocol/--distance/--failed`)
PROTOCOLS = ("official", "spec")
DISTANCE_VARIANTS = ("per_iteration", "cumulative")
FAILED_POLICIES = ("excluded", "included")
DRG = "cxcscmu/deepresearch_benchmarking@d5fa708b"
SQA = "AkariAsai/ScholarQABench@95e6fc5 scripts/citation_correctness_eval.py compute_autoais"
ECO = "sciknoworg/deep-research@64293cd scripts/paper_research_analyzer.py"
TAXO_EARLY = "KongLongGeFDU/TaxoBench@4632472 metric/*.py (the scripts behind the paper's tables)"
TAXO_PUBLIC = "KongLongGeFDU/TaxoBench@49a1869 taxobench/ (public scorer v0.2.0, taxobench-score)"

_SQA_DIFF = (
    "the citation rules are the released ones (deepresearch.eval.citations.scholarqa_official_scores: "
    "an uncited sentence inherits the previous sentence's citations, any out-of-range citation makes a "
    "sentence unsupported and uncounted, only the first number of a group such as [1, 2] is read, "
    ">= 50 characters counting the markers, the first 3 citations, the leave-one-out necessity test, "
    "an answer with no sentence left out of the means); what differs: the released scorer judges with "
    "osunlp/attrscore-flan-t5-xl, ours with the lexical rule (word overlap), and it splits the whole "
    "answer with nltk punkt where ours splits the prose of the body (no headings, tables or reference "
    "list) with its own splitter"
)

REPORT_METRICS: dict[str, MetricProtocol] = {
    "n_sources": MetricProtocol(
        f"{ECO} extract_source_count",
        "differs",
        "released: unique strings matching https?://[^\\s)]+ in the whole file; ours adds the corpus document "
        "ids of URL-less reference entries, so our own reports count more; n_url_sources is the released count",
    ),
    "n_url_sources": MetricProtocol(
        f"{ECO} extract_source_count", "matches", "unique https?://[^\\s)]+ strings anywhere in the file"
    ),
    "words": MetricProtocol(
        f"{ECO} extract_metrics (word_count)", "matches", "whitespace tokens of the whole file, source list included"
    ),
    "sources_per_1k_words": MetricProtocol(
        f"{ECO} (information density)",
        "differs",
        "n_sources / (words / 1000): the same formula over our n_sources (URLs plus corpus document ids)",
    ),
    "eco_overall": MetricProtocol(
        f"{ECO} (six heuristic scores)",
        "differs",
        "checked against the paper's formulas only, not line by line against the released analyzer: where the "
        "paper is silent, the vocabularies, regular expressions and counting rules are ours",
    ),
    "n_visited_sources": MetricProtocol("none", "ours", "unique document ids the run retrieved (our addition)"),
    "n_claims": MetricProtocol(
        f"{DRG} eval_citation_recall_async.py",
        "differs",
        "released: claims an LLM extracts from the report; ours: body sentences of >= 50 characters",
    ),
    "citation_recall": MetricProtocol(
        f"{DRG} eval_citation_recall_async.py",
        "differs",
        "released: share of LLM-extracted claims listing >= 1 URL, 0 for a report without URLs, mean x 100; "
        "ours: share of body sentences of >= 50 characters with >= 1 citation marker, a fraction",
    ),
    "citation_precision": MetricProtocol(
        f"{DRG} eval_citation_async.py",
        "differs",
        "released: mean 0/0.5/1 grade of the LLM-extracted cited claims against all their cited pages (crawled, "
        "URLs removed), per report, then the mean x 100; ours: cited body sentences against their first 3 "
        "cited passages from the corpus (none resolvable: 0 without a call), a fraction",
    ),
    "citation_precision_lexical": MetricProtocol(
        "none", "ours", "citation_precision with the lexical grader instead of an LLM judge: word overlap"
    ),
    "kpr": MetricProtocol(
        f"{DRG} eval_kpr_async.py",
        "matches",
        "one judge call per key point with the whole report, Supported share per report, mean over the reports "
        "scored; a fraction (released x 100); a report with no key point scores 0 (released: division error)",
    ),
    "kpc": MetricProtocol(
        f"{DRG} eval_kpr_async.py", "matches", "the Contradicted share, as kpr; a fraction (released x 100)"
    ),
    "scholarqa_cite_precision_lexical": MetricProtocol(SQA, "differs", _SQA_DIFF),
    "scholarqa_cite_recall_lexical": MetricProtocol(SQA, "differs", _SQA_DIFF),
    "scholarqa_cite_f1_lexical": MetricProtocol(
        SQA,
        "differs",
        "2PR/(P+R) per report of the two above; the released code has no F1 (the paper's "
        "dataset F1 is of the macro P and R: deepresearch.eval.citations.dataset_citation_f1)",
    ),
}
_CRITERION = MetricProtocol(
    f"{DRG} eval_quality_async.py",
    "matches",
    "one judge call per criterion, an integer 0-10, mean over reports (tables print x 10); the rubric is in our words",
)

TAXONOMY_METRICS: dict[str, MetricProtocol] = {
    "alignment": MetricProtocol(
        TAXO_EARLY,
        "matches",
        "--profile paper: the early scripts' title matching; --profile public_scorer: the public "
        f"scorer's ({TAXO_PUBLIC}) 0.92 threshold",
    ),
    "recall/precision/f1": MetricProtocol(
        TAXO_EARLY,
        "matches",
        "per-survey P and R, macro means x 100, F1 of the means as the paper's tables; the public scorer "
        "averages per-survey F1 (our f1_mean) and keeps fractions",
    ),
    "ari/hom/comp/v": MetricProtocol(
        TAXO_EARLY,
        "differs",
        "aligned papers only, as the early scripts; the public scorer gives every unretrieved paper one extra "
        "label (our ari_e2e, v_e2e) and skips surveys with a missing or unparsed tree (ours: scored as failed); "
        "the early scripts crashed on unmatched papers and skipped the survey (ours: score and log)",
    ),
    "us_ted/us_nted": MetricProtocol(
        TAXO_EARLY,
        "differs",
        "the paper's unordered Hungarian matching with clipped label cost; the released metric/ted.py is ordered "
        "Zhang-Shasha with unclipped 1 - cos; the public scorer has none",
    ),
    "sem_path": MetricProtocol(
        TAXO_EARLY,
        "matches",
        "MiniLM label similarity, lambda = 1, mean over aligned papers; the public scorer uses a string "
        "similarity fallback unless given the embedder",
    ),
    "nsr/nsp/soft_f1": MetricProtocol(
        TAXO_EARLY, "differs", "similarities clipped at 0 as the paper says; metric/nsr.py and nsp.py do not clip"
    ),
}


def protocol_for(metric: str) -> MetricProtocol | None:
    """The protocol of a report metric (`criterion_*` share one), or None when none is recorded."""
    if metric.startswith("criterion_"):
        return _CRITERION
    return REPORT_METRICS.get(metric)


def protocols_of(metrics: Iterable[str]) -> dict[str, dict[str, str]]:
    """metric -> {code, status, note} for every metric that has a recorded protocol, in the given order."""
    return {m: asdict(p) for m in metrics if (p := protocol_for(m)) is not None}


def protocol_lines(metrics: Iterable[str]) -> list[str]:
    """One line per metric: `metric: status (code): note`."""
    return [f"{m}: {p['status']} ({p['code']}): {p['note']}" for m, p in protocols_of(metrics).items()]
