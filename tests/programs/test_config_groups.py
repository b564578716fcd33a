"""ResearchConfig grouped by concern (tree, retrieval, budgets, lm, outputs), its flat names still accepted."""

import dataclasses
import json
from dataclasses import replace

import pytest

from deepresearch import cli
from deepresearch.cli import run as run_cli
from deepresearch.programs.config import (
    FLAT_NAMES,
    GROUPS,
    STRATEGY_SETTINGS,
    BudgetConfig,
    HeroConfig,
    LMConfig,
    OutputConfig,
    ResearchConfig,
    RetrievalConfig,
    TreeConfig,
    preset,
)
from deepresearch.programs.formats.config_file import ConfigFileError, command_defaults, read_config

# A value other than the default for every flat name, each valid on its own and together
CHANGED = {
    "depth": 3,
    "breadth": 5,
    "breadth_rule": "fixed",
    "max_learnings": 7,
    "strategy": "hero",
    "schedule": "level",
    "hits_per_query": 4,
    "max_passages": 6,
    "keep_uncertain": False,
    "passage_chars": 900,
    "assess_sentences": 0,
    "skip_seen": "lineage",
    "full_text": True,
    "full_text_passages": 2,
    "full_text_cache": "/tmp/pdfs",
    "max_lm_calls": 50,
    "max_tokens": 90000,
    "deadline_s": 300.0,
    "max_failures": 1,
    "max_concurrency": 3,
    "lm_concurrency": 4,
    "search_concurrency": 2,
    "rate_limits": (("openai", 5.0),),
    "lm_timeout_s": None,
    "search_timeout_s": 30.0,
    "lm_retries": 0,
    "search_retries": 1,
    "backoff_s": 0.5,
    "retry_after_cap_s": 10.0,
    "structured": "schema",
    "parse_retries": 0,
    "answer": True,
    "taxonomy": True,
    "verify": "mark",
    "verify_batch": 3,
    "verify_chars": 5000,
}

# trace.json's `config` as written before the grouping (commit 3c2265f) by
# `deepresearch run "vitamin D and bone fractures" --corpus scifact --preset quick --max-lm-calls 50 --verify mark`
OLD_TRACE_CONFIG = json.loads(
    '{"depth": 1, "breadth": 2, "breadth_rule": "ceil_half", "hits_per_query": 10, "max_passages": 8, '
    '"max_learnings": 5, "keep_uncertain": true, "max_concurrency": 8, "max_failures": 5, "passage_chars": 2000, '
    '"assess_sentences": 3, "skip_seen": "node", "strategy": "eco", "schedule": "async", "lm_concurrency": 16, '
    '"search_concurrency": 8, "rate_limits": [], "lm_timeout_s": 120.0, "lm_retries": 2, "parse_retries": 1, '
    '"retry_after_cap_s": 60.0, "structured": null, "search_timeout_s": 60.0, "search_retries": 2, '
    '"backoff_s": 1.0, "deadline_s": null, "max_lm_calls": 50, "max_tokens": null, "answer": false, '
    '"taxonomy": false, "verify": "mark", "verify_batch": 6, "verify_chars": 24000, "full_text": false, '
    '"full_text_passages": 3, "full_text_cache": null, "hero": {"turns": 3, "tasks_per_turn": 3, "multiplier": 3, '
    '"enrichments": 2, "deep_depth": 24, "shallow_depth": 8, "batch_size": 8, "min_yield": 0.1, '
    '"low_yield_patience": 2, "yield_mode": "share_of_batch", "alpha": 0.6, "enrich_alpha": 0.65, '
    '"selection": "submodular", "seed": 0}, "parallel": {"adaptive_breadth": true, "max_breadth": 6, '
    '"adaptive_depth": true, "orchestrate": true, "speculation": "after_initial_research", "interval_s": 8.0, '
    '"satisfied_goal": 0.8, "satisfied_quality": 0.7, "prune_quality": 0.3, "constraints": ""}, '
    '"gather": {"iterations": 5, "max_actions": 6, "max_pages": 3, "max_k": 10, "ranking_depth": 0, '
    '"memory_chars": 1500, "preview_chars": 1000, "second_look": true}}'
)


def grouped(flat: dict) -> dict:
    """The same settings as group objects: {"tree": TreeConfig(depth=...), ...}."""
    by_group: dict[str, dict] = {}
    for name, value in flat.items():
        by_group.setdefault(FLAT_NAMES[name], {})[name] = value
    return {group: GROUPS[group](**values) for group, values in by_group.items()}


def test_every_flat_name_belongs_to_exactly_one_group():
    counts = {group: len(dataclasses.fields(kind)) for group, kind in GROUPS.items()}
    assert sum(counts.values()) == len(FLAT_NAMES)  # a name in two groups would be counted twice
    assert counts == {"tree": 6, "retrieval": 9, "budgets": 14, "lm": 2, "outputs": 5}
    for name, group in FLAT_NAMES.items():
        assert [g for g, kind in GROUPS.items() if name in kind.__dataclass_fields__] == [group]
    fields = [f.name for f in dataclasses.fields(ResearchConfig)]
    assert fields == [*GROUPS, *STRATEGY_SETTINGS]  # the groups are the top level; no flat name is a field
    assert not set(FLAT_NAMES) & set(fields)


def test_flat_and_grouped_construction_give_equal_configs():
    assert set(CHANGED) == set(FLAT_NAMES)  # every flat name is exercised
    flat, by_group = ResearchConfig(**CHANGED), ResearchConfig(**grouped(CHANGED))
    assert flat == by_group and hash(flat) == hash(by_group) and flat != ResearchConfig()
    for name, value in CHANGED.items():
        assert getattr(flat, name) == getattr(getattr(flat, FLAT_NAMES[name]), name) == value
    assert ResearchConfig(depth=2, max_lm_calls=50) == ResearchConfig(
        tree=TreeConfig(depth=2), budgets=BudgetConfig(max_lm_calls=50)
    )


def test_replace_takes_flat_names_and_groups():
    config = preset("quick", max_lm_calls=50)
    deeper = replace(config, depth=3, verify="off")
    assert (deeper.depth, deeper.tree.depth, deeper.breadth, deeper.max_lm_calls) == (3, 3, 2, 50)
    assert deeper.outputs == OutputConfig(verify="off") and config.depth == 1  # the original is untouched
    assert replace(config, lm=LMConfig(structured="off")).structured == "off"
    assert replace(config, hero=HeroConfig(turns=1)).hero.turns == 1
    # a flat name given beside its group is applied over that group
    both = ResearchConfig(tree=TreeConfig(depth=4, strategy="parallel"), breadth=2)
    assert (both.depth, both.breadth, both.strategy) == (4, 2, "parallel")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.depth = 3


def test_presets_and_their_breadth_rules_still_work_with_flat_overrides():
    assert preset("parallel", breadth=2).parallel.max_breadth == 2
    assert preset("hero", breadth=2).hero.tasks_per_turn == 2
    assert preset("quick", hits_per_query=5).retrieval == RetrievalConfig(hits_per_query=5)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"depth": 0}, "depth and breadth must be >= 1, got depth=0, breadth=3"),
        ({"strategy": "hero", "schedule": "gptr"}, "schedule 'gptr' models the eco recursion"),
        ({"hits_per_query": 0}, "hits_per_query must be >= 1, got 0"),
        ({"skip_seen": "all"}, "unknown skip_seen 'all'; choose one of: node, lineage, off"),
        ({"max_lm_calls": 0}, "max_lm_calls must be > 0 or None, got 0"),
        ({"deadline_s": float("nan")}, "deadline_s must be > 0 or None, got nan"),
        ({"rate_limits": (("openai", 0.0),)}, "rate limit of 'openai' must be > 0 requests per second, got 0.0"),
        ({"structured": "json"}, "unknown structured mode 'json'; choose one of: auto, schema, off"),
        ({"verify_chars": 999}, "verify_chars must be >= 1000, got 999"),
        ({"verify": "fix"}, "unknown verify policy 'fix'; choose one of: rewrite, remove, mark, off"),
    ],
)
def test_validation_keeps_its_one_line_messages(settings, message):
    with pytest.raises(ValueError) as flat:
        ResearchConfig(**settings)
    with pytest.raises(ValueError) as by_group:
        ResearchConfig(**grouped(settings))
    assert message in str(flat.value) and str(flat.value) == str(by_group.value) and "\n" not in str(flat.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ResearchConfig(dept=2),
        lambda: preset("quick", dept=2),
        lambda: replace(ResearchConfig(), dept=2),
        lambda: ResearchConfig.from_dict({"dept": 2}),
    ],
)
def test_an_unknown_name_is_refused_with_the_groups_listed(build):
    with pytest.raises(TypeError) as err:
        build()
    assert str(err.value) == (
        "unknown ResearchConfig setting 'dept' (did you mean 'depth'?); settings are the groups tree, retrieval, "
        "budgets, lm, outputs (or any of their fields by name, e.g. depth=2) and hero, parallel, gather"
    )


def test_a_group_takes_only_its_own_class():
    with pytest.raises(TypeError, match="ResearchConfig tree= takes a TreeConfig, got dict"):
        ResearchConfig(tree={"depth": 2})
    with pytest.raises(TypeError, match="unknown ResearchConfig setting 'tree.hits_per_query'"):
        ResearchConfig.from_dict({"tree": {"hits_per_query": 5}})  # a field of another group


def test_an_old_flat_trace_config_loads_and_is_saved_in_the_same_form():
    config = ResearchConfig.from_dict(OLD_TRACE_CONFIG)
    # saved when `structured` defaulted to None (the command line set the adapter): it loads as saved
    assert config == preset("quick", max_lm_calls=50, verify="mark", structured=None)
    assert config.to_dict() == OLD_TRACE_CONFIG  # the saved form is unchanged
    assert json.loads(json.dumps(config.to_dict())) == OLD_TRACE_CONFIG


def test_saved_rate_limits_and_the_grouped_form_load():
    config = ResearchConfig(**CHANGED)
    saved = json.loads(json.dumps(config.to_dict()))
    assert saved["rate_limits"] == [["openai", 5.0]] and ResearchConfig.from_dict(saved) == config
    by_group = json.loads(json.dumps(dataclasses.asdict(config)))
    assert set(by_group) == {*GROUPS, *STRATEGY_SETTINGS} and ResearchConfig.from_dict(by_group) == config


def run_parser():
    parser = cli.Parser(prog="deepresearch run")
    run_cli.add_arguments(parser)
    return parser


def test_a_grouped_settings_file_sets_the_same_options_as_a_flat_one(tmp_path):
    flat, by_group = tmp_path / "flat.toml", tmp_path / "grouped.toml"
    flat.write_text("[run]\ndepth = 1\nhits_per_query = 4\nmax_lm_calls = 20\nverify = 'mark'\n")
    by_group.write_text(
        "[run]\ndepth = 1\n[run.retrieval]\nhits_per_query = 4\n[run.budgets]\nmax-lm-calls = 20\n"
        "[run.outputs]\nverify = 'mark'\n"
    )
    expected = {"depth": 1, "hits": 4, "max_lm_calls": 20, "verify": "mark"}
    for path in (flat, by_group):
        assert command_defaults(read_config(path), path, "run", run_parser()) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("[run.hero]\nturns = 1\n", "unknown table [run.hero]; the settings' groups are: tree, retrieval, budgets"),
        ("[run.tree]\nmax_lm_calls = 5\n", "[run.tree] unknown key 'max_lm_calls'; tree holds: depth, breadth"),
        ("[run]\nhits = 3\n[run.retrieval]\nhits_per_query = 4\n", "'hits_per_query' is also set as 'hits'"),
    ],
)
def test_a_bad_group_table_is_one_line_naming_the_file(tmp_path, text, message):
    path = tmp_path / "deepresearch.toml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as err:
        command_defaults(read_config(path), path, "run", run_parser())
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_a_run_from_a_grouped_settings_file_saves_a_config_that_loads(tmp_path, monkeypatch, data_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    (tmp_path / "deepresearch.toml").write_text(
        f'[run]\ncorpus = "{data_dir / "scifact"}"\nno-progress = true\n'
        "[run.tree]\ndepth = 1\nbreadth = 1\n[run.budgets]\nmax_lm_calls = 30\n[run.outputs]\nanswer = true\n"
    )
    assert cli.main(["run", "vitamin D and bone fractures", "--out", str(tmp_path / "o")]) == 0
    saved = json.loads((tmp_path / "o" / "trace.json").read_text())["config"]
    assert (saved["depth"], saved["breadth"], saved["max_lm_calls"], saved["answer"]) == (1, 1, 30, True)
    assert ResearchConfig.from_dict(saved) == preset("standard", depth=1, breadth=1, max_lm_calls=30, answer=True)
