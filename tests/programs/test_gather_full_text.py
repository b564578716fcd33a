"""ScholarGym's adaptive browsing with --full-text (issue 16 item 5): the second look at an uncertain
candidate reads its open-access PDF, served here by a local HTTP server from a PDF the test writes.

The PDF holds one sentence that settles the paper's relevance (`SETTLING`) on its last page, after pages
of filler; the abstract does not hold it. The scripted assessor labels the paper uncertain, and the scripted
second look says relevant only when that sentence is in the text it was shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import dspy
import pytest

from deepresearch import cli
from deepresearch.programs.config import GatherLoopConfig, preset
from deepresearch.programs.gather.artifacts import GatherResult
from deepresearch.programs.gather.loop import GatherConfig, Gatherer
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.gathering import FULL_TEXT_CHARS
from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.retrievers.fulltext import FullTextCache, FullTextRetriever
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries, RecheckCandidate
from tests.page_server import PageServer
from tests.pdfgen import make_pdf
from tests.research_lm import research_handler
from tests.scripted import inputs_of, routed_handler, scripted_lm

QUESTION = "Does the alpha intervention reduce relapse?"
SETTLING = "In the randomised cohort the alpha intervention reduced relapse by forty percent against placebo."
ABSTRACT = "We describe the alpha intervention and the design of a multicentre study."
FILLER = [
    "Participants were recruited from four clinics in the northern region.",
    "Each visit recorded blood pressure, weight and the medication taken.",
    "The statistical plan was registered before the first enrolment.",
    "Clinic staff were trained on the protocol during two workshops.",
    "Questionnaires were translated and checked by bilingual reviewers.",
    "Missing values were handled by multiple imputation with twenty sets.",
]


def paper_pdf() -> bytes:
    filler = [FILLER[(i + p) % len(FILLER)] for p in range(4) for i in range(12)]
    pages = [filler[:12], filler[12:24], filler[24:36], [*filler[36:], SETTLING]]
    return make_pdf(pages, title="The alpha intervention: a randomised study")


@pytest.fixture
def server():
    """The paper's PDF at /paper.pdf, 404 elsewhere."""
    s = PageServer({"/paper.pdf": (200, "application/pdf", paper_pdf())})
    yield s
    s.close()


def corpus(pdf_url: str | None) -> Corpus:
    """The paper (with `pdf_url` when given) among papers that do not mention alpha."""
    docs = [
        Doc(
            doc_id="p1",
            title="The alpha intervention",
            text=ABSTRACT,
            year=2022,
            metadata={"pdf_url": pdf_url} if pdf_url else {},
        )
    ]
    docs += [
        Doc(doc_id=f"z{i}", title=f"Unrelated study {i}", text=t)
        for i, t in enumerate(
            [
                "Soil erosion in river deltas.",
                "Sparse attention in transformers.",
                "Coral reef bleaching events.",
                "Auction design for spectrum.",
                "Graph neural networks for molecules.",
            ]
        )
    ]
    return Corpus(docs, name="browse")


def planner(rounds):
    """Round n (counted by the tree size it is shown) gets rounds[n]; nothing once they run out."""
    sizes: dict[int, int] = {}

    def answer(messages):
        n = sizes.setdefault(len(json.loads(inputs_of(messages)["subquery_tree"])), len(sizes))
        return {
            "searches": rounds[n] if n < len(rounds) else [],
            "checklist_update": "reports relapse outcomes",
            "memory_update": "m",
            "is_complete": False,
        }

    return answer


ONE_SEARCH = [[{"action": "derive", "source_id": 0, "text": "alpha intervention", "target_k": 3}]]
TWO_SEARCHES = [
    [
        {"action": "derive", "source_id": 0, "text": "alpha intervention", "target_k": 3},
        {"action": "expand", "source_id": 0, "text": "alpha study", "target_k": 3},
    ]
]


def assess(messages):
    papers = json.loads(inputs_of(messages)["candidates"])
    return {
        "relevance": {
            p["paper_id"]: "uncertain" if p["title"] == "The alpha intervention" else "irrelevant" for p in papers
        }
    }


class Recheck:
    """The second look: relevant exactly when the settling sentence is in the paper's text it was shown."""

    def __init__(self):
        self.shown: list[str] = []

    def __call__(self, messages):
        text = json.loads(inputs_of(messages)["paper"])["abstract"]
        self.shown.append(text)
        found = SETTLING in text
        return {
            "is_relevant": found,
            "evidence": "The trial reports the relapse reduction."
            if found
            else "The text shown does not report relapse.",
        }


def gather(retriever, rounds=ONE_SEARCH):
    recheck = Recheck()
    lm = scripted_lm(
        routed_handler({PlanSubqueries: planner(rounds), LabelCandidates: assess, RecheckCandidate: recheck})
    )
    with dspy.context(lm=lm):
        out = asyncio.run(Gatherer(retriever, GatherConfig(iterations=2)).acall(question=QUESTION))
    searches = [s for r in out.result.rounds for s in r.searches]
    return out.result, searches, recheck


def p1(searches):
    return [c for s in searches for c in s.candidates if c.doc_id == "p1"]


def test_the_second_look_reads_the_pdf_and_keeps_the_paper(server, tmp_path):
    reader = FullTextRetriever(BM25Retriever(corpus(f"{server.url}/paper.pdf")), FullTextCache(tmp_path / "ft"))
    result, searches, recheck = gather(reader)
    assert [x.doc_id for x in result.selected] == ["p1"]
    assert all("#" not in c.doc_id for s in searches for c in s.candidates)  # the loop searched whole papers
    (candidate,) = p1(searches)
    assert candidate.label == "relevant" and candidate.reason.startswith("[full text]")
    assert (searches[0].rechecked, searches[0].browsed, searches[0].unread) == (1, 1, 0)
    assert result.second_looks() == {"rechecked": 1, "browsed": 1, "unread": 0}
    # the settling sentence is on the PDF's last page: the passages shown were ranked, not the first ones,
    # and bounded; the abstract was not shown again
    (shown,) = recheck.shown
    assert SETTLING in shown and ABSTRACT not in shown and len(shown) <= FULL_TEXT_CHARS
    assert server.requests == {"/paper.pdf": 1}
    assert GatherResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result  # counts round-trip


def test_the_pdf_is_fetched_once_across_concurrent_looks_runs_and_readers(server, tmp_path):
    url = f"{server.url}/paper.pdf"
    reader = FullTextRetriever(BM25Retriever(corpus(url)), FullTextCache(tmp_path / "ft"))
    _, searches, recheck = gather(reader, TWO_SEARCHES)  # both searches of round 1 find p1 at once
    assert [s.browsed for s in searches] == [1, 1] and len(recheck.shown) == 2
    assert all(c.label == "relevant" for c in p1(searches))
    gather(reader)  # the same reader again
    gather(FullTextRetriever(BM25Retriever(corpus(url)), FullTextCache(tmp_path / "ft")))  # a new one, same cache
    assert server.requests == {"/paper.pdf": 1}


@pytest.mark.parametrize("link,why", [(None, "no open-access PDF link"), ("/missing.pdf", "HTTP 404")])
def test_without_the_full_text_the_abstract_is_judged_and_the_miss_recorded(server, tmp_path, link, why):
    reader = FullTextRetriever(BM25Retriever(corpus(link and server.url + link)), FullTextCache(tmp_path / "ft"))
    result, searches, recheck = gather(reader)
    assert result.selected == ()
    (candidate,) = p1(searches)
    assert candidate.label == "irrelevant" and candidate.reason.startswith("[full text not available]")
    assert why in candidate.reason and "judged on the abstract" in candidate.reason
    assert recheck.shown == [ABSTRACT]
    assert result.second_looks() == {"rechecked": 1, "browsed": 0, "unread": 1}
    assert server.requests == ({} if link is None else {"/missing.pdf": 1})


def test_without_full_text_on_the_second_look_reads_the_stored_text_and_counts_no_miss(server):
    result, searches, recheck = gather(BM25Retriever(corpus(f"{server.url}/paper.pdf")))
    assert result.selected == () and recheck.shown == [ABSTRACT]
    assert not p1(searches)[0].reason.startswith("[full text")
    assert result.second_looks() == {"rechecked": 1, "browsed": 0, "unread": 0} and server.requests == {}


def test_the_gather_strategy_reads_full_text_in_the_second_look_and_the_nodes(server, tmp_path):
    recheck = Recheck()
    lm = scripted_lm(
        research_handler({PlanSubqueries: planner(ONE_SEARCH), LabelCandidates: assess, RecheckCandidate: recheck})
    )
    config = preset(
        "gather", full_text=True, full_text_cache=str(tmp_path / "ft"), gather=GatherLoopConfig(iterations=2)
    )
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=BM25Retriever(corpus(f"{server.url}/paper.pdf")), config=config)(question=QUESTION)
    result = GatherResult.from_dict(out.gathered)
    assert [x.doc_id for x in result.selected] == ["p1"] and result.second_looks()["browsed"] == 1
    (node,) = out.report.nodes()
    assert node.relevant_ids == ("p1",) and "p1" in node.retrieved_ids  # the loop's ids are papers
    # the node extracted from p1's passages that match its subquery, and cites them as passages of p1
    extracts = [json.loads(inputs_of(p)["passages"]) for p in lm.scripted.prompts if "passages" in inputs_of(p)]
    shown = [" ".join(s["sentences"].values()) for batch in extracts for s in batch]
    assert shown and any(SETTLING in s for s in shown)
    assert len(set(shown)) == len(shown) > 1
    # the scripted extractor quotes the first two passages of its call: two passages of p1 are cited
    (ref,) = [r for r in out.references if r.doc_id == "p1"]
    assert len(set(ref.passages)) == len(ref.passages) == 2
    assert out.status == "done" and server.requests == {"/paper.pdf": 1}
    end = next(e for e in out.events if e.kind == "stage_end" and e.stage == "gather")
    assert end.counts["browsed"] == 1 and end.counts["unread"] == 0


def test_the_command_line_runs_the_gather_preset_with_full_text(server, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    path = tmp_path / "papers.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text, **d.metadata})
            for d in corpus(f"{server.url}/paper.pdf").docs
        )
        + "\n"
    )
    out = tmp_path / "run"
    code = cli.main(
        [
            "run",
            QUESTION,
            "--lm",
            "offline",
            "--corpus",
            str(path),
            "--preset",
            "gather",
            "--full-text",
            "--full-text-cache",
            str(tmp_path / "ft"),
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0, capsys.readouterr().err
    trace = json.loads((out / "trace.json").read_text())
    assert trace["config"]["strategy"] == "gather" and trace["config"]["full_text"] is True
    result = GatherResult.from_dict(trace["gathered"])
    assert "p1" in {x.doc_id for x in result.selected}
    assert all("#" not in c.doc_id for r in result.rounds for s in r.searches for c in s.candidates)
    refs = [r for r in trace["references"] if r["doc_id"] == "p1"]
    assert len(refs) == 1 and refs[0]["passages"]  # extraction read p1's passages, referenced under the paper


def test_the_gather_eval_runner_reads_full_text_in_the_loop(server, tmp_path):
    from deepresearch.eval.run_gather import build_program, second_look_totals

    lm = scripted_lm(
        routed_handler({PlanSubqueries: planner(ONE_SEARCH), LabelCandidates: assess, RecheckCandidate: Recheck()})
    )
    options = argparse.Namespace(
        method="loop", iterations=2, ranking_depth=0, full_text=True, full_text_cache=str(tmp_path / "ft"), program=None
    )
    program = build_program(options, BM25Retriever(corpus(f"{server.url}/paper.pdf")), lm)
    with dspy.context(lm=lm):
        result = asyncio.run(program.acall(question=QUESTION)).result
    assert [x.doc_id for x in result.selected] == ["p1"] and result.second_looks()["browsed"] == 1
    assert server.requests == {"/paper.pdf": 1} and f"{server.url}/paper.pdf" in FullTextCache(tmp_path / "ft")
    # summary.json totals what the records hold
    assert second_look_totals([{"result": result.to_dict()}] * 2) == {"rechecked": 2, "browsed": 2, "unread": 0}


def test_the_gather_eval_runner_refuses_full_text_without_the_loop(data_dir, tmp_path, capsys):
    code = cli.main(
        [
            "eval",
            "gather",
            "--data",
            str(data_dir / "scifact"),
            "--lm",
            "offline",
            "--method",
            "raw",
            "--full-text",
            "--limit",
            "1",
            "--out",
            str(tmp_path / "out"),
            "-q",
        ]
    )
    err = capsys.readouterr().err
    assert code != 0 and "--full-text is read by the loop's second look" in err and "--method loop" in err
