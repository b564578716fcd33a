"""The LM options every command shares (`run`, `eval ...`, `optimize`, `mcp`): one group, spelled once.

The session they open is `deepresearch.programs.lm.session.open_lm`; this module imports neither DSPy nor
LiteLLM, so a command's --help answers at once.
"""

from __future__ import annotations

import argparse

from deepresearch.programs import environment
from deepresearch.programs.lm.defaults import DEFAULT_TIMEOUT_S, OFFLINE, SERVER_KEY_ENV, STRUCTURED_MODES


def add_lm_arguments(parser: argparse.ArgumentParser, *, default_offline: bool = True, everyday=None):
    """Adds the shared LM options to a command's parser, in one group, which is returned; `everyday` (an
    argument group of the command) takes --lm instead."""
    default = "$DEEPRESEARCH_LM, else offline" if default_offline else "$DEEPRESEARCH_LM"
    group = parser.add_argument_group("language model")
    (everyday or group).add_argument(
        "--lm",
        default=None,
        help=f"DSPy/LiteLLM model string (openai/gpt-4.1-mini, anthropic/..., ollama_chat/qwen2.5) or '{OFFLINE}'; "
        f"default: {default}. Keys come from the provider's usual variable (OPENAI_API_KEY...)",
    )
    group.add_argument(
        "--api-base",
        default=None,
        help=f"base URL of an OpenAI-compatible server (llama.cpp, vLLM, Ollama...); default "
        f"${environment.API_BASE}; its key is ${SERVER_KEY_ENV}",
    )
    group.add_argument(
        "--lm-server",
        action="append",
        default=None,
        metavar="URL [max_parallel=N] [rpm=N]",
        help="one of several OpenAI-compatible servers of --lm behind LiteLLM's Router (repeatable): "
        "requests are spread over them, each held to its max_parallel and rpm, and moved to "
        "another server when one fails; weight=N and key_env=VAR (default "
        f"${SERVER_KEY_ENV}) are the other settings",
    )
    group.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature of every LM request (default 0: the most likely reply)",
    )
    group.add_argument(
        "--structured",
        default="auto",
        choices=STRUCTURED_MODES,
        help="schema: send each stage's output JSON schema as response_format (constrained "
        "decoding on local servers); off: DSPy's text format; auto (default): schema with "
        "--api-base, the provider's structured output where supported, else text",
    )
    group.add_argument(
        "--max-output-tokens",
        type=int,
        default=None,
        help="cap on the tokens of every reply (default: a limit per stage sized to its output)",
    )
    group.add_argument(
        "--lm-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds one LM request may take (default {DEFAULT_TIMEOUT_S:g})",
    )
    group.add_argument("--no-cache", action="store_true", help="do not read or write the LM answer cache")
    group.add_argument(
        "--cache-dir",
        default=None,
        help="folder of the LM answer cache (default $DEEPRESEARCH_CACHE_DIR, else "
        "~/.cache/dspy-deepresearch/lm); answers are keyed by provider, model and server",
    )
    group.add_argument(
        "--no-preflight", action="store_true", help="skip the one-request check of the LM before the corpus is loaded"
    )
    return group
