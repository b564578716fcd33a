"""Every `--program` x `--stage` x `--optimizer` combination the optimize command accepts, end to end.

Each runs over real HTTP against a scripted server with a tiny budget, saves, loads with plain DSPy into
the program class, and leaves every stage but the tuned one byte-identical to an untuned program. The
combinations are read from the program's own stage tables, so a new stage is covered when it is added.
"""

from __future__ import annotations

import json

import pytest

from deepresearch import cli
from deepresearch.cli.optimize_run import UNSCORED_STAGES
from deepresearch.optimize.compile import OPTIMIZERS
from deepresearch.optimize.pools import POOL_STAGES
from deepresearch.programs.config import preset
from deepresearch.programs.gather.loop import GATHER_STAGES, GatherConfig, Gatherer
from deepresearch.programs.research.program import STRATEGIES, DeepResearch
from deepresearch.programs.research.strategy import SHARED_STAGES
from deepresearch.programs.stages.registry import STAGES
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler
from tests.scripted import universal_handler

PRESET_OF = {"eco": "quick", "hero": "hero", "parallel": "parallel", "gather": "gather"}
SHAPE = ["--depth", "1", "--breadth", "1", "--hits", "3"]


def _research_combinations():
    seen = set()
    for strategy, name in PRESET_OF.items():
        table = {**SHARED_STAGES, **STAGES.outputs(), **STRATEGIES[strategy].stages}
        for stage in ("all", *table):
            if stage in UNSCORED_STAGES or stage in seen:
                continue
            seen.add(stage)
            metric = {"plan": "recall", "assess": "f1"}.get(stage, "recall")
            yield pytest.param("research", stage, name, metric, id=f"research-{stage}")
    for stage in POOL_STAGES:
        yield pytest.param("pool", stage, "hero", "gaps" if stage == "enrich" else "quality", id=f"from-runs-{stage}")
    for stage in ("all", *GATHER_STAGES):
        yield pytest.param("gather", stage, None, "recall", id=f"gather-{stage}")
    yield pytest.param("taxonomy", "all", None, "ari", id="taxonomy-all")


def research_or_anything():
    """The research program's scripted answers; any other prompt (an optimizer's own) gets typed defaults."""
    research, anything = research_handler(), universal_handler()

    def handler(messages):
        try:
            return research(messages)
        except AssertionError:
            return anything(messages)

    return handler


@pytest.fixture(scope="module")
def recorded_runs(tmp_path_factory, data_dir):
    """Three offline runs (eco and hero) with their stage logs: the pools of --from-runs (a run writes once, so
    three runs give the writer two training examples and one for dev)."""
    root = tmp_path_factory.mktemp("runs")
    runs = [
        ("quick", "Does obesity increase the risk of type 2 diabetes?"),
        ("quick", "How does aspirin affect cancer risk?"),
        ("hero", "vitamin D and bone fractures"),
    ]
    for n, (name, question) in enumerate(runs):
        code = cli.main(
            [
                "run",
                question,
                "--corpus",
                str(data_dir / "scifact"),
                "--preset",
                name,
                "--depth",
                "2",
                "--breadth",
                "2",
                "--lm",
                "offline",
                "--stage-log",
                "--out",
                str(root / f"{name}{n}"),
                "-q",
            ]
        )
        assert code == 0
    return root


@pytest.fixture(scope="module")
def scifact_index(tmp_path_factory, data_dir):
    """SciFact's persistent index: each command opens it in milliseconds instead of indexing the corpus."""
    folder = tmp_path_factory.mktemp("index") / "scifact"
    assert cli.main(["index", str(data_dir / "scifact"), "--out", str(folder)]) == 0
    return folder


def _untuned(program: str, preset_name: str | None, retriever):
    if program in ("research", "pool"):
        return DeepResearch(retriever=retriever, config=preset(preset_name))
    if program == "gather":
        return Gatherer(retriever, GatherConfig(iterations=1))
    return TaxonomyBuilder()


def _tuned_attribute(program: str, stage: str, untuned) -> str | None:
    if stage == "all":
        return None
    table = untuned.stage_table() if program in ("research", "pool") else GATHER_STAGES
    return table[stage]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("program,stage,preset_name,metric", list(_research_combinations()))
def test_every_target_runs_saves_and_changes_only_its_stage(
    program,
    stage,
    preset_name,
    metric,
    optimizer,
    recorded_runs,
    scifact_index,
    data_dir,
    scifact_bm25,
    tmp_path,
    monkeypatch,
    capsys,
):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    out = tmp_path / "compiled.json"
    limit = "3" if optimizer == "miprov2" else "2"  # MIPROv2 needs two training examples; one goes to dev
    if program == "pool":
        source = ["--program", "research", "--from-runs", str(recorded_runs), "--preset", preset_name, "--limit", "3"]
    elif program == "research":
        source = [
            "--program",
            "research",
            "--data",
            str(data_dir / "scifact"),
            "--index",
            str(scifact_index),
            "--limit",
            limit,
            "--preset",
            preset_name,
            *SHAPE,
        ]
    elif program == "gather":
        source = [
            "--program",
            "gather",
            "--data",
            "scifact",
            "--split",
            "test",
            "--index",
            str(scifact_index),
            "--limit",
            limit,
            "--iterations",
            "1",
        ]
    else:  # two surveys: both train (miprov2 needs two), and both score the dev side
        source = [
            "--program",
            "taxonomy",
            "--data",
            str(data_dir / "taxobench_examples"),
            "--dev",
            str(data_dir / "taxobench_examples"),
        ]
    with LocalOpenAIServer(research_or_anything()) as server:
        code = cli.main(
            [
                "optimize",
                *source,
                "--stage",
                stage,
                "--metric",
                metric,
                "--optimizer",
                optimizer,
                "--budget",
                "2",
                "--workers",
                "1",
                "--out",
                str(out),
                "--lm",
                "openai/local-model",
                "--api-base",
                server.base_url,
                "--no-cache",
            ]
        )
    assert code == 0, capsys.readouterr().err[-800:]
    meta = json.loads(out.with_name("compiled.meta.json").read_text())
    assert (meta["stage"], meta["optimizer"], meta["metric"]) == (stage, optimizer, metric)
    assert meta["lm_calls"] > 0

    saved = json.loads(out.read_text())
    untuned = _untuned(program, preset_name, scifact_bm25)
    before = untuned.dump_state()
    attr = _tuned_attribute(program, stage, untuned)
    if attr is not None:  # every other stage is exactly what an untuned program holds
        others = {k for k in before if not k.startswith(f"{attr}.")}
        assert others and {k: saved[k] for k in others} == {k: before[k] for k in others}
    elif program == "research":  # `all` leaves the stages no research run calls
        idle = {k for k in before if k.startswith(("clarifier.", "answerer.", "taxonomist."))}
        assert idle and {k: saved[k] for k in idle} == {k: before[k] for k in idle}
    untuned.load(str(out))  # plain dspy loads it into the program class
    assert untuned.dump_state().keys() == before.keys()
