from deepresearch.programs.citing.citations import CITATION, DRAFT_CITATION, citation_labels


def labels(pattern, text):
    return [citation_labels(m) for m in pattern.finditer(text)]


def test_a_citation_is_a_bracket_group_of_source_ids_or_numbers():
    text = "A [5a7b0fd1_1]. B [3, 4]. C [A1B2C3D4_2; 7][8]. D [ 12 ]."
    assert labels(CITATION, text) == [["5a7b0fd1_1"], ["3", "4"], ["a1b2c3d4_2", "7"], ["8"], ["12"]]


def test_links_words_and_short_ids_are_not_citations():
    text = "See [the review](https://x.org), [Table 1], [abc_1], [1](#fn) and [3, see]."
    assert labels(CITATION, text) == [] and labels(DRAFT_CITATION, text) == []


def test_the_draft_pattern_also_reads_invented_labels_with_the_space_before():
    text = "Claim [source 3]. Other [doc_2; 5a7b0fd1_1]. Again [Ref-4]."
    assert labels(DRAFT_CITATION, text) == [["source 3"], ["doc_2", "5a7b0fd1_1"], ["ref-4"]]
    assert labels(CITATION, text) == []
    assert [m.group(0) for m in DRAFT_CITATION.finditer("x [3]")] == [" [3]"]
