"""The LM session a command opens from its LM options (`deepresearch.cli.lm_options`).

One place reads `--lm`, `--api-base`, `--structured`, `--max-output-tokens`, `--lm-timeout`,
`--no-cache`, `--cache-dir` and `--no-preflight`, so each command behaves the same way: the LM is
built with its key from the environment, the cache knows its server, and one tiny request checks the
LM before any corpus is loaded. Worker processes (`eval` runners, `optimize --ray`) open theirs here too.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import dspy

from deepresearch.programs import environment
from deepresearch.programs.lm.models import (
    OFFLINE,
    LMConfigError,
    configure_lm_cache,
    make_lm,
    preflight,
    structured_adapter,
)
from deepresearch.programs.lm.router import parse_server, router_lm
from deepresearch.programs.lm.usage import output_limits


@dataclass
class LMSession:
    """The LMs a command uses, and how to call them (adapter, output limits)."""

    model: str
    lm: dspy.LM | None
    adapter: Any = None
    max_output_tokens: int | None = None
    stage_lms: dict[str, dspy.LM] = field(default_factory=dict)
    offline_stages: tuple[str, ...] = ()  # `--stage-lm STAGE=offline`: the stage's offline twin

    @property
    def is_offline(self) -> bool:
        return self.lm is None

    def routing(self) -> dict[str, Any]:
        """What the LM router did (servers, answers per server, failovers), for the trace; {} without one."""
        routing = getattr(self.lm, "routing", None)
        return {"lm_routing": routing()} if callable(routing) else {}

    def models(self) -> dict[str, str]:
        return {
            "default": self.model,
            **{s: m.model for s, m in self.stage_lms.items()},
            **dict.fromkeys(self.offline_stages, OFFLINE),
        }

    def program_lms(self) -> dict[str, Any] | None:
        """The per-stage `lms=` of a program: each stage's LM, or `offline` for its offline twin."""
        return {**self.stage_lms, **dict.fromkeys(self.offline_stages, OFFLINE)} or None

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        """dspy.context with this session's LM and adapter, under its output limits."""
        if self.lm is None:
            yield
            return
        # always an adapter: with none set, a program would choose its own (`ResearchConfig.structured`), and
        # `--structured off` would not be what it asks for. ChatAdapter is DSPy's own default (text format).
        adapter = self.adapter if self.adapter is not None else dspy.ChatAdapter()
        with dspy.context(lm=self.lm, adapter=adapter), output_limits(every=self.max_output_tokens):
            yield


def model_from_args(args: argparse.Namespace, *, default_offline: bool = True) -> str:
    """The model string of `--lm`, else $DEEPRESEARCH_LM, else `offline` (or "" when offline is no default)."""
    model = args.lm or environment.default_lm() or (OFFLINE if default_offline else "")
    if default_offline and not args.lm and not environment.default_lm():
        print(
            "deepresearch: no LM configured (--lm or DEEPRESEARCH_LM); using the offline extractive baseline",
            file=sys.stderr,
        )
    return model


def make_session_lm(args: argparse.Namespace, model: str, **kwargs: Any) -> dspy.LM | None:
    """An LM for `model` with the command's server, timeout and temperature; retries are left to the run."""
    api_base = args.api_base or environment.value(environment.API_BASE)
    servers = getattr(args, "lm_server", None)
    if servers and model and model != OFFLINE:
        if args.api_base:
            raise LMConfigError("--api-base and --lm-server both name servers; list every server with --lm-server")

        parsed = [parse_server(s) if isinstance(s, str) else s for s in servers]
        return router_lm(
            model,
            parsed,
            timeout_s=args.lm_timeout,
            temperature=args.temperature,
            keys=environment.server_keys([s.key_env for s in parsed]),
            **kwargs,
        )
    return make_lm(
        model, api_base, environment.api_key(), timeout_s=args.lm_timeout, temperature=args.temperature, **kwargs
    )


def open_lm(
    args: argparse.Namespace,
    *,
    default_offline: bool = True,
    num_retries: int = 3,
    stage_models: dict[str, str] | None = None,
) -> LMSession:
    """Builds the command's LM session from its options: checks, cache, structured adapter, preflight.

    Args:
        args: Parsed options of `add_lm_arguments`.
        default_offline: Without --lm and $DEEPRESEARCH_LM use the offline baseline (else the model is "").
        num_retries: DSPy's own retries (0 when the run's scheduler retries and counts each request).
        stage_models: Stage -> model string, for LMs of single stages (same server and settings).

    Raises:
        LMConfigError: unknown provider, missing key, bad temperature or timeout (before any request).
        LMPreflightError: the one-request check failed (unless --no-preflight).
    """
    if args.max_output_tokens is not None and args.max_output_tokens < 1:
        raise ValueError(f"--max-output-tokens must be >= 1, got {args.max_output_tokens}")
    model = model_from_args(args, default_offline=default_offline)
    configure_lm_cache(enabled=not args.no_cache, cache_dir=args.cache_dir or environment.lm_cache_dir())
    lm = make_session_lm(args, model, num_retries=num_retries) if model else None
    stage_models = stage_models or {}
    offline_stages = tuple(stage for stage, m in stage_models.items() if m == OFFLINE)
    stage_lms = {
        stage: make_session_lm(args, m, num_retries=num_retries) for stage, m in stage_models.items() if m != OFFLINE
    }
    if not args.no_preflight:
        for checked in dict.fromkeys([lm, *stage_lms.values()]):
            if checked is not None:
                preflight(checked, timeout_s=min(args.lm_timeout, 60.0))
    return LMSession(
        model=model,
        lm=lm,
        adapter=structured_adapter(args.structured, lm),
        max_output_tokens=args.max_output_tokens,
        stage_lms=stage_lms,
        offline_stages=offline_stages,
    )
