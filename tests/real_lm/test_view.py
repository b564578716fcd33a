"""report.html of a run with the real model (SmolLM2-135M-Instruct on llama-server), opened in chromium: the
same checks as an offline run's (tests/view_checks.py), on what a small real model writes."""

from __future__ import annotations

from deepresearch import cli
from tests.real_lm.test_pipelines import QUESTION, SMALL, check_run, kept_evidence, lm_args
from tests.view_checks import check_page, chromium, exercise


def test_a_real_lm_runs_report_in_chromium(llama_server, scifact, tmp_path, capsys):
    out = tmp_path / "run"
    code = cli.main(
        [
            "run",
            QUESTION,
            "--corpus",
            "scifact",
            "--depth",
            "1",
            "--breadth",
            "1",
            "--answer",
            "--out",
            str(out),
            *SMALL,
            *lm_args(llama_server),
        ]
    )  # 2 shared cores
    trace = check_run(out, scifact)
    page = check_page((out / "report.html").read_text(), trace)
    if not kept_evidence(code, trace, capsys.readouterr().err):  # the page says so, with no citation
        assert not page.find("a", "dr-cite")
    rows = [page.text_of(e) for e in page.elements if e.tag == "th" and e.attrs.get("scope") == "row"]
    assert rows == [*sorted(trace["usage"]), "total"]  # the model's calls, tokens and time, stage by stage
    assert all(u["seconds"] > 0 for u in trace["usage"].values() if u["calls"])
    with chromium() as browser:  # after the run: Playwright's sync API holds an event loop in this thread
        exercise(browser, out / "report.html", tmp_path / "screenshots")
