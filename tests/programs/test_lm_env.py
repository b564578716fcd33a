"""--api-base falls back to $DEEPRESEARCH_API_BASE, as --lm falls back to $DEEPRESEARCH_LM."""

from __future__ import annotations

import argparse

import pytest

from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.programs.lm.models import LMConfigError
from deepresearch.programs.lm.session import make_session_lm


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_lm_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_server_comes_from_the_environment_unless_given(monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_API_BASE", "http://127.0.0.1:9/v1")
    assert make_session_lm(_args(), "openai/local").kwargs["api_base"] == "http://127.0.0.1:9/v1"
    given = make_session_lm(_args("--api-base", "http://127.0.0.1:7/v1"), "openai/local")
    assert given.kwargs["api_base"] == "http://127.0.0.1:7/v1"
    monkeypatch.delenv("DEEPRESEARCH_API_BASE")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LMConfigError, match="pass --api-base"):  # no server: the hosted provider, needing its key
        make_session_lm(_args(), "openai/local")
