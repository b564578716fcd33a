import statistics
from collections import defaultdict

import pytest

from deepresearch.eval.eco import density_score
from deepresearch.eval.report import parse_report_name, referenced_doc_ids, source_stats, unique_urls


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def test_unique_urls_count_once_and_stop_at_whitespace_or_parenthesis():
    md = (
        "See [the paper](https://a.org/x) and https://a.org/x again, plus http://b.net/y?q=1.\n\n"
        "## Sources\n\n- https://a.org/x\n- www.no-scheme.com\n- https://c.io/z"
    )
    assert unique_urls(md) == ["https://a.org/x", "http://b.net/y?q=1.", "https://c.io/z"]
    assert source_stats(md).n_sources == 3


def test_words_are_whitespace_tokens_of_the_whole_file():
    md = "One two  three\n\n## Sources\n\n- https://a.org/x"
    stats = source_stats(md)
    assert stats.words == 7  # One two three ## Sources - url
    assert stats.sources_per_1k_words == pytest.approx(1 / 7 * 1000)


def test_our_references_count_corpus_documents_without_urls():
    md = (
        "Warming advances flowering [1]. Grazing lowers diversity [2][3].\n\n## References\n\n"
        "[1] Flowering and warming (2019). doc 4983\n[2] Grazing. https://doi.org/10.1/abc\n"
        "[3] Another paper. doc 77\n[4] Cited twice. doc 4983"
    )
    assert referenced_doc_ids(md) == ["4983", "77"]
    assert source_stats(md).n_sources == 3
    assert len(unique_urls(md)) == 1  # the released analyzer counts URLs only (n_url_sources of `eval report`)


def test_doc_mentions_outside_the_reference_list_are_not_sources():
    assert source_stats("The doc 42 was read.\n\n[1] Not a list. doc 42").n_sources == 0


# Source density saturates at 50 distinct sources per 1,000 words.
def test_density_saturates_at_fifty_sources_per_thousand_words():
    many = words(1900) + "\n" + "\n".join(f"https://s.org/{i}" for i in range(100))
    stats = source_stats(many)
    assert (stats.n_sources, stats.words) == (100, 2000)
    assert stats.sources_per_1k_words == 50
    assert density_score(stats.n_sources, stats.words) == 1.0
    few = words(1990) + "\n" + "\n".join(f"https://s.org/{i}" for i in range(10))
    assert source_stats(few).sources_per_1k_words == 5
    assert density_score(*vars(source_stats(few)).values()) == pytest.approx(0.1)
    repeated = words(1995) + "\n" + "\n".join(["https://s.org/same"] * 5)
    assert source_stats(repeated).n_sources == 1
    assert density_score(0, 0) == 0.0


def test_report_names_give_the_configuration():
    name = parse_report_name("reports/12_o3-mini_orkg_d4_b1.md")
    assert (name.index, name.model, name.engine, name.depth, name.breadth, name.config) == (
        12,
        "o3-mini",
        "orkg",
        4,
        1,
        "d4_b1",
    )
    with pytest.raises(ValueError, match="does not match"):
        parse_report_name("report.md")


# Source statistics of DeepResearch-Eco's 196 published o3-mini reports.
EXPECTED = {  # config: (mean, sd, min, max) of N_sources, mean W_count, mean S_density
    "d1_b1": ((9.31, 1.19, 4, 10), 1680.9, 0.1123),
    "d1_b4": ((23.94, 6.29, 9, 36), 1722.7, 0.2823),
    "d4_b1": ((29.59, 5.12, 16, 40), 1686.8, 0.3553),
    "d4_b4": ((171.31, 31.10, 95, 225), 2125.3, 1.0),
}


@pytest.fixture(scope="module")
def published(data_dir):
    folder = data_dir / "deepresearch_eco" / "reports_o3-mini"
    by_config = defaultdict(list)
    for path in sorted(folder.glob("*.md")):
        by_config[parse_report_name(path).config].append(source_stats(path.read_text(encoding="utf-8")))
    return by_config


def test_published_reports_reproduce_the_source_counts(published):
    assert {k: len(v) for k, v in published.items()} == {k: 49 for k in EXPECTED}
    for config, ((mean, sd, lo, hi), mean_words, mean_density) in EXPECTED.items():
        n = [s.n_sources for s in published[config]]
        assert round(statistics.fmean(n), 2) == mean, config
        assert round(statistics.stdev(n), 2) == pytest.approx(sd, abs=0.006), config
        assert (min(n), max(n)) == (lo, hi), config
        assert round(statistics.fmean(s.words for s in published[config]), 1) == mean_words, config
        density = statistics.fmean(density_score(s.n_sources, s.words) for s in published[config])
        assert round(density, 4) == mean_density, config


def test_published_report_ten_d1_b1(data_dir):
    md = (data_dir / "deepresearch_eco" / "reports_o3-mini" / "10_o3-mini_orkg_d1_b1.md").read_text(encoding="utf-8")
    stats = source_stats(md)
    assert (stats.n_sources, stats.words) == (7, 1777)


# The arithmetic of DeepResearch-Eco's Table 1.
def test_table_one_arithmetic():
    t = {"d1_b1": 9.1, "d1_b4": 28.7, "d4_b1": 29.3, "d4_b4": 192.9}
    assert round(t["d4_b4"] / t["d1_b1"], 1) == 21.2
    assert round((t["d1_b1"] + t["d1_b4"]) / 2, 1) == 18.9
    assert round((t["d4_b1"] + t["d4_b4"]) / 2, 1) == 111.1
    assert round((t["d1_b1"] + t["d4_b1"]) / 2, 1) == 19.2
    assert round((t["d1_b4"] + t["d4_b4"]) / 2, 1) == 110.8
    assert round((192.9 / 2.234) / (9.1 / 1.579), 2) == 14.98
