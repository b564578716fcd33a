"""Many LM servers behind one model name, through LiteLLM's Router.

`router_lm(model, servers)` returns a `dspy.LM` whose requests go to one of several OpenAI-compatible
servers (vLLM, llama-server, Ollama, a hosted endpoint): LiteLLM's Router spreads them over the servers,
holds each server to its own limits (`max_parallel` requests in flight, `rpm` requests a minute), and when
a server fails (refused connection, timeout, 5xx) sends the request to another one and cools the failed
server down. DSPy's cache, retries, history and usage work as for any LM: the Router sits behind DSPy's
engine contract (`complete(Request) -> Response`), reusing DSPy's own LiteLLM request conversion.

On the command line each server is one `--lm-server` (repeatable), or a list in deepresearch.toml:

    [run]
    lm = "openai/qwen2.5-7b"
    lm_server = ["http://gpu1:8000/v1 max_parallel=8", "http://gpu2:8000/v1 max_parallel=8 rpm=600"]

A server's key is the value of the environment variable its `key_env=` names (default
DEEPRESEARCH_API_KEY; the command line reads it and passes `keys`), never written in the file; URLs are shown with credentials removed, and no key reaches a log, a trace or
an error message.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dspy

from deepresearch.programs.lm.models import LMConfigError, check_lm, check_temperature
from deepresearch.programs.lm.secrets import basic_auth, redact, redact_url, strip_url_credentials

SERVER_OPTIONS = ("max_parallel", "rpm", "weight", "key_env")
DEFAULT_KEY_ENV = "DEEPRESEARCH_API_KEY"
_GROUPS = itertools.count(1)


class RouterConfigError(LMConfigError):
    """A server list that cannot be used; one line naming the entry and the fix."""


@dataclass(frozen=True)
class Server:
    """One OpenAI-compatible endpoint behind the router.

    Attributes:
        url: Base URL (http://host:port/v1).
        max_parallel: Requests in flight at once on this server (None: no limit).
        rpm: Requests a minute this server takes (None: no limit).
        weight: Share of the traffic relative to the other servers (default 1).
        key_env: The environment variable holding this server's key (default DEEPRESEARCH_API_KEY).
    """

    url: str
    max_parallel: int | None = None
    rpm: int | None = None
    weight: int = 1
    key_env: str = DEFAULT_KEY_ENV

    def __post_init__(self):
        if not self.url.startswith(("http://", "https://")):
            raise RouterConfigError(f"LM server {redact_url(self.url)!r}: the URL must start with http:// or https://")
        for name in ("max_parallel", "rpm", "weight"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise RouterConfigError(
                    f"LM server {redact_url(self.url)}: {name} must be a whole number >= 1, got {value!r}"
                )

    @property
    def shown(self) -> str:
        return _shown(self.url)


def _shown(url: str | None) -> str:
    """A server URL as logs and the trace show it: without the credentials it may carry ("?" for none)."""
    return redact_url(strip_url_credentials(url)[0].rstrip("/")) if url else "?"


def parse_server(spec: str) -> Server:
    """A server from `URL [max_parallel=N] [rpm=N] [weight=N] [key_env=NAME]` (spaces or commas between)."""
    parts = spec.replace(",", " ").split()
    if not parts:
        raise RouterConfigError("empty --lm-server entry; give a URL such as http://127.0.0.1:8080/v1")
    url = parts[0]
    options: dict[str, Any] = {}
    for part in parts[1:]:
        name, eq, value = part.partition("=")
        if not eq or name not in SERVER_OPTIONS:
            raise RouterConfigError(
                f"--lm-server {redact_url(url)}: unknown setting {redact(part)!r}; "
                f"use {', '.join(o + '=' for o in SERVER_OPTIONS)}"
            )
        if name == "key_env":
            options[name] = value
            continue
        try:
            options[name] = int(value)
        except ValueError:
            raise RouterConfigError(
                f"--lm-server {redact_url(url)}: {name} must be a whole number, got {value!r}"
            ) from None
    return Server(url, **options)


class RoutingLog:
    """What the router did, for the trace: requests answered per server and every failover."""

    def __init__(self, servers: list[Server]):
        self.servers = servers
        self.answered = {s.shown: 0 for s in servers}
        self.failovers: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def answer(self, api_base: str | None) -> None:
        with self._lock:
            key = _shown(api_base)
            self.answered[key] = self.answered.get(key, 0) + 1

    def failure(self, api_base: str | None, error: BaseException | str) -> None:
        if isinstance(error, BaseException):  # its type and the first line of its message, which may be empty
            error = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
        with self._lock:
            self.failovers.append({"server": _shown(api_base), "error": redact(error), "at": round(time.time(), 3)})

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "servers": [s.shown for s in self.servers],
                "answered": dict(self.answered),
                "failovers": list(self.failovers),
            }


_LOGS: dict[str, RoutingLog] = {}  # model group -> its log, read by the one LiteLLM callback below
_callback_installed = False
_install_lock = threading.Lock()


def _install_callback() -> None:
    """One LiteLLM logger for every router: a failed deployment attempt is recorded in its group's log."""
    global _callback_installed
    with _install_lock:
        if _callback_installed:
            return
        import litellm
        from litellm.integrations.custom_logger import CustomLogger

        def record(kwargs: dict, error: Any) -> None:
            params = kwargs.get("litellm_params") or {}
            metadata = params.get("metadata") or kwargs.get("metadata") or {}
            log = _LOGS.get(metadata.get("model_group") or "")
            if log is not None and not _is_full(error):  # a server at its max_parallel is busy, not failed
                log.failure(params.get("api_base"), error if error is not None else "failed")

        class FailoverLogger(CustomLogger):
            def log_failure_event(self, kwargs, response_obj, start_time, end_time):
                record(kwargs, kwargs.get("exception"))

            async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
                record(kwargs, kwargs.get("exception"))

        litellm.callbacks.append(FailoverLogger())
        _callback_installed = True


def make_router(
    model: str,
    servers: list[Server],
    *,
    timeout_s: float | None = None,
    num_retries: int = 2,
    cooldown_s: float = 30.0,
    routing: str = "simple-shuffle",
    keys: Mapping[str, str] | None = None,
):
    """A `litellm.Router` with one deployment of `model` per server, under a model group of its own.

    Returns (router, group name). `num_retries` is how many other attempts one request gets (each on a
    server that has not just failed); a failed server rests `cooldown_s` seconds.
    """
    if not servers:
        raise RouterConfigError("no LM servers given; pass --lm-server URL (repeatable)")
    if len({s.url for s in servers}) != len(servers):
        raise RouterConfigError("the same LM server is listed twice; list each URL once")
    from litellm import Router

    group = f"deepresearch-{os.getpid()}-{next(_GROUPS)}"
    deployments = []
    for server in servers:
        # `http://user:pass@host` goes as an HTTP client expects it: the host in the URL, Basic auth in a header
        api_base, credentials = strip_url_credentials(server.url)
        params: dict[str, Any] = {
            "model": model,
            "api_base": api_base,
            "api_key": (keys or {}).get(server.key_env) or "local",
            "weight": server.weight,
        }
        if credentials is not None:  # registered as secrets by strip_url_credentials, the header's form too
            params["extra_headers"] = {"Authorization": basic_auth(credentials)}
        optional = {"max_parallel_requests": server.max_parallel, "rpm": server.rpm, "timeout": timeout_s}
        params.update({k: v for k, v in optional.items() if v is not None})
        deployments.append({"model_name": group, "litellm_params": params})
    router = Router(
        model_list=deployments,
        routing_strategy=routing if len(servers) > 1 else "simple-shuffle",
        num_retries=num_retries,
        retry_after=0,
        allowed_fails=0,
        cooldown_time=cooldown_s,
        timeout=timeout_s,
    )
    return router, group


FULL_WAIT_S = 0.05  # how long a request waits before asking again for a server below its max_parallel


def _is_full(error: Any) -> bool:
    """The Router refused because every server holds its max_parallel requests (LiteLLM rejects, not queues)."""
    return "max_parallel_requests" in str(error or "")


def _engines():
    from dspy.clients.engines.litellm_engine import _LiteLLMConfig
    from dspy.clients.engines.litellm_errors import litellm_errors

    class RouterEngine(_LiteLLMConfig):
        """DSPy's LiteLLM engine, with the Router in place of `litellm.completion`."""

        def __init__(self, router, group: str, log: RoutingLog, wait_s: float | None):
            super().__init__(model_type="chat")
            self.router, self.group, self.log, self.wait_s = router, group, log, wait_s

        def _waited_too_long(self, error: Exception, started: float) -> bool:
            """Whether to give up on a refusal: any error but `every server full`, or a full wait past wait_s."""
            return not _is_full(error) or (self.wait_s is not None and time.monotonic() - started > self.wait_s)

        def _data(self, request) -> dict[str, Any]:
            data = self._arguments(request)
            data.pop("num_retries", None)  # the Router's own retries move a request to another server
            data.pop("cache", None)  # DSPy's cache sits above the engine
            data["model"] = self.group
            return data

        def _answered(self, raw) -> None:
            hidden = getattr(raw, "_hidden_params", None) or {}
            self.log.answer(hidden.get("api_base"))

        def complete(self, request):
            data, started = self._data(request), time.monotonic()
            while True:  # every server at its max_parallel: wait for a free slot, as a queue would
                try:
                    with litellm_errors(model=request.model):
                        raw = self.router.completion(**data)
                    break
                except Exception as err:
                    if self._waited_too_long(err, started):
                        raise
                    time.sleep(FULL_WAIT_S)
            self._answered(raw)
            return self._response(raw, request)

        def stream(self, request):  # pragma: no cover - the research program does not stream
            raise NotImplementedError("streaming through the LM router is not supported")

        def close(self):
            self._closed = True

    class AsyncRouterEngine(RouterEngine):
        async def complete(self, request):
            import asyncio

            data, started = self._data(request), time.monotonic()
            while True:
                try:
                    with litellm_errors(model=request.model):
                        raw = await self.router.acompletion(**data)
                    break
                except Exception as err:
                    if self._waited_too_long(err, started):
                        raise
                    await asyncio.sleep(FULL_WAIT_S)
            self._answered(raw)
            return self._response(raw, request)

        async def aclose(self):
            self._closed = True

    return RouterEngine, AsyncRouterEngine


class RouterLM(dspy.LM):
    """A `dspy.LM` answered by several servers through LiteLLM's Router; `routing()` is what it did."""

    servers: list[Server]
    log: RoutingLog

    def routing(self) -> dict[str, Any]:
        return self.log.to_dict()


def router_lm(
    model: str,
    servers: list[Server | str],
    *,
    timeout_s: float | None = 120.0,
    failovers: int | None = None,
    cooldown_s: float = 30.0,
    routing: str = "simple-shuffle",
    keys: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> RouterLM:
    """A `dspy.LM` for `model` served by `servers` (Server objects or `--lm-server` strings).

    Args:
        model: The model string the servers answer to (`openai/NAME`, `hosted_vllm/NAME`).
        servers: The endpoints; each with its own limits (see `Server`).
        timeout_s: Seconds one request may take on one server before another is tried.
        failovers: Other servers one request may go to after a failure (the Router's retries); default every
            other server once. DSPy's own `num_retries` (in `kwargs`, which a run sets to 0 because its scheduler
            retries and counts each request) is a different thing and never turns failover off.
        cooldown_s: Seconds a server that failed is left out.
        routing: LiteLLM's routing strategy: simple-shuffle (default; weighted by `weight`), least-busy, usage-based-routing-v2,
            latency-based-routing.
        keys: Each server's key by the variable name its `key_env` gives (a server without one sends a
            placeholder); the command line passes the variables' values.
        kwargs: Passed to `dspy.LM` (temperature, max_tokens, cache, num_retries of DSPy itself...).
    """
    check_temperature(kwargs.get("temperature"))
    check_lm(model, api_base="router" if servers else None)  # a server list needs no provider key
    parsed = [s if isinstance(s, Server) else parse_server(s) for s in servers]
    failovers = len(parsed) - 1 if failovers is None else failovers
    router, group = make_router(
        model, parsed, timeout_s=timeout_s, num_retries=failovers, cooldown_s=cooldown_s, routing=routing, keys=keys
    )
    log = RoutingLog(parsed)
    _LOGS[group] = log
    _install_callback()
    engine_cls, async_cls = _engines()
    wait_s = None if timeout_s is None else 10 * timeout_s  # a full server frees its slot within a request's time
    lm = RouterLM(
        model,
        engine=engine_cls(router, group, log, wait_s),
        async_engine=async_cls(router, group, log, wait_s),
        **kwargs,
    )
    lm.servers, lm.log = parsed, log
    return lm
