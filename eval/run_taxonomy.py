"""The runner of `deepresearch eval taxonomy` (deepresearch.cli.eval_taxonomy): build a taxonomy per TaxoBench
survey and score it against the expert tree.

Writes to --out: predictions.jsonl (TaxoBench's scorer format plus the repairs made; one line per survey,
fsynced as the survey finishes), run.json (the settings, checked on resume), and at the end, from every
finished prediction, scores.jsonl (every metric per survey), judgements.jsonl (with --judge-lm) and
summary.json, each written whole; then prints the summary table. Running the same command into the same
--out again (after a kill, say) builds only the surveys without a prediction; --overwrite starts afresh.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy

from deepresearch.eval.protocols import TAXONOMY_METRICS
from deepresearch.eval.run_gather import DAMAGED
from deepresearch.eval.taxobench import HF_DATASET, Prediction, Survey, load_taxobench
from deepresearch.eval.taxonomy import (
    EmbeddingSim,
    SurveyScore,
    exact_sim,
    score_survey,
    summarize,
)
from deepresearch.programs import environment
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.formats.jsonl import JsonlAppender, read_jsonl, write_jsonl_atomic
from deepresearch.programs.lm.session import LMSession, open_lm
from deepresearch.programs.retrieval import open_from_args
from deepresearch.programs.runtime.outputs import atomic_write_text
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.types import Doc

logger = logging.getLogger(__name__)

TABLE = (
    ("R", "recall"),
    ("P", "precision"),
    ("F1", "f1"),
    ("ARI", "ari"),
    ("HOM", "hom"),
    ("COMP", "comp"),
    ("V", "v"),
    ("ARI-e2e", "ari_e2e"),
    ("V-e2e", "v_e2e"),
    ("US-TED", "us_ted"),
    ("US-NTED", "us_nted"),
    ("SEM-PATH", "sem_path"),
)
# what a prediction depends on; a rerun into the same --out must match them (--limit, --sim, --profile and
# --judge-lm may change: they pick the surveys scored and how)
SETTINGS_CHECKED = ("data", "mode", "lm", "max_papers_per_call", "corpus", "depth", "breadth")


def resolve_data(spec: str | None, root: str | None = None) -> str:
    """The TaxoBench data to read: `spec`, else `root`/taxobench_examples (root: $DEEPRESEARCH_DATA on the
    command line) when it exists, else the Hugging Face dataset."""
    if spec:
        return spec
    if root and (Path(root) / "taxobench_examples").exists():
        return str(Path(root) / "taxobench_examples")
    return HF_DATASET


def similarity(name: str):
    return exact_sim if name == "exact" else EmbeddingSim()


def score_all(
    surveys: Sequence[Survey], predictions: dict[int, Prediction], *, profile: str = "paper", sim=None
) -> list[SurveyScore]:
    """Scores every survey; a survey without a prediction is scored as a failed (root-only) tree."""
    scores = []
    for s in surveys:
        pred = predictions.get(s.survey_id)
        if pred is None:
            logger.warning("no prediction for survey %s; scored as a failed tree", s.survey_id)
            pred = Prediction(s.survey_id, "FIX FAILED")
        scores.append(
            score_survey(
                s.gt, pred.tree, pred.retrieved_papers, survey_id=s.survey_id, topic=s.topic, profile=profile, sim=sim
            )
        )
    return scores


def format_table(rows: dict[str, dict[str, float]]) -> str:
    """A plain-text table, one row per system or survey, the paper's columns (×100 except US-TED)."""
    header = ["", *[h for h, _ in TABLE]]
    lines = [header] + [[name, *[f"{row[k]:.2f}" for _, k in TABLE]] for name, row in rows.items()]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in lines)


def judge_all(
    surveys: Sequence[Survey], predictions: dict[int, Prediction], lm, *, cache_dir: Path | None = None
) -> list[dict[str, Any]]:
    """The verdict of the LLM judge `lm` on every survey's tree (a missing prediction is judged as a failed tree).

    Returns one row per survey: `id` and either `scores`, `reasoning`, `average`, or `error` when the
    judge's answer was unusable (logged, and left out of the averages).
    """
    from deepresearch.eval.judges import JudgeCache  # lazy: start-up
    from deepresearch.eval.taxonomy_judge import JudgeAnswerError, TaxonomyJudge  # lazy: start-up

    judge = TaxonomyJudge(lm=lm, cache=JudgeCache(cache_dir) if cache_dir is not None else None)
    rows = []
    for s in surveys:
        pred = predictions.get(s.survey_id)
        try:
            out = judge(topic=s.topic, reference=s.gt, tree=pred.tree if pred is not None else "FIX FAILED")
            rows.append({"id": s.survey_id, **out.judgement.to_dict()})
        except JudgeAnswerError as e:
            logger.warning("survey %s: %s", s.survey_id, e)
            rows.append({"id": s.survey_id, "error": str(e)})
    return rows


def judge_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The judge's per-dimension means and average over the judged surveys, keys prefixed `judge_`."""
    from deepresearch.eval.taxonomy_judge import summarize_judgements  # lazy: start-up

    judged = summarize_judgements([r["scores"] for r in rows if "scores" in r])
    return {f"judge_{k}": v for k, v in judged.items()} | {"judge_failures": sum("error" in r for r in rows)}


def write_results(
    out: Path, scores: list[SurveyScore], judgements: list[dict[str, Any]] | None = None, profile: str = "paper"
) -> dict:
    """Writes scores.jsonl, judgements.jsonl (when judged) and summary.json to `out`, each whole or not at all;
    returns the summary, which names the alignment profile and the released code each metric was checked
    against (`deepresearch.eval.protocols.TAXONOMY_METRICS`)."""
    from dataclasses import asdict

    out.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out / "scores.jsonl", [s.to_dict() for s in scores])
    summary = summarize(scores) | {"profile": profile, "protocols": {k: asdict(v) for k, v in TAXONOMY_METRICS.items()}}
    if judgements is not None:
        write_jsonl_atomic(out / "judgements.jsonl", judgements)
        summary |= judge_summary(judgements)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2))
    return summary


def print_report(scores: list[SurveyScore], summary: dict, out: Path) -> None:
    rows = {f"survey {s.survey_id}": summarize([s]) for s in scores}
    rows["mean"] = summary
    print(format_table(rows))
    print(
        f"{summary['surveys']} surveys · expert papers dropped or unmatched: {summary['dropped']} · "
        f"F1 is the harmonic mean of mean P and R (mean of per-survey F1: {summary['f1_mean']:.2f})"
    )
    if "protocols" in summary:
        print(
            f"title alignment --profile {summary['profile']}; what each metric matches (docs/reference/protocols.md):"
        )
        for name, p in summary["protocols"].items():
            print(f"  {name}: {p['status']} ({p['code']}): {p['note']}")
    if "judge_average" in summary:
        print(
            f"LLM judge (1-5) over {summary['judge_trees']} trees: "
            f"Cov. {summary['judge_semantic_coverage']:.2f} · Org. {summary['judge_sibling_organization']:.2f} · "
            f"Log. {summary['judge_hierarchical_logic']:.2f} · Topo. {summary['judge_structural_topology']:.2f} · "
            f"Avg. {summary['judge_average']:.2f} · failures: {summary['judge_failures']}"
        )
    print(f"results: {out}")


def build_builder(args: argparse.Namespace, session: LMSession, retrieval):
    """A function topic, papers -> taxonomy Prediction for `args.mode`.

    Bottom-up mode organises the given papers with `TaxonomyBuilder`. Deep-research mode runs the research
    program with `taxonomy=True` over `retrieval`: the same path as `deepresearch run --taxonomy`, so what is
    scored here is what a user gets.
    """
    from deepresearch.programs.taxonomy.builder import Repair, TaxonomyBuilder  # lazy: start-up

    if args.mode == "bottom-up":
        builder = TaxonomyBuilder(max_papers_per_call=args.max_papers_per_call, offline=session.lm is None)
        return lambda topic, papers: builder(topic=topic, papers=papers)
    from deepresearch.programs.research.program import DeepResearch  # lazy: start-up

    research = DeepResearch(
        retriever=retrieval.retriever,
        offline=session.lm is None,
        config=ResearchConfig(depth=args.depth, breadth=args.breadth, taxonomy=True),
    )
    research.taxonomist.max_papers_per_call = args.max_papers_per_call

    def organise(topic: str, papers) -> dspy.Prediction:
        report = research(question=topic).report
        taxonomy = report.taxonomy or {}
        return dspy.Prediction(
            tree=taxonomy.get("hierarchy_tree", {"name": topic, "subtopics": []}),
            retrieved_papers=taxonomy.get("retrieved_papers", []),
            repairs=[Repair(**r) for r in taxonomy.get("repairs", [])],
            report=report,
        )

    return organise


def pooled_corpus(surveys: Sequence[Survey]):
    """The benchmark's own papers over `surveys`, each title once."""
    docs: list[Doc] = []
    seen: set[str] = set()
    for s in surveys:
        for p in s.papers:
            if p["title"] not in seen:
                seen.add(p["title"])
                docs.append(Doc(doc_id=f"tb{len(docs) + 1}", title=p["title"], text=p["abs"]))
    return Corpus(docs, name="taxobench-papers")


def run_settings(args: argparse.Namespace, data: str, model: str, corpus) -> dict[str, Any]:
    """The settings a prediction depends on (`SETTINGS_CHECKED`), as run.json records them."""
    deep = args.mode == "deep-research"
    return {
        "data": data,
        "mode": args.mode,
        "lm": model,
        "max_papers_per_call": args.max_papers_per_call,
        "corpus": f"{corpus.name}:{corpus.fingerprint()[:12]}" if deep else None,
        "depth": args.depth if deep else None,
        "breadth": args.breadth if deep else None,
    }


def check_resume(out: Path, settings: dict[str, Any], overwrite: bool) -> None:
    """Lets a run go on from the predictions in `out` only when they were made with the same settings."""
    predictions, run = out / "predictions.jsonl", out / "run.json"
    if overwrite:
        predictions.unlink(missing_ok=True)
    elif predictions.exists() and not run.exists():
        raise ValueError(
            f"{out} holds predictions of unknown settings (no run.json); pass --overwrite or another --out"
        )
    elif predictions.exists():
        before = json.loads(run.read_text(encoding="utf-8"))
        changed = [k for k in SETTINGS_CHECKED if before.get(k) != settings[k]]
        if changed:
            raise ValueError(
                f"{out} holds a run with different {', '.join(changed)}; pass --overwrite or another --out"
            )
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run, json.dumps(settings, indent=2))


def prediction_row(survey: Survey, result, mode: str, model: str) -> dict[str, Any]:
    """The predictions.jsonl line of one built taxonomy."""
    return {
        "id": survey.survey_id,
        "hierarchy_tree": result.tree,
        "retrieved_papers": result.retrieved_papers,
        "mode": mode,
        "model": model,
        "repairs": [vars(r) for r in result.repairs],
    }


def finish(
    args: argparse.Namespace, surveys: Sequence[Survey], predictions: dict[int, Prediction], out: Path, judge
) -> int:
    """The end of `eval taxonomy` and `eval taxonomy-score`: scores the predictions, has the judge LM `judge`
    (None: no judge) judge them, writes the results to `out` and prints the table."""
    scores = score_all(surveys, predictions, profile=args.profile, sim=similarity(args.sim))
    judgements = judge_all(surveys, predictions, judge, cache_dir=out / "judge_cache") if judge is not None else None
    summary = write_results(out, scores, judgements=judgements, profile=args.profile)
    print_report(scores, summary, out)
    return 0


def run(args: argparse.Namespace) -> int:
    from deepresearch.eval.judges import open_judge  # lazy: start-up

    # the LMs are checked before the benchmark is loaded: a bad key or a dead server fails in seconds
    session = open_lm(args)
    judge = open_judge(args, session.model) if args.judge_lm else None
    data = resolve_data(args.data, environment.data_dir())
    surveys = load_taxobench(data, limit=args.limit)
    retrieval = None
    if args.mode == "deep-research":  # over --corpus or --index as every command opens them, else the surveys' papers
        retrieval = open_from_args(args, args.corpus or (None if args.index else pooled_corpus(surveys)))
    out = Path(args.out or Path("runs") / f"taxonomy-{args.mode}")
    check_resume(out, run_settings(args, data, session.model, retrieval.corpus if retrieval else None), args.overwrite)
    predictions_path = out / "predictions.jsonl"
    done = {int(row["id"]) for row in read_jsonl(predictions_path, hint=DAMAGED)}
    todo = [s for s in surveys if s.survey_id not in done]
    print(
        f"{len(surveys)} surveys · {len(surveys) - len(todo)} already done · {args.mode} · {session.model}",
        file=sys.stderr,
    )
    if todo:
        builder = build_builder(args, session, retrieval)
        with JsonlAppender(predictions_path) as sink:  # cuts the line a kill left unfinished
            for s in todo:
                papers = list(s.papers) if args.mode == "bottom-up" else None
                with session.context():
                    result = builder(s.topic, papers)
                sink.append(prediction_row(s, result, args.mode, session.model))  # fsynced: never built again
                if not getattr(args, "quiet", False):  # a progress line, which -q leaves out
                    print(
                        f"survey {s.survey_id}: {len(result.retrieved_papers)} papers, {len(result.repairs)} repairs",
                        file=sys.stderr,
                    )
    # every score comes from the file, so a resumed run scores exactly what an uninterrupted one would
    rows = {int(row["id"]): row for row in read_jsonl(predictions_path, hint=DAMAGED)}
    by_id = {
        s.survey_id: Prediction(
            s.survey_id,
            rows[s.survey_id]["hierarchy_tree"],
            tuple(rows[s.survey_id]["retrieved_papers"]) if args.mode == "deep-research" else None,
        )
        for s in surveys
        if s.survey_id in rows
    }
    return finish(args, surveys, by_id, out, judge)
