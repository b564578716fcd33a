from deepresearch.programs.citing.citations import (
    CitationRegistry,
    render_references,
    renumber_citations,
    source_id_for,
)
from deepresearch.retrievers.types import Doc


def registry(*ids):
    reg = CitationRegistry()
    docs = [Doc(doc_id=i, title=f"Title {i}", text="t", year=2020 if i == "a" else None) for i in ids]
    return reg, [reg.register(d) for d in docs]


def test_ids_are_stable_and_shaped_as_in_spec_001():
    sid = source_id_for("31715818")
    assert sid == source_id_for("31715818") and len(sid) == 10 and sid.endswith("_1")
    reg, (a,) = registry("a")
    assert reg.register(Doc(doc_id="a", title="x", text="y")) == a and len(reg) == 1


def test_renumbering_follows_first_use_and_merges_groups():
    reg, (a, b, c) = registry("a", "b", "c")
    text = f"First [{b}]. Second [{a}, {b}]. Third [{c}][{a}]. Again [{b}]."
    out = renumber_citations(text, reg)
    assert out.markdown == "First [1]. Second [2][1]. Third [3][2]. Again [1]."
    assert [r.doc_id for r in out.references] == ["b", "a", "c"] and out.dropped == 0


def test_unknown_citations_are_removed_and_counted_and_links_kept():
    reg, (a,) = registry("a")
    text = f"Claim [{a}]. Made up [ffffffff_1]. Numbered [7]. A [link](http://x.org) stays. Mixed [{a}; deadbeef_2]."
    out = renumber_citations(text, reg)
    assert out.markdown == "Claim [1]. Made up. Numbered. A [link](http://x.org) stays. Mixed [1]."
    assert out.dropped == 3


def test_reference_list_renders_title_year_and_location():
    reg, (a, b) = registry("a", "b")
    out = renumber_citations(f"x [{a}] y [{b}]", reg)
    # one paragraph per reference, so that Markdown does not run them together
    assert render_references(out.references).split("\n\n")[1:] == ["[1] Title a (2020). doc a", "[2] Title b. doc b"]
