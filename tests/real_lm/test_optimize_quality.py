"""Tuning a writing stage against report-quality metrics with the real local model.

The pools are recorded by offline runs (real SciFact passages and extracted learnings); the merger is then
tuned on them with SmolLM2-135M as the task LM, scored on a held-out dev split, saved and reloaded. A model
this small may well not improve: the test checks that the scores are measured and reported, not that
they rise. The judge test uses the same server as a separate judge LM and checks that its verdicts are
cached: a second identical run asks the judge nothing.
"""

from __future__ import annotations

import json

import diskcache
import pytest

from deepresearch import cli
from deepresearch.programs.config import preset
from deepresearch.programs.research.program import DeepResearch
from tests.real_lm.test_pipelines import CAP, lm_args


@pytest.fixture(scope="module")
def pools(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("pools")
    for name, question in [
        ("a", "Does obesity increase the risk of type 2 diabetes?"),
        ("b", "vitamin D and bone fractures"),
    ]:
        assert (
            cli.main(
                [
                    "run",
                    question,
                    "--corpus",
                    str(data_dir / "scifact"),
                    "--depth",
                    "2",
                    "--breadth",
                    "2",
                    "--lm",
                    "offline",
                    "--stage-log",
                    "--out",
                    str(root / name),
                    "-q",
                ]
            )
            == 0
        )
    return root


def _optimize(pools, out, server, *extra) -> int:
    return cli.main(
        [
            "optimize",
            "--stage",
            "merge",
            "--from-runs",
            str(pools),
            "--metric",
            "quality",
            "--optimizer",
            "bootstrap-rs",
            "--budget",
            "4",
            "--workers",
            "1",
            "--out",
            str(out),
            "--max-output-tokens",
            str(CAP),
            "--no-cache",
            *lm_args(server),
            *extra,
        ]
    )


def test_the_merger_is_tuned_on_recorded_runs_and_scored_before_and_after(
    llama_server, pools, scifact_bm25, tmp_path, capsys
):
    out = tmp_path / "merge.json"
    code = _optimize(pools, out, llama_server, "--limit", "4")
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    meta = json.loads(out.with_name("merge.meta.json").read_text())
    assert meta["n_train"] == 3 and meta["n_dev"] == 1  # the dev split is held out
    assert 0.0 <= meta["before"] <= 1.0 and 0.0 <= meta["after"] <= 1.0
    assert (
        f"| before | {meta['before']:.4f} |" in printed.out
        and f"| after (bootstrap-rs) | {meta['after']:.4f} |" in printed.out
    )
    assert meta["lm_calls_by_role"]["task"] > 0 and meta["judge"] == "lexical_entails"
    program = DeepResearch(retriever=scifact_bm25, config=preset("quick"))
    untuned = program.dump_state()
    program.load(str(out))  # plain dspy loads it
    state = json.loads(out.read_text())
    assert {k: state[k] for k in untuned if not k.startswith("merger.")} == {
        k: untuned[k] for k in untuned if not k.startswith("merger.")
    }
    print(
        f"merger, quality (lexical judge), SmolLM2-135M: before {meta['before']:.4f} after {meta['after']:.4f} "
        f"LM calls {meta['lm_calls']}"
    )


def test_the_real_model_judges_and_its_verdicts_are_cached(llama_server, pools, tmp_path, capsys):
    # The task LM is the scripted research server (its merges cite their learnings' sources, so there are
    # claims to judge); the judge is SmolLM2 on its own server. A second identical run asks the judge nothing.
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.optimize.test_every_target import research_or_anything

    cache = tmp_path / "judge"
    metas = []
    for name in ("one", "two"):
        with LocalOpenAIServer(research_or_anything()) as task:
            code = cli.main(
                [
                    "optimize",
                    "--stage",
                    "merge",
                    "--from-runs",
                    str(pools),
                    "--metric",
                    "quality",
                    "--optimizer",
                    "bootstrap-rs",
                    "--budget",
                    "1",
                    "--limit",
                    "2",
                    "--workers",
                    "1",
                    "--out",
                    str(tmp_path / f"{name}.json"),
                    "--lm",
                    "openai/local-model",
                    "--api-base",
                    task.base_url,
                    "--no-cache",
                    "--judge-lm",
                    "openai/smollm2",
                    "--judge-api-base",
                    llama_server.base_url,
                    "--judge-cache",
                    str(cache),
                    "--structured",
                    "schema",
                    "--max-output-tokens",
                    str(CAP),
                ]
            )
        assert code == 0, capsys.readouterr().err[-2000:]
        metas.append(json.loads((tmp_path / f"{name}.meta.json").read_text()))
    first, second = metas
    assert first["judge"] == "openai/smollm2" and first["lm_calls_by_role"]["judge"] > 0
    with diskcache.Cache(str(cache)) as verdicts:  # verdicts on disk (the judge cache is a diskcache folder)
        assert len(verdicts) > 0
    assert second["lm_calls_by_role"].get("judge", 0) == 0 and second["before"] == first["before"]
    print(
        f"judge SmolLM2: {first['lm_calls_by_role']['judge']} verdicts asked, then 0; merger quality "
        f"{first['before']:.4f}"
    )
