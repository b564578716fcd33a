"""Sentence provenance: every cited sentence of a report leads to the learnings and passages behind it."""

import json

import pytest

from deepresearch import cli
from deepresearch.eval.citations import split_sentences as eval_sentences
from deepresearch.programs.artifacts import Reference, Report
from deepresearch.programs.citing.provenance import (
    cited_numbers,
    report_sentences,
    sentence_provenance,
    split_sentences,
)
from deepresearch.signatures.types import Learning

QUESTION = "Does vitamin D supplementation reduce fracture risk?"


@pytest.mark.parametrize(
    "block,sentences",
    [
        ("Rates fell [1]. Then rose [2].", ["Rates fell [1].", "Then rose [2]."]),
        ("Rates fell. [1] Then rose. [2][3]", ["Rates fell. [1]", "Then rose. [2][3]"]),  # citation after the period
        (
            "As Smith et al. (2020) found, e.g. Fig. 2 shows a 1.8 ms delay [1]. J. Doe agreed [2].",
            ["As Smith et al. (2020) found, e.g. Fig. 2 shows a 1.8 ms delay [1].", "J. Doe agreed [2]."],
        ),
        (
            'It was "large." Then it was small! Why? [4] Because.',
            ['It was "large."', "Then it was small!", "Why? [4]", "Because."],
        ),
        ("no capital after. so one sentence", ["no capital after. so one sentence"]),
        # a capital letter after a lowercase word ends a sentence; initials of names do not
        ("It needs vitamin D. This review asks why.", ["It needs vitamin D.", "This review asks why."]),
        ("As John F. Kennedy and A. B. Smith said. Then.", ["As John F. Kennedy and A. B. Smith said.", "Then."]),
    ],
)
def test_split_sentences(block, sentences):
    assert split_sentences(block) == sentences


def test_report_sentences_skip_headings_code_and_the_reference_list():
    md = (
        "# Title [9]\n\nFirst line\nwrapped [1]. Second [2].\n\n- Item one [1].\n- Item two.\n\n"
        "| finding | source |\n|---|---|\n| Less risk | [3] |\n\n> Quoted claim [2].\n\n```\ncode [1].\n```\n\n---\n\n"
        "## References\n\n[1] A paper. doc 1\n[2] B paper. doc 2"
    )
    assert report_sentences(md) == [
        "First line wrapped [1].",
        "Second [2].",
        "Item one [1].",
        "Item two.",
        "finding source",
        "Less risk [3]",
        "Quoted claim [2].",
    ]
    assert cited_numbers("See [2, 3] and [2][5] but not [a link](http://x.org) or [x].") == (2, 3, 5)


def test_each_sentence_maps_to_its_sources_and_the_learnings_on_them():
    refs = (Reference(1, "aaaaaaaa_1", "d1", "Paper one"), Reference(2, "bbbbbbbb_1", "d2", "Paper two"))
    learnings = (
        Learning(text="Trial X cut fractures by 20%.", source_ids=["aaaaaaaa_1"]),
        Learning(text="Paper two studied bone density in women.", source_ids=["bbbbbbbb_1"]),
        Learning(text="Paper one enrolled 300 adults.", source_ids=["aaaaaaaa_1", "cccccccc_1"]),
    )
    md = "## Q\n\nTrial X cut fractures by 20% [1]. Both agree [1][2]. Nobody asked. Odd [7].\n\n## References\n\n..."
    out = sentence_provenance(md, refs, learnings)
    assert [p.text for p in out] == [
        "Trial X cut fractures by 20% [1].",
        "Both agree [1][2].",
        "Nobody asked.",
        "Odd [7].",
    ]
    first, both, uncited, unknown = out
    assert [s.doc_id for s in first.sources] == ["d1"] and [x.index for x in first.learnings] == [0, 2]
    assert first.learnings[0].overlap == 1.0 and first.learnings[1].source_ids == ("aaaaaaaa_1",)
    assert both.citations == (1, 2) and {x.index for x in both.learnings} == {0, 1, 2}
    assert (uncited.citations, uncited.sources, uncited.learnings) == ((), (), ())
    assert (unknown.citations, unknown.sources, unknown.learnings) == ((7,), (), ())


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("provenance") / "vitd"
    code = cli.main(
        [
            "run",
            QUESTION,
            "--corpus",
            str(data_dir / "scifact"),
            "--lm",
            "offline",
            "--depth",
            "2",
            "--breadth",
            "3",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0
    return (out / "report.md").read_text(encoding="utf-8"), json.loads((out / "trace.json").read_text(encoding="utf-8"))


def test_trace_maps_every_cited_sentence_to_learnings_and_passages(offline_run, scifact):
    report_md, trace = offline_run
    provenance = trace["provenance"]
    cited = [p for p in provenance if p["citations"]]
    assert len(cited) >= 5 and [p["text"] for p in provenance] == report_sentences(report_md)
    by_number = {r["number"]: r for r in trace["references"]}
    for p in cited:
        for n, source in zip(p["citations"], p["sources"], strict=True):
            assert source == {k: by_number[n][k] for k in ("number", "source_id", "doc_id", "title")}
            resting = [x for x in p["learnings"] if source["source_id"] in x["source_ids"]]
            assert resting, p["text"]
            for x in resting:
                assert source["source_id"] in trace["learnings"][x["index"]]["source_ids"]
                assert x["text"] == trace["learnings"][x["index"]]["text"]
        # the offline writer quotes learnings, and learnings quote the passage: sentence -> learning -> passage
        best = p["learnings"][0]
        assert best["overlap"] == 1.0
        assert best["text"].rstrip(".") in scifact.get(p["sources"][0]["doc_id"]).text
    uncited = [p for p in provenance if not p["citations"]]
    assert uncited and all(p["sources"] == [] and p["learnings"] == [] for p in uncited)
    # every citation of the body is in some sentence's provenance
    body = report_md.split("## References")[0]
    assert set(cited_numbers(body)) == {n for p in cited for n in p["citations"]} == set(by_number)


def test_provenance_agrees_with_the_citation_metrics_sentences(offline_run):
    report_md, trace = offline_run
    ours = [tuple(str(n) for n in p["citations"]) for p in trace["provenance"] if p["citations"]]
    theirs = [s.citations for s in eval_sentences(report_md) if s.citations]
    assert ours == theirs


def test_provenance_survives_the_trace_round_trip(offline_run):
    _, trace = offline_run
    report = Report.from_dict(trace)
    assert [p.to_dict() for p in report.provenance()] == trace["provenance"]
    assert report.to_dict()["provenance"] == trace["provenance"]
