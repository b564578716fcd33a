import pytest

from deepresearch.eval.citations import (
    CitationScores,
    Sentence,
    answer_sentences,
    citation_precision,
    citation_recall,
    citations_in,
    claim_sentences,
    dataset_citation_f1,
    grade_claims,
    lexical_entails,
    lexical_support,
    scholarqa_citation_scores,
    scholarqa_official_scores,
    split_sentences,
)
from deepresearch.eval.f1 import harmonic_mean

REPORT = """## Does warming advance flowering?

Warming advances flowering in temperate herbs by about five days per degree [1][2]. Smith et al. (2020)
found the same shift in alpine meadows across three mountain ranges [3]. Short one.
Grazing reduces plant diversity in fertile grasslands, e.g. in central Europe. [4, 5]

- **Drought** lowers seed set in annual plants across many dry sites [2].
- Nitrogen deposition favours fast-growing grasses over slow-growing forbs in most sites.

| table | row with a long cell that is not prose at all, so it is skipped |
> Note: 1 of 5 research branches failed; their errors are recorded in the trace.

## References

[1] A title (2020). doc 123
[2] Another. https://x.org/b
"""


def test_sentences_keep_their_citations_and_drop_markup():
    sentences = split_sentences(REPORT)
    assert sentences[0] == Sentence(
        "Warming advances flowering in temperate herbs by about five days per degree.", ("1", "2")
    )
    texts = [s.text for s in sentences]
    assert "Smith et al. (2020) found the same shift in alpine meadows across three mountain ranges." in texts
    assert "Short one." in texts
    # a citation after the period belongs to the sentence before it
    assert (
        Sentence("Grazing reduces plant diversity in fertile grasslands, e.g. in central Europe.", ("4", "5"))
        in sentences
    )
    assert Sentence("Drought lowers seed set in annual plants across many dry sites.", ("2",)) in sentences
    assert not any("table" in t or "Note" in t or "title" in t for t in texts)


def test_a_paragraph_wholly_in_emphasis_is_a_note_not_a_claim():
    report = (
        "## Q\n\n*Written by the offline baseline: every sentence below is quoted from its source.*\n\n"
        "_Another editorial remark that is long enough to look like a claim._\n\n"
        "*Vitamin D* lowered the fracture rate in older adults over three years [1].\n"
    )
    assert [s.text for s in claim_sentences(report)] == [
        "Vitamin D lowered the fracture rate in older adults over three years."
    ]


def test_citation_recall_is_the_share_of_claims_with_a_citation():
    claims = claim_sentences(REPORT)
    assert len(claims) == 5  # "Short one." is under 50 characters
    r = citation_recall(claims)
    assert (r.n_claims, r.n_cited) == (5, 4)
    assert r.recall == pytest.approx(0.8)
    assert citation_recall([]).recall == 0.0


def test_citation_labels_include_source_ids_but_not_links():
    assert citations_in("A [5a7b0fd1_1][3, 4] b [see](https://x.org) [3].") == ["5a7b0fd1_1", "3", "4"]


# Graded citation precision: the mean of the 1 / 0.5 / 0 support grades; no other grade is accepted.
def test_graded_precision_is_the_mean_grade():
    assert citation_precision([1, 0.5, 0]) == 0.5
    assert citation_precision([]) == 0.0
    with pytest.raises(ValueError, match="0, 0.5 or 1"):
        citation_precision([0.7])


def test_lexical_fallback_grades_by_word_coverage():
    source = "Experimental warming advanced the flowering of temperate herbs by five days per degree."
    assert lexical_support("Warming advanced flowering of temperate herbs by five days per degree.", [source]) == 1.0
    assert (
        lexical_support("Warming advanced flowering of herbs, and drought reduced seed mass strongly.", [source]) == 0.5
    )
    assert lexical_support("Nitrogen deposition favours grasses over forbs.", [source]) == 0.0
    assert lexical_entails(source, "Warming advanced flowering of temperate herbs.")
    assert not lexical_entails("", "Warming advanced flowering.")


def test_grade_claims_scores_only_cited_claims_and_zero_for_unknown_sources():
    claims = [
        Sentence("Warming advanced flowering of temperate herbs.", ("1",)),
        Sentence("Uncited claim about something else entirely.", ()),
        Sentence("A claim citing a source nobody retrieved.", ("9",)),
    ]
    passages = {"1": "Warming advanced flowering of temperate herbs in a field experiment."}
    assert grade_claims(claims, passages) == [1.0, 0.0]


# ScholarQABench's Algorithm 1 on a hand-built case.
S1 = Sentence("s1 is a sentence of at least fifty characters, citing a and b.", ("a", "b"))
S2 = Sentence("s2 is a sentence of at least fifty characters, citing c only.", ("c",))
S3 = Sentence("s3 is a sentence of at least fifty characters, with no citation.", ())
PASSAGES = {"a": "PA", "b": "PB", "c": "PC"}
ENTAILING = {("PA", S1.text), ("PA\nPB", S1.text)}


def table_entails(premise: str, hypothesis: str) -> bool:
    return (premise, hypothesis) in ENTAILING


def test_algorithm_one_default_counting():
    assert all(len(s.text) >= 50 for s in (S1, S2, S3))
    scores = scholarqa_citation_scores([S1, S2, S3], PASSAGES, table_entails)
    assert (scores.n_claims, scores.n_supported, scores.n_necessary, scores.n_cites) == (3, 1, 1, 3)
    assert scores.precision == pytest.approx(1 / 3)
    assert scores.recall == pytest.approx(1 / 3)
    assert scores.f1 == pytest.approx(1 / 3)


def test_algorithm_one_printed_counting():
    scores = scholarqa_citation_scores([S1, S2, S3], PASSAGES, table_entails, printed_algorithm=True)
    assert scores.n_cites == 2
    assert (scores.precision, scores.recall) == (pytest.approx(0.5), pytest.approx(1 / 3))
    assert scores.f1 == pytest.approx(0.4)


def test_claim_sentences_apply_the_fifty_character_rule():
    s4 = "A thirty character sentence [3]."
    md = f"{S1.text[:-1]} [1][2]. {s4}"
    assert len(s4) - len(" [3]") == 28
    assert [(c.text, c.citations) for c in claim_sentences(md)] == [(S1.text, ("1", "2"))]


# The passages past a sentence's third citation are never shown to the judge.
def test_only_the_first_three_citations_are_scored():
    s = Sentence("A sentence of at least fifty characters citing five passages.", ("a", "b", "c", "d", "e"))
    passages = {k: f"P{k}" for k in "abcde"}
    seen = []

    def entails(premise, hypothesis):
        seen.append(premise)
        return True

    scores = scholarqa_citation_scores([s], passages, entails)
    assert scores.n_cites == 3
    assert not any("Pd" in p or "Pe" in p for p in seen)


def test_a_citation_with_no_passage_is_unsupported_and_not_counted():
    s = Sentence("A sentence of at least fifty characters citing a ghost.", ("ghost",))
    scores = scholarqa_citation_scores([s], {"a": "PA"}, lambda p, h: True)
    assert (scores.n_claims, scores.n_supported, scores.n_cites) == (1, 0, 0)


def test_dataset_f1_is_the_f1_of_mean_precision_and_recall():
    reports = [
        CitationScores(n_claims=2, n_supported=2, n_cites=2, n_necessary=1),
        CitationScores(n_claims=2, n_supported=1, n_cites=1, n_necessary=1),
    ]
    assert [(r.precision, r.recall) for r in reports] == [(0.5, 1.0), (1.0, 0.5)]
    p, r, f1 = dataset_citation_f1(reports)
    assert (p, r, f1) == (pytest.approx(0.75), pytest.approx(0.75), pytest.approx(0.75))
    assert dataset_citation_f1([]) == (0.0, 0.0, 0.0)


# HERO's published F1 values recompute from recall and precision.
@pytest.mark.parametrize(
    "recall,precision,f1",
    [
        (99.35, 84.92, 91.57),
        (74.00, 70.00, 71.94),
        (56.00, 54.33, 55.15),
        (55.17, 55.67, 55.42),
        (74.92, 70.47, 72.63),
        (68.91, 64.99, 66.89),
        (63.25, 57.89, 60.45),
        (46.72, 47.86, 47.28),
    ],
)
def test_published_citation_f1_recomputes(recall, precision, f1):
    assert harmonic_mean(precision, recall) == pytest.approx(f1, abs=0.1)


# ScholarQABench's released citation rules (compute_autoais in AkariAsai/ScholarQABench@95e6fc5
# scripts/citation_correctness_eval.py), worked by hand; replayed through the released function (its NLI model
# swapped for the same table, its sentence splitter for these sentences) with the same counts.
T1 = "Warming advances flowering in temperate herbs by five days per degree"
T2 = "The shift is larger in early-flowering species than in late ones"
T3 = "Alpine meadows show the same advance across three mountain ranges"
T4 = "Grazing reduces plant diversity in fertile lowland grasslands"
T6 = "Drought lowers seed set in annual desert plants."  # 48 characters: long enough only with its marker
T7 = "Nitrogen deposition favours fast-growing grasses over forbs"
OFFICIAL_PASSAGES = {"0": "PA", "1": "PB", "2": "PC"}
OFFICIAL_ENTAILING = {("PA\nPB", T1 + "."), ("PA", T1 + "."), ("PB", T3 + "."), ("PC", T6)}


def test_official_scholarqa_rules_inherit_drop_out_of_range_and_read_the_first_of_a_group():
    sentences = [
        f"{T1} [0][1].",  # claim 1: PA+PB entail it; PA alone does (necessary), PB alone does not and PA
        #   without it still does (not necessary): cites 2, necessary 1, supported
        f"{T2}.",  # claim 2: no citation, inherits [0, 1]; PA+PB do not entail it: cites 2, unsupported
        f"{T3} [1, 2].",  # claim 3: the group reads as [1] only; PB entails it: cites 1, necessary 1
        f"{T4} [7].",  # claim 4: 7 is out of range: unsupported, nothing counted, [1] stays inherited
        "Short one [0].",  # under 50 characters: not evaluated, changes nothing
        f"{T6[:-1]} [2].",  # claim 5: 47 + 5 characters of text and marker: evaluated; PC entails it: 1, 1
        f"{T7}.",  # claim 6: inherits [2]; PC does not entail it: cites 1, unsupported
    ]
    assert len(T6) < 50 <= len(f"{T6[:-1]} [2].") and len("Short one [0].") < 50
    scores = scholarqa_official_scores(sentences, OFFICIAL_PASSAGES, lambda p, h: (p, h) in OFFICIAL_ENTAILING)
    # claims 6; supported 1, 3, 5 = 3; cites 2 + 2 + 1 + 0 + 1 + 1 = 7; necessary 1 + 1 + 1 = 3
    assert (scores.n_claims, scores.n_supported, scores.n_cites, scores.n_necessary) == (6, 3, 7, 3)
    assert (scores.precision, scores.recall) == (pytest.approx(3 / 7), pytest.approx(0.5))


def test_official_scholarqa_leaves_an_empty_answer_out_and_scores_an_all_short_one_zero():
    assert scholarqa_official_scores([], OFFICIAL_PASSAGES, lambda p, h: True) is None
    short = scholarqa_official_scores(["Too short [0]."], OFFICIAL_PASSAGES, lambda p, h: True)
    assert (short.n_claims, short.precision, short.recall) == (0, 0.0, 0.0)


def test_answer_sentences_keep_the_markers_of_the_body_prose():
    sentences = answer_sentences(REPORT)
    assert sentences[0] == "Warming advances flowering in temperate herbs by about five days per degree [1][2]."
    assert not any("A title (2020)" in x or "table" in x for x in sentences)  # no reference list, no table
    assert any(x.endswith("[4, 5].") for x in sentences)  # a trailing group moves before the period
