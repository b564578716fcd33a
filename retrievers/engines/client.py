"""What every search engine client shares: one GET with a rate limit, retries, a timeout and a disk cache.

`EngineClient.get(path, params, parse)` sends one request and hands the body to `parse`:

- a process-wide rate limit per engine and server (`RateLimiter`): requests wait for their turn, and a
  429 pauses every request to that server, not only the one that got it;
- retries with exponential backoff (`backoff * 2**attempt`) on 429 (honouring `Retry-After`, in seconds or
  as an HTTP date, up to `DEFAULT_MAX_RETRY_AFTER_S`), on 5xx, on timeouts and on lost or refused connections;
  other 4xx answers fail at once;
- a bounded timeout per request;
- an on-disk cache of parsed-OK bodies (`ResponseCache`), keyed by engine, server, path and the
  parameters *without* the secret ones (API keys, contact e-mail), so a cached answer is found whatever
  key was used and no key is ever written to disk;
- every failure is an `EngineError` whose message is one line naming the engine and what went wrong
  (`openalex: connection refused at 127.0.0.1:9 (4 attempts)`), with no URL parameters, no headers and
  every secret value scrubbed from anything the server echoed.

httpx's `AsyncClient` sends the requests: it is already installed with dspy/litellm/openai, it is async
(a research run searches from asyncio tasks) and it has explicit timeouts.
The retry loop stays hand-written: with tenacity (installed with dspy) the loop's own retry lines (attempt
count, backoff, no wait after the last try) became as many lines of configuration, and carrying the reason and
`Retry-After` through it took an exception class and a wait function: 26 lines more in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import errno
import functools
import hashlib
import json
import logging
import os
import re
import socket
import sqlite3
import ssl
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

import diskcache
import httpx

logger = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

USER_AGENT = "dspy-deepresearch/0.1 (https://github.com/; scholarly search)"
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_S = 0.5
DEFAULT_MAX_RETRY_AFTER_S = 60.0
DEFAULT_CACHE_TTL_S = 7 * 24 * 3600.0
DEFAULT_CACHE_BYTES = 1 << 30  # hundreds of thousands of search answers
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def default_cache_dir() -> Path:
    """~/.cache/dspy-deepresearch/engines (the command line passes $DEEPRESEARCH_ENGINE_CACHE instead)."""
    return Path("~/.cache/dspy-deepresearch/engines").expanduser()


class EngineError(RuntimeError):
    """A search engine request that failed, in one line naming the engine.

    Attributes:
        engine: The engine's name (`openalex`, `semanticscholar`, `arxiv`, `pubmed`).
        reason: What went wrong, without the engine's name (`connection refused at host:port`).
        transient: True for failures of the network or the server (refused, DNS, timeout, 429, 5xx), where
            the same request may work later; False for a bad request or a malformed answer.
    """

    def __init__(self, engine: str, reason: str, *, transient: bool = False):
        super().__init__(f"{engine}: {reason}")
        self.engine, self.reason, self.transient = engine, reason, transient


class RateLimiter:
    """At most one request per `min_interval` seconds, shared by threads and event loops: the one limiter of
    search engines and LM providers (`deepresearch.programs.runtime.scheduler`).

    `reserve()` books the next free slot and says how long to wait for it, `acquire()` books it and waits;
    `pause(s)` pushes every later slot at least `s` seconds ahead (a 429's `Retry-After`).
    """

    def __init__(self, min_interval: float):
        self.min_interval = max(0.0, float(min_interval))
        self._next = 0.0
        self._lock = threading.Lock()

    def reserve(self) -> float:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.min_interval
            return start - now

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._next = max(self._next, time.monotonic() + seconds)


_LIMITERS: dict[tuple[str, str], RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def limiter_for(engine: str, base_url: str, min_interval: float) -> RateLimiter:
    """The process-wide limiter of one engine at one server (every client of it waits in the same line)."""
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get((engine, base_url))
        if limiter is None or limiter.min_interval != max(0.0, float(min_interval)):
            limiter = _LIMITERS[(engine, base_url)] = RateLimiter(min_interval)
        return limiter


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header asks to wait: delay-seconds (`"2"`, `"0.5"`) or an HTTP date; None if absent
    or unreadable.

    Example:
        >>> retry_after_seconds("3"), retry_after_seconds("soon")
        (3.0, None)
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def scrub(text: str, secrets: Collection[str]) -> str:
    """`text` with each secret value (and its URL-encoded form) replaced by `[REDACTED]`."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        for form in {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}:
            text = text.replace(form, "[REDACTED]")
    return text


def host_of(base_url: str) -> str:
    """`host:port` of a URL, without any user name or password."""
    parts = urllib.parse.urlsplit(base_url)
    host = parts.hostname or base_url
    return f"{host}:{parts.port}" if parts.port else host


def public_url(base_url: str) -> str:
    """The base URL without user name, password, query or fragment (for cache keys, traces and messages)."""
    parts = urllib.parse.urlsplit(base_url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


_CACHES: dict[Path, diskcache.Cache | None] = {}
_CACHES_LOCK = threading.Lock()


def _open_cache(folder: Path) -> diskcache.Cache | None:
    """The process's one open diskcache of `folder`, or None when it cannot be opened.

    Opened once, when an engine is built, and kept open: creating the database takes tens of milliseconds,
    and closing it (a checkpoint and an fsync) would land wherever the garbage collector runs.
    """
    with _CACHES_LOCK:
        if folder not in _CACHES:
            try:
                _CACHES[folder] = diskcache.Cache(str(folder), size_limit=DEFAULT_CACHE_BYTES, cull_limit=1)
            except (OSError, sqlite3.Error) as err:
                logger.warning("search answers not cached: %s cannot be opened (%s)", folder, type(err).__name__)
                _CACHES[folder] = None
        return _CACHES[folder]


class ResponseCache:
    """Response bodies on disk: one diskcache folder (SQLite) that every engine shares.

    An entry holds the engine, the public URL, the public parameters (never a secret), the time it was
    fetched and the body, as JSON text. Entries older than `ttl_s` seconds are treated as absent (None: kept
    for ever). Past `DEFAULT_CACHE_BYTES` bytes, each new answer drops the least recently stored one. A folder that
    cannot be opened (read-only, full) costs the cache, not the search.
    """

    def __init__(self, folder: str | os.PathLike[str] | None = None, ttl_s: float | None = DEFAULT_CACHE_TTL_S):
        self.folder = Path(folder).expanduser() if folder is not None else default_cache_dir()
        self.ttl_s = ttl_s
        self._cache = _open_cache(self.folder)

    @staticmethod
    def key(engine: str, url: str, params: Mapping[str, Any]) -> str:
        record = json.dumps([engine, url, sorted((str(k), str(v)) for k, v in params.items())], ensure_ascii=False)
        return hashlib.sha256(record.encode("utf-8")).hexdigest()

    def get(self, engine: str, url: str, params: Mapping[str, Any]) -> str | None:
        if self._cache is None:
            return None
        try:
            entry = json.loads(self._cache.get(self.key(engine, url, params)) or "null")
        except (OSError, ValueError, sqlite3.Error):
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("body"), str):
            return None
        if self.ttl_s is not None and time.time() - float(entry.get("fetched", 0)) > self.ttl_s:
            return None
        return entry["body"]

    def put(self, engine: str, url: str, params: Mapping[str, Any], body: str) -> None:
        if self._cache is None:
            return
        entry = {"engine": engine, "url": url, "params": dict(params), "fetched": time.time(), "body": body}
        try:
            self._cache.set(self.key(engine, url, params), json.dumps(entry, ensure_ascii=False))
        except (OSError, sqlite3.Error) as err:  # a read-only or full disk costs the cache, not the search
            logger.debug("%s: response not cached (%s)", engine, type(err).__name__)


@functools.cache  # built once: loading the CA bundle takes tens of milliseconds
def _ssl_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    with contextlib.suppress(ImportError):  # without certifi: the system's CA store only
        import certifi

        context.load_verify_locations(certifi.where())
    return context


def _causes(err: BaseException) -> list[BaseException]:
    """The error and the errors it was raised from (httpx wraps the socket's OSError)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def _transport_reason(err: httpx.TransportError, where: str, timeout_s: float) -> str:
    text = str(err) or type(err).__name__
    if isinstance(err, httpx.TimeoutException):
        return f"timed out after {timeout_s:g}s at {where}"
    chain = _causes(err)
    codes = {getattr(e, "errno", None) for e in chain}
    low = " ".join(str(e) for e in chain).lower()
    if any(isinstance(e, socket.gaierror) for e in chain) or any(
        s in low
        for s in (
            "name or service not known",
            "nodename nor servname",
            "name resolution",
            "getaddrinfo",
            "no address associated",
        )
    ):
        return f"DNS lookup failed for {where}"
    if errno.ECONNREFUSED in codes or "refused" in low:
        return f"connection refused at {where}"
    if codes & {errno.ENETUNREACH, errno.EHOSTUNREACH} or "unreachable" in low:
        return f"network unreachable for {where}"
    if errno.ECONNRESET in codes or "reset" in low:
        return f"connection reset by {where}"
    return f"{type(err).__name__}: {text.splitlines()[0][:160]} at {where}"


class EngineClient:
    """Sends one engine's GET requests under its rate limit, retries, timeout and cache.

    Args:
        engine: The engine's name, in every message.
        base_url: The server (a mirror, a proxy, a test server); paths are appended to it.
        min_interval: Seconds between two requests to this server (the engine's documented limit).
        headers: Extra request headers (an API key header; never logged, never cached).
        secret_params: Parameters sent but kept out of cache keys, logs and messages (`api_key`, `mailto`).
        cache: A `ResponseCache`, or None for no cache.
        timeout_s: Seconds before one request is abandoned.
        retries: Extra attempts after a 429, a 5xx, a timeout or a lost connection.
        backoff_s: The first wait before a retry; doubled after each attempt.
        sleep: The coroutine that waits (tests pass one that records the waits).
    """

    def __init__(
        self,
        engine: str,
        base_url: str,
        *,
        min_interval: float = 0.0,
        headers: Mapping[str, str] | None = None,
        secret_params: Mapping[str, str] | None = None,
        cache: ResponseCache | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff_s: float = DEFAULT_BACKOFF_S,
        sleep: Sleep | None = None,
    ):
        if retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ValueError(f"{engine}: retries and backoff must be >= 0 and the timeout > 0")
        self.engine = engine
        self.base_url = base_url.rstrip("/")
        self.public_base = public_url(self.base_url)
        self.headers = {"User-Agent": USER_AGENT, **dict(headers or {})}
        self.secret_params = {k: v for k, v in dict(secret_params or {}).items() if v}
        self.secrets = [
            *self.secret_params.values(),
            *(v for k, v in self.headers.items() if k.lower() != "user-agent"),
        ]
        self.cache = cache
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.limiter = limiter_for(engine, self.public_base, min_interval)
        self._sleep = sleep or asyncio.sleep

    def fail(self, reason: str, *, transient: bool = False) -> EngineError:
        return EngineError(self.engine, scrub(reason, self.secrets), transient=transient)

    async def get(self, path: str, params: Mapping[str, Any], parse: Callable[[str], T]) -> T:
        """The parsed body of `GET base_url + path?params`, from the cache when it holds it.

        Raises:
            EngineError: after the last retry, for a 4xx other than 429, or when `parse` raises (a body
                that does not parse is not cached).
        """
        public = {k: v for k, v in params.items() if v is not None}
        url = self.base_url + path
        cache_url = self.public_base + path
        if self.cache is not None:
            body = self.cache.get(self.engine, cache_url, public)
            if body is not None:
                try:
                    return parse(body)
                except Exception:  # a corrupt entry: fetch again
                    logger.debug("%s: unreadable cache entry for %s; fetching again", self.engine, path)
        sent = {**public, **self.secret_params}
        where = host_of(self.base_url)
        reason, transient = "no attempt made", True
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s),
            verify=_ssl_context(),
            headers=self.headers,
            follow_redirects=True,
            trust_env=True,
        ) as http:
            for attempt in range(self.retries + 1):
                wait = self.limiter.reserve()
                if wait > 0:
                    await self._sleep(wait)
                logger.debug("%s: GET %s %s (attempt %d)", self.engine, cache_url, public, attempt + 1)
                retry_in = self.backoff_s * 2**attempt
                try:
                    response = await http.get(url, params=sent)
                except httpx.TransportError as err:
                    reason = _transport_reason(err, where, self.timeout_s)
                else:
                    status = response.status_code
                    if status == 200:
                        body = response.text
                        try:
                            parsed = parse(body)
                        except Exception as err:
                            raise self.fail(
                                f"malformed response from {where} ({type(err).__name__}: "
                                f"{str(err).splitlines()[0][:160] if str(err) else 'unreadable'})"
                            ) from None
                        if self.cache is not None:
                            self.cache.put(self.engine, cache_url, public, body)
                        return parsed
                    if status not in RETRY_STATUSES:
                        raise self.fail(f"HTTP {status} from {where}{_detail(response)}")
                    reason = f"HTTP {status} from {where}"
                    if status == 429:
                        asked = retry_after_seconds(response.headers.get("Retry-After"))
                        if asked is not None:
                            if asked > DEFAULT_MAX_RETRY_AFTER_S:  # the longest wait honoured
                                raise self.fail(
                                    f"rate limited by {where}: it asks to wait {asked:.0f}s, more than "
                                    f"{DEFAULT_MAX_RETRY_AFTER_S:.0f}s",
                                    transient=True,
                                )
                            retry_in = asked
                        reason = f"rate limited by {where} (HTTP 429)"
                        self.limiter.pause(retry_in)  # every request to this server waits, not only this one
                if attempt < self.retries:
                    logger.info("%s: %s; retrying in %.2fs", self.engine, reason, retry_in)
                    await self._sleep(retry_in)
        attempts = self.retries + 1
        raise self.fail(f"{reason} ({attempts} attempt{'s' if attempts > 1 else ''})", transient=transient)


def _detail(response: httpx.Response) -> str:
    """A short reason from an error body (a JSON `message`/`error` field, else its first line)."""
    text = response.text.strip()
    if not text:
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("message", "error", "detail", "ERROR"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return f": {value.strip().splitlines()[0][:200]}"
    if text.startswith("<"):  # XML or HTML: an Atom error's <summary>, NCBI's <ERROR>, else the text content
        found = next(
            (m for tag in ("summary", "ERROR", "title") if (m := re.search(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL))),
            None,
        )
        line = found.group(1) if found else re.sub(r"<[^>]+>", " ", text)
    else:
        line = text.splitlines()[0]
    line = " ".join(line.split())
    return f": {line[:200]}" if line else ""
