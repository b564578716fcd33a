"""`deepresearch run --answer --taxonomy` end to end (offline): answer.md, taxonomy.json, the map section."""

import json
import re
from collections import Counter

from deepresearch import cli

QUESTION = "Does vitamin D supplementation reduce fracture risk?"


def leaf_titles(tree) -> Counter:
    out = Counter(tree.get("papers", []))
    for child in tree.get("subtopics", []):
        out += leaf_titles(child)
    return out


def test_answer_and_taxonomy_files_share_the_reports_numbering(tmp_path, data_dir, monkeypatch, capsys):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    out = tmp_path / "vitd"
    code = cli.main(
        [
            "run",
            QUESTION,
            "--corpus",
            str(data_dir / "scifact"),
            "--depth",
            "1",
            "--breadth",
            "2",
            "--answer",
            "--taxonomy",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert f"answer: {out / 'answer.md'}" in printed and f"taxonomy: {out / 'taxonomy.json'}" in printed
    report, answer = (out / "report.md").read_text(), (out / "answer.md").read_text()
    trace = json.loads((out / "trace.json").read_text())
    taxonomy = json.loads((out / "taxonomy.json").read_text())
    refs = {r["number"]: r for r in trace["references"]}

    # answer.md: the question, the answer of the trace, and the references it cites with the report's numbers
    assert answer.startswith(f"# {QUESTION}\n\n{trace['answer']}")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", trace["answer"])}
    assert cited and cited <= set(refs)
    for n in cited:
        assert f"[{n}] " in answer.split("## References", 1)[1]
        assert re.search(rf"^\[{n}\] ", report, re.M)  # the same entry in the report's list

    # taxonomy.json: TaxoBench's tree of exactly the papers judged relevant; the report maps them
    relevant = {i for root in trace["tree"] for i in _walk_relevant(root)}
    assert {p["doc_id"] for p in taxonomy["papers"]} == relevant and taxonomy == trace["taxonomy"]
    assert leaf_titles(taxonomy["hierarchy_tree"]) == Counter(taxonomy["retrieved_papers"])
    section = report.split("## Map of the literature", 1)[1].split("## References", 1)[0]
    mapped = {refs[int(n)]["doc_id"] for n in re.findall(r"\[(\d+)\]", section)}
    assert mapped == relevant


def _walk_relevant(node):
    yield from node["relevant_ids"]
    for child in node["children"]:
        yield from _walk_relevant(child)


def test_a_rerun_without_the_modes_removes_their_stale_files(tmp_path, data_dir, monkeypatch):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    out = tmp_path / "vitd"
    base = [
        "run",
        QUESTION,
        "--corpus",
        str(data_dir / "scifact"),
        "--depth",
        "1",
        "--breadth",
        "1",
        "--out",
        str(out),
        "-q",
    ]
    assert cli.main([*base, "--answer", "--taxonomy"]) == 0
    assert (out / "answer.md").exists() and (out / "taxonomy.json").exists()
    assert cli.main(base) == 0
    assert not (out / "answer.md").exists() and not (out / "taxonomy.json").exists()
    assert "## Map of the literature" not in (out / "report.md").read_text()
