import json

import pytest

from deepresearch.eval.eco import (
    OVERALL_WEIGHTS,
    VOCAB_PATH,
    binomials,
    breadth_score,
    capped,
    count_signals,
    depth_score,
    distinct,
    eco_scores,
    ecological_score,
    formal_citations,
    innovation_score,
    load_vocab,
    occurrences,
    overall_quality,
    rigor_score,
    taxonomic_score,
    temporal_precision,
)

VAGUE = load_vocab()["temporal_vague"]


# Each component saturates exactly at its cap.
@pytest.mark.parametrize(
    "fn,caps,weights",
    [
        (lambda a, b: depth_score(a, b, 0), (20, 10), (0.4, 0.3)),
        (lambda a, b: ecological_score(a, b, 0), (8, 6), (0.4, 0.3)),
        (lambda a, b: rigor_score(a, b, 0), (5, 20), (0.4, 0.4)),
        (lambda a, b: innovation_score(a, b, 0), (3, 3), (0.4, 0.3)),
        (lambda a, b: breadth_score(a, b, 0, 0, 0), (8, 12), (0.25, 0.25)),
    ],
)
def test_components_saturate_at_their_caps(fn, caps, weights):
    (cap_a, cap_b), (w_a, w_b) = caps, weights
    assert fn(cap_a, 0) == pytest.approx(w_a)
    assert fn(2 * cap_a, 0) == pytest.approx(w_a)
    assert fn(cap_a / 2, 0) == pytest.approx(w_a / 2)
    assert fn(0, cap_b) == pytest.approx(w_b)
    assert fn(0, 3 * cap_b) == pytest.approx(w_b)


def test_every_component_is_one_at_its_caps_and_zero_without_signals():
    assert depth_score(20, 10, 1.0) == pytest.approx(1.0)
    assert breadth_score(8, 12, 8, 10, 6) == pytest.approx(1.0)
    assert breadth_score(16, 24, 16, 20, 12) == pytest.approx(1.0)
    assert ecological_score(8, 6, 5) == pytest.approx(1.0)
    assert rigor_score(5, 20, 5) == pytest.approx(1.0)
    assert innovation_score(3, 3, 3) == pytest.approx(1.0)
    assert taxonomic_score(10) == 1.0 and taxonomic_score(25) == 1.0 and taxonomic_score(5) == 0.5
    for fn, n in ((depth_score, 3), (breadth_score, 5), (ecological_score, 3), (rigor_score, 3), (innovation_score, 3)):
        assert fn(*([0] * n)) == 0.0
    assert capped(20, 20) == 1.0 and capped(40, 20) == 1.0


# The overall weights sum to 1, so the overall quality stays within [0, 1].
def test_overall_weights_sum_to_one_and_bound_the_score():
    assert sum(OVERALL_WEIGHTS.values()) == pytest.approx(1.0)
    assert overall_quality({k: 1.0 for k in OVERALL_WEIGHTS}) == pytest.approx(1.0)
    assert overall_quality({k: 0.0 for k in OVERALL_WEIGHTS}) == 0.0
    only_depth = {k: 0.0 for k in OVERALL_WEIGHTS} | {"depth": 1.0}
    assert overall_quality(only_depth) == pytest.approx(0.22)
    with pytest.raises(ValueError, match="missing"):
        overall_quality({"depth": 1.0})


def test_vocabulary_keeps_the_paper_appendix_lists():
    raw = json.loads(VOCAB_PATH.read_text())
    assert len(raw["mechanistic"]) == 23 and "selection pressure" in raw["mechanistic"]
    assert len(raw["interventions"]) == 17 and "invasive species control" in raw["interventions"]
    assert len(raw["regions"]) == 20


def test_occurrences_count_every_hit_and_distinct_counts_entries():
    text = "Predation and PREDATION; predation drives tropical and tropical and boreal systems."
    assert occurrences(text, ["predation"]) == 3
    assert distinct(text, ["tropical", "boreal", "arctic"]) == 2


def test_mechanistic_terms_fill_depth_until_the_cap():
    twenty = " ".join(["predation"] * 20)
    forty = " ".join(["predation"] * 40)
    assert eco_scores(twenty).depth == pytest.approx(0.4)
    assert eco_scores(forty).depth == pytest.approx(0.4)
    assert eco_scores(" ".join(["competition"] * 10)).depth == pytest.approx(0.2)


def test_repeated_region_counts_once_in_breadth():
    assert eco_scores("tropical " * 8).breadth == pytest.approx(0.25 / 8)
    eight = "tropical temperate boreal arctic alpine desert savanna tundra"
    assert eco_scores(eight).counts["regions"] == 8
    assert eco_scores(eight).breadth == pytest.approx(0.25)


def test_temporal_precision_is_specific_over_all_references():
    text = "Over 5–10 years, within 3 months, from 1990–2010 and in a 10-year study; long-term and recently."
    assert temporal_precision(text, VAGUE) == pytest.approx(4 / 6)
    assert temporal_precision("No time at all.", VAGUE) == 0.0
    assert temporal_precision("It changed over time.", VAGUE) == 0.0
    assert temporal_precision("After 12 weeks.", VAGUE) == 1.0


def test_formal_citations_parenthetical_and_narrative():
    text = (
        "Grazing matters (Smith et al., 2021; Jones and Lee 2019). Brown et al. (2020) agreed, "
        "as did Garcia (2018). In 2020 (see 2021) nothing else counts."
    )
    assert formal_citations(text) == 4


def test_binomials_are_italic_genus_species_not_bold():
    text = "*Quercus robur* and _Apis mellifera_ differ from **Bold words** and *italic* text."
    assert binomials(text) == 2
    assert eco_scores(text).taxonomic == pytest.approx(0.2)


def test_empty_report_scores_zero():
    s = eco_scores("")
    assert s.overall == 0.0 and all(v == 0.0 for v in s.as_dict().values())


def test_hand_made_report_components_and_overall():
    md = (
        "## Restoration\n\nRestoration of *Festuca rubra* grasslands in temperate and boreal regions "
        "leads to recovery because grazing and mowing reduce competition (Smith et al., 2020). "
        "Within 5 years species richness rose; the mechanism might be novel and a research gap remains "
        "unclear.\n\n## Sources\n\n- https://a.org/1\n- https://a.org/2"
    )
    s = eco_scores(md)
    c = s.counts
    assert (c["regions"], c["interventions"], c["binomials"], c["formal_citations"]) == (2, 3, 1, 1)
    assert c["mechanistic"] == 2 and c["causal"] == 2 and c["temporal_precision"] == 1.0
    assert s.depth == pytest.approx(0.4 * 2 / 20 + 0.3 * 2 / 10 + 0.3)
    expected = sum(OVERALL_WEIGHTS[k] * getattr(s, k) for k in OVERALL_WEIGHTS)
    assert s.overall == pytest.approx(expected)
    assert 0 < s.overall < 1


def test_published_reports_score_inside_the_unit_interval(data_dir):
    folder = data_dir / "deepresearch_eco" / "reports_o3-mini"
    for path in sorted(folder.glob("1?_*.md")):
        s = eco_scores(path.read_text(encoding="utf-8"))
        assert all(0.0 <= v <= 1.0 for v in s.as_dict().values()), path.name
        assert count_signals(path.read_text(encoding="utf-8"))["n_sources"] > 0
