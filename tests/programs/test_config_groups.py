"""ResearchConfig has one spelling per setting; the grouped form of older runs and settings files still loads."""

import dataclasses
import itertools
import json
import logging
from dataclasses import replace

import pytest

from deepresearch import cli
from deepresearch.cli import run as run_cli
from deepresearch.programs.config import PRESETS, STRATEGY_SETTINGS, HeroConfig, ResearchConfig, preset
from deepresearch.programs.formats.config_file import ConfigFileError, command_defaults, read_config

# A value other than the default for every setting, each valid on its own and together
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
    "extract_sentences": 2,
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
    "verify_sentences": 0,
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


# The groups older runs saved the settings in, each with the settings it held
OLD_GROUPED = {
    "tree": ("depth", "breadth", "breadth_rule", "max_learnings", "strategy", "schedule"),
    "retrieval": (
        "hits_per_query",
        "max_passages",
        "keep_uncertain",
        "passage_chars",
        "assess_sentences",
        "skip_seen",
        "full_text",
        "full_text_passages",
        "full_text_cache",
    ),
    "budgets": (
        "max_lm_calls",
        "max_tokens",
        "deadline_s",
        "max_failures",
        "max_concurrency",
        "lm_concurrency",
        "search_concurrency",
        "rate_limits",
        "lm_timeout_s",
        "search_timeout_s",
        "lm_retries",
        "search_retries",
        "backoff_s",
        "retry_after_cap_s",
    ),
    "lm": ("structured", "parse_retries"),
    "outputs": ("answer", "taxonomy", "verify", "verify_batch", "verify_chars"),
}


# Settings added after the grouping: older runs saved none of them, and load with their defaults
ADDED_SINCE = ("extract_sentences", "verify_sentences")
# settings added since to a strategy's group: group -> names
ADDED_TO_GROUPS = {"parallel": ("orchestration_share",)}


def deprecations(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]


def test_every_setting_is_a_typed_field_of_its_own():
    fields = {f.name: f for f in dataclasses.fields(ResearchConfig)}
    assert set(fields) == set(CHANGED) | set(STRATEGY_SETTINGS)
    assert all(f.type not in ("Any", "object") for f in fields.values())
    assert sorted(n for names in OLD_GROUPED.values() for n in names) == sorted(set(CHANGED) - set(ADDED_SINCE))
    config = ResearchConfig(**CHANGED)
    assert all(getattr(config, name) == value for name, value in CHANGED.items()) and config != ResearchConfig()


def test_replace_changes_one_setting_and_leaves_the_original():
    config = preset("quick", max_lm_calls=50)
    deeper = replace(config, depth=3, verify="off")
    assert (deeper.depth, deeper.breadth, deeper.max_lm_calls, deeper.verify) == (3, 2, 50, "off")
    assert config.depth == 1 and config.verify == "rewrite"
    assert replace(config, hero=HeroConfig(turns=1)).hero.turns == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.depth = 3


def test_presets_and_their_breadth_rules_work_with_overrides():
    assert preset("parallel", breadth=2).parallel.max_breadth == 2
    assert preset("hero", breadth=2).hero.tasks_per_turn == 2
    assert preset("quick", hits_per_query=5).hits_per_query == 5


def test_no_two_presets_are_the_same():
    for (a, one), (b, other) in itertools.combinations(PRESETS.items(), 2):
        assert one != other, f"presets {a} and {b} are the same configuration"
    assert (PRESETS["standard"].breadth, PRESETS["eco"].breadth) == (3, 4)


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
        ({"lm_retries": -1}, "lm_retries must be >= 0, got -1"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_field(settings, message):
    with pytest.raises(ValueError) as err:
        ResearchConfig(**settings)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: preset("quick", dept=2), "unknown ResearchConfig setting 'dept'; did you mean 'depth'?"),
        (lambda: ResearchConfig.from_dict({"dept": 2}), "unknown ResearchConfig setting 'dept'; did you mean 'depth'?"),
        (lambda: ResearchConfig.from_dict({"hero": {"turn": 2}}), "setting 'hero.turn'; did you mean 'turns'?"),
        (lambda: ResearchConfig.from_dict({"zzz": 1}), "settings are: depth, breadth, breadth_rule"),
        (lambda: ResearchConfig(dept=2), "unexpected keyword argument 'dept'"),
        (lambda: replace(ResearchConfig(), dept=2), "unexpected keyword argument 'dept'"),
    ],
)
def test_an_unknown_name_is_a_type_error_naming_it(build, message):
    with pytest.raises(TypeError) as err:
        build()
    assert message in str(err.value)


def test_an_old_flat_trace_config_loads_and_is_saved_in_the_same_form():
    config = ResearchConfig.from_dict(OLD_TRACE_CONFIG)
    # saved when `structured` defaulted to None (the command line set the adapter) and `lm_concurrency` to 16
    # (not yet the server's slots): it loads as saved
    assert config == preset("quick", max_lm_calls=50, verify="mark", structured=None, lm_concurrency=16)
    # the saved form is unchanged, but for the settings added since, at their defaults
    resaved = {**OLD_TRACE_CONFIG, **{name: getattr(ResearchConfig(), name) for name in ADDED_SINCE}}
    for group, names in ADDED_TO_GROUPS.items():
        defaults = getattr(ResearchConfig(), group)
        resaved[group] = {**resaved[group], **{name: getattr(defaults, name) for name in names}}
    assert config.to_dict() == resaved
    assert json.loads(json.dumps(config.to_dict())) == resaved


def test_to_dict_and_from_dict_round_trip_without_a_warning(caplog):
    config = ResearchConfig(**CHANGED, hero=HeroConfig(turns=1))
    saved = json.loads(json.dumps(config.to_dict()))
    assert saved["rate_limits"] == [["openai", 5.0]] and saved["hero"]["turns"] == 1
    with caplog.at_level(logging.WARNING):
        assert ResearchConfig.from_dict(saved) == config
    assert deprecations(caplog) == []


def test_the_grouped_form_of_older_runs_loads_with_one_deprecation_line(caplog):
    config = ResearchConfig(**CHANGED)
    saved = config.to_dict()
    old = {group: {name: saved[name] for name in names} for group, names in OLD_GROUPED.items()}
    old |= {name: saved[name] for name in STRATEGY_SETTINGS}
    with caplog.at_level(logging.WARNING):
        loaded = ResearchConfig.from_dict(json.loads(json.dumps(old)))
    assert loaded == replace(config, **{name: getattr(ResearchConfig(), name) for name in ADDED_SINCE})
    (line,) = deprecations(caplog)
    assert "tree, retrieval, budgets, lm, outputs" in line and "write depth, breadth," in line


def run_parser():
    parser = cli.Parser(prog="deepresearch run")
    run_cli.add_arguments(parser)
    return parser


def test_a_grouped_settings_file_sets_the_same_options_with_one_deprecation_line(tmp_path, caplog):
    flat, by_group = tmp_path / "flat.toml", tmp_path / "grouped.toml"
    flat.write_text("[run]\ndepth = 1\nhits_per_query = 4\nmax_lm_calls = 20\nverify = 'mark'\n")
    by_group.write_text(
        "[run]\ndepth = 1\n[run.retrieval]\nhits_per_query = 4\n[run.budgets]\nmax-lm-calls = 20\n"
        "[run.outputs]\nverify = 'mark'\n"
    )
    expected = {"depth": 1, "hits": 4, "max_lm_calls": 20, "verify": "mark"}
    with caplog.at_level(logging.WARNING):
        assert command_defaults(read_config(flat), flat, "run", run_parser()) == expected
        assert deprecations(caplog) == []
        assert command_defaults(read_config(by_group), by_group, "run", run_parser()) == expected
    (line,) = deprecations(caplog)
    assert line == f"{by_group}: the tables [run.retrieval], [run.budgets], [run.outputs] are deprecated; " + (
        "write their keys in [run] itself"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("[run.hero]\nturns = 1\n", "unknown table [run.hero]; write the run's settings in [run] itself"),
        ("[run.tree]\ndepth_max = 5\n", "unknown key 'depth_max'"),
        ("[run]\nhits = 3\n[run.retrieval]\nhits_per_query = 4\n", "'hits_per_query' is also set as 'hits'"),
    ],
)
def test_a_bad_group_table_is_one_line_naming_the_file(tmp_path, text, message):
    path = tmp_path / "deepresearch.toml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as err:
        command_defaults(read_config(path), path, "run", run_parser())
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_a_run_from_a_grouped_settings_file_saves_a_flat_config_that_loads(tmp_path, monkeypatch, data_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    (tmp_path / "deepresearch.toml").write_text(
        f'[run]\ncorpus = "{data_dir / "scifact"}"\nno-progress = true\n'
        "[run.tree]\ndepth = 1\nbreadth = 1\n[run.budgets]\nmax_lm_calls = 30\n[run.outputs]\nanswer = true\n"
    )
    assert cli.main(["run", "vitamin D and bone fractures", "--out", str(tmp_path / "o")]) == 0
    saved = json.loads((tmp_path / "o" / "trace.json").read_text())["config"]
    assert set(saved) == {f.name for f in dataclasses.fields(ResearchConfig)}  # the flat form
    assert ResearchConfig.from_dict(saved) == preset("standard", depth=1, breadth=1, max_lm_calls=30, answer=True)
