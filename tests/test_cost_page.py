"""The cost page's figures come from `benchmarks.cost` over the saved real-server rows."""

import json
from pathlib import Path

import pytest

from benchmarks.cost import main, priced

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "benchmarks" / "tokens_real_d2b3_p2000_cached.json"
MODELS = ["gpt-4.1-mini", "claude-haiku-4-5"]


@pytest.fixture(autouse=True)
def local_price_map(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def test_the_run_is_its_stages_summed_and_cache_hits_cost_less():
    (row,) = [r for r in json.loads(ROWS.read_text()) if r["preset"] == "eco"]
    *stages, run = priced(row, MODELS)
    assert run["stage"] == "run" and run["calls"] == row["calls"] == sum(s["calls"] for s in stages)
    assert run["prompt"] == row["prompt"] and run["cached"] == row["cached"]
    for m in MODELS:
        uncached, cached = run[m]
        assert uncached == pytest.approx(sum(s[m][0] for s in stages))
        assert 0 < cached < uncached  # the measured hits are priced at the cache-read rate
    # a completion token costs more than a prompt token at these list prices
    assert (
        priced({"stages": {"x": [1, 0, 1000, 0, 0, 0, 0, 0]}}, MODELS)[0][MODELS[0]][0]
        > priced({"stages": {"x": [1, 1000, 0, 0, 0, 0, 0, 0]}}, MODELS)[0][MODELS[0]][0]
    )


def test_the_page_shows_what_the_command_prints(capsys):
    assert main([str(ROWS), "--preset", "eco", "--cuts", "on", "--models", ",".join(MODELS)]) == 0
    table = capsys.readouterr().out.splitlines()[1:]
    page = (ROOT / "docs" / "reference" / "cost.md").read_text(encoding="utf-8").replace("**", "")
    assert len(table) == 10 and all(line in page.splitlines() for line in table), table


def test_a_row_that_is_not_there_is_one_line_naming_what_is(capsys):
    with pytest.raises(SystemExit) as done:
        main([str(ROWS), "--preset", "nope"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "no row for preset 'nope'" in err and "eco/on" in err
