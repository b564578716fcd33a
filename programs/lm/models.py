"""Language models from model strings, and what a user needs around them before and after a long run.

- `make_lm` builds a `dspy.LM` that takes its key from the provider's usual environment variable
  (OPENAI_API_KEY, ANTHROPIC_API_KEY...) unless one is given, and `DEEPRESEARCH_API_KEY` for an
  `api_base` server, so a key meant for a hosted provider is never sent to some other server.
- `structured_adapter` picks how replies are formatted: a JSON schema derived from each predictor's
  output fields sent as `response_format` (what lets a small local model produce parseable output),
  the provider's native structured output, or DSPy's text format.
- `ServerKeyedCache` keys cached answers by provider, model *and* server (DSPy leaves the server out).
- `preflight` sends one tiny request, so a bad key or a dead server fails in seconds.
- `explain` turns an LM error into one line naming the cause and the fix, with no secret in it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import dspy
from dspy.clients.cache import Cache
from filelock import FileLock, Timeout

from deepresearch.programs.environment import provider_base_url
from deepresearch.programs.lm.defaults import DEFAULT_TIMEOUT_S, OFFLINE, SERVER_KEY_ENV, STRUCTURED_MODES
from deepresearch.programs.lm.secrets import (
    basic_auth,
    env_secrets,
    redact,
    redact_obj,
    redact_url,
    register_secret,
    registered_secrets,
    strip_url_credentials,
)

PREFLIGHT_TIMEOUT_S = 30.0
PREFLIGHT_RATE_RETRIES = 2  # a 429 with Retry-After of at most PREFLIGHT_RETRY_AFTER_CAP_S is waited out this often
PREFLIGHT_RETRY_AFTER_CAP_S = 10.0
DEFAULT_CACHE_DIR = Path("~/.cache/dspy-deepresearch/lm")
DEFAULT_LM_CONCURRENCY = 16  # LM calls in flight when the server does not say how many it answers at once
SLOTS_TIMEOUT_S = 1.0
SLOTS_TTL_S = 60.0


class LMConfigError(ValueError):
    """An LM that cannot be used: unknown provider, missing key, bad setting. Never shows a key."""


class LMPreflightError(RuntimeError):
    """The one-request check before a run failed; the message names the cause and the fix."""


def _providers() -> set[str]:
    import litellm

    return set(litellm.provider_list) | {"openai", "hosted_vllm", "ollama", "ollama_chat"}


def _missing_keys(model: str) -> list[str]:
    """The key variables LiteLLM finds unset for `model` (empty when it cannot tell)."""
    import litellm

    try:
        missing = litellm.validate_environment(model).get("missing_keys", [])
    except Exception:  # LiteLLM cannot tell for this provider
        missing = []
    return [k for k in missing if k.endswith(("_KEY", "_TOKEN"))]


def key_variables(model: str) -> list[str]:
    """The environment variables that hold `model`'s API key, as LiteLLM names them."""
    return _missing_keys(model) or [f"{model.split('/', 1)[0].upper()}_API_KEY"]


def check_lm(model: str, api_base: str | None = None, api_key: str | None = None) -> None:
    """Raises LMConfigError when `model` names an unknown provider or its API key is not set.

    A model string is `provider/name` as DSPy and LiteLLM read it (`openai/gpt-4.1-mini`,
    `ollama_chat/llama3.1`). With `api_base` (a local OpenAI-compatible server) no key is required.
    """
    if "/" not in model:
        raise LMConfigError(
            f"LM {model!r} has no provider; write provider/model, e.g. openai/gpt-4.1-mini, or 'offline'"
        )
    provider = model.split("/", 1)[0]
    if provider not in _providers():
        raise LMConfigError(
            f"unknown LM provider {provider!r} in {model!r}; use a DSPy/LiteLLM provider such as "
            f"openai, anthropic, gemini, ollama_chat or hosted_vllm"
        )
    if api_base or api_key or provider in ("ollama", "ollama_chat", "hosted_vllm"):
        return
    missing = _missing_keys(model)
    if missing:
        raise LMConfigError(
            f"LM {model!r} needs {' or '.join(missing)} in the environment; set it, "
            f"or pass --api-base for a local OpenAI-compatible server"
        )


def check_server_url(url: str) -> None:
    """Raises LMConfigError unless `url` is an http(s) URL with a host: a server URL without its scheme
    (`localhost:8000/v1`) would otherwise fail every request of a run instead of the command at once."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        is_url = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # a bad port or bracketed host
        is_url = False
    if not is_url:
        raise LMConfigError(
            f"server URL {redact_url(url)!r} is not an http(s) URL; write it as http://HOST:PORT/v1 "
            f"(e.g. http://localhost:8000/v1)"
        )


def check_temperature(temperature: float | None) -> None:
    if temperature is not None and (not math.isfinite(temperature) or not 0.0 <= temperature <= 2.0):
        raise LMConfigError(f"temperature must be a number from 0 to 2, got {temperature}")


def make_lm(
    model: str | None,
    api_base: str | None = None,
    api_key: str | None = None,
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    **kwargs: Any,
) -> dspy.LM | None:
    """A checked `dspy.LM` for `model`, or None for the offline baseline (`offline` or empty).

    Args:
        model: A DSPy/LiteLLM model string, or `offline`.
        api_base: Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp...).
        api_key: Key for that server; without one an `api_base` server gets a placeholder (the command line
            passes $DEEPRESEARCH_API_KEY), and a hosted provider its usual variable (OPENAI_API_KEY...), which
            LiteLLM reads.
        timeout_s: Seconds an HTTP request may take before it is abandoned (None: the client's default).
        kwargs: Passed to `dspy.LM` (temperature, max_tokens, cache, num_retries...).

    Raises:
        LMConfigError: unknown provider, missing key, or a temperature that is not a number from 0 to 2.
    """
    if not model or model == OFFLINE:
        return None
    check_temperature(kwargs.get("temperature"))
    if timeout_s is not None and (not math.isfinite(timeout_s) or timeout_s <= 0):
        raise LMConfigError(f"LM timeout must be a positive number of seconds, got {timeout_s}")
    check_lm(model, api_base, api_key)
    if api_base:
        check_server_url(api_base)
    client: dict[str, Any] = {}  # only what is set: an explicit None switches off LiteLLM's lookup of the env
    register_secret(api_key)
    if api_base:
        # `http://user:pass@host` is sent as the server expects it: host in the URL, Basic auth in the
        # header (an HTTP client would take `user:pass@host` for a host name)
        api_base, credentials = strip_url_credentials(api_base)
        if credentials is not None and api_key:
            raise LMConfigError(
                f"--api-base {redact_url(api_base)} has credentials in its URL and {SERVER_KEY_ENV} "
                f"is set too; give the server one of them"
            )
        client["api_base"] = api_base
        # never the hosted provider's key: that would send OPENAI_API_KEY to whatever server api_base names
        client["api_key"] = api_key or "local"
        if credentials is not None:
            kwargs["extra_headers"] = {**kwargs.get("extra_headers", {}), "Authorization": basic_auth(credentials)}
    elif api_key:
        client["api_key"] = api_key
    if timeout_s is not None:
        client["timeout"] = timeout_s
    return dspy.LM(model, **client, **kwargs)


def server_of(lm: Any) -> str | None:
    """The base URL `lm` sends to: its api_base, else the provider's base-URL variable, else None."""
    if getattr(lm, "servers", None):  # a RouterLM (lm/router.py): its first server stands for them all
        return lm.servers[0].url
    kwargs = getattr(lm, "kwargs", {}) or {}
    return kwargs.get("api_base") or kwargs.get("base_url") or provider_base_url(getattr(lm, "model", "") or "")


_SLOTS: dict[str, tuple[float, int | None]] = {}


def reported_slots(url: str) -> int | None:
    """The requests `url`'s server answers at once, where it says: llama-server's `total_slots` on its
    /props page. None for any other server, or one that does not answer within a second. An answer is kept
    for `SLOTS_TTL_S`, then asked again: the server behind a URL may be restarted with other slots."""
    now = time.monotonic()
    if (known := _SLOTS.get(url)) and now - known[0] < SLOTS_TTL_S:
        return known[1]
    _SLOTS[url] = (now, _read_slots(url))
    return _SLOTS[url][1]


def _read_slots(url: str) -> int | None:
    root, _ = strip_url_credentials(url)  # the page is public: no credentials travel with the question
    root = root.rstrip("/").removesuffix("/v1")
    if not root.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(root + "/props", timeout=SLOTS_TIMEOUT_S) as reply:
            slots = json.load(reply).get("total_slots")
    except (OSError, ValueError, AttributeError):  # no such page, not JSON, not an object
        return None
    return slots if isinstance(slots, int) and slots >= 1 else None


def lm_concurrency(lm: Any, configured: int | None) -> int:
    """LM calls a run keeps in flight: `configured`, else the slots `lm`'s server reports, else 16.

    Requests beyond a server's slots only wait in its queue, where the wait counts against the run's
    request timeout. A router (lm/router.py) holds each of its servers to its own `max_parallel`."""
    if configured is not None:
        return configured
    url = None if lm is None or getattr(lm, "servers", None) else server_of(lm)
    return (reported_slots(url) if url else None) or DEFAULT_LM_CONCURRENCY


class ServerSlots:
    """The slots of one LM server, as lock files that every run in every process of this user shares: a
    request holds one while it is in flight. `deepresearch batch`'s workers, an optimizer's threads and a
    notebook beside a command thus keep to the server's slots together; a lock is let go when its process
    ends, however it ends."""

    def __init__(self, slots: int, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._paths = [folder / f"{i}.lock" for i in range(slots)]

    def take(self) -> FileLock | None:
        """A free slot, held until its `release()`; None while every slot is held."""
        for path in self._paths:
            lock = FileLock(path, timeout=0)
            try:
                lock.acquire()
            except Timeout:
                continue
            return lock
        return None


_SERVER_GATES: dict[tuple[str, int], ServerSlots | None] = {}
_GATES_LOCK = threading.Lock()


def _slots_folder(url: str) -> Path:
    user = str(os.getuid()) if hasattr(os, "getuid") else ""  # elsewhere the temporary folder is the user's
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]  # the URL may hold a password: never a file name
    return Path(tempfile.gettempdir()) / f"dspy-deepresearch{user and '-' + user}" / "slots" / digest


def server_gate(lm: Any) -> ServerSlots | None:
    """The slots of `lm`'s server, shared by every run, thread and process of this user (`ServerSlots`): as
    many as the server reports (`reported_slots`); None for a server that reports none, and for a router
    (which holds each of its servers to its own `max_parallel`).

    A server's slots are the server's, not each run's: runs side by side (an optimizer's threads, a batch's
    workers) would each send as many, and a request past the slots waits in the server's queue, its wait
    counted against its timeout."""
    url = None if lm is None or getattr(lm, "servers", None) else server_of(lm)
    slots = reported_slots(url) if url else None
    if url is None or slots is None:
        return None
    with _GATES_LOCK:
        if (url, slots) not in _SERVER_GATES:
            try:
                _SERVER_GATES[url, slots] = ServerSlots(slots, _slots_folder(strip_url_credentials(url)[0]))
            except OSError:  # no writable temporary folder: each run keeps to its own cap alone
                _SERVER_GATES[url, slots] = None
        return _SERVER_GATES[url, slots]


# ---- structured decoding --------------------------------------------------------------------------


def output_schema(signature: type[dspy.Signature]) -> dict[str, Any]:
    """The JSON schema of a signature's output fields: one object, every field required, no extras.

    This is what OpenAI-compatible servers (llama.cpp, vLLM, Ollama, SGLang) compile into a grammar, so
    even a small model can only write a reply that parses.
    """
    import pydantic

    fields: dict[str, Any] = {name: (f.annotation, ...) for name, f in signature.output_fields.items()}
    model = pydantic.create_model(
        f"{signature.__name__}Output", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    schema = model.model_json_schema()
    _close_objects(schema)
    _bound(schema)
    return schema


# Bounds sent with the schema, by property name: the limits the signatures state in words ("at most 5",
# "one short sentence"), made part of the grammar so a small model cannot fill arrays and strings until
# its token limit cuts the JSON. Only the decoder sees them; parsing does not enforce them. `items` bounds
# each string of an array of strings (a source id, a follow-up question), where a small model otherwise
# runs on inside one string until the cap. Placements (one per paper, up to 60 a call) and free-form
# outputs (report, repaired JSON) stay unbounded.
GRAMMAR_LIMITS: dict[str, dict[str, int]] = {
    "reasoning": {"maxLength": 600},
    "query": {"maxLength": 150},
    "goal": {"maxLength": 200},
    "reason": {"maxLength": 150},
    "text": {"maxLength": 400},
    "rationale": {"maxLength": 300},
    "evidence": {"maxLength": 400},
    "summary": {"maxLength": 2000},
    "paragraph": {"maxLength": 1200},
    "checklist_update": {"maxLength": 500},
    "memory_update": {"maxLength": 800},
    "answer": {"maxLength": 1200},  # the short answer
    # ids are copied from the prompt (a DOI is the longest kind); topic names and leaves are a few words
    "source_id": {"maxLength": 120},
    "paper_id": {"maxLength": 120},
    "name": {"maxLength": 150},
    "leaf": {"maxLength": 300},
    # the gather loop's feedback on a batch of candidates: a few words to a sentence each
    "covered_topics": {"maxLength": 300},
    "relevant": {"maxLength": 300},
    "irrelevant": {"maxLength": 300},
    "suggestions": {"maxLength": 400},
    # a report section's heading names a theme in a few words: a learning copied into it is cut short
    "heading": {"maxLength": 60},
    "sections": {"maxItems": 5},
    "ReportSection.sentences": {"maxItems": 6},  # a model's name: only the sentences of a report's section
    # a sentence states one or two learnings: a small model asked for more names every learning it read, and
    # one free to name none writes sentences nothing supports
    "ReportSentence.learnings": {"minItems": 1, "maxItems": 2},
    "tasks": {"maxItems": 6},
    # the assessor has already kept these passages as evidence: the 135M model asked to choose among their
    # sentences chose none, every time, and left the run with nothing
    "quotes": {"minItems": 1, "maxItems": 5},
    "follow_up_questions": {"maxItems": 3, "items": 200},
    "searches": {"maxItems": 6},
    "subqueries": {"maxItems": 6, "items": 150},
    "source_ids": {"maxItems": 3, "items": 120},
    "papers": {"items": 120},
    "questions": {"maxItems": 3, "items": 300},  # clarifying questions
    # one per paper shown (10 by default; a paper left unjudged counts as uncertain). llama.cpp expands a
    # bounded repetition rule by rule: 20 items of objects with bounded strings decoded at ~10 tokens/s
    # on SmolLM2, 12 at full speed
    "judgements": {"maxItems": 12},
}


def _objects(part: Any) -> Iterator[dict[str, Any]]:
    """Every object of a JSON schema, at any depth, each before the objects inside it."""
    if isinstance(part, dict):
        yield part
        part = list(part.values())
    for value in part if isinstance(part, list) else ():
        yield from _objects(value)


def _bound(schema: dict[str, Any]) -> None:
    """Adds GRAMMAR_LIMITS to every property they name, at any depth of the schema ("Model.field" before
    "field")."""
    for part in _objects(schema):
        for name, prop in (part.get("properties") or {}).items():
            limits = GRAMMAR_LIMITS.get(f"{part.get('title')}.{name}") or GRAMMAR_LIMITS.get(name)
            if isinstance(prop, dict) and limits:
                _limit(prop, limits)


def _limit(prop: dict[str, Any], limits: dict[str, int]) -> None:
    """Bounds one property: a string's length, an array's number of items and each string item's length."""
    for option in prop.get("anyOf", []):  # an optional field: `str | None`
        if isinstance(option, dict):
            _limit(option, limits)
    if prop.get("type") == "string" and "maxLength" in limits:
        prop["maxLength"] = limits["maxLength"]
    elif prop.get("type") == "array":
        prop.update({k: limits[k] for k in ("minItems", "maxItems") if k in limits})
        items = prop.get("items")
        if "items" in limits and isinstance(items, dict) and items.get("type") == "string":
            items["maxLength"] = limits["items"]


def _close_objects(schema: dict[str, Any]) -> None:
    """Makes every object schema list all its properties as required and forbid others (strict mode)."""
    for part in _objects(schema):
        if part.get("type") == "object" and "properties" in part:
            part["required"] = list(part["properties"])
            part["additionalProperties"] = False


# Output properties that name a source shown in the prompt, and the input attributes that give the ids.
ID_OUTPUTS = ("source_id", "source_ids", "paper_id")
MAX_ENUM_IDS = 200  # past this many ids the grammar (and some providers' schema limits) grow too large


def shown_ids(inputs: dict[str, Any]) -> list[str]:
    """The ids of the sources a call shows (passages, papers, candidates), in the order shown."""
    ids: list[str] = []
    for value in inputs.values():
        for item in value if isinstance(value, list | tuple) else ():
            for key in ("source_id", "paper_id"):
                found = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
                if isinstance(found, str) and found:
                    ids.append(found)
    return list(dict.fromkeys(ids))


def _restrict_ids(schema: dict[str, Any], ids: list[str]) -> None:
    """Makes every source-id property of a schema one of `ids`: the decoder cannot write an unseen id."""
    for part in _objects(schema):
        for name, prop in (part.get("properties") or {}).items():
            if name in ID_OUTPUTS and isinstance(prop, dict):
                target = prop.get("items") if prop.get("type") == "array" else prop
                if isinstance(target, dict) and target.get("type") == "string":
                    target.pop("maxLength", None)
                    target["enum"] = list(ids)


# Output lists whose length an input of the same call bounds ("at most max_tasks"): the grammar gets that
# call's number, tighter than GRAMMAR_LIMITS, so a small model cannot repeat an item past what was asked.
# An input list bounds by its length (the merger names each learning at most once).
BOUNDED_BY = {
    "tasks": "max_tasks",
    "subqueries": "max_breadth",
    "questions": "max_questions",
    "order": "learnings",
}


def _bound_by_inputs(schema: dict[str, Any], inputs: dict[str, Any]) -> None:
    for name, prop in (schema.get("properties") or {}).items():
        bound = inputs.get(BOUNDED_BY.get(name, ""))
        bound = len(bound) if isinstance(bound, list | tuple) else bound
        if isinstance(prop, dict) and prop.get("type") == "array" and isinstance(bound, int) and bound >= 1:
            prop["maxItems"] = min(bound, prop.get("maxItems", bound))


# Output mappings keyed by what a call shows (one label per candidate shown, one verdict per claim shown):
# under the schema each shown key is required, once, and no other key can be written.


def _key_by_ids(schema: dict[str, Any], output: str, ids: list[str]) -> None:
    """Turns the schema's mapping `output` into an object with exactly the keys `ids`."""
    for name, prop in (schema.get("properties") or {}).items():
        value = prop.get("additionalProperties") if isinstance(prop, dict) else None
        if name == output and prop.get("type") == "object" and isinstance(value, dict):
            prop["properties"] = {i: dict(value) for i in ids}
            prop["required"] = list(ids)
            prop["additionalProperties"] = False


# Output integers that name an item of an input list by its number (1..n): the merger orders the learnings,
# the writer's sentence names the learnings it states, the extractor the sentences it quotes (numbered on
# across its passages). Under the schema the decoder can write only a number that was shown.
NUMBERED_BY = {"order": "learnings", "learnings": "learnings", "quotes": "passages"}


def _numbered(shown: list[Any] | tuple[Any, ...]) -> int:
    """How many numbers `shown` offers: its passages' numbered sentences where it holds such, else its items."""
    numbered = [getattr(item, "sentences", None) for item in shown]
    counts = [len(sentences) for sentences in numbered if isinstance(sentences, dict)]
    return sum(counts) if len(counts) == len(shown) else len(shown)


def _number_by_inputs(schema: dict[str, Any], inputs: dict[str, Any]) -> None:
    for part in _objects(schema):
        for name, prop in (part.get("properties") or {}).items():
            shown = inputs.get(NUMBERED_BY.get(name, ""))
            number = prop.get("items") if isinstance(prop, dict) and prop.get("type") == "array" else prop
            if (
                isinstance(number, dict)
                and number.get("type") == "integer"
                and isinstance(shown, list | tuple)
                and shown
            ):
                number.update(minimum=1, maximum=max(_numbered(shown), 1))


class SchemaAdapter(dspy.JSONAdapter):
    """DSPy's JSON adapter that always sends each predictor's output schema as `response_format`.

    DSPy's own JSONAdapter sends a schema only to models its metadata says support one, which leaves out
    every local server; this one sends it to any server. Where a call shows sources (passages, papers), the
    ids it may cite are an enum of the ones shown, so even a small model cites only what it was given.
    """

    def _response_format(self, signature: type[dspy.Signature], inputs: dict[str, Any]) -> dict[str, Any]:
        schema = output_schema(signature)
        _bound_by_inputs(schema, inputs)
        _number_by_inputs(schema, inputs)
        ids = shown_ids(inputs)
        if ids and len(ids) <= MAX_ENUM_IDS:
            _restrict_ids(schema, ids)
            _key_by_ids(schema, "relevance", ids)
        claims = [getattr(c, "claim_id", None) for c in inputs.get("claims") or ()]
        if claims and all(isinstance(c, int) for c in claims):
            _key_by_ids(schema, "verdicts", [str(c) for c in claims])
        return {"type": "json_schema", "json_schema": {"name": signature.__name__, "schema": schema, "strict": True}}

    def __call__(self, lm, lm_kwargs, signature, demos, inputs):
        lm_kwargs = {**lm_kwargs, "response_format": self._response_format(signature, inputs)}
        return super().__call__(lm, lm_kwargs, signature, demos, inputs)

    async def acall(self, lm, lm_kwargs, signature, demos, inputs):
        lm_kwargs = {**lm_kwargs, "response_format": self._response_format(signature, inputs)}
        return await super().acall(lm, lm_kwargs, signature, demos, inputs)

    def user_message_output_requirements(self, signature: type[dspy.Signature]) -> None:
        # DSPy closes each request with a reminder of the output fields' order; the server holds the reply to
        # the schema sent with it, so the reminder is left out: it repeats the system message, after the
        # inputs, where no prompt cache reaches it (about 35 tokens a call)
        return None

    def _prepare_response_format(self, lm, lm_kwargs, signature):
        if "response_format" not in lm_kwargs:  # set per call above, from the sources the call shows
            lm_kwargs["response_format"] = self._response_format(signature, {})


def structured_adapter(mode: str, lm: Any | None) -> dspy.Adapter | None:
    """The adapter for `--structured mode` with `lm`, or None to keep DSPy's default (its text format).

    `schema` always sends the output schema; `off` uses the text format (with DSPy's JSON fallback);
    `auto` sends the schema to an `api_base` server, uses the provider's native structured output where
    the model supports it, and the text format otherwise.
    """
    if mode not in STRUCTURED_MODES:
        raise LMConfigError(f"unknown structured mode {mode!r}; choose one of: {', '.join(STRUCTURED_MODES)}")
    if mode == "off" or lm is None:
        return None
    if mode == "schema" or server_of(lm):
        return SchemaAdapter()
    try:
        native = bool(getattr(lm, "supports_response_schema", False))
    except Exception:  # capability lookup failed: keep the text format
        native = False
    return dspy.JSONAdapter() if native else None


# ---- cache ----------------------------------------------------------------------------------------


class ServerKeyedCache(Cache):
    """DSPy's two-level cache, with the server in the key.

    DSPy drops `api_base` from its cache key, so two servers behind the same model string (`openai/local`
    on one port, then another model on the same port or another) would share answers. The server URL
    (credentials removed) joins the key here; API keys never do.
    """

    def cache_key(self, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> str:
        ignored = [a for a in (ignored_args_for_cache_key or []) if a not in ("api_base", "base_url")]
        request = dict(request)
        server = request.pop("api_base", None) or request.pop("base_url", None)
        server = server or provider_base_url(str(request.get("model", "")))
        request["_server"] = redact_url(server) if server else None
        return super().cache_key(request, ignored + ["api_key", "extra_headers"])

    def put(self, request: dict[str, Any], value: Any, *args: Any, **kwargs: Any) -> None:
        """Stores an answer with every credential in it redacted (a server may echo what it was sent).

        Plain records are redacted string by string, a provider response object (LiteLLM's) in the text of
        its choices; an answer that still holds a configured secret after that is not stored at all.
        """
        import copy
        import pickle

        if isinstance(value, dict | list | str):
            value = redact_obj(value)
        else:
            value = copy.deepcopy(value)
            for choice in getattr(value, "choices", None) or ():
                message = getattr(choice, "message", None)
                content = getattr(message, "content", None)
                if message is not None and isinstance(content, str):
                    message.content = redact(content)
        try:
            data = pickle.dumps(value)
        except Exception:  # what cannot be checked is not stored
            return
        if any(secret.encode() in data for secret in [*registered_secrets(), *env_secrets()]):
            return
        super().put(request, value, *args, **kwargs)


def configure_lm_cache(enabled: bool = True, cache_dir: str | os.PathLike | None = None) -> None:
    """Installs a ServerKeyedCache as DSPy's cache (the command line does this once per command).

    Args:
        enabled: False turns both the memory and the disk cache off (`--no-cache`).
        cache_dir: Folder of the disk cache (`--cache-dir`); default ~/.cache/dspy-deepresearch/lm.
    """
    folder = Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()
    try:
        cache = ServerKeyedCache(
            enable_disk_cache=enabled,
            enable_memory_cache=enabled,
            disk_cache_dir=str(folder) if enabled else None,
            disk_size_limit_bytes=1024**3,
        )
    except OSError as err:  # the folder is a file, or cannot be made: name it (the error names no path)
        raise OSError(err.errno, err.strerror, str(folder)) from err
    with dspy._cache_lock:
        dspy.cache = cache


# ---- preflight and diagnosis ----------------------------------------------------------------------


def preflight(lm: dspy.LM, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Sends one tiny uncached request; raises LMPreflightError naming the cause and the fix.

    Costs one call of a few tokens, and saves a run that would otherwise index a corpus for minutes
    and then fail on every LM call.
    """
    from dspy.clients.lm import _is_openai_reasoning_model

    reasoning = _is_openai_reasoning_model(lm.model)
    limit: dict[str, float] = {} if reasoning else {"max_tokens": 8}  # reasoning models need 16000 or none
    if isinstance(lm.engine, str):  # a custom engine (the LM router) owns its timeout
        limit["timeout"] = timeout_s
    for attempt in range(PREFLIGHT_RATE_RETRIES + 1):
        try:
            lm.copy(num_retries=0)("Reply with the word OK.", cache=False, **limit)
            return
        except Exception as err:
            # a rate limit that says when to come back (Retry-After) is waited out, briefly: the server is there
            wait = getattr(err, "retry_after", None)
            if (
                isinstance(err, dspy.LMRateLimitError)
                and wait is not None
                and attempt < PREFLIGHT_RATE_RETRIES
                and 0 <= float(wait) <= PREFLIGHT_RETRY_AFTER_CAP_S
            ):
                time.sleep(float(wait))
                continue
            raise LMPreflightError(
                f"LM check failed: {explain(err, lm)}; (skip this check with --no-preflight)"
            ) from None


# what HTTP clients say when a reply's body ends before its Content-Length (a server that answered, then stopped)
_CUT_REPLY = re.compile(
    r"body bytes outstanding|incomplete ?read|content ?length|peer closed connection without "
    r"sending complete|payload is not completed|response ended prematurely|truncated",
    re.IGNORECASE,
)


def _provider(err: BaseException, lm: Any) -> str:
    model = getattr(err, "model", None) or getattr(lm, "model", None) or ""
    return getattr(err, "provider", None) or (model.split("/", 1)[0] if "/" in model else model) or "the provider"


def explain(err: BaseException, lm: Any | None = None) -> str:
    """One line: what went wrong with an LM call and what to do about it. Secrets are redacted.

    Args:
        err: The exception an LM call raised.
        lm: The LM that was called (for its model string and server), if known.
    """
    import asyncio

    from dspy.utils import exceptions as x

    provider = _provider(err, lm)
    model = getattr(lm, "model", None) or getattr(err, "model", None) or "the model"
    server = server_of(lm) if lm is not None else None
    where = redact_url(server) if server else provider
    address = "--api-base"
    servers = getattr(lm, "servers", None)
    if servers:  # a RouterLM: the request went to whichever server was free
        where, address = f"the LM servers ({', '.join(s.shown for s in servers)})", "--lm-server"
    status = getattr(err, "status", None)
    if isinstance(err, x.LMAuthError) or status in (401, 403):
        var = SERVER_KEY_ENV if server else " or ".join(key_variables(model))
        text = f"authentication error from {where}; check {var}"
    elif isinstance(err, x.LMBillingError):
        text = f"billing or quota error from {provider}; check the account's credit and limits"
    elif isinstance(err, x.LMRateLimitError):
        text = f"rate limited by {provider}; lower --concurrency or try again later"
    elif isinstance(err, x.ContextWindowExceededError):
        text = f"prompt longer than {model}'s context window; lower --hits or use a model with a longer context"
    elif isinstance(err, x.LMUnsupportedModelError) or status == 404:
        text = f"model {model!r} not found at {where}; check the model name"
    elif isinstance(err, (x.LMTimeoutError, asyncio.TimeoutError, TimeoutError)):
        text = f"no answer from {where} in time; check the server or raise --lm-timeout"
    elif isinstance(err, x.LMTransportError) and _CUT_REPLY.search(str(err)):
        text = (
            f"the reply from {where} was cut off (the connection closed before the whole body arrived); "
            f"check the server and any proxy in between, or try again"
        )
    elif isinstance(err, x.LMTransportError) or (
        isinstance(err, x.LMServerError) and "connection error" in str(err).lower()  # LiteLLM's Router says so
    ):
        text = f"could not reach {where}; check that the server is running and the address ({address}) is right"
    elif isinstance(err, x.AdapterParseError) and isinstance(dspy.settings.adapter, SchemaAdapter):
        text = (
            f"{model}'s replies did not parse into the expected fields even with the output schema (cut "
            f"at the token limit, or values the schema cannot rule out); raise --max-output-tokens or use "
            f"a larger model"
        )
    elif isinstance(err, x.AdapterParseError):
        text = f"{model}'s replies did not parse into the expected fields; try --structured schema or a larger model"
    elif isinstance(err, x.LMNotConfiguredError):
        text = "no LM configured; pass --lm, or in Python call dspy.configure(lm=...)"
    elif isinstance(err, x.LMServerError):
        text = f"server error from {where} ({status or 'no status'}); try again later"
    else:
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        text = f"{type(err).__name__} from {where}" + (f": {first}" if first else "")
    return redact(text)


def summarize_failures(causes: Iterable[str]) -> str | None:
    """The most frequent cause among failure explanations (the first of equals), or None when there are none."""
    ranked = Counter(causes).most_common(1)
    return ranked[0][0] if ranked else None
