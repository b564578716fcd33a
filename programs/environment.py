"""The environment variables the commands read, read here and nowhere else in the library.

The command-line modules (the edge) ask this module and pass what it finds to the library as arguments:
a library function takes its data folder, key, server or cache folder as a parameter and never looks at
the process environment itself. What each variable means is documented in
docs/reference/cli.md; the search engines' variables in docs/how-to/search-engines.md.

Two readers stay inside the library on purpose and ask `credential_values` and `provider_base_url` here:
redaction (a key set in a notebook after import must still never reach a log or a saved file) and the
naming of the server LiteLLM will send to from its own base-URL variables.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATA = "DEEPRESEARCH_DATA"  # the folder dataset names (--corpus scifact) are looked up in
LM = "DEEPRESEARCH_LM"  # the default --lm
API_BASE = "DEEPRESEARCH_API_BASE"  # the default --api-base
API_KEY = "DEEPRESEARCH_API_KEY"  # the key sent to an --api-base server
JUDGE_API_KEY = "DEEPRESEARCH_JUDGE_API_KEY"  # the key sent to optimize's --judge-api-base server
LM_CACHE = "DEEPRESEARCH_CACHE_DIR"  # the LM answer cache folder
ENGINE_CACHE = "DEEPRESEARCH_ENGINE_CACHE"  # the search engines' response cache folder
# each search engine's credentials: parameter -> the variables that may hold it, the first set wins
ENGINE_CREDENTIALS: dict[str, dict[str, tuple[str, ...]]] = {
    "openalex": {"mailto": ("OPENALEX_MAILTO",), "api_key": ("OPENALEX_API_KEY",)},
    "semanticscholar": {"api_key": ("S2_API_KEY",)},
    "pubmed": {"api_key": ("NCBI_API_KEY",), "email": ("NCBI_EMAIL", "OPENALEX_MAILTO")},
}
_CREDENTIAL_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)


def value(name: str) -> str | None:
    """The variable's value without surrounding blanks, or None when it is unset or blank."""
    return os.environ.get(name, "").strip() or None


def data_dir() -> str | None:
    """$DEEPRESEARCH_DATA: the folder dataset names are looked up in."""
    return value(DATA)


def default_lm() -> str | None:
    """$DEEPRESEARCH_LM: the model when --lm is not given."""
    return value(LM)


def api_key() -> str | None:
    """$DEEPRESEARCH_API_KEY: the key sent to an --api-base server."""
    return value(API_KEY)


def judge_api_key() -> str | None:
    """$DEEPRESEARCH_JUDGE_API_KEY: the key sent to a --judge-api-base server."""
    return value(JUDGE_API_KEY)


def lm_cache_dir() -> str | None:
    """$DEEPRESEARCH_CACHE_DIR: the LM answer cache folder."""
    return value(LM_CACHE)


def server_keys(names: Sequence[str]) -> dict[str, str]:
    """The values of the variables `--lm-server ... key_env=NAME` names (those that are set)."""
    return {name: found for name in dict.fromkeys(names) if (found := value(name)) is not None}


def engine_cache_dir() -> Path | None:
    """$DEEPRESEARCH_ENGINE_CACHE, else $XDG_CACHE_HOME/dspy-deepresearch/engines, else None (the default)."""
    cache = value(ENGINE_CACHE)
    if cache:
        return Path(cache).expanduser()
    xdg = value("XDG_CACHE_HOME")
    return Path(xdg).expanduser() / "dspy-deepresearch" / "engines" if xdg else None


def engine_settings(names: Sequence[str]) -> dict[str, Any]:
    """`open_sources` options from the environment for the engines `names`: `base_urls` from
    $DEEPRESEARCH_<ENGINE>_URL, `credentials` from the engines' key variables, and `cache_dir`."""
    from deepresearch.retrievers.engines import ENGINES, engine_name  # lazy: start-up

    chosen = [engine_name(n) for n in names]
    urls = {n: url for n in chosen if (url := value(ENGINES[n].url_env))}
    credentials = {}
    for name in chosen:
        found = {
            param: next((v for var in variables if (v := value(var))), None)
            for param, variables in ENGINE_CREDENTIALS.get(name, {}).items()
        }
        if any(found.values()):
            credentials[name] = {k: v for k, v in found.items() if v}
    cache_dir = engine_cache_dir()
    return {"base_urls": urls, "credentials": credentials, **({"cache_dir": str(cache_dir)} if cache_dir else {})}


def provider_base_url(model: str) -> str | None:
    """The provider's base-URL variable as LiteLLM reads it (`OPENAI_API_BASE`, `OPENAI_BASE_URL`), if set."""
    prefix = model.split("/", 1)[0].upper()
    return (value(f"{prefix}_API_BASE") or value(f"{prefix}_BASE_URL")) if prefix else None


def credential_values() -> list[str]:
    """The values of the variables whose name looks like a credential (`*_API_KEY`, `*_TOKEN`, `*_SECRET`,
    `*_PASSWORD`, and $DEEPRESEARCH_API_KEY), read now: what redaction removes wherever it appears."""
    return [v for name, v in os.environ.items() if _CREDENTIAL_NAME.search(name) or name == API_KEY]
