"""Building language models from model strings, with the checks a user needs before a long run."""

from __future__ import annotations

import os
from typing import Any

import dspy

OFFLINE = "offline"
STAGE_ENV = "DEEPRESEARCH_LM_{}"  # e.g. DEEPRESEARCH_LM_WRITER=openai/gpt-5


class LMConfigError(ValueError):
    """An LM that cannot be used: unknown provider or missing key. The message never shows a key."""


def _providers() -> set[str]:
    import litellm

    return set(litellm.provider_list) | {"openai", "hosted_vllm", "ollama", "ollama_chat"}


def check_lm(model: str, api_base: str | None = None, api_key: str | None = None) -> None:
    """Raises LMConfigError when `model` names an unknown provider or its API key is not set.

    A model string is `provider/name` as DSPy and LiteLLM read it (`openai/gpt-4.1-mini`,
    `ollama_chat/llama3.1`). With `api_base` (a local OpenAI-compatible server) no key is required.
    """
    if "/" not in model:
        raise LMConfigError(f"LM {model!r} has no provider; write provider/model, e.g. openai/gpt-4.1-mini, "
                            f"or 'offline'")
    provider = model.split("/", 1)[0]
    if provider not in _providers():
        raise LMConfigError(f"unknown LM provider {provider!r} in {model!r}; use a DSPy/LiteLLM provider such as "
                            f"openai, anthropic, gemini, ollama_chat or hosted_vllm")
    if api_base or api_key:
        return
    import litellm

    missing = [k for k in litellm.validate_environment(model).get("missing_keys", [])
               if k.endswith(("_KEY", "_TOKEN"))]
    if missing:
        raise LMConfigError(f"LM {model!r} needs {' or '.join(missing)} in the environment; set it, "
                            f"or pass --api-base for a local OpenAI-compatible server")


def make_lm(model: str | None, api_base: str | None = None, api_key: str | None = None,
            **kwargs: Any) -> dspy.LM | None:
    """A checked `dspy.LM` for `model`, or None for the offline baseline (`offline` or empty).

    Args:
        model: A DSPy/LiteLLM model string, or `offline`.
        api_base: Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp...).
        api_key: Key for that server; otherwise the provider's usual environment variable is used.
        kwargs: Passed to `dspy.LM` (temperature, max_tokens, cache, num_retries...).
    """
    if not model or model == OFFLINE:
        return None
    check_lm(model, api_base, api_key)
    if api_base and not api_key:
        api_key = "local"  # OpenAI-compatible servers usually ignore the key, but the client requires one
    return dspy.LM(model, api_base=api_base, api_key=api_key, **kwargs)


def stage_lms_from_env(stages: tuple[str, ...], api_base: str | None = None, api_key: str | None = None,
                       **kwargs: Any) -> dict[str, dspy.LM]:
    """Per-stage LMs named by DEEPRESEARCH_LM_<STAGE> variables (for example DEEPRESEARCH_LM_WRITER)."""
    lms = {}
    for stage in stages:
        model = os.environ.get(STAGE_ENV.format(stage.upper()))
        lm = make_lm(model, api_base, api_key, **kwargs) if model else None
        if lm is not None:
            lms[stage] = lm
    return lms
